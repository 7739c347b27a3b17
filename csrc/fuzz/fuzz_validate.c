/* Fuzz target over the core's entry points: framing + validation (both
 * origins), the record walk of every v2 batch, columnar decoding into exactly
 * sized buffers, and re-encoding of what decoded.  Built with libFuzzer
 * (clang -fsanitize=fuzzer) or, without clang, with run_inputs.c as a plain
 * driver; both under AddressSanitizer and UndefinedBehaviorSanitizer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../kb_avro.h"
#include "../kb_columns.h"
#include "../kb_consume.h"
#include "../kb_isolation.h"
#include "../kb_crc32.h"
#include "../kb_crc32c.h"
#include "../kb_encode.h"
#include "../kb_log_windows.h"
#include "../kb_ranges.h"
#include "../kb_render.h"
#include "../kb_repair.h"
#include "../kb_resync.h"
#include "../kb_validate.h"
#include "../kb_verdict.h"

#define CAP 64

/* A toy codec so the decompressed-records walk runs under the sanitizers: "gzip" copies the
 * payload into an exactly sized buffer (any over-read is caught), "snappy" fails, "lz4"
 * yields nothing, "zstd" the payload minus its first byte. */
static uint8_t *toy_out;

static int toy_decompress(void *ctx, int codec, int magic, const uint8_t *src, size_t n, const uint8_t **out,
                          size_t *out_len, kb_fault *f)
{
    (void)ctx;
    (void)magic;
    free(toy_out);
    toy_out = NULL;
    if (codec == 2) {
        f->rule = KB_RULE_DECOMPRESSION_FAILED;
        f->pos = n / 2;
        f->args[0] = f->args[1] = f->args[2] = 0;
        return -1;
    }
    size_t skip = codec == 4 && n ? 1 : 0;
    size_t len = codec == 3 ? 0 : n - skip;
    toy_out = malloc(len ? len : 1);
    memcpy(toy_out, src + skip, len);
    *out = toy_out;
    *out_len = len;
    return 0;
}

/* kb_repair's compress hook: the payload as it is (a codec's framing is the host's) */
static int toy_compress(void *ctx, int codec, int magic, const uint8_t *src, size_t n, const uint8_t **out,
                        size_t *out_len)
{
    (void)ctx;
    (void)magic;
    if (codec == 2)
        return -1;
    *out = src;
    *out_len = n;
    return 0;
}

/* kb_repair over the culprits a walk found: every dropped record's bytes and culprits inside what
 * it was given, each entry whole in the output or counted as left out. */
static void check_repair(const uint8_t *buf, size_t size, const kb_culprit *c, size_t n, int strict, int log)
{
    static kb_repair_out r;  /* kept between inputs, as a host keeps it between rows */
    kb_repair_opts o = {.resync_flags = kb_resync_flags(strict, log), .keep_offsets = log,
                        .decompress = toy_decompress, .compress = toy_compress};
    int rc = kb_repair(buf, size, c, n, &o, &r);
    if (rc != 0 && rc != KB_REPAIR_COMPRESS_FAILED && rc != KB_REPAIR_NO_MEMORY)
        abort();
    if (rc != 0)
        return;
    int32_t whole = 0;
    for (size_t k = 0; k < r.n_dropped; k++) {
        const kb_dropped *d = &r.dropped[k];
        if (d->first_culprit + d->n_culprits > r.n_index || d->n_culprits == 0 || d->entry < 0 ||
            (d->key_len > 0 && d->key + (size_t)d->key_len > r.bytes_len) ||
            (d->value_len > 0 && d->value + (size_t)d->value_len > r.bytes_len))
            abort();
        for (size_t j = 0; j < d->n_culprits; j++) {
            int32_t i = r.culprit_index[d->first_culprit + j];
            if (i < 0 || (size_t)i >= n || c[i].entry != d->entry ||
                (d->record_index >= 0 && c[i].record_index != d->record_index))
                abort();
        }
        whole += d->record_index < 0;
    }
    if (whole != r.unrepairable)
        abort();
}

/* A culprit's text into an exactly sized buffer (any write past its length is caught), and cut
 * short into a small one. */
static char *render_exact(kb_rule rule, kb_text which, const int64_t *args)
{
    char small[8];
    long n = kb_render(rule, which, args, "t-0", small, sizeof small);
    if (n < 0)
        return NULL;
    char *text = malloc((size_t)n + 1);
    if (kb_render(rule, which, args, "t-0", text, (size_t)n + 1) != n || text[n] != 0)
        abort();
    return text;
}

