#include "kb_columns.h"

#include <string.h>

#include "kb_legacy.h"
#include "kb_wire.h"

/* One more row with this key and value (lengths < 0: null). */
static void count_row(kb_column_sizes *z, int32_t key_len, int32_t value_len)
{
    z->records++;
    if (key_len > 0)
        z->key_bytes += key_len;
    if (value_len > 0)
        z->value_bytes += value_len;
}

int kb_columns_measure(const uint8_t *buf, size_t start, size_t limit, int32_t count, kb_reader reader,
                       kb_column_sizes *z, kb_fault *f, int32_t *record_index)
{
    size_t p = start;
    for (int32_t i = 0;; i++) {
        kb_record r;
        size_t next;
        int step = kb_v2_walk_step(p, limit, i, count, f);
        *record_index = i < count ? i : -1;
        if (step <= 0)
            return step;
        if (kb_v2_read_record_by(reader, buf, p, limit, &r, f, &next) != 0)
            return -1;
        count_row(z, r.key_len, r.value_len);
        z->headers += r.header_count;
        size_t h = r.headers;
        for (int32_t k = 0; k < r.header_count; k++) {
            size_t kp, vp;
            int32_t kl, vl;
            h = kb_v2_read_header_kv(buf, h, r.end, &kp, &kl, &vp, &vl);
            z->header_key_bytes += kl;
            if (vl > 0)
                z->header_value_bytes += vl;
        }
        p = r.end;
    }
}

/* Appends bytes (n < 0: null) to an Arrow binary column at `row`. */
static void put_binary(int32_t *offsets, uint8_t *data, uint8_t *valid, int64_t row, const uint8_t *src,
                       int32_t n)
{
    int32_t end = offsets[row];
    if (n >= 0) {
        memcpy(data + end, src, (size_t)n);
        end += n;
        valid[row >> 3] |= (uint8_t)(1u << (row & 7));
    }
    offsets[row + 1] = end;
}

/* Writes an Arrow binary view (n < 0: null) at `row`: up to 12 bytes inline,
 * longer values as (length, 4-byte prefix, buffer index, offset into that buffer). */
static void put_view(uint8_t *views, uint8_t *valid, int64_t row, const uint8_t *buf, size_t pos, int32_t n,
                     int32_t buffer)
{
    uint8_t *v = views + 16 * row;
    memset(v, 0, 16);
    if (n < 0)
        return;
    valid[row >> 3] |= (uint8_t)(1u << (row & 7));
    memcpy(v, &n, 4);
    if (n <= 12) {
        memcpy(v + 4, buf + pos, (size_t)n);
    } else {
        int32_t offset = (int32_t)pos;
        memcpy(v + 4, buf + pos, 4);
        memcpy(v + 8, &buffer, 4);
        memcpy(v + 12, &offset, 4);
    }
}

/* A record's key and value, copied or as views, at `row`. */
static void put_key_value(kb_columns *c, int64_t row, int32_t buffer, const uint8_t *buf, size_t key,
                          int32_t key_len, size_t value, int32_t value_len)
{
    if (c->key_views)
        put_view(c->key_views, c->key_valid, row, buf, key, key_len, buffer);
    else
        put_binary(c->key_offsets, c->key_data, c->key_valid, row, buf + key, key_len);
    if (c->value_views)
        put_view(c->value_views, c->value_valid, row, buf, value, value_len, buffer);
    else
        put_binary(c->value_offsets, c->value_data, c->value_valid, row, buf + value, value_len);
}

int kb_legacy_columns_measure(const uint8_t *buf, size_t start, size_t limit, kb_column_sizes *z, kb_fault *f,
                              int32_t *record_index)
{
    size_t p = start;
    kb_legacy_msg m;
    for (int32_t i = 0;; i++) {
        *record_index = i;
        kb_inner_status st = kb_legacy_next(buf, limit, &p, &m, f);
        if (st == KB_INNER_END || st == KB_INNER_TRUNCATED)
            return 0;
        if (st != KB_INNER_MSG)
            return -1;
        count_row(z, m.key_len, m.value_len);
    }
}

/* The batch columns of rows [from, to): one value each, in column-wise loops the compiler
 * vectorises (cheaper than per-record stores in the record loop). */
