/* Columnar decoding: records of every magic into Arrow-layout arrays, batch by batch -- check its
 * CRC, measure it, make room, fill it -- so each batch is read while it is in cache, the arrays
 * grow at most a few times (sized from the first batch, then doubling) and no per-record object is
 * ever made. */
#ifndef KB_COLUMNS_H
#define KB_COLUMNS_H

#include <stddef.h>
#include <stdint.h>

#include "kb_legacy.h"
#include "kb_v2.h"

struct kb_ranges; /* kb_ranges.h */

typedef struct {
    int64_t records;
    int64_t key_bytes;
    int64_t value_bytes;
    int64_t headers;
    int64_t header_key_bytes;
    int64_t header_value_bytes;
} kb_column_sizes;

/* One batch of the entry table: what the measuring pass learned of it, all the fill needs. */
typedef struct {
    const uint8_t *records; /* where its records are: the input, or the payload decompressed */
    size_t start, limit;    /* the records' bytes in `records` */
    int32_t count;          /* v2: records to fill (v0/v1: the set is walked to its end) */
    int32_t buffer;         /* the Arrow data buffer that binary views of `records` point into */
    int32_t entry;          /* the entry's number in its row (the batch_index column) */
    int crc_pending;        /* an uncompressed v2 batch whose CRC-32C is checked just before its fill,
                             * while its bytes are in cache (kb_columns_add) */
    int64_t position;       /* the entry's byte position in its row (batch_position) */
    int magic;
    kb_v2_header h;         /* magic 2: its header */
    kb_legacy_msg m;        /* magic 0/1: the message, or the compressed wrapper of the set */
    int64_t offset_base;    /* magic 0/1: added to offset fields (a v1 wrapper's relative offsets) */
    int64_t first_offset;   /* magic 0/1: the first record's offset (the base_offset column) */
    const struct kb_ranges *ranges; /* records out of range are measured but not filled (a fetch's first
                             * batch holds records before the fetch offset; a log read's ranges); NULL
                             * (as a zeroed batch is): every record is filled */
} kb_column_batch;

/* Arrow buffers (offsets arrays have one more slot than rows, bitmaps -- validity and the two
 * boolean columns -- start zeroed) and the fill cursors.  When key_views / value_views
 * are set, keys / values are written as Arrow binary views (16 bytes each)
 * pointing into the batch's `records` (data buffer `buffer`) instead of being
 * copied; positions must then fit an int32.  The batch columns hold each
 * record's batch's value. */
typedef struct {
    uint8_t *key_views;
    uint8_t *value_views;
    int64_t *offset;
    int64_t *timestamp;
    int32_t *sequence;
    int32_t *batch_index;
    int64_t *batch_position;
    int64_t *base_offset;
    int32_t *partition_leader_epoch;
    int64_t *producer_id;
    int16_t *producer_epoch;
    uint8_t *is_transactional; /* bitmaps, as Arrow booleans are */
    uint8_t *is_control;
    int8_t *timestamp_type;  /* kb_timestamp_type: an index into kb_timestamp_type_names */
    int32_t *timestamp_type_id; /* KB_LAYOUT_SPARK_TIME: Kafka's id instead (-1 none, 0 CreateTime, 1 LogAppendTime) */
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
    int layout;              /* KB_LAYOUT_* bits (0: to_arrow's own) */
} kb_columns;

/* Column layouts (kb_columns.layout): Spark's Kafka source's timestamps -- microseconds (wrapping as
 * Spark's cast does) and timestamp_type_id in place of timestamp_type --, and its columns alone: of
 * the batch columns only partition_leader_epoch (the others stay NULL). */
#define KB_LAYOUT_SPARK_TIME 1
#define KB_LAYOUT_SPARK_ONLY 2

/* What the measuring walk read of one record and of one header: the fill copies from there
 * instead of reading every varint a second time. */
typedef struct {
    int64_t timestamp_delta;
    size_t key, value, headers;
    int32_t offset_delta, key_len, value_len, header_count;
} kb_record_at;

typedef struct {
    size_t key, value;
    int32_t key_len, value_len;
} kb_header_at;

/* The batch being added's records and headers as measured (grown as needed, reused). */
typedef struct {
    kb_record_at *records;
    kb_header_at *headers;
    int64_t records_cap, headers_cap;
} kb_column_scratch;

/* Adds the sizes of the `count` records in buf[start, limit) to *z, and (`keep` not NULL) what
 * it read of each record to *keep.  Returns 0, -1 with the first fault and its record index, or
 * KB_COLUMNS_NO_MEMORY. */
int kb_columns_measure(const uint8_t *buf, size_t start, size_t limit, int32_t count, kb_reader reader,
                       kb_column_sizes *z, kb_fault *f, int32_t *record_index, kb_column_scratch *keep);

/* The same for magic 0/1: the messages of buf[start, limit), an inner message set or one
 * uncompressed entry (a truncated tail is dropped, as Kafka does). */
int kb_legacy_columns_measure(const uint8_t *buf, size_t start, size_t limit, kb_column_sizes *z, kb_fault *f,
                              int32_t *record_index);

/* Forgets the rows from `row` and the headers from `header_row` on (a row that failed after some
 * of its batches were filled): their bits are cleared and the cursors moved back. */
void kb_columns_rewind(kb_columns *c, int64_t row, int64_t header_row);

/* The columns of one decode in buffers of their own (malloc), with their capacities. */
typedef struct {
    kb_columns c;
    kb_column_scratch scratch;
    int views;                     /* keys and values as binary views */
    int count_only;                /* rows counted, none written (a query that reads no column): each batch is
                                    * measured and checked as for a fill; the arrays stay unallocated */
    int64_t rows_cap, headers_cap; /* rows / headers the arrays have room for */
    int64_t key_cap, value_cap, hkey_cap, hvalue_cap; /* data bytes */
} kb_column_store;

#define KB_COLUMNS_NO_MEMORY (-2)
#define KB_COLUMNS_TOO_LARGE (-3) /* a binary column past 2^31 - 1 bytes, or more headers than that */

/* Checks the CRC-32C of a batch with crc_pending, measures the batch, makes room for it (the first
 * time for `expect` times its sizes) and fills it.  0; -1 with the fault and its record index;
 * KB_COLUMNS_NO_MEMORY; KB_COLUMNS_TOO_LARGE.  On failure nothing of the batch is written. */
int kb_columns_add(kb_column_store *s, const kb_column_batch *b, int64_t expect, kb_fault *f,
                   int32_t *record_index);

/* Gives every array its final size (rows and headers written). */
int kb_column_store_trim(kb_column_store *s);

void kb_column_store_free(kb_column_store *s);

#endif
