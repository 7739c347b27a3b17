/* Reads of a mapped file that can shrink while it is read.  A broker truncates a segment on a
 * leader change and a recovery, and deletes it for retention; a page of a mapping past the file's
 * new end then faults (SIGBUS), which in native code would take the whole JVM -- a Spark executor
 * -- down.  A guarded read turns such a fault, inside the mapping it names, into a jump back to
 * where the guard was set: the reader asks the file's size again and reads to its new end.
 *
 *     kb_map_guard g;
 *     if (KB_MAP_GUARD(&g, map, len) != 0) { ... the file shrank: recover ... }
 *     ... reads of map[0, len) ...
 *     kb_map_guard_end(&g);
 *
 * A fault elsewhere (or on another thread) goes to the handler that was installed before
 * (the JVM's own, which makes its mapped buffers' faults Java errors).  Code that calls back into
 * Java suspends the guard (kb_map_guard_suspend / _resume): a fault in Java code is the JVM's. */
#ifndef KB_MAP_GUARD_H
#define KB_MAP_GUARD_H

/* sigjmp_buf needs POSIX: the including file defines _GNU_SOURCE before any header */

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kb_map_guard {
    sigjmp_buf jump;
    const uint8_t *lo, *hi;      /* the mapping guarded */
    struct kb_map_guard *outer;  /* the guard this one is inside of (this thread's), or NULL */
} kb_map_guard;

/* Installs the SIGBUS handler once per process: 0, or -1 (it could not be installed: reads are
 * then unguarded, as before). */
int kb_map_guard_install(void);

void kb_map_guard_begin(kb_map_guard *g, const void *map, size_t len);
void kb_map_guard_end(kb_map_guard *g);

/* 0 when the guard is set, nonzero when a read of the mapping faulted (the guard is then ended). */
#define KB_MAP_GUARD(g, map, len) (kb_map_guard_begin((g), (map), (len)), sigsetjmp((g)->jump, 1))

/* The calling thread's guards set aside while Java runs, and put back. */
kb_map_guard *kb_map_guard_suspend(void);
void kb_map_guard_resume(kb_map_guard *saved);

#endif