/* What the JVM shim does with a validation's culprits (csrc/jni/kb_jni.c): KIP-467's verdict, every
 * culprit's texts, and the error message of the records refused. */
static void check_verdict(const kb_culprit *c, size_t n, kb_origin origin, int produce_version)
{
    int32_t firsts[CAP];
    kb_verdict v;
    kb_verdict_of(c, n, origin, produce_version, &v, firsts);
    if ((n == 0) != (v.code == 0 && v.verdict < 0) || v.verdict >= (int32_t)n || v.records > n)
        abort();
    char *messages[3] = {NULL, NULL, NULL};
    int32_t indexes[3];
    size_t shown = 0;
    for (size_t i = 0; i < n; i++) {
        free(render_exact((kb_rule)c[i].rule, KB_TEXT_DETAIL, c[i].args));
        free(render_exact((kb_rule)c[i].rule, KB_TEXT_READER, c[i].args));
        char *message = render_exact((kb_rule)c[i].rule, KB_TEXT_MESSAGE, c[i].args);
        for (size_t k = 0; !v.batch_level && k < v.records && k < 3; k++)
            if (firsts[k] < 0 || firsts[k] >= (int32_t)n)
                abort();
            else if ((size_t)firsts[k] == i && shown < 3) {
                indexes[shown] = c[i].record_index;
                messages[shown++] = message ? message : calloc(1, 1);
                message = NULL;
            }
        free(message);
    }
    if (!v.batch_level && v.code) {
        const char *texts[3] = {"", "", ""};
        for (size_t k = 0; k < shown; k++)
            texts[k] = messages[k];
        long len = kb_render_record_errors(v.code, shown, indexes, texts, NULL, 0);
        char *text = malloc((size_t)len + 1);
        if (kb_render_record_errors(v.code, shown, indexes, texts, text, (size_t)len + 1) != len || text[len])
            abort();
        free(text);
    }
    for (size_t k = 0; k < shown; k++)
        free(messages[k]);
}

/* The columns of one entry taken as a message set: the store's arrays are sized exactly for the
 * first batch (expect 1), so any write past the measured sizes is caught. */
static void walk_legacy_columns(const uint8_t *buf, size_t start, size_t limit)
{
    kb_column_sizes z = {0};
    kb_fault f;
    int32_t rec;
    if (kb_legacy_columns_measure(buf, start, limit, &z, &f, &rec) != 0)
        return;
    kb_column_store s = {0};
    kb_column_batch b = {.records = buf, .start = start, .limit = limit, .magic = 1, .offset_base = 5};
    if (kb_legacy_read(buf, start, limit - start, &b.m, &f) != 0)
        b.m.magic = 1; /* the fill walks the set whatever its wrapper */
    if (kb_columns_add(&s, &b, 1, &f, &rec) != 0 || s.c.row != z.records || kb_column_store_trim(&s) != 0)
        abort();
    kb_column_store_free(&s);
}

