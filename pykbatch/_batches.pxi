# v2 record batches: Batch, Record, the record iterators and the entry checks.
# Included by _native.pyx: one module, one file per concern.

@cython.final
@cython.freelist(512)
@cython.no_gc  # holds only ints, bytes, str and tuples of them: it can never be part of a cycle
cdef class Record:
    """One record.  ``headers`` is a tuple of ``(str, bytes | None)`` (always empty for magic 0/1);
    ``crc`` and ``is_valid`` are the message CRC-32 and its check for magic 0/1, None for v2;
    ``position`` is the record's byte position in the buffer (for a compressed batch: in its
    decompressed records)."""
    # offset, timestamp, key, value and headers -- what users read -- are plain object slots
    # published as read-only member descriptors (_publish_record_slots): CPython reads those by
    # offset (3.11+ specialises the attribute load), where a Cython property costs a call and,
    # for an integer, a new int on every read.
    cdef object _offset
    cdef object _timestamp
    cdef object _key
    cdef object _value
    cdef object _headers
    cdef readonly int32_t sequence
    cdef readonly int32_t offset_delta
    cdef readonly int64_t timestamp_delta
    cdef readonly int8_t attributes
    cdef readonly Py_ssize_t position
    cdef int64_t _crc       # magic 0/1: the message CRC-32; -1 for v2 (no per-record CRC)
    cdef int8_t _crc_ok     # magic 0/1: 1 or 0; -1 for v2

    @property
    def crc(self):
        return None if self._crc < 0 else self._crc

    @property
    def is_valid(self):
        return None if self._crc_ok < 0 else bool(self._crc_ok)

    def __repr__(self):
        offset, timestamp, key, value, headers = _record_fields(self)[:5]
        return f"Record(offset={offset}, timestamp={timestamp}, key={key!r}, value={value!r}, headers={headers!r})"

    def __eq__(self, other):
        if not isinstance(other, Record):
            return NotImplemented
        return _record_fields(self) == _record_fields(<Record> other)

    def __hash__(self):
        return hash(_record_fields(self))

    def __reduce__(self):
        return (_record_from_state, _record_fields(self) + (self.position, self.crc, self.is_valid))


# Module functions, not methods: a cdef method would give every Record a vtable pointer to set.
cdef inline void _set_record(Record r, offset, timestamp, key, value, headers) noexcept:
    r._offset, r._timestamp, r._key, r._value, r._headers = offset, timestamp, key, value, headers


cdef tuple _record_fields(Record r):
    return (r._offset, r._timestamp, r._key, r._value, r._headers, r.sequence, r.offset_delta, r.timestamp_delta,
            r.attributes)


def _record_from_state(offset, timestamp, key, value, headers, int32_t sequence, int32_t offset_delta,
                       int64_t timestamp_delta, int8_t attributes, Py_ssize_t position, crc, is_valid):
    cdef Record r = Record.__new__(Record)
    _set_record(r, offset, timestamp, key, value, headers)
    r.sequence, r.offset_delta, r.timestamp_delta, r.attributes = sequence, offset_delta, timestamp_delta, attributes
    r.position = position
    r._crc, r._crc_ok = (-1, -1) if crc is None else (crc, is_valid)
    return r


cdef PyMemberDef _RECORD_SLOTS[5]


cdef _publish_record_slots():
    """Exposes Record's object slots as read-only members named without the underscore.  Cython
    does not give a slot's offset, so each is found by storing a marker in it and looking for
    the marker in the object's words."""
    cdef const char *names[5]
    names[:] = ["offset", "timestamp", "key", "value", "headers"]
    markers = [object() for _ in range(5)]
    cdef Record probe = Record.__new__(Record)
    probe._offset, probe._timestamp, probe._key, probe._value, probe._headers = markers
    cdef PyTypeObject *tp = <PyTypeObject *> Record
    cdef PyObject **words = <PyObject **> <PyObject *> probe
    cdef Py_ssize_t nwords = tp.tp_basicsize // sizeof(PyObject *), w
    for i in range(5):
        for w in range(nwords):
            if words[w] == <PyObject *> markers[i]:
                break
        else:
            raise ImportError("pykbatch: Record's slots not found: rebuild")
        _RECORD_SLOTS[i].name = names[i]
        _RECORD_SLOTS[i].type = T_OBJECT_EX
        _RECORD_SLOTS[i].offset = w * <Py_ssize_t> sizeof(PyObject *)
        _RECORD_SLOTS[i].flags = READONLY
        _RECORD_SLOTS[i].doc = NULL
        (<dict> tp.tp_dict)[names[i].decode()] = PyDescr_NewMember(tp, &_RECORD_SLOTS[i])
    PyType_Modified(tp)


_publish_record_slots()


