#include "kb_consume.h"
#include "kb_ranges.h"

#include <string.h>

#include "kb_isolation.h"
#include "kb_kafka.h"
#include "kb_resync.h"
#include "kb_wire.h"

typedef enum { KEEP, DROP, UNSETTLED } decision_t;

/* kb_isolation's answer for a batch the walk settles: a control batch whose marker it cannot read
 * (compressed, or a key Kafka would not read), a producer held, or more aborted producers than a
 * result holds are the careful path's. */
static decision_t decide(kb_isolation *iso, const uint8_t *buf, size_t pos, size_t size, const kb_v2_header *h,
                         int64_t last)
{
    int control = (h->attributes & KB_ATTR_CONTROL) != 0;
    int marker = 0;
    if (kb_isolation_reads_marker(iso, h->producer_id, control)) {
        if ((h->attributes & KB_ATTR_CODEC_MASK) != KB_CODEC_NONE)
            return UNSETTLED;
        marker = kb_isolation_abort_marker(buf, pos + KB_V2_HEADER_SIZE, pos + size, h);
        if (marker < 0)
            return UNSETTLED;
    }
    int d = kb_isolation_decide(iso, h->producer_id, last, control, (h->attributes & KB_ATTR_TRANSACTIONAL) != 0,
                                marker);
    if (d == KB_ISO_NO_MEMORY || d == KB_ISO_HOLD || iso->aborted.count > KB_CONSUME_MAX_ABORTED)
        return UNSETTLED;
    return d == KB_ISO_KEEP ? KEEP : DROP;
}

/* [first, last] became `kind`: joined to the span before it when they meet.  -1: no room. */
static int add_span(kb_consume_result *r, int64_t first, int64_t last, int kind)
{
    if (r->span_count && r->spans[r->span_count - 1].kind == kind && r->spans[r->span_count - 1].last + 1 == first) {
        r->spans[r->span_count - 1].last = last;
        return 0;
    }
    if (r->span_count == r->span_cap)
        return -1;
    r->spans[r->span_count++] = (kb_span){first, last, kind};
    return 0;
}

/* Reads one sound v2 batch: its records (decompressed when it is compressed), measured -- the
 * validator's record walk -- and, when `keep`, filled from `from` on.  0, 1 (not settled here), or
 * a column store failure. */
static int read_batch(const uint8_t *buf, size_t pos, size_t size, const kb_v2_header *h, int keep, int64_t from,
                      int32_t entry, const kb_consume_opts *o, kb_column_store *s, int64_t *expect)
{
    kb_column_batch b;
    kb_fault f;
    int32_t index;
    memset(&b, 0, sizeof b);
    b.magic = 2;
    b.h = *h;
    b.count = h->record_count;
    b.entry = entry;
    b.position = (int64_t)pos;
    kb_ranges from_on = {.bounds = KB_RANGE_FIRST_OFFSET, .first_offset = from};
    b.ranges = &from_on;
    b.records = buf;
    b.start = pos + KB_V2_HEADER_SIZE;
    b.limit = pos + size;
    int codec = h->attributes & KB_ATTR_CODEC_MASK;
    if (codec != KB_CODEC_NONE && h->record_count > 0) {
        size_t n;
        if (!o->decompress || o->decompress(o->ctx, codec, 2, buf + b.start, b.limit - b.start, &b.records, &n, &f) != 0)
            return 1;
        b.start = 0;
        b.limit = n;
    }
    if (!keep) {
        kb_column_sizes z;
        memset(&z, 0, sizeof z);
        return b.count && kb_columns_measure(b.records, b.start, b.limit, b.count, kb_v2_consumer_reader(codec), &z,
                                             &f, &index, NULL) != 0;
    }
    int rc = kb_columns_add(s, &b, *expect, &f, &index);
    *expect = 1;
    if (rc == -1)
        return 1;
    return rc;
}

static kb_consume_status walk(const uint8_t *buf, size_t len, const kb_consume_opts *o, kb_isolation *iso,
                              kb_column_store *s, kb_consume_result *r);

