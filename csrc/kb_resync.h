/* Finding entries again: where the framing of a log was lost (a size below the minimum, an
 * interior size that runs past the end while sound entries follow) or an index's position is not
 * trusted (a stale index pointing into the middle of a batch).  A position counts as an entry's
 * start only with the entry's checksum right, which chance passes about once in 2**32. */
#ifndef KB_RESYNC_H
#define KB_RESYNC_H

#include <stddef.h>
#include <stdint.h>

#include "kb_v2.h"

/* Whether a complete entry starts at buf[pos]: a size of at least 14 that fits in buf[0, len), a
 * known magic and a right checksum (CRC-32C of a v2 batch of at least 61 bytes, CRC-32 of a v0/v1
 * message).  `v2_only`: magic 2 only. */
int kb_entry_sound(const uint8_t *buf, size_t len, size_t pos, int v2_only);

/* Whether an offset index entry (offset, position) of a segment whose base offset is
 * `segment_base` can be followed: position 0, or a sound entry (kb_entry_sound) at the position
 * whose first offset lies between the segment's base and the entry's offset (the last offset of the
 * batch it indexes) -- indexes can be stale or damaged, so a reader starting from one trusts only
 * what the log confirms. */
int kb_index_entry_trusted(const uint8_t *buf, size_t len, int64_t position, int64_t segment_base, int64_t offset);

/* The first position at or after `start` where a sound entry starts (`v2_only`: a v2 batch), or
 * -1.  Only positions that look like an entry a client writes are checksummed (see kb_resync.c),
 * so a scan of random bytes stays linear. */
int64_t kb_next_sound_entry(const uint8_t *buf, size_t len, size_t start, int v2_only);

/* The first position at or after `start` where a sound v2 batch starts, or -1. */
int64_t kb_next_sound_batch(const uint8_t *buf, size_t len, size_t start);

/* What kb_next_entry_resync makes of bytes that do not hold a whole entry (flags). */
#define KB_RESYNC_LYING_SIZES 1 /* an incomplete entry a sound one follows is lost (its size lies);
                                   without it, an incomplete entry ends the data, as Kafka reads it */
#define KB_RESYNC_ZERO_TAIL 2   /* zero bytes from here to the end are a tail (a preallocated log's,
                                   which recovery trims), not lost framing */

/* The pykbatch checks a buffer gets: lying sizes are a strictness, a zero tail is a log's. */
static inline int kb_resync_flags(int strict, int log)
{
    return (strict ? KB_RESYNC_LYING_SIZES : 0) | (log ? KB_RESYNC_ZERO_TAIL : 0);
}

/* kb_next_entry for a log whose framing may lie, the one walk every reader of logs shares: where
 * kb_next_entry loses the framing (a size below the minimum, an invalid magic in an entry that
 * does not fit) and, with KB_RESYNC_LYING_SIZES, where an incomplete entry is followed by a sound
 * one (its size lies: a truncated tail has nothing sound after it), returns KB_ENTRY_LOST with
 * the fault in *f (its third argument the position the walk resumes at) and e->size the bytes up
 * to that position, or up to `len` when nothing sound follows.  With KB_RESYNC_ZERO_TAIL, zero
 * bytes to the end are KB_ENTRY_TRUNCATED.  Every other answer is kb_next_entry's. */
kb_entry_status kb_next_entry_resync(const uint8_t *buf, size_t len, size_t pos, int flags, kb_entry *e,
                                     kb_fault *f);

#endif
