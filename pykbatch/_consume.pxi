# A consumer's one walk (kb_consume): fetched bytes -> the records a consumer is handed, as
# Spark's Kafka source's columns, and the spans of offsets they account for.
# Included by _native.pyx: one module, one file per concern.

_SPAN_KINDS = ("read", "compacted")  # kb_span_kind's names (pykbatch.live.fetched's span kinds)


def consume(buf, int64_t fetch_offset, *, str topic="t", int partition=0, bint committed=False,
            last_stable_offset=None, bint compacted=False, aborted=(),
            size_t max_decompressed_bytes=_codecs.DEFAULT_MAX_DECOMPRESSED):
    """One partition's fetched records read once (``kb_consume``): ``None`` when they hold
    something only the careful path settles (damage, v0/v1 messages, an offset gap on a topic
    that is not ``compacted``); else ``(table, next_offset, spans, entries, tail, aborted)``:
    the records a consumer at the isolation level is handed from ``fetch_offset`` on, in the live
    reader's columns (``pykbatch.columns.CONSUMED``); where the next fetch starts; the
    ``(first, last, kind)`` spans of offsets from the fetch offset on; complete entries walked;
    where an incomplete last entry starts (or None); the producers whose transactions are being
    dropped at the end.  ``aborted``: read_committed's ``(first offset, producer id)`` pairs."""
    import numpy as np
    cdef _View v = _view(buf)
    cdef _ColumnStore store = _ColumnStore()
    cdef _Decompressor dec = _Decompressor(v, max_decompressed_bytes)
    cdef kb_consume_opts o
    cdef kb_consume_result r
    cdef kb_consume_status st
    pairs = np.array(sorted(aborted), dtype=np.int64).reshape(-1) if aborted else np.zeros(2, np.int64)
    cdef const int64_t[::1] pair_view = pairs
    # kb_span's layout (the int kind padded to 8 bytes); a batch is at least 61 bytes; only r.span_count are read
    spans = np.empty(max(16, v.length // 64 + 2), np.dtype([("first", np.int64), ("last", np.int64), ("kind", np.int32), ("pad", np.int32)]))
    memset(&o, 0, sizeof(o))
    memset(&r, 0, sizeof(r))
    o.fetch_offset = fetch_offset
    o.committed = committed
    o.last_stable_offset = -1 if last_stable_offset is None else last_stable_offset
    o.compacted = compacted
    o.aborted = &pair_view[0]
    o.aborted_count = len(aborted)
    o.decompress = _decompress_cb
    o.ctx = <void *> dec
    r.spans = <kb_span *> <uintptr_t> spans.ctypes.data
    r.span_cap = spans.shape[0]
    if spans.itemsize != sizeof(kb_span):
        raise SystemError("pykbatch: kb_span does not have the layout _consume.pxi reads")
    store.s.c.layout = KB_LAYOUT_SPARK_TIME | KB_LAYOUT_SPARK_ONLY
    with nogil:
        st = kb_consume(v.ptr, v.length, &o, &store.s, &r)
    if st == KB_CONSUME_CAREFUL:
        return None
    if st == KB_CONSUME_NO_MEMORY:
        raise MemoryError("pykbatch: no memory for the decoded columns")
    if st == KB_CONSUME_TOO_LARGE:
        raise OverflowError("the records exceed one Arrow binary column (2^31 - 1 bytes or headers); "
                            "fetch less at once")
    if kb_column_store_trim(&store.s) != 0:
        raise MemoryError("pykbatch: no memory for the decoded columns")
    out_spans = [(int(a), int(b), _SPAN_KINDS[k]) for a, b, k, _ in spans[:r.span_count].tolist()]
    tail = None if r.tail == <size_t> -1 else r.tail
    return (_consumer_table(store, topic, partition), r.next_offset, out_spans, r.entries, tail,
            frozenset(r.aborted[i] for i in range(r.aborted_count)))


_CONSUMED = None


cdef object _consumer_table(_ColumnStore store, str topic, int partition):
    """The live reader's table of a store filled in Spark's layout (its arrays, no copy)."""
    import pyarrow as pa
    from pykbatch import columns
    global _CONSUMED
    if _CONSUMED is None:
        _CONSUMED = pa.schema(columns.CONSUMED)
    schema = _CONSUMED
    cdef kb_columns *c = &store.s.c
    cdef int64_t n = c.row, nh = c.header_row
    cdef int64_t bitmap = (n + 7) // 8
    A = pa.Array.from_buffers
    out = {
        "offset": A(schema.field("offset").type, n, [None, store.buffer(c.offset, n * 8)]),
        "timestamp": A(schema.field("timestamp").type, n, [None, store.buffer(c.timestamp, n * 8)]),
        "timestampType": A(schema.field("timestampType").type, n, [None, store.buffer(c.timestamp_type_id, n * 4)]),
        "leader_epoch": A(schema.field("leader_epoch").type, n, [None, store.buffer(c.partition_leader_epoch, n * 4)]),
        "key": A(schema.field("key").type, n, [store.buffer(c.key_valid, bitmap), store.buffer(c.key_offsets, 4 * (n + 1)),
                                               store.buffer(c.key_data, c.key_offsets[n] if n else 0)]),
        "value": A(schema.field("value").type, n, [store.buffer(c.value_valid, bitmap),
                                                   store.buffer(c.value_offsets, 4 * (n + 1)),
                                                   store.buffer(c.value_data, c.value_offsets[n] if n else 0)]),
        "topic": pa.repeat(pa.scalar(topic, schema.field("topic").type), n),
        "partition": pa.repeat(pa.scalar(partition, schema.field("partition").type), n),
    }
    hkeys = A(pa.string(), nh, [None, store.buffer(c.hkey_offsets, 4 * (nh + 1)),
                                store.buffer(c.hkey_data, c.hkey_offsets[nh] if nh else 0)])
    hvalues = A(pa.binary(), nh, [store.buffer(c.hvalue_valid, (nh + 7) // 8),
                                  store.buffer(c.hvalue_offsets, 4 * (nh + 1)),
                                  store.buffer(c.hvalue_data, c.hvalue_offsets[nh] if nh else 0)])
    header_struct = A(columns.HEADER, nh, [None], children=[hkeys, hvalues])
    out["headers"] = A(schema.field("headers").type, n, [None, store.buffer(c.header_offsets, 4 * (n + 1))],
                       children=[header_struct])
    return pa.Table.from_arrays([out[f.name] for f in schema], schema=schema)


def fetch_end(buf, int64_t position, last_stable_offset=None):
    """Where the next fetch of a partition will most likely start once ``buf`` (its fetched
    records) is read: after the last complete entry's last offset (before the last stable
    offset, when given), read from the headers alone.  A guess to send that fetch early
    (prefetch); the walk's ``next_offset`` decides -- damage makes them differ."""
    cdef _View v = _view(buf)
    cdef kb_entry e
    cdef kb_fault f
    cdef size_t pos = 0
    cdef int64_t end = position, last
    cdef kb_v2_header h
    cdef int64_t lso = -1 if last_stable_offset is None else last_stable_offset
    with nogil:
        while kb_next_entry(v.ptr, v.length, pos, &e, &f) == KB_ENTRY_OK:
            if e.magic >= 2:
                if e.size < KB_V2_HEADER_SIZE:
                    break
                kb_v2_read_header(v.ptr + e.pos, &h)
                if lso >= 0 and h.base_offset >= lso:
                    break
                last = kb_wrap_add64(h.base_offset, h.last_offset_delta)
            else:
                last = <int64_t> kb_load_be64(v.ptr + e.pos)  # a v0/v1 entry's offset field is its last
            if last + 1 > end:
                end = last + 1
            pos = e.pos + e.size
    return end


cdef inline object _bytes_at(_Binary column, int64_t i):
    cdef const uint8_t *p
    cdef int32_t n = column.get(i, &p)
    return None if n < 0 else PyBytes_FromStringAndSize(<const char *> p, n)


cdef inline int64_t _millis(int64_t micros) nogil:
    """Epoch microseconds back to milliseconds, rounding down (the module divides as C does)."""
    cdef int64_t ms = micros // 1000
    return ms - 1 if micros % 1000 < 0 else ms


def consumer_records(table, record):
    """The rows of a live reader's table (``pykbatch.columns.CONSUMED``) as ``record`` tuples
    (``ConsumedRecord``): epoch milliseconds, headers as ``(key, value)`` pairs (a shared empty
    tuple when a record has none), read from the Arrow buffers in one pass."""
    import numpy as np
    out = []
    new = tuple.__new__
    cdef Py_ssize_t i, n, h, h0, h1
    cdef const int64_t[::1] offset
    cdef const int64_t[::1] micros
    cdef const int32_t[::1] ts_type
    cdef const int32_t[::1] epoch
    cdef const int32_t[::1] partition
    cdef const int32_t[::1] header_at
    cdef _Binary topics, keys, values, hkeys, hvalues
    empty = ()
    cdef const uint8_t *name
    cdef const uint8_t *last_name = NULL
    cdef int32_t name_len, last_len = -1
    import gc
    collecting = gc.isenabled()
    gc.disable()  # a million young tuples would set off collections that find nothing to free
    try:
        for batch in table.to_batches():
            n = batch.num_rows
            if not n:
                continue
            offset = batch.column("offset").to_numpy()
            micros = batch.column("timestamp").cast("int64").to_numpy()
            ts_type = batch.column("timestampType").to_numpy()
            epoch = batch.column("leader_epoch").to_numpy()
            partition = batch.column("partition").to_numpy()
            # (_Binary: _produce.pxi's reader of an Arrow binary column in place)
            topics, keys, values = _Binary(batch.column("topic")), _Binary(batch.column("key")), _Binary(batch.column("value"))
            headers = batch.column("headers")
            header_at = headers.offsets.to_numpy()
            pairs = headers.values.flatten()
            hkeys, hvalues = _Binary(pairs[0]), _Binary(pairs[1])
            topic, last_len = None, -1
            for i in range(n):
                name_len = topics.get(i, &name)
                if name_len != last_len or memcmp(name, last_name, name_len) != 0:  # one str per run of a topic
                    topic, last_name, last_len = PyUnicode_DecodeUTF8(<const char *> name, name_len, NULL), name, name_len
                h0, h1 = header_at[i], header_at[i + 1]
                if h0 == h1:
                    hs = empty
                else:
                    hs = [(_bytes_at(hkeys, h).decode(), _bytes_at(hvalues, h)) for h in range(h0, h1)]
                out.append(new(record, (topic, partition[i], offset[i], _millis(micros[i]), ts_type[i],
                                        _bytes_at(keys, i), _bytes_at(values, i), hs, epoch[i])))
    finally:
        if collecting:
            gc.enable()
    return out
