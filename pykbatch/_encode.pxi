# Writing batches: build_batch and encode, for every magic and codec.
# Included by _native.pyx: one module, one file per concern.

cdef inline int32_t _blob(object b, const uint8_t **p) except -2:
    """Pointer and length of a bytes object, -1 for None."""
    if b is None:
        p[0] = NULL
        return -1
    if len(<bytes> b) > INT32_MAX:
        raise OverflowError("a key, value or header is larger than 2 GiB")
    p[0] = <const uint8_t *> PyBytes_AS_STRING(b)
    return <int32_t> len(<bytes> b)


cdef object _as_bytes(object x, str what):
    if x is None or type(x) is bytes:
        return x
    if isinstance(x, str):
        raise TypeError(f"{what} must be bytes-like or None, not str (encode it first)")
    return bytes(x)


cdef bytes _encode(dict header, list records):
    """records: list of (key, value, headers, attributes, timestamp_delta, offset_delta);
    keys/values/header values bytes or None, header keys bytes."""
    cdef Py_ssize_t n = len(records), i, k, nh
    cdef kb_record_in *recs = <kb_record_in *> calloc(max(n, 1), sizeof(kb_record_in))
    cdef kb_header_in *hdrs
    cdef kb_v2_header h
    cdef int64_t size
    if recs == NULL:
        raise MemoryError()
    try:
        for i in range(n):
            key, value, hl, attributes, ts_delta, off_delta = records[i]
            recs[i].key_len = _blob(key, &recs[i].key)
            recs[i].value_len = _blob(value, &recs[i].value)
            recs[i].attributes = attributes
            recs[i].timestamp_delta = ts_delta
            recs[i].offset_delta = off_delta
            nh = len(hl)
            recs[i].header_count = <int32_t> nh
            if nh:
                hdrs = <kb_header_in *> calloc(nh, sizeof(kb_header_in))
                if hdrs == NULL:
                    raise MemoryError()
                recs[i].headers = hdrs
                for k in range(nh):
                    hk, hv = hl[k]
                    hdrs[k].key_len = _blob(hk, &hdrs[k].key)
                    hdrs[k].value_len = _blob(hv, &hdrs[k].value)
        h.base_offset = header["base_offset"]
        h.partition_leader_epoch = header["partition_leader_epoch"]
        h.magic = 2
        h.attributes = header["attributes"]
        h.last_offset_delta = header["last_offset_delta"]
        h.base_timestamp = header["base_timestamp"]
        h.max_timestamp = header["max_timestamp"]
        h.producer_id = header["producer_id"]
        h.producer_epoch = header["producer_epoch"]
        h.base_sequence = header["base_sequence"]
        h.record_count = header["record_count"]
        return _assemble(&h, recs, n)
    finally:
        for i in range(n):
            free(<void *> recs[i].headers)
        free(recs)


cdef int _codec_id(str compression) except -1:
    """The attributes' codec bits of a compression name a caller gave (ValueError when unknown)."""
    if compression not in _COMPRESSION_IDS:
        raise ValueError(f"unknown compression {compression!r}; expected one of {COMPRESSION_NAMES}")
    return _COMPRESSION_IDS[compression]


cdef bytes _assemble(const kb_v2_header *h, const kb_record_in *recs, size_t n):
    """A whole v2 batch from its header and records, compressed with the codec that the
    header's attributes name."""
    return _assemble_as(h, recs, n, False)


cdef object _assemble_as(const kb_v2_header *h, const kb_record_in *recs, size_t n, bint mutable):
    """``_assemble``'s batch as bytes, or (``mutable``) as a bytearray: a producer stamps its
    sequence into its batches in place, and building them there saves a copy of each."""
    cdef int codec = h.attributes & KB_ATTR_CODEC_MASK
    cdef int64_t size = kb_v2_records_size(recs, n)
    cdef char *at
    if size < 0 or size + KB_V2_HEADER_SIZE - KB_LOG_OVERHEAD > INT32_MAX:
        raise _errors.rule_error("encode.too_large")
    if codec == KB_CODEC_NONE:
        out = _new_buffer(size + KB_V2_HEADER_SIZE, mutable, &at)
        kb_v2_write_records(recs, n, <uint8_t *> at + KB_V2_HEADER_SIZE)
    else:
        records = PyBytes_FromStringAndSize(NULL, size)
        kb_v2_write_records(recs, n, <uint8_t *> PyBytes_AS_STRING(records))
        payload = _codecs.compress(codec, records, 2)
        out = _new_buffer(len(payload) + KB_V2_HEADER_SIZE, mutable, &at)
        memcpy(at + KB_V2_HEADER_SIZE, PyBytes_AS_STRING(payload), len(payload))
    kb_v2_write_header(h, <uint8_t *> at, len(out))
    return out


