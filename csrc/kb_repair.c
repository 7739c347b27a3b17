#include "kb_repair.h"

#include <stdlib.h>
#include <string.h>

#include "kb_kafka.h"
#include "kb_legacy.h"
#include "kb_resync.h"
#include "kb_rules.h"
#include "kb_v2.h"
#include "kb_wire.h"

enum { REBUILT = 0, UNREPAIRABLE = 1 };

static int grow(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 16;
    while (n < need) {
        if (n > SIZE_MAX / 2 / size)
            return -1;
        n *= 2;
    }
    void *q = realloc(*p, n * size);
    if (q == NULL)
        return -1;
    *p = q;
    *cap = n;
    return 0;
}

/* n bytes at the end of the rebuilt buffer, to be written */
static uint8_t *reserve(kb_repair_out *out, size_t n)
{
    if (n > SIZE_MAX - out->data_len || grow((void **)&out->data, &out->data_cap, out->data_len + n, 1) != 0)
        return NULL;
    uint8_t *at = out->data + out->data_len;
    out->data_len += n;
    return at;
}

/* An empty v2 batch holding offsets first..last (Kafka's cleaner keeps such a header where a batch
 * lost every record): the producer fields, timestamp type, transaction and control flags and
 * leader epoch of `like` (a batch that lost every record), else none (offsets an entry left out
 * whole held).  No codec, no records; maxTimestamp as both timestamps, as Kafka writes it.  Offsets
 * one batch cannot hold (a lastOffsetDelta is an int32: no lost batch hid more) are left a gap:
 * the neighbours that gave them are not to be believed. */
static int write_empty(kb_repair_out *out, const kb_v2_header *like, int64_t first, int64_t last)
{
    if (first < 0 || last < first || last - first > INT32_MAX)
        return 0;
    {
        int64_t span = last - first;
        kb_v2_header h = {.base_offset = first, .partition_leader_epoch = -1, .last_offset_delta = (int32_t)span,
                          .base_timestamp = -1, .max_timestamp = -1, .producer_id = -1, .producer_epoch = -1,
                          .base_sequence = -1};
        if (like != NULL) {
            h.partition_leader_epoch = like->partition_leader_epoch;
            h.attributes = (int16_t)(like->attributes & (KB_ATTR_LOG_APPEND_TIME | KB_ATTR_TRANSACTIONAL |
                                                         KB_ATTR_CONTROL));
            h.base_timestamp = h.max_timestamp = like->max_timestamp;
            h.producer_id = like->producer_id;
            h.producer_epoch = like->producer_epoch;
            h.base_sequence = like->base_sequence;
        }
        uint8_t *batch = reserve(out, KB_V2_HEADER_SIZE);
        if (batch == NULL)
            return -1;
        kb_v2_write_header(&h, batch, KB_V2_HEADER_SIZE);
    }
    return 0;
}

/* ---- the culprits, put in order: by entry, then (within an entry) by record, each group in the
 * validator's order; a merge sort (stable, no global state: hosts call this from many threads) */

typedef struct {
    const kb_culprit *c;
    int by_record;                 /* 0: by entry; 1: by record index */
} order_key;

static int before(const order_key *k, int32_t a, int32_t b)
{
    int64_t x = k->by_record ? k->c[a].record_index : k->c[a].entry;
    int64_t y = k->by_record ? k->c[b].record_index : k->c[b].entry;
    return x < y || (x == y && a < b);
}

static void merge_sort(int32_t *v, int32_t *tmp, size_t n, const order_key *k)
{
    for (size_t width = 1; width < n; width *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * width) {
            size_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            size_t i = lo, j = mid, t = lo;
            while (i < mid && j < hi)
                tmp[t++] = before(k, v[j], v[i]) ? v[j++] : v[i++];
            while (i < mid)
                tmp[t++] = v[i++];
            while (j < hi)
                tmp[t++] = v[j++];
        }
        memcpy(v, tmp, n * sizeof *v);
    }
}

/* ---- what was left out ---- */

static int copy_bytes(kb_repair_out *out, const uint8_t *base, size_t pos, int32_t len, size_t *at)
{
    *at = out->bytes_len;
    if (len <= 0)
        return 0;
    if (grow((void **)&out->bytes, &out->bytes_cap, out->bytes_len + (size_t)len, 1) != 0)
        return -1;
    memcpy(out->bytes + out->bytes_len, base + pos, (size_t)len);
    out->bytes_len += (size_t)len;
    return 0;
}

