#include "kb_v2.h"

#include "kb_crc32c.h"
#include "kb_wire.h"

#define HOT static inline __attribute__((always_inline))
#define COLD static __attribute__((noinline, cold))

__attribute__((cold)) void kb_fault_set(kb_fault *f, kb_rule rule, size_t pos, int64_t a0, int64_t a1, int64_t a2)
{
    f->rule = rule;
    f->pos = pos;
    f->args[0] = a0;
    f->args[1] = a1;
    f->args[2] = a2;
}

kb_entry_status kb_next_entry(const uint8_t *buf, size_t len, size_t pos, kb_entry *e, kb_fault *f)
{
    size_t left = len - pos;
    e->pos = pos;
    e->size = 0;
    e->magic = -1;
    if (pos >= len)
        return KB_ENTRY_END;
    if (left < KB_LOG_OVERHEAD)
        return KB_ENTRY_TRUNCATED;
    int32_t size = (int32_t)kb_load_be32(buf + pos + KB_AT_SIZE);
    if (size < KB_MIN_ENTRY_SIZE) {
        kb_fault_set(f, KB_RULE_SIZE_TOO_SMALL, pos + KB_AT_SIZE, size, KB_MIN_ENTRY_SIZE, 0);
        return KB_ENTRY_CORRUPT;
    }
    if (left < KB_HEADER_SIZE_UP_TO_MAGIC)
        return KB_ENTRY_TRUNCATED;
    int magic = (int8_t)buf[pos + KB_AT_MAGIC];
    int complete = (uint64_t)size + KB_LOG_OVERHEAD <= left;
    e->magic = magic;
    if (magic < 0 || magic > 2) {
        kb_fault_set(f, KB_RULE_INVALID_MAGIC, pos + KB_AT_MAGIC, magic, 0, 0);
        if (complete)
            e->size = (size_t)size + KB_LOG_OVERHEAD;
        return KB_ENTRY_CORRUPT;
    }
    if (!complete)
        return KB_ENTRY_TRUNCATED;
    e->size = (size_t)size + KB_LOG_OVERHEAD;
    return KB_ENTRY_OK;
}

void kb_v2_read_header(const uint8_t *p, kb_v2_header *h)
{
    h->base_offset = (int64_t)kb_load_be64(p + KB_AT_BASE_OFFSET);
    h->length = (int32_t)kb_load_be32(p + KB_AT_SIZE);
    h->partition_leader_epoch = (int32_t)kb_load_be32(p + KB_V2_AT_PARTITION_LEADER_EPOCH);
    h->magic = (int8_t)p[KB_AT_MAGIC];
    h->crc = kb_load_be32(p + KB_V2_AT_CRC);
    h->attributes = (int16_t)kb_load_be16(p + KB_V2_AT_ATTRIBUTES);
    h->last_offset_delta = (int32_t)kb_load_be32(p + KB_V2_AT_LAST_OFFSET_DELTA);
    h->base_timestamp = (int64_t)kb_load_be64(p + KB_V2_AT_BASE_TIMESTAMP);
    h->max_timestamp = (int64_t)kb_load_be64(p + KB_V2_AT_MAX_TIMESTAMP);
    h->producer_id = (int64_t)kb_load_be64(p + KB_V2_AT_PRODUCER_ID);
    h->producer_epoch = (int16_t)kb_load_be16(p + KB_V2_AT_PRODUCER_EPOCH);
    h->base_sequence = (int32_t)kb_load_be32(p + KB_V2_AT_BASE_SEQUENCE);
    h->record_count = (int32_t)kb_load_be32(p + KB_V2_AT_RECORD_COUNT);
}

uint32_t kb_v2_compute_crc(const uint8_t *entry, size_t size)
{
    return kb_crc32c(0, entry + KB_V2_CRC_START, size - KB_V2_CRC_START);
}

int kb_v2_check_size(size_t pos, size_t size, kb_fault *f)
{
    if (size >= KB_V2_HEADER_SIZE)
        return 0;
    kb_fault_set(f, KB_RULE_BATCH_TOO_SMALL, pos + KB_AT_SIZE, (int64_t)size, KB_V2_HEADER_SIZE, 0);
    return -1;
}

