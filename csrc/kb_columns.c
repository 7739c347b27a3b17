#include "kb_columns.h"
#include "kb_ranges.h"

#include <stdlib.h>
#include <string.h>

#include "kb_copy.h"
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

/* Room in `*p` (elements of `elem` bytes, `*cap` of them) for index `i`. */
static int scratch_room(void *p, int64_t *cap, int64_t i, size_t elem)
{
    if (i < *cap)
        return 0;
    int64_t n = *cap ? *cap * 2 : 256;
    while (n <= i)
        n *= 2;
    void *grown = realloc(*(void **)p, (size_t)n * elem);
    if (!grown)
        return -1;
    *(void **)p = grown;
    *cap = n;
    return 0;
}

int kb_columns_measure(const uint8_t *buf, size_t start, size_t limit, int32_t count, kb_reader reader,
                       kb_column_sizes *z, kb_fault *f, int32_t *record_index, kb_column_scratch *keep)
{
    size_t p = start;
    int64_t header = 0;
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
        if (keep) {
            if (scratch_room(&keep->records, &keep->records_cap, i, sizeof *keep->records) ||
                scratch_room(&keep->headers, &keep->headers_cap, header + r.header_count, sizeof *keep->headers))
                return KB_COLUMNS_NO_MEMORY;
            keep->records[i] = (kb_record_at){r.timestamp_delta, r.key, r.value, r.headers,
                                              r.offset_delta, r.key_len, r.value_len, r.header_count};
        }
        size_t h = r.headers;
        for (int32_t k = 0; k < r.header_count; k++) {
            size_t kp, vp;
            int32_t kl, vl;
            h = kb_v2_read_header_kv(buf, h, r.end, &kp, &kl, &vp, &vl);
            z->header_key_bytes += kl;
            if (vl > 0)
                z->header_value_bytes += vl;
            if (keep)
                keep->headers[header++] = (kb_header_at){kp, vp, kl, vl};
        }
        p = r.end;
    }
}

