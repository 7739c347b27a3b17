#include "kb_resync.h"

#include <string.h>

#include "kb_crc32.h"
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
 * lengths that end the message where its size says.  Either: an offset not below 0.  Random bytes pass about once in 2**20
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

/* Where a v0/v1 message at `pos` ends as its key and value lengths say (whatever its size field
 * says), past the buffer's end too (`past` set), else 0: lengths not there to read, or that
 * cannot be. */
static uint64_t lengths_claim_as(const uint8_t *buf, size_t len, size_t pos, int past, int magic)
{
    uint64_t p = pos + KB_LEGACY_AT_TIMESTAMP + (magic == 1 ? 8 : 0);
    for (int field = 0; field < 2; field++) { /* the key, then the value */
        if (p > len || len - p < 4)
            return 0;
        int32_t n = (int32_t)kb_load_be32(buf + p);
        p += 4;
        if (n < -1 || (n > 0 && (uint64_t)n > len - p && (field == 0 || !past)))
            return 0;
        if (n > 0)
            p += (uint64_t)n;
    }
    return p;
}

static int plausible(const uint8_t *buf, size_t len, size_t pos)
{
    int32_t size = (int32_t)kb_load_be32(buf + pos + KB_AT_SIZE);
    if (size < KB_MIN_ENTRY_SIZE || (uint64_t)size + KB_LOG_OVERHEAD > len - pos)
        return 0;
    /* no writer gives an entry a negative offset (a compressor's tokens among the raw bytes of a
     * wrapper's inner message make one: its CRC does not cover its offset) */
    if ((int64_t)kb_load_be64(buf + pos) < 0)
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
    return lengths_claim_as(buf, len, pos, 0, magic ? 1 : 0) == end;
}

static int all_zero(const uint8_t *buf, size_t from, size_t to);

/* How far past a sound v0/v1 message that nothing follows the search goes on for one that
 * something does (the bytes of a compressed wrapper hold no more than a batch Kafka takes). */
#define KB_CHAIN_SEARCH (16u << 20)

/* Whether what follows the sound entry at `pos` could be the log going on: the data's end, a zero
 * tail, or a plausible entry (its checksum may fail: damage comes in runs).  A v0/v1 message a
 * compressor stored raw inside a wrapper is sound (its CRC holds) but is followed by the
 * compressor's bytes. */
static int followed(const uint8_t *buf, size_t len, size_t pos)
{
    size_t end = pos + KB_LOG_OVERHEAD + (size_t)(int32_t)kb_load_be32(buf + pos + KB_AT_SIZE);
    return end == len || (len - end >= KB_HEADER_SIZE_UP_TO_MAGIC + 4 && plausible(buf, len, end)) ||
           all_zero(buf, end, len);
}

/* The offset an entry's header gives: a v2 batch's first, a v0/v1 message's own (a wrapper's
 * last). */
static int64_t header_offset(const uint8_t *buf, size_t pos)
{
    return (int64_t)kb_load_be64(buf + pos);
}

/* kb_next_sound_entry for entries starting before `before` (that may run past it).  A v0/v1
 * message nothing plausible follows (damage after it, or the compressor's bytes after a raw inner
 * message) is taken unless a sound entry that is followed comes within KB_CHAIN_SEARCH bytes
 * after it with an offset not above its own: offsets only grow in a log, and an inner message's
 * offset (relative, or mixed with the compressor's tokens) is not the log's. */
static int64_t next_sound_before(const uint8_t *buf, size_t len, size_t start, size_t before, int v2_only)
{
    if (len < KB_HEADER_SIZE_UP_TO_MAGIC)
        return -1;
    size_t stop = before < len - KB_AT_MAGIC ? before + KB_AT_MAGIC : len;
    int64_t unfollowed = -1;
    /* candidates: positions whose magic byte (KB_AT_MAGIC bytes in) is 2, or 0 and 1 as well */
    for (size_t at = start + KB_AT_MAGIC; at < stop; at++) {
        if (unfollowed >= 0 && at - (size_t)unfollowed > KB_CHAIN_SEARCH)
            break;
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
            kb_entry_sound(buf, len, pos, v2_only)) {
            if (buf[at] == 2 || followed(buf, len, pos)) {
                if (unfollowed >= 0 && header_offset(buf, (size_t)unfollowed) < header_offset(buf, pos))
                    return unfollowed;
                return (int64_t)pos;
            }
            if (unfollowed < 0)
                unfollowed = (int64_t)pos;
        }
    }
    return unfollowed;
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

