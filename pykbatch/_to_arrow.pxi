# Arrow columns: to_arrow and the row-wise decoder the Spark UDFs use.
# Included by _native.pyx: one module, one file per concern.

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


cdef class _EntryTable:
    """The batches a decode measured, in order: one ``kb_column_batch`` each (all the fill needs),
    and the ``_View`` its records are in (the input, or its payload decompressed once), kept
    alive until the columns are filled."""
    cdef kb_column_batch *b
    cdef Py_ssize_t n, cap
    cdef list sources

    def __cinit__(self):
        self.sources = []

    def __dealloc__(self):
        free(self.b)

    cdef kb_column_batch *add(self, _View records, size_t start, size_t limit, int entry,
                              int64_t position) except NULL:
        cdef kb_column_batch *grown
        if self.n == self.cap:
            grown = <kb_column_batch *> realloc(self.b, max(16, 2 * self.cap) * sizeof(kb_column_batch))
            if grown == NULL:
                raise MemoryError()
            self.b, self.cap = grown, max(16, 2 * self.cap)
        cdef kb_column_batch *b = &self.b[self.n]
        memset(b, 0, sizeof(kb_column_batch))
        b.records, b.start, b.limit, b.entry, b.position = records.ptr, start, limit, entry, position
        self.sources.append(records)
        self.n += 1
        return b

    cdef void truncate(self, Py_ssize_t n):
        """Forgets the batches from the n-th on (a row that failed adds none)."""
        self.n = n
        del self.sources[n:]