cdef inline object _bytes_or_none(const uint8_t *base, size_t pos, int32_t n):
    if n < 0:
        return None
    return PyBytes_FromStringAndSize(<const char *> base + pos, n)


cdef inline object _header_key(const uint8_t *buf, size_t pos, int32_t n, list seen, Py_ssize_t i):
    """A header's key as str; the same keys come back record after record, so an ASCII key equal
    to the one last seen at this header index is that str again (no decode, no allocation)."""
    cdef object s
    if i < KB_HEADER_KEY_CACHE:
        s = <object> PyList_GET_ITEM(seen, i)
        if (s is not None and PyUnicode_GET_LENGTH(s) == n
                and memcmp(PyUnicode_DATA(s), buf + pos, n) == 0):
            return s
    s = PyUnicode_DecodeUTF8(<const char *> buf + pos, n, "replace")
    if i < KB_HEADER_KEY_CACHE and PyUnicode_IS_COMPACT_ASCII(s):
        seen[i] = s
    return s


cdef inline tuple _headers(const uint8_t *buf, const kb_record *r, list seen):
    if r.header_count == 0:
        return _EMPTY_HEADERS
    return _header_tuple(buf, r, seen)


cdef tuple _header_tuple(const uint8_t *buf, const kb_record *r, list seen):
    cdef tuple out = PyTuple_New(r.header_count)
    cdef size_t p = r.headers, kp, vp
    cdef int32_t kl, vl
    cdef object pair
    for i in range(r.header_count):
        p = kb_v2_read_header_kv(buf, p, r.end, &kp, &kl, &vp, &vl)
        if seen is None:
            key = PyUnicode_DecodeUTF8(<const char *> buf + kp, kl, "replace")
        else:
            key = _header_key(buf, kp, kl, seen, i)
        pair = (key, _bytes_or_none(buf, vp, vl))
        Py_INCREF(pair)
        PyTuple_SET_ITEM(out, i, pair)
    return out


cdef inline int32_t _sequence(int32_t base, int32_t delta) noexcept nogil:
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
        """For a control batch, its control record parsed (``ControlRecord``:
        ``type``, ``type_name`` such as COMMIT / ABORT, ``coordinator_epoch`` of a transaction
        marker); None for a data batch or an empty control batch."""
        if not self.h.attributes & KB_ATTR_CONTROL:
            return None
        for r in self:
            return parse_control(r.key, r.value)
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

    def readable(self):
        """Every record that can be read, and in place of each that cannot, the
        ``KafkaDataError`` saying why (not raised).  Where iteration (Kafka's reader) stops at a
        record whose fields are broken, this walk passes over it when its length can be trusted
        -- as a repair does -- so the records after it are read; it ends where a length cannot be
        trusted or the bytes run out (one error, then the end).  What every output of pykbatch
        counts as readable: the dump prints these records, exports write them."""
        try:
            self._load()
        except _errors.KafkaDataError as exc:  # a payload its codec rejects: nothing of it to read
            return iter((exc,))
        return _Readable(self)


cdef class _RecordIterator:
    """Walks a batch's records; subclasses decide what each record becomes."""
    cdef Batch b
    cdef size_t pos
    cdef size_t limit
    cdef int32_t index
    cdef list header_keys  # the header keys last seen, by index (_header_key)

    def __cinit__(self, Batch b):
        b._load()
        self.b = b
        self.pos = b._rstart
        self.limit = b._rlimit
        self.index = 0
        self.header_keys = [None] * KB_HEADER_KEY_CACHE

    def __iter__(self):
        return self

    cdef inline int64_t timestamp_of(self, const kb_record *r) noexcept:
        return kb_v2_record_timestamp(&self.b.h, r.timestamp_delta)


cdef inline int _advance(_RecordIterator it, kb_record *r) except -1:
    """Reads the iterator's next record into *r: 1, or 0 at the end; raises on a fault.  (A module
    function: called per record without a vtable hop.)"""
    cdef kb_fault f
    cdef size_t next_pos
    cdef int step = kb_v2_walk_step(it.pos, it.limit, it.index, it.b.h.record_count, &f)
    if step == 0:
        return 0
    if step < 0 or kb_v2_read_record_by(kb_v2_consumer_reader(it.b.h.attributes & KB_ATTR_CODEC_MASK),
                                        it.b._rec.ptr, it.pos, it.limit, r, &f, &next_pos) != 0:
        _raise_fault(&f, 0, it.b._payload)
    it.pos = r.end
    it.index += 1
    return 1


