# Repair (KIP-467 client side, KIP-1059): rebuild batches without their culprit records.
# Included by _native.pyx: one module, one file per concern.

def drop_culprits(buf, result=None, *, config=None, str unrepairable="drop"):
    """Rebuild every batch of ``buf`` without its culprit records, as Kafka's producer does after
    a ProduceResponse with ``error_records`` (KIP-467), so one poison record no longer sinks its
    batch.  Returns ``Repair(data, dropped)`` (it unpacks as that pair).

    Kept records get consecutive offset deltas (and so consecutive sequences from the batch's
    unchanged ``base_sequence``), the base timestamp of the first kept record and the largest
    kept timestamp as ``maxTimestamp`` (CreateTime); every other header field and the codec are
    kept.  A record whose own bytes are broken is dropped too when its length prefix lets the
    walk go on.  ``dropped`` lists each removed record with its culprits (and its raw bytes).
    Magic 0/1: an uncompressed message with a culprit goes whole; a compressed wrapper is rebuilt
    around its kept inner messages (same codec and magic, offsets re-based from the first).

    Batch-level culprits (a CRC mismatch, a lying count, bytes whose framing was lost ...) cannot
    be repaired record by record: ``unrepairable="drop"`` (default: the repair every surface
    gives -- ``pykbatch repair``, Spark's ``kbatch_repair``) leaves those batches out (listed in
    ``dropped`` with ``record_index`` None), ``"raise"`` raises ``UnrepairableError`` naming
    them, ``"keep"`` copies them unchanged.  An incomplete trailing entry is left out.

    A culprit of two entries' order (``Rule.between``: offsets that go backwards in a log) drops
    neither entry -- which one holds the wrong offset is not known; it is listed in ``unfixed``.
    """
    if unrepairable not in ("raise", "drop", "keep"):
        raise ValueError("unrepairable must be 'raise', 'drop' or 'keep'")
    cdef _View v = _view(buf)
    if result is None:
        result = validate(v, config)
    if result.culprit_count > len(result.culprits):
        raise ValueError("the result holds only part of its culprits: validate with a larger max_culprits")
    by_entry, unfixed = {}, []
    for c in result.culprits:
        if _RULES_BY_ID[c.rule].between:
            unfixed.append(c)
        else:
            by_entry.setdefault(c.entry, []).append(c)
    cdef _Decompressor dec = _Decompressor(v, result.config.max_decompressed_bytes)
    cdef kb_entry e
    cdef kb_fault f
    cdef size_t pos = 0
    cdef int entry = 0
    out, dropped, refused = [], [], []
    # the validator's walk (resynchronised where the framing was lost), so entries number alike
    cdef int flags = kb_resync_flags(result.config.strict, _origin(result.config) == KB_ORIGIN_LOG)
    cdef kb_entry_status st
    while True:
        st = kb_next_entry_resync(v.ptr, v.length, pos, flags, &e, &f)
        if st == KB_ENTRY_END or st == KB_ENTRY_TRUNCATED:
            break
        culprits = by_entry.get(entry, [])
        raw = bytes(memoryview(v.mv)[e.pos:e.pos + e.size]) if e.size else b""
        rebuilt = None
        if not culprits:
            rebuilt = raw
        elif e.size and all(c.record_index is not None for c in culprits):
            if e.magic == 2:
                rebuilt = _rebuild_v2(v, &e, entry, culprits, dec, dropped)
            else:
                rebuilt = _rebuild_legacy(v, &e, entry, culprits, dec, dropped)
        if rebuilt is not None:
            out.append(rebuilt)
        else:
            refused.append((entry, culprits))
            if unrepairable == "keep":
                out.append(raw)
            elif unrepairable == "drop":
                dropped.append(DroppedRecord(entry, None, None, None, None, None, (), raw, culprits))
        if not e.size:  # cannot happen with the resynchronising walk; never loop in place
            break
        pos = e.pos + e.size
        entry += 1
    if refused and unrepairable == "raise":
        raise _errors.UnrepairableError(refused)
    return Repair(b"".join(out), dropped, refused, unfixed)