int kb_v2_check_crc(const uint8_t *buf, size_t pos, size_t size, const kb_v2_header *h, kb_fault *f)
{
    uint32_t computed = kb_v2_compute_crc(buf + pos, size);
    if (computed == h->crc)
        return 0;
    kb_fault_set(f, KB_RULE_CRC_MISMATCH, pos + KB_V2_AT_CRC, h->crc, computed, 0);
    return -1;
}

int kb_v2_check_codec(const kb_v2_header *h, size_t pos, kb_fault *f)
{
    int codec = h->attributes & KB_ATTR_CODEC_MASK;
    if (codec < KB_CODEC_COUNT)
        return 0;
    kb_fault_set(f, KB_RULE_UNKNOWN_CODEC, pos + KB_V2_AT_ATTRIBUTES, codec, 0, 0);
    return -1;
}

int kb_v2_check_count(const kb_v2_header *h, size_t pos, kb_fault *f)
{
    if (h->record_count >= 0)
        return 0;
    kb_fault_set(f, KB_RULE_NEGATIVE_RECORD_COUNT, pos + KB_V2_AT_RECORD_COUNT, h->record_count, 0, 0);
    return -1;
}

int kb_v2_check_entry(const uint8_t *buf, size_t pos, size_t size, int verify_crc, kb_v2_header *h,
                      kb_fault *f)
{
    if (kb_v2_check_size(pos, size, f) != 0)
        return -1;
    kb_v2_read_header(buf + pos, h);
    return verify_crc ? kb_v2_check_crc(buf, pos, size, h, f) : 0;
}

int kb_v2_check_walkable(const kb_v2_header *h, size_t pos, kb_fault *f)
{
    return kb_v2_check_codec(h, pos, f) != 0 || kb_v2_check_count(h, pos, f) != 0 ? -1 : 0;
}

COLD void varint_fault(kb_fault *f, int n, size_t pos, kb_field field)
{
    kb_fault_set(f, n == KB_VARINT_TOO_LONG ? KB_RULE_VARINT_TOO_LONG : KB_RULE_RECORD_STRUCTURE, pos, field, 0, 0);
}

/* Reads a varint field; on failure fills *f for `field` and returns 0. */
HOT int varint_field(const uint8_t *buf, size_t *pos, size_t limit, int32_t *out, kb_field field, kb_fault *f)
{
    int n = kb_read_varint(buf + *pos, buf + limit, out);
    if (__builtin_expect(n > 0, 1)) {
        *pos += (size_t)n;
        return 1;
    }
    varint_fault(f, n, *pos, field);
    return 0;
}

/* Skips `n` bytes of a length-prefixed field (n < 0: null, nothing to skip). */
HOT int bytes_field(size_t *pos, size_t limit, int32_t n, kb_field field, kb_fault *f)
{
    if (n < 0)
        return 1;
    if (__builtin_expect((size_t)n > limit - *pos, 0)) {
        kb_fault_set(f, KB_RULE_RECORD_STRUCTURE, *pos, field, n, (int64_t)(limit - *pos));
        return 0;
    }
    *pos += (size_t)n;
    return 1;
}

/* Skips a length-prefixed field as InputStream.skip does: running out is Kafka's own error. */
static int skip_field(size_t *pos, size_t limit, int32_t n, kb_fault *f)
{
    if (n <= 0)
        return 1;
    if ((size_t)n > limit - *pos) {
        kb_fault_set(f, KB_RULE_SKIP_EOF, limit, (int64_t)n - (int64_t)(limit - *pos), 0, 0);
        return 0;
    }
    *pos += (size_t)n;
    return 1;
}

/* A record's fields after its attributes, up to the end of its headers.  `partial`: Kafka's partial
 * reader, which skips key, value and header bytes as a stream does (running out is its own error)
 * and does not bound the header count by the bytes left.  Always inlined with a constant `partial`,
 * so each reader gets its own straight-line code (callgrind: the same instruction count as two
 * hand-written copies). */
