# Arrow columns: to_arrow and the row-wise decoder the Spark UDFs use.
# Included by _native.pyx: one module, one file per concern.

def to_arrow(buf, *, bint verify_crc=True, bint zero_copy=False, bint spark_time=False, ranges=None):
    """Decode every record of ``buf`` into a ``pyarrow.Table`` (one row per record,
    with the batch columns a user filters on), without a Python object per record.

    ``zero_copy=True`` makes ``key`` and ``value`` Arrow ``binary_view`` columns that point
    into ``buf`` instead of copying it (much faster for large values; ``buf`` is kept alive
    by the table and must not be modified while the table is in use; buffers over 2 GiB
    are copied).  ``spark_time``: ``timestamp`` and ``timestampType`` as Spark's Kafka source has them
    (microseconds, UTC; Kafka's type id), filled so by the core (``columns.RECORDS_SPARK_TIME``).
    ``ranges``: (first_offset, end_offset, first_timestamp, end_timestamp), None for an open side:
    only the records in range are rows (kb_ranges_keeps_record; the others are still checked).
    Raises the first problem met (``validate`` lists them all)."""
    import numpy as np
    cdef _View v = _view(buf)
    table, _, failed = _decode_rows(v, np.zeros(1, np.int64), np.array([v.length], np.int64), None,
                                    verify_crc, True, zero_copy, spark_time=spark_time, ranges=ranges)
    return table


cdef class _ColumnStore:
    """The C arrays one decode fills (``kb_column_store``), released when the last Arrow array
    made of them goes."""
    cdef kb_column_store s

    def __dealloc__(self):
        kb_column_store_free(&self.s)

    cdef object buffer(self, void *p, int64_t nbytes):
        import pyarrow as pa
        return pa.foreign_buffer(<uintptr_t> p, nbytes, self) if nbytes else pa.py_buffer(b"")


