# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, embedsignature=True
"""Python face of the C core: batches, records, validation, Arrow columns, encoding.

C results are turned into Python objects here and nowhere else; faults
become exceptions only through ``_raise_fault``.
"""
cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t, uintptr_t, INT32_MAX, INT64_MIN
from libc.stdlib cimport free, malloc, calloc
from libc.string cimport memcpy, memset

from pykbatch._core cimport *

import time

from pykbatch import codecs as _codecs
from pykbatch import errors as _errors
from pykbatch._result import Culprit, TruncatedTail, ValidationConfig, ValidationResult
from pykbatch._rules import RULES, render as _render

kb_crc32c_init()

if len(RULES) != KB_RULE_COUNT:
    raise ImportError(f"pykbatch: rule table has {len(RULES)} rules, the native core {KB_RULE_COUNT}")

# Buffers at least this large are processed with the GIL released.
DEF NOGIL_THRESHOLD = 16384

COMPRESSION_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")
_COMPRESSION_IDS = {name: i for i, name in enumerate(COMPRESSION_NAMES)}
_EMPTY_HEADERS = ()
_DEFAULT_CONFIG = ValidationConfig()
_RULE_INDEX = {rule.id: i for i, rule in enumerate(RULES)}
_CODEC_RULES = frozenset(("batch.decompression_failed", "batch.decompressed_too_large"))

cdef class _Decompressor


def native_info():
    """Which native paths are live: ``{"crc32c": "sse4.2+pclmul" | "armv8-crc" | "software", ...}``.

    ``PYKBATCH_CRC32C_SW=1`` in the environment (read at import) forces the portable CRC32C.
    """
    return {
        "crc32c": kb_crc32c_impl().decode(),
        "crc32": kb_crc32_impl().decode(),
        "magics": (0, 1, 2),
        "codecs": COMPRESSION_NAMES,
        "rules": len(RULES),
    }


cdef class _View:
    """A readable, C-contiguous byte view of any buffer (bytes, bytearray,
    memoryview, mmap) that keeps its owner alive."""
    cdef readonly object obj
    cdef const uint8_t[::1] mv
    cdef const uint8_t *ptr
    cdef readonly Py_ssize_t length

    def __cinit__(self, obj):
        cdef memoryview m = obj if isinstance(obj, memoryview) else memoryview(obj)
        if m.ndim != 1 or m.format != "B":
            m = m.cast("B")
        self.obj = obj
        self.length = m.nbytes
        if self.length:
            self.mv = m
            self.ptr = &self.mv[0]
        else:
            self.ptr = <const uint8_t *> b""


cdef inline _View _view(object buf):
    return buf if isinstance(buf, _View) else _View(buf)


def crc32c(data, uint32_t value=0):
    """CRC-32C of ``data`` continuing from ``value`` (like ``crc32c.crc32c``)."""
    cdef _View v = _view(data)
    cdef uint32_t out
    if v.length >= NOGIL_THRESHOLD:
        with nogil:
            out = kb_crc32c(value, v.ptr, v.length)
    else:
        out = kb_crc32c(value, v.ptr, v.length)
    return out


def crc32(data, uint32_t value=0):
    """CRC-32 (IEEE, the checksum of magic 0/1 messages) of ``data`` from ``value``, like zlib.crc32."""
    cdef _View v = _view(data)
    cdef uint32_t out
    if v.length >= NOGIL_THRESHOLD:
        with nogil:
            out = kb_crc32(value, v.ptr, v.length)
    else:
        out = kb_crc32(value, v.ptr, v.length)
    return out


def _crc32_sw(data, uint32_t value=0):
    """The portable CRC-32, whatever path is live (for tests)."""
    cdef _View v = _view(data)
    return kb_crc32_sw(value, v.ptr, v.length)


def _crc32c_sw(data, uint32_t value=0):
    """The portable CRC-32C, whatever path is live (for tests)."""
    cdef _View v = _view(data)
    return kb_crc32c_sw(value, v.ptr, v.length)


cdef _raise_fault(const kb_fault *f, Py_ssize_t base, Py_ssize_t payload=-1, str tp="t-0"):
    """The one place a C fault becomes an exception.  `base` is added to the fault's position;
    a fault inside decompressed records (payload >= 0) is placed at the compressed payload,
    with its position in the decompressed records in the message."""
    rule = RULES[f.rule]
    message, detail = _render(rule, (f.args[0], f.args[1], f.args[2]), tp)
    if detail:
        message = f"{message} ({detail})"
    offset = <Py_ssize_t> f.pos + base
    if payload >= 0:
        message = f"{message} (at byte {f.pos} of the decompressed records)"
        offset = payload
    raise _errors.error_for(kb_rule_code(f.rule), message, offset, rule.id)


cdef class Record:
    """One record.  ``headers`` is a tuple of ``(str, bytes | None)`` (always empty for magic 0/1);
    ``crc`` and ``is_valid`` are the message CRC-32 and its check for magic 0/1, None for v2;
    ``position`` is the record's byte position in the buffer (for a compressed batch: in its
    decompressed records)."""
    cdef readonly int64_t offset
    cdef readonly int64_t timestamp
    cdef readonly object key
    cdef readonly object value
    cdef readonly tuple headers
    cdef readonly int32_t sequence
    cdef readonly int32_t offset_delta
    cdef readonly int64_t timestamp_delta
    cdef readonly int8_t attributes
    cdef readonly Py_ssize_t position
    cdef readonly object crc
    cdef readonly object is_valid

    def __repr__(self):
        return (f"Record(offset={self.offset}, timestamp={self.timestamp}, key={self.key!r}, "
                f"value={self.value!r}, headers={self.headers!r})")

    def __eq__(self, other):
        if not isinstance(other, Record):
            return NotImplemented
        return self._key() == (<Record> other)._key()

    cdef tuple _key(self):
        return (self.offset, self.timestamp, self.key, self.value, self.headers, self.sequence,
                self.offset_delta, self.timestamp_delta, self.attributes)

    def __hash__(self):
        return hash(self._key())


cdef inline object _bytes_or_none(const uint8_t *base, size_t pos, int32_t n):
    if n < 0:
        return None
    return PyBytes_FromStringAndSize(<const char *> base + pos, n)


cdef tuple _headers(const uint8_t *buf, const kb_record *r):
    if r.header_count == 0:
        return _EMPTY_HEADERS
    cdef list out = []
    cdef size_t p = r.headers, kp, vp
    cdef int32_t kl, vl
    for _ in range(r.header_count):
        p = kb_v2_read_header_kv(buf, p, r.end, &kp, &kl, &vp, &vl)
        out.append((PyUnicode_DecodeUTF8(<const char *> buf + kp, kl, "replace"),
                    _bytes_or_none(buf, vp, vl)))
    return tuple(out)


cdef inline int32_t _sequence(int32_t base, int32_t delta):
    return kb_increment_sequence(base, delta)


