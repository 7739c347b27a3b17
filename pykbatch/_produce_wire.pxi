# Produce requests written and Produce responses read, versions 3-12 (12: 11's bytes, KIP-890) (9+ "flexible": compact
# lengths and tagged fields), without an object per field: a producer at Kafka's default
# batch.size sends a request for every three batches or so, and in Python the framing and the
# answer's decoding cost more than building the batches.  The layouts are Kafka's
# ProduceRequest.json / ProduceResponse.json; tests compare both, every version, byte for byte
# and field for field with kafka-python's generated code.

cdef enum:
    PRODUCE_FLEXIBLE = 9


cdef Py_ssize_t _length_size(Py_ssize_t n, bint flexible, int width):
    """Bytes of a length prefix: compact (n + 1 as a varint) or fixed ``width``."""
    return kb_sizeof_uvarint(<uint32_t> (n + 1)) if flexible else width


cdef uint8_t *_put_length(uint8_t *p, Py_ssize_t n, bint flexible, int width):
    """A length (-1: null) as the version writes it: compact, or an int16 / int32."""
    if flexible:
        return kb_write_uvarint(p, <uint32_t> (n + 1))
    if width == 2:
        kb_store_be16(p, <uint16_t> <int16_t> n)
    else:
        kb_store_be32(p, <uint32_t> <int32_t> n)
    return p + width


def produce_request(int version, int32_t correlation_id, client_id, transactional_id, int16_t acks,
                    int32_t timeout_ms, batches) -> bytearray:
    """A whole Produce request, its size first (``batches``: topic -> [(partition, records)])."""
    if not 3 <= version <= 12:
        raise ValueError(f"Produce v{version} is not written here")
    cdef bint flexible = version >= PRODUCE_FLEXIBLE
    cdef bytes client = client_id.encode() if client_id is not None else None
    cdef bytes tid = transactional_id.encode() if transactional_id is not None else None
    topics = [(name.encode(), parts) for name, parts in batches.items()]
    views = []
    cdef const uint8_t[::1] v
    cdef Py_ssize_t size = 2 + 2 + 4 + 2 + (len(client) if client is not None else 0) + flexible
    size += _length_size(len(tid) if tid is not None else -1, flexible, 2) + (len(tid) if tid is not None else 0)
    size += 2 + 4 + _length_size(len(topics), flexible, 4)
    for name, parts in topics:
        size += _length_size(len(name), flexible, 2) + len(name) + _length_size(len(parts), flexible, 4) + flexible
        for partition, records in parts:
            v = records
            views.append(v)
            size += 4 + _length_size(v.shape[0], flexible, 4) + v.shape[0] + flexible
    size += flexible
    if size > INT32_MAX - 4:
        raise ValueError(f"a Produce request of {size} bytes is more than a frame holds")
    out = PyByteArray_FromStringAndSize(NULL, size + 4)
    cdef uint8_t *start = <uint8_t *> PyByteArray_AS_STRING(out)
    kb_store_be32(start, <uint32_t> size)
    kb_store_be16(start + 4, 0)  # api key: Produce
    kb_store_be16(start + 6, <uint16_t> version)
    kb_store_be32(start + 8, <uint32_t> correlation_id)
    # the header's client id keeps its int16 length in every version
    cdef uint8_t *p = _put_length(start + 12, len(client) if client is not None else -1, False, 2)
    if client is not None:
        memcpy(p, <const char *> client, len(client))
        p += len(client)
    if flexible:
        p = kb_write_uvarint(p, 0)  # the header's tagged fields: none
    if tid is None:
        p = _put_length(p, -1, flexible, 2)
    else:
        p = _put_length(p, len(tid), flexible, 2)
        memcpy(p, <const char *> tid, len(tid))
        p += len(tid)
    kb_store_be16(p, <uint16_t> acks)
    kb_store_be32(p + 2, <uint32_t> timeout_ms)
    p += 6
    p = _put_length(p, len(topics), flexible, 4)
    cdef Py_ssize_t k = 0, n
    cdef bytes encoded
    for name, parts in topics:
        encoded = name
        p = _put_length(p, len(encoded), flexible, 2)
        memcpy(p, <const char *> encoded, len(encoded))
        p += len(encoded)
        p = _put_length(p, len(parts), flexible, 4)
        for partition, records in parts:
            v = views[k]
            k += 1
            n = v.shape[0]
            kb_store_be32(p, <uint32_t> <int32_t> partition)
            p += 4
            p = _put_length(p, n, flexible, 4)
            if n:
                memcpy(p, &v[0], n)
            p += n
            if flexible:
                p = kb_write_uvarint(p, 0)
        if flexible:
            p = kb_write_uvarint(p, 0)
    if flexible:
        p = kb_write_uvarint(p, 0)
    assert p - start == size + 4
    return out


