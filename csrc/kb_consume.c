#include "kb_consume.h"
#include "kb_ranges.h"

#include <string.h>

#include "kb_control.h"
#include "kb_kafka.h"
#include "kb_resync.h"
#include "kb_wire.h"

/* read_committed's state, as Kafka's consumer keeps it (CompletedFetch): aborted transactions not
 * begun yet (by first offset), and the producers whose transactional batches are being dropped
 * until their ABORT marker. */
typedef struct {
    const kb_consume_opts *o;
    int32_t next_pending;
    int64_t *aborted;
    int32_t *count;
} isolation_t;

typedef enum { KEEP, DROP, UNSETTLED } decision_t;

static int find_producer(const isolation_t *iso, int64_t producer)
{
    for (int32_t i = 0; i < *iso->count; i++)
        if (iso->aborted[i] == producer)
            return i;
    return -1;
}

static void forget_producer(isolation_t *iso, int64_t producer)
{
    int i = find_producer(iso, producer);
    if (i >= 0)
        iso->aborted[i] = iso->aborted[--*iso->count];
}

/* The aborted transactions that began at or before `offset` join the set; -1 when it is full. */
static int begin_aborted_up_to(isolation_t *iso, int64_t offset)
{
    const kb_consume_opts *o = iso->o;
    while (iso->next_pending < o->aborted_count && o->aborted[2 * iso->next_pending] <= offset) {
        int64_t producer = o->aborted[2 * iso->next_pending + 1];
        iso->next_pending++;
        if (find_producer(iso, producer) >= 0)
            continue;
        if (*iso->count == KB_CONSUME_MAX_ABORTED)
            return -1;
        iso->aborted[(*iso->count)++] = producer;
    }
    return 0;
}

/* Whether an uncompressed control batch's first record is an ABORT marker: 1, 0; -1 when its key
 * is not a control key Kafka reads (the careful path reports it). */
static int is_abort_marker(const uint8_t *buf, size_t start, size_t limit, const kb_v2_header *h)
{
    if (h->record_count <= 0)
        return 0;
    kb_record r;
    kb_fault f;
    size_t next;
    int type;
    if (kb_v2_read_record(buf, start, limit, &r, &f, &next) != 0 ||
        kb_control_key(buf + r.key, r.key_len, r.key, &type, &f) != 0)
        return -1;
    return type == KB_CONTROL_ABORT;
}

static decision_t decide(isolation_t *iso, const uint8_t *buf, size_t pos, size_t size, const kb_v2_header *h,
                         int64_t last)
{
    int control = (h->attributes & KB_ATTR_CONTROL) != 0;
    if (iso->o->committed && h->producer_id >= 0) {
        if (begin_aborted_up_to(iso, last) != 0)
            return UNSETTLED;
        if (control) {
            if ((h->attributes & KB_ATTR_CODEC_MASK) != KB_CODEC_NONE)
                return UNSETTLED;
            int abort = is_abort_marker(buf, pos + KB_V2_HEADER_SIZE, pos + size, h);
            if (abort < 0)
                return UNSETTLED;
            if (abort)
                forget_producer(iso, h->producer_id);
        } else if ((h->attributes & KB_ATTR_TRANSACTIONAL) && find_producer(iso, h->producer_id) >= 0) {
            return DROP;
        }
    }
    return control ? DROP : KEEP;
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

kb_consume_status kb_consume(const uint8_t *buf, size_t len, const kb_consume_opts *o, kb_column_store *s,
                             kb_consume_result *r)
{
    isolation_t iso = {o, 0, r->aborted, &r->aborted_count};
    int64_t position = o->fetch_offset;
    int64_t expect = 0;
    int ended = 0; /* past the last stable offset: the rest is only checked */
    size_t pos = 0;
    r->entries = 0;
    r->tail = SIZE_MAX;
    r->careful_at = 0;
    r->span_count = 0;
    r->aborted_count = 0;
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
        if (ended || (o->committed && o->last_stable_offset >= 0 && h.base_offset >= o->last_stable_offset)) {
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
        decision_t d = decide(&iso, buf, e.pos, e.size, &h, last);
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
