"""Kafka's vocabulary and pykbatch's rules as the C core defines them (csrc/kb_kafka_errors.def,
csrc/kb_rules.def, csrc/kb_kafka.h, csrc/kb_rules.h), for the Python modules that name them.

A module of its own, with no Python imports, so that ``pykbatch.errors`` and ``pykbatch.rules``
can read it while ``pykbatch._native`` (which imports them) is still loading.
"""
from libc.stdint cimport int16_t, int32_t, int64_t, uint16_t
from libc.stdlib cimport free, malloc


cdef extern from "kb_kafka.h":
    ctypedef struct kb_kafka_error:
        const char *name
        int16_t code
        const char *error_class
        const char *actions
        const char *exception
    const kb_kafka_error kb_kafka_errors[]
    const size_t kb_kafka_error_count
    int KB_CODEC_COUNT
    const char *const kb_codec_names[]
    const char *const kb_timestamp_type_names[3]
    int KB_CONTROL_COUNT
    const char *const kb_control_type_names[]
    int kb_timestamp_type(int magic, int attributes)


cdef extern from "kb_rules.h":
    ctypedef struct kb_rule_info:
        const char *id
        int16_t code
        const char *stage
        unsigned flags
        const char *template_text
        const char *detail
        const char *reader_template
    int KB_RULE_COUNT
    int KB_FIELD_COUNT
    unsigned KB_KAFKA
    unsigned KB_PER_RECORD
    unsigned KB_BETWEEN
    const kb_rule_info kb_rule_table[]
    const char *const kb_field_names[]


cdef extern from "kb_render.h":
    ctypedef enum kb_text:
        KB_TEXT_MESSAGE
        KB_TEXT_DETAIL
        KB_TEXT_READER
    long kb_render(int rule, kb_text which, const int64_t *args, const char *tp, char *out, size_t cap)


cdef extern from "kb_verdict.h":
    ctypedef struct kb_culprit:
        int32_t entry
        int32_t record_index
        int16_t code
        uint16_t rule
    ctypedef struct kb_verdict:
        int16_t code
        int32_t verdict
        int batch_level
        int request_message
        size_t records
    int KB_STAGE_COUNT
    const char *const kb_stage_names[]
    void kb_verdict_of(const kb_culprit *c, size_t n, int origin, int produce_version, kb_verdict *v,
                       int32_t *record_culprits)
    long kb_render_record_errors(int16_t code, size_t records, const int32_t *indexes, const char *const *messages,
                                 char *out, size_t cap)


def stages():
    """The stages of a partition leader's checks, in the order it runs them."""
    return tuple(kb_stage_names[i].decode() for i in range(KB_STAGE_COUNT))


def verdict(culprits, bint client, int produce_version):
    """KIP-467's verdict on ``culprits`` ((rule number, entry, record index or -1, code) each, in
    buffer order): (error code, the index of the culprit the answer comes from or -1, batch-level,
    whether error_message is that culprit's message, the indexes of each error record's first
    culprit)."""
    cdef size_t n = len(culprits), i
    cdef kb_verdict v
    cdef kb_culprit *c = <kb_culprit *> malloc(max(n, 1) * sizeof(kb_culprit))
    cdef int32_t *records = <int32_t *> malloc(max(n, 1) * sizeof(int32_t))
    try:
        if c == NULL or records == NULL:
            raise MemoryError()
        for i in range(n):
            c[i].rule, c[i].entry, c[i].record_index, c[i].code = culprits[i]
        kb_verdict_of(c, n, 0 if client else 1, produce_version, &v, records)
        return (v.code, v.verdict, bool(v.batch_level), bool(v.request_message),
                [records[i] for i in range(v.records)] if not v.batch_level else [])
    finally:
        free(c)
        free(records)


def record_errors_message(int code, records):
    """KIP-467's error_message of a batch refused record by record: ``records`` is its
    (batch index, message) list (all of them; the first three are shown)."""
    cdef int32_t indexes[3]
    cdef const char *messages[3]
    encoded = [m.encode() for _, m in records[:3]]
    for i in range(len(encoded)):
        indexes[i] = records[i][0]
        messages[i] = encoded[i]
    cdef long n = kb_render_record_errors(code, len(records), indexes, messages, NULL, 0)  # its length
    text = bytearray(n + 1)
    kb_render_record_errors(code, len(records), indexes, messages, text, n + 1)
    return text[:n].decode("utf-8", "replace")


