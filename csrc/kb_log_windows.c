#include "kb_log_windows.h"

#include <stdlib.h>
#include <string.h>

#include "kb_legacy.h"
#include "kb_ranges.h"
#include "kb_resync.h"
#include "kb_wire.h"

static void account_free(kb_log_windows *w)
{
    if (w->account) {
        free(w->account->skips);
        free(w->account->entries);
        free(w->account);
        w->account = NULL;
    }
}

void kb_log_windows_init(kb_log_windows *w, const uint8_t *buf, size_t len, size_t start, size_t end,
                         size_t window_bytes, const kb_decode_opts *decode)
{
    kb_column_store keep = w->store;  /* a reused walker keeps its arrays */
    account_free(w);  /* an account is the walk's */
    memset(w, 0, sizeof *w);
    w->store = keep;
    w->buf = buf;
    w->len = len;
    w->pos = start < len ? start : len;
    w->end = end;
    w->window_bytes = window_bytes ? window_bytes : 1;
    w->decode = *decode;
}

/* Whether the walk hands the entry out: its header reads (else it is skipped as lost framing, *f
 * saying why) */
static int readable(const uint8_t *buf, const kb_entry *e, kb_fault *f)
{
    if (e->magic < 2) {
        kb_legacy_msg m;
        return kb_legacy_read(buf, e->pos, e->size, &m, f) == 0;
    }
    kb_v2_header h;
    return kb_v2_check_entry(buf, e->pos, e->size, 0, &h, f) == 0;
}

/* The first and last offsets of the readable entry `e` (a compressed v0/v1 wrapper's first is its
 * inner set's, as Python's LegacyBatch reads it), and its v2 header.  0, or -1: they do not read. */
static int entry_offsets(const kb_log_windows *w, const kb_entry *e, int64_t *first, int64_t *last,
                         kb_v2_header *h)
{
    kb_fault f;
    if (e->magic >= 2) {
        if (kb_v2_check_entry(w->buf, e->pos, e->size, 0, h, &f) != 0)
            return -1;
        *first = h->base_offset;
        *last = kb_wrap_add64(h->base_offset, h->last_offset_delta);
        return 0;
    }
    kb_legacy_msg m;
    if (kb_legacy_read(w->buf, e->pos, e->size, &m, &f) != 0)
        return -1;
    *first = *last = m.offset;
    if ((m.attributes & KB_ATTR_CODEC_MASK) != KB_CODEC_NONE)
        return kb_decode_legacy_first_offset(w->buf, e, &w->decode, first, &f);
    return 0;
}

/* Whether a v2 control batch's first record is an ABORT marker: 1, 0, -1 when it does not read
 * (its payload decompressed through the walk's codecs when it is compressed). */
static int abort_marker(const kb_log_windows *w, const kb_entry *e, const kb_v2_header *h)
{
    size_t start = e->pos + KB_V2_HEADER_SIZE, limit = e->pos + e->size;
    int codec = h->attributes & KB_ATTR_CODEC_MASK;
    if (codec == KB_CODEC_NONE || h->record_count <= 0)
        return kb_isolation_abort_marker(w->buf, start, limit, h);
    const uint8_t *out;
    size_t n;
    kb_fault f;
    if (!w->decode.decompress ||
        w->decode.decompress(w->decode.ctx, codec, 2, w->buf + start, limit - start, &out, &n, &f) != 0)
        return -1;
    return kb_isolation_abort_marker(out, 0, n, h);
}

/* ---- the account (kb_log_windows_account) ---- */

/* The offsets of a readable entry for the account: KB_LOG_NO_OFFSET where they do not read (a
 * compressed v0/v1 wrapper whose records do not decompress has its own offset, its last, still). */
static void account_offsets(const kb_log_windows *w, const kb_entry *e, int64_t *first, int64_t *last)
{
    kb_v2_header h;
    kb_legacy_msg m;
    kb_fault f;
    if (entry_offsets(w, e, first, last, &h) == 0)
        return;
    *first = *last = KB_LOG_NO_OFFSET;
    if (e->magic < 2 && kb_legacy_read(w->buf, e->pos, e->size, &m, &f) == 0)
        *last = m.offset;
}

