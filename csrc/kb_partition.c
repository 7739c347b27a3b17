/* Kafka's murmur2 key hash and the default partitioner's choice for keyed records. */
#include "kb_partition.h"

#include <string.h>

int32_t kb_murmur2(const uint8_t *data, size_t n)
{
    const uint32_t m = 0x5bd1e995u;
    const int r = 24;
    /* Kafka hashes a Java int length: keys past 2 GiB cannot be produced anyway */
    uint32_t h = 0x9747b28cu ^ (uint32_t) n;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        uint32_t k = (uint32_t) data[i] | (uint32_t) data[i + 1] << 8 | (uint32_t) data[i + 2] << 16 |
                     (uint32_t) data[i + 3] << 24;
        k *= m;
        k ^= k >> r;
        k *= m;
        h *= m;
        h ^= k;
    }
    switch (n & 3) {  /* the tail, as Kafka's switch falls through */
    case 3:
        h ^= (uint32_t) data[i + 2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t) data[i + 1] << 8;
        /* fall through */
    case 1:
        h ^= (uint32_t) data[i];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return (int32_t) h;
}

void kb_partition_keys(const uint8_t *data, const void *offsets, int wide, const uint8_t *validity,
                       int64_t bit0, int64_t n, int32_t partitions, int32_t *out)
{
    const int32_t *o32 = offsets;
    const int64_t *o64 = offsets;
    for (int64_t i = 0; i < n; i++) {
        int64_t bit = bit0 + i;
        if (validity && !(validity[bit >> 3] >> (bit & 7) & 1)) {
            out[i] = -1;
            continue;
        }
        int64_t start = wide ? o64[i] : o32[i];
        int64_t end = wide ? o64[i + 1] : o32[i + 1];
        out[i] = kb_key_partition(data + start, (size_t) (end - start), partitions);
    }
}