static void put_batch(kb_columns *c, int64_t from, int64_t to, const kb_column_batch *b, int64_t base_offset,
                      int32_t epoch, int64_t producer_id, int16_t producer_epoch, int attributes, int timestamp_type)
{
    uint8_t transactional = (attributes & KB_ATTR_TRANSACTIONAL) != 0, control = (attributes & KB_ATTR_CONTROL) != 0;
    for (int64_t r = from; r < to; r++)
        c->batch_index[r] = b->entry;
    for (int64_t r = from; r < to; r++)
        c->batch_position[r] = b->position;
    for (int64_t r = from; r < to; r++)
        c->base_offset[r] = base_offset;
    for (int64_t r = from; r < to; r++)
        c->partition_leader_epoch[r] = epoch;
    for (int64_t r = from; r < to; r++)
        c->producer_id[r] = producer_id;
    for (int64_t r = from; r < to; r++)
        c->producer_epoch[r] = producer_epoch;
    memset(c->is_transactional + from, transactional, (size_t)(to - from));
    memset(c->is_control + from, control, (size_t)(to - from));
    memset(c->timestamp_type + from, timestamp_type, (size_t)(to - from));
}

static void fill_v2(const kb_column_batch *b, kb_columns *c)
{
    const uint8_t *buf = b->records;
    const kb_v2_header *h = &b->h;
    int64_t first_row = c->row;
    size_t p = b->start;
    for (int32_t i = 0; i < b->count; i++) {
        kb_record r;
        kb_fault f;
        size_t next;
        kb_v2_read_record(buf, p, b->limit, &r, &f, &next);
        int64_t row = c->row++;
        c->offset[row] = kb_wrap_add64(h->base_offset, r.offset_delta);
        c->timestamp[row] = kb_v2_record_timestamp(h, r.timestamp_delta);
        c->sequence[row] = kb_increment_sequence(h->base_sequence, r.offset_delta);
        put_key_value(c, row, b->buffer, buf, r.key, r.key_len, r.value, r.value_len);
        size_t hp = r.headers;
        for (int32_t k = 0; k < r.header_count; k++) {
            size_t kp, vp;
            int32_t kl, vl;
            hp = kb_v2_read_header_kv(buf, hp, r.end, &kp, &kl, &vp, &vl);
            int64_t hrow = c->header_row++;
            c->hkey_offsets[hrow + 1] = c->hkey_offsets[hrow] + kl;
            memcpy(c->hkey_data + c->hkey_offsets[hrow], buf + kp, (size_t)kl);
            put_binary(c->hvalue_offsets, c->hvalue_data, c->hvalue_valid, hrow, buf + vp, vl);
        }
        c->header_offsets[row + 1] = (int32_t)c->header_row;
        p = r.end;
    }
    put_batch(c, first_row, c->row, b, h->base_offset, h->partition_leader_epoch, h->producer_id,
              h->producer_epoch, h->attributes, kb_timestamp_type(2, h->attributes));
}

/* v0/v1 messages carry Kafka's "none" values in the v2 fields (no epoch, producer, flags). */
static void fill_legacy(const kb_column_batch *b, kb_columns *c)
{
    size_t p = b->start;
    kb_legacy_msg m;
    kb_fault f;
    int64_t first_row = c->row;
    while (kb_legacy_next(b->records, b->limit, &p, &m, &f) == KB_INNER_MSG) {
        int64_t row = c->row++;
        c->offset[row] = kb_wrap_add64(b->offset_base, m.offset);
        c->timestamp[row] = kb_legacy_timestamp(&b->m, &m);
        c->sequence[row] = -1;
        put_key_value(c, row, b->buffer, b->records, m.key, m.key_len, m.value, m.value_len);
        c->header_offsets[row + 1] = (int32_t)c->header_row;
    }
    put_batch(c, first_row, c->row, b, b->first_offset, -1, -1, -1, 0, kb_timestamp_type(b->m.magic, b->m.attributes));
}

void kb_columns_fill(const kb_column_batch *b, kb_columns *c)
{
    if (b->magic < 2)
        fill_legacy(b, c);
    else
        fill_v2(b, c);
}