static void walk_columns(const uint8_t *buf, size_t len)
{
    size_t pos = 0;
    for (;;) {
        kb_entry e;
        kb_fault f;
        if (kb_next_entry(buf, len, pos, &e, &f) != KB_ENTRY_OK)
            return;
        pos += e.size;
        if (e.magic < 2) {
            walk_legacy_columns(buf, e.pos, e.pos + e.size);
            continue;
        }
        if (e.size < KB_V2_HEADER_SIZE)
            continue;
        kb_v2_header h;
        kb_v2_read_header(buf + e.pos, &h);
        if (h.record_count <= 0 || (h.attributes & KB_ATTR_CODEC_MASK))
            continue;
        size_t start = e.pos + KB_V2_HEADER_SIZE, limit = e.pos + e.size;
        kb_column_sizes z = {0};
        int32_t rec;
        if (kb_columns_measure(buf, start, limit, h.record_count, KB_READER_IN_PLACE, &z, &f, &rec, NULL) != 0)
            continue;
        int64_t n = z.records, nh = z.headers;
        kb_column_store cs = {0};
        kb_column_batch b = {.records = buf, .start = start, .limit = limit, .count = h.record_count, .magic = 2,
                             .h = h, .crc_pending = 1};
        /* the same batch twice: the second makes the arrays grow */
        int crc_ok = kb_columns_add(&cs, &b, 1, &f, &rec) == 0;
        if (crc_ok && (cs.c.row != n || cs.c.header_row != nh || kb_columns_add(&cs, &b, 1, &f, &rec) != 0 ||
                       cs.c.row != 2 * n || cs.c.header_row != 2 * nh || kb_column_store_trim(&cs) != 0))
            abort();
        kb_column_store_free(&cs);

        /* re-encode the decoded records: must give a batch that validates */
        kb_record_in *recs = calloc((size_t)n, sizeof(kb_record_in));
        size_t p = start;
        for (int64_t i = 0; i < n; i++) {
            kb_record r;
            size_t next;
            kb_v2_read_record(buf, p, limit, &r, &f, &next);
            recs[i] = (kb_record_in){buf + r.key, r.key_len < 0 ? -1 : r.key_len, buf + r.value,
                                     r.value_len < 0 ? -1 : r.value_len, NULL, 0, r.attributes,
                                     r.timestamp_delta, r.offset_delta};
            p = r.end;
        }
        int64_t size = kb_v2_batch_size(recs, (size_t)n);
        if (size > 0) {
            uint8_t *out = malloc((size_t)size);
            kb_v2_encode(&h, recs, (size_t)n, out);
            kb_validate_opts o = {.origin = KB_ORIGIN_LOG, .verify_crc = 1, .before_max_ms = INT64_MAX,
                                  .after_max_ms = INT64_MAX, .max_batch_bytes = -1, .max_append_bytes = -1,
                                  .target_magic = 2, .target_codec = -1};
            kb_culprit cul[CAP];
            kb_summary s;
            kb_validate(out, (size_t)size, &o, cul, CAP, &s);
            for (int64_t i = 0; i < s.culprits && i < CAP; i++)
                if (cul[i].rule == KB_RULE_CRC_MISMATCH)
                    abort(); /* the encoder wrote a wrong CRC */
            free(out);
        }
        free(recs);
    }
}

/* The Avro decoder over the input with a fixed program: a record of a long, a string, a nullable
 * int, an enum whose third symbol the reader lacks, a map of ints, a fixed(4), a bytes decimal
 * (precision 38), a [boolean, double] union into a dense union, and a float the writer lacks (its
 * default); columns start with room for one row, so growth runs too.  A failed datum must leave
 * every column as it was; the registries' framings read the same bytes. */
