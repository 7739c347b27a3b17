# validate: the C validator, its decompression hook and the culprit objects.
# Included by _native.pyx: one module, one file per concern.

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
        out_len[0] = 0
        try:
            self._out = self.scratch.decompress(codec, magic, memoryview(self.v.mv)[at:at + n])
        except _codecs.CodecError as exc:
            if exc.produced:  # what came out before the damage: the core reads records in it first
                self._out = self.scratch.produced(exc)
                produced = self._out
                out[0] = &produced[0]
                out_len[0] = len(self._out)
            return self.fail(f, exc.rule, exc.offset, exc.message)
        except Exception as exc:  # a codec library surprise still becomes a culprit, never a crash
            return self.fail(f, "batch.decompression_failed", 0,
                             f"Failed to decompress {_codec_name(codec)} record stream: {exc!r}")
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

    cdef bytes records_of(self, const kb_v2_header *h, Py_ssize_t at, Py_ssize_t n):
        """The decompressed records of the v2 batch whose payload is v[at:at+n].  On a codec error,
        raises the fault a consumer meets first: reading records out of the stream, a record's
        fault in what came out before the damage, else the codec's failure."""
        cdef kb_fault f
        cdef const uint8_t[::1] prefix
        try:
            return bytes(self.scratch.decompress(h.attributes & KB_ATTR_CODEC_MASK, h.magic,
                                                 memoryview(self.v.mv)[at:at + n]))
        except _codecs.CodecError as exc:
            if exc.produced:
                prefix = self.scratch.produced(exc)
                if kb_v2_walk_prefix(&prefix[0], len(prefix), h.record_count, KB_READER_STREAM, &f) != 0:
                    _raise_fault(&f, 0, at)
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


cdef kb_origin _origin(config):
    """The core's reading of ``config.origin``: a producer's batch, or batches from a log."""
    return KB_ORIGIN_CLIENT if config.origin == "client" else KB_ORIGIN_LOG


cdef struct _Pages:
    const uint8_t *base
    size_t released
    size_t first     # where the hand-backs start (a walk run again starts there again)
    size_t page
    size_t every     # bytes between two hand-backs
    void *progress  # a Python callable taking the position reached, or NULL


