/* KIP-467's answer for one validation: which culprits a partition leader's ProduceResponse comes
 * from (its error code, error_records and error_message), decided in one place for every host. */
#ifndef KB_VERDICT_H
#define KB_VERDICT_H

#include <stddef.h>
#include <stdint.h>

#include "kb_validate.h"

/* The order in which a partition leader runs its checks: a rule's stage (kb_rules.def) places it. */
#define KB_STAGES(X) X(REQUEST, "request") X(HANDLER, "handler") X(APPEND, "append") \
    X(VALIDATOR, "validator") X(BATCH, "batch") X(REBUILD, "rebuild") X(AFTER, "after")

typedef enum {
#define KB_STAGE_ENUM(name, text) KB_STAGE_##name,
    KB_STAGES(KB_STAGE_ENUM)
#undef KB_STAGE_ENUM
    KB_STAGE_COUNT
} kb_stage;

extern const char *const kb_stage_names[KB_STAGE_COUNT];

typedef struct {
    int16_t code;          /* the answer's error code: 0 when the input is clean */
    int32_t verdict;       /* the culprit the answer comes from (its first batch-level one, else its
                              first record error), or -1 when clean */
    int batch_level;       /* 1: the batch failed as a whole (error_records empty) */
    int request_message;   /* 1: error_message is the verdict culprit's message (a request-level fault:
                              the first entry's framing, which reaches the client as the exception's text) */
    size_t records;        /* error_records: distinct records of the failing batch */
} kb_verdict;

/* The verdict on culprits c[0, n) (buffer order, as kb_validate writes them) of an input read with
 * `origin` and, when > 0, checked as a ProduceRequest of `produce_version`.  When not batch-level,
 * record_culprits[0, v->records) gets, for each record of error_records in order, the index in c
 * of its first culprit (room for n). */
void kb_verdict_of(const kb_culprit *c, size_t n, kb_origin origin, int produce_version, kb_verdict *v,
                   int32_t *record_culprits);

/* KIP-467's error_message of a batch refused record by record (code INVALID_TIMESTAMP or
 * INVALID_RECORD): `records` records in all, of which the first min(3, records) have batch
 * indexes `indexes` and messages `messages`.  Written NUL-terminated into out[0, cap), cut at
 * cap - 1; returns the text's full length. */
long kb_render_record_errors(int16_t code, size_t records, const int32_t *indexes, const char *const *messages,
                             char *out, size_t cap);

#endif
