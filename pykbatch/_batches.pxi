# v2 record batches: Batch, Record, the record iterators and the entry checks.
# Included by _native.pyx: one module, one file per concern.

cdef class Record:
    """One record.  ``headers`` is a tuple of ``(str, bytes | None)`` (always empty for magic 0/1);
    ``crc`` and ``is_valid`` are the message CRC-32 and its check for magic 0/1, None for v2;
    ``position`` is the record's byte position in the buffer (for a compressed batch: in its
    decompressed records)."""
    cdef readonly int64_t offset
    cdef readonly int64_t timestamp
    cdef readonly object key
    cdef readonly object value
    cdef readonly tuple headers
    cdef readonly int32_t sequence
    cdef readonly int32_t offset_delta
    cdef readonly int64_t timestamp_delta
    cdef readonly int8_t attributes
    cdef readonly Py_ssize_t position
    cdef readonly object crc
    cdef readonly object is_valid

    def __repr__(self):
        return (f"Record(offset={self.offset}, timestamp={self.timestamp}, key={self.key!r}, "
                f"value={self.value!r}, headers={self.headers!r})")

    def __eq__(self, other):
        if not isinstance(other, Record):
            return NotImplemented
        return self._key() == (<Record> other)._key()

    cdef tuple _key(self):
        return (self.offset, self.timestamp, self.key, self.value, self.headers, self.sequence,
                self.offset_delta, self.timestamp_delta, self.attributes)

    def __hash__(self):
        return hash(self._key())


cdef inline object _bytes_or_none(const uint8_t *base, size_t pos, int32_t n):
    if n < 0:
        return None
    return PyBytes_FromStringAndSize(<const char *> base + pos, n)


cdef tuple _headers(const uint8_t *buf, const kb_record *r):
    if r.header_count == 0:
        return _EMPTY_HEADERS
    cdef list out = []
    cdef size_t p = r.headers, kp, vp
    cdef int32_t kl, vl
    for _ in range(r.header_count):
        p = kb_v2_read_header_kv(buf, p, r.end, &kp, &kl, &vp, &vl)
        out.append((PyUnicode_DecodeUTF8(<const char *> buf + kp, kl, "replace"),
                    _bytes_or_none(buf, vp, vl)))
    return tuple(out)


cdef inline int32_t _sequence(int32_t base, int32_t delta):
    return kb_increment_sequence(base, delta)


cdef class Batch:
    """A v2 record batch: Kafka's header fields in snake_case, ``position``
    (byte offset in the buffer), ``raw`` (the entry's bytes, zero-copy) and
    lazy iteration over its records."""
    cdef _View _v
    cdef kb_v2_header h
    cdef readonly Py_ssize_t position
    cdef readonly Py_ssize_t size
    cdef readonly int entry
    cdef _Decompressor _dec   # shared by the batches of one reader
    cdef _View _rec           # where the records are: the input, or the decompressed payload
    cdef size_t _rstart
    cdef size_t _rlimit
    cdef Py_ssize_t _payload  # position of the compressed payload, -1 when uncompressed

    cdef int _load(self) except -1:
        """Makes the records readable, decompressing the payload once."""
        if self._rec is not None:
            return 0
        cdef kb_fault f
        if kb_v2_check_walkable(&self.h, self.position, &f) != 0:
            _raise_fault(&f, 0)
        cdef int codec = self.h.attributes & KB_ATTR_CODEC_MASK
        if codec == KB_CODEC_NONE:
            self._rec, self._rstart, self._rlimit = self._v, self.position + KB_V2_HEADER_SIZE, self.position + self.size
            self._payload = -1
            return 0
        if self.h.record_count == 0:  # Kafka's iterator is empty: the payload is never opened
            self._rec, self._rstart, self._rlimit, self._payload = _View(b""), 0, 0, -1
            return 0
        if self._dec is None:
            self._dec = _Decompressor(self._v, _codecs.DEFAULT_MAX_DECOMPRESSED)
        data = self._dec.records_of(&self.h, self.position + KB_V2_HEADER_SIZE, self.size - KB_V2_HEADER_SIZE)
        self._rec, self._rstart, self._rlimit = _View(data), 0, len(data)
        self._payload = self.position + KB_V2_HEADER_SIZE
        return 0

    def __repr__(self):
        return (f"<Batch entry={self.entry} position={self.position} base_offset={self.h.base_offset} "
                f"count={self.h.record_count} compression={self.compression}>")

    @property
    def base_offset(self): return self.h.base_offset
    @property
    def length(self): return self.h.length
    @property
    def partition_leader_epoch(self): return self.h.partition_leader_epoch
    @property
    def magic(self): return self.h.magic
    @property
    def crc(self): return self.h.crc
    @property
    def attributes(self): return self.h.attributes
    @property
    def last_offset_delta(self): return self.h.last_offset_delta
    @property
    def base_timestamp(self): return self.h.base_timestamp
    @property
    def max_timestamp(self): return self.h.max_timestamp
    @property
    def producer_id(self): return self.h.producer_id
    @property
    def producer_epoch(self): return self.h.producer_epoch
    @property
    def base_sequence(self): return self.h.base_sequence
    @property
    def record_count(self): return self.h.record_count
    @property
    def compression(self):
        cdef int codec = self.h.attributes & KB_ATTR_CODEC_MASK
        return _codec_name(codec)
    @property
    def timestamp_type(self):
        return _timestamp_type_name(2, self.h.attributes)
    @property
    def is_transactional(self): return bool(self.h.attributes & KB_ATTR_TRANSACTIONAL)
    @property
    def is_control(self): return bool(self.h.attributes & KB_ATTR_CONTROL)
    @property
    def control(self):
        """For a control batch, its control record parsed (``pykbatch.control.ControlRecord``:
        ``type``, ``type_name`` such as COMMIT / ABORT, ``coordinator_epoch`` of a transaction
        marker); None for a data batch or an empty control batch."""
        if not self.h.attributes & KB_ATTR_CONTROL:
            return None
        for r in self:
            return _parse_control(r.key, r.value)
        return None
    @property
    def control_type(self):
        """The control record type name (COMMIT, ABORT, LEADER_CHANGE, ...) or None."""
        ctl = self.control
        return None if ctl is None else ctl.type_name
    @property
    def has_delete_horizon(self): return bool(self.h.attributes & KB_ATTR_DELETE_HORIZON)
    @property
    def delete_horizon_ms(self):
        """The cleaner's delete horizon (baseTimestamp when attribute bit 6 is set), else None."""
        return self.h.base_timestamp if self.h.attributes & KB_ATTR_DELETE_HORIZON else None
    @property
    def last_offset(self): return kb_wrap_add64(self.h.base_offset, self.h.last_offset_delta)
    @property
    def next_offset(self): return kb_wrap_add64(self.h.base_offset, <int64_t> self.h.last_offset_delta + 1)
    @property
    def last_sequence(self):
        return _sequence(self.h.base_sequence, self.h.last_offset_delta)
    @property
    def raw(self):
        """The whole entry, a zero-copy memoryview of the input."""
        return memoryview(self._v.mv)[self.position:self.position + self.size] if self.size else b""
    @property
    def is_valid(self):
        """True when the stored CRC-32C matches the batch's bytes."""
        return kb_v2_compute_crc(self._v.ptr + self.position, self.size) == self.h.crc

    def __len__(self):
        return max(self.h.record_count, 0)

    def __iter__(self):
        return _Records(self)

    def tuples(self):
        """The records as plain ``(offset, timestamp, key, value, headers)`` tuples: the
        fastest way to touch every record from Python (no attribute lookups)."""
        return _Tuples(self)

    def records(self):
        """All records as a list."""
        return list(self)


