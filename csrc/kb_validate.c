#include "kb_validate.h"

#include <stddef.h>
#include <string.h>

#include "kb_control.h"
#include "kb_crc32.h"
#include "kb_legacy.h"
#include "kb_resync.h"
#include "kb_v2.h"
#include "kb_wire.h"

typedef struct {
    const kb_validate_opts *opts;
    kb_culprit *out;
    size_t cap;
    kb_summary *s;
    int32_t entry;
    size_t entry_pos;
    int64_t payload_pos; /* >= 0 while walking decompressed records: their payload's position */
    /* the append as a whole */
    int first_magic;     /* -1 until the first complete entry */
    int first_codec;
    int any_compressed;
    size_t second_pos;   /* where entry 1 starts, 0 if none */
    int64_t entries_before_loss; /* the entries Kafka reads of an append whose framing is lost */
    int headers_reported;/* this batch already has its down-conversion headers culprit */
    int any_offset;      /* an entry's offsets were seen ... */
    int64_t last_offset; /* ... and the last of them */
    int64_t top_offset;  /* the highest offset seen: offsets above it and below an entry are missing */
    int64_t entry_first; /* the offsets of the entry walked, as its header gives them (KB_NO_OFFSET: */
    int64_t entry_last;  /* not known) */
    int64_t record_base; /* a v2 batch's base offset: a record culprit's offset is base + delta */
    int64_t next_delta;  /* the delta after the last record read: where a record whose own offset */
                         /* cannot be read starts at the earliest (its batch's last ends it) */
    int64_t unsound_from;/* culprits of entries whose framing was lost, from this index on (-1: none), */
                         /* name the offsets between their sound neighbours once the next is read */
    int64_t inner_first; /* a compressed magic 0/1 wrapper's first and last record offsets, once its */
    int64_t inner_last;  /* set is read (KB_NO_OFFSET: none read) */
    /* the v2 batch just walked whose CRC failed: its last offset delta lies under that CRC, so the
     * next entry's first offset may show it wrong (check_suspect_last) */
    int64_t suspect;     /* its CRC culprit's index (-1: none) */
    int64_t suspect_first, suspect_top, suspect_last;
    int suspect_any;
} ctx_t;

static void report(ctx_t *c, kb_rule rule, size_t pos, int32_t record, int64_t rel, int64_t a0, int64_t a1,
                   int64_t a2)
{
    if ((uint64_t)c->s->culprits < c->cap) {
        kb_culprit *k = &c->out[c->s->culprits];
        k->pos = c->payload_pos >= 0 ? c->payload_pos : (int64_t)pos;
        k->inner_pos = c->payload_pos >= 0 ? (int64_t)pos : -1;
        k->entry_pos = (int64_t)c->entry_pos;
        k->args[0] = a0;
        k->args[1] = a1;
        k->args[2] = a2;
        for (int i = 3; i < 8; i++)
            k->args[i] = 0;
        k->relative_offset = rel;
        if (record >= 0 && c->record_base == KB_NO_OFFSET) {
            k->first_offset = k->last_offset = KB_NO_OFFSET;  /* v0/v1: name_legacy_offsets */
        } else if (record >= 0 && rel != KB_NO_OFFSET) {
            int64_t at = kb_wrap_add64(c->record_base, rel);
            int inside = at >= c->entry_first && at <= c->entry_last;
            k->first_offset = inside ? at : c->entry_first;  /* a delta out of its batch names no offset */
            k->last_offset = inside ? at : c->entry_last;    /* of its own: the batch's stand for it */
        } else if (record >= 0) {  /* unreadable: somewhere from the record after the last read on */
            k->first_offset = kb_wrap_add64(c->record_base, c->next_delta);
            k->last_offset = c->entry_last;
        } else {
            k->first_offset = c->entry_first;
            k->last_offset = c->entry_last;
        }
        k->entry = c->entry;
        k->record_index = record;
        k->code = kb_rule_code(rule);
        k->rule = (uint16_t)rule;
    }
    c->s->culprits++;
    c->s->rule_counts[rule]++;
}

/* report() with a fourth value for the message. */
static void report4(ctx_t *c, kb_rule rule, size_t pos, int32_t record, int64_t rel, int64_t a0, int64_t a1,
                    int64_t a2, int64_t a3)
{
    int64_t before = c->s->culprits;
    report(c, rule, pos, record, rel, a0, a1, a2);
    if ((uint64_t)before < c->cap)
        c->out[before].args[3] = a3;
}

/* The timestamp rule of LogValidator.validateRecord (KIP-937 window for a CreateTime topic, in
 * Java's wrapping long arithmetic).  Returns 1 when it reported. */
static int check_timestamp_window(ctx_t *c, size_t pos, int32_t index, int64_t delta, int64_t offset, int64_t ts)
{
    const kb_validate_opts *o = c->opts;
    int64_t diff = kb_wrap_sub64(o->now_ms, ts);
    if (diff > o->before_max_ms || kb_wrap_sub64(0, diff) > o->after_max_ms) {
        report4(c, KB_RULE_TIMESTAMP_OUT_OF_RANGE, pos, index, delta, ts, offset,
                kb_wrap_sub64(o->now_ms, o->before_max_ms), kb_wrap_add64(o->now_ms, o->after_max_ms));
        return 1;
    }
    return 0;
}

/* LogValidator.validateRecord after the magic/CRC steps: the key of a compacted topic, then the
 * timestamp (the window for a CreateTime topic, else a producer-set LogAppendTime).  One culprit
 * at most per record, as Kafka gives one RecordError.  `partial`: Kafka read the record with its
 * partial reader (compressed, in place), whose toString says PartialDefaultRecord and prints a
 * null key or value as -1 bytes (DefaultRecord prints 0). */
