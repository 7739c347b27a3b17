#include "kb_resync.h"

#include <string.h>

#include "kb_legacy.h"
#include "kb_v2.h"
#include "kb_wire.h"

int kb_entry_sound(const uint8_t *buf, size_t len, size_t pos, int v2_only)
{
    if (pos > len || len - pos < KB_HEADER_SIZE_UP_TO_MAGIC)
        return 0;
    int32_t size = (int32_t)kb_load_be32(buf + pos + KB_AT_SIZE);
    int magic = (int8_t)buf[pos + KB_AT_MAGIC];
    if (size < KB_MIN_ENTRY_SIZE || (uint64_t)size + KB_LOG_OVERHEAD > len - pos)
        return 0;
    size_t entry = (size_t)size + KB_LOG_OVERHEAD;
    if (magic == 2) {
        kb_v2_header h;
        kb_fault f;
        return kb_v2_check_entry(buf, pos, entry, 1, &h, &f) == 0;
    }
    if (v2_only || (magic != 0 && magic != 1))
        return 0;
    kb_legacy_msg m;
    kb_fault f;
    return kb_legacy_read(buf, pos, entry, &m, &f) == 0 && kb_legacy_check_crc(buf, &m, &f) == 0;
}

int64_t kb_next_sound_batch(const uint8_t *buf, size_t len, size_t start)
{
    /* candidates: positions whose magic byte (KB_AT_MAGIC bytes in) is 2 */
    for (size_t at = start + KB_AT_MAGIC; at < len;) {
        const uint8_t *hit = memchr(buf + at, 2, len - at);
        if (!hit)
            break;
        size_t pos = (size_t)(hit - buf) - KB_AT_MAGIC;
        if (kb_entry_sound(buf, len, pos, 1))
            return (int64_t)pos;
        at = (size_t)(hit - buf) + 1;
    }
    return -1;
}
