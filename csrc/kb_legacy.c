#include "kb_legacy.h"

#include <string.h>

#include "kb_crc32.h"
#include "kb_wire.h"

/* A length-prefixed field (int32; negative = null) starting at *p, bounded by `end`. */
static int sized(const uint8_t *buf, size_t *p, size_t end, int32_t *len, size_t *at, kb_field lf, kb_field df,
                 kb_fault *f)
{
    if (end - *p < 4) {
        kb_fault_set(f, KB_RULE_RECORD_STRUCTURE, *p, lf, 4, (int64_t)(end - *p));
        return 0;
    }
    *len = (int32_t)kb_load_be32(buf + *p);
    *p += 4;
    *at = *p;
    if (*len > 0) {
        if ((size_t)*len > end - *p) {
            kb_fault_set(f, KB_RULE_RECORD_STRUCTURE, *p, df, *len, (int64_t)(end - *p));
            return 0;
        }
        *p += (size_t)*len;
    }
    return 1;
}

int kb_legacy_read(const uint8_t *buf, size_t pos, size_t size, kb_legacy_msg *m, kb_fault *f)
{
    size_t end = pos + size;
    m->pos = pos;
    m->size = size;
    m->offset = (int64_t)kb_load_be64(buf + pos);
    if (size < KB_LOG_OVERHEAD + KB_LEGACY_MIN_SIZE) {
        kb_fault_set(f, KB_RULE_LEGACY_TOO_SMALL, pos + KB_AT_SIZE, (int64_t)size - KB_LOG_OVERHEAD, 0, 0);
        return -1;
    }
    m->crc = kb_load_be32(buf + pos + KB_LEGACY_AT_CRC);
    m->magic = (int8_t)buf[pos + KB_AT_MAGIC];
    m->attributes = (int8_t)buf[pos + KB_LEGACY_AT_ATTRIBUTES];
    size_t p = pos + KB_LEGACY_AT_TIMESTAMP;
    m->timestamp = -1;
    if (m->magic > 0) {
        if (end - p < 8) {
            kb_fault_set(f, KB_RULE_RECORD_STRUCTURE, p, KB_FIELD_TIMESTAMP_DELTA, 8, (int64_t)(end - p));
            return -1;
        }
        m->timestamp = (int64_t)kb_load_be64(buf + p);
        p += 8;
    }
    if (!sized(buf, &p, end, &m->key_len, &m->key, KB_FIELD_KEY_LENGTH, KB_FIELD_KEY, f) ||
        !sized(buf, &p, end, &m->value_len, &m->value, KB_FIELD_VALUE_LENGTH, KB_FIELD_VALUE, f))
        return -1;
    return 0;
}

uint32_t kb_legacy_compute_crc(const uint8_t *buf, const kb_legacy_msg *m)
{
    return kb_crc32(0, buf + m->pos + KB_AT_MAGIC, m->size - KB_AT_MAGIC);
}

int kb_legacy_check_crc(const uint8_t *buf, const kb_legacy_msg *m, kb_fault *f)
{
    uint32_t computed = kb_legacy_compute_crc(buf, m);
    if (computed == m->crc)
        return 0;
    kb_fault_set(f, KB_RULE_CRC_MISMATCH, m->pos + KB_LEGACY_AT_CRC, m->crc, computed, 0);
    return -1;
}

int kb_legacy_check_wrapper(const kb_legacy_msg *w, kb_fault *f)
{
    int codec = w->attributes & KB_ATTR_CODEC_MASK;
    if (codec >= KB_CODEC_COUNT)
        kb_fault_set(f, KB_RULE_UNKNOWN_CODEC, w->pos + KB_LEGACY_AT_ATTRIBUTES, codec, 0, 0);
    else if (codec == KB_CODEC_ZSTD)
        kb_fault_set(f, KB_RULE_LEGACY_ZSTD, w->pos + KB_LEGACY_AT_ATTRIBUTES, w->magic, 0, 0);
    else if (w->value_len < 0)
        kb_fault_set(f, KB_RULE_LEGACY_NULL_WRAPPER, w->value - 4, w->magic, 0, 0);
    else
        return 0;
    return -1;
}

int kb_legacy_check_inner(const kb_legacy_msg *m, kb_fault *f)
{
    if (!(m->attributes & KB_ATTR_CODEC_MASK))
        return 0;
    kb_fault_set(f, KB_RULE_LEGACY_INNER_COMPRESSED, m->pos + KB_LEGACY_AT_ATTRIBUTES, 0, 0, 0);
    return -1;
}

