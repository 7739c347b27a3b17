/* Kafka's default partitioner (BuiltInPartitioner / Utils.murmur2): where a keyed record goes. */
#ifndef KB_PARTITION_H
#define KB_PARTITION_H

#include <stddef.h>
#include <stdint.h>

/* Kafka's 32-bit murmur2 of `n` bytes (seed 0x9747b28c), as Utils.murmur2 returns it. */
int32_t kb_murmur2(const uint8_t *data, size_t n);

/* The partition of a keyed record: toPositive(murmur2(key)) % partitions. */
static inline int32_t kb_key_partition(const uint8_t *key, size_t n, int32_t partitions)
{
    return (int32_t) ((uint32_t) kb_murmur2(key, n) & 0x7fffffffu) % partitions;
}

/* Partitions of `n` keys of an Arrow binary column (`offsets` 32-bit, or 64-bit when `wide`,
 * already advanced to the column's first row; `validity` NULL or the column's bitmap with its
 * bit offset `bit0`): out[i] = the key's partition, -1 for a null key (the caller's sticky
 * partition). */
void kb_partition_keys(const uint8_t *data, const void *offsets, int wide, const uint8_t *validity,
                       int64_t bit0, int64_t n, int32_t partitions, int32_t *out);

#endif
