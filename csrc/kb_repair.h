/* Repair (KIP-467 client side, KIP-1059): a buffer's entries rebuilt without their culprit
 * records, as pykbatch's drop_culprits with unrepairable="drop" does it.  A producer's batches
 * (keep_offsets 0): kept records get consecutive offset deltas (so consecutive sequences from the
 * unchanged base sequence).  Log data (keep_offsets 1), as Kafka's log cleaner rebuilds a batch:
 * every kept record keeps its offset, the batch its base offset and last offset delta (so its
 * sequences), a batch left with no record stays as an empty batch, and the offsets an entry left
 * out whole held between its kept neighbours are kept by an empty batch of their own -- no
 * consumer's committed offset comes to point at another record.  Both: the first kept record's
 * timestamp as the base and the largest as maxTimestamp (CreateTime); a v0/v1 message with a
 * culprit goes whole, a compressed wrapper is rebuilt around its kept inner messages; an entry
 * whose damage is not its records' (a CRC, a lying count, lost framing) goes whole (or is kept as
 * it is) and is counted unrepairable; an incomplete trailing entry is left out; a culprit of two
 * entries' order (KB_BETWEEN) drops neither.  Host-neutral: the host's codecs through hooks.
 * pykbatch's drop_culprits and Spark's JVM kbatch_repair both run it. */
#ifndef KB_REPAIR_H
#define KB_REPAIR_H

#include <stddef.h>
#include <stdint.h>

#include "kb_encode.h"
#include "kb_validate.h"

/* Compresses src[0, n) as Kafka frames a records payload of magic `magic`: 0 with *out / *out_len
 * (valid until the next call), or -1. */
typedef int (*kb_compress_fn)(void *ctx, int codec, int magic, const uint8_t *src, size_t n, const uint8_t **out,
                              size_t *out_len);

typedef struct {
    int resync_flags;              /* kb_resync_flags(strict, log origin): the validator's walk */
    int keep_unrepairable;         /* 1: an entry that cannot be repaired is copied as it is (and listed) */
    int keep_offsets;              /* 1: log data, every kept record at its offset (see above) */
    kb_decompress_fn decompress;
    void *decompress_ctx;
    kb_compress_fn compress;
    void *compress_ctx;
} kb_repair_opts;

/* A record (or a whole entry) left out. */
typedef struct {
    int32_t entry;
    int32_t record_index;          /* -1: the whole entry, which could not be repaired */
    int32_t has_fields;            /* 0: the record's own bytes could not be parsed (no offset, key, value) */
    int32_t key_len, value_len;    /* < 0: null */
    int32_t magic;                 /* the entry's */
    int32_t kept;                  /* a whole entry copied as it is (keep_unrepairable), not left out */
    int64_t offset, timestamp;
    size_t key, value;             /* positions in kb_repair_out.bytes */
    size_t raw, raw_len;           /* its own bytes there: the record (a v0/v1 message with its log
                                      header), or the whole entry */
    size_t first_culprit;          /* its culprits: culprit_index[first_culprit, + n_culprits), in the */
    size_t n_culprits;             /* validator's order (indexes into the culprits given) */
} kb_dropped;

typedef struct {
    uint8_t *data;                 /* the rebuilt buffer */
    size_t data_len, data_cap;
    kb_dropped *dropped;
    size_t n_dropped, dropped_cap;
    uint8_t *bytes;                /* the dropped records' keys and values */
    size_t bytes_len, bytes_cap;
    int32_t *culprit_index;
    size_t n_index, index_cap;
    int32_t unrepairable;          /* entries that could not be repaired (left out, or kept as they are) */
    /* scratch kept between calls */
    int32_t *order;
    size_t order_cap;
    size_t *keep;                  /* kept records' positions and timestamps */
    int64_t *keep_ts;
    size_t keep_cap;
    kb_record_in *recs;
    size_t recs_cap;
    kb_header_in *hdrs;
    size_t hdrs_cap;
    uint8_t *work;                 /* a records area or an inner message set before it is compressed */
    size_t work_cap;
} kb_repair_out;

#define KB_REPAIR_NO_MEMORY (-3)
#define KB_REPAIR_COMPRESS_FAILED (-4)

/* Repairs buf[0, len) given the validator's culprits c[0, n) (all of them: a capped list would
 * keep culprit records).  0; KB_REPAIR_NO_MEMORY; KB_REPAIR_COMPRESS_FAILED.  `out` is emptied
 * first and keeps its buffers. */
int kb_repair(const uint8_t *buf, size_t len, const kb_culprit *c, size_t n, const kb_repair_opts *o,
              kb_repair_out *out);

void kb_repair_out_free(kb_repair_out *out);

#endif