cdef class Batch:
    """A v2 record batch: Kafka's header fields in snake_case, ``position``
    (byte offset in the buffer), ``raw`` (the entry's bytes, zero-copy) and
    lazy iteration over its records."""
    cdef _View _v
    cdef kb_v2_header h
    cdef readonly Py_ssize_t position
    cdef readonly Py_ssize_t size
    cdef readonly int entry
    cdef _Decompressor _dec   # shared by the batches of one reader
    cdef _View _rec           # where the records are: the input, or the decompressed payload
    cdef size_t _rstart
    cdef size_t _rlimit
    cdef Py_ssize_t _payload  # position of the compressed payload, -1 when uncompressed

    cdef int _load(self) except -1:
        """Makes the records readable, decompressing the payload once."""
        if self._rec is not None:
            return 0
        _check_records_readable(&self.h, self.position)
        cdef int codec = self.h.attributes & KB_ATTR_CODEC_MASK
        if codec == 0:
            self._rec, self._rstart, self._rlimit = self._v, self.position + KB_V2_HEADER_SIZE, self.position + self.size
            self._payload = -1
            return 0
        if self._dec is None:
            self._dec = _Decompressor(self._v, _codecs.DEFAULT_MAX_DECOMPRESSED)
        data = self._dec.copy(codec, self.h.magic, self.position + KB_V2_HEADER_SIZE, self.size - KB_V2_HEADER_SIZE)
        self._rec, self._rstart, self._rlimit = _View(data), 0, len(data)
        self._payload = self.position + KB_V2_HEADER_SIZE
        return 0

    def __repr__(self):
        return (f"<Batch entry={self.entry} position={self.position} base_offset={self.h.base_offset} "
                f"count={self.h.record_count} compression={self.compression}>")

    @property
    def base_offset(self): return self.h.base_offset
    @property
    def length(self): return self.h.length
    @property
    def partition_leader_epoch(self): return self.h.partition_leader_epoch
    @property
    def magic(self): return self.h.magic
    @property
    def crc(self): return self.h.crc
    @property
    def attributes(self): return self.h.attributes
    @property
    def last_offset_delta(self): return self.h.last_offset_delta
    @property
    def base_timestamp(self): return self.h.base_timestamp
    @property
    def max_timestamp(self): return self.h.max_timestamp
    @property
    def producer_id(self): return self.h.producer_id
    @property
    def producer_epoch(self): return self.h.producer_epoch
    @property
    def base_sequence(self): return self.h.base_sequence
    @property
    def record_count(self): return self.h.record_count
    @property
    def compression(self):
        cdef int codec = self.h.attributes & KB_ATTR_CODEC_MASK
        return COMPRESSION_NAMES[codec] if codec < 5 else f"unknown({codec})"
    @property
    def timestamp_type(self):
        return "LogAppendTime" if self.h.attributes & KB_ATTR_LOG_APPEND_TIME else "CreateTime"
    @property
    def is_transactional(self): return bool(self.h.attributes & KB_ATTR_TRANSACTIONAL)
    @property
    def is_control(self): return bool(self.h.attributes & KB_ATTR_CONTROL)
    @property
    def control(self):
        """For a control batch, its control record parsed (``pykbatch.control.ControlRecord``:
        ``type``, ``type_name`` such as COMMIT / ABORT, ``coordinator_epoch`` of a transaction
        marker); None for a data batch or an empty control batch."""
        if not self.h.attributes & KB_ATTR_CONTROL:
            return None
        for r in self:
            from pykbatch.control import parse_control
            return parse_control(r.key, r.value)
        return None
    @property
    def control_type(self):
        """The control record type name (COMMIT, ABORT, LEADER_CHANGE, ...) or None."""
        ctl = self.control
        return None if ctl is None else ctl.type_name
    @property
    def has_delete_horizon(self): return bool(self.h.attributes & KB_ATTR_DELETE_HORIZON)
    @property
    def delete_horizon_ms(self):
        """The cleaner's delete horizon (baseTimestamp when attribute bit 6 is set), else None."""
        return self.h.base_timestamp if self.h.attributes & KB_ATTR_DELETE_HORIZON else None
    @property
    def last_offset(self): return kb_wrap_add64(self.h.base_offset, self.h.last_offset_delta)
    @property
    def next_offset(self): return kb_wrap_add64(self.h.base_offset, <int64_t> self.h.last_offset_delta + 1)
    @property
    def last_sequence(self):
        return _sequence(self.h.base_sequence, self.h.last_offset_delta)
    @property
    def raw(self):
        """The whole entry, a zero-copy memoryview of the input."""
        return memoryview(self._v.mv)[self.position:self.position + self.size] if self.size else b""
    @property
    def is_valid(self):
        """True when the stored CRC-32C matches the batch's bytes."""
        return kb_v2_compute_crc(self._v.ptr + self.position, self.size) == self.h.crc

    def __len__(self):
        return max(self.h.record_count, 0)

    def __iter__(self):
        return _Records(self)

    def tuples(self):
        """The records as plain ``(offset, timestamp, key, value, headers)`` tuples: the
        fastest way to touch every record from Python (no attribute lookups)."""
        return _Tuples(self)

    def records(self):
        """All records as a list."""
        return list(self)


cdef class _RecordIterator:
    """Walks a batch's records; subclasses decide what each record becomes."""
    cdef Batch b
    cdef size_t pos
    cdef size_t limit
    cdef int32_t index

    def __cinit__(self, Batch b):
        b._load()
        self.b = b
        self.pos = b._rstart
        self.limit = b._rlimit
        self.index = 0

    def __iter__(self):
        return self

    cdef int advance(self, kb_record *r) except -1:
        """Reads the next record into *r: 1, or 0 at the end; raises on a fault."""
        cdef kb_fault f
        cdef size_t next_pos
        f.args[1] = f.args[2] = 0
        if self.index >= self.b.h.record_count:
            if self.pos < self.limit:
                f.rule, f.pos, f.args[0] = KB_RULE_RECORDS_REMAINING, self.pos, self.limit - self.pos
                _raise_fault(&f, 0, self.b._payload)
            return 0
        if self.pos >= self.limit:
            f.rule, f.pos, f.args[0], f.args[1] = KB_RULE_PREMATURE_EOF, self.pos, self.b.h.record_count, self.index
            _raise_fault(&f, 0, self.b._payload)
        if kb_v2_read_record(self.b._rec.ptr, self.pos, self.limit, r, &f, &next_pos) != 0:
            _raise_fault(&f, 0, self.b._payload)
        self.pos = r.end
        self.index += 1
        return 1

    cdef inline int64_t timestamp_of(self, const kb_record *r):
        if self.b.h.attributes & KB_ATTR_LOG_APPEND_TIME:
            return self.b.h.max_timestamp
        return kb_wrap_add64(self.b.h.base_timestamp, r.timestamp_delta)


cdef class _Records(_RecordIterator):
    def __next__(self):
        cdef kb_record r
        if not self.advance(&r):
            raise StopIteration
        cdef const uint8_t *buf = self.b._rec.ptr
        cdef Record rec = Record.__new__(Record)
        rec.offset_delta = r.offset_delta
        rec.offset = kb_wrap_add64(self.b.h.base_offset, r.offset_delta)
        rec.timestamp_delta = r.timestamp_delta
        rec.timestamp = self.timestamp_of(&r)
        rec.key = _bytes_or_none(buf, r.key, r.key_len)
        rec.value = _bytes_or_none(buf, r.value, r.value_len)
        rec.headers = _headers(buf, &r)
        rec.sequence = _sequence(self.b.h.base_sequence, r.offset_delta)
        rec.attributes = r.attributes
        rec.position = r.pos
        return rec


cdef class _Tuples(_RecordIterator):
    def __next__(self):
        cdef kb_record r
        if not self.advance(&r):
            raise StopIteration
        cdef const uint8_t *buf = self.b._rec.ptr
        return (kb_wrap_add64(self.b.h.base_offset, r.offset_delta), self.timestamp_of(&r),
                _bytes_or_none(buf, r.key, r.key_len), _bytes_or_none(buf, r.value, r.value_len),
                _headers(buf, &r))


cdef _legacy_error(kb_rule rule, size_t pos, Py_ssize_t payload, int64_t a0=0, int64_t a1=0):
    cdef kb_fault f
    f.rule, f.pos, f.args[0], f.args[1], f.args[2] = rule, pos, a0, a1, 0
    _raise_fault(&f, 0, payload)