cdef class _RecordIterator:
    """Walks a batch's records; subclasses decide what each record becomes."""
    cdef Batch b
    cdef size_t pos
    cdef size_t limit
    cdef int32_t index

    def __cinit__(self, Batch b):
        b._load()
        self.b = b
        self.pos = b._rstart
        self.limit = b._rlimit
        self.index = 0

    def __iter__(self):
        return self

    cdef int advance(self, kb_record *r) except -1:
        """Reads the next record into *r: 1, or 0 at the end; raises on a fault."""
        cdef kb_fault f
        cdef size_t next_pos
        cdef int step = kb_v2_walk_step(self.pos, self.limit, self.index, self.b.h.record_count, &f)
        if step == 0:
            return 0
        if step < 0 or kb_v2_read_record_by(kb_v2_consumer_reader(self.b.h.attributes & KB_ATTR_CODEC_MASK),
                                            self.b._rec.ptr, self.pos, self.limit, r, &f, &next_pos) != 0:
            _raise_fault(&f, 0, self.b._payload)
        self.pos = r.end
        self.index += 1
        return 1

    cdef inline int64_t timestamp_of(self, const kb_record *r):
        return kb_v2_record_timestamp(&self.b.h, r.timestamp_delta)


cdef class _Records(_RecordIterator):
    def __next__(self):
        cdef kb_record r
        if not self.advance(&r):
            raise StopIteration
        cdef const uint8_t *buf = self.b._rec.ptr
        cdef Record rec = Record.__new__(Record)
        rec.offset_delta = r.offset_delta
        rec.offset = kb_wrap_add64(self.b.h.base_offset, r.offset_delta)
        rec.timestamp_delta = r.timestamp_delta
        rec.timestamp = self.timestamp_of(&r)
        rec.key = _bytes_or_none(buf, r.key, r.key_len)
        rec.value = _bytes_or_none(buf, r.value, r.value_len)
        rec.headers = _headers(buf, &r)
        rec.sequence = _sequence(self.b.h.base_sequence, r.offset_delta)
        rec.attributes = r.attributes
        rec.position = r.pos
        return rec


cdef class _Tuples(_RecordIterator):
    def __next__(self):
        cdef kb_record r
        if not self.advance(&r):
            raise StopIteration
        cdef const uint8_t *buf = self.b._rec.ptr
        return (kb_wrap_add64(self.b.h.base_offset, r.offset_delta), self.timestamp_of(&r),
                _bytes_or_none(buf, r.key, r.key_len), _bytes_or_none(buf, r.value, r.value_len),
                _headers(buf, &r))




cdef _read_v2_entry(_View v, kb_entry *e, bint verify_crc, kb_v2_header *h, int64_t base):
    """Reads the header of a complete v2 entry; raises unless it is well formed (with a matching
    CRC when verify_crc).  Positions in messages are relative to `base` (the start of the row)."""
    cdef kb_fault f
    if kb_v2_check_entry(v.ptr, e.pos, e.size, verify_crc, h, &f) != 0:
        _raise_fault(&f, -base)


cdef _check_decodable(_View v, kb_entry *e, bint verify_crc, kb_v2_header *h, int64_t base):
    """_read_v2_entry, and raises unless this version can read the batch's records."""
    cdef kb_fault f
    _read_v2_entry(v, e, verify_crc, h, base)
    if kb_v2_check_walkable(h, e.pos, &f) != 0:
        _raise_fault(&f, -base)
