#include "kb_decode.h"

#include <string.h>

#include "kb_kafka.h"
#include "kb_legacy.h"
#include "kb_resync.h"
#include "kb_rules.h"
#include "kb_wire.h"

static int decompress(const kb_decode_opts *o, int codec, int magic, const uint8_t *src, size_t n,
                      const uint8_t **out, size_t *out_len, kb_fault *f, kb_fault_place *where)
{
    *where = KB_FAULT_IN_PAYLOAD;
    if (o->decompress == NULL) {
        kb_fault_set(f, KB_RULE_DECOMPRESSION_FAILED, 0, -1, 0, 0);
        return -1;
    }
    return o->decompress(o->ctx, codec, magic, src, n, out, out_len, f);
}

/* magic 2: the header checked (the CRC of an uncompressed batch as it is filled, while in cache) */
static int v2_batch(const uint8_t *buf, const kb_entry *e, const kb_decode_opts *o, kb_column_batch *b, kb_fault *f,
                    kb_fault_place *where)
{
    kb_v2_header h;
    if (kb_v2_check_entry(buf, e->pos, e->size, 0, &h, f) != 0)
        return -1;
    int codec = h.attributes & KB_ATTR_CODEC_MASK;
    b->crc_pending = o->verify_crc && codec == KB_CODEC_NONE;
    if (o->verify_crc && !b->crc_pending && kb_v2_check_entry(buf, e->pos, e->size, 1, &h, f) != 0)
        return -1;
    if (kb_v2_check_walkable(&h, e->pos, f) != 0)
        return -1;
    b->records = buf;
    b->start = e->pos + KB_V2_HEADER_SIZE;
    b->limit = e->pos + e->size;
    if (codec != KB_CODEC_NONE && h.record_count > 0) {
        const uint8_t *out;
        size_t out_len;
        if (decompress(o, codec, 2, buf + b->start, e->size - KB_V2_HEADER_SIZE, &out, &out_len, f, where) != 0)
            return -1;
        b->records = out;
        b->start = 0;
        b->limit = out_len;
    }
    b->magic = 2;
    b->h = h;
    b->count = h.record_count > 0 ? h.record_count : 0;
    return 0;
}

/* magic 0/1: one message, or a compressed wrapper's inner set */
static int legacy_batch(const uint8_t *buf, const kb_entry *e, const kb_decode_opts *o, kb_column_batch *b,
                        kb_fault *f, kb_fault_place *where)
{
    kb_legacy_msg m;
    if (kb_legacy_read(buf, e->pos, e->size, &m, f) != 0)
        return -1;
    if (o->verify_crc && kb_legacy_check_crc(buf, &m, f) != 0)
        return -1;
    b->magic = m.magic;
    b->m = m;
    int codec = m.attributes & KB_ATTR_CODEC_MASK;
    if (codec == KB_CODEC_NONE) {
        b->records = buf;
        b->start = e->pos;
        b->limit = e->pos + e->size;
        b->first_offset = m.offset;
        return 0;
    }
    if (kb_legacy_check_wrapper(&m, f) != 0)
        return -1;
    const uint8_t *out;
    size_t out_len;
    if (decompress(o, codec, m.magic, buf + m.value, (size_t)m.value_len, &out, &out_len, f, where) != 0)
        return -1;
    int32_t count;
    int rc = kb_legacy_read_inner_set(&m, out, out_len, &count, &b->first_offset, &b->offset_base, f);
    if (rc != 0) {
        *where = rc == -1 ? KB_FAULT_IN_PAYLOAD : KB_FAULT_IN_BUFFER;
        return -1;
    }
    b->records = out;
    b->start = 0;
    b->limit = out_len;
    return 0;
}

int kb_decode_legacy_first_offset(const uint8_t *buf, const kb_entry *e, const kb_decode_opts *o, int64_t *first,
                                  kb_fault *f)
{
    kb_column_batch b;
    kb_fault_place where;
    kb_decode_opts unchecked = *o;
    unchecked.verify_crc = 0;
    memset(&b, 0, sizeof b);
    if (legacy_batch(buf, e, &unchecked, &b, f, &where) != 0)
        return -1;
    *first = b.first_offset;
    return 0;
}