cdef class LegacyBatch:
    """A magic 0 or 1 entry: one message, or a compressed wrapper holding a set of inner
    messages.  The field names are Batch's; fields v2 introduced carry Kafka's "none" values
    (-1, False, None), and ``record_count`` is None as Kafka's ``countOrNull()``."""
    cdef _View _v
    cdef kb_legacy_msg m
    cdef readonly Py_ssize_t position
    cdef readonly Py_ssize_t size
    cdef readonly int entry
    cdef _Decompressor _dec
    cdef _View _rec          # the inner message set: the entry itself, or the decompressed value
    cdef size_t _rstart
    cdef size_t _rlimit
    cdef Py_ssize_t _payload  # position of the compressed value, -1 when uncompressed
    cdef int64_t _base        # added to inner offset fields (relative offsets of v1 wrappers)
    cdef int64_t _first       # offset of the first record
    cdef Py_ssize_t _count

    def __repr__(self):
        return (f"<LegacyBatch entry={self.entry} position={self.position} offset={self.m.offset} "
                f"magic={self.m.magic} compression={self.compression}>")

    cdef int _load(self) except -1:
        """Reads the inner message set once, with the checks of Kafka's deep iterator."""
        if self._rec is not None:
            return 0
        cdef int codec = self.m.attributes & KB_ATTR_CODEC_MASK
        cdef kb_legacy_msg inner
        cdef kb_fault f
        cdef size_t p
        cdef kb_inner_status st
        cdef int64_t last = 0
        if codec == 0:
            self._rec, self._rstart, self._rlimit = self._v, self.position, self.position + self.size
            self._payload, self._base, self._count, self._first = -1, 0, 1, self.m.offset
            return 0
        if codec > 4:
            _legacy_error(KB_RULE_UNKNOWN_CODEC, self.position + 17, -1, codec)
        if codec == 4:
            _legacy_error(KB_RULE_LEGACY_ZSTD, self.position + 17, -1, self.m.magic)
        if self.m.value_len < 0:
            _legacy_error(KB_RULE_LEGACY_NULL_WRAPPER, self.m.value - 4, -1, self.m.magic)
        if self._dec is None:
            self._dec = _Decompressor(self._v, _codecs.DEFAULT_MAX_DECOMPRESSED)
        data = self._dec.copy(codec, self.m.magic, self.m.value, self.m.value_len)
        rec = _View(data)
        self._payload = self.m.value
        p, self._count = 0, 0
        while True:
            st = kb_legacy_next(rec.ptr, rec.length, &p, &inner, &f)
            if st == KB_INNER_END or st == KB_INNER_TRUNCATED:  # Kafka drops a truncated inner tail
                break
            if st != KB_INNER_MSG:
                _raise_fault(&f, 0, self._payload)
            if inner.attributes & KB_ATTR_CODEC_MASK:
                _legacy_error(KB_RULE_LEGACY_INNER_COMPRESSED, inner.pos + 17, self._payload)
            if self._count == 0:
                self._first = inner.offset
            last = inner.offset
            self._count += 1
        if self._count == 0:
            _legacy_error(KB_RULE_LEGACY_NO_INNER, 0, self._payload)
        self._base = 0
        if self.m.magic == 1 and self.m.offset != 0:  # relative inner offsets; 0: old librdkafka
            if self.m.offset < last:
                _legacy_error(KB_RULE_LEGACY_WRAPPER_OFFSET, self.position, -1, self.m.offset, last)
            self._base = self.m.offset - last
        self._first += self._base
        self._rec, self._rstart, self._rlimit = rec, 0, rec.length
        return 0

    @property
    def offset(self): return self.m.offset
    @property
    def base_offset(self):
        """Offset of the first record (decompresses a compressed wrapper)."""
        self._load()
        return self._first
    @property
    def last_offset(self): return self.m.offset
    @property
    def next_offset(self): return self.m.offset + 1
    @property
    def length(self): return self.size - KB_LOG_OVERHEAD
    @property
    def magic(self): return self.m.magic
    @property
    def crc(self): return self.m.crc
    @property
    def attributes(self): return <uint8_t> self.m.attributes
    @property
    def compression(self):
        cdef int codec = self.m.attributes & KB_ATTR_CODEC_MASK
        return COMPRESSION_NAMES[codec] if codec < 5 else f"unknown({codec})"
    @property
    def timestamp_type(self):
        if self.m.magic == 0:
            return "NoTimestampType"
        return "LogAppendTime" if self.m.attributes & KB_ATTR_LOG_APPEND_TIME else "CreateTime"
    @property
    def max_timestamp(self): return self.m.timestamp
    @property
    def record_count(self): return None
    @property
    def partition_leader_epoch(self): return -1
    @property
    def producer_id(self): return -1
    @property
    def producer_epoch(self): return -1
    @property
    def base_sequence(self): return -1
    @property
    def last_sequence(self): return -1
    @property
    def is_transactional(self): return False
    @property
    def is_control(self): return False
    @property
    def control(self): return None
    @property
    def control_type(self): return None
    @property
    def has_delete_horizon(self): return False
    @property
    def delete_horizon_ms(self): return None
    @property
    def raw(self):
        """The whole entry, a zero-copy memoryview of the input."""
        return memoryview(self._v.mv)[self.position:self.position + self.size]
    @property
    def is_valid(self):
        """True when the stored CRC-32 matches the message."""
        return kb_legacy_compute_crc(self._v.ptr, &self.m) == self.m.crc

    def __len__(self):
        self._load()
        return self._count

    def __iter__(self):
        self._load()
        return _LegacyRecords(self)

    def tuples(self):
        """The records as plain ``(offset, timestamp, key, value, headers)`` tuples."""
        return ((r.offset, r.timestamp, r.key, r.value, r.headers) for r in self)

    def records(self):
        return list(self)


cdef class _LegacyRecords:
    cdef LegacyBatch b
    cdef size_t pos
    cdef int32_t index

    def __cinit__(self, LegacyBatch b):
        self.b = b
        self.pos = b._rstart
        self.index = 0

    def __iter__(self):
        return self

    def __next__(self):
        cdef kb_legacy_msg m
        cdef kb_fault f
        cdef const uint8_t *buf = self.b._rec.ptr
        cdef kb_inner_status st = kb_legacy_next(buf, self.b._rlimit, &self.pos, &m, &f)
        if st != KB_INNER_MSG:
            raise StopIteration  # _load already met every fault
        cdef const kb_legacy_msg *w = &self.b.m
        cdef Record rec = Record.__new__(Record)
        rec.offset = self.b._base + m.offset
        if w.magic > 0 and w.attributes & KB_ATTR_LOG_APPEND_TIME:
            rec.timestamp = w.timestamp  # a LogAppendTime wrapper stamps its inner messages
        else:
            rec.timestamp = m.timestamp
        rec.key = _bytes_or_none(buf, m.key, m.key_len)
        rec.value = _bytes_or_none(buf, m.value, m.value_len)
        rec.headers = _EMPTY_HEADERS
        rec.sequence = -1
        rec.offset_delta = self.index
        rec.attributes = m.attributes
        rec.position = m.pos
        rec.crc = m.crc
        rec.is_valid = kb_legacy_compute_crc(buf, &m) == m.crc
        self.index += 1
        return rec


cdef class BatchReader:
    """Iterator over the entries of a buffer (see ``iter_batches``).  After
    iteration, ``truncated_tail`` tells whether an incomplete entry ended it."""
    cdef _View _v
    cdef size_t pos
    cdef int entry
    cdef bint verify_crc
    cdef readonly object truncated_tail
    cdef _Decompressor _dec

    def __cinit__(self, buf, bint verify_crc=True, size_t max_decompressed_bytes=_codecs.DEFAULT_MAX_DECOMPRESSED):
        self._v = _view(buf)
        self.pos = 0
        self.entry = 0
        self.verify_crc = verify_crc
        self.truncated_tail = None
        self._dec = _Decompressor(self._v, max_decompressed_bytes)

    def __iter__(self):
        return self

    def __next__(self):
        cdef kb_entry e
        cdef kb_fault f
        cdef kb_entry_status st = kb_next_entry(self._v.ptr, self._v.length, self.pos, &e, &f)
        if st == KB_ENTRY_END:
            raise StopIteration
        if st == KB_ENTRY_TRUNCATED:
            self.truncated_tail = TruncatedTail(self.entry, self.pos)
            self.pos = self._v.length
            raise StopIteration
        if st == KB_ENTRY_CORRUPT:
            _raise_fault(&f, 0)
        if e.magic < 2:
            return self._legacy(&e)
        cdef Batch b = Batch.__new__(Batch)
        _read_v2_entry(self._v, &e, self.verify_crc, &b.h, 0)
        b._v = self._v
        b._dec = self._dec
        b.position = e.pos
        b.size = e.size
        b.entry = self.entry
        self.pos = e.pos + e.size
        self.entry += 1
        return b

    cdef LegacyBatch _legacy(self, const kb_entry *e):
        b = _legacy_entry(self._v, e, self.verify_crc, self.entry, self._dec)
        self.pos = e.pos + e.size
        self.entry += 1
        return b


cdef LegacyBatch _legacy_entry(_View v, const kb_entry *e, bint verify_crc, int entry, _Decompressor dec):
    cdef kb_fault f
    cdef LegacyBatch b = LegacyBatch.__new__(LegacyBatch)
    if kb_legacy_read(v.ptr, e.pos, e.size, &b.m, &f) != 0:
        _raise_fault(&f, 0)
    if verify_crc:
        computed = kb_legacy_compute_crc(v.ptr, &b.m)
        if computed != b.m.crc:
            raise _errors.CorruptRecordError(
                f"Record is corrupt (stored crc = {b.m.crc}, computed crc = {computed})", e.pos + 12,
                "batch.crc_mismatch")
    b._v, b._dec, b.position, b.size, b.entry = v, dec, e.pos, e.size, entry
    return b


