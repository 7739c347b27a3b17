# Repair (KIP-467 client side, KIP-1059): rebuild batches without their culprit records.
# Included by _native.pyx: one module, one file per concern.

def drop_culprits(buf, result=None, *, config=None, str unrepairable="drop"):
    """Rebuild every batch of ``buf`` without its culprit records, as Kafka's producer does after
    a ProduceResponse with ``error_records`` (KIP-467), so one poison record no longer sinks its
    batch.  Returns ``Repair(data, dropped)`` (it unpacks as that pair).

    A producer's batches (``origin="client"``): kept records get consecutive offset deltas (and
    so consecutive sequences from the batch's unchanged ``base_sequence``), as the broker assigns
    offsets on append.  Log data (``origin="log"`` or ``"replication"``) is rebuilt as Kafka's
    log cleaner rebuilds a batch: every kept record keeps its offset, the batch its base offset
    and last offset delta (so its sequences); a batch that loses every record stays as an empty
    batch, and the offsets a batch dropped whole held between its kept neighbours are kept by an
    empty batch of their own -- a consumer's committed offset never comes to point at another
    record.  Both: the base timestamp of the first kept record and the largest kept timestamp as
    ``maxTimestamp`` (CreateTime); every other header field and the codec are kept.  A record whose own bytes are broken is dropped too when its length prefix lets the
    walk go on.  ``dropped`` lists each removed record with its culprits (and its raw bytes).
    Magic 0/1: an uncompressed message with a culprit goes whole; a compressed wrapper is rebuilt
    around its kept inner messages (same codec and magic, offsets re-based from the first).

    Batch-level culprits (a CRC mismatch, a lying count, bytes whose framing was lost ...) cannot
    be repaired record by record: ``unrepairable="drop"`` (default: the repair every surface
    gives -- ``pykbatch repair``, Spark's ``kbatch_repair``) leaves those batches out (listed in
    ``dropped`` with ``record_index`` None), ``"raise"`` raises ``UnrepairableError`` naming
    them, ``"keep"`` copies them unchanged.  An incomplete trailing entry is left out.

    A culprit of two entries' order (``Rule.between``: offsets that go backwards in a log) drops
    neither entry -- which one holds the wrong offset is not known; it is listed in ``unfixed``, as
    are the gaps a dropped entry leaves in log data where one empty batch cannot hold its offsets
    (culprits of the output).
    """
    if unrepairable not in ("raise", "drop", "keep"):
        raise ValueError("unrepairable must be 'raise', 'drop' or 'keep'")
    cdef _View v = _view(buf)
    if result is None:
        result = validate(v, config)
    if result.culprit_count > len(result.culprits):
        raise ValueError("the result holds only part of its culprits: validate with a larger max_culprits")
    culprits = list(result.culprits)
    unfixed = [c for c in culprits if _RULES_BY_ID[c.rule].between]
    cdef Py_ssize_t n = len(culprits), i
    cdef kb_culprit *given = <kb_culprit *> calloc(max(n, 1), sizeof(kb_culprit))
    if given == NULL:
        raise MemoryError()
    for i in range(n):  # what the core's repair reads of a culprit: where it is and its rule
        given[i].entry = culprits[i].entry
        given[i].record_index = -1 if culprits[i].record_index is None else culprits[i].record_index
        given[i].rule = _RULE_INDEX[culprits[i].rule]
    cdef _Decompressor dec = _Decompressor(v, result.config.max_decompressed_bytes)
    compressed = [None, None]  # the last payload compressed (kept alive), and a codec's exception
    cdef kb_repair_opts o
    o.resync_flags = kb_resync_flags(result.config.strict, _origin(result.config) == KB_ORIGIN_LOG)
    o.keep_unrepairable = unrepairable == "keep"
    o.keep_offsets = _origin(result.config) != KB_ORIGIN_CLIENT
    o.decompress, o.decompress_ctx = _decompress_cb, <void *> dec
    o.compress, o.compress_ctx = _compress_cb, <void *> compressed
    cdef kb_repair_out r
    memset(&r, 0, sizeof(r))
    cdef int rc
    try:
        rc = kb_repair(v.ptr, v.length, given, n, &o, &r)
        if rc == KB_REPAIR_NO_MEMORY:
            raise MemoryError()
        if rc == KB_REPAIR_COMPRESS_FAILED:
            raise compressed[1]
        dropped, refused = [], []
        for i in range(<Py_ssize_t> r.n_dropped):
            _dropped_record(&r, i, culprits, dropped, refused)
        data = PyBytes_FromStringAndSize(<const char *> r.data, r.data_len) if r.data_len else b""
    finally:
        free(given)
        kb_repair_out_free(&r)
    if refused and unrepairable == "raise":
        raise _errors.UnrepairableError(refused)
    if o.keep_offsets and refused and data:
        # offsets an entry dropped whole held that one empty batch cannot (its neighbours' offsets
        # are not to be believed) stay a gap: the output's own culprit, listed as left
        unfixed += [c for c in validate(data, result.config).culprits if _RULES_BY_ID[c.rule].between]
    return Repair(data, dropped, refused, unfixed)


cdef int _compress_cb(void *ctx, int codec, int magic, const uint8_t *src, size_t n, const uint8_t **out,
                      size_t *out_len) noexcept with gil:
    """kb_repair's compress hook: pykbatch.codecs.compress (Kafka's framings); the payload kept in
    ctx[0] until the next call, an exception in ctx[1]."""
    cdef list holder = <list> ctx
    try:
        payload = _codecs.compress(codec, PyBytes_FromStringAndSize(<const char *> src, n), magic)
    except Exception as exc:
        holder[1] = exc
        return -1
    holder[0] = payload
    out[0] = <const uint8_t *> PyBytes_AS_STRING(payload)
    out_len[0] = len(payload)
    return 0


cdef int _dropped_record(kb_repair_out *r, Py_ssize_t i, list culprits, list dropped, list refused) except -1:
    """The core's i-th dropped record as a DroppedRecord (a whole entry: into refused too)."""
    cdef const kb_dropped *d = &r.dropped[i]
    cdef const uint8_t *b = r.bytes
    cdef kb_record rec
    cdef kb_fault f
    cdef size_t next_pos
    these = [culprits[r.culprit_index[d.first_culprit + k]] for k in range(<Py_ssize_t> d.n_culprits)]
    raw = PyBytes_FromStringAndSize(<const char *> b + d.raw, d.raw_len) if d.raw_len else b""
    if d.record_index < 0:
        refused.append((d.entry, these))
        if not d.kept:
            dropped.append(DroppedRecord(d.entry, None, None, None, None, None, (), raw, these))
        return 0
    if not d.has_fields:
        dropped.append(DroppedRecord(d.entry, d.record_index, None, None, None, None, (), raw, these))
        return 0
    headers = ()
    if d.magic == 2 and kb_v2_read_record(b + d.raw, 0, d.raw_len, &rec, &f, &next_pos) == 0:
        headers = _headers(b + d.raw, &rec, None)
    dropped.append(DroppedRecord(d.entry, d.record_index, d.offset, d.timestamp,
                                 _bytes_or_none(b, d.key, d.key_len), _bytes_or_none(b, d.value, d.value_len),
                                 headers, raw, these))
    return 0
