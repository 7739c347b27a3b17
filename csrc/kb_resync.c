#include "kb_resync.h"

#include <string.h>

#include "kb_crc32c.h"
#include "kb_kafka.h"
#include "kb_legacy.h"
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

int kb_index_entry_trusted(const uint8_t *buf, size_t len, int64_t position, int64_t segment_base, int64_t offset)
{
    if (position == 0)
        return 1;
    if (position < 0 || (uint64_t)position > len || len - (size_t)position < 8)
        return 0;
    int64_t first = (int64_t)kb_load_be64(buf + position);
    return segment_base <= first && first <= offset && kb_entry_sound(buf, len, (size_t)position, 0);
}

/* Whether the bytes at `pos` look like an entry a client writes, before paying for a checksum
 * over its whole size: without this a scan of random bytes checksums about one position in 500 over
 * up to the rest of the buffer (quadratic: 30 s for 32 MiB).  A v2 batch: no attribute bits
 * beyond those Kafka defines, a known codec, and counts, ids and sequences not below their
 * "none" values.  A legacy message: a known codec, no unknown attribute bits, and key and value
 * lengths that end the message where its size says.  Random bytes pass about once in 2**20
 * positions; every entry Kafka's clients and brokers write passes. */
static int plausible_v2_header(const uint8_t *buf, size_t pos)
{
    uint16_t attributes = kb_load_be16(buf + pos + KB_V2_AT_ATTRIBUTES);
    return (attributes & ~0x7f) == 0 && (attributes & KB_ATTR_CODEC_MASK) < KB_CODEC_COUNT &&
           (int32_t)kb_load_be32(buf + pos + KB_V2_AT_LAST_OFFSET_DELTA) >= 0 &&
           (int32_t)kb_load_be32(buf + pos + KB_V2_AT_RECORD_COUNT) >= 0 &&
           (int64_t)kb_load_be64(buf + pos + KB_V2_AT_PRODUCER_ID) >= -1 &&
           (int16_t)kb_load_be16(buf + pos + KB_V2_AT_PRODUCER_EPOCH) >= -1 &&
           (int32_t)kb_load_be32(buf + pos + KB_V2_AT_BASE_SEQUENCE) >= -1;
}

static int plausible(const uint8_t *buf, size_t len, size_t pos)
{
    int32_t size = (int32_t)kb_load_be32(buf + pos + KB_AT_SIZE);
    if (size < KB_MIN_ENTRY_SIZE || (uint64_t)size + KB_LOG_OVERHEAD > len - pos)
        return 0;
    size_t end = pos + KB_LOG_OVERHEAD + (size_t)size;
    int magic = buf[pos + KB_AT_MAGIC];
    if (magic == 2) {
        if (end - pos < KB_V2_HEADER_SIZE)
            return 0;
        return plausible_v2_header(buf, pos);
    }
    uint8_t attributes = buf[pos + KB_LEGACY_AT_ATTRIBUTES];
    if ((attributes & ~(magic ? 0x0f : 0x07)) != 0 || (attributes & KB_ATTR_CODEC_MASK) >= KB_CODEC_ZSTD)
        return 0;
    size_t p = pos + KB_LEGACY_AT_TIMESTAMP + (magic ? 8 : 0);
    for (int field = 0; field < 2; field++) { /* the key, then the value */
        if (end - p < 4 || p > end)
            return 0;
        int32_t n = (int32_t)kb_load_be32(buf + p);
        p += 4;
        if (n > 0) {
            if ((size_t)n > end - p)
                return 0;
            p += (size_t)n;
        } else if (n < -1) {
            return 0;
        }
    }
    return p == end;
}

/* kb_next_sound_entry for entries starting before `before` (that may run past it) */
static int64_t next_sound_before(const uint8_t *buf, size_t len, size_t start, size_t before, int v2_only)
{
    if (len < KB_HEADER_SIZE_UP_TO_MAGIC)
        return -1;
    size_t stop = before < len - KB_AT_MAGIC ? before + KB_AT_MAGIC : len;
    /* candidates: positions whose magic byte (KB_AT_MAGIC bytes in) is 2, or 0 and 1 as well */
    for (size_t at = start + KB_AT_MAGIC; at < stop; at++) {
        if (v2_only) {
            const uint8_t *hit = memchr(buf + at, 2, stop - at);
            if (!hit)
                break;
            at = (size_t)(hit - buf);
        } else if (buf[at] > 2) {
            continue;
        }
        size_t pos = at - KB_AT_MAGIC;
        if (len - pos >= KB_HEADER_SIZE_UP_TO_MAGIC + 4 && plausible(buf, len, pos) &&
            kb_entry_sound(buf, len, pos, v2_only))
            return (int64_t)pos;
    }
    return -1;
}

int64_t kb_next_sound_entry(const uint8_t *buf, size_t len, size_t start, int v2_only)
{
    return next_sound_before(buf, len, start, len, v2_only);
}

int64_t kb_next_sound_batch(const uint8_t *buf, size_t len, size_t start)
{
    return kb_next_sound_entry(buf, len, start, 1);
}


static int all_zero(const uint8_t *buf, size_t from, size_t to)
{
    for (; from < to; from++)
        if (buf[from])
            return 0;
    return 1;
}

/* How far a torn tail is searched for the end of a whole batch (a cut is the last entry's: the
 * bytes left of it are fewer than the largest batch a broker takes). */
#define KB_TAIL_SEARCH (16u << 20)

/* An incomplete last entry whose first bytes are a whole v2 batch by its checksum (its size was
 * raised, to the end or past it): where that batch ends, the first place its checksum holds,
 * else 0. */
