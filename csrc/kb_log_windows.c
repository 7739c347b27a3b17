#include "kb_log_windows.h"

#include <string.h>

#include "kb_legacy.h"
#include "kb_ranges.h"
#include "kb_resync.h"

void kb_log_windows_init(kb_log_windows *w, const uint8_t *buf, size_t len, size_t start, size_t end,
                         size_t window_bytes, const kb_decode_opts *decode)
{
    kb_column_store keep = w->store;  /* a reused walker keeps its arrays */
    memset(w, 0, sizeof *w);
    w->store = keep;
    w->buf = buf;
    w->len = len;
    w->pos = start < len ? start : len;
    w->end = end;
    w->window_bytes = window_bytes ? window_bytes : 1;
    w->decode = *decode;
}

/* Whether the walk hands the entry out: its header reads (else it is skipped as lost framing) */
static int readable(const uint8_t *buf, const kb_entry *e)
{
    kb_fault f;
    if (e->magic < 2) {
        kb_legacy_msg m;
        return kb_legacy_read(buf, e->pos, e->size, &m, &f) == 0;
    }
    kb_v2_header h;
    return kb_v2_check_entry(buf, e->pos, e->size, 0, &h, &f) == 0;
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
            break;
        }
        if (st != KB_ENTRY_OK || !readable(w->buf, &e)) {
            if (e.size == 0)
                return -1;  /* nothing to skip: the walk cannot go on */
            w->pos = e.pos + e.size;
            if (w->entries > 0)
                return 1;   /* a window's entries are contiguous: skipped bytes close it */
            continue;
        }
        if (e.pos >= w->end) {
            w->done = 1;
            break;
        }
        if (w->decode.ranges && !kb_ranges_keeps_entry(w->decode.ranges, w->buf, &e, !w->headers_only, &w->decode)) {
            w->pos = e.pos + e.size;  /* left out: it closes the window before it, as skipped bytes do */
            if (w->entries > 0)
                return 1;
            continue;
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
        if (rc != 0)
            w->undecoded++;
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
    memset(w, 0, sizeof *w);
}