static void check_record_rules(ctx_t *c, size_t pos, int32_t index, int64_t delta, int64_t offset, int64_t ts,
                               int32_t key_len, int32_t value_len, int batch_log_append, int partial)
{
    const kb_validate_opts *o = c->opts;
    if (o->compacted && key_len < 0) {
        report(c, KB_RULE_COMPACTED_NO_KEY, pos, index, delta, 0, 0, 0);
        return;
    }
    if (o->origin != KB_ORIGIN_CLIENT)
        return; /* the timestamp rules judge a producer's append against the leader's clock */
    if (!o->topic_log_append_time && ts != -1) {
        check_timestamp_window(c, pos, index, delta, offset, ts);
    } else if (batch_log_append) {
        int64_t before = c->s->culprits;
        report4(c, KB_RULE_PRODUCER_LOG_APPEND_TIME, pos, index, delta, offset, ts,
                partial || key_len >= 0 ? key_len : 0, partial || value_len >= 0 ? value_len : 0);
        if ((uint64_t)before < c->cap)
            c->out[before].args[4] = partial;
    }
}

/* A rule whose Kafka message names a v0/v1 message in full (LegacyRecordBatch.toString): its
 * offset and magic in args 0-1, `a2`, then the fields the rendering needs in args 3-7. */
static void report_legacy_record(ctx_t *c, kb_rule rule, size_t pos, int32_t index, int64_t offset,
                                 const kb_legacy_msg *m, int64_t a2)
{
    int64_t before = c->s->culprits;
    report(c, rule, pos, index, offset, offset, m->magic, a2);
    if ((uint64_t)before < c->cap) {
        int64_t *a = c->out[before].args;
        a[3] = (uint8_t)m->attributes;
        a[4] = m->crc;
        a[5] = m->key_len;
        a[6] = m->value_len;
        a[7] = m->timestamp;
    }
}

/* The same rules for a v0/v1 message (an uncompressed entry or an inner message): `m` with the
 * offset and timestamp Kafka's record reports (inner v1 messages: the wrapper's timestamp under
 * LogAppendTime).  Its LogAppendTime message names the record in LegacyRecordBatch's words. */
static void check_legacy_record_rules(ctx_t *c, const kb_legacy_msg *m, int32_t index, int64_t offset, int64_t ts,
                                      int batch_log_append)
{
    const kb_validate_opts *o = c->opts;
    if (o->compacted && m->key_len < 0) {
        report(c, KB_RULE_COMPACTED_NO_KEY, m->pos, index, offset, 0, 0, 0);
        return;
    }
    if (o->origin != KB_ORIGIN_CLIENT)
        return;
    if (!o->topic_log_append_time && ts != -1) {
        check_timestamp_window(c, m->pos, index, offset, offset, ts);
    } else if (batch_log_append) {
        report_legacy_record(c, KB_RULE_LEGACY_LOG_APPEND_TIME, m->pos, index, offset, m, 0);
    }
}

static void report_fault(ctx_t *c, const kb_fault *f, int32_t record, int64_t rel)
{
    report(c, f->rule, f->pos, record, rel, f->args[0], f->args[1], f->args[2]);
}

/* B7/B8: producer features a topic of record version < 2 cannot store.  Uncompressed batches
 * take Kafka's down-conversion path, whose record builder refuses a transactional batch before
 * any check runs (an IllegalArgumentException: UNKNOWN_SERVER_ERROR). */
static void check_target_magic(ctx_t *c, size_t pos, const kb_v2_header *h, int codec)
{
    const kb_validate_opts *o = c->opts;
    if (o->target_magic >= 2)
        return;
    if (h->attributes & KB_ATTR_TRANSACTIONAL) {
        int converted = codec == KB_CODEC_NONE && o->target_codec <= 0;
        report(c, converted ? KB_RULE_CONVERSION_TRANSACTIONAL : KB_RULE_TRANSACTIONAL_FOR_MAGIC,
               pos + KB_V2_AT_ATTRIBUTES, -1,
               KB_NO_OFFSET, o->target_magic, 0, 0);
    } else if (h->producer_id >= 0) {
        report(c, KB_RULE_IDEMPOTENT_FOR_MAGIC, pos + KB_V2_AT_PRODUCER_ID, -1, KB_NO_OFFSET, o->target_magic, 0, 0);
    }
}

/* Checks that need only the header; returns 0 when the records cannot be walked. */
static int check_header(ctx_t *c, const uint8_t *buf, size_t pos, size_t size, const kb_v2_header *h)
{
    int client = c->opts->origin == KB_ORIGIN_CLIENT;
    kb_fault f;
    if (c->opts->verify_crc && kb_v2_check_crc(buf, pos, size, h, &f) != 0) {
        c->suspect = c->s->culprits;  /* what the offsets were before it, for the next entry */
        c->suspect_first = c->entry_first;
        c->suspect_top = c->top_offset;
        c->suspect_last = c->last_offset;
        c->suspect_any = c->any_offset;
        report_fault(c, &f, -1, KB_NO_OFFSET);
    }
    int codec = h->attributes & KB_ATTR_CODEC_MASK;
    int walkable = kb_v2_check_codec(h, pos, &f) == 0;
    if (!walkable)
        report_fault(c, &f, -1, KB_NO_OFFSET);

    int64_t last = kb_wrap_add64(h->base_offset, h->last_offset_delta);
    if (client) {
        if (h->last_offset_delta < 0)
            report(c, KB_RULE_INVALID_OFFSET_RANGE, pos + KB_V2_AT_LAST_OFFSET_DELTA, -1, KB_NO_OFFSET,
                   h->base_offset, last, 0);
        if (h->record_count <= 0)
            report(c, KB_RULE_INVALID_RECORD_COUNT, pos + KB_V2_AT_RECORD_COUNT, -1, KB_NO_OFFSET, h->record_count,
                   0, 0);
        else if ((int64_t)h->last_offset_delta + 1 != h->record_count)
            report(c, KB_RULE_COUNT_OFFSET_MISMATCH, pos + KB_V2_AT_RECORD_COUNT, -1, KB_NO_OFFSET, h->base_offset,
                   last, h->record_count);
        if (h->attributes & KB_ATTR_CONTROL)
            report(c, KB_RULE_CONTROL_FROM_CLIENT, pos + KB_V2_AT_ATTRIBUTES, -1, KB_NO_OFFSET, 0, 0, 0);
        if (h->producer_id >= 0 && h->base_sequence < 0)
            report(c, KB_RULE_INVALID_SEQUENCE, pos + KB_V2_AT_BASE_SEQUENCE, -1, KB_NO_OFFSET, h->base_sequence,
                   h->producer_id, 0);
        check_target_magic(c, pos, h, codec);
    } else {
        if (kb_v2_check_count(h, pos, &f) != 0)
            report_fault(c, &f, -1, KB_NO_OFFSET);
        else if ((int64_t)h->record_count > (int64_t)h->last_offset_delta + 1)
            report(c, KB_RULE_COUNT_OFFSET_MISMATCH, pos + KB_V2_AT_RECORD_COUNT, -1, KB_NO_OFFSET, h->base_offset,
                   last, h->record_count);
    }
    return walkable && h->record_count >= 0;
}

