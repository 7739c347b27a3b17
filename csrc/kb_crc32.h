/* CRC-32 (IEEE 802.3, java.util.zip.CRC32, zlib's crc32): the checksum of
 * magic 0 and 1 messages. */
#ifndef KB_CRC32_H
#define KB_CRC32_H

#include <stddef.h>
#include <stdint.h>

/* Continues `crc` (0 for a fresh checksum) over `n` bytes, like zlib.crc32. */
uint32_t kb_crc32(uint32_t crc, const uint8_t *data, size_t n);

#endif