static void fuzz_avro(const uint8_t *buf, size_t size)
{
    enum { NULL_ = KB_AVRO_NULL };
    static const kb_avro_colspec specs[] = {
        {KB_COL_STRUCT, 0, 0, 9}, {KB_COL_INT64, 0, 0, 0}, {KB_COL_BINARY, 0, 0, 0}, {KB_COL_INT32, 0, 0, 0},
        {KB_COL_INT32, 0, 0, 0}, {KB_COL_LIST, 0, 6, 0}, {KB_COL_STRUCT, 0, 9, 2}, {KB_COL_BINARY, 0, 0, 0},
        {KB_COL_INT32, 0, 0, 0}, {KB_COL_FIXED, 4, 0, 0}, {KB_COL_DECIMAL, 16, 0, 38}, {KB_COL_UNION, 0, 11, 2},
        {KB_COL_BOOL, 0, 0, 0}, {KB_COL_FLOAT64, 0, 0, 0}, {KB_COL_FLOAT32, 0, 0, 0}};
    static const int32_t column_children[15] = {1, 2, 3, 4, 5, 9, 10, 11, 14, 7, 8, 12, 13, 0, 0};
    static const kb_avro_node nodes[] = {
        /* 0 */ {KB_AVRO_RECORD, 0, 0, 9, 0, 11},
        /* 1 */ {KB_AVRO_LONG, 1, -1, 0, 0, 1},
        /* 2 */ {KB_AVRO_STRING, 2, -1, 0, 0, 1},
        /* 3 */ {KB_AVRO_UNION, -1, 9, 2, 0, 1},
        /* 4 */ {NULL_, 3, -1, 0, 0, 0},
        /* 5 */ {KB_AVRO_INT, 3, -1, 0, 0, 1},
        /* 6 */ {KB_AVRO_ENUM, 4, -1, 3, 0, 1},
        /* 7 */ {KB_AVRO_MAP, 5, 8, 0, 0, 1},
        /* 8 */ {KB_AVRO_INT, 8, -1, 0, 0, 1},
        /* 9 */ {KB_AVRO_FIXED, 9, -1, 4, 0, 4},
        /* 10 */ {KB_AVRO_DECIMAL_BYTES, 10, -1, 0, 0, 1},
        /* 11 */ {KB_AVRO_UNION, -1, 11, 2, 0, 1},
        /* 12 */ {KB_AVRO_BRANCH, 11, 13, 0, 0, 1},
        /* 13 */ {KB_AVRO_BOOLEAN, 12, -1, 0, 0, 1},
        /* 14 */ {KB_AVRO_BRANCH, 11, 15, 1, 0, 8},
        /* 15 */ {KB_AVRO_DOUBLE, 13, -1, 0, 0, 8},
        /* 16 */ {KB_AVRO_DEFAULT, -1, 17, 0, 0, 0},
        /* 17 */ {KB_AVRO_FLOAT, 14, -1, 0, 0, 4}};
    static const int32_t children[] = {1, 2, 3, 6, 7, 9, 10, 11, 16, 4, 5, 12, 14};
    static const int32_t table[] = {0, 1, -1};
    static const uint8_t defaults[] = {0, 0, 0xc0, 0x3f}; /* 1.5f */
    static const int64_t spans[] = {0, 4};
    const kb_avro_program prog = {nodes, children, table, defaults, spans, 0, 18, 13, 3, 1, 4};
    kb_avro_columns c = {specs, column_children, 15, 0, NULL, NULL};
    int32_t where;
    if (kb_avro_check(&prog, &c, &where) != 0 || kb_avro_columns_init(&c, 1) != 0)
        abort();
    kb_fault f;
    for (size_t start = 0; start < 3 && start <= size; start++) {
        int64_t before[15];
        for (int i = 0; i < 15; i++)
            before[i] = c.cols[i].length;
        int rc = kb_avro_decode(&prog, &c, buf, start, size, (int)start & 1, &f);
        if (rc == 0 && c.cols[0].length != before[0] + 1)
            abort();
        if (rc != 0) {
            if (rc == -1 && f.pos > size)
                abort();
            for (int i = 0; i < 15; i++)
                if (c.cols[i].length != before[i])
                    abort();
            if (kb_avro_append_null(&c) != 0)
                abort();
        }
    }
    kb_avro_columns_free(&c);
    kb_frame fr;
    int32_t indexes[4];
    for (int framing = 0; framing < 3; framing++)
        if (kb_read_frame(buf, size, (kb_framing)framing, &fr, indexes, 4, &f) == 0 &&
            (fr.payload < 0 || (size_t)fr.payload > size))
            abort();
}

/* read_committed's rule driven by the input as a sequence of batches (producer, last offset,
 * control, transactional, marker) and unreadable entries: control batches are never handed out, a
 * read_uncommitted one hands out every other, HOLD only for a producer undecided before the batch
 * and KEEP only for one neither aborted nor undecided after it, an ABORT marker takes its producer
 * out of both sets, and the sets stay strictly ascending. */
static int set_sound(const kb_producer_set *s)
{
    for (int32_t i = 1; i < s->count; i++)
        if (s->ids[i - 1] >= s->ids[i])
            return 0;
    return 1;
}

static void walk_isolation(const uint8_t *buf, size_t size)
{
    int64_t pairs[8] = {2, 1, 0, 2, 9, 1, 5, 3}; /* (first offset, producer id), out of order */
    for (int committed = 0; committed < 2; committed++) {
        kb_isolation iso;
        int64_t lso = 200;
        if (kb_isolation_init(&iso, committed, committed ? &lso : NULL, pairs, 4) != 0)
            abort();
        int64_t offset = 0;
        for (size_t i = 0; i + 1 < size && i < 256; i += 2) {
            int64_t producer = (buf[i] & 3) - 1; /* -1 (no producer), 0, 1, 2 */
            int control = (buf[i] >> 2) & 1, transactional = (buf[i] >> 3) & 1, marker = (buf[i] >> 4) & 1;
            offset += buf[i + 1] % 8;
            if (buf[i] >> 7) {
                if (kb_isolation_unreadable(&iso, offset) != 0)
                    abort();
                continue;
            }
            int was_undecided = 0;
            for (int32_t k = 0; k < iso.undecided.count; k++)
                was_undecided |= iso.undecided.ids[k] == producer;
            int d = kb_isolation_decide(&iso, producer, offset, control, transactional, marker);
            int aborted = 0, undecided = 0;
            for (int32_t k = 0; k < iso.aborted.count; k++)
                aborted |= iso.aborted.ids[k] == producer;
            for (int32_t k = 0; k < iso.undecided.count; k++)
                undecided |= iso.undecided.ids[k] == producer;
            if (d < 0 || (control && d != KB_ISO_DROP) || (!committed && !control && d != KB_ISO_KEEP) ||
                (d == KB_ISO_HOLD && !was_undecided) ||
                (d == KB_ISO_KEEP && transactional && producer >= 0 && (aborted || undecided)) ||
                (committed && control && marker && producer >= 0 && (aborted || undecided)) ||
                !set_sound(&iso.aborted) || !set_sound(&iso.undecided) ||
                (!committed && (iso.aborted.count || iso.undecided.count)))
                abort();
            offset++;
        }
        kb_isolation_free(&iso);
    }
}