def iter_batches(buf, *, bint verify_crc=True, size_t max_decompressed_bytes=_codecs.DEFAULT_MAX_DECOMPRESSED):
    """Iterate the record batches of ``buf`` (bytes, bytearray, memoryview or mmap).

    An incomplete entry at the end ends the iteration silently, as Kafka's
    readers do (see ``BatchReader.truncated_tail``).  With ``verify_crc`` a
    batch whose CRC-32C does not match raises ``CorruptRecordError``.  A
    compressed batch is decompressed once, when its records are first read,
    never past ``max_decompressed_bytes``.
    """
    return BatchReader(buf, verify_crc, max_decompressed_bytes)


cdef class _Decompressor:
    """Decompresses batch payloads of one input buffer into a reusable scratch buffer (see
    pykbatch.codecs.Scratch); codec errors become faults whose message is kept here."""
    cdef _View v
    cdef object scratch
    cdef readonly list messages
    cdef object _out  # the memoryview of the last output, kept alive until the next call

    def __cinit__(self, _View v, size_t cap):
        self.v = v
        self.scratch = _codecs.Scratch(cap)
        self.messages = []

    cdef int run(self, int codec, int magic, const uint8_t *src, size_t n, const uint8_t **out,
                 size_t *out_len, kb_fault *f):
        cdef Py_ssize_t at = src - self.v.ptr
        cdef const uint8_t[::1] produced
        try:
            self._out = self.scratch.decompress(codec, magic, memoryview(self.v.mv)[at:at + n])
        except _codecs.CodecError as exc:
            return self.fail(f, exc.rule, exc.offset, exc.message)
        except Exception as exc:  # a codec library surprise still becomes a culprit, never a crash
            return self.fail(f, "batch.decompression_failed", 0,
                             f"Failed to decompress {_codecs.NAMES[codec]} record stream: {exc!r}")
        out_len[0] = len(self._out)
        if out_len[0]:
            produced = self._out
            out[0] = &produced[0]
        else:
            out[0] = src
        return 0

    cdef bytes copy(self, int codec, int magic, Py_ssize_t at, Py_ssize_t n):
        """The decompressed payload at v[at:at+n] as its own bytes; raises on a codec error."""
        try:
            return bytes(self.scratch.decompress(codec, magic, memoryview(self.v.mv)[at:at + n]))
        except _codecs.CodecError as exc:
            raise _errors.error_for(kb_rule_code(<kb_rule> _RULE_INDEX[exc.rule]), exc.message, at + exc.offset,
                                    exc.rule) from None

    cdef int fail(self, kb_fault *f, str rule, Py_ssize_t offset, str message):
        f.rule = <kb_rule> _RULE_INDEX[rule]
        f.pos = offset
        f.args[0] = len(self.messages)
        f.args[1] = 0
        f.args[2] = 0
        self.messages.append(message)
        return -1


cdef int _decompress_cb(void *ctx, int codec, int magic, const uint8_t *src, size_t n, const uint8_t **out,
                        size_t *out_len, kb_fault *f) noexcept with gil:
    return (<_Decompressor> ctx).run(codec, magic, src, n, out, out_len, f)


cdef class _Validator:
    """Runs kb_validate with a reusable culprit buffer that grows up to the config's cap."""
    cdef kb_validate_opts opts
    cdef kb_culprit *out
    cdef size_t cap
    cdef size_t max_cap
    cdef readonly object config
    cdef kb_summary s
    cdef _Decompressor decompressor

    def __cinit__(self, config, _View v):
        self.config = config
        self.decompressor = _Decompressor(v, config.max_decompressed_bytes)
        self.opts.decompress = _decompress_cb
        self.opts.decompress_ctx = <void *> self.decompressor
        self.opts.origin = KB_ORIGIN_CLIENT if config.origin == "client" else KB_ORIGIN_LOG
        self.opts.verify_crc = 1 if config.verify_crc else 0
        self.opts.strict = 1 if config.strict else 0
        self.max_cap = config.max_culprits
        self.cap = min(self.max_cap, 64)
        self.out = <kb_culprit *> malloc(max(self.cap, 1) * sizeof(kb_culprit))
        if self.out == NULL:
            raise MemoryError()

    def __dealloc__(self):
        free(self.out)

    cdef int run(self, const uint8_t *ptr, size_t length) except -1:
        """Validates; afterwards self.s holds the summary and self.out the culprits."""
        cdef kb_culprit *grown
        while True:
            if length >= NOGIL_THRESHOLD:
                with nogil:
                    kb_validate(ptr, length, &self.opts, self.out, self.cap, &self.s)
            else:
                kb_validate(ptr, length, &self.opts, self.out, self.cap, &self.s)
            if <size_t> self.s.culprits <= self.cap or self.cap >= self.max_cap:
                return 0
            self.cap = min(self.max_cap, <size_t> self.s.culprits)
            grown = <kb_culprit *> malloc(self.cap * sizeof(kb_culprit))
            if grown == NULL:
                raise MemoryError()
            free(self.out)
            self.out = grown

    cdef object result(self):
        s = &self.s
        culprits = _culprits(self.out, min(<size_t> s.culprits, self.cap), self.config.topic_partition,
                             self.decompressor.messages)
        del self.decompressor.messages[:]
        tail = TruncatedTail(s.tail_entry, s.tail_pos) if s.tail_pos >= 0 else None
        stopped_at = s.valid_bytes if s.stopped else None
        return ValidationResult(culprits, s.culprits, s.entries, s.records, s.valid_bytes, tail, stopped_at,
                                s.unwalked, self.config)


def validate(buf, config=None):
    """Check every batch and record of ``buf`` and collect every culprit.

    Returns a ``ValidationResult`` with ``ok``, ``culprits`` and the KIP-467
    fields (``error_code``, ``error_name``, ``error_records``, ``error_message``).
    ``config`` is a ``ValidationConfig`` (default: a producer's batch).
    """
    cdef _View v = _view(buf)
    cdef _Validator checker = _Validator(config if config is not None else _DEFAULT_CONFIG, v)
    checker.run(v.ptr, v.length)
    return checker.result()


def _validate_rows(_View v, starts, ends, valid, config):
    """Validate every row v[starts[i]:ends[i]] (rows with valid[i] == 0 are skipped).

    Returns (records per row as int64, truncated-tail position per row or -1, and a dict
    row -> ValidationResult for the rows that have culprits).  Rows without culprits create
    no Python objects."""
    import numpy as np
    cdef const int64_t[::1] row_start = starts
    cdef const int64_t[::1] row_end = ends
    cdef Py_ssize_t n = row_start.shape[0], row
    cdef _Validator checker = _Validator(config if config is not None else _DEFAULT_CONFIG, v)
    records = np.zeros(n, np.int64)
    tails = np.full(n, -1, np.int64)
    cdef int64_t[::1] rec_view = records
    cdef int64_t[::1] tail_view = tails
    bad = {}
    for row in range(n):
        if valid is not None and not valid[row]:
            continue
        checker.run(v.ptr + row_start[row], <size_t> (row_end[row] - row_start[row]))
        rec_view[row] = checker.s.records
        tail_view[row] = checker.s.tail_pos
        if checker.s.culprits:
            bad[row] = checker.result()
    return records, tails, bad


cdef list _culprits(const kb_culprit *out, size_t n, str tp, list codec_messages):
    cdef list result = []
    cdef size_t i
    cdef const kb_culprit *c
    for i in range(n):
        c = &out[i]
        rule = RULES[c.rule]
        if rule.id in _CODEC_RULES:
            message, detail = codec_messages[c.args[0]], rule.detail
        else:
            message, detail = _render(rule, [c.args[k] for k in range(8)], tp)
        result.append(Culprit(
            c.entry, c.record_index if c.record_index >= 0 else None,
            c.relative_offset if c.relative_offset != KB_NO_OFFSET else None,
            c.code, rule.id, c.pos, c.inner_pos if c.inner_pos >= 0 else None, c.entry_pos, message,
            detail or None, rule.kafka))
    return result