kb_consume_status kb_consume(const uint8_t *buf, size_t len, const kb_consume_opts *o, kb_column_store *s,
                             kb_consume_result *r)
{
    kb_isolation iso;
    if (kb_isolation_init(&iso, o->committed, o->last_stable_offset >= 0 ? &o->last_stable_offset : NULL, o->aborted,
                          o->aborted_count) != 0)
        return KB_CONSUME_NO_MEMORY;
    kb_consume_status st = walk(buf, len, o, &iso, s, r);
    r->aborted_count = 0;
    for (int32_t i = 0; st == KB_CONSUME_DONE && i < iso.aborted.count; i++)
        r->aborted[r->aborted_count++] = iso.aborted.ids[i];
    kb_isolation_free(&iso);
    return st;
}

static kb_consume_status walk(const uint8_t *buf, size_t len, const kb_consume_opts *o, kb_isolation *iso,
                              kb_column_store *s, kb_consume_result *r)
{
    int64_t position = o->fetch_offset;
    int64_t expect = 0;
    int ended = 0; /* past the last stable offset: the rest is only checked */
    size_t pos = 0;
    r->entries = 0;
    r->tail = SIZE_MAX;
    r->careful_at = 0;
    r->span_count = 0;
    for (;; r->entries++) {
        kb_entry e;
        kb_fault f;
        kb_v2_header h;
        kb_entry_status st = kb_next_entry_resync(buf, len, pos, KB_RESYNC_LYING_SIZES | KB_RESYNC_ZERO_TAIL, &e, &f);
        if (st == KB_ENTRY_END)
            break;
        if (st == KB_ENTRY_TRUNCATED) {
            r->tail = pos;
            break;
        }
        r->careful_at = e.pos;
        if (st != KB_ENTRY_OK || e.magic < 2 || kb_v2_check_entry(buf, e.pos, e.size, 1, &h, &f) != 0 ||
            kb_v2_check_walkable(&h, e.pos, &f) != 0 || (int64_t)h.record_count > (int64_t)h.last_offset_delta + 1)
            return KB_CONSUME_CAREFUL;
        pos = e.pos + e.size;
        int64_t last = kb_wrap_add64(h.base_offset, h.last_offset_delta);
        if (last < position)
            continue; /* wholly before the fetch offset */
        if (ended || kb_isolation_past_end(iso, h.base_offset)) {
            ended = 1; /* the careful path would still name a damaged batch here: its records are checked */
            if (read_batch(buf, e.pos, e.size, &h, 0, 0, r->entries, o, s, &expect) != 0)
                return KB_CONSUME_CAREFUL;
            continue;
        }
        if (h.base_offset > position) { /* offsets no batch holds */
            if (!o->compacted || add_span(r, position, h.base_offset - 1, KB_SPAN_COMPACTED) != 0)
                return KB_CONSUME_CAREFUL;
            position = h.base_offset;
        }
        if (expect == 0) /* the columns are first sized for a response of batches like this one */
            expect = len / e.size > 1 ? (int64_t)(len / e.size) : 1;
        decision_t d = decide(iso, buf, e.pos, e.size, &h, last);
        if (d == UNSETTLED)
            return KB_CONSUME_CAREFUL;
        int rc = read_batch(buf, e.pos, e.size, &h, d == KEEP, position, r->entries, o, s, &expect);
        if (rc == 1)
            return KB_CONSUME_CAREFUL;
        if (rc == KB_COLUMNS_NO_MEMORY)
            return KB_CONSUME_NO_MEMORY;
        if (rc == KB_COLUMNS_TOO_LARGE)
            return KB_CONSUME_TOO_LARGE;
        if (add_span(r, position, last, KB_SPAN_READ) != 0)
            return KB_CONSUME_CAREFUL;
        position = last + 1;
    }
    r->next_offset = position;
    return KB_CONSUME_DONE;
}