static int add_skip(kb_log_account *a, const kb_entry *e, const kb_fault *f)
{
    if (a->n_skips == a->cap_skips) {
        int32_t cap = a->cap_skips ? a->cap_skips * 2 : 16;
        kb_log_skip *grown = realloc(a->skips, (size_t)cap * sizeof *grown);
        if (grown == NULL)
            return -1;
        a->skips = grown;
        a->cap_skips = cap;
    }
    kb_log_skip *k = &a->skips[a->n_skips++];
    k->pos = e->pos;
    k->size = e->size;
    k->rule = (int32_t)f->rule;
    for (int i = 0; i < 3; i++)
        k->args[i] = f->args[i];
    k->top_before = a->top;
    k->next_first = KB_LOG_NO_OFFSET;
    k->settled = 0;
    a->last = KB_LOG_NO_OFFSET;  /* lost bytes before the next entry: no entry to compare it with */
    return 0;
}

static void settle_skips(kb_log_account *a, int64_t next_first)
{
    for (int32_t i = 0; i < a->n_skips; i++)
        if (!a->skips[i].settled) {
            a->skips[i].next_first = next_first;
            a->skips[i].settled = 1;
        }
}

/* A readable entry the walk read (in the window or left out of it): its neighbours' skips settled,
 * the highest and last offsets moved on; `into` (the window's slot, or NULL) gets what was known
 * before it. */
static void account_entry(kb_log_windows *w, const kb_entry *e, kb_log_entry *into)
{
    kb_log_account *a = w->account;
    int64_t first, last;
    account_offsets(w, e, &first, &last);
    settle_skips(a, first);
    if (a->first == KB_LOG_NO_OFFSET)
        a->first = first;
    if (into != NULL) {
        into->pos = e->pos;
        into->size = e->size;
        into->first = first;
        into->last = last;
        into->top_before = a->top;
        into->last_before = a->last;
        into->rule = -1;
    }
    a->last = last;
    if (last != KB_LOG_NO_OFFSET && (a->top == KB_LOG_NO_OFFSET || last > a->top))
        a->top = last;
}

static kb_log_entry *window_slot(kb_log_windows *w)
{
    kb_log_account *a = w->account;
    if (w->entries == a->cap_entries) {
        int32_t cap = a->cap_entries ? a->cap_entries * 2 : 64;
        kb_log_entry *grown = realloc(a->entries, (size_t)cap * sizeof *grown);
        if (grown == NULL)
            return NULL;
        a->entries = grown;
        a->cap_entries = cap;
    }
    return &a->entries[w->entries];
}

int kb_log_windows_account(kb_log_windows *w)
{
    kb_log_account *a = w->account ? w->account : calloc(1, sizeof *a);
    if (a == NULL)
        return -1;
    w->account = a;  /* a walk read again (its file shrank) starts its account afresh */
    a->n_skips = 0;
    a->reached_end = 0;
    a->valid_bytes = 0;
    a->top = a->last = a->past_end = a->before_pos = a->first = KB_LOG_NO_OFFSET;
    /* the walk of the bytes before the split, as one walk of the segment would have made it */
    size_t start = w->pos < w->len ? w->pos : w->len, pos = 0;
    while (pos < start) {
        kb_entry e;
        kb_fault f;
        kb_entry_status st = kb_next_entry_resync(w->buf, start, pos, KB_RESYNC_LYING_SIZES | KB_RESYNC_ZERO_TAIL,
                                                  &e, &f);
        if (st == KB_ENTRY_END || st == KB_ENTRY_TRUNCATED)
            break;
        if (st != KB_ENTRY_OK || !readable(w->buf, &e, &f)) {
            if (e.size == 0)
                break;
            a->before_pos = a->last = KB_LOG_NO_OFFSET;
            pos = e.pos + e.size;
            continue;
        }
        int64_t last;
        kb_legacy_msg m;
        kb_v2_header h;
        if (e.magic >= 2 && kb_v2_check_entry(w->buf, e.pos, e.size, 0, &h, &f) == 0)
            last = kb_wrap_add64(h.base_offset, h.last_offset_delta);
        else if (e.magic < 2 && kb_legacy_read(w->buf, e.pos, e.size, &m, &f) == 0)
            last = m.offset;
        else
            last = KB_LOG_NO_OFFSET;
        a->before_pos = (int64_t)e.pos;
        a->last = last;
        if (last != KB_LOG_NO_OFFSET && (a->top == KB_LOG_NO_OFFSET || last > a->top))
            a->top = last;
        pos = e.pos + e.size;
    }
    if (pos != start)
        a->before_pos = a->last = KB_LOG_NO_OFFSET;
    return 0;
}