/* A dropped record (or, record_index -1, entry) with its culprits culprits[0, n) (indexes into the
 * validator's list, in its order).  *d's fields other than the culprits are the caller's. */
static int add_dropped(kb_repair_out *out, const kb_dropped *d, const int32_t *culprits, size_t n)
{
    if (grow((void **)&out->dropped, &out->dropped_cap, out->n_dropped + 1, sizeof *out->dropped) != 0 ||
        grow((void **)&out->culprit_index, &out->index_cap, out->n_index + n, sizeof *out->culprit_index) != 0)
        return -1;
    kb_dropped *to = &out->dropped[out->n_dropped++];
    *to = *d;
    to->first_culprit = out->n_index;
    to->n_culprits = n;
    memcpy(out->culprit_index + out->n_index, culprits, n * sizeof *culprits);
    out->n_index += n;
    return 0;
}

/* A record's own bytes base[pos, pos + len) into d's raw */
static int copy_raw(kb_repair_out *out, kb_dropped *d, const uint8_t *base, size_t pos, size_t len)
{
    d->raw_len = len;
    return len > INT32_MAX ? -1 : copy_bytes(out, base, pos, (int32_t)len, &d->raw);
}

static int add_record(kb_repair_out *out, kb_dropped *d, const uint8_t *base, size_t key, int32_t key_len,
                      size_t value, int32_t value_len, const int32_t *culprits, size_t n)
{
    d->has_fields = 1;
    d->key_len = key_len < 0 ? -1 : key_len;
    d->value_len = value_len < 0 ? -1 : value_len;
    if (copy_bytes(out, base, key, key_len, &d->key) != 0 || copy_bytes(out, base, value, value_len, &d->value) != 0)
        return -1;
    return add_dropped(out, d, culprits, n);
}

/* The culprits of record `index` in group[*at, n) (sorted by record): where they start, how many
 * (*at moved past them). */
static size_t culprits_of(const kb_culprit *c, const int32_t *group, size_t n, size_t *at, int32_t index,
                          size_t *first)
{
    while (*at < n && c[group[*at]].record_index < index)
        (*at)++;
    *first = *at;
    while (*at < n && c[group[*at]].record_index == index)
        (*at)++;
    return *at - *first;
}

/* ---- rebuilding one entry: REBUILT (its bytes appended, its dropped records listed),
 * UNREPAIRABLE (nothing of it written), or an error */

static int compress(const kb_repair_opts *o, int codec, int magic, const uint8_t *src, size_t n,
                    const uint8_t **payload, size_t *payload_len)
{
    if (o->compress == NULL)
        return -1;
    return o->compress(o->compress_ctx, codec, magic, src, n, payload, payload_len);
}

