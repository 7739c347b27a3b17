# A mapped segment that shrinks while it is read (csrc/kb_shrink_guard.h): zero pages, not SIGBUS.
# Included by _native.pyx: one module, one file per concern.

def _shrink_guard_add(const uint8_t[::1] mapped) -> int:
    """Registers the mapping under ``mapped`` (a Python mmap's buffer): a read of it past the
    file's end after the file shrank sees zeros instead of ending the process.  A handle, or -1
    (not guarded)."""
    if mapped.shape[0] == 0:
        return -1
    return kb_shrink_guard_add(&mapped[0], mapped.shape[0])


def _shrink_guard_hit(int handle) -> bool:
    """Whether a read of the registration met the file's new, shorter end."""
    return kb_shrink_guard_hit(handle) != 0


def _shrink_guard_remove(int handle) -> bool:
    """Ends the registration; ``_shrink_guard_hit``'s answer."""
    return kb_shrink_guard_remove(handle) != 0
