/* CRC-32C dispatch, the portable slicing-by-8 path and GF(2) helpers. */
#include "kb_crc32c.h"

#include <stdlib.h>
#include <string.h>

#define POLY 0x82F63B78u /* reflected Castagnoli polynomial */

static uint32_t table[8][256];

void kb_crc_tables(uint32_t poly, uint32_t t[8][256])
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (poly & (0u - (c & 1)));
        t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int k = 1; k < 8; k++)
            t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xff];
}

uint32_t kb_crc_slice8(const uint32_t t[8][256], uint32_t c, const uint8_t *p, size_t n)
{
    while (n && ((uintptr_t)p & 7)) {
        c = (c >> 8) ^ t[0][(c ^ *p++) & 0xff];
        n--;
    }
    while (n >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        lo = __builtin_bswap32(lo);
        hi = __builtin_bswap32(hi);
#endif
        lo ^= c;
        c = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^
            t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^ t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = (c >> 8) ^ t[0][(c ^ *p++) & 0xff];
    return c;
}
static uint32_t (*kernel)(uint32_t, const uint8_t *, size_t);
static const char *kernel_name = "uninitialised";

/* Raw state in, raw state out (no pre/post inversion). */
static uint32_t sw_kernel(uint32_t c, const uint8_t *p, size_t n)
{
    return kb_crc_slice8((const uint32_t(*)[256])table, c, p, n);
}

int kb_crc_force_software(void)
{
    const char *v = getenv("PYKBATCH_CRC32C_SW");
    return v && *v && strcmp(v, "0") != 0;
}

void kb_crc32c_init(void)
{
    if (kernel)
        return;
    kb_crc_tables(POLY, table);
    uint32_t (*chosen)(uint32_t, const uint8_t *, size_t) = sw_kernel;
    const char *name = "software";
    if (!kb_crc_force_software()) {
        if (kb_crc32c_avx512_available()) {
            chosen = kb_crc32c_avx512;
            name = "avx512+vpclmulqdq";
        } else if (kb_crc32c_x86_available()) {
            chosen = kb_crc32c_x86;
            name = "sse4.2+pclmul";
        } else if (kb_crc32c_arm_available()) {
            chosen = kb_crc32c_arm;
            name = "armv8-crc";
        }
    }
    kernel_name = name;
    kernel = chosen;
}

uint32_t kb_crc32c(uint32_t crc, const uint8_t *data, size_t n)
{
    if (!kernel)
        kb_crc32c_init();
    return ~kernel(~crc, data, n);
}

uint32_t kb_crc32c_sw(uint32_t crc, const uint8_t *data, size_t n)
{
    if (!kernel)
        kb_crc32c_init();
    return ~sw_kernel(~crc, data, n);
}

const char *kb_crc32c_impl(void)
{
    if (!kernel)
        kb_crc32c_init();
    return kernel_name;
}

/* a * b mod P, both in reflected representation (bit 31 is x^0). */
static uint32_t multmodp(uint32_t a, uint32_t b)
{
    uint32_t m = 1u << 31, p = 0;
    for (;;) {
        if (a & m) {
            p ^= b;
            if ((a & (m - 1)) == 0)
                break;
        }
        m >>= 1;
        b = b & 1 ? (b >> 1) ^ POLY : b >> 1;
    }
    return p;
}

/* x^(8*nbytes - sub_bits) mod P, reflected; sub_bits < 8*nbytes. */
uint32_t kb_crc32c_xpow8n(uint64_t nbytes, int sub_bits)
{
    uint64_t e = nbytes * 8 - (uint64_t)sub_bits;
    uint32_t result = 1u << 31;       /* x^0 */
    uint32_t sq = 1u << 30;           /* x^1, squared on every step */
    while (e) {
        if (e & 1)
            result = multmodp(sq, result);
        sq = multmodp(sq, sq);
        e >>= 1;
    }
    return result;
}

uint32_t kb_crc32c_shift(uint32_t state, uint64_t nbytes)
{
    return multmodp(kb_crc32c_xpow8n(nbytes, 0), state);
}
