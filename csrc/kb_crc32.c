#include "kb_crc32.h"

#include "kb_crc32c.h"

#define POLY 0xEDB88320u /* reflected IEEE polynomial */

static uint32_t table[8][256];
static int ready;

uint32_t kb_crc32(uint32_t crc, const uint8_t *data, size_t n)
{
    if (!ready) { /* idempotent: a race only builds the same table twice */
        kb_crc_tables(POLY, table);
        ready = 1;
    }
    return ~kb_crc_slice8((const uint32_t(*)[256])table, ~crc, data, n);
}