static int rebuild_v2(const uint8_t *buf, const kb_entry *e, int32_t entry, const kb_culprit *c,
                      const int32_t *group, size_t n_group, const kb_repair_opts *o, kb_repair_out *out)
{
    if (e->size < KB_V2_HEADER_SIZE)
        return UNREPAIRABLE;
    kb_v2_header h;
    kb_v2_read_header(buf + e->pos, &h);
    if (h.record_count <= 0)
        return UNREPAIRABLE;
    int codec = h.attributes & KB_ATTR_CODEC_MASK;
    const uint8_t *rec = buf;
    size_t p = e->pos + KB_V2_HEADER_SIZE, limit = e->pos + e->size;
    if (codec != KB_CODEC_NONE) {
        size_t rec_len;
        kb_fault f;
        if (o->decompress == NULL ||
            o->decompress(o->decompress_ctx, codec, 2, buf + p, limit - p, &rec, &rec_len, &f) != 0)
            return UNREPAIRABLE;
        p = 0;
        limit = rec_len;
    }
    int log_append = (h.attributes & KB_ATTR_LOG_APPEND_TIME) != 0;
    int horizon = (h.attributes & KB_ATTR_DELETE_HORIZON) != 0;
    size_t dropped_before = out->n_dropped, bytes_before = out->bytes_len, index_before = out->n_index;
    size_t kept = 0, at = 0;
    int rc = UNREPAIRABLE;
    /* pass 1: each record's extent; the culprits' records listed, the others' positions kept */
    for (int32_t i = 0; i < h.record_count; i++) {
        kb_record r;
        kb_fault f;
        size_t next, first, bad;
        if (p >= limit)
            goto undo;
        bad = culprits_of(c, group, n_group, &at, i, &first);
        if (kb_v2_read_record(rec, p, limit, &r, &f, &next) != 0) {
            if (!bad || next == 0)
                goto undo;  /* a fault no culprit names, or no way past it */
            kb_dropped d = {.entry = entry, .record_index = i, .magic = 2, .key_len = -1, .value_len = -1};
            if (copy_raw(out, &d, rec, p, next - p) != 0 || add_dropped(out, &d, group + first, bad) != 0)
                goto no_memory;
            p = next;
            continue;
        }
        int64_t ts = kb_wrap_add64(h.base_timestamp, r.timestamp_delta);
        if (bad) {
            kb_dropped d = {.entry = entry, .record_index = i, .magic = 2,
                            .offset = kb_wrap_add64(h.base_offset, r.offset_delta),
                            .timestamp = log_append ? h.max_timestamp : ts};
            if (copy_raw(out, &d, rec, p, r.end - p) != 0 ||
                add_record(out, &d, rec, r.key, r.key_len, r.value, r.value_len, group + first, bad) != 0)
                goto no_memory;
        } else {
            if (grow((void **)&out->keep, &out->keep_cap, kept + 1, sizeof *out->keep) != 0)
                goto no_memory;
            int64_t *ts_grown = realloc(out->keep_ts, out->keep_cap * sizeof *out->keep_ts);
            if (ts_grown == NULL)
                goto no_memory;
            out->keep_ts = ts_grown;
            out->keep[kept] = p;
            out->keep_ts[kept++] = ts;
        }
        p = r.end;
    }
    if (p != limit)
        goto undo;
    if (kept == 0) {  /* every record was a culprit: the batch goes (log data: its offsets stay, empty) */
        if (o->keep_offsets && write_empty(out, &h, h.base_offset, kb_wrap_add64(h.base_offset, h.last_offset_delta)))
            goto no_memory;
        return REBUILT;
    }
    /* pass 2: the kept records re-based and encoded */
    if (grow((void **)&out->recs, &out->recs_cap, kept, sizeof *out->recs) != 0)
        goto no_memory;
    size_t n_headers = 0;
    for (size_t k = 0; k < kept; k++) {
        kb_record r;
        kb_fault f;
        size_t next;
        kb_v2_read_record(rec, out->keep[k], limit, &r, &f, &next);
        n_headers += (size_t)r.header_count;
    }
    if (grow((void **)&out->hdrs, &out->hdrs_cap, n_headers ? n_headers : 1, sizeof *out->hdrs) != 0)
        goto no_memory;
    int64_t new_base = horizon ? h.base_timestamp : out->keep_ts[0], max_ts = INT64_MIN;
    kb_header_in *hnext = out->hdrs;
    for (size_t k = 0; k < kept; k++) {
        kb_record r;
        kb_fault f;
        size_t next;
        kb_v2_read_record(rec, out->keep[k], limit, &r, &f, &next);
        int64_t ts = out->keep_ts[k];
        if (ts > max_ts)
            max_ts = ts;
        kb_record_in *in = &out->recs[k];
        in->key = rec + r.key;
        in->key_len = r.key_len >= 0 ? r.key_len : -1;
        in->value = rec + r.value;
        in->value_len = r.value_len >= 0 ? r.value_len : -1;
        in->attributes = r.attributes;
        in->timestamp_delta = (int64_t)((uint64_t)ts - (uint64_t)new_base);
        in->offset_delta = o->keep_offsets ? r.offset_delta : (int32_t)k;
        in->header_count = r.header_count;
        in->headers = hnext;
        size_t hp = r.headers;
        for (int32_t j = 0; j < r.header_count; j++) {
            size_t kp, vp;
            int32_t kl, vl;
            hp = kb_v2_read_header_kv(rec, hp, r.end, &kp, &kl, &vp, &vl);
            hnext[j].key = rec + kp;
            hnext[j].key_len = kl;
            hnext[j].value = rec + vp;
            hnext[j].value_len = vl >= 0 ? vl : -1;
        }
        hnext += r.header_count;
    }
    h.record_count = (int32_t)kept;
    if (!o->keep_offsets)
        h.last_offset_delta = (int32_t)kept - 1;
    h.base_timestamp = new_base;
    if (!log_append)
        h.max_timestamp = max_ts;
    int64_t size = kb_v2_records_size(out->recs, kept);
    if (size < 0 || grow((void **)&out->work, &out->work_cap, (size_t)size ? (size_t)size : 1, 1) != 0)
        goto no_memory;
    kb_v2_write_records(out->recs, kept, out->work);
    const uint8_t *payload = out->work;
    size_t payload_len = (size_t)size;
    if (codec != KB_CODEC_NONE && compress(o, codec, 2, out->work, (size_t)size, &payload, &payload_len) != 0) {
        rc = KB_REPAIR_COMPRESS_FAILED;
        goto undo;
    }
    uint8_t *batch = reserve(out, KB_V2_HEADER_SIZE + payload_len);
    if (batch == NULL)
        goto no_memory;
    memcpy(batch + KB_V2_HEADER_SIZE, payload, payload_len);
    kb_v2_write_header(&h, batch, KB_V2_HEADER_SIZE + payload_len);
    return REBUILT;
no_memory:
    rc = KB_REPAIR_NO_MEMORY;
undo:
    out->n_dropped = dropped_before;
    out->bytes_len = bytes_before;
    out->n_index = index_before;
    return rc;
}