/* A control batch's record in a log: its key read as Kafka's ControlRecordType.parse does, and a
 * transaction marker's value as EndTransactionMarker does -- a reader of the log (a consumer, the
 * producer-state rebuild) fails there.  Positions are the key's or the value's. */
static void check_control_record(ctx_t *c, const uint8_t *buf, const kb_record *r, int32_t index)
{
    int type;
    int32_t epoch;
    kb_fault f;
    if (kb_control_key(r->key_len >= 0 ? buf + r->key : NULL, r->key_len, r->key, &type, &f) != 0 ||
        ((type == KB_CONTROL_ABORT || type == KB_CONTROL_COMMIT) &&
         kb_control_marker(r->value_len >= 0 ? buf + r->value : NULL, r->value_len, r->value, &epoch, &f) != 0))
        report_fault(c, &f, index, r->offset_delta);
}

/* Strict: a key, value or header value length below -1, which Kafka reads as null and no writer
 * produces (the position is the length's own). */
static void check_null_lengths(ctx_t *c, const uint8_t *buf, size_t limit, const kb_record *r, int32_t index)
{
    if (__builtin_expect(r->min_length >= -1, 1))
        return;
    if (r->key_len < -1)
        report(c, KB_RULE_NEGATIVE_LENGTH, r->key - (size_t)kb_sizeof_varint(r->key_len), index, r->offset_delta,
               KB_FIELD_KEY_LENGTH, r->key_len, 0);
    if (r->value_len < -1)
        report(c, KB_RULE_NEGATIVE_LENGTH, r->value - (size_t)kb_sizeof_varint(r->value_len), index,
               r->offset_delta, KB_FIELD_VALUE_LENGTH, r->value_len, 0);
    size_t p = r->headers;
    for (int32_t k = 0; k < r->header_count; k++) {
        size_t key, value;
        int32_t klen, vlen;
        p = kb_v2_read_header_kv(buf, p, limit, &key, &klen, &value, &vlen);
        if (vlen < -1)
            report(c, KB_RULE_NEGATIVE_LENGTH, value - (size_t)kb_sizeof_varint(vlen), index, r->offset_delta,
                   KB_FIELD_HEADER_VALUE_LENGTH, vlen, 0);
    }
}

/* Strict, v0/v1: a key or value length below -1 (its int32 is just before the bytes). */
static void check_legacy_null_lengths(ctx_t *c, const kb_legacy_msg *m, int32_t index, int64_t offset, int value)
{
    if (m->key_len < -1)
        report(c, KB_RULE_NEGATIVE_LENGTH, m->key - 4, index, offset, KB_FIELD_KEY_LENGTH, m->key_len, 0);
    if (value && m->value_len < -1)
        report(c, KB_RULE_NEGATIVE_LENGTH, m->value - 4, index, offset, KB_FIELD_VALUE_LENGTH, m->value_len, 0);
}

/* Walks the records in buf[start, limit): the batch's own bytes for an uncompressed batch, else
 * its decompressed records.  Returns the largest record timestamp when every record was read
 * (CreateTime), INT64_MIN otherwise.  `prefix`: the bytes a stream gave before its codec failed;
 * faults that only need more bytes are not reported, and *needs_more says the walk needed more
 * (Kafka's next read meets the codec's failure). */
