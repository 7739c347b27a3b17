# Magic 0/1 entries: LegacyBatch and its record iterator (Kafka's deep-iterator rules).
# Included by _native.pyx: one module, one file per concern.

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
        cdef kb_fault f
        cdef int32_t count
        cdef int rc
        if codec == KB_CODEC_NONE:
            self._rec, self._rstart, self._rlimit = self._v, self.position, self.position + self.size
            self._payload, self._base, self._count, self._first = -1, 0, 1, self.m.offset
            return 0
        if kb_legacy_check_wrapper(&self.m, &f) != 0:
            _raise_fault(&f, 0)
        if self._dec is None:
            self._dec = _Decompressor(self._v, _codecs.DEFAULT_MAX_DECOMPRESSED)
        data = self._dec.copy(codec, self.m.magic, self.m.value, self.m.value_len)
        rec = _View(data)
        self._payload = self.m.value
        rc = kb_legacy_read_inner_set(&self.m, rec.ptr, rec.length, &count, &self._first, &self._base, &f)
        if rc == -1:
            _raise_fault(&f, 0, self._payload)
        elif rc == -2:
            _raise_fault(&f, 0)
        self._count = count
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
        return _codec_name(codec)
    @property
    def timestamp_type(self):
        return _timestamp_type_name(self.m.magic, self.m.attributes)
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

    def readable(self):
        """As ``Batch.readable``: the messages that can be read, then the error where reading
        stops (an inner message set has no per-message length to pass a broken one by)."""
        try:
            for r in self:
                yield r
        except _errors.KafkaDataError as exc:
            yield exc

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
        _set_record(rec, self.b._base + m.offset, kb_legacy_timestamp(w, &m), _bytes_or_none(buf, m.key, m.key_len),
                        _bytes_or_none(buf, m.value, m.value_len), _EMPTY_HEADERS)
        rec.sequence = -1
        rec.offset_delta = self.index
        rec.attributes = m.attributes
        rec.position = m.pos
        rec._crc = m.crc
        rec._crc_ok = kb_legacy_compute_crc(buf, &m) == m.crc
        self.index += 1
        return rec