static int rebuild_legacy(const uint8_t *buf, const kb_entry *e, int32_t entry, const kb_culprit *c,
                          const int32_t *group, size_t n_group, const kb_repair_opts *o, kb_repair_out *out)
{
    kb_legacy_msg w, m;
    kb_fault f;
    if (kb_legacy_read(buf, e->pos, e->size, &w, &f) != 0)
        return UNREPAIRABLE;
    int codec = w.attributes & KB_ATTR_CODEC_MASK;
    const uint8_t *rec = buf;
    size_t start = e->pos, limit = e->pos + e->size;
    int64_t base = 0, first_offset = w.offset;
    if (codec != KB_CODEC_NONE) {
        size_t rec_len;
        int32_t count;
        if (kb_legacy_check_wrapper(&w, &f) != 0 || o->decompress == NULL ||
            o->decompress(o->decompress_ctx, codec, w.magic, buf + w.value, (size_t)w.value_len, &rec, &rec_len, &f) != 0 ||
            kb_legacy_read_inner_set(&w, rec, rec_len, &count, &first_offset, &base, &f) != 0)
            return UNREPAIRABLE;  /* the inner set cannot be read again: the culprits are not the whole story */
        start = 0;
        limit = rec_len;
    }
    int32_t n_records = 0;
    for (size_t p = start; kb_legacy_next(rec, limit, &p, &m, &f) == KB_INNER_MSG;)
        n_records++;
    if (n_group && c[group[n_group - 1]].record_index >= n_records)
        return UNREPAIRABLE;
    int log_append = kb_timestamp_type(w.magic, w.attributes) == 1;
    int attributes = log_append && w.magic > 0 ? KB_ATTR_LOG_APPEND_TIME : 0;
    int64_t stamp = w.timestamp, max_ts = INT64_MIN;
    size_t dropped_before = out->n_dropped, bytes_before = out->bytes_len, index_before = out->n_index;
    size_t at = 0, inner_size = 0;
    int32_t kept = 0;
    /* pass 1: the culprits' messages listed, the size of the kept ones' set measured */
    int32_t i = 0;
    for (size_t p = start; kb_legacy_next(rec, limit, &p, &m, &f) == KB_INNER_MSG; i++) {
        size_t first, bad = culprits_of(c, group, n_group, &at, i, &first);
        int64_t ts = kb_legacy_timestamp(&w, &m);
        if (bad) {
            kb_dropped d = {.entry = entry, .record_index = i, .magic = w.magic, .offset = base + m.offset,
                            .timestamp = ts};
            if (copy_raw(out, &d, rec, m.pos, m.size) != 0 ||
                add_record(out, &d, rec, m.key, m.key_len, m.value, m.value_len, group + first, bad) != 0)
                goto no_memory;
            continue;
        }
        inner_size += kb_legacy_entry_size(w.magic, m.key_len, m.value_len);
        int64_t t = log_append ? stamp : ts;
        if (t > max_ts)
            max_ts = t;
        kept++;
    }
    if (kept == 0)
        return REBUILT;
    /* pass 2: the kept messages written (offsets from the first; v1 inner offsets relative) */
    uint8_t *set = NULL;
    if (codec == KB_CODEC_NONE) {
        if ((set = reserve(out, inner_size)) == NULL)
            goto no_memory;
    } else if (grow((void **)&out->work, &out->work_cap, inner_size, 1) != 0) {
        goto no_memory;
    } else {
        set = out->work;
    }
    /* offsets: a producer's re-based from the set's first; log data's each its own (Kafka's cleaner:
     * v1 inner offsets relative to the first kept, the wrapper's the last kept one's) */
    int64_t offset = codec == KB_CODEC_NONE || w.magic == 0 ? first_offset : 0, first_kept = INT64_MIN,
            last_kept = first_offset + kept - 1;
    uint8_t *to = set;
    at = 0;
    i = 0;
    for (size_t p = start; kb_legacy_next(rec, limit, &p, &m, &f) == KB_INNER_MSG; i++) {
        size_t first;
        if (culprits_of(c, group, n_group, &at, i, &first))
            continue;
        int64_t t = log_append ? stamp : kb_legacy_timestamp(&w, &m);
        int64_t written = offset++;
        if (o->keep_offsets) {
            int64_t own = codec == KB_CODEC_NONE ? m.offset : kb_wrap_add64(base, m.offset);
            if (first_kept == INT64_MIN)
                first_kept = own;
            last_kept = own;
            written = codec != KB_CODEC_NONE && w.magic > 0 ? kb_wrap_sub64(own, first_kept) : own;
        }
        kb_legacy_write(to, written, w.magic, attributes, w.magic > 0 ? t : -1, rec + m.key, m.key_len,
                        rec + m.value, m.value_len);
        to += kb_legacy_entry_size(w.magic, m.key_len, m.value_len);
    }
    if (codec == KB_CODEC_NONE)
        return REBUILT;
    const uint8_t *payload;
    size_t payload_len;
    if (compress(o, codec, w.magic, set, inner_size, &payload, &payload_len) != 0 || payload_len > INT32_MAX) {
        out->n_dropped = dropped_before;
        out->bytes_len = bytes_before;
        out->n_index = index_before;
        return KB_REPAIR_COMPRESS_FAILED;
    }
    uint8_t *wrapper = reserve(out, kb_legacy_entry_size(w.magic, -1, (int32_t)payload_len));
    if (wrapper == NULL)
        goto no_memory;
    kb_legacy_write(wrapper, last_kept, w.magic, codec | attributes,
                    w.magic > 0 ? (log_append ? stamp : max_ts) : -1, NULL, -1, payload, (int32_t)payload_len);
    return REBUILT;
no_memory:
    out->n_dropped = dropped_before;
    out->bytes_len = bytes_before;
    out->n_index = index_before;
    return KB_REPAIR_NO_MEMORY;
}

