/* Framing of a record set and the v2 record batch format.
 *
 * A record set is entries back to back, each `offset:int64 size:int32` plus
 * `size` bytes; byte 16 of every entry is its magic.  A v2 entry is a record
 * batch: a 61-byte header, then records (Kafka's DefaultRecordBatch and DefaultRecord).  Positions
 * are byte offsets from the start of the caller's buffer.
 */
#ifndef KB_V2_H
#define KB_V2_H

#include <stddef.h>
#include <stdint.h>

#include "kb_rules.h"

#define KB_LOG_OVERHEAD 12
#define KB_HEADER_SIZE_UP_TO_MAGIC 17
#define KB_MIN_ENTRY_SIZE 14 /* LegacyRecord.RECORD_OVERHEAD_V0 */
#define KB_V2_HEADER_SIZE 61

/* Where each field of an entry starts (every entry: offset, size, magic at 16; then a v2 batch's
 * header, DefaultRecordBatch's *_OFFSET constants).  Faults name these positions. */
#define KB_AT_BASE_OFFSET 0
#define KB_AT_SIZE 8
#define KB_AT_MAGIC 16
#define KB_V2_AT_PARTITION_LEADER_EPOCH 12
#define KB_V2_AT_CRC 17
#define KB_V2_AT_ATTRIBUTES 21
#define KB_V2_AT_LAST_OFFSET_DELTA 23
#define KB_V2_AT_BASE_TIMESTAMP 27
#define KB_V2_AT_MAX_TIMESTAMP 35
#define KB_V2_AT_PRODUCER_ID 43
#define KB_V2_AT_PRODUCER_EPOCH 51
#define KB_V2_AT_BASE_SEQUENCE 53
#define KB_V2_AT_RECORD_COUNT 57
#define KB_V2_CRC_START KB_V2_AT_ATTRIBUTES /* the CRC-32C covers attributes to the end */
#define KB_V2_PRODUCER_ID_END KB_V2_AT_PRODUCER_EPOCH /* producerId is bytes 43-50 of a batch */

#define KB_ATTR_CODEC_MASK 0x07
#define KB_ATTR_LOG_APPEND_TIME 0x08
#define KB_ATTR_TRANSACTIONAL 0x10
#define KB_ATTR_CONTROL 0x20
#define KB_ATTR_DELETE_HORIZON 0x40

/* One problem found at a byte position; `args` feed the message template. */
typedef struct kb_fault_s {
    kb_rule rule;
    size_t pos;
    int64_t args[3];
} kb_fault;

typedef enum {
    KB_ENTRY_OK = 0,     /* a complete entry */
    KB_ENTRY_END,        /* no bytes left */
    KB_ENTRY_TRUNCATED,  /* an incomplete entry ends the buffer (normal) */
    KB_ENTRY_CORRUPT,    /* see the fault; entry->size > 0 if it can be skipped */
    KB_ENTRY_LOST,       /* kb_next_entry_resync only: the framing was lost here (see the fault);
                            entry->size spans the bytes up to the next sound entry, or to the end */
} kb_entry_status;

typedef struct {
    size_t pos;   /* first byte of the entry */
    size_t size;  /* size field + 12, i.e. the whole entry */
    int magic;
} kb_entry;

/* Fills *f (the one way the core records a fault). */
void kb_fault_set(kb_fault *f, kb_rule rule, size_t pos, int64_t a0, int64_t a1, int64_t a2);

/* Finds the entry starting at `pos`, as Kafka's ByteBufferLogInputStream does. */
kb_entry_status kb_next_entry(const uint8_t *buf, size_t len, size_t pos, kb_entry *e, kb_fault *f);

typedef struct {
    int64_t base_offset;
    int32_t length;
    int32_t partition_leader_epoch;
    int8_t magic;
    uint32_t crc;
    int16_t attributes;
    int32_t last_offset_delta;
    int64_t base_timestamp;
    int64_t max_timestamp;
    int64_t producer_id;
    int16_t producer_epoch;
    int32_t base_sequence;
    int32_t record_count;
} kb_v2_header;

/* A record's timestamp as Kafka reports it: a LogAppendTime batch stamps every record with its
 * maxTimestamp (the broker's append time). */
static inline int64_t kb_v2_record_timestamp(const kb_v2_header *h, int64_t timestamp_delta)
{
    if (h->attributes & KB_ATTR_LOG_APPEND_TIME)
        return h->max_timestamp;
    return (int64_t)((uint64_t)h->base_timestamp + (uint64_t)timestamp_delta); /* Java's wrapping add */
}

/* Reads the 61-byte header at p (the caller checked there are 61 bytes). */
void kb_v2_read_header(const uint8_t *p, kb_v2_header *h);

/* CRC-32C of a whole v2 entry of `size` bytes (from attributes to the end). */
uint32_t kb_v2_compute_crc(const uint8_t *entry, size_t size);

/* The checks of a v2 entry at buf[pos] of `size` bytes that come before its records, each 0 or -1
 * with *f: the one code of each, shared by the validator (which reports every fault) and the
 * readers (which raise the first, in Kafka's order: size, CRC, then codec and count when the
 * records are read). */
int kb_v2_check_size(size_t pos, size_t size, kb_fault *f);
int kb_v2_check_crc(const uint8_t *buf, size_t pos, size_t size, const kb_v2_header *h, kb_fault *f);
int kb_v2_check_codec(const kb_v2_header *h, size_t pos, kb_fault *f);
int kb_v2_check_count(const kb_v2_header *h, size_t pos, kb_fault *f); /* the iterator's count >= 0 */

