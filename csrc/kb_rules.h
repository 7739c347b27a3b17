/* Rule ids of every check the core performs, with Kafka's error code.
 *
 * The numeric values are internal; the stable names users see (e.g.
 * "batch.crc_mismatch") and the message templates live in
 * pykbatch/_rules.py, indexed by these values.  Append new rules at the end.
 */
#ifndef KB_RULES_H
#define KB_RULES_H

#include <stdint.h>

/* Kafka error codes (org.apache.kafka.common.protocol.Errors). */
enum {
    KB_UNKNOWN_SERVER_ERROR = -1,
    KB_NONE = 0,
    KB_CORRUPT_MESSAGE = 2,
    KB_MESSAGE_TOO_LARGE = 10,
    KB_RECORD_LIST_TOO_LARGE = 18,
    KB_INVALID_TIMESTAMP = 32,
    KB_UNSUPPORTED_FOR_MESSAGE_FORMAT = 43,
    KB_UNSUPPORTED_COMPRESSION_TYPE = 76,
    KB_INVALID_RECORD = 87,
};

typedef enum {
    KB_RULE_NONE = 0,
    /* framing of the entry sequence (offset + size + ... + magic) */
    KB_RULE_SIZE_TOO_SMALL,          /* size < 14: no way to find the next entry */
    KB_RULE_INVALID_MAGIC,           /* magic not 0, 1 or 2 */
    /* v2 batch header */
    KB_RULE_BATCH_TOO_SMALL,         /* sizeInBytes < 61 */
    KB_RULE_CRC_MISMATCH,
    KB_RULE_UNKNOWN_CODEC,           /* attributes & 7 in 5..7 */
    KB_RULE_NEGATIVE_RECORD_COUNT,   /* iterator: "Found invalid record count" */
    KB_RULE_INVALID_OFFSET_RANGE,    /* B2: lastOffsetDelta < 0 */
    KB_RULE_INVALID_RECORD_COUNT,    /* B3: count <= 0 (client) */
    KB_RULE_COUNT_OFFSET_MISMATCH,   /* B4: lastOffsetDelta + 1 != count (client); > (log) */
    KB_RULE_PREMATURE_EOF,           /* fewer records than the count */
    KB_RULE_RECORDS_REMAINING,       /* bytes left after `count` records */
    KB_RULE_MAX_TIMESTAMP_MISMATCH,  /* CreateTime maxTimestamp != max record timestamp */
    /* one record */
    KB_RULE_RECORD_LENGTH_EXCEEDS,   /* body length > bytes left in the batch */
    KB_RULE_RECORD_STRUCTURE,        /* a field runs past the end of the batch */
    KB_RULE_VARINT_TOO_LONG,         /* 5th (10th) varint (varlong) byte continues */
    KB_RULE_RECORD_SIZE_MISMATCH,    /* bytes read != declared body length */
    KB_RULE_NEGATIVE_HEADER_COUNT,
    KB_RULE_HEADER_COUNT_EXCEEDS,    /* header count > bytes left in the batch */
    KB_RULE_NEGATIVE_HEADER_KEY,
    KB_RULE_OFFSET_NOT_INCREASING,   /* offsetDelta <= previous record's */
    KB_RULE_OFFSET_BEYOND_LAST,      /* offsetDelta > lastOffsetDelta */
    KB_RULE_OFFSET_NOT_INDEX,        /* producer-built: offsetDelta != index */
    KB_RULE_TIMESTAMP_ABOVE_MAX,     /* CreateTime record timestamp > maxTimestamp */
    /* compressed payloads (the decompressor reports these) */
    KB_RULE_DECOMPRESSION_FAILED,    /* the codec rejected the payload */
    KB_RULE_DECOMPRESSED_TOO_LARGE,  /* output would pass the configured cap */
    /* magic 0 and 1 messages and compressed wrapper message sets */
    KB_RULE_LEGACY_TOO_SMALL,        /* message size < 14: no CRC to read */
    KB_RULE_LEGACY_ZSTD,             /* zstd wrapper with magic < 2 */
    KB_RULE_LEGACY_NULL_WRAPPER,     /* compressed wrapper with a null value */
    KB_RULE_LEGACY_NO_INNER,         /* compressed wrapper holding no message */
    KB_RULE_LEGACY_INNER_TOO_SMALL,  /* inner entry size < 14 */
    KB_RULE_LEGACY_INNER_COMPRESSED, /* nested compression */
    KB_RULE_LEGACY_WRAPPER_OFFSET,   /* v1 wrapper offset below the last inner offset */
    KB_RULE_LEGACY_INNER_MAGIC,      /* inner magic differs from the wrapper's */
    KB_RULE_LEGACY_INNER_TRUNCATED,  /* the inner message set ends inside a message */
    /* LogValidator's per-record rules (validateRecord) and client-only batch checks */
    KB_RULE_COMPACTED_NO_KEY,        /* a compacted topic needs keys */
    KB_RULE_TIMESTAMP_OUT_OF_RANGE,  /* outside [now - before, now + after] (KIP-937) */
    KB_RULE_PRODUCER_LOG_APPEND_TIME,/* a producer set the LogAppendTime type */
    KB_RULE_CONTROL_FROM_CLIENT,     /* B5: clients may not write control batches */
    KB_RULE_INVALID_SEQUENCE,        /* B6: a producer id with a negative base sequence */
    /* one append as a whole (analyzeAndValidateRecords, ProduceRequest.validateRecords, LogValidator) */
    KB_RULE_BATCH_TOO_LARGE,         /* sizeInBytes > max.message.bytes */
    KB_RULE_BASE_OFFSET_NOT_ZERO,    /* a client's v2 batch with baseOffset != 0 */
    KB_RULE_REQUEST_NO_BATCH,        /* produce request: no complete batch */
    KB_RULE_REQUEST_NOT_MAGIC_2,     /* produce request: first batch not magic 2 */
    KB_RULE_REQUEST_ZSTD,            /* produce request < v7 with zstd */
    KB_RULE_REQUEST_MANY_BATCHES,    /* produce request: a second batch */
    KB_RULE_APPEND_MANY_BATCHES,     /* LogValidator: a second batch after magic 2 / compressed */
    KB_RULE_MAGIC_MISMATCH,          /* B1: batch magic != the first batch's */
    KB_RULE_TRANSACTIONAL_FOR_MAGIC, /* B7: transactional batch, topic record version < 2 */
    KB_RULE_IDEMPOTENT_FOR_MAGIC,    /* B8: producer id, topic record version < 2 */
    KB_RULE_CONVERSION_TRANSACTIONAL,/* down-conversion builder seeded with a transactional batch */
    KB_RULE_CONVERSION_HEADERS,      /* down-conversion of a record with headers */
    KB_RULE_APPEND_TOO_LARGE,        /* the whole append > segment.bytes */
    KB_RULE_INNER_CRC_MISMATCH,      /* an inner message of a compressed v0/v1 wrapper */
    KB_RULE_LEGACY_LOG_APPEND_TIME,  /* a producer set LogAppendTime on a v1 message */
    KB_RULE_RECORD_PAYLOAD_EOF,      /* stream reader: the body runs past the decompressed data */
    KB_RULE_SKIP_EOF,                /* partial reader: a skipped field runs past the data */
    /* inputs on which Kafka's own code fails (UNKNOWN_SERVER_ERROR), and what rebuilding costs */
    KB_RULE_PRODUCER_ID_UNREADABLE,  /* produce: a v2 batch too short to hold its producer id */
    KB_RULE_LENGTH_VARINT_TOO_LONG,  /* uncompressed record: its length varint runs past 5 bytes */
    KB_RULE_PARTIAL_REBUILD,         /* compressed batch kept in its codec, offset deltas not 0..n-1 */
    KB_RULE_REBUILT_TOO_LARGE,       /* the batch the broker re-encodes > max.message.bytes (Python) */
    /* pykbatch's stricter rules */
    KB_RULE_NEGATIVE_LENGTH,         /* a key, value or header value length below -1 */
    KB_RULE_COUNT
} kb_rule;

/* Which field of a record a structure / varint fault was found in. */
typedef enum {
    KB_FIELD_LENGTH = 0,
    KB_FIELD_ATTRIBUTES,
    KB_FIELD_TIMESTAMP_DELTA,
    KB_FIELD_OFFSET_DELTA,
    KB_FIELD_KEY_LENGTH,
    KB_FIELD_KEY,
    KB_FIELD_VALUE_LENGTH,
    KB_FIELD_VALUE,
    KB_FIELD_HEADER_COUNT,
    KB_FIELD_HEADER_KEY_LENGTH,
    KB_FIELD_HEADER_KEY,
    KB_FIELD_HEADER_VALUE_LENGTH,
    KB_FIELD_HEADER_VALUE,
} kb_field;

/* Kafka error code reported for each rule. */
int16_t kb_rule_code(kb_rule rule);

#endif
