# Values as their schemas say: the schema registries' framing and Avro data into Arrow columns
# (csrc/kb_avro.c), a column of values at a time with no Python object per value.
# Included by _native.pyx: one module, one file per concern.

cdef extern from "kb_avro.h" nogil:
    ctypedef enum kb_avro_op:
        KB_AVRO_NULL
        KB_AVRO_BOOLEAN
        KB_AVRO_INT
        KB_AVRO_LONG
        KB_AVRO_FLOAT
        KB_AVRO_DOUBLE
        KB_AVRO_BYTES
        KB_AVRO_STRING
        KB_AVRO_FIXED
        KB_AVRO_ENUM
        KB_AVRO_RECORD
        KB_AVRO_ARRAY
        KB_AVRO_MAP
        KB_AVRO_UNION
        KB_AVRO_BRANCH
        KB_AVRO_DEFAULT
        KB_AVRO_MISMATCH
        KB_AVRO_DECIMAL_BYTES
        KB_AVRO_DECIMAL_FIXED

    ctypedef enum kb_col_kind:
        KB_COL_NULL
        KB_COL_BOOL
        KB_COL_INT32
        KB_COL_INT64
        KB_COL_FLOAT32
        KB_COL_FLOAT64
        KB_COL_BINARY
        KB_COL_FIXED
        KB_COL_DECIMAL
        KB_COL_STRUCT
        KB_COL_LIST
        KB_COL_UNION

    ctypedef struct kb_avro_node:
        int32_t op, col, child, count, aux, min_bytes

    ctypedef struct kb_avro_colspec:
        int32_t kind, width, child, count

    ctypedef struct kb_avro_program:
        const kb_avro_node *nodes
        const int32_t *children
        const int32_t *table
        const uint8_t *defaults
        const int64_t *default_spans
        int32_t root
        int32_t n_nodes, n_children, n_table, n_defaults
        int64_t n_default_bytes

    ctypedef struct kb_avro_column:
        uint8_t *valid
        uint8_t *data
        int32_t *offsets
        int8_t *type_ids
        int64_t length, nulls, bytes, cap, data_cap

    ctypedef struct kb_avro_columns:
        const kb_avro_colspec *specs
        const int32_t *column_children
        int32_t n_columns, root
        kb_avro_column *cols
        int64_t *saved

    enum: KB_AVRO_NO_MEMORY
    enum: KB_AVRO_TOO_LARGE
    enum: KB_FRAME_MAX_INDEXES

    int kb_avro_check(const kb_avro_program *p, const kb_avro_columns *c, int32_t *where)
    int kb_avro_columns_init(kb_avro_columns *c, int64_t rows_hint)
    void kb_avro_columns_free(kb_avro_columns *c)
    int kb_avro_decode(const kb_avro_program *p, kb_avro_columns *c, const uint8_t *data, size_t start, size_t len,
                       int allow_trailing, kb_fault *f)
    int kb_avro_append_null(kb_avro_columns *c)

    ctypedef enum kb_framing:
        KB_FRAMING_CONFLUENT
        KB_FRAMING_CONFLUENT_PROTOBUF
        KB_FRAMING_GLUE

    ctypedef struct kb_frame:
        int64_t schema_id
        int32_t payload
        int32_t index_count
        int32_t compression

    int kb_read_frame(const uint8_t *data, size_t len, kb_framing framing, kb_frame *out, int32_t *indexes,
                      int32_t max_indexes, kb_fault *f)


AVRO_OPS = {"NULL": KB_AVRO_NULL, "BOOLEAN": KB_AVRO_BOOLEAN, "INT": KB_AVRO_INT, "LONG": KB_AVRO_LONG,
            "FLOAT": KB_AVRO_FLOAT, "DOUBLE": KB_AVRO_DOUBLE, "BYTES": KB_AVRO_BYTES, "STRING": KB_AVRO_STRING,
            "FIXED": KB_AVRO_FIXED, "ENUM": KB_AVRO_ENUM, "RECORD": KB_AVRO_RECORD, "ARRAY": KB_AVRO_ARRAY,
            "MAP": KB_AVRO_MAP, "UNION": KB_AVRO_UNION, "BRANCH": KB_AVRO_BRANCH, "DEFAULT": KB_AVRO_DEFAULT,
            "MISMATCH": KB_AVRO_MISMATCH, "DECIMAL_BYTES": KB_AVRO_DECIMAL_BYTES,
            "DECIMAL_FIXED": KB_AVRO_DECIMAL_FIXED}