def compress_v2(batch, str compression, bint mutable=True):
    """An uncompressed v2 batch (a whole one, as built) with its records area compressed by
    ``compression``: every other header field kept, the codec set, the CRC computed anew.  A
    producer checks its records before it compresses them, so no check decompresses them."""
    cdef const uint8_t[::1] b = batch
    cdef kb_v2_header h
    cdef char *at
    if b.shape[0] < KB_V2_HEADER_SIZE or b[16] != 2:
        raise ValueError("compress_v2 takes one whole v2 batch")
    kb_v2_read_header(&b[0], &h)
    if h.attributes & KB_ATTR_CODEC_MASK:
        raise ValueError("compress_v2 takes an uncompressed batch")
    cdef int codec = _codec_id(compression)
    if codec == KB_CODEC_NONE:
        return bytearray(batch) if mutable else bytes(batch)
    payload = _codecs.compress(codec, PyBytes_FromStringAndSize(<const char *> &b[KB_V2_HEADER_SIZE],
                                                                b.shape[0] - KB_V2_HEADER_SIZE), 2)
    out = _new_buffer(len(payload) + KB_V2_HEADER_SIZE, mutable, &at)
    memcpy(at + KB_V2_HEADER_SIZE, PyBytes_AS_STRING(payload), len(payload))
    h.attributes = <int16_t> (h.attributes | codec)
    kb_v2_write_header(&h, <uint8_t *> at, len(out))
    return out


cdef object _new_buffer(Py_ssize_t size, bint mutable, char **at):
    if mutable:
        out = PyByteArray_FromStringAndSize(NULL, size)
        at[0] = PyByteArray_AS_STRING(out)
    else:
        out = PyBytes_FromStringAndSize(NULL, size)
        at[0] = PyBytes_AS_STRING(out)
    return out


cdef tuple _header_pairs(object headers):
    if not headers:
        return _EMPTY_HEADERS
    out = []
    for hk, hv in headers:
        if isinstance(hk, str):
            hk = hk.encode("utf-8")
        elif hk is None:
            raise ValueError("header keys cannot be null")
        else:
            hk = _as_bytes(hk, "a header key")
        out.append((hk, _as_bytes(hv, "a header value")))
    return tuple(out)


cdef object _field(object rec, str name, object default):
    if isinstance(rec, dict):
        return rec.get(name, default)
    return getattr(rec, name, default)