/* A compressed v0/v1 wrapper's first offset, its first record's (the header gives its last only):
 * INT64_MIN where its records do not read. */
static int64_t wrapper_first(const uint8_t *buf, const kb_entry *e, const kb_repair_opts *o)
{
    kb_legacy_msg w;
    kb_fault f;
    const uint8_t *rec;
    size_t rec_len;
    int32_t count;
    int64_t first, base;
    if (o->decompress == NULL || kb_legacy_read(buf, e->pos, e->size, &w, &f) != 0 ||
        kb_legacy_check_wrapper(&w, &f) != 0 ||
        o->decompress(o->decompress_ctx, w.attributes & KB_ATTR_CODEC_MASK, w.magic, buf + w.value,
                      (size_t)w.value_len, &rec, &rec_len, &f) != 0 ||
        kb_legacy_read_inner_set(&w, rec, rec_len, &count, &first, &base, &f) != 0)
        return INT64_MIN;
    return first;
}

/* A framed entry's offsets: a v2 batch's base and last; a v0/v1 message's one offset (a compressed
 * wrapper's is its last inner one; its first, its first record's, is read only where `need_first`
 * asks: INT64_MIN otherwise, or where its records do not read). */
static void entry_offsets(const uint8_t *buf, const kb_entry *e, const kb_repair_opts *o, int need_first,
                          int64_t *first, int64_t *last)
{
    int64_t offset = (int64_t)kb_load_be64(buf + e->pos);
    *first = *last = offset;
    if (e->magic == 2 && e->size >= KB_V2_HEADER_SIZE) {
        int32_t delta = (int32_t)kb_load_be32(buf + e->pos + KB_V2_AT_LAST_OFFSET_DELTA);
        if (delta > 0 && offset <= INT64_MAX - delta)
            *last = offset + delta;
    } else if (e->magic != 2 && (buf[e->pos + KB_LEGACY_AT_ATTRIBUTES] & KB_ATTR_CODEC_MASK) != KB_CODEC_NONE) {
        *first = need_first ? wrapper_first(buf, e, o) : INT64_MIN;
    }
}