HOT int read_fields(const uint8_t *buf, size_t *pos, size_t limit, kb_record *r, kb_fault *f, const int partial)
{
    size_t p = *pos;
    int m = kb_read_varlong(buf + p, buf + limit, &r->timestamp_delta);
    if (__builtin_expect(m <= 0, 0)) {
        varint_fault(f, m, p, KB_FIELD_TIMESTAMP_DELTA);
        return 0;
    }
    p += (size_t)m;
    if (!varint_field(buf, &p, limit, &r->offset_delta, KB_FIELD_OFFSET_DELTA, f))
        return 0;
    r->offset_known = 1;
    if (!varint_field(buf, &p, limit, &r->key_len, KB_FIELD_KEY_LENGTH, f))
        return 0;
    r->key = p;
    if (!(partial ? skip_field(&p, limit, r->key_len, f) : bytes_field(&p, limit, r->key_len, KB_FIELD_KEY, f)) ||
        !varint_field(buf, &p, limit, &r->value_len, KB_FIELD_VALUE_LENGTH, f))
        return 0;
    r->value = p;
    if (!(partial ? skip_field(&p, limit, r->value_len, f)
                  : bytes_field(&p, limit, r->value_len, KB_FIELD_VALUE, f)))
        return 0;
    size_t count_pos = p;
    if (!varint_field(buf, &p, limit, &r->header_count, KB_FIELD_HEADER_COUNT, f))
        return 0;
    if (r->header_count < 0) {
        kb_fault_set(f, KB_RULE_NEGATIVE_HEADER_COUNT, count_pos, r->header_count, 0, 0);
        return 0;
    }
    if (!partial && (size_t)r->header_count > limit - p) {
        kb_fault_set(f, KB_RULE_HEADER_COUNT_EXCEEDS, count_pos, r->header_count, (int64_t)(limit - p), 0);
        return 0;
    }
    r->headers = p;
    r->min_length = r->key_len < r->value_len ? r->key_len : r->value_len;
    for (int32_t i = 0; i < r->header_count; i++) {
        int32_t klen, vlen;
        size_t kpos = p;
        if (!varint_field(buf, &p, limit, &klen, KB_FIELD_HEADER_KEY_LENGTH, f))
            return 0;
        if (klen < 0) {
            kb_fault_set(f, KB_RULE_NEGATIVE_HEADER_KEY, kpos, klen, i, 0);
            return 0;
        }
        if (!(partial ? skip_field(&p, limit, klen, f) : bytes_field(&p, limit, klen, KB_FIELD_HEADER_KEY, f)) ||
            !varint_field(buf, &p, limit, &vlen, KB_FIELD_HEADER_VALUE_LENGTH, f) ||
            !(partial ? skip_field(&p, limit, vlen, f) : bytes_field(&p, limit, vlen, KB_FIELD_HEADER_VALUE, f)))
            return 0;
        if (vlen < r->min_length)
            r->min_length = vlen;
    }
    *pos = p;
    return 1;
}

int kb_v2_read_record(const uint8_t *buf, size_t pos, size_t limit, kb_record *r, kb_fault *f, size_t *next)
{
    size_t p = pos;
    *next = 0;
    r->pos = pos;
    r->offset_known = 0;
    int n = kb_read_varint(buf + p, buf + limit, &r->length);
    if (n <= 0) {
        /* Kafka: BufferUnderflow -> "premature EOF"; a varint too long is an IllegalArgumentException
         * its handler does not catch (UNKNOWN_SERVER_ERROR); the walk cannot go on */
        if (n == KB_VARINT_TOO_LONG)
            kb_fault_set(f, KB_RULE_LENGTH_VARINT_TOO_LONG, p, KB_FIELD_LENGTH, 0, 0);
        else
            kb_fault_set(f, KB_RULE_PREMATURE_EOF, p, 0, 0, 0);
        return -1;
    }
    p += (size_t)n;
    size_t body = p;
    if (r->length >= 0 && (size_t)r->length > limit - body) {
        kb_fault_set(f, KB_RULE_RECORD_LENGTH_EXCEEDS, pos, r->length, (int64_t)(limit - body), 0);
        return -1;
    }
    if (r->length >= 0)
        *next = body + (size_t)r->length;

    if (p >= limit) {
        kb_fault_set(f, KB_RULE_RECORD_STRUCTURE, p, KB_FIELD_ATTRIBUTES, 0, 0);
        return -1;
    }
    r->attributes = (int8_t)buf[p++];
    if (!read_fields(buf, &p, limit, r, f, 0))
        return -1;
    r->end = p;
    if ((int64_t)(p - body) != r->length) {
        kb_fault_set(f, KB_RULE_RECORD_SIZE_MISMATCH, pos, r->length, (int64_t)(p - body), 0);
        return -1;
    }
    return 0;
}

