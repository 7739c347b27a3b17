# The entry walk over any buffer, any magic: BatchReader / iter_batches, and the search for
# the next sound entry (entry_is_sound, next_sound_batch).
# Included by _native.pyx: one module, one file per concern.

# how a reader that walks on reads a log: lying sizes found, a zero tail a tail
cdef int _LOG_RESYNC = KB_RESYNC_LYING_SIZES | KB_RESYNC_ZERO_TAIL


cdef class BatchReader:
    """Iterator over the entries of a buffer (see ``iter_batches``).  After
    iteration, ``truncated_tail`` tells whether an incomplete entry ended it.

    ``on_lost``: a callable taking a ``LostSpan``.  Without it the reader stops where Kafka's
    does (a framing fault raises; an entry that does not fit ends the walk as an incomplete
    tail).  With it, where the framing is lost (or an entry's size runs past the end while a
    sound entry follows, or its magic is invalid) the span up to the next sound entry is handed
    to ``on_lost`` and the walk goes on there: no sound entry is lost because a neighbour lied.
    Zero bytes to the end (a preallocated log) are then an incomplete tail."""
    cdef _View _v
    cdef size_t pos
    cdef int entry
    cdef bint verify_crc
    cdef readonly object truncated_tail
    cdef _Decompressor _dec
    cdef object on_lost
    cdef int resync  # kb_next_entry_resync's flags; -1: kb_next_entry, Kafka's reading

    def __cinit__(self, buf, bint verify_crc=True, size_t max_decompressed_bytes=_codecs.DEFAULT_MAX_DECOMPRESSED,
                  size_t start=0, on_lost=None, bint lying_sizes=False):
        self._v = _view(buf)
        self.pos = min(start, <size_t> self._v.length)  # an entry boundary to start at (positions stay absolute)
        self.entry = 0
        self.verify_crc = verify_crc
        self.truncated_tail = None
        self._dec = _Decompressor(self._v, max_decompressed_bytes)
        self.on_lost = on_lost
        # walking on past what is lost reads a log; raising where a size lies is a strictness
        self.resync = _LOG_RESYNC if on_lost is not None else (KB_RESYNC_LYING_SIZES if lying_sizes else -1)

    def __iter__(self):
        return self

    def __next__(self):
        cdef kb_entry e
        cdef kb_fault f
        cdef kb_entry_status st
        while True:
            if self.resync < 0:
                st = kb_next_entry(self._v.ptr, self._v.length, self.pos, &e, &f)
            else:
                st = kb_next_entry_resync(self._v.ptr, self._v.length, self.pos, self.resync, &e, &f)
            if st == KB_ENTRY_END:
                raise StopIteration
            if st == KB_ENTRY_TRUNCATED:
                self.truncated_tail = TruncatedTail(self.entry, self.pos)
                self.pos = self._v.length
                raise StopIteration
            if st == KB_ENTRY_OK:
                if self.on_lost is None:
                    break
                try:  # an entry that cannot be read (too small for a batch, ...) is skipped whole
                    return self._entry(&e)
                except _errors.KafkaDataError as exc:
                    self._skip(&e, exc)
                    continue
            if self.on_lost is None or not e.size:
                _raise_fault(&f, 0)
            self._skip(&e, _fault_error(&f, 0))
        return self._entry(&e)

    cdef _skip(self, const kb_entry *e, exc):
        """Walks past the entry at *e, handing it to ``on_lost`` as a span that was not read."""
        span = LostSpan(self.entry, e.pos, e.size, exc)
        self.pos = e.pos + e.size
        self.entry += 1
        self.on_lost(span)

    cdef object _entry(self, kb_entry *e):
        if e.magic < 2:
            return self._legacy(e)
        cdef Batch b = Batch.__new__(Batch)
        _read_v2_entry(self._v, e, self.verify_crc, &b.h, 0)
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
    if verify_crc and kb_legacy_check_crc(v.ptr, &b.m, &f) != 0:
        _raise_fault(&f, 0)
    b._v, b._dec, b.position, b.size, b.entry = v, dec, e.pos, e.size, entry
    return b


def iter_batches(buf, *, bint verify_crc=True, size_t max_decompressed_bytes=_codecs.DEFAULT_MAX_DECOMPRESSED,
                 bint strict=True):
    """Iterate the record batches of ``buf`` (bytes, bytearray, memoryview or mmap).

    An incomplete entry at the end ends the iteration silently, as Kafka's
    readers do (see ``BatchReader.truncated_tail``) -- but with ``strict`` (the
    default, as ``to_arrow`` and ``validate``) not one whose size lies: a sound
    entry inside the bytes it claims raises ``framing.size_past_end`` (Kafka
    would end there and lose the entries after it).  With ``verify_crc`` a
    batch whose CRC-32C does not match raises ``CorruptRecordError``.  A
    compressed batch is decompressed once, when its records are first read,
    never past ``max_decompressed_bytes``.
    """
    return BatchReader(buf, verify_crc, max_decompressed_bytes, lying_sizes=strict)


def entry_is_sound(buf, Py_ssize_t pos=0, *, bint v2_only=False):
    """Whether a complete entry with a right checksum starts at ``buf[pos]`` (CRC-32C of a v2
    batch, CRC-32 of a v0/v1 message; ``v2_only``: batches only): how a reader that lost the
    framing, or does not trust an index's position, knows it found an entry again."""
    cdef _View v = _View(buf)
    return pos >= 0 and kb_entry_sound(v.ptr, v.length, pos, v2_only) != 0


def next_sound_batch(buf, Py_ssize_t start=0):
    """The first position at or after ``start`` where a sound v2 batch starts (see
    ``entry_is_sound``), or None: how far a repair skips once the framing is lost."""
    cdef _View v = _View(buf)
    cdef int64_t found
    if start < 0:
        start = 0
    with nogil:
        found = kb_next_sound_batch(v.ptr, v.length, start)
    return None if found < 0 else found