int kb_decode_entry(kb_column_store *s, const uint8_t *buf, const kb_entry *e, int32_t entry, int64_t position,
                    const kb_decode_opts *o, int64_t expect, kb_fault *f, kb_fault_place *where,
                    int32_t *record_index)
{
    kb_column_batch b;
    memset(&b, 0, sizeof b);
    b.entry = entry;
    b.position = position;
    b.ranges = o->ranges;
    *where = KB_FAULT_IN_BUFFER;
    *record_index = -1;
    int rc = e->magic < 2 ? legacy_batch(buf, e, o, &b, f, where) : v2_batch(buf, e, o, &b, f, where);
    if (rc != 0)
        return -1;
    *where = b.records == buf ? KB_FAULT_IN_BUFFER : KB_FAULT_IN_PAYLOAD;
    return kb_columns_add(s, &b, expect, f, record_index);
}

int kb_decode_row(kb_column_store *s, const uint8_t *buf, size_t len, const kb_decode_opts *o, int64_t *expect,
                  kb_fault *f, kb_fault_place *where, int32_t *record_index, int32_t *entry)
{
    int64_t first_row = s->c.row, first_header = s->c.header_row;
    size_t pos = 0;
    *where = KB_FAULT_IN_BUFFER;
    *record_index = -1;
    for (*entry = 0;; (*entry)++) {
        kb_entry e;
        kb_entry_status st = kb_next_entry_resync(buf, len, pos, KB_RESYNC_LYING_SIZES, &e, f);
        if (st == KB_ENTRY_END || st == KB_ENTRY_TRUNCATED)
            return 0;
        int rc = -1;
        if (st == KB_ENTRY_OK) {
            if (*expect == 0)  /* the arrays are first sized for a row of entries like this one */
                *expect = (int64_t)(len / (e.size ? e.size : 1)) + 1;
            rc = kb_decode_entry(s, buf, &e, *entry, (int64_t)e.pos, o, *expect, f, where, record_index);
            *expect = 1;
        }
        if (rc != 0) {
            kb_columns_rewind(&s->c, first_row, first_header);  /* the row gives no records */
            return rc;
        }
        pos = e.pos + e.size;
    }
}

int kb_entry_info_next(const uint8_t *buf, size_t len, size_t *pos, const kb_decode_opts *o, kb_entry_info *out,
                       kb_fault *f)
{
    kb_entry e;
    if (kb_next_entry(buf, len, *pos, &e, f) != KB_ENTRY_OK)
        return 0;
    memset(out, 0, sizeof *out);
    out->position = (int64_t)e.pos;
    out->size = (int64_t)e.size;
    out->magic = (int8_t)e.magic;
    if (e.magic >= 2) {
        kb_v2_header h;
        if (kb_v2_check_entry(buf, e.pos, e.size, 0, &h, f) != 0)
            return 0;
        out->base_offset = h.base_offset;
        out->last_offset = kb_wrap_add64(h.base_offset, h.last_offset_delta);
        out->record_count = h.record_count;
        out->codec = (int8_t)(h.attributes & KB_ATTR_CODEC_MASK);
        out->timestamp_type = (int8_t)kb_timestamp_type(2, h.attributes);
        out->max_timestamp = h.max_timestamp;
        out->producer_id = h.producer_id;
        out->producer_epoch = h.producer_epoch;
        out->base_sequence = h.base_sequence;
        out->partition_leader_epoch = h.partition_leader_epoch;
        out->is_transactional = (h.attributes & KB_ATTR_TRANSACTIONAL) != 0;
        out->is_control = (h.attributes & KB_ATTR_CONTROL) != 0;
        out->crc = h.crc;
        out->is_valid = kb_v2_compute_crc(buf + e.pos, e.size) == h.crc;
    } else {
        kb_legacy_msg m;
        if (kb_legacy_read(buf, e.pos, e.size, &m, f) != 0 ||
            kb_decode_legacy_first_offset(buf, &e, o, &out->base_offset, f) != 0)  /* the wrapper's first offset */
            return 0;
        out->last_offset = m.offset;
        out->record_count = -1;
        out->codec = (int8_t)(m.attributes & KB_ATTR_CODEC_MASK);
        out->timestamp_type = (int8_t)kb_timestamp_type(m.magic, m.attributes);
        out->max_timestamp = m.timestamp;
        out->producer_id = -1;
        out->producer_epoch = -1;
        out->base_sequence = -1;
        out->partition_leader_epoch = -1;
        out->crc = m.crc;
        out->is_valid = kb_legacy_compute_crc(buf, &m) == m.crc;
    }
    *pos = e.pos + e.size;
    return 1;
}
