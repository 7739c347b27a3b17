# read_committed's state (kb_isolation): the one rule every reader decides batches by.
# Included by _native.pyx: one module, one file per concern.

_DECISIONS = ("keep", "drop", "hold")  # kb_iso_decision's order: pykbatch.kafka.isolation's names


cdef _int64s(values):
    import numpy as np
    return np.ascontiguousarray(np.array(list(values), dtype=np.int64).reshape(-1))


cdef class IsolationState:
    """kb_isolation for a Python reader: ``pending`` the aborted transactions ((first offset,
    producer id) pairs, any order), ``undecided`` producers an earlier read left undecided."""
    cdef kb_isolation iso

    def __cinit__(self, bint committed, last_stable_offset=None, pending=(), undecided=()):
        cdef int64_t lso = 0 if last_stable_offset is None else last_stable_offset
        cdef const int64_t[::1] pairs = _int64s(x for pair in pending for x in pair)
        cdef const int64_t[::1] held = _int64s(undecided)
        if kb_isolation_init(&self.iso, committed, NULL if last_stable_offset is None else &lso,
                             &pairs[0] if pairs.shape[0] else NULL, <int32_t> (pairs.shape[0] // 2)) != 0 \
                or kb_isolation_add_undecided(&self.iso, &held[0] if held.shape[0] else NULL,
                                              <int32_t> held.shape[0]) != 0:
            raise MemoryError("pykbatch: no memory for the isolation state")

    def __dealloc__(self):
        kb_isolation_free(&self.iso)

    def past_end(self, int64_t base_offset) -> bool:
        return bool(kb_isolation_past_end(&self.iso, base_offset))

    def reads_marker(self, int64_t producer_id, bint control) -> bool:
        return bool(kb_isolation_reads_marker(&self.iso, producer_id, control))

    def decide(self, int64_t producer_id, int64_t last_offset, bint control, bint transactional,
               bint abort_marker) -> str:
        cdef int d = kb_isolation_decide(&self.iso, producer_id, last_offset, control, transactional, abort_marker)
        if d == KB_ISO_NO_MEMORY:
            raise MemoryError("pykbatch: no memory for the isolation state")
        return _DECISIONS[d]

    def unreadable(self, int64_t last_offset) -> None:
        if kb_isolation_unreadable(&self.iso, last_offset) != 0:
            raise MemoryError("pykbatch: no memory for the isolation state")

    def settle(self, aborted, int64_t next_offset) -> None:
        cdef const int64_t[::1] ids = _int64s(aborted)
        if kb_isolation_settle(&self.iso, &ids[0] if ids.shape[0] else NULL, <int32_t> ids.shape[0],
                               next_offset) != 0:
            raise MemoryError("pykbatch: no memory for the isolation state")

    @property
    def last_stable_offset(self):
        return self.iso.last_stable_offset if self.iso.bounded else None

    @property
    def aborted(self) -> frozenset:
        return frozenset(self.iso.aborted.ids[i] for i in range(self.iso.aborted.count))

    @property
    def undecided(self) -> frozenset:
        return frozenset(self.iso.undecided.ids[i] for i in range(self.iso.undecided.count))

    @property
    def pending(self) -> list:
        return [(self.iso.pending[2 * i], self.iso.pending[2 * i + 1])
                for i in range(self.iso.next_pending, self.iso.pending_count)]
