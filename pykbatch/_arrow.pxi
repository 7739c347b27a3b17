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
                        src = _View(dec.records_of(&h, e.pos + KB_V2_HEADER_SIZE, e.size - KB_V2_HEADER_SIZE))
                    except _errors.KafkaDataError as exc:
                        exc.offset -= row_start[row]
                        raise
                    rstart, rlimit = 0, src.length
                if h.record_count > 0 and kb_columns_measure(
                        src.ptr, rstart, rlimit, h.record_count,
                        kb_v2_consumer_reader(h.attributes & KB_ATTR_CODEC_MASK), &rz, &f, &rec_index) != 0:
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
    # the Arrow data buffers views point into: the input first, then each decompressed payload once
    view_sources, index_of = [v], {id(v): 0}
    for s in b_src:
        if id(s) not in index_of:
            index_of[id(s)] = len(view_sources)
            view_sources.append(s)
    buffers = np.array([index_of[id(s)] for s in b_src], np.int32)
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
    header_lists = pa.ListArray.from_arrays(pa.array(header_offsets), header_struct)

    per_batch_counts = np.array(b_count, np.int64)
    def per_batch(values, dtype):  # one value per batch -> one per record
        return np.repeat(np.array(values, dtype), per_batch_counts)
    attrs = np.array(b_attrs, np.int16)
    ts_type = pa.DictionaryArray.from_arrays(per_batch(b_tstype, np.int8),
                                             pa.array(columns.TIMESTAMP_TYPES))
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


cdef object _arrow_buffer(_View s):
    import pyarrow as pa
    return pa.py_buffer(s.mv) if s.length else pa.py_buffer(b"")


cdef inline int64_t *_ptr64(arr):
    cdef int64_t[::1] m = arr
    return &m[0] if m.shape[0] else NULL

cdef inline int32_t *_ptr32(arr):
    cdef int32_t[::1] m = arr
    return &m[0] if m.shape[0] else NULL

cdef inline uint8_t *_ptr8(arr):
    cdef uint8_t[::1] m = arr
    return &m[0] if m.shape[0] else NULL
