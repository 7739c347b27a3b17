#include "kb_verdict.h"

#include <stdio.h>
#include <string.h>

#include "kb_rules.h"

const char *const kb_stage_names[KB_STAGE_COUNT] = {
#define KB_STAGE_NAME(name, text) [KB_STAGE_##name] = text,
    KB_STAGES(KB_STAGE_NAME)
#undef KB_STAGE_NAME
};

static int is_framing(const kb_culprit *c)
{
    return (unsigned)c->rule < KB_RULE_COUNT && strcmp(kb_rule_table[c->rule].stage, "framing") == 0;
}

/* A culprit's place in the leader's order: (stage, entry).  A framing fault is found while
 * iterating: by ProduceRequest.validateRecords, which reads the first two entries, or else by
 * analyzeAndValidateRecords with its size and CRC checks. */
static int64_t verdict_key(const kb_culprit *c, int produce_version)
{
    int stage = KB_STAGE_AFTER;
    if (is_framing(c)) {
        stage = produce_version > 0 && c->entry <= 1 ? KB_STAGE_REQUEST : KB_STAGE_APPEND;
    } else if ((unsigned)c->rule < KB_RULE_COUNT) {
        for (int s = 0; s < KB_STAGE_COUNT; s++)
            if (strcmp(kb_rule_table[c->rule].stage, kb_stage_names[s]) == 0) {
                stage = s;
                break;
            }
    }
    return ((int64_t)stage << 32) | (uint32_t)c->entry;
}

static int record_error(const kb_culprit *c)
{
    return c->record_index >= 0 && (unsigned)c->rule < KB_RULE_COUNT &&
           (kb_rule_table[c->rule].flags & KB_PER_RECORD);
}

void kb_verdict_of(const kb_culprit *c, size_t n, kb_origin origin, int produce_version, kb_verdict *v,
                   int32_t *record_culprits)
{
    memset(v, 0, sizeof *v);
    v->verdict = -1;
    if (n == 0)
        return;
    int64_t first = INT64_MAX;
    for (size_t i = 0; i < n; i++) {
        int64_t key = verdict_key(&c[i], produce_version);
        if (key < first)
            first = key;
    }
    int32_t first_failing = -1;
    int timestamp = 0;
    for (size_t i = 0; i < n; i++) {
        if (verdict_key(&c[i], produce_version) != first)
            continue;
        if (first_failing < 0)
            first_failing = (int32_t)i;
        if (!record_error(&c[i])) {
            v->verdict = (int32_t)i;
            v->batch_level = 1;
            v->code = c[i].code;
            v->request_message = origin == KB_ORIGIN_CLIENT && c[i].entry == 0 && is_framing(&c[i]);
            return;
        }
        if (c[i].code == KB_INVALID_TIMESTAMP)
            timestamp = 1;
    }
    v->verdict = first_failing;
    v->code = timestamp ? KB_INVALID_TIMESTAMP : KB_INVALID_RECORD;
    /* error_records: each record once, with its first culprit's message, in buffer order.  A batch's
     * culprits come record by record, so a record index above every earlier one is new; only one
     * that is not is looked up among the records listed so far. */
    int32_t highest = -1;
    for (size_t i = (size_t)first_failing; i < n; i++) {
        if (verdict_key(&c[i], produce_version) != first)
            continue;
        int32_t r = c[i].record_index;
        int seen = 0;
        for (size_t j = 0; r <= highest && j < v->records && !seen; j++)
            seen = c[record_culprits[j]].record_index == r;
        if (r > highest)
            highest = r;
        if (seen)
            continue;
        record_culprits[v->records++] = (int32_t)i;
    }
}

/* snprintf's arguments for writing at `at` of out[0, cap): nothing (NULL, 0) once the text is cut */
#define KB_TAIL(out, cap, at) ((size_t)(at) < (cap) ? (out) + (at) : NULL), \
    ((size_t)(at) < (cap) ? (cap) - (size_t)(at) : 0)

long kb_render_record_errors(int16_t code, size_t records, const int32_t *indexes, const char *const *messages,
                             char *out, size_t cap)
{
    if (code == KB_INVALID_TIMESTAMP)
        return snprintf(out, cap, "One or more records have been rejected due to invalid timestamp");
    long n = snprintf(out, cap, "One or more records have been rejected due to %zu record errors in total, and "
                                "only showing the first three errors at most: [", records);
    for (size_t i = 0; i < records && i < 3; i++)
        n += snprintf(KB_TAIL(out, cap, n), "%sRecordError(batchIndex=%d, message='%s')", i ? ", " : "", indexes[i],
                      messages[i]);
    n += snprintf(KB_TAIL(out, cap, n), "]");
    return n;
}
