/* Message formats v0 and v1 (Kafka's LegacyRecord): one message per log entry,
 *   offset:int64 size:int32 | crc:uint32 magic:int8 attributes:int8 [timestamp:int64 (v1)]
 *                             keyLength:int32 key valueLength:int32 value
 * and compressed wrappers, whose value is codec(an inner set of such entries). */
#ifndef KB_LEGACY_H
#define KB_LEGACY_H

#include <stddef.h>
#include <stdint.h>

#include "kb_v2.h"

#define KB_LEGACY_MIN_SIZE 14 /* LegacyRecord.RECORD_OVERHEAD_V0 */

/* Where a message's fields start in its entry (after the log header's offset and size). */
#define KB_LEGACY_AT_CRC 12
#define KB_LEGACY_AT_ATTRIBUTES 17
#define KB_LEGACY_AT_TIMESTAMP 18 /* v1 only */

typedef struct {
    int64_t offset;      /* the log header's offset field */
    size_t pos;          /* first byte of the entry */
    size_t size;         /* the whole entry, log header included */
    uint32_t crc;
    int8_t magic;
    int8_t attributes;
    int64_t timestamp;   /* -1 for v0 */
    int32_t key_len;     /* < 0: null */
    size_t key;
    int32_t value_len;   /* < 0: null */
    size_t value;
} kb_legacy_msg;

/* Parses the message of the complete entry buf[pos, pos + size).  0, or -1 with *f. */
int kb_legacy_read(const uint8_t *buf, size_t pos, size_t size, kb_legacy_msg *m, kb_fault *f);

/* CRC-32 of the message as stored (magic to the end of the entry). */
uint32_t kb_legacy_compute_crc(const uint8_t *buf, const kb_legacy_msg *m);

/* An inner message's timestamp as Kafka reports it: a v1 LogAppendTime wrapper `w` stamps its
 * inner messages with its own (a message outside a wrapper is its own wrapper); v0 has none. */
static inline int64_t kb_legacy_timestamp(const kb_legacy_msg *w, const kb_legacy_msg *m)
{
    return w->magic > 0 && (w->attributes & KB_ATTR_LOG_APPEND_TIME) ? w->timestamp : m->timestamp;
}

/* The checks of one message and of a compressed wrapper's inner set, each 0 or -1 with *f: shared
 * by the validator (every fault) and the readers (the first, in Kafka's order). */
int kb_legacy_check_crc(const uint8_t *buf, const kb_legacy_msg *m, kb_fault *f);
/* a compressed wrapper Kafka's deep iterator can open: a known codec, not zstd, a value */
int kb_legacy_check_wrapper(const kb_legacy_msg *w, kb_fault *f);
/* an inner message of a compressed wrapper: not compressed itself */
int kb_legacy_check_inner(const kb_legacy_msg *m, kb_fault *f);
/* the inner set as a whole: at least one message; a v1 wrapper's offset (0 from old librdkafka)
 * not below the last inner offset */
int kb_legacy_check_inner_set(const kb_legacy_msg *w, int32_t count, int64_t last_inner_offset, kb_fault *f);

typedef enum {
    KB_INNER_MSG = 1,       /* *m holds the next inner message */
    KB_INNER_END = 0,       /* the set ended cleanly */
    KB_INNER_TRUNCATED = 2, /* the set ends inside an entry (Kafka's reader stops silently) */
    KB_INNER_BAD = 3,       /* this message is malformed (*f); the walk can go on after it */
    KB_INNER_FAULT = -1,    /* *f says why; the set cannot be walked further */
} kb_inner_status;

/* Size of a whole entry (log header included) holding one message. */
size_t kb_legacy_entry_size(int magic, int32_t key_len, int32_t value_len);

/* Writes that entry, CRC included; a negative length writes a null (-1). */
void kb_legacy_write(uint8_t *out, int64_t offset, int magic, int attributes, int64_t timestamp,
                     const uint8_t *key, int32_t key_len, const uint8_t *value, int32_t value_len);

/* Steps through an inner message set buf[*p, limit): each entry must be at least 14 bytes. */
kb_inner_status kb_legacy_next(const uint8_t *buf, size_t limit, size_t *p, kb_legacy_msg *m, kb_fault *f);

/* The inner set rec[0, len) of the compressed wrapper `w`, decompressed, read with the checks of
 * Kafka's deep iterator (a truncated tail dropped, as Kafka does): its message count, its first
 * offset and the base a v1 wrapper adds to its relative inner offsets (both absolute).  0; -1
 * with *f positioned in rec (an inner message's fault); -2 with *f positioned in the wrapper's
 * buffer (the set as a whole). */
int kb_legacy_read_inner_set(const kb_legacy_msg *w, const uint8_t *rec, size_t len, int32_t *count,
                             int64_t *first_offset, int64_t *base, kb_fault *f);

#endif