cdef class _AnswerReader:
    """A cursor over one response frame: every read checks the bytes are there (ValueError
    naming the byte otherwise)."""
    cdef const uint8_t[::1] buf
    cdef Py_ssize_t pos, end
    cdef bint flexible

    def __cinit__(self, frame, bint flexible):
        self.buf = frame
        self.pos = 0
        self.end = self.buf.shape[0]
        self.flexible = flexible

    cdef Py_ssize_t need(self, Py_ssize_t n) except -1:
        if n < 0 or n > self.end - self.pos:
            raise ValueError(f"the Produce response ends at byte {self.end}, {n} more wanted at byte {self.pos}")
        cdef Py_ssize_t at = self.pos
        self.pos += n
        return at

    cdef int64_t be(self, int width) except? -1:
        """A big-endian signed integer of ``width`` bytes (2, 4 or 8)."""
        cdef const uint8_t *p = &self.buf[self.need(width)]
        if width == 2:
            return <int16_t> kb_load_be16(p)
        if width == 4:
            return <int32_t> kb_load_be32(p)
        return <int64_t> kb_load_be64(p)

    cdef uint64_t uvarint(self) except? 0xFFFFFFFFFFFFFFFF:
        cdef uint32_t v
        if self.pos >= self.end:
            raise ValueError(f"the Produce response ends at byte {self.end}, a varint wanted there")
        cdef const uint8_t *p = &self.buf[self.pos]
        cdef int n = kb_read_uvarint(p, p + (self.end - self.pos), &v)
        if n <= 0:
            raise ValueError(f"a varint that ends early or runs past 5 bytes at byte {self.pos}")
        self.pos += n
        return v

    cdef Py_ssize_t length(self, int width, bint nullable) except -2:
        """A length prefix: -1 for null (where allowed)."""
        cdef int64_t n
        if self.flexible:
            n = <int64_t> self.uvarint() - 1
        else:
            n = self.be(width)
        if n < -1 or (n == -1 and not nullable):
            raise ValueError(f"a length of {n} before byte {self.pos}")
        return <Py_ssize_t> n

    cdef Py_ssize_t count(self) except -2:
        """An array's element count (null: 0), no more than bytes are left for."""
        cdef Py_ssize_t n = self.length(4, True)
        if n > self.end - self.pos:
            raise ValueError(f"an array of {n} elements in {self.end - self.pos} bytes at byte {self.pos}")
        return n if n > 0 else 0

    cdef object string(self, bint nullable):
        cdef Py_ssize_t n = self.length(2, nullable)
        if n < 0:
            return None
        if n == 0:
            return ""
        cdef Py_ssize_t at = self.need(n)
        return PyUnicode_DecodeUTF8(<const char *> &self.buf[at], n, NULL)

    cdef int skip_tags(self) except -1:
        cdef uint64_t tags, i
        if not self.flexible:
            return 0
        tags = self.uvarint()
        for i in range(tags):
            self.uvarint()  # the tag
            self.need(<Py_ssize_t> self.uvarint())
        return 0


def produce_answer(frame, int version):
    """A Produce response frame (without its size), versions 3-12: ``(correlation_id,
    throttle_time_ms, partitions)``, each partition ``(topic, partition, error_code, base_offset,
    log_append_time_ms, record_errors, error_message)`` and ``record_errors`` KIP-467's
    ``[(batch_index, message)]``.  Tagged fields (KIP-951's leader hints) are skipped.  A frame
    that ends early or does not decode raises ValueError."""
    if not 3 <= version <= 12:
        raise ValueError(f"Produce v{version} is not read here")
    cdef _AnswerReader r = _AnswerReader(frame, version >= PRODUCE_FLEXIBLE)
    cdef int32_t correlation_id = <int32_t> r.be(4)
    r.skip_tags()  # the response header's (v1, flexible versions)
    out = []
    cdef Py_ssize_t topics = r.count(), parts, errors, t, i, e
    cdef int32_t index, batch_index
    cdef int16_t code
    cdef int64_t base_offset, append_time
    for t in range(topics):
        name = r.string(False)
        parts = r.count()
        for i in range(parts):
            index = <int32_t> r.be(4)
            code = <int16_t> r.be(2)
            base_offset = r.be(8)
            append_time = r.be(8)
            if version >= 5:
                r.be(8)  # log_start_offset
            record_errors = []
            message = None
            if version >= 8:
                errors = r.count()
                for e in range(errors):
                    batch_index = <int32_t> r.be(4)
                    record_errors.append((batch_index, r.string(True)))
                    r.skip_tags()
                message = r.string(True)
            r.skip_tags()
            out.append((name, index, code, base_offset, append_time, record_errors, message))
        r.skip_tags()
    cdef int32_t throttle = <int32_t> r.be(4)
    r.skip_tags()
    return correlation_id, throttle, out