/* size and CRC (when verify_crc): what a reader checks before handing out a batch; fills *h. */
int kb_v2_check_entry(const uint8_t *buf, size_t pos, size_t size, int verify_crc, kb_v2_header *h,
                      kb_fault *f);

/* codec and count: whether the records of the batch at `pos` can be walked. */
int kb_v2_check_walkable(const kb_v2_header *h, size_t pos, kb_fault *f);

typedef struct {
    size_t pos;              /* the length varint */
    int32_t length;          /* declared body length */
    int8_t attributes;
    int64_t timestamp_delta;
    int32_t offset_delta;
    int offset_known;        /* offset_delta was read before any fault */
    int32_t key_len;         /* < 0: null */
    size_t key;
    int32_t value_len;       /* < 0: null */
    size_t value;
    int32_t header_count;
    size_t headers;          /* first byte of the first header */
    int32_t min_length;      /* the smallest key, value or header value length (strict's -1 check) */
    size_t end;              /* first byte after the record as parsed */
} kb_record;

/* Reads the record at `pos`, every field bounded by `limit` (the end of the
 * batch, as Kafka's in-place reader is).  Returns 0 or -1 with *f set.
 * *next is where the following record starts: the declared end when the
 * length could be trusted, or 0 when the walk cannot go on. */
int kb_v2_read_record(const uint8_t *buf, size_t pos, size_t limit, kb_record *r, kb_fault *f, size_t *next);

/* Kafka's InputStream reader of a compressed record (DefaultRecord.readFrom(InputStream), what
 * consumers and the validator's re-compressing path use): the body is read whole first, then
 * parsed within its declared length. */
int kb_v2_read_record_stream(const uint8_t *buf, size_t pos, size_t limit, kb_record *r, kb_fault *f, size_t *next);

/* Kafka's partial reader (readPartiallyFrom, the validator's compressed in-place path): skips
 * key, value and headers, never compares the bytes read with the declared length and does not
 * bound the header count; the next record starts at r->end.  After a fault (where Kafka stops),
 * *next is where the declared length ends the record, or 0. */
int kb_v2_read_record_partial(const uint8_t *buf, size_t pos, size_t limit, kb_record *r, kb_fault *f,
                              size_t *next);

/* Which of Kafka's readers reads a batch's records: uncompressed records in place; compressed ones
 * from a decompressing stream (consumers, and the validator when it re-encodes) or partially (the
 * validator keeping a client's compressed batch as it is). */
typedef enum {
    KB_READER_IN_PLACE = 0,
    KB_READER_STREAM,
    KB_READER_PARTIAL,
} kb_reader;

/* The reader a consumer (and iter_batches) uses for a batch of this codec. */
static inline kb_reader kb_v2_consumer_reader(int codec)
{
    return codec == KB_CODEC_NONE ? KB_READER_IN_PLACE : KB_READER_STREAM;
}

static inline int kb_v2_read_record_by(kb_reader reader, const uint8_t *buf, size_t pos, size_t limit,
                                       kb_record *r, kb_fault *f, size_t *next)
{
    if (reader == KB_READER_IN_PLACE)
        return kb_v2_read_record(buf, pos, limit, r, f, next);
    if (reader == KB_READER_STREAM)
        return kb_v2_read_record_stream(buf, pos, limit, r, f, next);
    return kb_v2_read_record_partial(buf, pos, limit, r, f, next);
}

/* The record iterator's own checks, before reading record `index` of `count` at `pos` (records
 * end at `limit`): 1 read it; 0 the walk is done; -1 with *f: the bytes ended before `count`
 * records (premature EOF) or bytes follow the last one (records remaining). */
static inline int kb_v2_walk_step(size_t pos, size_t limit, int32_t index, int32_t count, kb_fault *f)
{
    if (index < count) {
        if (__builtin_expect(pos < limit, 1))
            return 1;
        kb_fault_set(f, KB_RULE_PREMATURE_EOF, pos, count, index, 0);
        return -1;
    }
    if (pos < limit) {
        kb_fault_set(f, KB_RULE_RECORDS_REMAINING, pos, (int64_t)(limit - pos), 0, 0);
        return -1;
    }
    return 0;
}

/* Whether a reader's fault only says that the bytes ran out at `limit` (a stream that failed
 * there would have given more) rather than that the bytes read are wrong.  The partial reader
 * takes fields straight from the stream; the stream reader parses a record within its own length,
 * read whole first. */
int kb_v2_ran_out(const uint8_t *buf, size_t limit, const kb_fault *f, kb_reader reader);

/* Kafka reads records out of a decompressing stream: given the `limit` bytes a codec produced
 * before it failed, the fault a reader meets first.  -1 with *f: a record's (or bytes past the
 * last record); 0: the codec's own failure (the walk ran out, or read on to check the end). */
int kb_v2_walk_prefix(const uint8_t *buf, size_t limit, int32_t count, kb_reader reader, kb_fault *f);

/* Reads one header of a record that kb_v2_read_record accepted. */
size_t kb_v2_read_header_kv(const uint8_t *buf, size_t pos, size_t limit, size_t *key, int32_t *key_len,
                            size_t *value, int32_t *value_len);

#endif