static size_t whole_batch_end(const uint8_t *buf, size_t len, size_t pos)
{
    if (len - pos < KB_V2_HEADER_SIZE || buf[pos + KB_AT_MAGIC] != 2 || !plausible_v2_header(buf, pos))
        return 0;
    uint32_t stored = kb_load_be32(buf + pos + KB_V2_AT_CRC);
    size_t end = pos + KB_V2_HEADER_SIZE, stop = len - pos > KB_TAIL_SEARCH ? pos + KB_TAIL_SEARCH : len;
    uint32_t crc = kb_crc32c(0, buf + pos + KB_V2_CRC_START, end - pos - KB_V2_CRC_START);
    for (;;) {
        /* a false match inside a torn batch is as likely as 1 in 2**32 per byte: where the match
         * ends, what follows must at least carry a magic byte an entry can have */
        if (crc == stored && (end + KB_AT_MAGIC >= len || buf[end + KB_AT_MAGIC] <= 2))
            return end;
        if (end >= stop)
            return 0;
        crc = kb_crc32c(crc, buf + end, 1);
        end++;
    }
}

/* A complete entry at `pos` whose size was raised into the entry after it: nothing plausible
 * starts where it ends (nor a zero tail), its checksum fails, and a sound entry starts inside the
 * bytes it claims: that entry's position, else -1.  Sound logs pay only the cheap look at where
 * each entry ends. */
static int64_t size_into_next(const uint8_t *buf, size_t len, size_t pos, size_t end)
{
    if (end >= len || (len - end >= KB_HEADER_SIZE_UP_TO_MAGIC + 4 && plausible(buf, len, end)))
        return -1;
    /* zeros after it: a preallocated tail -- unless too few to start an entry: they may be the
     * last bytes of the entry after it (a compressed payload's), as a sound entry inside the
     * claimed bytes that runs past their end shows */
    int zero_tail = all_zero(buf, end, len);
    if (zero_tail && len - end >= KB_HEADER_SIZE_UP_TO_MAGIC + 4)
        return -1;
    if (kb_entry_sound(buf, len, pos, 0))
        return -1;
    int64_t next = next_sound_before(buf, len, pos + 1, end, 0);
    if (next >= 0 && zero_tail &&
        (size_t)next + KB_LOG_OVERHEAD + (size_t)(int32_t)kb_load_be32(buf + next + KB_AT_SIZE) <= end)
        return -1; /* an entry inside a record's value, not the next one */
    return next;
}

/* A last size past the end over a batch whose checksum holds where it ends (`end`): lost, from
 * the size to that end; the walk goes on after it. */
static kb_entry_status tail_size_lies(const uint8_t *buf, size_t pos, size_t end, kb_entry *e, kb_fault *f)
{
    kb_fault_set(f, KB_RULE_TAIL_SIZE_LIES, pos + KB_AT_SIZE, (int32_t)kb_load_be32(buf + pos + KB_AT_SIZE),
                 (int64_t)(end - pos - KB_LOG_OVERHEAD), 0);
    e->pos = pos;
    e->size = end - pos;
    e->magic = 2;
    return KB_ENTRY_LOST;
}

kb_entry_status kb_next_entry_resync(const uint8_t *buf, size_t len, size_t pos, int flags, kb_entry *e,
                                     kb_fault *f)
{
    kb_entry_status st = kb_next_entry(buf, len, pos, e, f);
    if (st == KB_ENTRY_OK && (flags & KB_RESYNC_LYING_SIZES)) {
        int64_t next = size_into_next(buf, len, pos, pos + e->size);
        if (next >= 0) {
            kb_fault_set(f, KB_RULE_SIZE_INTO_NEXT, pos + KB_AT_SIZE, (int32_t)kb_load_be32(buf + pos + KB_AT_SIZE),
                         (int64_t)(pos + e->size), next);
            e->size = (size_t)next - pos;
            return KB_ENTRY_LOST;
        }
    }
    if (st == KB_ENTRY_OK || st == KB_ENTRY_END || (st == KB_ENTRY_CORRUPT && e->size))
        return st;
    if (st == KB_ENTRY_TRUNCATED && !(flags & KB_RESYNC_LYING_SIZES))
        return st;
    size_t whole = st == KB_ENTRY_TRUNCATED ? whole_batch_end(buf, len, pos) : 0;
    if (whole == len)
        return tail_size_lies(buf, pos, whole, e, f);
    if (st == KB_ENTRY_CORRUPT && (flags & KB_RESYNC_ZERO_TAIL) && all_zero(buf, pos, len))
        return KB_ENTRY_TRUNCATED;
    int64_t next = kb_next_sound_entry(buf, len, pos + 1, 0);
    if (st == KB_ENTRY_TRUNCATED) {
        if (next < 0 && whole) /* a whole batch, then bytes that are no sound entry */
            return tail_size_lies(buf, pos, whole, e, f);
        if (next < 0)
            return st; /* a truncated tail: nothing sound after it */
        /* a sound entry is at least 17 bytes: this one's size field is readable */
        kb_fault_set(f, KB_RULE_SIZE_PAST_END, pos + KB_AT_SIZE, (int32_t)kb_load_be32(buf + pos + KB_AT_SIZE),
                     (int64_t)(len - pos - KB_LOG_OVERHEAD), next);
    } else {
        f->args[2] = next < 0 ? (int64_t)len : next;
    }
    e->size = (next < 0 ? len : (size_t)next) - pos;
    return KB_ENTRY_LOST;
}