"""The native decoder's node operations (kb_avro_op), for pykbatch.values.avro_program."""
AVRO_COLUMN_KINDS = {"NULL": KB_COL_NULL, "BOOL": KB_COL_BOOL, "INT32": KB_COL_INT32, "INT64": KB_COL_INT64,
                     "FLOAT32": KB_COL_FLOAT32, "FLOAT64": KB_COL_FLOAT64, "BINARY": KB_COL_BINARY,
                     "FIXED": KB_COL_FIXED, "DECIMAL": KB_COL_DECIMAL, "STRUCT": KB_COL_STRUCT, "LIST": KB_COL_LIST,
                     "UNION": KB_COL_UNION}
"""The native decoder's column kinds (kb_col_kind)."""
FRAMINGS = {"confluent": KB_FRAMING_CONFLUENT, "confluent-protobuf": KB_FRAMING_CONFLUENT_PROTOBUF,
            "glue": KB_FRAMING_GLUE}
"""The schema registries' wire formats kb_read_frame reads."""


cdef kb_framing _framing(str framing) except *:
    if framing not in FRAMINGS:
        raise ValueError(f"unknown framing {framing!r}: one of {sorted(FRAMINGS)}")
    return <kb_framing> FRAMINGS[framing]


def read_frame(value, str framing="confluent"):
    """The framing of one value: ``(schema_id, payload_start, message_indexes)``; raises
    ``InvalidRecordError`` with the rule (value.schema_framing, value.header_truncated,
    value.message_index) for a value not framed so."""
    cdef const uint8_t *p
    cdef int32_t n = _blob(_as_bytes(value, "a value"), &p)
    cdef kb_frame fr
    cdef kb_fault f
    cdef int32_t indexes[KB_FRAME_MAX_INDEXES]
    if p == NULL:
        raise ValueError("a null value has no framing")
    if kb_read_frame(p, n, _framing(framing), &fr, indexes, KB_FRAME_MAX_INDEXES, &f):
        _raise_fault(&f, 0)
    return fr.schema_id, fr.payload, [indexes[i] for i in range(fr.index_count)]


def read_frames(values, str framing="confluent"):
    """The framing of every value of an Arrow binary column: ``(schema_ids int64, payloads int32,
    rules int32, positions int64, args int64[n, 3])``; rules[i] is 0 for a framed value, -1 for a
    null one, else the catalogue index of the fault at positions[i]."""
    import numpy as np
    cdef _Binary v = _Binary(values)
    cdef Py_ssize_t n = len(values), i
    ids = np.zeros(n, np.int64)
    payloads = np.zeros(n, np.int32)
    rules = np.zeros(n, np.int32)
    positions = np.zeros(n, np.int64)
    args = np.zeros((n, 3), np.int64)
    cdef int64_t[::1] ids_v = ids
    cdef int32_t[::1] pay_v = payloads
    cdef int32_t[::1] rule_v = rules
    cdef int64_t[::1] pos_v = positions
    cdef int64_t[:, ::1] args_v = args
    cdef kb_framing how = _framing(framing)
    cdef kb_frame fr
    cdef kb_fault f
    cdef const uint8_t *p
    cdef int32_t length
    cdef int32_t indexes[KB_FRAME_MAX_INDEXES]
    with nogil:
        for i in range(n):
            length = v.get(i, &p)
            if length < 0:
                rule_v[i] = -1
                continue
            if kb_read_frame(p, length, how, &fr, indexes, KB_FRAME_MAX_INDEXES, &f):
                rule_v[i] = <int32_t> f.rule
                pos_v[i] = <int64_t> f.pos
                args_v[i, 0] = f.args[0]
                args_v[i, 1] = f.args[1]
                args_v[i, 2] = f.args[2]
                continue
            ids_v[i] = fr.schema_id
            pay_v[i] = fr.payload
    return ids, payloads, rules, positions, args