/* A consumer's walk over the bytes as a fetch response, under both isolation levels, from a fetch
 * offset taken from the input: nothing read out of bounds, and when it settles the response its
 * spans run from the fetch offset to the next offset without a gap or an overlap and its rows
 * are at or after the fetch offset. */
static void walk_consume(const uint8_t *buf, size_t size)
{
    int64_t fetch = size >= 8 ? (int64_t)(buf[size - 1] % 16) : 0;
    int64_t aborted[4] = {0, 7, 3, 8}; /* (first offset, producer id) pairs */
    for (int committed = 0; committed < 2; committed++) {
        kb_consume_opts o = {.fetch_offset = fetch, .committed = committed, .last_stable_offset = committed ? 40 : -1,
                             .compacted = committed, .aborted = aborted, .aborted_count = committed ? 2 : 0,
                             .decompress = toy_decompress};
        kb_span spans[64];
        kb_consume_result r = {.spans = spans, .span_cap = 64};
        kb_column_store s = {0};
        s.c.layout = KB_LAYOUT_SPARK_TIME | (committed ? KB_LAYOUT_SPARK_ONLY : 0);
        kb_consume_status st = kb_consume(buf, size, &o, &s, &r);
        if (st == KB_CONSUME_DONE) {
            int64_t at = fetch;
            for (size_t i = 0; i < r.span_count; i++) {
                if (spans[i].first != at || spans[i].last < spans[i].first)
                    abort();
                at = spans[i].last + 1;
            }
            if (r.span_count && at != r.next_offset)
                abort();
            for (int64_t i = 0; i < s.c.row; i++)
                if (s.c.offset[i] < fetch)
                    abort();
            if (kb_column_store_trim(&s) != 0)
                abort();
        } else if (st == KB_CONSUME_CAREFUL && r.careful_at > size) {
            abort();
        }
        kb_column_store_free(&s);
        free(toy_out);
        toy_out = NULL;
    }
}

/* The ranges' promise restated for a row as Spark sees it (its timestamp in microseconds). */
static int in_range(const kb_ranges *r, int64_t offset, int64_t micros)
{
    return !((r->bounds & KB_RANGE_FIRST_OFFSET && offset < r->first_offset) ||
             (r->bounds & KB_RANGE_END_OFFSET && offset >= r->end_offset) ||
             (r->bounds & KB_RANGE_FIRST_TIMESTAMP && micros < r->first_timestamp * 1000) ||
             (r->bounds & KB_RANGE_END_TIMESTAMP && micros >= r->end_timestamp * 1000));
}

/* A log's split read window by window (kafka-segment's JVM reader): every window inside the
 * buffer and its split, the store's offsets inside its data, and the same rows whatever the
 * window size (an entry decodes or not on its own) and when only counted. */