TEXT_MESSAGE, TEXT_DETAIL, TEXT_READER = KB_TEXT_MESSAGE, KB_TEXT_DETAIL, KB_TEXT_READER


def render_text(int rule, args, str tp, int which):
    """The core's text (``TEXT_MESSAGE`` / ``TEXT_DETAIL`` / ``TEXT_READER``) of rule number
    ``rule`` for a fault's values ``args`` (up to 8; the rest 0) in ``tp``; None when the
    template names fields only Python fills."""
    cdef int64_t a[8]
    cdef int i
    if len(args) > 8:
        raise ValueError(f"a fault has 8 values at most, not {len(args)}")
    for i in range(8):
        a[i] = args[i] if i < len(args) else 0
    encoded = tp.encode()
    cdef char small[512]
    cdef long n = kb_render(rule, <kb_text> which, a, encoded, small, sizeof(small))
    if n < 0:
        return None
    if n < <long> sizeof(small):
        return small[:n].decode("utf-8", "replace")
    cdef char *big = <char *> malloc(n + 1)
    if big == NULL:
        raise MemoryError()
    try:
        kb_render(rule, <kb_text> which, a, encoded, big, n + 1)
        return big[:n].decode("utf-8", "replace")
    finally:
        free(big)


def kafka_errors():
    """(name, code, error class, Kafka's exception class, actions) of every error code pykbatch reports."""
    out = []
    for i in range(kb_kafka_error_count):
        e = kb_kafka_errors[i]
        out.append((e.name.decode(), e.code, e.error_class.decode(), e.exception.decode(), e.actions.decode()))
    return tuple(out)


def rules():
    """(id, code, stage, kafka, per_record, template, detail, reader template, between) of every
    rule, in the core's enum order (a rule's index is its value in the C core)."""
    out = []
    for i in range(KB_RULE_COUNT):
        r = kb_rule_table[i]
        out.append((r.id.decode(), r.code, r.stage.decode(), bool(r.flags & KB_KAFKA),
                    bool(r.flags & KB_PER_RECORD), r.template_text.decode(), r.detail.decode(),
                    r.reader_template.decode(), bool(r.flags & KB_BETWEEN)))
    return tuple(out)


def codec_names():
    """Kafka's codec names by id (``attributes & 7``; ids past the end are unknown codecs)."""
    return tuple(kb_codec_names[i].decode() for i in range(KB_CODEC_COUNT))


def timestamp_type_names():
    """Kafka's timestamp type names: by attribute bit 3, then the name for magic 0 (none)."""
    return tuple(kb_timestamp_type_names[i].decode() for i in range(3))


def control_type_names():
    """Kafka's control record types by id (ControlRecordType)."""
    return {i: kb_control_type_names[i].decode() for i in range(KB_CONTROL_COUNT)}


def record_fields():
    """The names of a v2 record's fields, by ``kb_field`` value (structural faults name one)."""
    return tuple(kb_field_names[i].decode() for i in range(KB_FIELD_COUNT))


CODEC_NAMES = codec_names()
CODEC_IDS = {name: codec for codec, name in enumerate(CODEC_NAMES)}
_ALL_TIMESTAMP_TYPES = timestamp_type_names()
TIMESTAMP_TYPES = _ALL_TIMESTAMP_TYPES[:2]
CREATE_TIME, LOG_APPEND_TIME = TIMESTAMP_TYPES
NO_TIMESTAMP_TYPE = _ALL_TIMESTAMP_TYPES[2]
CONTROL_TYPE_NAMES = control_type_names()
CONTROL_TYPE_IDS = {name: i for i, name in CONTROL_TYPE_NAMES.items()}


def timestamp_type_name(int magic, int attributes) -> str:
    """The timestamp type of a v1 message or v2 batch by its attributes; magic 0 has none."""
    return _ALL_TIMESTAMP_TYPES[kb_timestamp_type(magic, attributes)]


def codec_name(int codec) -> str:
    """A codec's name; ``unknown(N)`` for ids Kafka does not define."""
    return CODEC_NAMES[codec] if 0 <= codec < KB_CODEC_COUNT else f"unknown({codec})"