int kb_repair(const uint8_t *buf, size_t len, const kb_culprit *c, size_t n, const kb_repair_opts *o,
              kb_repair_out *out)
{
    out->data_len = out->n_dropped = out->bytes_len = out->n_index = 0;
    out->unrepairable = 0;
    /* the culprits that drop something (not KB_BETWEEN), by entry: order[0, m) then a by-record
     * copy of one entry's in order[n, ...), and merge room after that */
    if (grow((void **)&out->order, &out->order_cap, 3 * n + 1, sizeof *out->order) != 0)
        return KB_REPAIR_NO_MEMORY;
    int32_t *order = out->order, *by_record = out->order + n, *tmp = out->order + 2 * n;
    size_t m = 0;
    for (size_t k = 0; k < n; k++)
        if (c[k].rule < KB_RULE_COUNT && !(kb_rule_table[c[k].rule].flags & KB_BETWEEN))
            order[m++] = (int32_t)k;
    order_key by_entry = {c, 0}, by_index = {c, 1};
    merge_sort(order, tmp, m, &by_entry);
    size_t next = 0, pos = 0;
    /* log data: the last offset the output holds so far (known), and whether an entry left out
     * whole since then left offsets to keep */
    int64_t covered = 0;
    int covered_known = 0, left_out = 0;
    for (int32_t entry = 0;; entry++) {
        kb_entry e;
        kb_fault f;
        kb_entry_status st = kb_next_entry_resync(buf, len, pos, o->resync_flags, &e, &f);
        if (st == KB_ENTRY_END || st == KB_ENTRY_TRUNCATED)
            break;
        int64_t first_offset = INT64_MIN, last = INT64_MIN;  /* the entry's offsets, where its framing holds */
        if (o->keep_offsets && st == KB_ENTRY_OK)
            entry_offsets(buf, &e, o, left_out && covered_known, &first_offset, &last);
        if (left_out && covered_known && first_offset != INT64_MIN && covered < INT64_MAX &&
            first_offset > covered + 1) {
            if (write_empty(out, NULL, covered + 1, first_offset - 1) != 0)
                return KB_REPAIR_NO_MEMORY;
            covered = first_offset - 1;
        }
        size_t written_before = out->data_len;
        while (next < m && c[order[next]].entry < entry)
            next++;  /* culprits of entries the walk does not number (none, from the same walk) */
        size_t first = next;
        int whole = 0;
        while (next < m && c[order[next]].entry == entry)
            whole |= c[order[next++]].record_index < 0;
        size_t n_group = next - first;
        int rc = REBUILT;
        if (n_group == 0) {
            uint8_t *at = reserve(out, e.size);
            if (at == NULL)
                return KB_REPAIR_NO_MEMORY;
            memcpy(at, buf + e.pos, e.size);
        } else if (!e.size || whole) {
            rc = UNREPAIRABLE;
        } else {
            memcpy(by_record, order + first, n_group * sizeof *order);
            merge_sort(by_record, tmp, n_group, &by_index);
            rc = e.magic == 2 ? rebuild_v2(buf, &e, entry, c, by_record, n_group, o, out)
                              : rebuild_legacy(buf, &e, entry, c, by_record, n_group, o, out);
        }
        if (rc < 0)
            return rc;
        if (rc == UNREPAIRABLE) {  /* left out whole (or kept), listed with every culprit of the entry */
            kb_dropped d = {.entry = entry, .record_index = -1, .magic = e.magic, .key_len = -1, .value_len = -1,
                            .kept = o->keep_unrepairable != 0};
            if (copy_raw(out, &d, buf, e.pos, e.size) != 0 || add_dropped(out, &d, order + first, n_group) != 0)
                return KB_REPAIR_NO_MEMORY;
            if (d.kept) {
                uint8_t *at = reserve(out, e.size);
                if (at == NULL)
                    return KB_REPAIR_NO_MEMORY;
                memcpy(at, buf + e.pos, e.size);
            }
            out->unrepairable++;
        }
        if (out->data_len > written_before && last != INT64_MIN) {
            covered = last;
            covered_known = 1;
            left_out = 0;
        } else if (out->data_len == written_before) {
            left_out = 1;
        }
        if (!e.size)  /* the resynchronising walk always moves; never loop in place */
            break;
        pos = e.pos + e.size;
    }
    return 0;
}

void kb_repair_out_free(kb_repair_out *out)
{
    free(out->data);
    free(out->dropped);
    free(out->bytes);
    free(out->culprit_index);
    free(out->order);
    free(out->keep);
    free(out->keep_ts);
    free(out->recs);
    free(out->hdrs);
    free(out->work);
    memset(out, 0, sizeof *out);
}
