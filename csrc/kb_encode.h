/* Encoder for uncompressed v2 record batches. */
#ifndef KB_ENCODE_H
#define KB_ENCODE_H

#include <stddef.h>
#include <stdint.h>

#include "kb_v2.h"

typedef struct {
    const uint8_t *key;
    int32_t key_len;    /* must be >= 0 (header keys cannot be null) */
    const uint8_t *value;
    int32_t value_len;  /* < 0: null */
} kb_header_in;

typedef struct {
    const uint8_t *key;
    int32_t key_len;    /* < 0: null */
    const uint8_t *value;
    int32_t value_len;  /* < 0: null */
    const kb_header_in *headers;
    int32_t header_count;
    int8_t attributes;
    int64_t timestamp_delta;
    int32_t offset_delta;
} kb_record_in;

/* Body length of a record (what its length varint holds), or -1 when it
 * does not fit an int32. */
int64_t kb_v2_record_body_size(const kb_record_in *r);

/* Size of the records area (what a codec compresses), or -1 past an int32. */
int64_t kb_v2_records_size(const kb_record_in *records, size_t n);

/* Writes the records area (kb_v2_records_size bytes) at `out`. */
void kb_v2_write_records(const kb_record_in *records, size_t n, uint8_t *out);

/* Writes the 61-byte header of a batch whose `size` bytes (header included) are at
 * `batch`, the records or their compressed payload already in place after it.  Every field
 * comes from *h except `length`, `magic` (2) and `crc`, which are computed. */
void kb_v2_write_header(const kb_v2_header *h, uint8_t *batch, size_t size);

/* Size of a whole uncompressed batch, or -1 when it does not fit an int32 length. */
int64_t kb_v2_batch_size(const kb_record_in *records, size_t n);

/* Writes an uncompressed batch (kb_v2_batch_size bytes): records, then header. */
void kb_v2_encode(const kb_v2_header *h, const kb_record_in *records, size_t n, uint8_t *out);

/* Gives a whole v2 batch of `size` bytes a producer's id, epoch and first sequence (a producer
 * builds its batch before it knows them, or sends it again after an earlier batch shrank) and
 * recomputes its CRC. */
void kb_v2_restamp(uint8_t *batch, size_t size, int64_t producer_id, int16_t producer_epoch,
                   int32_t base_sequence);

#endif