cdef object _rebuild_v2(_View v, kb_entry *e, int entry, list culprits, _Decompressor dec, list dropped):
    """The batch at *e without the records the culprits name, or None when its record
    boundaries cannot be trusted (then the batch is unrepairable)."""
    cdef kb_v2_header h
    cdef kb_record r
    cdef kb_fault f
    cdef size_t next_pos, p, limit, hp, kp, vp
    cdef int32_t i, k, kl, vl, kept = 0
    cdef int64_t ts, first_ts = INT64_MIN, max_ts = INT64_MIN
    kb_v2_read_header(v.ptr + e.pos, &h)
    if h.record_count <= 0:
        return None
    cdef int codec = h.attributes & KB_ATTR_CODEC_MASK
    cdef _View rec = v
    p, limit = e.pos + KB_V2_HEADER_SIZE, e.pos + e.size
    if codec:
        try:  # a payload the validator read a prefix of (Kafka's readers stop at the record count) may
            rec = _View(dec.copy(codec, 2, e.pos + KB_V2_HEADER_SIZE, e.size - KB_V2_HEADER_SIZE))
        except _errors.KafkaDataError:  # still not decompress whole: the batch cannot be rebuilt
            return None
        p, limit = 0, rec.length
    bad = {}
    for c in culprits:
        bad.setdefault(c.record_index, []).append(c)
    cdef bint log_append = h.attributes & KB_ATTR_LOG_APPEND_TIME
    cdef bint horizon = h.attributes & KB_ATTR_DELETE_HORIZON
    # pass 1: find each record's extent; pass 2 (below) encodes the kept ones
    keep_pos, keep_ts, lost = [], [], []
    for i in range(h.record_count):
        if p >= limit:
            return None
        if kb_v2_read_record(rec.ptr, p, limit, &r, &f, &next_pos) != 0:
            if i not in bad or next_pos == 0:
                return None  # a fault no culprit names, or no way past it
            lost.append((i, None, bytes(memoryview(rec.mv)[p:next_pos])))
            p = next_pos
            continue
        ts = h.max_timestamp if log_append else kb_wrap_add64(h.base_timestamp, r.timestamp_delta)
        if i in bad:
            lost.append((i, (kb_wrap_add64(h.base_offset, r.offset_delta), ts,
                             _bytes_or_none(rec.ptr, r.key, r.key_len), _bytes_or_none(rec.ptr, r.value, r.value_len),
                             _headers(rec.ptr, &r, None)), bytes(memoryview(rec.mv)[p:r.end])))
        else:
            keep_pos.append(p)
            keep_ts.append(kb_wrap_add64(h.base_timestamp, r.timestamp_delta))
        p = r.end
    if p != limit:
        return None
    for i, fields, raw in lost:
        if fields is None:
            dropped.append(DroppedRecord(entry, i, None, None, None, None, (), raw, bad[i]))
        else:
            dropped.append(DroppedRecord(entry, i, *fields, raw, bad[i]))
    if not keep_pos:
        return b""  # every record was a culprit: the batch goes
    cdef Py_ssize_t n = len(keep_pos)
    cdef kb_record_in *recs = <kb_record_in *> calloc(n, sizeof(kb_record_in))
    cdef int64_t n_headers = 0
    for i in range(n):
        kb_v2_read_record(rec.ptr, keep_pos[i], limit, &r, &f, &next_pos)
        n_headers += r.header_count
    cdef kb_header_in *hdrs = <kb_header_in *> calloc(max(n_headers, 1), sizeof(kb_header_in))
    cdef kb_header_in *hnext = hdrs
    cdef int64_t new_base = h.base_timestamp if horizon else keep_ts[0]
    try:
        if recs == NULL or hdrs == NULL:
            raise MemoryError()
        for i in range(n):
            kb_v2_read_record(rec.ptr, keep_pos[i], limit, &r, &f, &next_pos)
            ts = keep_ts[i]
            if ts > max_ts:
                max_ts = ts
            recs[i].key, recs[i].key_len = rec.ptr + r.key, r.key_len if r.key_len >= 0 else -1
            recs[i].value, recs[i].value_len = rec.ptr + r.value, r.value_len if r.value_len >= 0 else -1
            recs[i].attributes = r.attributes
            recs[i].timestamp_delta = ts - new_base
            recs[i].offset_delta = i
            recs[i].header_count = r.header_count
            recs[i].headers = hnext
            hp = r.headers
            for k in range(r.header_count):
                hp = kb_v2_read_header_kv(rec.ptr, hp, r.end, &kp, &kl, &vp, &vl)
                hnext[k].key, hnext[k].key_len = rec.ptr + kp, kl
                hnext[k].value, hnext[k].value_len = rec.ptr + vp, vl if vl >= 0 else -1
            hnext += r.header_count
        h.record_count = <int32_t> n
        h.last_offset_delta = <int32_t> n - 1
        h.base_timestamp = new_base
        if not log_append:
            h.max_timestamp = max_ts
        return _assemble(&h, recs, n)
    finally:
        free(recs)
        free(hdrs)


cdef object _rebuild_legacy(_View v, kb_entry *e, int entry, list culprits, _Decompressor dec, list dropped):
    """A v0/v1 entry without its culprit messages: an uncompressed message goes whole; a compressed
    wrapper is rebuilt around the kept inner messages, offsets re-based from its first one."""
    try:
        batch = _legacy_entry(v, e, False, entry, dec)
        records = list(batch)
    except _errors.KafkaDataError:
        return None  # the inner set cannot be read again: the culprits are not the whole story
    bad = {}
    for c in culprits:
        bad.setdefault(c.record_index, []).append(c)
    if any(i >= len(records) for i in bad):
        return None
    kept = []
    for i, r in enumerate(records):
        if i in bad:
            dropped.append(DroppedRecord(entry, i, r.offset, r.timestamp, r.key, r.value, (),
                                         _legacy_message_bytes(batch, r), bad[i]))
        else:
            kept.append({"key": r.key, "value": r.value, "timestamp": r.timestamp})
    if not kept:
        return b""
    log_append = batch.timestamp_type == LOG_APPEND_TIME
    return build_batch(kept, base_offset=batch.base_offset, magic=batch.magic, compression=batch.compression,
                       timestamp_type=LOG_APPEND_TIME if log_append else CREATE_TIME,
                       max_timestamp=batch.max_timestamp if log_append else None)


cdef bytes _legacy_message_bytes(LegacyBatch batch, Record r):
    """One message's bytes (log header included): the entry itself, or an inner message of its
    decompressed set."""
    if batch.compression == "none":
        return bytes(memoryview(batch._v.mv)[batch.position:batch.position + batch.size])
    cdef _View inner = batch._rec
    cdef kb_entry e
    cdef kb_fault f
    kb_next_entry(inner.ptr, inner.length, r.position, &e, &f)  # the set was walked: entries are whole
    return bytes(memoryview(inner.mv)[e.pos:e.pos + e.size])