static int64_t log_rows_as(const uint8_t *buf, size_t size, size_t start, size_t end, size_t window_bytes,
                           int count_only, const kb_ranges *ranges, kb_log_consumer *consumer)
{
    kb_log_windows w;
    memset(&w, 0, sizeof w);
    w.store.c.layout = KB_LAYOUT_SPARK_TIME;
    w.store.count_only = count_only;
    kb_decode_opts d = {.verify_crc = (int)(size & 1), .decompress = toy_decompress, .ranges = ranges};
    kb_log_windows_init(&w, buf, size, start, end, window_bytes, &d);
    w.consumer = consumer;
    if ((size & 2) && !consumer && kb_log_windows_account(&w) != 0)
        abort();
    kb_fault f;
    int64_t rows = 0;
    int rc;
    size_t last_hi = start;
    kb_log_skip skips[4];
    while ((rc = kb_log_next_window(&w, &f)) == 1) {
        int32_t n;  /* what the account hands out lies in the buffer, in order, settled */
        while ((n = kb_log_take_skips(&w, skips, 4)) > 0)
            for (int32_t i = 0; i < n; i++)
                if (!skips[i].settled || skips[i].size == 0 || skips[i].pos + skips[i].size > size)
                    abort();
        for (int32_t k = 0; w.account && k < w.entries; k++)
            if (w.account->entries[k].pos < w.lo || w.account->entries[k].pos + w.account->entries[k].size > w.hi)
                abort();
        const kb_columns *c = &w.store.c;
        if (w.lo < last_hi || w.hi > size || w.lo >= w.hi || (end != SIZE_MAX && w.lo >= end) || w.entries <= 0)
            abort();
        for (int64_t r = 0; !count_only && r < c->row; r++)
            if (c->batch_position[r] < (int64_t)w.lo || c->batch_position[r] >= (int64_t)w.hi ||
                c->key_offsets[r] > c->key_offsets[r + 1] || c->value_offsets[r] > c->value_offsets[r + 1] ||
                c->batch_index[r] < 0 || c->batch_index[r] >= w.entries ||
                (ranges && !in_range(ranges, c->offset[r], c->timestamp[r])))
                abort();
        if (c->row && !count_only && (c->key_offsets[c->row] > w.store.key_cap || c->value_offsets[c->row] > w.store.value_cap))
            abort();
        last_hi = w.hi;
        rows += c->row;
    }
    kb_log_windows_free(&w);
    return rc == 0 ? rows : -1;
}

static int64_t log_rows(const uint8_t *buf, size_t size, size_t start, size_t end, size_t window_bytes,
                        int count_only, const kb_ranges *ranges)
{
    return log_rows_as(buf, size, start, end, window_bytes, count_only, ranges, NULL);
}

/* The log read as a consumer of offsets [first, last] receives it (the tiered reader), under both
 * isolation levels with aborted transactions and a last stable offset from the input, the host's
 * ranges narrowed to what it may hand out: every row in them (log_rows_as checks), never more
 * rows than the plain ranged read, and read_committed never more than read_uncommitted. */
static void walk_log_consumer(const uint8_t *buf, size_t size, int64_t unranged)
{
    if (size < 12)
        return;
    int64_t first = (int8_t)buf[9] % 8, last = first + buf[10] % 64, lso = buf[11] % 48;
    int64_t pairs[4] = {(int8_t)buf[5], 0, (int8_t)buf[6], 1};
    int64_t rows[2];
    for (int committed = 0; committed < 2; committed++) {
        kb_log_consumer c = {.first = first, .last = last};
        if (kb_isolation_init(&c.iso, committed, committed ? &lso : NULL, pairs, 2) != 0)
            abort();
        int64_t top = committed && lso - 1 < last ? lso - 1 : last;
        kb_ranges r = {.bounds = KB_RANGE_FIRST_OFFSET | KB_RANGE_END_OFFSET, .first_offset = first, .end_offset = top + 1};
        rows[committed] = log_rows_as(buf, size, 0, SIZE_MAX, 97, 0, &r, &c);
        if (unranged >= 0 && rows[committed] > unranged)
            abort();
        kb_isolation_free(&c.iso);
    }
    if (rows[0] >= 0 && rows[1] > rows[0])
        abort();
}

