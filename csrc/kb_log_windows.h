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

/* What a walk that keeps account (kb_log_windows_account) knows of the bytes it passed over -- a
 * span whose framing was lost, an entry whose header does not read -- for a reader that gives what
 * cannot be read a row of its own (kafka-segment's validate; pykbatch.log.split_truth is the
 * Python reader's account, the same steps). */
typedef struct {
    size_t pos, size;
    int32_t rule;         /* the walk's fault there (kb_rule) and its values */
    int64_t args[3];
    int64_t top_before;   /* the highest offset of the entries read before it (KB_LOG_NO_OFFSET: none) */
    int64_t next_first;   /* the first offset of the entry read after it (KB_LOG_NO_OFFSET: it has none
                             readable; KB_LOG_AT_END: the walk reached the segment's end after it) */
    int settled;          /* next_first is known: an entry after it was read, or the walk ended */
} kb_log_skip;

/* One entry of the last window, as an accounting walk read it. */
typedef struct {
    size_t pos, size;
    int64_t first, last;              /* its offsets (KB_LOG_NO_OFFSET: its header does not give them) */
    int64_t top_before, last_before;  /* the highest and the last offset of the entries read before it */
    int32_t rule;                     /* its records do not decode: the fault (kb_rule), else -1 */
    int64_t args[3];
} kb_log_entry;

#define KB_LOG_NO_OFFSET INT64_MIN
#define KB_LOG_AT_END (INT64_MIN + 1)

typedef struct {
    kb_log_skip *skips;   /* passed over and not yet handed out (kb_log_take_skips) */
    int32_t n_skips, cap_skips;
    kb_log_entry *entries; /* the last window's, in order */
    int32_t cap_entries;
    int64_t top, last;    /* the highest and the last offset of the entries read so far */
    int64_t first;        /* the first offset of the split's first entry (KB_LOG_NO_OFFSET: none yet) */
    int64_t past_end;     /* the first offset of the entry at which the split ends (KB_LOG_NO_OFFSET: none) */
    int reached_end;      /* the walk ran to the end of the segment */
    size_t valid_bytes;   /* where it ended there: an incomplete tail starts here */
    int64_t before_pos;   /* the entry ending where the split starts (KB_LOG_NO_OFFSET: none) */
} kb_log_account;

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
    kb_log_account *account; /* NULL, or kept up by the walk (kb_log_windows_account) */
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

/* Keeps account of the walk from here on (after init, before the first window): what a walk of the
 * segment from its first byte knows at the split's start is found first (the highest offset, the
 * entry that ends there).  0, or -1: no memory. */
int kb_log_windows_account(kb_log_windows *w);

/* Where an account stands (kb_log_account_mark), to go back to (kb_log_account_rewind): a window
 * read again from its start (the file shrank while it was read) leaves the account as one read. */
typedef struct {
    kb_log_account scalars;
    int32_t n_skips, settled;
} kb_log_account_mark;

void kb_log_account_mark_at(const kb_log_windows *w, kb_log_account_mark *m);
void kb_log_account_rewind(kb_log_windows *w, const kb_log_account_mark *m);

/* Hands out the skips whose neighbours are known (all of them once the walk has ended), in order,
 * into out[0..n) (they are dropped from the account): how many. */
int32_t kb_log_take_skips(kb_log_windows *w, kb_log_skip *out, int32_t room);

#endif
