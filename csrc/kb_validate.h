/* Validation: walk every entry, batch and record of a buffer and collect
 * every rule violation (a culprit) instead of stopping at the first. */
#ifndef KB_VALIDATE_H
#define KB_VALIDATE_H

#include <stddef.h>
#include <stdint.h>

#include "kb_rules.h"

typedef enum {
    KB_ORIGIN_CLIENT = 0, /* a producer's batch, as a partition leader receives it */
    KB_ORIGIN_LOG = 1,    /* batches already in a log: compaction may have removed records */
} kb_origin;

struct kb_fault_s;

/* Decompresses the records payload `src[0, n)` of a batch with codec `codec` (1..4) inside an
 * entry of magic `magic`.  Returns 0 with *out / *out_len set (valid until the next call), or
 * -1 with *f set (f->pos relative to src). */
typedef int (*kb_decompress_fn)(void *ctx, int codec, int magic, const uint8_t *src, size_t n,
                                const uint8_t **out, size_t *out_len, struct kb_fault_s *f);

typedef struct {
    kb_origin origin;
    int verify_crc;
    int strict;  /* also pykbatch's rules that Kafka does not enforce (offset deltas, timestamps) */
    kb_decompress_fn decompress;  /* NULL: compressed batches are not walked (counted unwalked) */
    void *decompress_ctx;
    /* the topic settings LogValidator reads */
    int compacted;               /* cleanup.policy contains compact */
    int topic_log_append_time;   /* message.timestamp.type = LogAppendTime */
    int64_t now_ms;
    int64_t before_max_ms;       /* message.timestamp.before.max.ms (Kafka: Long.MAX_VALUE) */
    int64_t after_max_ms;        /* message.timestamp.after.max.ms */
    /* broker settings, and the buffer taken as one append (ValidationConfig documents each) */
    int64_t max_batch_bytes;     /* max.message.bytes, client origin; < 0: unchecked */
    int64_t max_append_bytes;    /* segment.bytes, client origin; < 0: unchecked */
    int target_magic;            /* the topic's record version: 2 since Kafka 3.0 (set it) */
    int target_codec;            /* compression.type as a codec id; -1: producer (the batch's own) */
    int single_append;           /* the buffer is one append: Kafka's one-batch and same-magic rules */
    int produce_version;         /* > 0: also ProduceRequest.validateRecords for this version */
    /* called between entries, about every `progress_every` bytes, with the position the walk has
     * passed (NULL: never): a reader of a mapped file hands the pages behind it back, and shows
     * how far it got */
    void (*progress)(void *ctx, size_t pos);
    void *progress_ctx;
    size_t progress_every;
} kb_validate_opts;

#define KB_NO_OFFSET INT64_MIN

typedef struct {
    int64_t pos;              /* byte position in the buffer (for a fault inside decompressed
                                 records: where the compressed payload starts) */
    int64_t inner_pos;        /* position in the decompressed records, or -1 */
    int64_t entry_pos;        /* where the entry (batch) starts */
    int64_t args[8];          /* rule-specific values for the message */
    int64_t relative_offset;  /* the record's offset delta (v0/v1: from its set's first offset), KB_NO_OFFSET
                                 if unknown */
    int64_t first_offset;     /* the offsets it concerns, KB_NO_OFFSET where not known: a record's own; a
                                 batch's as its header gives them; the offsets a span whose framing
                                 was lost hides (between its sound neighbours); a gap's missing ones */
    int64_t last_offset;
    int32_t entry;            /* index of the entry (batch) in the buffer */
    int32_t record_index;     /* index of the record in its batch, -1 for the batch */
    int16_t code;             /* Kafka error code */
    uint16_t rule;            /* kb_rule */
} kb_culprit;

typedef struct {
    int64_t entries;      /* entries walked: complete ones, and spans whose framing was lost */
    int64_t records;      /* records read without a structural fault */
    int64_t culprits;     /* culprits found, including any past the cap */
    int64_t valid_bytes;  /* bytes walked from the start (where an incomplete tail starts) */
    int64_t unwalked;     /* compressed batches whose records were not read */
    int64_t tail_pos;     /* start of an incomplete trailing entry, or -1 */
    int32_t tail_entry;   /* its entry index */
    int32_t stopped;      /* 1: the framing was lost (at stopped_at); the walk resumed at the next
                             sound entry (kb_next_entry_resync) */
    int64_t stopped_at;   /* where the framing was first lost, or -1 */
    int64_t lost_bytes;   /* bytes skipped to find sound entries again */
    int64_t rule_counts[KB_RULE_COUNT]; /* culprits per rule, past the cap too */
} kb_summary;

/* Validates buf[0, len); writes at most `cap` culprits to `out` in buffer
 * order (the append-level ones of check_append last) and the totals to *s.  Never reads outside the buffer, never
 * allocates. */
void kb_validate(const uint8_t *buf, size_t len, const kb_validate_opts *o, kb_culprit *out, size_t cap,
                 kb_summary *s);

/* kb_validate for a summary `s` that holds the result of an earlier kb_validate / kb_validate_again
 * (or is all zeros): the per-rule counts are cleared only when that walk had culprits, which
 * saves clearing KB_RULE_COUNT counters for each of many small sound inputs (a column's rows). */
void kb_validate_again(const uint8_t *buf, size_t len, const kb_validate_opts *o, kb_culprit *out, size_t cap,
                       kb_summary *s);

#endif