void kb_log_account_mark_at(const kb_log_windows *w, kb_log_account_mark *m)
{
    memset(m, 0, sizeof *m);
    if (w->account == NULL)
        return;
    m->scalars = *w->account;
    m->n_skips = w->account->n_skips;
    m->settled = 0;  /* skips settle in order: the settled ones are a prefix */
    while (m->settled < m->n_skips && w->account->skips[m->settled].settled)
        m->settled++;
}

void kb_log_account_rewind(kb_log_windows *w, const kb_log_account_mark *m)
{
    kb_log_account *a = w->account;
    if (a == NULL)
        return;
    kb_log_skip *skips = a->skips;
    int32_t cap_skips = a->cap_skips, cap_entries = a->cap_entries;
    kb_log_entry *entries = a->entries;
    *a = m->scalars;
    a->skips = skips;
    a->cap_skips = cap_skips;
    a->entries = entries;
    a->cap_entries = cap_entries;
    a->n_skips = m->n_skips;
    for (int32_t i = m->settled; i < a->n_skips; i++) {
        a->skips[i].settled = 0;
        a->skips[i].next_first = KB_LOG_NO_OFFSET;
    }
}

int32_t kb_log_take_skips(kb_log_windows *w, kb_log_skip *out, int32_t room)
{
    kb_log_account *a = w->account;
    if (a == NULL)
        return 0;
    int32_t n = 0;
    while (n < a->n_skips && n < room && a->skips[n].settled) {
        out[n] = a->skips[n];
        n++;
    }
    if (n > 0)
        memmove(a->skips, a->skips + n, (size_t)(a->n_skips - n) * sizeof *a->skips);
    a->n_skips -= n;
    return n;
}

static void account_ended(kb_log_windows *w, int reached_end, int64_t past_end)
{
    kb_log_account *a = w->account;
    if (a == NULL)
        return;
    a->reached_end = reached_end;
    a->valid_bytes = w->pos;
    a->past_end = past_end;
    settle_skips(a, reached_end ? KB_LOG_AT_END : past_end);
}

enum { RECEIVED = 0, PASSED = 1, ENDED = 2, NO_MEMORY = 3 };

/* The consumer's view of a readable entry, in order: RECEIVED, PASSED (left out), ENDED (the walk
 * is past the split), NO_MEMORY. */
static int consumer_view(kb_log_windows *w, const kb_entry *e)
{
    kb_log_consumer *c = w->consumer;
    kb_v2_header h;
    int64_t first, last;
    if (entry_offsets(w, e, &first, &last, &h) != 0)
        return RECEIVED;  /* its reader names the fault, and gives it no rows */
    if (last < c->first)
        return PASSED;
    if (first > c->last)
        return ENDED;
    if (kb_isolation_past_end(&c->iso, first))
        return PASSED;
    if (e->magic >= 2) {
        int control = (h.attributes & KB_ATTR_CONTROL) != 0, marker = 0;
        if (kb_isolation_reads_marker(&c->iso, h.producer_id, control) && (marker = abort_marker(w, e, &h)) < 0)
            return kb_isolation_unreadable(&c->iso, last) != 0 ? NO_MEMORY : PASSED;
        int d = kb_isolation_decide(&c->iso, h.producer_id, last, control,
                                    (h.attributes & KB_ATTR_TRANSACTIONAL) != 0, marker);
        if (d == KB_ISO_NO_MEMORY)
            return NO_MEMORY;
        if (d != KB_ISO_KEEP)
            return PASSED;
    }
    return w->headers_only && first < c->first ? PASSED : RECEIVED;
}