static int64_t walk_records(ctx_t *c, const uint8_t *buf, size_t start, size_t limit, const kb_v2_header *h,
                            int prefix, int *needs_more)
{
    int client = c->opts->origin == KB_ORIGIN_CLIENT;
    int strict = c->opts->strict;
    int create_time = !(h->attributes & KB_ATTR_LOG_APPEND_TIME);
    /* Kafka's readers: compressed records kept as they are (a client's batch in the same codec and
     * record version) are read partially; other compressed records from a stream (re-compression,
     * consumers); uncompressed ones in place */
    int codec = h->attributes & KB_ATTR_CODEC_MASK;
    int partial = codec != KB_CODEC_NONE && client && (c->opts->target_codec < 0 || c->opts->target_codec == codec) &&
                  c->opts->target_magic >= 2;
    kb_reader reader = partial ? KB_READER_PARTIAL : kb_v2_consumer_reader(codec);
    size_t p = start;
    int64_t prev = -1, max_ts = INT64_MIN;
    int all_read = 1, remaining = 0;
    c->next_delta = 0;
    size_t rebuild_pos = SIZE_MAX; /* the first record whose offset delta is not its index */
    int32_t rebuild_delta = 0, rebuild_index = 0;
    int32_t i;
    *needs_more = 0;
    for (i = 0;; i++) {
        kb_fault f;
        int step = kb_v2_walk_step(p, limit, i, h->record_count, &f);
        if (step == 0)
            break;
        if (step < 0) {
            if (i == h->record_count) { /* bytes follow the last record */
                report_fault(c, &f, -1, KB_NO_OFFSET);
                remaining = 1;
            } else {
                if (prefix) /* a stream that failed: more bytes were to come */
                    *needs_more = 1;
                else
                    report_fault(c, &f, i, KB_NO_OFFSET);
                all_read = 0;
            }
            break;
        }
        kb_record r;
        size_t next;
        if (kb_v2_read_record_by(reader, buf, p, limit, &r, &f, &next) != 0) {
            if (prefix && kb_v2_ran_out(buf, limit, &f, reader)) {
                *needs_more = 1;
                return INT64_MIN;
            }
            int64_t at = c->s->culprits;
            report_fault(c, &f, i, r.offset_known ? r.offset_delta : KB_NO_OFFSET);
            if ((prefix || !next) && (uint64_t)at < c->cap) { /* the rest of the batch goes unread */
                c->out[at].first_offset = kb_wrap_add64(h->base_offset, c->next_delta);
                c->out[at].last_offset = c->entry_last;
            }
            if (prefix) /* Kafka stops at the fault: the stream's own failure lies beyond it */
                return INT64_MIN;
            all_read = 0;
            if (!next)
                return INT64_MIN; /* the record's length cannot be trusted: stop this batch */
            p = next;
            continue;
        }
        c->s->records++;
        c->next_delta = (int64_t)r.offset_delta + 1;
        p = r.end;
        if (r.header_count > 0 && c->opts->target_magic < 2 && !c->headers_reported) {
            c->headers_reported = 1;
            report(c, KB_RULE_CONVERSION_HEADERS, r.pos, i, r.offset_delta, c->opts->target_magic, 0, 0);
        }
        if ((h->attributes & KB_ATTR_CONTROL) && !client)
            check_control_record(c, buf, &r, i);
        check_record_rules(c, r.pos, i, r.offset_delta, kb_wrap_add64(h->base_offset, r.offset_delta),
                           kb_v2_record_timestamp(h, r.timestamp_delta),
                           r.key_len, r.value_len, !create_time, partial);
        if (partial && r.offset_delta != i && rebuild_pos == SIZE_MAX) {
            rebuild_pos = r.pos;
            rebuild_delta = r.offset_delta;
            rebuild_index = i;
        }
        if (!strict)
            continue;
        check_null_lengths(c, buf, limit, &r, i);
        if (r.offset_delta <= prev)
            report(c, KB_RULE_OFFSET_NOT_INCREASING, r.pos, i, r.offset_delta, r.offset_delta, prev, 0);
        else if (r.offset_delta > h->last_offset_delta)
            report(c, KB_RULE_OFFSET_BEYOND_LAST, r.pos, i, r.offset_delta, r.offset_delta,
                   h->last_offset_delta, 0);
        else if (client && r.offset_delta != i)
            report(c, KB_RULE_OFFSET_NOT_INDEX, r.pos, i, r.offset_delta, r.offset_delta, i, 0);
        if (r.offset_delta > prev)
            prev = r.offset_delta;
        if (create_time) {
            int64_t ts = kb_wrap_add64(h->base_timestamp, r.timestamp_delta);
            if (ts > h->max_timestamp)
                report(c, KB_RULE_TIMESTAMP_ABOVE_MAX, r.pos, i, r.offset_delta, ts, h->max_timestamp, 0);
            if (ts > max_ts)
                max_ts = ts;
        }
    }
    if (prefix && i == h->record_count && !remaining)
        *needs_more = 1; /* checking that nothing remains reads on, into the failure */
    /* LogValidator keeps such a batch only if its offsets need no change; otherwise it rebuilds
     * it from the records its partial reader skipped the keys and values of, and fails */
    if (all_read && !prefix && rebuild_pos != SIZE_MAX)
        report(c, KB_RULE_PARTIAL_REBUILD, rebuild_pos, -1, KB_NO_OFFSET, rebuild_delta, rebuild_index, 0);
    return all_read && create_time && h->record_count > 0 ? max_ts : INT64_MIN;
}

static int64_t check_records(ctx_t *c, const uint8_t *buf, size_t start, size_t limit, const kb_v2_header *h)
{
    int ignored;
    return walk_records(c, buf, start, limit, h, 0, &ignored);
}

/* Producer batches carry the largest record timestamp as maxTimestamp (CreateTime). */
static void check_max_timestamp(ctx_t *c, size_t pos, const kb_v2_header *h, int64_t max_ts)
{
    if (c->opts->strict && c->opts->origin == KB_ORIGIN_CLIENT && max_ts != INT64_MIN && max_ts < h->max_timestamp)
        report(c, KB_RULE_MAX_TIMESTAMP_MISMATCH, pos + KB_V2_AT_MAX_TIMESTAMP, -1, KB_NO_OFFSET, h->max_timestamp, max_ts, 0);
}