cdef class AvroColumns:
    """The Arrow arrays one decode fills (kb_avro_columns), released when the last Arrow array
    made of them goes."""
    cdef kb_avro_columns c
    cdef object specs, children

    def __cinit__(self, specs, column_children, int32_t root, int64_t rows_hint=0):
        import numpy as np
        self.specs = np.ascontiguousarray(specs, np.int32)
        self.children = np.ascontiguousarray(column_children, np.int32)
        cdef const int32_t[:, ::1] s = self.specs
        cdef const int32_t[::1] ch = self.children
        if s.shape[1] != 4 or s.shape[0] == 0:
            raise ValueError("column specs are (kind, width, child, count) rows")
        self.c.specs = <const kb_avro_colspec *> &s[0, 0]
        self.c.column_children = &ch[0]
        self.c.n_columns = <int32_t> s.shape[0]
        self.c.root = root
        if ch.shape[0] < s.shape[0]:  # kb_avro_check bounds members by the column count
            raise ValueError("column_children has fewer entries than there are columns")
        if kb_avro_columns_init(&self.c, rows_hint):
            raise MemoryError("no memory for the value columns")

    def __dealloc__(self):
        kb_avro_columns_free(&self.c)

    cdef object _buffer(self, void *p, int64_t nbytes):
        import pyarrow as pa
        return pa.foreign_buffer(<uintptr_t> p, nbytes, self) if p != NULL and nbytes else None

    def column(self, int32_t i):
        """Column i as ``(length, nulls, validity, data, offsets, type_ids)`` Arrow buffers (None
        where the column has none), sized to its length."""
        if i < 0 or i >= self.c.n_columns:
            raise IndexError(i)
        cdef kb_avro_column *col = &self.c.cols[i]
        cdef const kb_avro_colspec *s = &self.c.specs[i]
        cdef int64_t n = col.length, width = 0
        if s.kind == KB_COL_INT32 or s.kind == KB_COL_FLOAT32:
            width = 4
        elif s.kind == KB_COL_INT64 or s.kind == KB_COL_FLOAT64:
            width = 8
        elif s.kind == KB_COL_FIXED or s.kind == KB_COL_DECIMAL:
            width = s.width
        data_bytes = col.bytes if s.kind == KB_COL_BINARY else ((n + 7) // 8 if s.kind == KB_COL_BOOL else n * width)
        import pyarrow as pa
        empty = pa.py_buffer(bytes(8))  # a buffer where Arrow wants one and nothing was written
        has_data = s.kind == KB_COL_BINARY or s.kind == KB_COL_BOOL or width > 0
        data = (self._buffer(col.data, data_bytes) or empty) if has_data else None
        offsets = None
        if s.kind == KB_COL_BINARY or s.kind == KB_COL_LIST:
            offsets = self._buffer(col.offsets, (n + 1) * 4) or empty
        elif s.kind == KB_COL_UNION:
            offsets = self._buffer(col.offsets, n * 4) or empty
        type_ids = (self._buffer(col.type_ids, n) or empty) if s.kind == KB_COL_UNION else None
        validity = self._buffer(col.valid, (n + 7) // 8) if col.nulls and s.kind != KB_COL_NULL else None
        return n, col.nulls, validity, data, offsets, type_ids

    @property
    def rows(self) -> int:
        return self.c.cols[self.c.root].length


cdef class _Programs:
    """kb_avro_program structs over the numpy tables of pykbatch.values.avro_program.Program
    objects (held, so the pointers stay good)."""
    cdef kb_avro_program *p
    cdef Py_ssize_t n
    cdef list held

    def __cinit__(self, programs):
        self.n = len(programs)
        self.held = list(programs)
        self.p = <kb_avro_program *> calloc(max(self.n, 1), sizeof(kb_avro_program))
        if self.p == NULL:
            raise MemoryError()
        cdef const int32_t[:, ::1] nodes
        cdef const int32_t[::1] children, table
        cdef const int64_t[:, ::1] spans
        cdef const uint8_t[::1] defaults
        for k, prog in enumerate(programs):
            nodes = prog.nodes
            children = prog.children
            table = prog.table
            spans = prog.default_spans
            if nodes.shape[1] != 6 or spans.shape[1] != 2:
                raise ValueError("program nodes are rows of 6, default spans rows of 2")
            self.p[k].nodes = <const kb_avro_node *> &nodes[0, 0]
            self.p[k].n_nodes = <int32_t> nodes.shape[0]
            self.p[k].children = &children[0]
            self.p[k].n_children = <int32_t> children.shape[0]
            self.p[k].table = &table[0]
            self.p[k].n_table = <int32_t> table.shape[0]
            self.p[k].default_spans = &spans[0, 0]
            self.p[k].n_defaults = <int32_t> prog.n_defaults
            self.p[k].defaults = <const uint8_t *> _EMPTY_BYTES
            self.p[k].n_default_bytes = len(prog.defaults)
            if len(prog.defaults):
                defaults = prog.defaults
                self.p[k].defaults = &defaults[0]
            self.p[k].root = prog.root

    def __dealloc__(self):
        free(self.p)


def avro_decode(values, payloads, programs_of_rows, programs, AvroColumns out, bint allow_trailing=False):
    """Decode every value of an Arrow binary column into ``out``: row i's datum starts at byte
    payloads[i] and is read by programs[programs_of_rows[i]] (-1: no datum, a null row).  Returns
    ``(rules int32, positions int64, args int64[n, 3])`` for the rows that failed (rules[i] the
    fault's catalogue index, else 0); a failed row is a null in ``out``, nothing of it written."""
    import numpy as np
    cdef _Binary v = _Binary(values)
    cdef _Programs progs = _Programs(programs)
    cdef const int32_t[::1] pay = np.ascontiguousarray(payloads, np.int32)
    cdef const int32_t[::1] which = np.ascontiguousarray(programs_of_rows, np.int32)
    cdef Py_ssize_t n = len(values), i
    cdef int32_t where
    for k in range(progs.n):
        if kb_avro_check(&progs.p[k], &out.c, &where):
            raise ValueError(f"program {k} is not sound at {'node ' + str(where) if where >= 0 else 'column ' + str(-2 - where)}")
    if which.shape[0] != n or pay.shape[0] != n:
        raise ValueError("one payload start and one program a row")
    rules = np.zeros(n, np.int32)
    positions = np.zeros(n, np.int64)
    args = np.zeros((n, 3), np.int64)
    cdef int32_t[::1] rule_v = rules
    cdef int64_t[::1] pos_v = positions
    cdef int64_t[:, ::1] args_v = args
    cdef const uint8_t *p
    cdef int32_t length, pi
    cdef int rc = 0
    cdef kb_fault f
    with nogil:
        for i in range(n):
            pi = which[i]
            length = v.get(i, &p)
            if pi < 0 or pi >= progs.n or length < 0 or pay[i] < 0 or pay[i] > length:
                rc = kb_avro_append_null(&out.c)
            else:
                rc = kb_avro_decode(&progs.p[pi], &out.c, p, <size_t> pay[i], <size_t> length, allow_trailing, &f)
                if rc == -1:
                    rule_v[i] = <int32_t> f.rule
                    pos_v[i] = <int64_t> f.pos
                    args_v[i, 0] = f.args[0]
                    args_v[i, 1] = f.args[1]
                    args_v[i, 2] = f.args[2]
                    rc = kb_avro_append_null(&out.c)
            if rc != 0:
                break
    if rc == KB_AVRO_TOO_LARGE:
        raise OverflowError("a decoded column passed 2^31 - 1 entries or bytes: decode fewer values at a time")
    if rc != 0:
        raise MemoryError("no memory for the value columns")
    return rules, positions, args