def _decode_rows(_View v, starts, ends, valid, bint verify_crc, bint raise_errors, bint zero_copy=False,
                 size_t max_decompressed_bytes=_codecs.DEFAULT_MAX_DECOMPRESSED, bint spark_time=False,
                 ranges=None):
    """Decode the records of every row v[starts[i]:ends[i]] (rows with valid[i] == 0 are null).

    Returns (table of all records, int32 record counts per row, bool array of rows that
    could not be decoded).  A row that fails contributes no records; with raise_errors the
    first failure raises instead."""
    import numpy as np

    cdef const int64_t[::1] row_start = starts
    cdef const int64_t[::1] row_end = ends
    cdef Py_ssize_t n_input = row_start.shape[0], row
    cdef kb_entry e
    cdef kb_fault f
    cdef kb_entry_status st
    cdef kb_v2_header h
    cdef kb_column_batch b
    cdef int32_t rec_index
    cdef size_t pos, end
    cdef int entry, codec, rc
    cdef int64_t expect = 0, first_row, first_header, shift
    cdef _View src
    cdef Py_ssize_t payload
    cdef LegacyBatch lb
    cdef _Decompressor dec = _Decompressor(v, max_decompressed_bytes)
    cdef _ColumnStore store = _ColumnStore()
    cdef kb_columns *c = &store.s.c
    cdef kb_ranges in_range
    if ranges is not None:
        _ranges_of(ranges, &in_range)
    # views point into the input (buffer 0) or into a decompressed payload (buffers 1..)
    store.s.views = zero_copy and v.length <= INT32_MAX and max_decompressed_bytes <= INT32_MAX
    store.s.c.layout = KB_LAYOUT_SPARK_TIME if spark_time else 0
    sources = [v]
    counts = np.zeros(n_input, np.int32)
    failed = np.zeros(n_input, np.bool_)
    cdef int32_t[::1] count_view = counts
    for row in range(n_input):
        if valid is not None and not valid[row]:
            continue
        first_row, first_header = c.row, c.header_row
        pos = <size_t> row_start[row]
        end = <size_t> row_end[row]
        entry = 0
        try:
            while True:
                # the validator's walk: a size that lies (sound entries follow) is a fault, not a tail
                st = kb_next_entry_resync(v.ptr, end, pos, KB_RESYNC_LYING_SIZES, &e, &f)
                if st == KB_ENTRY_END or st == KB_ENTRY_TRUNCATED:
                    break
                if st == KB_ENTRY_CORRUPT or st == KB_ENTRY_LOST:
                    _raise_fault(&f, -<Py_ssize_t> row_start[row])
                memset(&b, 0, sizeof(b))
                b.entry, b.position = entry, e.pos - row_start[row]
                if ranges is not None:
                    b.ranges = &in_range
                if e.magic < 2:
                    lb = _legacy_entry(v, &e, verify_crc, entry, dec)
                    lb._load()
                    src, shift, payload = lb._rec, 0, lb._payload
                    b.start, b.limit = lb._rstart, lb._rlimit
                    b.magic, b.m, b.offset_base, b.first_offset = lb.m.magic, lb.m, lb._base, lb._first
                else:
                    _read_v2_entry(v, &e, False, &h, row_start[row])
                    codec = h.attributes & KB_ATTR_CODEC_MASK
                    # an uncompressed batch's CRC is checked as it is filled, while its bytes are
                    # in cache; a compressed one's before its payload is opened
                    b.crc_pending = verify_crc and codec == KB_CODEC_NONE
                    if verify_crc and not b.crc_pending:
                        _read_v2_entry(v, &e, True, &h, row_start[row])
                    if kb_v2_check_walkable(&h, e.pos, &f) != 0:
                        _raise_fault(&f, -<Py_ssize_t> row_start[row])
                    src, shift, payload = v, -<int64_t> row_start[row], -1
                    b.start, b.limit = e.pos + KB_V2_HEADER_SIZE, e.pos + e.size
                    if codec != KB_CODEC_NONE and h.record_count > 0:
                        payload = e.pos + KB_V2_HEADER_SIZE - row_start[row]
                        try:
                            src = _View(dec.records_of(&h, e.pos + KB_V2_HEADER_SIZE, e.size - KB_V2_HEADER_SIZE))
                        except _errors.KafkaDataError as exc:
                            exc.offset -= row_start[row]
                            raise
                        shift, b.start, b.limit = 0, 0, src.length
                    b.magic, b.h, b.count = 2, h, max(h.record_count, 0)
                b.records = src.ptr
                if store.s.views and src is not v:  # views point into it: it lives as long as the table
                    b.buffer = len(sources)
                    sources.append(src)
                if expect == 0:  # the arrays are first sized for an input of batches like this one
                    expect = max(1, v.length // max(e.size, 1))
                with nogil:
                    rc = kb_columns_add(&store.s, &b, expect, &f, &rec_index)
                expect = 1
                if rc == -1:
                    _raise_fault(&f, shift, payload)
                elif rc == KB_COLUMNS_NO_MEMORY:
                    raise MemoryError("pykbatch: no memory for the decoded columns")
                elif rc == KB_COLUMNS_TOO_LARGE:
                    raise OverflowError("the records exceed one Arrow binary column (2^31 - 1 bytes or headers); "
                                        "decode in smaller parts")
                pos = e.pos + e.size
                entry += 1
        except _errors.KafkaDataError:
            if raise_errors:
                raise
            failed[row] = True
            kb_columns_rewind(c, first_row, first_header)  # the row gives no records
            continue
        count_view[row] = <int32_t> (c.row - first_row)
    if kb_column_store_trim(&store.s) != 0:
        raise MemoryError("pykbatch: no memory for the decoded columns")
    return _table_of(store, sources), counts, failed


_ARROW = None  # {(views, spark time): schema}, the timestamp_type dictionary; made on first use


cdef tuple _arrow_types():
    global _ARROW
    if _ARROW is None:
        import pyarrow as pa
        from pykbatch import columns
        _ARROW = ({(False, False): columns.RECORDS, (True, False): columns.RECORDS_VIEWS,
                   (False, True): columns.RECORDS_SPARK_TIME, (True, True): columns.RECORDS_SPARK_TIME_VIEWS},
                  pa.array(columns.TIMESTAMP_TYPES))
    return _ARROW


cdef object _table_of(_ColumnStore store, list sources):
    """The Arrow table of a filled store (its arrays become the table's buffers, no copy)."""
    import pyarrow as pa
    from pykbatch import columns
    cdef kb_columns *c = &store.s.c
    cdef int64_t n = c.row, nh = c.header_row
    cdef bint views = store.s.views
    schemas, ts_dictionary = _arrow_types()
    cdef bint spark_time = c.layout & KB_LAYOUT_SPARK_TIME
    schema = schemas[(views, spark_time)]
    cdef int64_t bitmap = (n + 7) // 8
    A = pa.Array.from_buffers
    out = {}
    for name, p, width in (("offset", <uintptr_t> c.offset, 8), ("timestamp", <uintptr_t> c.timestamp, 8),
                           ("timestampType", <uintptr_t> c.timestamp_type_id, 4),
                           ("sequence", <uintptr_t> c.sequence, 4), ("batch_index", <uintptr_t> c.batch_index, 4),
                           ("batch_position", <uintptr_t> c.batch_position, 8),
                           ("base_offset", <uintptr_t> c.base_offset, 8),
                           ("partition_leader_epoch", <uintptr_t> c.partition_leader_epoch, 4),
                           ("producer_id", <uintptr_t> c.producer_id, 8),
                           ("producer_epoch", <uintptr_t> c.producer_epoch, 2)):
        if name in schema.names:
            out[name] = A(schema.field(name).type, n, [None, store.buffer(<void *> <uintptr_t> p, n * width)])
    out["is_transactional"] = A(pa.bool_(), n, [None, store.buffer(c.is_transactional, bitmap)])
    out["is_control"] = A(pa.bool_(), n, [None, store.buffer(c.is_control, bitmap)])
    if not spark_time:
        out["timestamp_type"] = pa.DictionaryArray.from_arrays(
            A(pa.int8(), n, [None, store.buffer(c.timestamp_type, n)]), ts_dictionary, safe=False)
    if views:
        data_buffers = [_arrow_buffer(s) for s in sources]
        out["key"] = A(pa.binary_view(), n, [store.buffer(c.key_valid, bitmap), store.buffer(c.key_views, 16 * n)]
                       + data_buffers)
        out["value"] = A(pa.binary_view(), n, [store.buffer(c.value_valid, bitmap),
                                               store.buffer(c.value_views, 16 * n)] + data_buffers)
    else:
        out["key"] = A(pa.binary(), n, [store.buffer(c.key_valid, bitmap), store.buffer(c.key_offsets, 4 * (n + 1)),
                                        store.buffer(c.key_data, c.key_offsets[n] if n else 0)])
        out["value"] = A(pa.binary(), n, [store.buffer(c.value_valid, bitmap),
                                          store.buffer(c.value_offsets, 4 * (n + 1)),
                                          store.buffer(c.value_data, c.value_offsets[n] if n else 0)])
    hkeys = A(pa.string(), nh, [None, store.buffer(c.hkey_offsets, 4 * (nh + 1)),
                                store.buffer(c.hkey_data, c.hkey_offsets[nh] if nh else 0)])
    hvalues = A(pa.binary(), nh, [store.buffer(c.hvalue_valid, (nh + 7) // 8),
                                  store.buffer(c.hvalue_offsets, 4 * (nh + 1)),
                                  store.buffer(c.hvalue_data, c.hvalue_offsets[nh] if nh else 0)])
    header_struct = A(columns.HEADER, nh, [None], children=[hkeys, hvalues])
    out["headers"] = A(schema.field("headers").type, n, [None, store.buffer(c.header_offsets, 4 * (n + 1))],
                       children=[header_struct])
    return pa.Table.from_arrays([out[f.name] for f in schema], schema=schema)


cdef object _arrow_buffer(_View s):
    import pyarrow as pa
    return pa.py_buffer(s.mv) if s.length else pa.py_buffer(b"")