def _decode_rows(_View v, starts, ends, valid, bint verify_crc, bint raise_errors, bint zero_copy=False,
                 size_t max_decompressed_bytes=_codecs.DEFAULT_MAX_DECOMPRESSED):
    """Decode the records of every row v[starts[i]:ends[i]] (rows with valid[i] == 0 are null).

    Returns (table of all records, int32 record counts per row, bool array of rows that
    could not be decoded).  A row that fails contributes no records; with raise_errors the
    first failure raises instead."""
    import numpy as np
    import pyarrow as pa
    from pykbatch import columns

    cdef const int64_t[::1] row_start = starts
    cdef const int64_t[::1] row_end = ends
    cdef Py_ssize_t n_input = row_start.shape[0], row, row_first
    cdef kb_entry e
    cdef kb_fault f
    cdef kb_entry_status st
    cdef kb_column_sizes z, rz
    cdef kb_v2_header h
    cdef int32_t rec_index
    cdef size_t pos, end
    cdef int entry, codec
    cdef _View src
    cdef Py_ssize_t payload
    cdef LegacyBatch lb
    cdef kb_column_batch *b
    cdef _EntryTable table = _EntryTable()
    cdef _Decompressor dec = _Decompressor(v, max_decompressed_bytes)
    memset(&z, 0, sizeof(z))
    counts = np.zeros(n_input, np.int32)
    failed = np.zeros(n_input, np.bool_)
    cdef int32_t[::1] count_view = counts
    for row in range(n_input):
        if valid is not None and not valid[row]:
            continue
        memset(&rz, 0, sizeof(rz))
        row_first = table.n
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
                    if kb_legacy_columns_measure(lb._rec.ptr, lb._rstart, lb._rlimit, &rz, &f, &rec_index) != 0:
                        _raise_fault(&f, 0, lb._payload)
                    b = table.add(lb._rec, lb._rstart, lb._rlimit, entry, e.pos - row_start[row])
                    b.magic, b.m, b.offset_base, b.first_offset = lb.m.magic, lb.m, lb._base, lb._first
                else:
                    _check_decodable(v, &e, verify_crc, &h, row_start[row])
                    codec = h.attributes & KB_ATTR_CODEC_MASK
                    src, payload = v, -1
                    if codec != KB_CODEC_NONE and h.record_count > 0:
                        payload = e.pos + KB_V2_HEADER_SIZE - row_start[row]
                        try:
                            src = _View(dec.records_of(&h, e.pos + KB_V2_HEADER_SIZE, e.size - KB_V2_HEADER_SIZE))
                        except _errors.KafkaDataError as exc:
                            exc.offset -= row_start[row]
                            raise
                    b = table.add(src, 0 if payload >= 0 else e.pos + KB_V2_HEADER_SIZE,
                                  src.length if payload >= 0 else e.pos + e.size, entry, e.pos - row_start[row])
                    b.magic, b.h, b.count = 2, h, max(h.record_count, 0)
                    if b.count and kb_columns_measure(src.ptr, b.start, b.limit, b.count,
                                                      kb_v2_consumer_reader(codec), &rz, &f, &rec_index) != 0:
                        _raise_fault(&f, 0 if payload >= 0 else -<Py_ssize_t> row_start[row], payload)
                pos = e.pos + e.size
                entry += 1
        except _errors.KafkaDataError:
            if raise_errors:
                raise
            failed[row] = True
            table.truncate(row_first)
            continue
        count_view[row] = <int32_t> rz.records
        z.records += rz.records
        z.key_bytes += rz.key_bytes
        z.value_bytes += rz.value_bytes
        z.headers += rz.headers
        z.header_key_bytes += rz.header_key_bytes
        z.header_value_bytes += rz.header_value_bytes
    # views point into the input (buffer 0) or into a decompressed payload (buffers 1..)
    views = zero_copy and v.length <= INT32_MAX and all((<_View> s).length <= INT32_MAX for s in table.sources)
    if views:
        z.key_bytes = z.value_bytes = 0
    for name, n in (("key", z.key_bytes), ("value", z.value_bytes), ("header key", z.header_key_bytes),
                    ("header value", z.header_value_bytes), ("header", z.headers)):
        if n > INT32_MAX:
            raise OverflowError(f"{name} bytes ({n}) exceed one Arrow binary column; decode in smaller parts")

    n_rows, n_headers = z.records, z.headers
    cols = {name: np.empty(n_rows, dtype) for name, dtype in (
        ("offset", np.int64), ("timestamp", np.int64), ("sequence", np.int32), ("batch_index", np.int32),
        ("batch_position", np.int64), ("base_offset", np.int64), ("partition_leader_epoch", np.int32),
        ("producer_id", np.int64), ("producer_epoch", np.int16), ("is_transactional", np.uint8),
        ("is_control", np.uint8), ("timestamp_type", np.int8))}
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
    c.offset = _ptr64(cols["offset"]); c.timestamp = _ptr64(cols["timestamp"])
    c.sequence = _ptr32(cols["sequence"]); c.batch_index = _ptr32(cols["batch_index"])
    c.batch_position = _ptr64(cols["batch_position"]); c.base_offset = _ptr64(cols["base_offset"])
    c.partition_leader_epoch = _ptr32(cols["partition_leader_epoch"]); c.producer_id = _ptr64(cols["producer_id"])
    c.producer_epoch = _ptr16(cols["producer_epoch"])
    c.is_transactional = _ptr8(cols["is_transactional"]); c.is_control = _ptr8(cols["is_control"])
    c.timestamp_type = <int8_t *> _ptr8(cols["timestamp_type"].view(np.uint8))
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
    # the Arrow data buffers views point into: the input first, then each decompressed payload once
    view_sources, index_of = [v], {id(v): 0}
    cdef Py_ssize_t k
    for k, s in enumerate(table.sources):
        if id(s) not in index_of:
            index_of[id(s)] = len(view_sources)
            view_sources.append(s)
        table.b[k].buffer = index_of[id(s)]
    with nogil:  # pure C from here: other threads run while the columns fill
        for k in range(table.n):
            kb_columns_fill(&table.b[k], &c)

    def binary(typ, n, valid, offs, data):
        return pa.Array.from_buffers(typ, n, [pa.py_buffer(valid) if valid is not None else None,
                                              pa.py_buffer(offs), pa.py_buffer(data)])

    if views:
        data_buffers = [_arrow_buffer(s) for s in view_sources]
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
    header_struct = pa.StructArray.from_arrays([hkeys, hvalues], fields=list(columns.HEADER))
    cols.update(key=keys, value=values, headers=pa.ListArray.from_arrays(pa.array(header_offsets), header_struct))
    cols["is_transactional"] = cols["is_transactional"].view(np.bool_)
    cols["is_control"] = cols["is_control"].view(np.bool_)
    cols["timestamp_type"] = pa.DictionaryArray.from_arrays(cols["timestamp_type"], pa.array(columns.TIMESTAMP_TYPES))
    table_out = pa.table({name: cols[name] for name in _TABLE_COLUMNS})
    return table_out, counts, failed


# to_arrow's columns, in order (types: pykbatch.columns.RECORD; timestamp_type dictionary-encoded)
_TABLE_COLUMNS = ("offset", "timestamp", "key", "value", "headers", "sequence", "batch_index", "batch_position",
                  "base_offset", "partition_leader_epoch", "producer_id", "producer_epoch", "is_transactional",
                  "is_control", "timestamp_type")


cdef object _arrow_buffer(_View s):
    import pyarrow as pa
    return pa.py_buffer(s.mv) if s.length else pa.py_buffer(b"")


cdef inline int64_t *_ptr64(arr):
    cdef int64_t[::1] m = arr
    return &m[0] if m.shape[0] else NULL

cdef inline int16_t *_ptr16(arr):
    cdef int16_t[::1] m = arr
    return &m[0] if m.shape[0] else NULL

cdef inline int32_t *_ptr32(arr):
    cdef int32_t[::1] m = arr
    return &m[0] if m.shape[0] else NULL

cdef inline uint8_t *_ptr8(arr):
    cdef uint8_t[::1] m = arr
    return &m[0] if m.shape[0] else NULL
