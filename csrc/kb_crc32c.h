/* CRC-32C (Castagnoli), the checksum of v2 record batches.
 *
 * The implementation is chosen once, at the first call of kb_crc32c_init():
 * on x86-64 folding with 512-bit carry-less multiplies (AVX-512 VPCLMULQDQ) for
 * long buffers, else SSE4.2 with three interleaved streams combined by PCLMUL; the
 * ARMv8 CRC instructions on aarch64, or a portable slicing-by-8 table.
 * Setting the environment variable PYKBATCH_CRC32C_SW to a non-empty value
 * other than "0" forces the table so tests can cover every path.
 */
#ifndef KB_CRC32C_H
#define KB_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Picks the implementation; safe to call more than once (not concurrently
 * with the first call). kb_crc32c() calls it itself when needed. */
void kb_crc32c_init(void);

/* Continues `crc` (0 for a fresh checksum) over `n` bytes, like
 * crc32c.crc32c(data, value) and java.util.zip.CRC32C. */
uint32_t kb_crc32c(uint32_t crc, const uint8_t *data, size_t n);

/* The portable implementation, always available (tests compare against it). */
uint32_t kb_crc32c_sw(uint32_t crc, const uint8_t *data, size_t n);

/* "avx512+vpclmulqdq", "sse4.2+pclmul", "armv8-crc" or "software". */
const char *kb_crc32c_impl(void);

/* Internal: multiply a raw CRC state by x^(8*nbytes) mod P (used to combine
 * streams and by the software path's tests). */
uint32_t kb_crc32c_shift(uint32_t state, uint64_t nbytes);
uint32_t kb_crc32c_xpow8n(uint64_t nbytes, int sub_bits);

/* Shared by the CRC-32 and CRC-32C software paths: slicing-by-8 tables of a
 * reflected polynomial, and the kernel over them (raw state in and out). */
void kb_crc_tables(uint32_t poly, uint32_t t[8][256]);
uint32_t kb_crc_slice8(const uint32_t t[8][256], uint32_t c, const uint8_t *p, size_t n);

/* Whether PYKBATCH_CRC32C_SW (non-empty, not "0") forces both CRCs to their software paths:
 * the one reading of that switch. */
int kb_crc_force_software(void);

/* Hardware kernels, compiled with per-function target attributes; each returns
 * 0 from its probe when the CPU lacks the instructions. */
int kb_crc32c_x86_available(void);
uint32_t kb_crc32c_x86(uint32_t state, const uint8_t *p, size_t n);
int kb_crc32c_avx512_available(void); /* also sets up kb_crc32c_x86, which it uses */
uint32_t kb_crc32c_avx512(uint32_t state, const uint8_t *p, size_t n);
int kb_crc32c_arm_available(void);
uint32_t kb_crc32c_arm(uint32_t state, const uint8_t *p, size_t n);

#endif