cdef inline Record _record_of(_RecordIterator it, const kb_record *r):
    """The Record object of the record just read into *r (iteration and ``readable`` alike)."""
    cdef const uint8_t *buf = it.b._rec.ptr
    cdef Record rec = Record.__new__(Record)
    rec.offset_delta = r.offset_delta
    _set_record(rec, kb_wrap_add64(it.b.h.base_offset, r.offset_delta), it.timestamp_of(r),
                _bytes_or_none(buf, r.key, r.key_len), _bytes_or_none(buf, r.value, r.value_len),
                _headers(buf, r, it.header_keys))
    rec.timestamp_delta = r.timestamp_delta
    rec.sequence = _sequence(it.b.h.base_sequence, r.offset_delta)
    rec.attributes = r.attributes
    rec.position = r.pos
    rec._crc = rec._crc_ok = -1
    return rec


@cython.final
cdef class _Records(_RecordIterator):
    def __next__(self):
        cdef kb_record r
        if not _advance(self, &r):
            raise StopIteration
        return _record_of(self, &r)


@cython.final
cdef class _Readable(_RecordIterator):
    cdef bint done

    def __next__(self):
        cdef kb_record r
        cdef kb_fault f
        cdef size_t next_pos = 0
        if self.done:
            raise StopIteration
        cdef int step = kb_v2_walk_step(self.pos, self.limit, self.index, self.b.h.record_count, &f)
        if step == 0:
            raise StopIteration
        if step < 0:
            self.done = True
            return _fault_error(&f, 0, self.b._payload)
        if kb_v2_read_record_by(kb_v2_consumer_reader(self.b.h.attributes & KB_ATTR_CODEC_MASK),
                                self.b._rec.ptr, self.pos, self.limit, &r, &f, &next_pos) != 0:
            self.index += 1
            if next_pos == 0 or next_pos <= self.pos:
                self.done = True  # no length to trust: nothing after it can be found
            else:
                self.pos = next_pos
            return _fault_error(&f, 0, self.b._payload)
        self.pos = r.end
        self.index += 1
        return _record_of(self, &r)


@cython.final
cdef class _Tuples(_RecordIterator):
    def __next__(self):
        cdef kb_record r
        if not _advance(self, &r):
            raise StopIteration
        cdef const uint8_t *buf = self.b._rec.ptr
        return (kb_wrap_add64(self.b.h.base_offset, r.offset_delta), self.timestamp_of(&r),
                _bytes_or_none(buf, r.key, r.key_len), _bytes_or_none(buf, r.value, r.value_len),
                _headers(buf, &r, self.header_keys))




cdef _read_v2_entry(_View v, kb_entry *e, bint verify_crc, kb_v2_header *h, int64_t base):
    """Reads the header of a complete v2 entry; raises unless it is well formed (with a matching
    CRC when verify_crc).  Positions in messages are relative to `base` (the start of the row)."""
    cdef kb_fault f
    if kb_v2_check_entry(v.ptr, e.pos, e.size, verify_crc, h, &f) != 0:
        _raise_fault(&f, -base)


class ControlRecord(_NamedTuple):
    """A control record (``parse_control``): Kafka's type id (-1 for a type it does not know),
    its name (UNKNOWN then), and a transaction marker's coordinator epoch (else None)."""
    type: int
    type_name: str
    coordinator_epoch: object  # int for ABORT / COMMIT markers, None otherwise


def control_type(key) -> int:
    """The control type id of a control record key (ControlRecordType.parse; -1: unknown)."""
    cdef kb_fault f
    cdef int typ
    cdef _View v
    cdef int rc
    if key is None:
        rc = kb_control_key(NULL, -1, 0, &typ, &f)
    else:
        v = _view(key)
        rc = kb_control_key(v.ptr, <int32_t> min(v.length, INT32_MAX), 0, &typ, &f)
    _control_fault(rc, &f)
    return typ


def parse_control(key, value) -> ControlRecord:
    """A control record's key and value read as Kafka reads them (ABORT / COMMIT markers' values
    too): a KafkaDataError names the rule a malformed one breaks."""
    cdef kb_fault f
    cdef int32_t epoch
    cdef _View v
    typ = control_type(key)
    if typ not in (KB_CONTROL_ABORT, KB_CONTROL_COMMIT):
        return ControlRecord(typ, _CONTROL_TYPE_NAMES.get(typ, "UNKNOWN"), None)
    if value is None:
        _control_fault(kb_control_marker(NULL, -1, 0, &epoch, &f), &f)
    v = _view(value)
    _control_fault(kb_control_marker(v.ptr, <int32_t> min(v.length, INT32_MAX), 0, &epoch, &f), &f)
    return ControlRecord(typ, _CONTROL_TYPE_NAMES[typ], epoch)


cdef _control_fault(int rc, const kb_fault *f):
    """A malformed control key or marker value: the rule's error, at no byte (a record's key or
    value has no place in the caller's buffer)."""
    if rc != 0:
        rule = RULES[f.rule]
        message, _ = _render(rule, (f.args[0], f.args[1], f.args[2]), "t-0", reader=True)
        raise _errors.error_for(kb_rule_code(f.rule), message, None, rule.id)