/* Kafka's readers of compressed records, as its validator and consumers use them. */

int kb_v2_read_record_stream(const uint8_t *buf, size_t pos, size_t limit, kb_record *r, kb_fault *f, size_t *next)
{
    int32_t length;
    int n = kb_read_varint(buf + pos, buf + limit, &length);
    *next = 0;
    r->pos = pos;
    r->offset_known = 0;
    if (n <= 0 || length < 0) { /* IllegalArgumentException (EOF, allocate(-n)): the iterator's message */
        kb_fault_set(f, KB_RULE_PREMATURE_EOF, pos, 0, 0, 0);
        return -1;
    }
    size_t body = pos + (size_t)n;
    if ((size_t)length > limit - body) {
        kb_fault_set(f, KB_RULE_RECORD_PAYLOAD_EOF, pos, length, (int64_t)(limit - body), 0);
        return -1;
    }
    /* the body is read into its own buffer of exactly `length` bytes, then parsed there */
    return kb_v2_read_record(buf, pos, body + (size_t)length, r, f, next);
}

int kb_v2_read_record_partial(const uint8_t *buf, size_t pos, size_t limit, kb_record *r, kb_fault *f,
                              size_t *next)
{
    size_t p = pos;
    r->pos = pos;
    r->offset_known = 0;
    *next = 0;
    int n = kb_read_varint(buf + p, buf + limit, &r->length);
    if (n <= 0) { /* read before readPartiallyFrom's try: IllegalArgumentException reaches the iterator */
        kb_fault_set(f, KB_RULE_PREMATURE_EOF, p, 0, 0, 0);
        return -1;
    }
    p += (size_t)n;
    if (r->length >= 0 && (size_t)r->length <= limit - p)
        *next = p + (size_t)r->length; /* only for a caller that goes on past a fault (Kafka stops) */
    r->attributes = p < limit ? (int8_t)buf[p++] : -1; /* InputStream.read() gives -1 at the end */
    if (!read_fields(buf, &p, limit, r, f, 1))
        return -1;
    r->end = p; /* the declared length is not used: the next record starts where this one stopped */
    return 0;
}

int kb_v2_ran_out(const uint8_t *buf, size_t limit, const kb_fault *f, kb_reader reader)
{
    int32_t ignored;
    switch (f->rule) {
    case KB_RULE_RECORD_PAYLOAD_EOF:
    case KB_RULE_SKIP_EOF:
        return 1;
    case KB_RULE_RECORD_STRUCTURE: /* the partial reader's: a field cut off at the end */
        return reader == KB_READER_PARTIAL;
    case KB_RULE_PREMATURE_EOF:    /* a length varint cut off at the end (not one too long) */
        return f->pos >= limit || kb_read_varint(buf + f->pos, buf + limit, &ignored) == 0;
    default:
        return 0;
    }
}

int kb_v2_walk_prefix(const uint8_t *buf, size_t limit, int32_t count, kb_reader reader, kb_fault *f)
{
    size_t p = 0;
    for (int32_t i = 0;; i++) {
        int step = kb_v2_walk_step(p, limit, i, count, f);
        if (step == 0)
            return 0; /* checking that nothing remains reads on, into the failure */
        if (step < 0)
            return i < count ? 0 : -1; /* ran out: the codec's failure; bytes past the last record */
        kb_record r;
        size_t next;
        if (kb_v2_read_record_by(reader, buf, p, limit, &r, f, &next) != 0)
            return kb_v2_ran_out(buf, limit, f, reader) ? 0 : -1;
        p = r.end;
    }
}

size_t kb_v2_read_header_kv(const uint8_t *buf, size_t pos, size_t limit, size_t *key, int32_t *key_len,
                            size_t *value, int32_t *value_len)
{
    const uint8_t *end = buf + limit;
    pos += (size_t)kb_read_varint(buf + pos, end, key_len);
    *key = pos;
    pos += (size_t)*key_len;
    pos += (size_t)kb_read_varint(buf + pos, end, value_len);
    *value = pos;
    if (*value_len > 0)
        pos += (size_t)*value_len;
    return pos;
}
