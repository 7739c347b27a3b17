#include "kb_kafka.h"

const kb_kafka_error kb_kafka_errors[] = {
#define KB_ERROR(name, code, error_class, exception) {#name, code, error_class, exception},
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
