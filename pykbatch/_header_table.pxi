# The v2 batch headers of a buffer as columns (numpy), for the partition audit's table walk.
# Included by _native.pyx: one module, one file per concern.

def _v2_header_table(buf):
    """The headers of a buffer that holds complete v2 batches and nothing else, a column each
    (numpy): position, base_offset, last_offset, max_timestamp, producer_id, producer_epoch,
    base_sequence, last_sequence, is_transactional, is_control.  None for anything else (a legacy
    entry, a fault, an incomplete or zero-filled tail): the entry-by-entry reader then says what.
    Two hops over the headers without the GIL, so a thread can build it beside others."""
    import numpy as np
    cdef _View v = _view(buf)
    cdef size_t pos = 0, n = 0, i
    cdef kb_entry e
    cdef kb_fault f
    cdef kb_v2_header h
    cdef kb_entry_status st
    with nogil:
        while True:
            st = kb_next_entry(v.ptr, v.length, pos, &e, &f)
            if st != KB_ENTRY_OK or e.magic != 2 or kb_v2_check_entry(v.ptr, e.pos, e.size, 0, &h, &f) != 0:
                break
            pos = e.pos + e.size
            n += 1
    if st != KB_ENTRY_END:
        return None
    names = ("position", "base_offset", "last_offset", "max_timestamp", "producer_id")
    wide = {name: np.empty(n, np.int64) for name in names}
    narrow = {name: np.empty(n, np.int32) for name in ("producer_epoch", "base_sequence", "last_sequence")}
    flags = {name: np.empty(n, np.bool_) for name in ("is_transactional", "is_control")}
    cdef int64_t[::1] position = wide["position"], base = wide["base_offset"], last = wide["last_offset"]
    cdef int64_t[::1] max_ts = wide["max_timestamp"], pid = wide["producer_id"]
    cdef int32_t[::1] epoch = narrow["producer_epoch"], seq = narrow["base_sequence"], last_seq = narrow["last_sequence"]
    cdef uint8_t[::1] txn = flags["is_transactional"].view(np.uint8), ctl = flags["is_control"].view(np.uint8)
    pos = 0
    with nogil:
        for i in range(n):
            kb_next_entry(v.ptr, v.length, pos, &e, &f)
            kb_v2_check_entry(v.ptr, e.pos, e.size, 0, &h, &f)
            position[i], base[i] = e.pos, h.base_offset
            last[i] = kb_wrap_add64(h.base_offset, h.last_offset_delta)
            max_ts[i], pid[i], epoch[i] = h.max_timestamp, h.producer_id, h.producer_epoch
            seq[i], last_seq[i] = h.base_sequence, _sequence(h.base_sequence, h.last_offset_delta)
            txn[i] = (h.attributes & KB_ATTR_TRANSACTIONAL) != 0
            ctl[i] = (h.attributes & KB_ATTR_CONTROL) != 0
            pos = e.pos + e.size
    return {**wide, **narrow, **flags}
