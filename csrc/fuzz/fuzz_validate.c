/* Fuzz target over the core's entry points: framing + validation (both
 * origins), the record walk of every v2 batch, columnar decoding into exactly
 * sized buffers, and re-encoding of what decoded.  Built with libFuzzer
 * (clang -fsanitize=fuzzer) or, without clang, with run_inputs.c as a plain
 * driver; both under AddressSanitizer and UndefinedBehaviorSanitizer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../kb_columns.h"
#include "../kb_crc32.h"
#include "../kb_crc32c.h"
#include "../kb_encode.h"
#include "../kb_validate.h"

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
        if (kb_columns_measure(buf, start, limit, h.record_count, KB_READER_IN_PLACE, &z, &f, &rec) != 0)
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
    }
    free(toy_out);
    toy_out = NULL;
    if (kb_crc32c(0, buf, size) != kb_crc32c_sw(0, buf, size) || kb_crc32(0, buf, size) != kb_crc32_sw(0, buf, size))
        abort();
    walk_columns(buf, size);
    free(buf);
    return 0;
}
