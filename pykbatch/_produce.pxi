# A producer's batches straight from Arrow columns (no Python object per record), and Kafka's
# default partitioner.  Included by _native.pyx: one module, one file per concern.

cdef extern from "kb_partition.h" nogil:
    int32_t kb_murmur2(const uint8_t *data, size_t n)
    int32_t kb_key_partition(const uint8_t *key, size_t n, int32_t partitions)
    void kb_partition_keys(const uint8_t *data, const void *offsets, int wide, const uint8_t *validity,
                           int64_t bit0, int64_t n, int32_t partitions, int32_t *out)


def murmur2(key) -> int:
    """Kafka's ``Utils.murmur2`` of ``key`` (a signed 32-bit int, as Java returns it)."""
    cdef const uint8_t *p
    cdef int32_t n = _blob(_as_bytes(key, "a key"), &p)
    return kb_murmur2(p, n)


def key_partition(key, int32_t partitions) -> int:
    """Kafka's default partition of a (non-null) key: toPositive(murmur2(key)) % partitions."""
    cdef const uint8_t *p
    if partitions <= 0:
        raise ValueError("a topic has at least one partition")
    cdef int32_t n = _blob(_as_bytes(key, "a key"), &p)
    if p == NULL:
        raise ValueError("a null key has no key partition (the sticky partition takes it)")
    return kb_key_partition(p, n, partitions)


cdef const char *_EMPTY_BYTES = ""


cdef class _Binary:
    """Raw pointers into an Arrow binary or string column (its slice offset applied); holds
    the array so the buffers outlive the pointers."""
    cdef object arr
    cdef const uint8_t *data
    cdef const uint8_t *offsets
    cdef const uint8_t *validity
    cdef int64_t bit0
    cdef int wide

    def __cinit__(self, arr):
        import pyarrow as pa
        t = arr.type
        if pa.types.is_large_binary(t) or pa.types.is_large_string(t):
            self.wide = 1
        elif pa.types.is_binary(t) or pa.types.is_string(t):
            self.wide = 0
        else:
            raise TypeError(f"a key, value or header column is binary or string, not {t}")
        self.arr = arr
        validity, offsets, data = arr.buffers()[:3]
        cdef uintptr_t address
        self.validity = NULL
        if validity is not None and arr.null_count:
            address = validity.address
            self.validity = <const uint8_t *> address
        self.bit0 = arr.offset
        cdef int64_t first = arr.offset
        address = offsets.address
        address += <uintptr_t> (first * (8 if self.wide else 4))
        self.offsets = <const uint8_t *> address
        self.data = <const uint8_t *> _EMPTY_BYTES
        if data is not None:
            address = data.address
            self.data = <const uint8_t *> address

    cdef inline bint null(self, int64_t i) noexcept nogil:
        cdef int64_t bit = self.bit0 + i
        return self.validity != NULL and not (self.validity[bit >> 3] >> (bit & 7) & 1)

    cdef inline int32_t get(self, int64_t i, const uint8_t **p) noexcept nogil:
        """The bytes of row i (-1 for null)."""
        cdef int64_t start, end
        if self.null(i):
            p[0] = NULL
            return -1
        if self.wide:
            start = (<const int64_t *> self.offsets)[i]
            end = (<const int64_t *> self.offsets)[i + 1]
        else:
            start = (<const int32_t *> self.offsets)[i]
            end = (<const int32_t *> self.offsets)[i + 1]
        p[0] = self.data + start
        return <int32_t> (end - start)


def partition_keys(keys, int32_t partitions):
    """Kafka's default partition of every key of an Arrow binary/string column (numpy int32;
    -1 where the key is null: the sticky partition's records)."""
    import numpy as np
    if partitions <= 0:
        raise ValueError("a topic has at least one partition")
    cdef _Binary k = _Binary(keys)
    out = np.empty(len(keys), dtype=np.int32)
    cdef int32_t[::1] o = out
    cdef int64_t n = len(keys)
    if n:
        with nogil:
            kb_partition_keys(k.data, k.offsets, k.wide, k.validity, k.bit0, n, partitions, &o[0])
    return out