def build_batch(records, *, int64_t base_offset=0, int32_t partition_leader_epoch=-1,
                int64_t producer_id=-1, int16_t producer_epoch=-1, int32_t base_sequence=-1,
                bint is_transactional=False, bint is_control=False, str timestamp_type=CREATE_TIME,
                max_timestamp=None, str compression="none", int magic=2):
    """Build one record batch, as Kafka's ``MemoryRecordsBuilder`` does.

    ``records``: an iterable of mappings or objects with ``key``, ``value``
    (bytes or None), optional ``headers`` (pairs of str/bytes key and
    bytes/None value) and optional ``timestamp`` (ms; default: now).  A
    ``(key, value)`` tuple is accepted too.  Offset deltas are 0..n-1, the base
    timestamp is the first record's and ``maxTimestamp`` the largest (or
    ``max_timestamp`` for LogAppendTime).  Returns ``bytes``.

    ``magic=0`` or ``1`` builds a legacy message set instead: one entry per record when
    uncompressed, else one wrapper message (offset = the last record's) around the inner set
    (v1: relative inner offsets); no headers, producer fields, transactions or zstd, as Kafka.
    """
    _codec_id(compression)
    if magic not in (0, 1, 2):
        raise ValueError(f"Invalid magic value {magic}")
    if magic < 2:
        if is_transactional or is_control or producer_id >= 0:
            raise ValueError(f"Idempotent, transactional and control records need magic 2, not {magic}")
        if compression == "zstd":
            raise ValueError(f"ZStandard compression is not supported for magic {magic}")
    if timestamp_type not in _TIMESTAMP_TYPES:
        raise ValueError(f"timestamp_type must be {' or '.join(map(repr, _TIMESTAMP_TYPES))}")
    if is_transactional and producer_id < 0:
        raise ValueError("transactional batches need a producer_id")
    now = None
    rows = []
    cdef int64_t first_ts = -1, max_ts = -1, ts
    cdef int32_t i = 0
    for rec in records:
        if isinstance(rec, tuple):
            key, value = rec
            headers = ()
            ts_obj = None
        else:
            key = _field(rec, "key", None)
            value = _field(rec, "value", None)
            headers = _field(rec, "headers", ())
            ts_obj = _field(rec, "timestamp", None)
        if ts_obj is None:
            if now is None:
                now = int(time.time() * 1000)
            ts_obj = now
        ts = ts_obj
        if ts < 0 and ts != -1:
            raise ValueError(f"Invalid negative timestamp {ts}")
        if i == 0:
            first_ts = ts
        if ts > max_ts:
            max_ts = ts
        rows.append((_as_bytes(key, "a key"), _as_bytes(value, "a value"), _header_pairs(headers),
                     0, ts, i))
        i += 1
    if magic < 2:
        if any(hl for _, _, hl, _, _, _ in rows):
            raise ValueError(f"Magic v{magic} does not support record headers")
        if timestamp_type == LOG_APPEND_TIME and max_timestamp is None:
            raise ValueError("LogAppendTime batches need max_timestamp (the broker's append time)")
        stamp = max_timestamp if timestamp_type == LOG_APPEND_TIME else None
        return _build_legacy([(k, v, t if stamp is None else stamp) for k, v, _, _, t, _ in rows], magic,
                             _COMPRESSION_IDS[compression], base_offset, stamp)
    rows = [(k, v, hl, a, <int64_t> (t - first_ts), d) for k, v, hl, a, t, d in rows]
    attributes = _COMPRESSION_IDS[compression]
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= KB_ATTR_LOG_APPEND_TIME
        if max_timestamp is None:
            raise ValueError("LogAppendTime batches need max_timestamp (the broker's append time)")
    if is_transactional:
        attributes |= KB_ATTR_TRANSACTIONAL
    if is_control:
        attributes |= KB_ATTR_CONTROL
    header = dict(base_offset=base_offset, partition_leader_epoch=partition_leader_epoch,
                  attributes=attributes, last_offset_delta=max(i - 1, 0), base_timestamp=first_ts,
                  max_timestamp=max_ts if max_timestamp is None else max_timestamp,
                  producer_id=producer_id, producer_epoch=producer_epoch,
                  base_sequence=base_sequence, record_count=i)
    return _encode(header, rows)


cdef bytes _legacy_set(list messages, int magic, int attributes, int64_t first_offset):
    """Entries of (key, value, timestamp) messages with offsets first_offset, first_offset + 1, ..."""
    cdef const uint8_t *kp
    cdef const uint8_t *vp
    cdef int32_t kl, vl
    cdef size_t total = 0
    for key, value, _ in messages:
        total += kb_legacy_entry_size(magic, -1 if key is None else len(key), -1 if value is None else len(value))
    out = PyBytes_FromStringAndSize(NULL, total)
    cdef uint8_t *p = <uint8_t *> PyBytes_AS_STRING(out)
    cdef int64_t offset = first_offset
    for key, value, ts in messages:
        kl = _blob(key, &kp)
        vl = _blob(value, &vp)
        kb_legacy_write(p, offset, magic, attributes, ts if magic > 0 else -1, kp, kl, vp, vl)
        p += kb_legacy_entry_size(magic, kl, vl)
        offset += 1
    return out


