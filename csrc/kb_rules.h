/* Rule ids of every check pykbatch performs: the enum of csrc/kb_rules.def, which holds each
 * rule's stable id, Kafka error code, stage and messages (pykbatch/_catalogue.pyx gives Python
 * the same table, so a rule is one entry in one file; its enum value is internal).
 */
#ifndef KB_RULES_H
#define KB_RULES_H

#include <stdint.h>

#include "kb_kafka.h"

#define KB_KAFKA 1u      /* Apache Kafka rejects the condition too */
#define KB_PER_RECORD 2u /* reported per record (KIP-467 error_records) */
#define KB_BETWEEN 4u    /* a fault of two entries' order, not of either entry's bytes: which one is wrong is
                            not known, so a repair drops neither (it says what it could not fix) */

typedef enum {
#define KB_RULE(name, id, error, stage, flags, template, detail, reader) KB_RULE_##name,
#include "kb_rules.def"
#undef KB_RULE
    KB_RULE_COUNT
} kb_rule;

typedef struct {
    const char *id;          /* "batch.crc_mismatch" */
    int16_t code;            /* Kafka's error code */
    const char *stage;
    unsigned flags;          /* KB_KAFKA | KB_PER_RECORD | KB_BETWEEN */
    const char *template_text, *detail, *reader_template;
} kb_rule_info;

extern const kb_rule_info kb_rule_table[KB_RULE_COUNT];

/* Which field of a record a structure / varint fault was found in: X(NAME, the name messages use). */
#define KB_RECORD_FIELDS(X) \
    X(LENGTH, "length") \
    X(ATTRIBUTES, "attributes") \
    X(TIMESTAMP_DELTA, "timestampDelta") \
    X(OFFSET_DELTA, "offsetDelta") \
    X(KEY_LENGTH, "keyLength") \
    X(KEY, "key") \
    X(VALUE_LENGTH, "valueLength") \
    X(VALUE, "value") \
    X(HEADER_COUNT, "headerCount") \
    X(HEADER_KEY_LENGTH, "header key length") \
    X(HEADER_KEY, "header key") \
    X(HEADER_VALUE_LENGTH, "header value length") \
    X(HEADER_VALUE, "header value")

typedef enum {
#define KB_FIELD_ENUM(name, text) KB_FIELD_##name,
    KB_RECORD_FIELDS(KB_FIELD_ENUM)
#undef KB_FIELD_ENUM
    KB_FIELD_COUNT
} kb_field;

extern const char *const kb_field_names[KB_FIELD_COUNT];

/* Kafka error code reported for each rule. */
int16_t kb_rule_code(kb_rule rule);

#endif