cdef class _Validator:
    """Runs kb_validate with a reusable culprit buffer that grows up to the config's cap."""
    cdef kb_validate_opts opts
    cdef kb_culprit *out
    cdef size_t cap
    cdef size_t max_cap
    cdef readonly object config
    cdef kb_summary s
    cdef _Decompressor decompressor
    cdef bint may_rebuild      # a client's append, checked against max.message.bytes / segment.bytes
    cdef bint always_rebuilt   # the topic re-encodes every batch (codec or record version)

    def __cinit__(self, config, _View v):
        self.config = config
        self.decompressor = _Decompressor(v, config.max_decompressed_bytes)
        self.opts.decompress = _decompress_cb
        self.opts.decompress_ctx = <void *> self.decompressor
        self.opts.origin = _origin(config)
        self.opts.verify_crc = 1 if config.verify_crc else 0
        self.opts.strict = 1 if config.strict else 0
        self.opts.compacted = 1 if config.compacted else 0
        self.opts.topic_log_append_time = 1 if config.timestamp_type == LOG_APPEND_TIME else 0
        self.opts.now_ms = config.now_ms if config.now_ms is not None else int(time.time() * 1000)
        self.opts.before_max_ms, self.opts.after_max_ms = config.timestamp_window
        self.opts.max_batch_bytes = -1 if config.max_message_bytes is None else config.max_message_bytes
        self.may_rebuild = config.origin == "client" and (config.max_message_bytes is not None
                                                          or config.segment_bytes is not None)
        self.always_rebuilt = config.reencodes
        # segment.bytes is checked against the batch the broker writes: re-encoded, _broker_rebuild.pxi
        self.opts.max_append_bytes = -1 if config.segment_bytes is None or (
            self.may_rebuild and self.always_rebuilt) else config.segment_bytes
        self.opts.target_magic = config.target_magic
        self.opts.target_codec = config.target_codec
        self.opts.produce_version = config.produce_version or 0
        self.opts.single_append = 1 if config.single_append or config.produce_version else 0
        self.max_cap = config.max_culprits
        # a few at first: most inputs have none, and many small ones are validated one by one (a
        # walk that finds more runs again, its pages handed back again)
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
                    kb_validate_again(ptr, length, &self.opts, self.out, self.cap, &self.s)
            else:
                kb_validate_again(ptr, length, &self.opts, self.out, self.cap, &self.s)
            if <size_t> self.s.culprits <= self.cap or self.cap >= self.max_cap:
                return 0
            if self.opts.progress_ctx != NULL:  # a mapped file: what the walk touched goes back, and the
                _release_pages(self.opts.progress_ctx, length)  # walk again hands its pages back as it goes
                (<_Pages *> self.opts.progress_ctx).released = (<_Pages *> self.opts.progress_ctx).first
            self.cap = min(self.max_cap, <size_t> self.s.culprits)
            grown = <kb_culprit *> malloc(self.cap * sizeof(kb_culprit))
            if grown == NULL:
                raise MemoryError()
            free(self.out)
            self.out = grown

    cdef bint rebuilt(self, const uint8_t *ptr, size_t length):
        """Whether Kafka may re-encode this append (then _broker_rebuild.pxi sizes it): v0/v1
        entries always, any entry when the topic stores another codec or record version."""
        return self.may_rebuild and length > 16 and (self.always_rebuilt or ptr[16] != 2)

    cdef object culprits_of(self, _View v, size_t start, size_t length):
        """Validates v[start:start + length]: its ValidationResult when it has culprits, else None
        with no Python object made (self.s holds the summary either way)."""
        self.run(v.ptr + start, length)
        result = self.result() if self.s.culprits else None
        if self.rebuilt(v.ptr + start, length):
            result = _check_rebuilt_size(result if result is not None else self.result(), v.mv[start:start + length],
                                         self.config)
        return result if result is not None and result.culprit_count else None

    cdef object result(self):
        s = &self.s
        culprits = _culprits(self.out, min(<size_t> s.culprits, self.cap), self.config.topic_partition,
                             self.decompressor.messages)
        del self.decompressor.messages[:]
        tail = TruncatedTail(s.tail_entry, s.tail_pos) if s.tail_pos >= 0 else None
        stopped_at = s.stopped_at if s.stopped else None
        counters = {RULES[k].id: s.rule_counts[k] for k in range(1, KB_RULE_COUNT) if s.rule_counts[k]}
        return ValidationResult(culprits, s.culprits, s.entries, s.records, s.valid_bytes, tail, stopped_at,
                                s.unwalked, self.config, counters, s.lost_bytes)


cdef void _release_pages(void *ctx, size_t pos) noexcept nogil:
    """kb_validate's progress hook over a read-only file mapping: the pages the walk has passed
    are handed back (the kernel reads them again from the page cache if they are touched), so
    the resident set stays bounded whatever the file's size; then the caller hears how far the
    walk got (a progress line)."""
    cdef _Pages *p = <_Pages *> ctx
    cdef size_t end = pos - pos % p.page
    if end > p.released:
        madvise(<void *> (p.base + p.released), end - p.released, MADV_DONTNEED)
        p.released = end
    if p.progress != NULL:
        with gil:
            try:
                (<object> p.progress)(pos)
            except Exception:  # a progress line must never fail a validation
                pass


def validate(buf, config=None, *, on_error=None):
    """Check every batch and record of ``buf`` and collect every culprit.

    Returns a ``ValidationResult`` with ``ok``, ``culprits``, per-rule ``counters`` and the
    KIP-467 fields (``error_code``, ``error_name``, ``error_records``, ``error_message``).
    ``config`` is a ``ValidationConfig`` (default: a producer's batch).  ``on_error``: a KIP-210
    handler asked about each culprit (``pykbatch.errors.CONTINUE`` or ``FAIL``; see
    ``apply_handler``).
    """
    result = _validated(_view(buf), config, NULL)
    return result if on_error is None else apply_handler(result, on_error)


