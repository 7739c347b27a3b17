/* Columnar decoding: v2 records into Arrow-layout arrays, in two passes
 * (measure, then fill) so every array is allocated once at its exact size
 * and no per-record object is ever made. */
#ifndef KB_COLUMNS_H
#define KB_COLUMNS_H

#include <stddef.h>
#include <stdint.h>

#include "kb_v2.h"

typedef struct {
    int64_t records;
    int64_t key_bytes;
    int64_t value_bytes;
    int64_t headers;
    int64_t header_key_bytes;
    int64_t header_value_bytes;
} kb_column_sizes;

/* Arrow buffers (offsets arrays have one more slot than rows, validity
 * bitmaps start zeroed) and the fill cursors.  When key_views / value_views
 * are set, keys / values are written as Arrow binary views (16 bytes each)
 * pointing into the input buffer instead of being copied; positions must
 * then fit an int32. */
typedef struct {
    uint8_t *key_views;
    uint8_t *value_views;
    int32_t view_buffer; /* Arrow data buffer index the views of the current batch refer to */
    int64_t *offset;
    int64_t *timestamp;
    int32_t *sequence;
    int32_t *batch_index;
    int32_t *key_offsets;
    uint8_t *key_data;
    uint8_t *key_valid;
    int32_t *value_offsets;
    uint8_t *value_data;
    uint8_t *value_valid;
    int32_t *header_offsets;
    int32_t *hkey_offsets;
    uint8_t *hkey_data;
    int32_t *hvalue_offsets;
    uint8_t *hvalue_data;
    uint8_t *hvalue_valid;
    int64_t row;
    int64_t header_row;
} kb_columns;

/* Adds the sizes of the `count` records in buf[start, limit) to *z.
 * Returns 0, or -1 with the first fault and its record index. */
int kb_columns_measure(const uint8_t *buf, size_t start, size_t limit, int32_t count, kb_reader reader,
                       kb_column_sizes *z, kb_fault *f, int32_t *record_index);

/* Appends those records (already measured, so known to be well formed). */
void kb_columns_fill(const uint8_t *buf, size_t start, size_t limit, int32_t count, const kb_v2_header *h,
                     int32_t batch_index, kb_columns *c);

/* The same for magic 0/1: the messages of buf[start, limit), an inner message set or one
 * uncompressed entry (a truncated tail is dropped, as Kafka does). */
int kb_legacy_columns_measure(const uint8_t *buf, size_t start, size_t limit, kb_column_sizes *z, kb_fault *f,
                              int32_t *record_index);

/* offset_base is added to each offset field (v1 wrappers' relative offsets); a timestamp
 * other than INT64_MIN replaces every message's (a LogAppendTime wrapper's). */
void kb_legacy_columns_fill(const uint8_t *buf, size_t start, size_t limit, int64_t offset_base,
                            int64_t timestamp, int32_t batch_index, kb_columns *c);

#endif