static void check_v2(ctx_t *c, const uint8_t *buf, size_t pos, size_t size)
{
    /* a produce request's batch is asked for its producer id (bytes 43-50) before it is validated */
    if (size < KB_V2_PRODUCER_ID_END && c->opts->origin == KB_ORIGIN_CLIENT) {
        report(c, KB_RULE_PRODUCER_ID_UNREADABLE, pos + KB_AT_SIZE, -1, KB_NO_OFFSET, (int64_t)size,
               KB_V2_PRODUCER_ID_END, 0);
        return;
    }
    kb_fault f;
    if (kb_v2_check_size(pos, size, &f) != 0) {
        report_fault(c, &f, -1, KB_NO_OFFSET);
        return;
    }
    kb_v2_header h;
    kb_v2_read_header(buf + pos, &h);
    if (!check_header(c, buf, pos, size, &h))
        return;
    int codec = h.attributes & KB_ATTR_CODEC_MASK;
    if (codec == KB_CODEC_NONE) {
        check_max_timestamp(c, pos, &h, check_records(c, buf, pos + KB_V2_HEADER_SIZE, pos + size, &h));
        return;
    }
    if (!c->opts->decompress || h.record_count == 0) {
        c->s->unwalked += h.record_count != 0;
        return;
    }
    const uint8_t *records = NULL;
    size_t n = 0;
    size_t payload = pos + KB_V2_HEADER_SIZE;
    if (c->opts->decompress(c->opts->decompress_ctx, codec, 2, buf + payload, size - KB_V2_HEADER_SIZE,
                            &records, &n, &f) != 0) {
        f.pos += payload;
        /* Kafka reads records out of the stream as it decompresses: a fault in what came out
         * before the damage is what it meets first; the codec's failure only if it reads on */
        int needs_more = 1;
        if (n > 0 && f.rule == KB_RULE_DECOMPRESSION_FAILED) {
            c->payload_pos = (int64_t)payload;
            walk_records(c, records, 0, n, &h, 1, &needs_more);
            c->payload_pos = -1;
        }
        if (needs_more)
            report_fault(c, &f, -1, KB_NO_OFFSET);
        return;
    }
    c->payload_pos = (int64_t)payload;
    int64_t max_ts = check_records(c, records, 0, n, &h);
    c->payload_pos = -1;
    check_max_timestamp(c, pos, &h, max_ts);
}

/* v1 inner offsets are relative to the wrapper's (its offset is the last inner one's): the
 * messages of the record rules reported for this wrapper name the absolute offset, as Kafka's. */
static void rebase_inner_offsets(ctx_t *c, int64_t first_culprit, int64_t base)
{
    for (int64_t k = first_culprit; k < c->s->culprits && (uint64_t)k < c->cap; k++) {
        kb_culprit *cu = &c->out[k];
        if (cu->rule == KB_RULE_TIMESTAMP_OUT_OF_RANGE)
            cu->args[1] = kb_wrap_add64(cu->args[1], base);
        else if (cu->rule == KB_RULE_LEGACY_LOG_APPEND_TIME)
            cu->args[0] = kb_wrap_add64(cu->args[0], base);
    }
}

/* The record culprits of a v0/v1 entry from culprit `from` on were reported with the offset its
 * message carries: their offset is that plus `base` (a v1 inner set's offsets are relative to the
 * wrapper's), their offset delta that less `first` (the set's first, 0 for a lone message). */
static void name_legacy_offsets(ctx_t *c, int64_t from, int64_t base, int64_t first)
{
    for (int64_t k = from; k < c->s->culprits && (uint64_t)k < c->cap; k++) {
        kb_culprit *cu = &c->out[k];
        if (cu->record_index < 0 || cu->relative_offset == KB_NO_OFFSET)
            continue;
        cu->first_offset = cu->last_offset = kb_wrap_add64(cu->relative_offset, base);
        cu->relative_offset = first == KB_NO_OFFSET ? KB_NO_OFFSET : kb_wrap_sub64(cu->relative_offset, first);
    }
}

/* Checks the inner message set of a compressed v0/v1 wrapper (decompressed into inner[0, n)). */
static void check_inner_set(ctx_t *c, const uint8_t *inner, size_t n, const kb_legacy_msg *w)
{
    size_t p = 0;
    int32_t i = 0;
    int64_t last = 0, prev = INT64_MIN, first_inner = KB_NO_OFFSET;
    int32_t first_index = -1;
    int64_t first_culprit = c->s->culprits;
    int log_append = w->magic > 0 && (w->attributes & KB_ATTR_LOG_APPEND_TIME);
    for (;; i++) {
        kb_legacy_msg m;
        kb_fault f;
        kb_inner_status st = kb_legacy_next(inner, n, &p, &m, &f);
        if (st == KB_INNER_END)
            break;
        if (st == KB_INNER_TRUNCATED) {
            if (c->opts->strict)
                report(c, KB_RULE_LEGACY_INNER_TRUNCATED, p, i, KB_NO_OFFSET, (int64_t)(n - p), 0, 0);
            break;
        }
        if (st != KB_INNER_MSG) {
            report_fault(c, &f, i, KB_NO_OFFSET);
            if (st == KB_INNER_FAULT)
                break;
            continue;
        }
        last = m.offset;
        if (first_inner == KB_NO_OFFSET) {
            first_inner = m.offset;
            first_index = i;
        }
        /* inner CRCs are always checked, as Kafka's validator does (verify_crc is about the outer one) */
        int crc_ok = kb_legacy_check_crc(inner, &m, &f) == 0;
        if (!crc_ok) {
            f.rule = KB_RULE_INNER_CRC_MISMATCH;
            report_fault(c, &f, i, m.offset);
        }
        if (kb_legacy_check_inner(&m, &f) != 0)
            report_fault(c, &f, i, m.offset);
        if (m.magic != w->magic)
            report_legacy_record(c, KB_RULE_LEGACY_INNER_MAGIC, m.pos + KB_AT_MAGIC, i, m.offset, &m, w->magic);
        else if (crc_ok)
            check_legacy_record_rules(c, &m, i, m.offset, kb_legacy_timestamp(w, &m),
                                      log_append);
        if (c->opts->strict) {
            check_legacy_null_lengths(c, &m, i, m.offset, 1);
            if (m.offset <= prev)
                report(c, KB_RULE_OFFSET_NOT_INCREASING, m.pos, i, m.offset, m.offset, prev, 0);
            if (w->magic > 0 && !(w->attributes & KB_ATTR_LOG_APPEND_TIME) && m.timestamp > w->timestamp)
                report(c, KB_RULE_TIMESTAMP_ABOVE_MAX, m.pos, i, m.offset, m.timestamp, w->timestamp, 0);
        }
        prev = m.offset;
        c->s->records++;
    }
    c->payload_pos = -1;
    kb_fault f;
    int64_t base = w->magic == 1 && w->offset != 0 ? kb_wrap_sub64(w->offset, last) : 0;
    name_legacy_offsets(c, first_culprit, base, first_inner);
    if (kb_legacy_check_inner_set(w, i, last, &f) != 0) {
        report_fault(c, &f, -1, KB_NO_OFFSET);
        return;  /* its records' offsets are not the log's */
    }
    if (base != 0)
        rebase_inner_offsets(c, first_culprit, base);
    /* the wrapper's span, where its first message was read (else its first offset is not known) */
    if (first_inner != KB_NO_OFFSET && first_index == 0) {
        c->inner_first = kb_wrap_add64(first_inner, base);
        c->inner_last = kb_wrap_add64(last, base);
    }
}