cdef bytes _legacy_wrapper(bytes inner, int magic, int codec, int attributes, int64_t offset, int64_t timestamp):
    """A compressed wrapper message around an inner message set."""
    return _legacy_set([(None, _codecs.compress(codec, inner, magic), timestamp)], magic, codec | attributes,
                       offset)


cdef bytes _build_legacy(list messages, int magic, int codec, int64_t base_offset, object log_append_time):
    """Kafka's legacy builder: uncompressed, one entry per message; compressed, one wrapper whose
    offset is the last message's, with relative inner offsets for v1 (absolute for v0)."""
    cdef int attributes = KB_ATTR_LOG_APPEND_TIME if log_append_time is not None and magic > 0 else 0
    if codec == KB_CODEC_NONE:
        return _legacy_set(messages, magic, attributes, base_offset)
    inner = _legacy_set(messages, magic, attributes, 0 if magic > 0 else base_offset)
    last = base_offset + len(messages) - 1
    stamp = log_append_time if log_append_time is not None else max([m[2] for m in messages] or [-1])
    return _legacy_wrapper(inner, magic, codec, attributes, last, stamp if magic > 0 else -1)


cdef bytes _reencode_legacy(LegacyBatch b):
    """An uncompressed message from its fields; a wrapper around its own inner set, recompressed."""
    cdef const kb_legacy_msg *m = &b.m
    cdef int codec = m.attributes & KB_ATTR_CODEC_MASK
    if codec == KB_CODEC_NONE:
        out = PyBytes_FromStringAndSize(NULL, kb_legacy_entry_size(m.magic, m.key_len, m.value_len))
        kb_legacy_write(<uint8_t *> PyBytes_AS_STRING(out), m.offset, m.magic, <uint8_t> m.attributes,
                        m.timestamp, b._v.ptr + m.key, m.key_len, b._v.ptr + m.value, m.value_len)
        return out
    b._load()
    inner = bytes(memoryview(b._rec.mv)[b._rstart:b._rlimit]) if b._rlimit > b._rstart else b""
    return _legacy_wrapper(inner, m.magic, codec, (<uint8_t> m.attributes) & ~KB_ATTR_CODEC_MASK, m.offset,
                           m.timestamp)


cdef bytes _reencode(Batch b):
    """Re-encode a decoded batch from its own records (no Python object per record), with the
    batch's own codec."""
    cdef kb_record r
    cdef kb_fault f
    cdef size_t next_pos, hp, kp, vp
    cdef int32_t kl, vl, i, k
    cdef int64_t n_headers = 0, size
    cdef _RecordIterator walk = _RecordIterator(b)
    cdef const uint8_t *buf = b._rec.ptr
    cdef int32_t n = max(b.h.record_count, 0)
    while _advance(walk, &r):
        n_headers += r.header_count
    cdef kb_record_in *recs = <kb_record_in *> calloc(max(n, 1), sizeof(kb_record_in))
    cdef kb_header_in *hdrs = <kb_header_in *> calloc(max(n_headers, 1), sizeof(kb_header_in))
    cdef kb_header_in *hnext = hdrs
    try:
        if recs == NULL or hdrs == NULL:
            raise MemoryError()
        walk = _RecordIterator(b)
        i = 0
        while _advance(walk, &r):
            recs[i].key = buf + r.key
            recs[i].key_len = r.key_len if r.key_len >= 0 else -1
            recs[i].value = buf + r.value
            recs[i].value_len = r.value_len if r.value_len >= 0 else -1
            recs[i].attributes = r.attributes
            recs[i].timestamp_delta = r.timestamp_delta
            recs[i].offset_delta = r.offset_delta
            recs[i].header_count = r.header_count
            recs[i].headers = hnext
            hp = r.headers
            for k in range(r.header_count):
                hp = kb_v2_read_header_kv(buf, hp, r.end, &kp, &kl, &vp, &vl)
                hnext[k].key = buf + kp
                hnext[k].key_len = kl
                hnext[k].value = buf + vp
                hnext[k].value_len = vl if vl >= 0 else -1
            hnext += r.header_count
            i += 1
        return _assemble(&b.h, recs, n)
    finally:
        free(recs)
        free(hdrs)