static size_t legacy_lengths_end(const uint8_t *buf, size_t len, size_t pos)
{
    return (size_t)lengths_claim_as(buf, len, pos, 0, buf[pos + KB_AT_MAGIC]);
}

/* A v0/v1 message at `pos` that runs past the data's end as both its size and its lengths say:
 * cut, not lying (its bytes, a compressed wrapper's raw inner messages among them, are its own). */
static int legacy_cut(const uint8_t *buf, size_t len, size_t pos)
{
    if (len - pos < KB_LEGACY_AT_TIMESTAMP || buf[pos + KB_AT_MAGIC] > 1)
        return 0;
    uint64_t claim = lengths_claim_as(buf, len, pos, 1, buf[pos + KB_AT_MAGIC]);
    return claim > len && claim == pos + KB_LOG_OVERHEAD + (uint64_t)kb_load_be32(buf + pos + KB_AT_SIZE);
}

/* A v0/v1 message whose size field lies: where it ends by its key and value lengths, if its
 * CRC-32 holds over exactly those bytes (a whole message, and a compressed wrapper's inner
 * messages -- stored raw by the compressor, each with a CRC that holds -- are inside it, not
 * after it), else 0. */
static size_t whole_legacy_end(const uint8_t *buf, size_t len, size_t pos)
{
    if (len - pos < KB_LEGACY_AT_TIMESTAMP || (buf[pos + KB_AT_MAGIC] != 0 && buf[pos + KB_AT_MAGIC] != 1))
        return 0;
    size_t end = legacy_lengths_end(buf, len, pos);
    if (end == 0 || kb_crc32(0, buf + pos + KB_AT_MAGIC, end - pos - KB_AT_MAGIC) != kb_load_be32(buf + pos + KB_LEGACY_AT_CRC))
        return 0;
    return end;
}

/* An incomplete last entry whose first bytes are a whole entry by its checksum (its size was
 * raised, to the end or past it): where that entry ends (a v2 batch: the first place its checksum
 * holds; a v0/v1 message: where its lengths say), else 0. */
static size_t whole_batch_end(const uint8_t *buf, size_t len, size_t pos)
{
    if (len - pos > KB_AT_MAGIC && buf[pos + KB_AT_MAGIC] != 2)
        return whole_legacy_end(buf, len, pos);
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
    size_t from = pos + 1;
    if (buf[pos + KB_AT_MAGIC] < 2) {
        /* a v0/v1 message whose lengths end it where its size does: its size is not what lies (its
         * CRC fails for another byte); one whole by its CRC where its lengths end it: the entry
         * after it starts there, and a compressed wrapper's raw inner messages before that are
         * its own */
        if (legacy_lengths_end(buf, len, pos) == end)
            return -1;
        size_t whole = whole_legacy_end(buf, len, pos);
        if (whole > pos && whole < end)
            from = whole;
    }
    int64_t next = next_sound_before(buf, len, from, end, 0);
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
    e->magic = buf[pos + KB_AT_MAGIC];
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
    if (st == KB_ENTRY_TRUNCATED && (!(flags & KB_RESYNC_LYING_SIZES) || legacy_cut(buf, len, pos)))
        return st;
    size_t whole = st == KB_ENTRY_TRUNCATED ? whole_batch_end(buf, len, pos) : 0;
    if (whole == len)
        return tail_size_lies(buf, pos, whole, e, f);
    if (st == KB_ENTRY_CORRUPT && (flags & KB_RESYNC_ZERO_TAIL) && all_zero(buf, pos, len))
        return KB_ENTRY_TRUNCATED;
    /* past a whole entry whose size lies, the search starts where it ends: what is sound inside it
     * (a v0/v1 wrapper's raw inner messages) is its own; so for a v0/v1 message whose header was
     * lost (zeroed) where its key and value lengths end it before the data goes on */
    size_t from = whole ? whole : pos + 1;
    /* (a zeroed magic byte: a v0 message, or a v1 one whose timestamp was zeroed with it) */
    int first_magic = len - pos > KB_LEGACY_AT_TIMESTAMP ? buf[pos + KB_AT_MAGIC] : 2;  /* read only if there */
    for (int magic = first_magic; !whole && from == pos + 1 && magic <= 1; magic++) {
        size_t end = (size_t)lengths_claim_as(buf, len, pos, 0, magic);
        if (end > pos + 1 && (end == len || (len - end >= KB_HEADER_SIZE_UP_TO_MAGIC + 4 && plausible(buf, len, end))))
            from = end;
    }
    int64_t next = kb_next_sound_entry(buf, len, from, 0);
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