/* A magic 0/1 entry: one message, or a compressed wrapper of an inner message set. */
static void check_legacy(ctx_t *c, const uint8_t *buf, size_t pos, size_t size)
{
    kb_legacy_msg m;
    kb_fault f;
    if (kb_legacy_read(buf, pos, size, &m, &f) != 0) {
        report_fault(c, &f, -1, KB_NO_OFFSET);
        return;
    }
    if (c->opts->verify_crc && kb_legacy_check_crc(buf, &m, &f) != 0)
        report_fault(c, &f, -1, KB_NO_OFFSET);
    int codec = m.attributes & KB_ATTR_CODEC_MASK;
    int64_t first_culprit = c->s->culprits;
    if (c->opts->strict) /* a wrapper's null value is an error of its own */
        check_legacy_null_lengths(c, &m, codec == KB_CODEC_NONE ? 0 : -1, m.offset, codec == KB_CODEC_NONE);
    if (codec == KB_CODEC_NONE) {
        c->s->records++;
        check_legacy_record_rules(c, &m, 0, m.offset, m.timestamp, m.magic > 0 && (m.attributes & KB_ATTR_LOG_APPEND_TIME));
        name_legacy_offsets(c, first_culprit, 0, m.offset);
        return;
    }
    if (kb_legacy_check_wrapper(&m, &f) != 0) {
        report_fault(c, &f, -1, KB_NO_OFFSET);
        return;
    }
    if (!c->opts->decompress) {
        c->s->unwalked++;
        return;
    }
    const uint8_t *inner;
    size_t n;
    if (c->opts->decompress(c->opts->decompress_ctx, codec, m.magic, buf + m.value, (size_t)m.value_len, &inner,
                            &n, &f) != 0) {
        f.pos += m.value;
        report_fault(c, &f, -1, KB_NO_OFFSET);
        return;
    }
    c->payload_pos = (int64_t)m.value;
    check_inner_set(c, inner, n, &m);
}

/* The offsets of a framed entry as its header gives them.  A v2 batch's last offset is base +
 * lastOffsetDelta (a negative delta is its own culprit: the base stands for both); a magic 0/1
 * entry has one offset (a compressed wrapper's is its last inner one: its first is taken as the
 * one after the entry before, as a log that was not compacted has it). */
static void entry_offsets(ctx_t *c, const uint8_t *buf, size_t pos, const kb_entry *e)
{
    int64_t first = (int64_t)kb_load_be64(buf + pos), last = first;
    c->record_base = KB_NO_OFFSET;
    if (e->magic == 2) {
        c->record_base = first;
        if (e->size >= KB_V2_AT_LAST_OFFSET_DELTA + 4) {
            int32_t delta = (int32_t)kb_load_be32(buf + pos + KB_V2_AT_LAST_OFFSET_DELTA);
            if (delta > 0 && first <= INT64_MAX - delta)
                last = first + delta;
        }
    } else if ((buf[pos + KB_LEGACY_AT_ATTRIBUTES] & KB_ATTR_CODEC_MASK) != KB_CODEC_NONE) {
        if (c->any_offset && c->last_offset < last)
            first = c->last_offset + 1;
        else if (!c->any_offset && c->opts->origin == KB_ORIGIN_LOG)
            first = KB_NO_OFFSET;  /* first in the file: its records' first, or (a segment's) its base offset */
    }
    c->entry_first = first;
    c->entry_last = last;
}

/* The culprits of entries whose framing was lost (those before index `end`), once the next framed
 * entry starts at `first`: they hide the offsets between the last one read and it.  Returns 1
 * when there were any. */
static int close_unsound(ctx_t *c, int64_t first, int64_t end)
{
    if (c->unsound_from < 0)
        return 0;
    for (int64_t k = c->unsound_from; k < end && (uint64_t)k < c->cap; k++) {
        kb_culprit *cu = &c->out[k];
        if (first == INT64_MIN || (cu->first_offset != KB_NO_OFFSET && first - 1 < cu->first_offset))
            cu->first_offset = KB_NO_OFFSET;  /* nothing hidden between the neighbours */
        else
            cu->last_offset = first - 1;
    }
    c->unsound_from = -1;
    return 1;
}

/* The batch before this entry failed its CRC, and its last offset (base + a delta under that CRC)
 * reaches past this entry's first, which lies above its base: the delta is the damaged field, not
 * this entry's offset.  Its culprit names the offsets up to this entry, and this entry is judged
 * against those, not told that offsets go backwards. */
static void check_suspect_last(ctx_t *c)
{
    int64_t first = c->entry_first, k = c->suspect;
    c->suspect = -1;
    if (k < 0 || first == KB_NO_OFFSET || c->suspect_first == KB_NO_OFFSET || first <= c->suspect_first ||
        first > c->last_offset)
        return;
    if ((uint64_t)k < c->cap && c->out[k].first_offset == c->suspect_first)
        c->out[k].last_offset = first - 1;
    c->last_offset = first - 1;
    c->top_offset = c->suspect_any && c->suspect_top > first - 1 ? c->suspect_top : first - 1;
}

/* Origin log: each entry's first offset above the previous entry's last, and (a topic not said to
 * be compacted) right after it. */
