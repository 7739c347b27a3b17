/* read_committed as Kafka's consumer applies it (CompletedFetch), batch by batch in offset order:
 * the aborted transactions a read is handed ((first offset, producer id), from .txnindex files or
 * a fetch response) put their producer in the aborted set once a batch reaching that first offset
 * is seen; an aborted producer's transactional batches are dropped until its ABORT marker.  A
 * reader that cannot read an entry cannot tell whether it was such a marker: the producers then
 * aborted become undecided, their transactional batches held (neither handed out nor dropped)
 * until the list shows a new aborted transaction of theirs or one of their markers is read.
 * Control batches are never handed out, at either level; nothing at or after the last stable
 * offset is, under read_committed.
 *
 * The one home of the rule: kb_consume, kb_log_windows (a log read as a consumer would receive
 * it) and pykbatch.kafka.isolation (every Python reader) decide through it.  Which batch is an
 * ABORT marker is the caller's to read (kb_isolation_abort_marker for an uncompressed one). */
#ifndef KB_ISOLATION_H
#define KB_ISOLATION_H

#include <stddef.h>
#include <stdint.h>

#include "kb_v2.h"

typedef struct {
    int64_t *ids; /* ascending */
    int32_t count, cap;
} kb_producer_set;

typedef struct {
    int committed;
    int bounded;                /* read_committed with a last stable offset known: */
    int64_t last_stable_offset; /* nothing at or after it is handed out */
    int64_t *pending;           /* (first offset, producer id) pairs by first offset (owned) */
    int32_t pending_count, next_pending;
    kb_producer_set aborted, undecided;
} kb_isolation;

typedef enum { KB_ISO_KEEP = 0, KB_ISO_DROP = 1, KB_ISO_HOLD = 2, KB_ISO_NO_MEMORY = -1 } kb_iso_decision;

/* read_uncommitted (committed 0: the rest ignored) or read_committed with the last stable offset
 * (NULL: unknown) and the aborted transactions `pairs` ((first offset, producer id) x n, any
 * order; copied).  0, or -1: no memory. */
int kb_isolation_init(kb_isolation *iso, int committed, const int64_t *last_stable_offset, const int64_t *pairs,
                      int32_t n);
void kb_isolation_free(kb_isolation *iso);

/* Whether a batch starting at base_offset, and everything after it, lies past what is handed out. */
int kb_isolation_past_end(const kb_isolation *iso, int64_t base_offset);

/* Whether deciding this batch reads its ABORT-marker flag (a control batch of a producer under
 * read_committed): a caller reads the marker only then. */
int kb_isolation_reads_marker(const kb_isolation *iso, int64_t producer_id, int control);

/* KB_ISO_KEEP, _DROP or _HOLD for the batch's records (every batch, in order), or KB_ISO_NO_MEMORY.
 * abort_marker: whether the control batch's first record is an ABORT marker (read when
 * kb_isolation_reads_marker says so; ignored otherwise). */
int kb_isolation_decide(kb_isolation *iso, int64_t producer_id, int64_t last_offset, int control, int transactional,
                        int abort_marker);

/* An entry that cannot be read ends at last_offset: the producers then aborted become undecided.
 * 0, or -1: no memory. */
int kb_isolation_unreadable(kb_isolation *iso, int64_t last_offset);

/* Producers who are undecided from an earlier read (read_committed only).  0, or -1: no memory. */
int kb_isolation_add_undecided(kb_isolation *iso, const int64_t *producers, int32_t n);

/* A walk elsewhere decided every batch before next_offset, leaving `aborted` (n producers) being
 * dropped: the aborted transactions that began before next_offset are done with.  0, or -1. */
int kb_isolation_settle(kb_isolation *iso, const int64_t *aborted, int32_t n, int64_t next_offset);

/* An uncompressed control batch's first record: 1 an ABORT marker, 0 not (a COMMIT, or no
 * record), -1 a key Kafka does not read as a control key.  records: the bytes after the header. */
int kb_isolation_abort_marker(const uint8_t *buf, size_t start, size_t limit, const kb_v2_header *h);

#endif