int kb_legacy_check_inner_set(const kb_legacy_msg *w, int32_t count, int64_t last_inner_offset, kb_fault *f)
{
    if (count == 0)
        kb_fault_set(f, KB_RULE_LEGACY_NO_INNER, w->value, 0, 0, 0);
    else if (w->magic == 1 && w->offset != 0 && w->offset < last_inner_offset)
        kb_fault_set(f, KB_RULE_LEGACY_WRAPPER_OFFSET, w->pos, w->offset, last_inner_offset, 0);
    else
        return 0;
    return -1;
}

kb_inner_status kb_legacy_next(const uint8_t *buf, size_t limit, size_t *p, kb_legacy_msg *m, kb_fault *f)
{
    size_t left = limit - *p;
    if (left == 0)
        return KB_INNER_END;
    if (left < KB_LOG_OVERHEAD)
        return KB_INNER_TRUNCATED;
    int32_t size = (int32_t)kb_load_be32(buf + *p + KB_AT_SIZE);
    if (size < KB_LEGACY_MIN_SIZE) {
        kb_fault_set(f, KB_RULE_LEGACY_INNER_TOO_SMALL, *p + KB_AT_SIZE, size, KB_LEGACY_MIN_SIZE, 0);
        return KB_INNER_FAULT;
    }
    if ((uint64_t)size + KB_LOG_OVERHEAD > left)
        return KB_INNER_TRUNCATED;
    size_t pos = *p;
    *p += (size_t)size + KB_LOG_OVERHEAD;
    if (kb_legacy_read(buf, pos, (size_t)size + KB_LOG_OVERHEAD, m, f) != 0)
        return KB_INNER_BAD;
    return KB_INNER_MSG;
}

size_t kb_legacy_entry_size(int magic, int32_t key_len, int32_t value_len)
{
    return KB_LOG_OVERHEAD + KB_LEGACY_MIN_SIZE + (magic > 0 ? 8 : 0) + (size_t)(key_len > 0 ? key_len : 0) +
           (size_t)(value_len > 0 ? value_len : 0);
}

static uint8_t *put_sized(uint8_t *p, const uint8_t *src, int32_t n)
{
    kb_store_be32(p, (uint32_t)(n < 0 ? -1 : n));
    p += 4;
    if (n > 0) {
        memcpy(p, src, (size_t)n);
        p += n;
    }
    return p;
}

void kb_legacy_write(uint8_t *out, int64_t offset, int magic, int attributes, int64_t timestamp,
                     const uint8_t *key, int32_t key_len, const uint8_t *value, int32_t value_len)
{
    size_t size = kb_legacy_entry_size(magic, key_len, value_len);
    kb_store_be64(out, (uint64_t)offset);
    kb_store_be32(out + 8, (uint32_t)(size - KB_LOG_OVERHEAD));
    out[16] = (uint8_t)magic;
    out[17] = (uint8_t)attributes;
    uint8_t *p = out + 18;
    if (magic > 0) {
        kb_store_be64(p, (uint64_t)timestamp);
        p += 8;
    }
    p = put_sized(p, key, key_len);
    put_sized(p, value, value_len);
    kb_store_be32(out + 12, kb_crc32(0, out + 16, size - 16));
}

int kb_legacy_read_inner_set(const kb_legacy_msg *w, const uint8_t *rec, size_t len, int32_t *count,
                             int64_t *first_offset, int64_t *base, kb_fault *f)
{
    kb_legacy_msg inner;
    size_t p = 0;
    int64_t first = 0, last = 0;
    int32_t n = 0;
    for (;;) {
        kb_inner_status st = kb_legacy_next(rec, len, &p, &inner, f);
        if (st == KB_INNER_END || st == KB_INNER_TRUNCATED)
            break;
        if (st != KB_INNER_MSG || kb_legacy_check_inner(&inner, f) != 0)
            return -1;
        if (n == 0)
            first = inner.offset;
        last = inner.offset;
        n++;
    }
    if (kb_legacy_check_inner_set(w, n, last, f) != 0)
        return -2;
    /* a v1 wrapper's inner offsets are relative to its own (the last's); 0: old librdkafka's absolute ones */
    *base = w->magic == 1 && w->offset != 0 ? w->offset - last : 0;
    *count = n;
    *first_offset = first + *base;
    return 0;
}