static void check_log_order(ctx_t *c, size_t pos, int after_unsound)
{
    int64_t first = c->entry_first;
    check_suspect_last(c);
    if (!c->any_offset)
        return;
    if (first <= c->last_offset) {
        report(c, KB_RULE_LOG_OFFSETS_NOT_INCREASING, pos, -1, KB_NO_OFFSET, first, c->last_offset, 0);
    } else if (!c->opts->compacted && !after_unsound && c->top_offset < INT64_MAX &&
               first > c->top_offset + 1) {
        int64_t before = c->s->culprits;
        report4(c, KB_RULE_LOG_OFFSET_GAP, pos, -1, KB_NO_OFFSET, c->top_offset + 1, first - 1, first,
                c->last_offset);
        if ((uint64_t)before < c->cap) {
            c->out[before].first_offset = c->top_offset + 1;
            c->out[before].last_offset = first - 1;
        }
    }
}

/* A compressed v0/v1 wrapper's header gives its last offset only (entry_offsets guessed its first):
 * once its records are read, the offsets they hold are known.  Its order culprits (reported from
 * its header, the offset Kafka indexes and fetches by) name those too; the highest offset seen
 * covers them; and a gap before its first record is checked now, as check_log_order does for an
 * entry whose header gives its first. */
static void check_wrapper_span(ctx_t *c, size_t pos, int64_t culprits_before, int after_unsound)
{
    int64_t first = c->inner_first, last = c->inner_last;
    if (first == KB_NO_OFFSET)
        return;
    for (int64_t k = culprits_before; k < c->s->culprits && (uint64_t)k < c->cap; k++) {
        kb_culprit *cu = &c->out[k];
        if (cu->record_index < 0 && cu->first_offset == KB_NO_OFFSET && cu->last_offset == c->entry_last)
            cu->first_offset = first;  /* the wrapper's own, first in its file */
        if (cu->rule != KB_RULE_LOG_OFFSETS_NOT_INCREASING || cu->first_offset == KB_NO_OFFSET)
            continue;
        if (first < cu->first_offset)
            cu->first_offset = first;
        if (last > cu->last_offset)
            cu->last_offset = last;
    }
    int64_t top = c->top_offset;
    if (c->opts->origin == KB_ORIGIN_LOG && c->opts->strict && !c->opts->compacted && !after_unsound &&
        c->any_offset && top < INT64_MAX && first > top + 1) {
        int64_t before = c->s->culprits;
        report4(c, KB_RULE_LOG_OFFSET_GAP, pos, -1, KB_NO_OFFSET, top + 1, first - 1, first, c->last_offset);
        if ((uint64_t)before < c->cap) {
            c->out[before].first_offset = top + 1;
            c->out[before].last_offset = first - 1;
        }
    }
    if (last > c->entry_last)
        c->entry_last = last;
}

/* What Kafka checks of each entry as part of one append, before LogValidator: a client's v2 batch
 * starts at offset 0 and fits max.message.bytes (analyzeAndValidateRecords); every entry of one
 * append has the first one's magic (B1). */
static void check_entry_in_append(ctx_t *c, const uint8_t *buf, size_t pos, const kb_entry *e, int after_unsound)
{
    const kb_validate_opts *o = c->opts;
    /* the low byte of a v2 batch's int16 attributes, or a message's int8 ones */
    int codec = buf[pos + (e->magic == 2 ? KB_V2_AT_ATTRIBUTES + 1 : KB_LEGACY_AT_ATTRIBUTES)] & KB_ATTR_CODEC_MASK;
    c->headers_reported = 0;
    if (c->first_magic < 0) {
        c->first_magic = e->magic;
        c->first_codec = codec;
    }
    c->any_compressed |= codec != KB_CODEC_NONE;
    if (o->origin == KB_ORIGIN_CLIENT) {
        int64_t base_offset = (int64_t)kb_load_be64(buf + pos);
        if (e->magic == 2 && base_offset != 0)
            report(c, KB_RULE_BASE_OFFSET_NOT_ZERO, pos, -1, KB_NO_OFFSET, base_offset, 0, 0);
        if (o->max_batch_bytes >= 0 && (int64_t)e->size > o->max_batch_bytes)
            report(c, KB_RULE_BATCH_TOO_LARGE, pos + KB_AT_SIZE, -1, KB_NO_OFFSET, (int64_t)e->size, o->max_batch_bytes, 0);
    }
    if (o->single_append && e->magic != c->first_magic)
        report(c, KB_RULE_MAGIC_MISMATCH, pos + KB_AT_MAGIC, -1, KB_NO_OFFSET, e->magic, c->first_magic, 0);
    if (o->origin == KB_ORIGIN_LOG && o->strict)
        check_log_order(c, pos, after_unsound);
}

/* A culprit against the append's second entry (the one Kafka's one-batch rules refuse). */
static void report_second_batch(ctx_t *c, kb_rule rule)
{
    c->entry = 1;
    c->entry_pos = c->second_pos;
    report(c, rule, c->second_pos, -1, KB_NO_OFFSET, c->opts->produce_version, 0, 0);
    c->entry = 0;
    c->entry_pos = 0;
}

/* The append as a whole, once every entry is known: ProduceRequest.validateRecords (one magic-2
 * batch, no zstd before v7), LogValidator's one-batch rule, segment.bytes.  Reported after the
 * per-entry culprits, against entry 0 (the second entry for a second batch).  When the framing
 * was lost, only the first entry's request checks apply (Kafka reads it before the next). */
