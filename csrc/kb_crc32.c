#include "kb_crc32.h"

#include "kb_crc32c.h"

#define POLY 0xEDB88320u /* reflected IEEE polynomial */

static uint32_t table[8][256];
static int hardware = -1; /* -1: not chosen yet */

static void init(void)
{
    kb_crc_tables(POLY, table);
    hardware = kb_crc32_x86_available() && !kb_crc_force_software(); /* one switch for both CRCs */
}

uint32_t kb_crc32_sw(uint32_t crc, const uint8_t *data, size_t n)
{
    if (hardware < 0)
        init();
    return ~kb_crc_slice8((const uint32_t(*)[256])table, ~crc, data, n);
}

uint32_t kb_crc32(uint32_t crc, const uint8_t *data, size_t n)
{
    if (hardware < 0) /* idempotent: a race only builds the same table twice */
        init();
    uint32_t state = ~crc;
    if (hardware && n >= 64) {
        size_t bulk = n & ~(size_t)15;
        state = kb_crc32_x86(state, data, bulk);
        data += bulk;
        n -= bulk;
    }
    return ~kb_crc_slice8((const uint32_t(*)[256])table, state, data, n);
}

const char *kb_crc32_impl(void)
{
    if (hardware < 0)
        init();
    return hardware ? "pclmul" : "software";
}