/* Appends bytes (n < 0: null) to an Arrow binary column at `row` (`stream`: around the cache). */
static void put_binary(int32_t *offsets, uint8_t *data, uint8_t *valid, int64_t row, const uint8_t *src,
                       int32_t n, int stream)
{
    int32_t end = offsets[row];
    if (n >= 0) {
        if (n > 0 && stream)
            kb_copy_streaming(data + end, src, (size_t)n);
        else if (n > 0) /* an empty column's data may not be allocated */
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
                          int32_t key_len, size_t value, int32_t value_len, int stream)
{
    if (c->key_views)
        put_view(c->key_views, c->key_valid, row, buf, key, key_len, buffer);
    else
        put_binary(c->key_offsets, c->key_data, c->key_valid, row, buf + key, key_len, stream);
    if (c->value_views)
        put_view(c->value_views, c->value_valid, row, buf, value, value_len, buffer);
    else
        put_binary(c->value_offsets, c->value_data, c->value_valid, row, buf + value, value_len, stream);
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

static void set_bit(uint8_t *bits, int64_t i, int value)
{
    uint8_t mask = (uint8_t)(1u << (i & 7));
    bits[i >> 3] = value ? (uint8_t)(bits[i >> 3] | mask) : (uint8_t)(bits[i >> 3] & ~mask);
}

/* Sets (value 1) or clears (value 0) bits [from, to) of an Arrow bitmap: whole bytes at once. */
static void set_bits(uint8_t *bits, int64_t from, int64_t to, int value)
{
    if (from >= to) /* nothing to set: the bitmap may not exist yet */
        return;
    for (; from < to && (from & 7); from++)
        set_bit(bits, from, value);
    int64_t whole = (to - from) >> 3;
    memset(bits + (from >> 3), value ? 0xff : 0, (size_t)whole);
    for (from += whole << 3; from < to; from++)
        set_bit(bits, from, value);
}

/* The batch columns of rows [from, to): one value each, in column-wise loops the compiler
 * vectorises (cheaper than per-record stores in the record loop). */
static void put_batch(kb_columns *c, int64_t from, int64_t to, const kb_column_batch *b, int64_t base_offset,
                      int32_t epoch, int64_t producer_id, int16_t producer_epoch, int attributes, int timestamp_type)
{
    if (from >= to) /* a batch of no records (or none at or after a fetch offset): the arrays may not exist yet */
        return;
    for (int64_t r = from; r < to; r++)
        c->partition_leader_epoch[r] = epoch;
    if (c->layout & KB_LAYOUT_SPARK_TIME) {
        int32_t id = timestamp_type == 2 ? -1 : timestamp_type; /* NoTimestampType's id is -1 */
        for (int64_t r = from; r < to; r++)
            c->timestamp_type_id[r] = id;
    } else {
        memset(c->timestamp_type + from, timestamp_type, (size_t)(to - from));
    }
    if (c->layout & KB_LAYOUT_SPARK_ONLY) /* Spark's Kafka source has no other batch column */
        return;
    uint8_t transactional = (attributes & KB_ATTR_TRANSACTIONAL) != 0, control = (attributes & KB_ATTR_CONTROL) != 0;
    for (int64_t r = from; r < to; r++)
        c->batch_index[r] = b->entry;
    for (int64_t r = from; r < to; r++)
        c->batch_position[r] = b->position;
    for (int64_t r = from; r < to; r++)
        c->base_offset[r] = base_offset;
    for (int64_t r = from; r < to; r++)
        c->producer_id[r] = producer_id;
    for (int64_t r = from; r < to; r++)
        c->producer_epoch[r] = producer_epoch;
    if (transactional)
        set_bits(c->is_transactional, from, to, 1);
    if (control)
        set_bits(c->is_control, from, to, 1);
}

/* A record timestamp in the column's unit (Spark: microseconds, wrapping as its cast does). */
static inline int64_t column_timestamp(const kb_columns *c, int64_t millis)
{
    return c->layout & KB_LAYOUT_SPARK_TIME ? (int64_t)((uint64_t)millis * 1000u) : millis;
}

/* A measured v2 batch: its records as the measuring walk left them in `at`. */
static void fill_v2(const kb_column_batch *b, kb_columns *c, const kb_column_scratch *at, int stream)
{
    const uint8_t *buf = b->records;
    const kb_v2_header *h = &b->h;
    int64_t first_row = c->row;
    const kb_header_at *hat = at->headers;
    for (int32_t i = 0; i < b->count; i++) {
        const kb_record_at *r = &at->records[i];
        int64_t offset = kb_wrap_add64(h->base_offset, r->offset_delta);
        int64_t timestamp = kb_v2_record_timestamp(h, r->timestamp_delta);
        if (__builtin_expect(b->ranges && !kb_ranges_keeps_record(b->ranges, offset, timestamp), 0)) {
            hat += r->header_count;
            continue;
        }
        int64_t row = c->row++;
        c->offset[row] = offset;
        c->timestamp[row] = column_timestamp(c, timestamp);
        if (c->sequence)
            c->sequence[row] = kb_increment_sequence(h->base_sequence, r->offset_delta);
        put_key_value(c, row, b->buffer, buf, r->key, r->key_len, r->value, r->value_len, stream);
        for (int32_t k = 0; k < r->header_count; k++, hat++) {
            int64_t hrow = c->header_row++;
            c->hkey_offsets[hrow + 1] = c->hkey_offsets[hrow] + hat->key_len;
            if (hat->key_len > 0)
                memcpy(c->hkey_data + c->hkey_offsets[hrow], buf + hat->key, (size_t)hat->key_len);
            put_binary(c->hvalue_offsets, c->hvalue_data, c->hvalue_valid, hrow, buf + hat->value, hat->value_len,
                       stream);
        }
        c->header_offsets[row + 1] = (int32_t)c->header_row;
    }
    put_batch(c, first_row, c->row, b, h->base_offset, h->partition_leader_epoch, h->producer_id,
              h->producer_epoch, h->attributes, kb_timestamp_type(2, h->attributes));
}

/* v0/v1 messages carry Kafka's "none" values in the v2 fields (no epoch, producer, flags). */
static void fill_legacy(const kb_column_batch *b, kb_columns *c, int stream)
{
    size_t p = b->start;
    kb_legacy_msg m;
    kb_fault f;
    int64_t first_row = c->row;
    while (kb_legacy_next(b->records, b->limit, &p, &m, &f) == KB_INNER_MSG) {
        int64_t offset = kb_wrap_add64(b->offset_base, m.offset);
        int64_t timestamp = kb_legacy_timestamp(&b->m, &m);
        if (b->ranges && !kb_ranges_keeps_record(b->ranges, offset, timestamp))
            continue;
        int64_t row = c->row++;
        c->offset[row] = offset;
        c->timestamp[row] = column_timestamp(c, timestamp);
        if (c->sequence)
            c->sequence[row] = -1;
        put_key_value(c, row, b->buffer, b->records, m.key, m.key_len, m.value, m.value_len, stream);
        c->header_offsets[row + 1] = (int32_t)c->header_row;
    }
    put_batch(c, first_row, c->row, b, b->first_offset, -1, -1, -1, 0, kb_timestamp_type(b->m.magic, b->m.attributes));
}

/* A count_only store's rows and headers for a batch with ranges: its measured records in range. */
static void count_kept(const kb_column_batch *b, kb_column_store *s)
{
    if (b->magic < 2) {
        size_t p = b->start;
        kb_legacy_msg m;
        kb_fault f;
        while (kb_legacy_next(b->records, b->limit, &p, &m, &f) == KB_INNER_MSG)
            s->c.row += kb_ranges_keeps_record(b->ranges, kb_wrap_add64(b->offset_base, m.offset),
                                               kb_legacy_timestamp(&b->m, &m));
        return;
    }
    for (int32_t i = 0; i < b->count; i++) {
        const kb_record_at *r = &s->scratch.records[i];
        if (kb_ranges_keeps_record(b->ranges, kb_wrap_add64(b->h.base_offset, r->offset_delta),
                                   kb_v2_record_timestamp(&b->h, r->timestamp_delta))) {
            s->c.row++;
            s->c.header_row += r->header_count;
        }
    }
}

static void fill(const kb_column_batch *b, kb_column_store *s)
{
    /* columns larger than the cache are written around it (kb_copy.h) */
    int stream = s->key_cap + s->value_cap + s->hkey_cap + s->hvalue_cap >= KB_STREAM_MIN_COLUMN;
    if (b->magic < 2)
        fill_legacy(b, &s->c, stream);
    else
        fill_v2(b, &s->c, &s->scratch, stream);
    if (stream)
        kb_copy_streaming_done();
}

void kb_columns_rewind(kb_columns *c, int64_t row, int64_t header_row)
{
    uint8_t *row_bits[] = {c->key_valid, c->value_valid, c->is_transactional, c->is_control};
    for (size_t i = 0; i < sizeof row_bits / sizeof row_bits[0]; i++)
        if (row_bits[i]) /* Spark's layout has no flag columns, a count_only store no columns */
            set_bits(row_bits[i], row, c->row, 0);
    if (c->hvalue_valid) /* a count_only store has none */
        set_bits(c->hvalue_valid, header_row, c->header_row, 0);
    c->row = row;
    c->header_row = header_row;
}

/* Grows an array from `old_n` to `new_n` elements of `elem` bytes (bitmaps: `elem` 0, n bits, the
 * new bytes zeroed). */
static int grow(void *pp, int64_t old_n, int64_t new_n, size_t elem)
{
    void **p = (void **)pp;
    size_t old_bytes = elem ? (size_t)old_n * elem : (size_t)(old_n + 7) / 8;
    size_t new_bytes = elem ? (size_t)new_n * elem : (size_t)(new_n + 7) / 8;
    void *q = realloc(*p, new_bytes ? new_bytes : 1);
    if (!q)
        return -1;
    if (!elem && new_bytes > old_bytes)
        memset((uint8_t *)q + old_bytes, 0, new_bytes - old_bytes);
    *p = q;
    return 0;
}

/* The capacity for `used + more`: `used + more * expect` the first time, else at least double. */
static int64_t room(int64_t cap, int64_t used, int64_t more, int64_t expect)
{
    if (used + more <= cap)
        return cap;
    int64_t want = cap == 0 ? used + more * expect : used + more;
    return want > 2 * cap ? want : 2 * cap;
}

/* About the bytes one batch of sizes *z takes in the columns: the per-row arrays of reserve_rows
 * (~72 bytes with the views), the per-header ones of reserve_headers (~9), and the data. */
static int64_t column_bytes(const kb_column_sizes *z)
{
    return z->records * 72 + z->headers * 9 + z->key_bytes + z->value_bytes + z->header_key_bytes +
           z->header_value_bytes + 1;
}

static int reserve_rows(kb_column_store *s, int64_t rows)
{
    kb_columns *c = &s->c;
    int64_t o = s->rows_cap, n = rows;
    if (grow(&c->offset, o, n, 8) || grow(&c->timestamp, o, n, 8) || grow(&c->partition_leader_epoch, o, n, 4) ||
        grow(&c->key_valid, o, n, 0) || grow(&c->value_valid, o, n, 0) || grow(&c->header_offsets, o + 1, n + 1, 4))
        return -1;
    if (c->layout & KB_LAYOUT_SPARK_TIME ? grow(&c->timestamp_type_id, o, n, 4) : grow(&c->timestamp_type, o, n, 1))
        return -1;
    if (!(c->layout & KB_LAYOUT_SPARK_ONLY) &&
        (grow(&c->sequence, o, n, 4) || grow(&c->batch_index, o, n, 4) || grow(&c->batch_position, o, n, 8) ||
         grow(&c->base_offset, o, n, 8) || grow(&c->producer_id, o, n, 8) || grow(&c->producer_epoch, o, n, 2) ||
         grow(&c->is_transactional, o, n, 0) || grow(&c->is_control, o, n, 0)))
        return -1;
    if (s->views ? grow(&c->key_views, o, n, 16) || grow(&c->value_views, o, n, 16)
                 : grow(&c->key_offsets, o + 1, n + 1, 4) || grow(&c->value_offsets, o + 1, n + 1, 4))
        return -1;
    if (o == 0) { /* offsets start at 0 */
        c->header_offsets[0] = 0;
        if (!s->views)
            c->key_offsets[0] = c->value_offsets[0] = 0;
    }
    s->rows_cap = n;
    return 0;
}

static int reserve_headers(kb_column_store *s, int64_t headers)
{
    kb_columns *c = &s->c;
    int64_t o = s->headers_cap, n = headers;
    if (grow(&c->hkey_offsets, o + 1, n + 1, 4) || grow(&c->hvalue_offsets, o + 1, n + 1, 4) ||
        grow(&c->hvalue_valid, o, n, 0))
        return -1;
    if (o == 0)
        c->hkey_offsets[0] = c->hvalue_offsets[0] = 0;
    s->headers_cap = n;
    return 0;
}

static int reserve_bytes(uint8_t **data, int64_t *cap, int64_t used, int64_t more, int64_t expect)
{
    int64_t n = room(*cap, used, more, expect);
    if (n == *cap)
        return 0;
    if (grow(data, *cap, n, 1))
        return -1;
    *cap = n;
    return 0;
}

/* Room for one more batch of sizes *z. */
static int reserve(kb_column_store *s, const kb_column_sizes *z, int64_t expect)
{
    kb_columns *c = &s->c;
    int64_t key_used = s->views ? 0 : c->key_offsets ? c->key_offsets[c->row] : 0;
    int64_t value_used = s->views ? 0 : c->value_offsets ? c->value_offsets[c->row] : 0;
    int64_t hkey_used = c->hkey_offsets ? c->hkey_offsets[c->header_row] : 0;
    int64_t hvalue_used = c->hvalue_offsets ? c->hvalue_offsets[c->header_row] : 0;
    if (c->row + z->records > INT32_MAX || c->header_row + z->headers > INT32_MAX ||
        key_used + z->key_bytes > INT32_MAX || value_used + z->value_bytes > INT32_MAX ||
        hkey_used + z->header_key_bytes > INT32_MAX || hvalue_used + z->header_value_bytes > INT32_MAX)
        return KB_COLUMNS_TOO_LARGE;
    int64_t rows = room(s->rows_cap, c->row, z->records, expect);
    int64_t headers = room(s->headers_cap, c->header_row, z->headers, expect);
    if ((rows != s->rows_cap && reserve_rows(s, rows)) || (headers != s->headers_cap && reserve_headers(s, headers)))
        return KB_COLUMNS_NO_MEMORY;
    if (!s->views && (reserve_bytes(&c->key_data, &s->key_cap, key_used, z->key_bytes, expect) ||
                      reserve_bytes(&c->value_data, &s->value_cap, value_used, z->value_bytes, expect)))
        return KB_COLUMNS_NO_MEMORY;
    if (reserve_bytes(&c->hkey_data, &s->hkey_cap, hkey_used, z->header_key_bytes, expect) ||
        reserve_bytes(&c->hvalue_data, &s->hvalue_cap, hvalue_used, z->header_value_bytes, expect))
        return KB_COLUMNS_NO_MEMORY;
    return 0;
}

int kb_columns_add(kb_column_store *s, const kb_column_batch *b, int64_t expect, kb_fault *f,
                   int32_t *record_index)
{
    kb_column_sizes z;
    memset(&z, 0, sizeof z);
    *record_index = -1;
    if (b->crc_pending) {
        kb_v2_header h;
        size_t pos = b->start - KB_V2_HEADER_SIZE;
        if (kb_v2_check_entry(b->records, pos, b->limit - pos, 1, &h, f) != 0)
            return -1;
    }
    if (b->magic < 2) {
        if (kb_legacy_columns_measure(b->records, b->start, b->limit, &z, f, record_index) != 0)
            return -1;
    } else if (b->count) {
        int rc = kb_columns_measure(b->records, b->start, b->limit, b->count,
                                    kb_v2_consumer_reader(b->h.attributes & KB_ATTR_CODEC_MASK), &z, f, record_index,
                                    &s->scratch);
        if (rc != 0)
            return rc;
    }
    if (s->count_only) {
        if (b->ranges)
            count_kept(b, s);
        else {
            s->c.row += z.records;
            s->c.header_row += z.headers;
        }
        return 0;
    }
    if (expect < 1)
        expect = 1;
    if (s->rows_cap == 0 && expect > 1) {
        /* the first room is `expect` times this batch's columns, within twice the input those batches
         * would make: a dense first batch (a marker before large records) must not reserve many times
         * what the input can hold (the arrays grow by doubling when it was too little) */
        int64_t columns = column_bytes(&z);
        int64_t input = (int64_t)(b->limit - b->start) + KB_V2_HEADER_SIZE;
        if (columns > 2 * input)
            expect = expect * 2 * input / columns > 1 ? expect * 2 * input / columns : 1;
    }
    int rc = reserve(s, &z, expect);
    if (rc != 0)
        return rc;
    fill(b, s);
    return 0;
}

static int trim(void *p, int64_t n, size_t elem)
{
    return *(void **)p ? grow(p, n, n, elem) : 0;
}

int kb_column_store_trim(kb_column_store *s)
{
    kb_columns *c = &s->c;
    int64_t n = c->row, h = c->header_row;
    /* offsets arrays exist even for no rows or no headers (Arrow's one slot) */
    if ((!c->header_offsets && reserve_rows(s, 0)) || (!c->hkey_offsets && reserve_headers(s, 0)))
        return -1;
    int bad = trim(&c->offset, n, 8) | trim(&c->timestamp, n, 8) | trim(&c->sequence, n, 4) |
              trim(&c->batch_index, n, 4) | trim(&c->batch_position, n, 8) | trim(&c->base_offset, n, 8) |
              trim(&c->partition_leader_epoch, n, 4) | trim(&c->producer_id, n, 8) | trim(&c->producer_epoch, n, 2) |
              trim(&c->timestamp_type, n, 1) | trim(&c->timestamp_type_id, n, 4) | trim(&c->header_offsets, n + 1, 4) |
              trim(&c->hkey_offsets, h + 1, 4) | trim(&c->hvalue_offsets, h + 1, 4);
    if (s->views)
        bad |= trim(&c->key_views, n, 16) | trim(&c->value_views, n, 16);
    else
        bad |= trim(&c->key_offsets, n + 1, 4) | trim(&c->value_offsets, n + 1, 4) |
               trim(&c->key_data, c->key_offsets ? c->key_offsets[n] : 0, 1) |
               trim(&c->value_data, c->value_offsets ? c->value_offsets[n] : 0, 1);
    bad |= trim(&c->hkey_data, c->hkey_offsets ? c->hkey_offsets[h] : 0, 1) |
           trim(&c->hvalue_data, c->hvalue_offsets ? c->hvalue_offsets[h] : 0, 1);
    return bad ? -1 : 0;
}

void kb_column_store_free(kb_column_store *s)
{
    kb_columns *c = &s->c;
    void *all[] = {c->key_views, c->value_views, c->offset, c->timestamp, c->sequence, c->batch_index,
                   c->batch_position, c->base_offset, c->partition_leader_epoch, c->producer_id, c->producer_epoch,
                   c->is_transactional, c->is_control, c->timestamp_type, c->timestamp_type_id, c->key_offsets, c->key_data, c->key_valid,
                   c->value_offsets, c->value_data, c->value_valid, c->header_offsets, c->hkey_offsets, c->hkey_data,
                   c->hvalue_offsets, c->hvalue_data, c->hvalue_valid};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
    free(s->scratch.records);
    free(s->scratch.headers);
    memset(s, 0, sizeof *s);
}