static void check_append(ctx_t *c)
{
    const kb_validate_opts *o = c->opts;
    const kb_summary *s = c->s;
    int64_t v = o->produce_version;
    int64_t entries = s->stopped ? c->entries_before_loss : s->entries;
    c->entry = 0;
    c->entry_pos = 0;
    if (s->stopped && entries == 0)
        return;
    if (v > 0) {
        if (entries == 0)
            report(c, KB_RULE_REQUEST_NO_BATCH, 0, -1, KB_NO_OFFSET, v, 0, 0);
        else if (c->first_magic != 2)
            report(c, KB_RULE_REQUEST_NOT_MAGIC_2, 16, -1, KB_NO_OFFSET, v, 0, 0);
        else if (v < 7 && c->first_codec == KB_CODEC_ZSTD)
            report(c, KB_RULE_REQUEST_ZSTD, 21, -1, KB_NO_OFFSET, v, 0, 0);
        else if (entries > 1)
            report_second_batch(c, KB_RULE_REQUEST_MANY_BATCHES);
    } else if (!s->stopped && o->single_append && entries > 1 && (c->first_magic >= 2 || c->any_compressed)) {
        report_second_batch(c, KB_RULE_APPEND_MANY_BATCHES);
    }
    if (!s->stopped && o->origin == KB_ORIGIN_CLIENT && o->max_append_bytes >= 0 &&
        s->valid_bytes > o->max_append_bytes)
        report(c, KB_RULE_APPEND_TOO_LARGE, 0, -1, KB_NO_OFFSET, s->valid_bytes, o->max_append_bytes, 0);
}

void kb_validate(const uint8_t *buf, size_t len, const kb_validate_opts *o, kb_culprit *out, size_t cap,
                 kb_summary *s)
{
    memset(s->rule_counts, 0, sizeof s->rule_counts);
    kb_validate_again(buf, len, o, out, cap, s);
}

void kb_validate_again(const uint8_t *buf, size_t len, const kb_validate_opts *o, kb_culprit *out, size_t cap,
                       kb_summary *s)
{
    ctx_t c = {.opts = o, .out = out, .cap = cap, .s = s, .payload_pos = -1, .first_magic = -1,
               .entry_first = KB_NO_OFFSET, .entry_last = KB_NO_OFFSET, .record_base = KB_NO_OFFSET,
               .unsound_from = -1, .suspect = -1};
    if (s->culprits)  /* the last walk counted rules; one without culprits left every count at zero */
        memset(s->rule_counts, 0, sizeof s->rule_counts);
    memset(s, 0, offsetof(kb_summary, rule_counts));
    s->tail_pos = -1;
    s->stopped_at = -1;
    size_t pos = 0, reported = 0;
    int flags = kb_resync_flags(o->strict, o->origin == KB_ORIGIN_LOG);
    for (;; c.entry++) {
        if (o->progress && pos - reported >= o->progress_every) {
            o->progress(o->progress_ctx, pos);
            reported = pos;
        }
        kb_entry e;
        kb_fault f;
        kb_entry_status st = kb_next_entry_resync(buf, len, pos, flags, &e, &f);
        c.entry_pos = pos;
        if (st == KB_ENTRY_END)
            break;
        if (st == KB_ENTRY_TRUNCATED) {
            s->tail_pos = (int64_t)pos;
            s->tail_entry = c.entry;
            break;
        }
        if (c.entry == 1)
            c.second_pos = pos;
        if (st == KB_ENTRY_LOST || st == KB_ENTRY_CORRUPT) { /* its offsets: those before the next sound entry */
            c.suspect = -1;  /* what follows a lost entry cannot show a neighbour's last offset wrong */
            c.entry_first = c.any_offset && c.top_offset < INT64_MAX ? c.top_offset + 1 : KB_NO_OFFSET;
            c.entry_last = c.record_base = KB_NO_OFFSET;
            if (st == KB_ENTRY_LOST && f.rule == KB_RULE_TAIL_SIZE_LIES) /* a whole batch by its checksum */
                entry_offsets(&c, buf, pos, &e);
            else if (c.unsound_from < 0)
                c.unsound_from = s->culprits;
        }
        if (st == KB_ENTRY_LOST) { /* reported; the walk goes on at the next sound entry */
            report_fault(&c, &f, -1, KB_NO_OFFSET);
            if (!s->stopped) {
                s->stopped = 1;
                s->stopped_at = (int64_t)pos;
                c.entries_before_loss = s->entries;
            }
            s->lost_bytes += (int64_t)e.size;
            if (f.rule == KB_RULE_TAIL_SIZE_LIES && c.entry_last != KB_NO_OFFSET &&
                (!c.any_offset || c.entry_last > c.top_offset)) {
                /* its culprit names its offsets: the entry after it is judged against them, not
                 * told again that they are missing */
                c.top_offset = c.last_offset = c.entry_last;
                c.any_offset = 1;
            }
        } else if (st == KB_ENTRY_CORRUPT) {
            report_fault(&c, &f, -1, KB_NO_OFFSET);
        } else {
            entry_offsets(&c, buf, pos, &e);
            /* a compressed magic 0/1 wrapper's first offset is its first record's: known once read */
            int wrapper = e.magic < 2 && (buf[pos + KB_LEGACY_AT_ATTRIBUTES] & KB_ATTR_CODEC_MASK) != KB_CODEC_NONE;
            int64_t unsound_end = s->culprits;
            int after_unsound = wrapper ? c.unsound_from >= 0 : close_unsound(&c, c.entry_first, unsound_end);
            check_entry_in_append(&c, buf, pos, &e, after_unsound);
            c.inner_first = c.inner_last = KB_NO_OFFSET;
            if (e.magic == 2)
                check_v2(&c, buf, pos, e.size);
            else
                check_legacy(&c, buf, pos, e.size);
            if (wrapper) {
                close_unsound(&c, c.inner_first != KB_NO_OFFSET ? c.inner_first :
                                  c.entry_first != KB_NO_OFFSET ? c.entry_first : c.entry_last, unsound_end);
                check_wrapper_span(&c, pos, unsound_end, after_unsound);
            }
            if (!c.any_offset || c.entry_last > c.top_offset)
                c.top_offset = c.entry_last;
            c.any_offset = 1;  /* the next entry is judged against this one, as a follower's append does */
            c.last_offset = c.entry_last;
        }
        s->entries++;
        pos += e.size;
        s->valid_bytes = (int64_t)pos;
    }
    check_append(&c);
}