def encode(batches):
    """Re-encode decoded batches into one buffer: ``Batch`` objects, or objects with the
    same header fields whose records carry ``key``, ``value``, ``headers``,
    ``offset_delta``, ``timestamp_delta`` and ``attributes`` (e.g. edited copies).

    For any valid uncompressed v2 input the output is byte-identical, except that
    non-minimal varints and negative lengths other than -1 are written in Kafka's
    canonical form (and the CRC is recomputed).  A compressed batch is recompressed
    with its codec: the same records, framed as Kafka's producer frames them.
    """
    out = []
    for b in batches:
        if isinstance(b, Batch):
            out.append(_reencode(<Batch> b))
            continue
        if isinstance(b, LegacyBatch):
            out.append(_reencode_legacy(<LegacyBatch> b))
            continue
        rows = [(_as_bytes(r.key, "a key"), _as_bytes(r.value, "a value"), _header_pairs(r.headers),
                 r.attributes, r.timestamp_delta, r.offset_delta) for r in b]
        header = dict(base_offset=b.base_offset, partition_leader_epoch=b.partition_leader_epoch,
                      attributes=b.attributes, last_offset_delta=b.last_offset_delta,
                      base_timestamp=b.base_timestamp, max_timestamp=b.max_timestamp,
                      producer_id=b.producer_id, producer_epoch=b.producer_epoch,
                      base_sequence=b.base_sequence, record_count=b.record_count)
        out.append(_encode(header, rows))
    return b"".join(out)



def frame_v2(records, *, int64_t base_offset, int32_t partition_leader_epoch, int16_t attributes,
             int32_t last_offset_delta, int64_t base_timestamp, int64_t max_timestamp, int64_t producer_id,
             int16_t producer_epoch, int32_t base_sequence, int32_t record_count, crc=None, bint build=True):
    """A v2 batch around a records area already in its final form (compressed or not), every
    header field given; returns ``(batch, computed_crc)``.  ``crc``: the CRC to store instead of the
    computed one (a batch carried over from another format keeps its own, so Kafka's checks judge
    it).  ``build=False``: only the CRC Kafka would compute, ``(None, computed_crc)``, without
    copying the records."""
    cdef const uint8_t *rp
    cdef int32_t n = _blob(_as_bytes(records, "records") or b"", &rp)
    cdef Py_ssize_t size = KB_V2_HEADER_SIZE + <Py_ssize_t> n
    if size - KB_LOG_OVERHEAD > INT32_MAX:
        raise ValueError("a batch's records area must fit an int32 length")
    cdef kb_v2_header h
    memset(&h, 0, sizeof(h))
    h.base_offset = base_offset
    h.partition_leader_epoch = partition_leader_epoch
    h.attributes = attributes
    h.last_offset_delta = last_offset_delta
    h.base_timestamp = base_timestamp
    h.max_timestamp = max_timestamp
    h.producer_id = producer_id
    h.producer_epoch = producer_epoch
    h.base_sequence = base_sequence
    h.record_count = record_count
    cdef uint8_t header[KB_V2_HEADER_SIZE]
    cdef uint32_t computed
    if not build:  # the header alone (its length and CRC fields are outside the checksum), then the records
        kb_v2_write_header(&h, header, KB_V2_HEADER_SIZE)
        computed = kb_crc32c(kb_crc32c(0, header + KB_V2_CRC_START, KB_V2_HEADER_SIZE - KB_V2_CRC_START), rp, n)
        return None, computed
    out = PyBytes_FromStringAndSize(NULL, size)
    cdef uint8_t *p = <uint8_t *> PyBytes_AS_STRING(out)
    memcpy(p + KB_V2_HEADER_SIZE, rp, n)
    kb_v2_write_header(&h, p, <size_t> size)
    computed = kb_load_be32(p + KB_V2_AT_CRC)
    if crc is not None:
        kb_store_be32(p + KB_V2_AT_CRC, <uint32_t> crc)
    return out, computed
