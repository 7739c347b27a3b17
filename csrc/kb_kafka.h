/* Kafka's vocabulary, each fact once: error codes (kb_kafka_errors.def), compression codec ids
 * and names, timestamp types.  The C core uses the enums; pykbatch/_catalogue.pyx hands the
 * tables to Python, so no Python module writes a code, a codec or a name again. */
#ifndef KB_KAFKA_H
#define KB_KAFKA_H

#include <stddef.h>
#include <stdint.h>

/* Kafka error codes: KB_CORRUPT_MESSAGE = 2, ... */
enum {
#define KB_ERROR(name, code, error_class, actions, exception) KB_##name = code,
#include "kb_kafka_errors.def"
#undef KB_ERROR
};

typedef struct {
    const char *name;        /* "CORRUPT_MESSAGE" */
    int16_t code;
    const char *error_class; /* "retriable", "abortable" or "fatal" */
    const char *actions;     /* space-separated: "refresh", "possibly_persisted" (kb_kafka_errors.def) */
    const char *exception;   /* Kafka's exception class, "" for NONE */
} kb_kafka_error;

extern const kb_kafka_error kb_kafka_errors[];
extern const size_t kb_kafka_error_count;

/* Compression codecs: the low three bits of a batch's (or a v0/v1 message's) attributes.
 * X(NAME, id, the name Kafka prints) -- ids from KB_CODEC_COUNT up are unknown codecs. */
#define KB_CODECS(X) \
    X(NONE, 0, "none") \
    X(GZIP, 1, "gzip") \
    X(SNAPPY, 2, "snappy") \
    X(LZ4, 3, "lz4") \
    X(ZSTD, 4, "zstd")

typedef enum {
#define KB_CODEC_ENUM(name, id, text) KB_CODEC_##name = id,
    KB_CODECS(KB_CODEC_ENUM)
#undef KB_CODEC_ENUM
    KB_CODEC_COUNT
} kb_codec;

extern const char *const kb_codec_names[KB_CODEC_COUNT];

/* Control record types: the int16 after the version in a control record's key
 * (ControlRecordType).  X(NAME, id) -- other ids are UNKNOWN. */
#define KB_CONTROL_TYPES(X) \
    X(ABORT, 0) \
    X(COMMIT, 1) \
    X(LEADER_CHANGE, 2) \
    X(SNAPSHOT_HEADER, 3) \
    X(SNAPSHOT_FOOTER, 4) \
    X(KRAFT_VERSION, 5) \
    X(KRAFT_VOTERS, 6)

typedef enum {
#define KB_CONTROL_ENUM(name, id) KB_CONTROL_##name = id,
    KB_CONTROL_TYPES(KB_CONTROL_ENUM)
#undef KB_CONTROL_ENUM
    KB_CONTROL_COUNT
} kb_control_type;

extern const char *const kb_control_type_names[KB_CONTROL_COUNT];

/* Timestamp types: attribute bit 3 of v1 messages and v2 batches; v0 has none (the third name). */
extern const char *const kb_timestamp_type_names[3];

static inline int kb_timestamp_type(int magic, int attributes)
{
    return magic == 0 ? 2 : (attributes >> 3) & 1;
}

#endif