int kb_log_next_window(kb_log_windows *w, kb_fault *f)
{
    kb_columns_rewind(&w->store.c, 0, 0);
    w->entries = w->undecoded = 0;
    w->lo = w->hi = w->pos;
    while (!w->done) {
        kb_entry e;
        kb_entry_status st = kb_next_entry_resync(w->buf, w->len, w->pos,
                                                  KB_RESYNC_LYING_SIZES | KB_RESYNC_ZERO_TAIL, &e, f);
        if (st == KB_ENTRY_END || st == KB_ENTRY_TRUNCATED) {
            w->done = 1;
            account_ended(w, 1, KB_LOG_NO_OFFSET);
            break;
        }
        if (st != KB_ENTRY_OK || !readable(w->buf, &e, f)) {
            if (e.size == 0)
                return -1;  /* nothing to skip: the walk cannot go on */
            if (w->account && add_skip(w->account, &e, f) != 0)
                return KB_COLUMNS_NO_MEMORY;
            w->pos = e.pos + e.size;
            if (w->entries > 0)
                return 1;   /* a window's entries are contiguous: skipped bytes close it */
            continue;
        }
        if (e.pos >= w->end) {
            w->done = 1;
            if (w->account) {
                int64_t first, last;
                account_offsets(w, &e, &first, &last);
                account_ended(w, 0, first);
            }
            break;
        }
        int view = w->consumer ? consumer_view(w, &e) : RECEIVED;
        if (view == NO_MEMORY)
            return KB_COLUMNS_NO_MEMORY;
        if (view == ENDED) {
            w->done = 1;
            break;
        }
        if (view == PASSED ||
            (w->decode.ranges && !kb_ranges_keeps_entry(w->decode.ranges, w->buf, &e, !w->headers_only, &w->decode))) {
            if (w->account)
                account_entry(w, &e, NULL);
            w->pos = e.pos + e.size;  /* left out: it closes the window before it, as skipped bytes do */
            if (w->entries > 0)
                return 1;
            continue;
        }
        kb_log_entry *slot = NULL;
        if (w->account) {
            if ((slot = window_slot(w)) == NULL)
                return KB_COLUMNS_NO_MEMORY;
            account_entry(w, &e, slot);
        }
        if (w->entries == 0)
            w->lo = e.pos;
        kb_fault bad;
        kb_fault_place where;
        int32_t record;
        if (w->expect == 0)  /* sized first for a window of entries like this one */
            w->expect = (int64_t)(w->window_bytes / (e.size ? e.size : 1)) + 1;
        int rc = w->headers_only ? 0 : kb_decode_entry(&w->store, w->buf, &e, w->entries, (int64_t)e.pos, &w->decode,
                                                       w->expect, &bad, &where, &record);
        w->expect = 1;
        if (rc == KB_COLUMNS_NO_MEMORY || rc == KB_COLUMNS_TOO_LARGE)
            return rc;
        if (rc != 0) {
            w->undecoded++;
            if (slot) {
                slot->rule = (int32_t)bad.rule;
                for (int i = 0; i < 3; i++)
                    slot->args[i] = bad.args[i];
            }
        }
        w->entries++;
        w->pos = w->hi = e.pos + e.size;
        if (w->hi - w->lo >= w->window_bytes)
            return 1;
    }
    return w->entries > 0;
}

void kb_log_windows_free(kb_log_windows *w)
{
    kb_column_store_free(&w->store);
    account_free(w);
    memset(w, 0, sizeof *w);
}