static void walk_log_windows(const uint8_t *buf, size_t size)
{
    int64_t whole = log_rows(buf, size, 0, SIZE_MAX, size + 1, 0, NULL);
    if (log_rows(buf, size, 0, SIZE_MAX, 1, 0, NULL) != whole || log_rows(buf, size, 0, SIZE_MAX, 97, 0, NULL) != whole ||
        log_rows(buf, size, 0, SIZE_MAX, 97, 1, NULL) != whole)  /* counted without a fill: the same rows */
        abort();
    if (size > 8) {  /* ranges drawn from the input: every row in range, counted as filled, never more */
        kb_ranges r = {.bounds = buf[4] & 15, .first_offset = (int8_t)buf[5], .end_offset = (int8_t)buf[6],
                       .first_timestamp = (int64_t)(int8_t)buf[7] * 1000, .end_timestamp = (int64_t)buf[8] * 100000};
        int64_t ranged = log_rows(buf, size, 0, SIZE_MAX, 97, 0, &r);
        if (ranged > whole || log_rows(buf, size, 0, SIZE_MAX, 97, 1, &r) != ranged)
            abort();
        /* an index entry pointing anywhere: answered from inside the buffer */
        (void)kb_index_entry_trusted(buf, size, (int64_t)buf[4] * 13 - 7, (int8_t)buf[5], (int8_t)buf[6]);
    }
    /* a row decoded as kbatch_decode takes it: whole, or nothing of it kept */
    kb_column_store row;
    memset(&row, 0, sizeof row);
    kb_decode_opts d = {.verify_crc = 1, .decompress = toy_decompress};
    kb_fault f;
    kb_fault_place where;
    int32_t record, entry;
    int64_t expect = 0;
    int rc = kb_decode_row(&row, buf, size, &d, &expect, &f, &where, &record, &entry);
    if ((rc != 0 && (row.c.row != 0 || row.c.header_row != 0)) || (rc == -1 && where == KB_FAULT_IN_BUFFER &&
                                                                      f.pos > size))
        abort();
    kb_column_store_free(&row);
    /* kbatch_batch_info's walk: entries inside the buffer, in order, each ending where the next starts */
    size_t pos = 0, before = 0;
    kb_entry_info info;
    while (kb_entry_info_next(buf, size, &pos, &d, &info, &f) == 1) {
        if (info.position != (int64_t)before || info.size <= 0 || pos != (size_t)(info.position + info.size) ||
            pos > size || info.magic < 0 || info.magic > 2 || info.timestamp_type < 0 || info.timestamp_type > 2)
            abort();
        before = pos;
    }
    walk_log_consumer(buf, size, whole);
    if (size > 4)  /* a split starting anywhere, ending anywhere */
        log_rows(buf, size, buf[0] % size, buf[1] % size, (size_t)buf[2] + 1, buf[3] & 1, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a private copy of exactly `size` bytes, so any over-read is caught */
    uint8_t *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);
    kb_culprit out[CAP];
    kb_summary s;
    for (int origin = 0; origin < 2; origin++) {
        /* the client pass also takes the buffer as one produce request to a down-converting topic */
        kb_validate_opts o = {.origin = (kb_origin)origin, .verify_crc = 1, .strict = 1,
                              .decompress = toy_decompress, .compacted = origin, .now_ms = 1700000000000,
                              .before_max_ms = 86400000, .after_max_ms = 3600000,
                              .max_batch_bytes = origin ? -1 : 512, .max_append_bytes = origin ? -1 : 4096,
                              .target_magic = origin ? 2 : 1, .target_codec = origin ? -1 : 0,
                              .single_append = !origin, .produce_version = origin ? 0 : 5};
        kb_validate(buf, size, &o, out, CAP, &s);
        if (s.valid_bytes > (int64_t)size)
            abort();
        for (int64_t i = 0; i < s.culprits && i < CAP; i++)
            if (out[i].pos < 0 || out[i].pos > (int64_t)size || out[i].inner_pos < -1)
                abort();
        check_verdict(out, s.culprits < CAP ? (size_t)s.culprits : CAP, (kb_origin)origin, o.produce_version);
        check_repair(buf, size, out, s.culprits < CAP ? (size_t)s.culprits : CAP, o.strict, origin);
        /* kb_validate_again over the summary of whatever ran before: the same summary as a fresh walk */
        static kb_summary stale[2];
        kb_culprit again[CAP];
        kb_validate_again(buf, size, &o, again, CAP, &stale[origin]);
        if (memcmp(&stale[origin], &s, sizeof s) != 0)
            abort();
    }
    free(toy_out);
    toy_out = NULL;
    if (kb_crc32c(0, buf, size) != kb_crc32c_sw(0, buf, size) || kb_crc32(0, buf, size) != kb_crc32_sw(0, buf, size))
        abort();
    walk_columns(buf, size);
    walk_consume(buf, size);
    walk_isolation(buf, size);
    walk_log_windows(buf, size);
    fuzz_avro(buf, size);
    free(buf);
    return 0;
}
