#include "kb_kafka.h"

const kb_kafka_error kb_kafka_errors[] = {
#define KB_ERROR(name, code, error_class, actions, exception) {#name, code, error_class, actions, exception},
#include "kb_kafka_errors.def"
#undef KB_ERROR
};

const size_t kb_kafka_error_count = sizeof kb_kafka_errors / sizeof kb_kafka_errors[0];

const char *const kb_codec_names[KB_CODEC_COUNT] = {
#define KB_CODEC_NAME(name, id, text) [id] = text,
    KB_CODECS(KB_CODEC_NAME)
#undef KB_CODEC_NAME
};

const char *const kb_timestamp_type_names[3] = {"CreateTime", "LogAppendTime", "NoTimestampType"};

const char *const kb_control_type_names[KB_CONTROL_COUNT] = {
#define KB_CONTROL_NAME(name, id) [id] = #name,
    KB_CONTROL_TYPES(KB_CONTROL_NAME)
#undef KB_CONTROL_NAME
};
