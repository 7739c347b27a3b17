# Record ranges (kb_ranges.h): the one rule for which entries and records a ranged log read keeps,
# for the Python readers (the JVM reader calls the same C).
# Included by _native.pyx: one module, one file per concern.

cdef int _ranges_of(bounds, kb_ranges *r) except -1:
    """``bounds`` -- (first_offset, end_offset, first_timestamp, end_timestamp), None for an open
    side -- as the core's kb_ranges."""
    memset(r, 0, sizeof(r[0]))
    first_offset, end_offset, first_timestamp, end_timestamp = bounds
    if first_offset is not None:
        r.bounds |= KB_RANGE_FIRST_OFFSET
        r.first_offset = first_offset
    if end_offset is not None:
        r.bounds |= KB_RANGE_END_OFFSET
        r.end_offset = end_offset
    if first_timestamp is not None:
        r.bounds |= KB_RANGE_FIRST_TIMESTAMP
        r.first_timestamp = first_timestamp
    if end_timestamp is not None:
        r.bounds |= KB_RANGE_END_TIMESTAMP
        r.end_timestamp = end_timestamp
    return 0


def batch_in_ranges(batch, bounds, bint records=True,
                    size_t max_decompressed_bytes=_codecs.DEFAULT_MAX_DECOMPRESSED):
    """Whether ``batch`` (a ``Batch`` or ``LegacyBatch`` of a walk) can hold records in ``bounds``
    (see ``_ranges_of``): its header against the offsets and timestamps, as kafka-segment's readers
    prune (``records`` False: one row an entry, its first timestamp before the end too).  An entry
    whose header does not read is kept: its reader names the fault."""
    cdef _View v
    cdef LegacyBatch lb
    cdef kb_ranges r
    cdef kb_entry e
    cdef kb_decode_opts o
    _ranges_of(bounds, &r)
    memset(&o, 0, sizeof(o))
    if isinstance(batch, Batch):  # a v2 header says it all: nothing is decompressed
        v = (<Batch> batch)._v
    else:  # a compressed wrapper's first offset: through the batch's own decompressor, made once
        lb = <LegacyBatch> batch
        v = lb._v
        if lb._dec is None:
            lb._dec = _Decompressor(v, max_decompressed_bytes)
        o.decompress, o.ctx = _decompress_cb, <void *> lb._dec
    e.pos, e.size = batch.position, batch.size
    e.magic = batch.magic
    return kb_ranges_keeps_entry(&r, v.ptr, &e, records, &o) != 0


def index_entry_trusted(buf, int64_t position, int64_t segment_base, int64_t offset):
    """Whether an offset index entry (``offset``, ``position``) of a segment whose base offset is
    ``segment_base`` can be followed in ``buf`` (the segment's bytes): position 0, or a sound entry
    there whose first offset lies between the base and the entry's offset."""
    cdef _View v = _View(buf)
    return kb_index_entry_trusted(v.ptr, v.length, position, segment_base, offset) != 0