cdef object _validated(_View v, config, _Pages *pages):
    """The validation of ``validate``; ``pages``: a file mapping's, handed back as the walk passes
    them (``_validate_mapped``), or NULL."""
    config = config if config is not None else _DEFAULT_CONFIG
    cdef _Validator checker = _Validator(config, v)
    if pages != NULL:
        checker.opts.progress = _release_pages
        checker.opts.progress_ctx = pages
        checker.opts.progress_every = pages.every
    checker.run(v.ptr, v.length)
    result = checker.result()
    if checker.rebuilt(v.ptr, v.length):
        result = _check_rebuilt_size(result, v.mv, config)
    return result


def _validate_mapped(buf, config=None, size_t every=64 * 1024 * 1024, progress=None):
    """``validate`` of a read-only file mapping (an ``mmap`` or a view of one starting at its
    first byte), handing pages back every ``every`` bytes: how a segment of any size is
    validated in bounded memory (``Segment.validate``).  ``progress``: called with the byte
    position reached, every ``every`` bytes."""
    cdef _View v = _view(buf)
    cdef _Pages pages
    pages.base = v.ptr
    pages.page = <size_t> sysconf(_SC_PAGESIZE)
    pages.released = (pages.page - (<uintptr_t> v.ptr) % pages.page) % pages.page
    pages.first = pages.released
    pages.every = every
    pages.progress = <void *> progress if progress is not None else NULL
    return _validated(v, config, &pages)


def _validate_rows(_View v, starts, ends, valid, config):
    """Validate every row v[starts[i]:ends[i]] (rows with valid[i] == 0 are skipped).

    Returns (records per row as int64, truncated-tail position per row or -1, and a dict
    row -> ValidationResult for the rows that have culprits).  Rows without culprits create
    no Python objects."""
    import numpy as np
    cdef const int64_t[::1] row_start = starts
    cdef const int64_t[::1] row_end = ends
    cdef Py_ssize_t n = row_start.shape[0], row
    config = config if config is not None else _DEFAULT_CONFIG
    cdef _Validator checker = _Validator(config, v)
    records = np.zeros(n, np.int64)
    tails = np.full(n, -1, np.int64)
    cdef int64_t[::1] rec_view = records
    cdef int64_t[::1] tail_view = tails
    bad = {}
    for row in range(n):
        if valid is not None and not valid[row]:
            continue
        result = checker.culprits_of(v, row_start[row], <size_t> (row_end[row] - row_start[row]))
        rec_view[row] = checker.s.records
        tail_view[row] = checker.s.tail_pos
        if result is not None:
            bad[row] = result
    return records, tails, bad


def validate_each(batches, config=None):
    """``validate`` of each buffer of ``batches`` (a producer's batches, each its own append)
    with one set-up: {index: ValidationResult} for those with culprits; the sound ones make no
    Python object (how a producer pre-flights many small batches at once)."""
    config = config if config is not None else _DEFAULT_CONFIG
    cdef _Validator checker = None
    cdef _View v
    bad = {}
    for i, batch in enumerate(batches):
        v = _view(batch)
        if checker is None:
            checker = _Validator(config, v)
        checker.decompressor.v = v
        result = checker.culprits_of(v, 0, v.length)
        if result is not None:
            bad[i] = result
    return bad


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
            detail or None, rule.kafka, c.first_offset if c.first_offset != KB_NO_OFFSET else None,
            c.last_offset if c.last_offset != KB_NO_OFFSET else None))
    return result


def _rule_codes():
    """The Kafka code of every rule (tests check each is in the error table)."""
    return [kb_rule_code(<kb_rule> k) for k in range(KB_RULE_COUNT)]
