/* Framing of a record set and the v2 record batch format.
 *
 * A record set is entries back to back, each `offset:int64 size:int32` plus
 * `size` bytes; byte 16 of every entry is its magic.  A v2 entry is a record
 * batch: a 61-byte header, then records (see SPEC.md section 3).  Positions
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
#define KB_V2_PRODUCER_ID_END 51 /* producerId is bytes 43-50 of a batch */
#define KB_V2_CRC_START 21

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

/* Reads the 61-byte header at p (the caller checked there are 61 bytes). */
void kb_v2_read_header(const uint8_t *p, kb_v2_header *h);

/* CRC-32C of a whole v2 entry of `size` bytes (from attributes to the end). */
uint32_t kb_v2_compute_crc(const uint8_t *entry, size_t size);

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

/* Reads one header of a record that kb_v2_read_record accepted. */
size_t kb_v2_read_header_kv(const uint8_t *buf, size_t pos, size_t limit, size_t *key, int32_t *key_len,
                            size_t *value, int32_t *value_len);

#endif