# ---------------------------------------------------------------------------------------------
# Arrow columns

def to_arrow(buf, *, bint verify_crc=True, bint zero_copy=False):
    """Decode every record of ``buf`` into a ``pyarrow.Table`` (one row per record,
    with the batch columns a user filters on), without a Python object per record.

    ``zero_copy=True`` makes ``key`` and ``value`` Arrow ``binary_view`` columns that point
    into ``buf`` instead of copying it (much faster for large values; ``buf`` is kept alive
    by the table and must not be modified while the table is in use; buffers over 2 GiB
    are copied).  Raises the first problem met (``validate`` lists them all)."""
    import numpy as np
    cdef _View v = _view(buf)
    table, _, failed = _decode_rows(v, np.zeros(1, np.int64), np.array([v.length], np.int64), None,
                                    verify_crc, True, zero_copy)
    return table


def _decode_rows(_View v, starts, ends, valid, bint verify_crc, bint raise_errors, bint zero_copy=False,
                 size_t max_decompressed_bytes=_codecs.DEFAULT_MAX_DECOMPRESSED):
    """Decode the records of every row v[starts[i]:ends[i]] (rows with valid[i] == 0 are null).

    Returns (table of all records, int32 record counts per row, bool array of rows that
    could not be decoded).  A row that fails contributes no records; with raise_errors the
    first failure raises instead."""
    import numpy as np
    import pyarrow as pa

    cdef const int64_t[::1] row_start = starts
    cdef const int64_t[::1] row_end = ends
    cdef Py_ssize_t n_input = row_start.shape[0], row
    cdef kb_entry e
    cdef kb_fault f
    cdef kb_entry_status st
    cdef kb_column_sizes z, rz
    cdef kb_v2_header h
    cdef int32_t rec_index
    cdef size_t pos, end
    cdef int entry
    cdef Py_ssize_t row_batches
    cdef _View src
    cdef size_t rstart, rlimit
    cdef int codec
    cdef _Decompressor dec = _Decompressor(v, max_decompressed_bytes)
    memset(&z, 0, sizeof(z))
    counts = np.zeros(n_input, np.int32)
    failed = np.zeros(n_input, np.bool_)
    cdef int32_t[::1] count_view = counts
    # one entry per decodable batch, in order; b_src: where its records are (the input, or
    # its payload decompressed once, kept for the fill pass)
    b_pos, b_entry, b_rel, b_count, b_src, b_start, b_limit = [], [], [], [], [], [], []
    b_base, b_epoch, b_pid, b_pepoch, b_attrs = [], [], [], [], []
    # magic 0/1: b_legacy_base is added to offset fields, b_legacy_ts overrides timestamps (or INT64_MIN)
    b_legacy, b_legacy_base, b_legacy_ts, b_tstype = [], [], [], []
    batch_lists = (b_pos, b_entry, b_rel, b_count, b_src, b_start, b_limit, b_base, b_epoch, b_pid, b_pepoch,
                   b_attrs, b_legacy, b_legacy_base, b_legacy_ts, b_tstype)
    cdef LegacyBatch lb
    cdef int64_t before
    for row in range(n_input):
        if valid is not None and not valid[row]:
            continue
        memset(&rz, 0, sizeof(rz))
        row_batches = 0
        pos = <size_t> row_start[row]
        end = <size_t> row_end[row]
        entry = 0
        try:
            while True:
                st = kb_next_entry(v.ptr, end, pos, &e, &f)
                if st == KB_ENTRY_END or st == KB_ENTRY_TRUNCATED:
                    break
                if st == KB_ENTRY_CORRUPT:
                    _raise_fault(&f, -<Py_ssize_t> row_start[row])
                if e.magic < 2:
                    lb = _legacy_entry(v, &e, verify_crc, entry, dec)
                    lb._load()
                    before = rz.records
                    if kb_legacy_columns_measure(lb._rec.ptr, lb._rstart, lb._rlimit, &rz, &f, &rec_index) != 0:
                        _raise_fault(&f, 0, lb._payload)
                    stamped = lb.m.magic > 0 and lb._payload >= 0 and lb.m.attributes & KB_ATTR_LOG_APPEND_TIME
                    b_pos.append(e.pos); b_entry.append(entry); b_rel.append(e.pos - row_start[row])
                    b_src.append(lb._rec); b_start.append(lb._rstart); b_limit.append(lb._rlimit)
                    b_count.append(rz.records - before); b_base.append(lb._first)
                    b_epoch.append(-1); b_pid.append(-1); b_pepoch.append(-1); b_attrs.append(0)
                    b_legacy.append(1); b_legacy_base.append(lb._base)
                    b_legacy_ts.append(lb.m.timestamp if stamped else INT64_MIN)
                    b_tstype.append(2 if lb.m.magic == 0 else (1 if lb.m.attributes & KB_ATTR_LOG_APPEND_TIME else 0))
                    row_batches += 1
                    pos = e.pos + e.size
                    entry += 1
                    continue
                _check_decodable(v, &e, verify_crc, &h, row_start[row])
                codec = h.attributes & KB_ATTR_CODEC_MASK
                src, rstart, rlimit, payload = v, e.pos + KB_V2_HEADER_SIZE, e.pos + e.size, -1
                if codec and h.record_count > 0:
                    payload = e.pos + KB_V2_HEADER_SIZE - row_start[row]
                    try:
                        src = _View(dec.copy(codec, 2, e.pos + KB_V2_HEADER_SIZE, e.size - KB_V2_HEADER_SIZE))
                    except _errors.KafkaDataError as exc:
                        exc.offset -= row_start[row]
                        raise
                    rstart, rlimit = 0, src.length
                if h.record_count > 0 and kb_columns_measure(
                        src.ptr, rstart, rlimit, h.record_count, &rz, &f, &rec_index) != 0:
                    _raise_fault(&f, 0 if payload >= 0 else -<Py_ssize_t> row_start[row], payload)
                b_pos.append(e.pos); b_entry.append(entry); b_rel.append(e.pos - row_start[row])
                b_src.append(src); b_start.append(rstart); b_limit.append(rlimit)
                b_count.append(max(h.record_count, 0)); b_base.append(h.base_offset)
                b_epoch.append(h.partition_leader_epoch); b_pid.append(h.producer_id)
                b_pepoch.append(h.producer_epoch); b_attrs.append(h.attributes)
                b_legacy.append(0); b_legacy_base.append(0); b_legacy_ts.append(INT64_MIN)
                b_tstype.append(1 if h.attributes & KB_ATTR_LOG_APPEND_TIME else 0)
                row_batches += 1
                pos = e.pos + e.size
                entry += 1
        except _errors.KafkaDataError:
            if raise_errors:
                raise
            failed[row] = True
            for lst in batch_lists:
                del lst[len(lst) - row_batches:]
            continue
        count_view[row] = <int32_t> rz.records
        z.records += rz.records
        z.key_bytes += rz.key_bytes
        z.value_bytes += rz.value_bytes
        z.headers += rz.headers
        z.header_key_bytes += rz.header_key_bytes
        z.header_value_bytes += rz.header_value_bytes
    # views point into the input (buffer 0) or into a decompressed payload (buffers 1..)
    views = zero_copy and v.length <= INT32_MAX and all(s.length <= INT32_MAX for s in b_src)
    if views:
        z.key_bytes = z.value_bytes = 0
    for name, n in (("key", z.key_bytes), ("value", z.value_bytes), ("header key", z.header_key_bytes),
                    ("header value", z.header_value_bytes), ("header", z.headers)):
        if n > INT32_MAX:
            raise OverflowError(f"{name} bytes ({n}) exceed one Arrow binary column; decode in smaller parts")

    n_rows, n_headers = z.records, z.headers
    offset = np.empty(n_rows, np.int64)
    timestamp = np.empty(n_rows, np.int64)
    sequence = np.empty(n_rows, np.int32)
    batch_index = np.empty(n_rows, np.int32)
    header_offsets = np.zeros(n_rows + 1, np.int32)
    hkey_offsets = np.zeros(n_headers + 1, np.int32)
    hvalue_offsets = np.zeros(n_headers + 1, np.int32)
    key_valid = np.zeros((n_rows + 7) // 8, np.uint8)
    value_valid = np.zeros((n_rows + 7) // 8, np.uint8)
    hvalue_valid = np.zeros((n_headers + 7) // 8, np.uint8)
    hkey_data = np.empty(z.header_key_bytes, np.uint8)
    hvalue_data = np.empty(z.header_value_bytes, np.uint8)
    if views:
        key_views = np.empty(16 * n_rows, np.uint8)
        value_views = np.empty(16 * n_rows, np.uint8)
    else:
        key_offsets = np.zeros(n_rows + 1, np.int32)
        value_offsets = np.zeros(n_rows + 1, np.int32)
        key_data = np.empty(z.key_bytes, np.uint8)
        value_data = np.empty(z.value_bytes, np.uint8)

    cdef kb_columns c
    memset(&c, 0, sizeof(c))
    c.offset = _ptr64(offset); c.timestamp = _ptr64(timestamp)
    c.sequence = _ptr32(sequence); c.batch_index = _ptr32(batch_index)
    c.key_valid = _ptr8(key_valid); c.value_valid = _ptr8(value_valid)
    if views:
        c.key_views = _ptr8(key_views); c.value_views = _ptr8(value_views)
    else:
        c.key_offsets = _ptr32(key_offsets); c.key_data = _ptr8(key_data)
        c.value_offsets = _ptr32(value_offsets); c.value_data = _ptr8(value_data)
    c.header_offsets = _ptr32(header_offsets)
    c.hkey_offsets = _ptr32(hkey_offsets); c.hkey_data = _ptr8(hkey_data)
    c.hvalue_offsets = _ptr32(hvalue_offsets); c.hvalue_data = _ptr8(hvalue_data)
    c.hvalue_valid = _ptr8(hvalue_valid)
    extra = {}  # decompressed payloads -> their view buffer index
    buffers = np.array([0 if s is v else extra.setdefault(id(s), len(extra) + 1) for s in b_src], np.int32)
    addresses = np.array([<uintptr_t> (<_View> s).ptr for s in b_src], np.uint64)
    cdef const int32_t[::1] batch_buffer = buffers
    cdef const uint64_t[::1] batch_addr = addresses
    cdef const int64_t[::1] batch_start = np.array(b_start, np.int64)
    cdef const int64_t[::1] batch_limit = np.array(b_limit, np.int64)
    cdef const int64_t[::1] batch_pos = np.array(b_pos, np.int64)
    cdef const int8_t[::1] batch_legacy = np.array(b_legacy, np.int8)
    cdef const int64_t[::1] legacy_base = np.array(b_legacy_base, np.int64)
    cdef const int64_t[::1] legacy_ts = np.array(b_legacy_ts, np.int64)
    cdef Py_ssize_t k, n_batches = batch_pos.shape[0]
    cdef const uint8_t *records
    with nogil:  # pure C from here: other threads run while the columns fill
        for k in range(n_batches):
            c.view_buffer = batch_buffer[k]
            records = <const uint8_t *> <uintptr_t> batch_addr[k]
            if batch_legacy[k]:
                kb_legacy_columns_fill(records, batch_start[k], batch_limit[k], legacy_base[k], legacy_ts[k],
                                       <int32_t> k, &c)
                continue
            kb_v2_read_header(v.ptr + batch_pos[k], &h)
            kb_columns_fill(records, batch_start[k], batch_limit[k],
                            h.record_count if h.record_count > 0 else 0, &h, <int32_t> k, &c)

    def binary(typ, n, valid, offs, data):
        return pa.Array.from_buffers(typ, n, [pa.py_buffer(valid) if valid is not None else None,
                                              pa.py_buffer(offs), pa.py_buffer(data)])

    if views:
        data_buffers = [pa.py_buffer(v.mv) if v.length else pa.py_buffer(b"")]
        data_buffers += [pa.py_buffer(s.obj) for s in b_src if id(s) in extra and extra.pop(id(s))]
        def view_array(valid, views_buf):
            return pa.Array.from_buffers(pa.binary_view(), n_rows,
                                         [pa.py_buffer(valid), pa.py_buffer(views_buf)] + data_buffers)
        keys = view_array(key_valid, key_views)
        values = view_array(value_valid, value_views)
    else:
        keys = binary(pa.binary(), n_rows, key_valid, key_offsets, key_data)
        values = binary(pa.binary(), n_rows, value_valid, value_offsets, value_data)
    hkeys = binary(pa.string(), n_headers, None, hkey_offsets, hkey_data)
    hvalues = binary(pa.binary(), n_headers, hvalue_valid, hvalue_offsets, hvalue_data)
    header_struct = pa.StructArray.from_arrays([hkeys, hvalues], fields=header_fields())
    header_lists = pa.ListArray.from_arrays(pa.array(header_offsets), header_struct)

    per_batch_counts = np.array(b_count, np.int64)
    def per_batch(values, dtype):  # one value per batch -> one per record
        return np.repeat(np.array(values, dtype), per_batch_counts)
    attrs = np.array(b_attrs, np.int16)
    ts_type = pa.DictionaryArray.from_arrays(per_batch(b_tstype, np.int8),
                                             pa.array(["CreateTime", "LogAppendTime", "NoTimestampType"]))
    table = pa.table({
        "offset": offset,
        "timestamp": timestamp,
        "key": keys,
        "value": values,
        "headers": header_lists,
        "sequence": sequence,
        "batch_index": per_batch(b_entry, np.int32),
        "batch_position": per_batch(b_rel, np.int64),
        "base_offset": per_batch(b_base, np.int64),
        "partition_leader_epoch": per_batch(b_epoch, np.int32),
        "producer_id": per_batch(b_pid, np.int64),
        "producer_epoch": per_batch(b_pepoch, np.int16),
        "is_transactional": np.repeat((attrs & KB_ATTR_TRANSACTIONAL) != 0, per_batch_counts),
        "is_control": np.repeat((attrs & KB_ATTR_CONTROL) != 0, per_batch_counts),
        "timestamp_type": ts_type,
    })
    return table, counts, failed


def header_fields():
    """Arrow fields of one header: key (UTF-8, never null) and value (binary, nullable)."""
    import pyarrow as pa
    return [pa.field("key", pa.string(), nullable=False), pa.field("value", pa.binary())]


cdef _read_v2_entry(_View v, kb_entry *e, bint verify_crc, kb_v2_header *h, int64_t base):
    """Reads the header of a complete v2 entry; raises unless it is well formed (with a matching
    CRC when verify_crc).  Positions in messages are relative to `base` (the start of the row)."""
    cdef int64_t pos = e.pos - base
    if e.size < KB_V2_HEADER_SIZE:
        raise _errors.CorruptRecordError(
            f"Record batch is corrupt (the size {e.size} is smaller than the minimum allowed overhead "
            f"{KB_V2_HEADER_SIZE})", pos + 8, "batch.too_small")
    kb_v2_read_header(v.ptr + e.pos, h)
    if verify_crc:
        computed = kb_v2_compute_crc(v.ptr + e.pos, e.size)
        if computed != h.crc:
            raise _errors.CorruptRecordError(
                f"Record is corrupt (stored crc = {h.crc}, computed crc = {computed})", pos + 17,
                "batch.crc_mismatch")


cdef _check_decodable(_View v, kb_entry *e, bint verify_crc, kb_v2_header *h, int64_t base):
    """_read_v2_entry, and raises unless this version can read the batch's records."""
    _read_v2_entry(v, e, verify_crc, h, base)
    _check_records_readable(h, e.pos - base)


cdef _check_records_readable(const kb_v2_header *h, int64_t pos):
    """Raises unless this version can walk the records of the batch at `pos`."""
    cdef int codec = h.attributes & KB_ATTR_CODEC_MASK
    if codec > 4:
        raise _errors.UnknownServerError(f"Unknown compression type id: {codec}", pos + 21, "batch.unknown_codec")
    if h.record_count < 0:
        raise _errors.InvalidRecordError(
            f"Found invalid record count {h.record_count} in magic v2 batch", pos + 57,
            "batch.negative_record_count")


cdef inline int64_t *_ptr64(arr):
    cdef int64_t[::1] m = arr
    return &m[0] if m.shape[0] else NULL

cdef inline int32_t *_ptr32(arr):
    cdef int32_t[::1] m = arr
    return &m[0] if m.shape[0] else NULL

cdef inline uint8_t *_ptr8(arr):
    cdef uint8_t[::1] m = arr
    return &m[0] if m.shape[0] else NULL


# ---------------------------------------------------------------------------------------------
# Encoding

cdef inline int32_t _blob(object b, const uint8_t **p) except -2:
    """Pointer and length of a bytes object, -1 for None."""
    if b is None:
        p[0] = NULL
        return -1
    if len(<bytes> b) > INT32_MAX:
        raise OverflowError("a key, value or header is larger than 2 GiB")
    p[0] = <const uint8_t *> PyBytes_AS_STRING(b)
    return <int32_t> len(<bytes> b)


cdef object _as_bytes(object x, str what):
    if x is None or type(x) is bytes:
        return x
    if isinstance(x, str):
        raise TypeError(f"{what} must be bytes-like or None, not str (encode it first)")
    return bytes(x)


cdef bytes _encode(dict header, list records):
    """records: list of (key, value, headers, attributes, timestamp_delta, offset_delta);
    keys/values/header values bytes or None, header keys bytes."""
    cdef Py_ssize_t n = len(records), i, k, nh
    cdef kb_record_in *recs = <kb_record_in *> calloc(max(n, 1), sizeof(kb_record_in))
    cdef kb_header_in *hdrs
    cdef kb_v2_header h
    cdef int64_t size
    if recs == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            key, value, hl, attributes, ts_delta, off_delta = records[i]
            recs[i].key_len = _blob(key, &recs[i].key)
            recs[i].value_len = _blob(value, &recs[i].value)
            recs[i].attributes = attributes
            recs[i].timestamp_delta = ts_delta
            recs[i].offset_delta = off_delta
            nh = len(hl)
            recs[i].header_count = <int32_t> nh
            if nh:
                hdrs = <kb_header_in *> calloc(nh, sizeof(kb_header_in))
                if hdrs == NULL:
                    raise MemoryError()
                recs[i].headers = hdrs
                for k in range(nh):
                    hk, hv = hl[k]
                    hdrs[k].key_len = _blob(hk, &hdrs[k].key)
                    hdrs[k].value_len = _blob(hv, &hdrs[k].value)
        h.base_offset = header["base_offset"]
        h.partition_leader_epoch = header["partition_leader_epoch"]
        h.magic = 2
        h.attributes = header["attributes"]
        h.last_offset_delta = header["last_offset_delta"]
        h.base_timestamp = header["base_timestamp"]
        h.max_timestamp = header["max_timestamp"]
        h.producer_id = header["producer_id"]
        h.producer_epoch = header["producer_epoch"]
        h.base_sequence = header["base_sequence"]
        h.record_count = header["record_count"]
        return _assemble(&h, recs, n)
    finally:
        for i in range(n):
            free(<void *> recs[i].headers)
        free(recs)


cdef bytes _assemble(const kb_v2_header *h, const kb_record_in *recs, size_t n):
    """A whole v2 batch from its header and records, compressed with the codec that the
    header's attributes name."""
    cdef int codec = h.attributes & KB_ATTR_CODEC_MASK
    cdef int64_t size = kb_v2_records_size(recs, n)
    if size < 0 or size + KB_V2_HEADER_SIZE - KB_LOG_OVERHEAD > INT32_MAX:
        raise _errors.RecordTooLargeError("The batch would exceed 2 GiB", None, "encode.too_large")
    if codec == 0:
        out = PyBytes_FromStringAndSize(NULL, size + KB_V2_HEADER_SIZE)
        kb_v2_write_records(recs, n, <uint8_t *> PyBytes_AS_STRING(out) + KB_V2_HEADER_SIZE)
    else:
        records = PyBytes_FromStringAndSize(NULL, size)
        kb_v2_write_records(recs, n, <uint8_t *> PyBytes_AS_STRING(records))
        payload = _codecs.compress(codec, records, 2)
        out = PyBytes_FromStringAndSize(NULL, len(payload) + KB_V2_HEADER_SIZE)
        memcpy(PyBytes_AS_STRING(out) + KB_V2_HEADER_SIZE, PyBytes_AS_STRING(payload), len(payload))
    kb_v2_write_header(h, <uint8_t *> PyBytes_AS_STRING(out), len(out))
    return out


cdef tuple _header_pairs(object headers):
    if not headers:
        return _EMPTY_HEADERS
    out = []
    for hk, hv in headers:
        if isinstance(hk, str):
            hk = hk.encode("utf-8")
        elif hk is None:
            raise ValueError("header keys cannot be null")
        else:
            hk = _as_bytes(hk, "a header key")
        out.append((hk, _as_bytes(hv, "a header value")))
    return tuple(out)


cdef object _field(object rec, str name, object default):
    if isinstance(rec, dict):
        return rec.get(name, default)
    return getattr(rec, name, default)


def build_batch(records, *, int64_t base_offset=0, int32_t partition_leader_epoch=-1,
                int64_t producer_id=-1, int16_t producer_epoch=-1, int32_t base_sequence=-1,
                bint is_transactional=False, bint is_control=False, str timestamp_type="CreateTime",
                max_timestamp=None, str compression="none", int magic=2):
    """Build one record batch, as Kafka's ``MemoryRecordsBuilder`` does.

    ``records``: an iterable of mappings or objects with ``key``, ``value``
    (bytes or None), optional ``headers`` (pairs of str/bytes key and
    bytes/None value) and optional ``timestamp`` (ms; default: now).  A
    ``(key, value)`` tuple is accepted too.  Offset deltas are 0..n-1, the base
    timestamp is the first record's and ``maxTimestamp`` the largest (or
    ``max_timestamp`` for LogAppendTime).  Returns ``bytes``.

    ``magic=0`` or ``1`` builds a legacy message set instead: one entry per record when
    uncompressed, else one wrapper message (offset = the last record's) around the inner set
    (v1: relative inner offsets); no headers, producer fields, transactions or zstd, as Kafka.
    """
    if compression not in _COMPRESSION_IDS:
        raise ValueError(f"unknown compression {compression!r}; expected one of {COMPRESSION_NAMES}")
    if magic not in (0, 1, 2):
        raise ValueError(f"Invalid magic value {magic}")
    if magic < 2:
        if is_transactional or is_control or producer_id >= 0:
            raise ValueError(f"Idempotent, transactional and control records need magic 2, not {magic}")
        if compression == "zstd":
            raise ValueError(f"ZStandard compression is not supported for magic {magic}")
    if timestamp_type not in ("CreateTime", "LogAppendTime"):
        raise ValueError("timestamp_type must be 'CreateTime' or 'LogAppendTime'")
    if is_transactional and producer_id < 0:
        raise ValueError("transactional batches need a producer_id")
    now = None
    rows = []
    cdef int64_t first_ts = -1, max_ts = -1, ts
    cdef int32_t i = 0
    for rec in records:
        if isinstance(rec, tuple):
            key, value = rec
            headers = ()
            ts_obj = None
        else:
            key = _field(rec, "key", None)
            value = _field(rec, "value", None)
            headers = _field(rec, "headers", ())
            ts_obj = _field(rec, "timestamp", None)
        if ts_obj is None:
            if now is None:
                now = int(time.time() * 1000)
            ts_obj = now
        ts = ts_obj
        if ts < 0 and ts != -1:
            raise ValueError(f"Invalid negative timestamp {ts}")
        if i == 0:
            first_ts = ts
        if ts > max_ts:
            max_ts = ts
        rows.append((_as_bytes(key, "a key"), _as_bytes(value, "a value"), _header_pairs(headers),
                     0, ts, i))
        i += 1
    if magic < 2:
        if any(hl for _, _, hl, _, _, _ in rows):
            raise ValueError(f"Magic v{magic} does not support record headers")
        if timestamp_type == "LogAppendTime" and max_timestamp is None:
            raise ValueError("LogAppendTime batches need max_timestamp (the broker's append time)")
        stamp = max_timestamp if timestamp_type == "LogAppendTime" else None
        return _build_legacy([(k, v, t if stamp is None else stamp) for k, v, _, _, t, _ in rows], magic,
                             _COMPRESSION_IDS[compression], base_offset, stamp)
    rows = [(k, v, hl, a, <int64_t> (t - first_ts), d) for k, v, hl, a, t, d in rows]
    attributes = _COMPRESSION_IDS[compression]
    if timestamp_type == "LogAppendTime":
        attributes |= KB_ATTR_LOG_APPEND_TIME
        if max_timestamp is None:
            raise ValueError("LogAppendTime batches need max_timestamp (the broker's append time)")
    if is_transactional:
        attributes |= KB_ATTR_TRANSACTIONAL
    if is_control:
        attributes |= KB_ATTR_CONTROL
    header = dict(base_offset=base_offset, partition_leader_epoch=partition_leader_epoch,
                  attributes=attributes, last_offset_delta=max(i - 1, 0), base_timestamp=first_ts,
                  max_timestamp=max_ts if max_timestamp is None else max_timestamp,
                  producer_id=producer_id, producer_epoch=producer_epoch,
                  base_sequence=base_sequence, record_count=i)
    return _encode(header, rows)


cdef bytes _legacy_set(list messages, int magic, int attributes, int64_t first_offset):
    """Entries of (key, value, timestamp) messages with offsets first_offset, first_offset + 1, ..."""
    cdef const uint8_t *kp
    cdef const uint8_t *vp
    cdef int32_t kl, vl
    cdef size_t total = 0
    for key, value, _ in messages:
        total += kb_legacy_entry_size(magic, -1 if key is None else len(key), -1 if value is None else len(value))
    out = PyBytes_FromStringAndSize(NULL, total)
    cdef uint8_t *p = <uint8_t *> PyBytes_AS_STRING(out)
    cdef int64_t offset = first_offset
    for key, value, ts in messages:
        kl = _blob(key, &kp)
        vl = _blob(value, &vp)
        kb_legacy_write(p, offset, magic, attributes, ts if magic > 0 else -1, kp, kl, vp, vl)
        p += kb_legacy_entry_size(magic, kl, vl)
        offset += 1
    return out


cdef bytes _legacy_wrapper(bytes inner, int magic, int codec, int attributes, int64_t offset, int64_t timestamp):
    """A compressed wrapper message around an inner message set."""
    return _legacy_set([(None, _codecs.compress(codec, inner, magic), timestamp)], magic, codec | attributes,
                       offset)


cdef bytes _build_legacy(list messages, int magic, int codec, int64_t base_offset, object log_append_time):
    """Kafka's legacy builder: uncompressed, one entry per message; compressed, one wrapper whose
    offset is the last message's, with relative inner offsets for v1 (absolute for v0)."""
    cdef int attributes = KB_ATTR_LOG_APPEND_TIME if log_append_time is not None and magic > 0 else 0
    if codec == 0:
        return _legacy_set(messages, magic, attributes, base_offset)
    inner = _legacy_set(messages, magic, attributes, 0 if magic > 0 else base_offset)
    last = base_offset + len(messages) - 1
    stamp = log_append_time if log_append_time is not None else max([m[2] for m in messages] or [-1])
    return _legacy_wrapper(inner, magic, codec, attributes, last, stamp if magic > 0 else -1)


cdef bytes _reencode_legacy(LegacyBatch b):
    """An uncompressed message from its fields; a wrapper around its own inner set, recompressed."""
    cdef const kb_legacy_msg *m = &b.m
    cdef int codec = m.attributes & KB_ATTR_CODEC_MASK
    if codec == 0:
        out = PyBytes_FromStringAndSize(NULL, kb_legacy_entry_size(m.magic, m.key_len, m.value_len))
        kb_legacy_write(<uint8_t *> PyBytes_AS_STRING(out), m.offset, m.magic, <uint8_t> m.attributes,
                        m.timestamp, b._v.ptr + m.key, m.key_len, b._v.ptr + m.value, m.value_len)
        return out
    b._load()
    inner = bytes(memoryview(b._rec.mv)[b._rstart:b._rlimit]) if b._rlimit > b._rstart else b""
    return _legacy_wrapper(inner, m.magic, codec, (<uint8_t> m.attributes) & ~KB_ATTR_CODEC_MASK, m.offset,
                           m.timestamp)


cdef bytes _reencode(Batch b):
    """Re-encode a decoded batch from its own records (no Python object per record), with the
    batch's own codec."""
    cdef kb_record r
    cdef kb_fault f
    cdef size_t next_pos, hp, kp, vp
    cdef int32_t kl, vl, i, k
    cdef int64_t n_headers = 0, size
    cdef _RecordIterator walk = _RecordIterator(b)
    cdef const uint8_t *buf = b._rec.ptr
    cdef int32_t n = max(b.h.record_count, 0)
    while walk.advance(&r):
        n_headers += r.header_count
    cdef kb_record_in *recs = <kb_record_in *> calloc(max(n, 1), sizeof(kb_record_in))
    cdef kb_header_in *hdrs = <kb_header_in *> calloc(max(n_headers, 1), sizeof(kb_header_in))
    cdef kb_header_in *hnext = hdrs
    try:
        if recs == NULL or hdrs == NULL:
            raise MemoryError()
        walk = _RecordIterator(b)
        i = 0
        while walk.advance(&r):
            recs[i].key = buf + r.key
            recs[i].key_len = r.key_len if r.key_len >= 0 else -1
            recs[i].value = buf + r.value
            recs[i].value_len = r.value_len if r.value_len >= 0 else -1
            recs[i].attributes = r.attributes
            recs[i].timestamp_delta = r.timestamp_delta
            recs[i].offset_delta = r.offset_delta
            recs[i].header_count = r.header_count
            recs[i].headers = hnext
            hp = r.headers
            for k in range(r.header_count):
                hp = kb_v2_read_header_kv(buf, hp, r.end, &kp, &kl, &vp, &vl)
                hnext[k].key = buf + kp
                hnext[k].key_len = kl
                hnext[k].value = buf + vp
                hnext[k].value_len = vl if vl >= 0 else -1
            hnext += r.header_count
            i += 1
        return _assemble(&b.h, recs, n)
    finally:
        free(recs)
        free(hdrs)


def encode(batches):
    """Re-encode decoded batches into one buffer: ``Batch`` objects, or objects with the
    same header fields whose records carry ``key``, ``value``, ``headers``,
    ``offset_delta``, ``timestamp_delta`` and ``attributes`` (e.g. edited copies).

    For any valid uncompressed v2 input the output is byte-identical, except that
    non-minimal varints and negative lengths other than -1 are written in Kafka's
    canonical form (and the CRC is recomputed).  A compressed batch is recompressed
    with its codec: the same records, framed as Kafka's producer frames them.
    """
    out = []
    for b in batches:
        if isinstance(b, Batch):
            out.append(_reencode(<Batch> b))
            continue
        if isinstance(b, LegacyBatch):
            out.append(_reencode_legacy(<LegacyBatch> b))
            continue
        rows = [(_as_bytes(r.key, "a key"), _as_bytes(r.value, "a value"), _header_pairs(r.headers),
                 r.attributes, r.timestamp_delta, r.offset_delta) for r in b]
        header = dict(base_offset=b.base_offset, partition_leader_epoch=b.partition_leader_epoch,
                      attributes=b.attributes, last_offset_delta=b.last_offset_delta,
                      base_timestamp=b.base_timestamp, max_timestamp=b.max_timestamp,
                      producer_id=b.producer_id, producer_epoch=b.producer_epoch,
                      base_sequence=b.base_sequence, record_count=b.record_count)
        out.append(_encode(header, rows))
    return b"".join(out)


# ---------------------------------------------------------------------------------------------
# Test hook for the wire primitives (the C readers are inline, so they are exercised here)

def _read_varint(data, str kind="varint"):
    """Decode one ``varint`` / ``unsigned_varint`` / ``varlong`` at the start of ``data``:
    ``(value, size)``; ValueError for a truncated or overlong encoding."""
    cdef _View v = _view(data)
    cdef int32_t i32
    cdef uint32_t u32
    cdef int64_t i64
    cdef int n
    if kind == "varint":
        n = kb_read_varint(v.ptr, v.ptr + v.length, &i32)
        value = i32
    elif kind == "unsigned_varint":
        n = kb_read_uvarint(v.ptr, v.ptr + v.length, &u32)
        value = u32
    elif kind == "varlong":
        n = kb_read_varlong(v.ptr, v.ptr + v.length, &i64)
        value = i64
    else:
        raise ValueError(f"unknown varint kind {kind!r}")
    if n == 0:
        raise ValueError("truncated varint")
    if n < 0:
        raise ValueError(f"{kind} is too long")
    return value, n
