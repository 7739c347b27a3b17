/* A consumer's walk over one partition's fetched records (or a window of a segment), once: each
 * entry's framing and checksum checked, its payload decompressed once, Kafka's isolation applied
 * (the aborted transactions and the last stable offset of read_committed), the records a consumer
 * is handed filled into Arrow columns (Spark's Kafka source's layout when the store asks) and the
 * offsets accounted for in spans.
 *
 * The walk settles the common case -- sound batches, markers, aborted transactions, offsets
 * compaction removed -- and stops at the first thing it does not (an entry that is damaged, a
 * v0/v1 message, an offset gap on a topic that is not compacted, a compressed marker): then it
 * answers KB_CONSUME_CAREFUL and the host reads the response on its careful path, which names
 * every culprit.  No fault is judged here that the validator would judge otherwise: the checks
 * are the validator's own (kb_v2_check_*, the record walk of kb_columns_measure). */
#ifndef KB_CONSUME_H
#define KB_CONSUME_H

#include <stddef.h>
#include <stdint.h>

#include "kb_columns.h"
#include "kb_v2.h"
#include "kb_validate.h" /* kb_decompress_fn: the host's codecs, as the validator takes them */

#define KB_CONSUME_MAX_ABORTED 256 /* producers in the aborted set at once (more: the careful path) */

typedef struct {
    int64_t fetch_offset;
    int committed;              /* read_committed */
    int64_t last_stable_offset; /* read_committed: nothing at or after it is handed out; < 0 unknown */
    int compacted;              /* offsets no batch holds are compaction's; else the careful path names them */
    const int64_t *aborted;     /* read_committed: (first offset, producer id) pairs, by first offset */
    int32_t aborted_count;
    kb_decompress_fn decompress; /* a payload it cannot decompress: KB_CONSUME_CAREFUL */
    void *ctx;
} kb_consume_opts;

typedef enum { KB_SPAN_READ = 0, KB_SPAN_COMPACTED = 1 } kb_span_kind;

typedef struct {
    int64_t first, last;
    int kind;
} kb_span;

typedef enum {
    KB_CONSUME_DONE = 0,
    KB_CONSUME_CAREFUL,       /* something the walk does not settle: nothing it filled counts */
    KB_CONSUME_NO_MEMORY,
    KB_CONSUME_TOO_LARGE,     /* a column past what one Arrow binary column holds */
} kb_consume_status;

typedef struct {
    int64_t next_offset;      /* where the next fetch starts */
    int32_t entries;          /* complete entries walked */
    size_t tail;              /* where an incomplete last entry starts, or SIZE_MAX */
    size_t careful_at;        /* KB_CONSUME_CAREFUL: the entry it stopped at */
    int64_t aborted[KB_CONSUME_MAX_ABORTED]; /* producers whose transactions are aborted at the end */
    int32_t aborted_count;
    kb_span *spans;           /* caller's array */
    size_t span_count, span_cap;
} kb_consume_result;

/* Walks buf[0, len) from the fetch offset on, filling `s` (its `c.layout` chooses the columns). */
kb_consume_status kb_consume(const uint8_t *buf, size_t len, const kb_consume_opts *o, kb_column_store *s,
                             kb_consume_result *r);

#endif