def batch_ends(sizes, int64_t limit):
    """Where each batch of consecutive rows ends (exclusive, as an int64 array): rows are added to a
    batch while their ``sizes`` (each row's bytes at most) sum to ``limit`` or less; a batch has one
    row at least, so a row larger than ``limit`` goes alone."""
    import numpy as np
    cdef const int64_t[::1] s = np.ascontiguousarray(sizes, dtype=np.int64)
    out = np.empty(s.shape[0], dtype=np.int64)
    cdef int64_t[::1] ends = out
    cdef Py_ssize_t i, n = 0, start = 0
    cdef int64_t acc = 0
    for i in range(s.shape[0]):
        if i > start and acc + s[i] > limit:
            ends[n] = i
            n += 1
            start, acc = i, 0
        acc += s[i]
    if s.shape[0]:
        ends[n] = s.shape[0]
        n += 1
    return out[:n]


def build_batch_arrow(keys, values, rows, *, timestamps=None, headers=None, str compression="none",
                      int64_t producer_id=-1, int16_t producer_epoch=-1, int32_t base_sequence=-1,
                      bint is_transactional=False, int64_t now_ms=-1):
    """One v2 batch of the rows ``rows`` (int64 indices, in order) of Arrow columns: ``keys``
    (or None), ``values``, ``timestamps`` (int64 ms per row, or None: ``now_ms``) and ``headers``
    (list<struct<key: string, value: binary>>, Spark's Kafka column, or None).  The records are
    read in place from the Arrow buffers."""
    return ArrowBatcher(keys, values, timestamps=timestamps, headers=headers, now_ms=now_ms).build(
        rows, compression, producer_id, producer_epoch, base_sequence, is_transactional)


cdef class ArrowBatcher:
    """Arrow columns as a producer reads them (``build_batch_arrow``'s), looked at once: then
    each batch of any of their rows is built without asking pyarrow anything again (a 16 KiB
    batch, Kafka's default ``batch.size``, costs a few microseconds, not the columns' set-up)."""
    cdef _Binary v, kcol, hk, hv
    cdef object ts_arr, hoff_arr
    cdef const int64_t[::1] ts
    cdef const int32_t[::1] hoff
    cdef bint have_ts
    cdef readonly int64_t now_ms

    def __cinit__(self, keys, values, *, timestamps=None, headers=None, int64_t now_ms=-1):
        import numpy as np
        import pyarrow as pa
        self.v = _Binary(values)
        self.kcol = _Binary(keys) if keys is not None else None
        self.have_ts = timestamps is not None
        if self.have_ts:
            self.ts_arr = np.ascontiguousarray(timestamps, dtype=np.int64)
            self.ts = self.ts_arr
        self.now_ms = now_ms if now_ms >= 0 else int(time.time() * 1000)
        if headers is not None:
            # per row, the range [hoff[row], hoff[row + 1]) of the flattened key/value columns
            self.hoff_arr = np.ascontiguousarray(headers.offsets.to_numpy(zero_copy_only=False), dtype=np.int32)
            self.hoff = self.hoff_arr
            kv = headers.values
            if isinstance(kv, pa.StructArray):
                flat = kv.flatten()
                self.hk = _Binary(flat[kv.type.get_field_index("key")])
                self.hv = _Binary(flat[kv.type.get_field_index("value")])

    def build(self, rows, str compression="none", int64_t producer_id=-1, int16_t producer_epoch=-1,
              int32_t base_sequence=-1, bint is_transactional=False) -> bytes:
        """One v2 batch of ``rows`` (int64 row numbers, in order)."""
        import numpy as np
        cdef int codec = _codec_id(compression)
        cdef const int64_t[::1] idx = np.ascontiguousarray(rows, dtype=np.int64)
        if idx.shape[0] == 0:
            raise ValueError("a batch has at least one record")
        return self._batch(&idx[0], idx.shape[0], codec, producer_id, producer_epoch, base_sequence,
                           is_transactional, False)

    def build_many(self, rows, ends, str compression="none", int64_t producer_id=-1, int16_t producer_epoch=-1,
                   int32_t base_sequence=-1, bint is_transactional=False) -> list:
        """The batches rows[0:ends[0]], rows[ends[0]:ends[1]], ..., each a bytearray (a sender
        stamps its sequence in place) carrying ``base_sequence`` for now."""
        import numpy as np
        cdef int codec = _codec_id(compression)
        cdef const int64_t[::1] idx = np.ascontiguousarray(rows, dtype=np.int64)
        cdef const int64_t[::1] stop = np.ascontiguousarray(ends, dtype=np.int64)
        cdef Py_ssize_t b, first = 0
        out = []
        for b in range(stop.shape[0]):
            if stop[b] <= first or stop[b] > idx.shape[0]:
                raise ValueError(f"batch {b}: rows end at {stop[b]}, after {first} and within {idx.shape[0]}")
            out.append(self._batch(&idx[first], stop[b] - first, codec, producer_id, producer_epoch, base_sequence,
                                   is_transactional, True))
            first = stop[b]
        return out

    cdef object _batch(self, const int64_t *idx, Py_ssize_t n, int codec, int64_t producer_id,
                       int16_t producer_epoch, int32_t base_sequence, bint is_transactional, bint mutable):
        cdef Py_ssize_t i, k, total_headers = 0
        cdef bint with_headers = self.hk is not None
        if with_headers:
            for i in range(n):
                total_headers += self.hoff[idx[i] + 1] - self.hoff[idx[i]]
        cdef kb_record_in *recs = <kb_record_in *> calloc(n, sizeof(kb_record_in))
        cdef kb_header_in *hdrs = <kb_header_in *> calloc(max(total_headers, 1), sizeof(kb_header_in))
        cdef kb_header_in *hnext = hdrs
        cdef int64_t row, first_ts = 0, max_ts = -1, t, h0, h1
        cdef kb_v2_header h
        try:
            if recs == NULL or hdrs == NULL:
                raise MemoryError()
            for i in range(n):
                row = idx[i]
                t = self.ts[row] if self.have_ts else self.now_ms
                if t < 0:
                    raise ValueError(f"row {row}: invalid negative timestamp {t}")
                if i == 0:
                    first_ts = t
                if t > max_ts:
                    max_ts = t
                recs[i].timestamp_delta = t - first_ts
                recs[i].offset_delta = <int32_t> i
                recs[i].key_len = self.kcol.get(row, &recs[i].key) if self.kcol is not None else -1
                recs[i].value_len = self.v.get(row, &recs[i].value)
                if with_headers:
                    h0, h1 = self.hoff[row], self.hoff[row + 1]
                    recs[i].headers = hnext
                    recs[i].header_count = <int32_t> (h1 - h0)
                    for k in range(h1 - h0):
                        hnext[k].key_len = self.hk.get(h0 + k, &hnext[k].key)
                        if hnext[k].key_len < 0:
                            raise ValueError(f"row {row}: header keys cannot be null")
                        hnext[k].value_len = self.hv.get(h0 + k, &hnext[k].value)
                    hnext += h1 - h0
            memset(&h, 0, sizeof(h))
            h.base_offset = 0
            h.partition_leader_epoch = -1
            h.magic = 2
            h.attributes = codec | (KB_ATTR_TRANSACTIONAL if is_transactional else 0)
            h.last_offset_delta = <int32_t> (n - 1)
            h.base_timestamp = first_ts
            h.max_timestamp = max_ts
            h.producer_id = producer_id
            h.producer_epoch = producer_epoch
            h.base_sequence = base_sequence
            h.record_count = <int32_t> n
            return _assemble_as(&h, recs, n, mutable)
        finally:
            free(recs)
            free(hdrs)


