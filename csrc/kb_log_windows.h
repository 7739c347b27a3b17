/* A split of a log segment read as windows of whole entries: the walk every log reader shares
 * (kb_next_entry_resync: lost framing skipped to the next sound entry, a zero tail ended), entries
 * gathered into contiguous runs of about `window_bytes`, and each run's records decoded into one
 * column store (kb_decode_entry), an entry that does not decode giving no rows and its neighbours
 * all of theirs.  kafka-segment's reader on the JVM; the Python reader makes the same windows
 * (pykbatch.log.entry_windows over Segment.batches). */
#ifndef KB_LOG_WINDOWS_H
#define KB_LOG_WINDOWS_H

#include <stddef.h>
#include <stdint.h>

#include "kb_columns.h"
#include "kb_decode.h"
#include "kb_isolation.h"

/* A log read as a consumer fetching offsets [first, last] receives it (the tiered reader, as
 * pykbatch.tiered's piece windows): entries ending before `first` are passed over, the walk ends
 * at one starting after `last`; between, every entry is decided by `iso` in order -- those past
 * the last stable offset, control batches, aborted and held ones left out -- before the ranges
 * (a timestamp bound must not hide an ABORT marker from the isolation).  A control batch whose
 * marker does not read is an unreadable entry to the isolation.  One row an entry (headers only):
 * an entry starting before `first` is the previous split's. */
typedef struct {
    kb_isolation iso;
    int64_t first, last;
} kb_log_consumer;

typedef struct {
    const uint8_t *buf;   /* the whole segment */
    size_t len;
    size_t pos;           /* where the walk goes on */
    size_t end;           /* entries starting here or later are the next split's */
    size_t window_bytes;
    kb_decode_opts decode;
    int done;
    int headers_only;      /* windows made, nothing decoded (a reader of entry headers: batches mode) */
    kb_log_consumer *consumer; /* NULL: every entry; else what a consumer receives (set after init) */
    kb_column_store store; /* the last window's records (refilled by each window) */
    int64_t expect;
    /* the last window */
    size_t lo, hi;         /* its bytes: buf[lo, hi) */
    int32_t entries;       /* its entries (batch_index counts from 0 in each window) */
    int32_t undecoded;     /* of which gave no rows (they could not be decoded) */
} kb_log_windows;

/* A walk of buf[0, len)'s entries starting in [start, end) (len: none past the end).  With
 * decode->ranges, an entry that cannot hold records in range (kb_ranges_keeps_entry; in range of
 * one row an entry with headers_only) is left out and closes the window before it, and a window's
 * records out of range are not filled. */
void kb_log_windows_init(kb_log_windows *w, const uint8_t *buf, size_t len, size_t start, size_t end,
                         size_t window_bytes, const kb_decode_opts *decode);

/* Decodes the next window into w->store: 1; 0 when the split has no more; KB_COLUMNS_NO_MEMORY /
 * KB_COLUMNS_TOO_LARGE; -1 with *f where the framing is lost and nothing can be skipped. */
int kb_log_next_window(kb_log_windows *w, kb_fault *f);

void kb_log_windows_free(kb_log_windows *w);

#endif
