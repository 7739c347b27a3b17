/* CRC-32 (IEEE 802.3, java.util.zip.CRC32, zlib's crc32): the checksum of
 * magic 0 and 1 messages. */
#ifndef KB_CRC32_H
#define KB_CRC32_H

#include <stddef.h>
#include <stdint.h>

/* Continues `crc` (0 for a fresh checksum) over `n` bytes, like zlib.crc32.  Uses PCLMULQDQ
 * folding on x86-64 when the CPU has it (PYKBATCH_CRC32C_SW=1 forces the table). */
uint32_t kb_crc32(uint32_t crc, const uint8_t *data, size_t n);

/* The portable slicing-by-8 path, and which path kb_crc32 uses ("pclmul" or "software"). */
uint32_t kb_crc32_sw(uint32_t crc, const uint8_t *data, size_t n);
const char *kb_crc32_impl(void);

/* The x86-64 kernel: raw state in and out, n >= 64 and a multiple of 16. */
int kb_crc32_x86_available(void);
uint32_t kb_crc32_x86(uint32_t state, const uint8_t *p, size_t n);

#endif