def restamp_v2(bytearray batch, *, int64_t producer_id, int16_t producer_epoch, int32_t base_sequence):
    """Writes a producer's id, epoch and first sequence into a whole v2 batch in place (its CRC
    recomputed)."""
    if len(batch) < KB_V2_HEADER_SIZE or batch[16] != 2:
        raise ValueError("restamp_v2 takes one whole v2 batch")
    kb_v2_restamp(<uint8_t *> <char *> batch, len(batch), producer_id, producer_epoch, base_sequence)


def settle_delivered(int8_t[::1] outcome, int32_t[::1] partitions, int64_t[::1] offsets, const int64_t[::1] rows,
                     int32_t partition, int64_t base_offset, int8_t delivered, int8_t pending) -> int:
    """A report's bookkeeping for ``rows`` landed on ``partition`` at consecutive offsets from
    ``base_offset`` (-1: unknown, acks=0): -1 once written, else the position in ``rows`` of
    one settled already, with nothing written (a batch settled per record in numpy cost more
    than building it)."""
    cdef Py_ssize_t i, n = rows.shape[0], size = outcome.shape[0]
    cdef int64_t row
    for i in range(n):
        row = rows[i]
        if row < 0 or row >= size:
            raise IndexError(f"row {row} is not one of the report's {size}")
        if outcome[row] != pending:
            return i
    for i in range(n):
        row = rows[i]
        outcome[row] = delivered
        partitions[row] = partition
        offsets[row] = base_offset + i if base_offset >= 0 else -1
    return -1
