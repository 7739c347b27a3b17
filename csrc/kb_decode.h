/* One entry's records into Arrow columns, whatever its magic: the framing and checks a reader
 * makes, the payload decompressed through the host's codecs, the records filled
 * (kb_columns_add).  What a host without its own orchestration -- the JVM's segment reader --
 * needs to decode a log; a fault is the entry's alone, so a caller can go on with the next one. */
#ifndef KB_DECODE_H
#define KB_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "kb_columns.h"
#include "kb_v2.h"
#include "kb_validate.h" /* kb_decompress_fn */

typedef struct {
    int verify_crc;
    kb_decompress_fn decompress; /* NULL: a compressed entry is a fault (batch.decompression_failed) */
    void *ctx;
    const struct kb_ranges *ranges; /* NULL: every record; else only those in range are filled (kb_ranges.h) */
} kb_decode_opts;

/* Where a fault's position points (kb_decode_entry's *where). */
typedef enum {
    KB_FAULT_IN_BUFFER = 0,  /* f->pos is a position in buf */
    KB_FAULT_IN_PAYLOAD = 1, /* f->pos is in the decompressed payload of the entry's records */
} kb_fault_place;

/* The first offset of the complete v0/v1 entry `e`: its own, or a compressed wrapper's inner
 * set's (decompressed through `o`; its CRC not checked).  0, or -1 with *f. */
int kb_decode_legacy_first_offset(const uint8_t *buf, const kb_entry *e, const kb_decode_opts *o, int64_t *first,
                                  kb_fault *f);

/* Decodes the complete entry `e` of buf (as kb_next_entry / kb_next_entry_resync found it) into
 * `s`: its records get batch_index `entry` and batch_position `position`.  `expect`: as
 * kb_columns_add takes it.  Returns kb_columns_add's answers (0; -1 with *f, *where and
 * *record_index; KB_COLUMNS_NO_MEMORY; KB_COLUMNS_TOO_LARGE); on failure nothing is written. */
int kb_decode_entry(kb_column_store *s, const uint8_t *buf, const kb_entry *e, int32_t entry, int64_t position,
                    const kb_decode_opts *o, int64_t expect, kb_fault *f, kb_fault_place *where,
                    int32_t *record_index);

/* The records of one row -- the entries of buf[0, len) -- into `s`, as the readers take a buffer
 * (pykbatch's decode_array, kbatch_decode): entries walked with lying sizes found
 * (kb_next_entry_resync), an incomplete last entry ignored (a truncated tail), every entry decoded
 * (kb_decode_entry).  Lost framing or an entry that fails fails the row: -1 with *f, *where
 * (KB_FAULT_IN_BUFFER: f->pos in buf) and the failing entry's number in *entry; nothing of the row
 * stays in `s`.  0; KB_COLUMNS_NO_MEMORY; KB_COLUMNS_TOO_LARGE.  *expect: kb_columns_add's, kept
 * between rows (1 after the first batch). */
int kb_decode_row(kb_column_store *s, const uint8_t *buf, size_t len, const kb_decode_opts *o, int64_t *expect,
                  kb_fault *f, kb_fault_place *where, int32_t *record_index, int32_t *entry);

/* An entry's header as kbatch_batch_info gives it (iter_batches' attributes, verify_crc off): a
 * v0/v1 entry carries Kafka's "none" values in the v2 fields and no record count, and a compressed
 * wrapper's base offset is its inner set's first (decompressed through o to find it). */
typedef struct {
    int64_t position, size, base_offset, last_offset, max_timestamp, producer_id, crc;
    int32_t record_count;          /* a v0/v1 entry: -1 (none); a v2 batch: its header's */
    int32_t base_sequence, partition_leader_epoch;
    int16_t producer_epoch;
    int8_t magic, codec, timestamp_type; /* timestamp_type: kb_timestamp_type's index */
    uint8_t is_transactional, is_control, is_valid;
} kb_entry_info;

/* The header of the entry at *pos of buf[0, len) into *out, *pos moved past it: 1.  0 where the
 * walk ends -- the end, an incomplete last entry, or a fault (framing, a header that does not
 * parse, a wrapper whose inner set cannot be read: *f says which) -- as iter_batches ends there:
 * the headers before it are still worth having. */
int kb_entry_info_next(const uint8_t *buf, size_t len, size_t *pos, const kb_decode_opts *o, kb_entry_info *out,
                       kb_fault *f);

#endif
