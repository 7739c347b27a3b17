/* Mappings of files that may shrink while they are read, for a host that reads them through a
 * buffer it hands around (Python's mmap: Cython, NumPy and Python code all read it, so no one call
 * can be guarded as csrc/jni/kb_map_guard.h guards the JVM's reads).
 *
 * A broker truncates a segment on a leader change or a recovery and deletes it for retention; a
 * read of a mapped page past the file's new end then raises SIGBUS, which ends the process.  For a
 * registered mapping the handler maps zero pages over the rest of it instead and marks the
 * registration: the read goes on and sees zeros, which end a log's entries as a preallocated tail
 * does, and the reader asks kb_shrink_guard_hit whether that end is the file's or a cut's.
 *
 * A fault anywhere else goes to the handler installed before (or ends the process, as it would
 * have).  Plain C: no Python.h. */
#ifndef KB_SHRINK_GUARD_H
#define KB_SHRINK_GUARD_H

#include <stddef.h>

/* Registers map[0, len) (installing the SIGBUS handler on first use): a handle >= 0, or -1 when
 * it cannot be guarded (no free registration, or the handler could not be installed). */
int kb_shrink_guard_add(const void *map, size_t len);

/* 1 when a read of the registration faulted past the file's end (its pages are zeros now), else 0. */
int kb_shrink_guard_hit(int handle);

/* Ends the registration (before the mapping is unmapped); returns kb_shrink_guard_hit's answer. */
int kb_shrink_guard_remove(int handle);

#endif
