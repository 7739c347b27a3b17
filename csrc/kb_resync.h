/* Finding entries again: where the framing of a log was lost (a repair skipping damage) or an
 * index's position is not trusted (a stale index pointing into the middle of a batch).  A position
 * counts as an entry's start only with the entry's checksum right, which chance passes about once
 * in 2**32. */
#ifndef KB_RESYNC_H
#define KB_RESYNC_H

#include <stddef.h>
#include <stdint.h>

/* Whether a complete entry starts at buf[pos]: a size of at least 14 that fits in buf[0, len), a
 * known magic and a right checksum (CRC-32C of a v2 batch of at least 61 bytes, CRC-32 of a v0/v1
 * message).  `v2_only`: magic 2 only. */
int kb_entry_sound(const uint8_t *buf, size_t len, size_t pos, int v2_only);

/* The first position at or after `start` where a sound v2 batch starts, or -1. */
int64_t kb_next_sound_batch(const uint8_t *buf, size_t len, size_t start);

#endif
