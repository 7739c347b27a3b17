# Declarations of the C core (csrc/).  C names keep their kb_ prefix so they
# never clash with Python names.
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t


cdef extern from "kb_wire.h" nogil:
    int kb_read_varint(const uint8_t *p, const uint8_t *end, int32_t *out)
    int kb_read_uvarint(const uint8_t *p, const uint8_t *end, uint32_t *out)
    int kb_read_varlong(const uint8_t *p, const uint8_t *end, int64_t *out)
    int64_t kb_wrap_add64(int64_t a, int64_t b)
    int32_t kb_increment_sequence(int32_t base, int32_t delta)
    uint16_t kb_load_be16(const uint8_t *p)
    uint32_t kb_load_be32(const uint8_t *p)
    uint64_t kb_load_be64(const uint8_t *p)
    void kb_store_be16(uint8_t *p, uint16_t v)
    void kb_store_be32(uint8_t *p, uint32_t v)
    void kb_store_be64(uint8_t *p, uint64_t v)
    int kb_sizeof_uvarint(uint32_t v)
    uint8_t *kb_write_uvarint(uint8_t *p, uint32_t v)


cdef extern from "kb_crc32c.h" nogil:
    void kb_crc32c_init()
    uint32_t kb_crc32c(uint32_t crc, const uint8_t *data, size_t n)
    uint32_t kb_crc32c_sw(uint32_t crc, const uint8_t *data, size_t n)
    const char *kb_crc32c_impl()


cdef extern from "kb_kafka.h" nogil:
    enum: KB_CONTROL_ABORT
    enum: KB_CONTROL_COMMIT
    ctypedef enum kb_codec:
        KB_CODEC_NONE
        KB_CODEC_ZSTD
        KB_CODEC_COUNT


cdef extern from "kb_rules.h" nogil:
    ctypedef enum kb_rule:
        KB_RULE_NONE
        KB_RULE_PREMATURE_EOF
        KB_RULE_RECORDS_REMAINING
        KB_RULE_LEGACY_NO_INNER
        KB_RULE_LEGACY_INNER_COMPRESSED
        KB_RULE_LEGACY_WRAPPER_OFFSET
        KB_RULE_LEGACY_NULL_WRAPPER
        KB_RULE_LEGACY_ZSTD
        KB_RULE_UNKNOWN_CODEC
        KB_RULE_COUNT
    int16_t kb_rule_code(kb_rule rule)


cdef extern from "kb_v2.h" nogil:
    enum:
        KB_LOG_OVERHEAD
        KB_V2_HEADER_SIZE
        KB_V2_AT_CRC
        KB_V2_CRC_START
        KB_ATTR_CODEC_MASK
        KB_ATTR_LOG_APPEND_TIME
        KB_ATTR_TRANSACTIONAL
        KB_ATTR_CONTROL
        KB_ATTR_DELETE_HORIZON

    ctypedef struct kb_fault:
        kb_rule rule
        size_t pos
        int64_t args[3]

    ctypedef enum kb_entry_status:
        KB_ENTRY_OK
        KB_ENTRY_END
        KB_ENTRY_TRUNCATED
        KB_ENTRY_CORRUPT
        KB_ENTRY_LOST

    ctypedef struct kb_entry:
        size_t pos
        size_t size
        int magic

    kb_entry_status kb_next_entry(const uint8_t *buf, size_t len, size_t pos, kb_entry *e, kb_fault *f)

    ctypedef struct kb_v2_header:
        int64_t base_offset
        int32_t length
        int32_t partition_leader_epoch
        int8_t magic
        uint32_t crc
        int16_t attributes
        int32_t last_offset_delta
        int64_t base_timestamp
        int64_t max_timestamp
        int64_t producer_id
        int16_t producer_epoch
        int32_t base_sequence
        int32_t record_count

    void kb_v2_read_header(const uint8_t *p, kb_v2_header *h)
    uint32_t kb_v2_compute_crc(const uint8_t *entry, size_t size)
    int kb_v2_check_entry(const uint8_t *buf, size_t pos, size_t size, int verify_crc, kb_v2_header *h,
                          kb_fault *f)
    int kb_v2_check_walkable(const kb_v2_header *h, size_t pos, kb_fault *f)
    int64_t kb_v2_record_timestamp(const kb_v2_header *h, int64_t timestamp_delta)

    ctypedef struct kb_record:
        size_t pos
        int32_t length
        int8_t attributes
        int64_t timestamp_delta
        int32_t offset_delta
        int offset_known
        int32_t key_len
        size_t key
        int32_t value_len
        size_t value
        int32_t header_count
        size_t headers
        size_t end

    int kb_v2_read_record(const uint8_t *buf, size_t pos, size_t limit, kb_record *r, kb_fault *f,
                          size_t *next)

    ctypedef enum kb_reader:
        KB_READER_IN_PLACE
        KB_READER_STREAM
        KB_READER_PARTIAL
    kb_reader kb_v2_consumer_reader(int codec)
    int kb_v2_read_record_by(kb_reader reader, const uint8_t *buf, size_t pos, size_t limit, kb_record *r,
                             kb_fault *f, size_t *next)
    int kb_v2_walk_step(size_t pos, size_t limit, int32_t index, int32_t count, kb_fault *f)
    int kb_v2_walk_prefix(const uint8_t *buf, size_t limit, int32_t count, kb_reader reader, kb_fault *f)
    size_t kb_v2_read_header_kv(const uint8_t *buf, size_t pos, size_t limit, size_t *key,
                                int32_t *key_len, size_t *value, int32_t *value_len)


cdef extern from "kb_resync.h" nogil:
    int kb_entry_sound(const uint8_t *buf, size_t len, size_t pos, int v2_only)
    int kb_index_entry_trusted(const uint8_t *buf, size_t len, int64_t position, int64_t segment_base, int64_t offset)
    int64_t kb_next_sound_batch(const uint8_t *buf, size_t len, size_t start)
    int64_t kb_next_sound_entry(const uint8_t *buf, size_t len, size_t start, int v2_only)
    int KB_RESYNC_LYING_SIZES
    int KB_RESYNC_ZERO_TAIL
    int kb_resync_flags(int strict, int log)
    kb_entry_status kb_next_entry_resync(const uint8_t *buf, size_t len, size_t pos, int flags, kb_entry *e,
                                         kb_fault *f)


cdef extern from "kb_crc32.h" nogil:
    uint32_t kb_crc32(uint32_t crc, const uint8_t *data, size_t n)
    uint32_t kb_crc32_sw(uint32_t crc, const uint8_t *data, size_t n)
    const char *kb_crc32_impl()


cdef extern from "kb_legacy.h" nogil:
    ctypedef struct kb_legacy_msg:
        int64_t offset
        size_t pos
        size_t size
        uint32_t crc
        int8_t magic
        int8_t attributes
        int64_t timestamp
        int32_t key_len
        size_t key
        int32_t value_len
        size_t value

    int kb_legacy_read(const uint8_t *buf, size_t pos, size_t size, kb_legacy_msg *m, kb_fault *f)
    uint32_t kb_legacy_compute_crc(const uint8_t *buf, const kb_legacy_msg *m)
    int64_t kb_legacy_timestamp(const kb_legacy_msg *w, const kb_legacy_msg *m)
    int kb_legacy_check_crc(const uint8_t *buf, const kb_legacy_msg *m, kb_fault *f)
    int kb_legacy_check_wrapper(const kb_legacy_msg *w, kb_fault *f)
    int kb_legacy_check_inner(const kb_legacy_msg *m, kb_fault *f)
    int kb_legacy_check_inner_set(const kb_legacy_msg *w, int32_t count, int64_t last_inner_offset, kb_fault *f)

    ctypedef enum kb_inner_status:
        KB_INNER_MSG
        KB_INNER_END
        KB_INNER_TRUNCATED
        KB_INNER_BAD
        KB_INNER_FAULT

    size_t kb_legacy_entry_size(int magic, int32_t key_len, int32_t value_len)
    void kb_legacy_write(uint8_t *out, int64_t offset, int magic, int attributes, int64_t timestamp,
                         const uint8_t *key, int32_t key_len, const uint8_t *value, int32_t value_len)
    kb_inner_status kb_legacy_next(const uint8_t *buf, size_t limit, size_t *p, kb_legacy_msg *m, kb_fault *f)
    int kb_legacy_read_inner_set(const kb_legacy_msg *w, const uint8_t *rec, size_t len, int32_t *count,
                                 int64_t *first_offset, int64_t *base, kb_fault *f)


cdef extern from "kb_validate.h" nogil:
    ctypedef enum kb_origin:
        KB_ORIGIN_CLIENT
        KB_ORIGIN_LOG

    ctypedef int (*kb_decompress_fn)(void *ctx, int codec, int magic, const uint8_t *src, size_t n,
                                     const uint8_t **out, size_t *out_len, kb_fault *f)

    ctypedef struct kb_validate_opts:
        kb_origin origin
        int verify_crc
        int strict
        kb_decompress_fn decompress
        void *decompress_ctx
        int compacted
        int topic_log_append_time
        int64_t now_ms
        int64_t before_max_ms
        int64_t after_max_ms
        int64_t max_batch_bytes
        int64_t max_append_bytes
        int target_magic
        int target_codec
        int single_append
        int produce_version
        void (*progress)(void *ctx, size_t pos) noexcept nogil
        void *progress_ctx
        size_t progress_every

    int64_t KB_NO_OFFSET

    ctypedef struct kb_culprit:
        int64_t pos
        int64_t inner_pos
        int64_t entry_pos
        int64_t args[8]
        int64_t relative_offset
        int64_t first_offset
        int64_t last_offset
        int32_t entry
        int32_t record_index
        int16_t code
        uint16_t rule

    ctypedef struct kb_summary:
        int64_t entries
        int64_t records
        int64_t culprits
        int64_t valid_bytes
        int64_t unwalked
        int64_t tail_pos
        int32_t tail_entry
        int32_t stopped
        int64_t stopped_at
        int64_t lost_bytes
        int64_t rule_counts[KB_RULE_COUNT]

    void kb_validate(const uint8_t *buf, size_t len, const kb_validate_opts *o, kb_culprit *out,
                     size_t cap, kb_summary *s)
    void kb_validate_again(const uint8_t *buf, size_t len, const kb_validate_opts *o, kb_culprit *out,
                     size_t cap, kb_summary *s)


cdef extern from "kb_ranges.h" nogil:
    enum:
        KB_RANGE_FIRST_OFFSET
        KB_RANGE_END_OFFSET
        KB_RANGE_FIRST_TIMESTAMP
        KB_RANGE_END_TIMESTAMP
    ctypedef struct kb_ranges:
        int bounds
        int64_t first_offset
        int64_t end_offset
        int64_t first_timestamp
        int64_t end_timestamp

cdef extern from "kb_columns.h" nogil:
    ctypedef struct kb_column_sizes:
        int64_t records
        int64_t key_bytes
        int64_t value_bytes
        int64_t headers
        int64_t header_key_bytes
        int64_t header_value_bytes

    ctypedef struct kb_column_batch:
        const uint8_t *records
        size_t start
        size_t limit
        int32_t count
        int32_t buffer
        int32_t entry
        int crc_pending
        int64_t position
        int magic
        kb_v2_header h
        kb_legacy_msg m
        int64_t offset_base
        int64_t first_offset
        const kb_ranges *ranges

    ctypedef struct kb_columns:
        uint8_t *key_views
        uint8_t *value_views
        int64_t *offset
        int64_t *timestamp
        int32_t *sequence
        int32_t *batch_index
        int64_t *batch_position
        int64_t *base_offset
        int32_t *partition_leader_epoch
        int64_t *producer_id
        int16_t *producer_epoch
        uint8_t *is_transactional
        uint8_t *is_control
        int8_t *timestamp_type
        int32_t *timestamp_type_id
        int32_t *key_offsets
        uint8_t *key_data
        uint8_t *key_valid
        int32_t *value_offsets
        uint8_t *value_data
        uint8_t *value_valid
        int32_t *header_offsets
        int32_t *hkey_offsets
        uint8_t *hkey_data
        int32_t *hvalue_offsets
        uint8_t *hvalue_data
        uint8_t *hvalue_valid
        int64_t row
        int64_t header_row
        int layout

    enum: KB_LAYOUT_SPARK_TIME
    enum: KB_LAYOUT_SPARK_ONLY

    int kb_legacy_columns_measure(const uint8_t *buf, size_t start, size_t limit, kb_column_sizes *z,
                                  kb_fault *f, int32_t *record_index)
    void kb_columns_rewind(kb_columns *c, int64_t row, int64_t header_row)

    ctypedef struct kb_column_store:
        kb_columns c
        int views
    enum: KB_COLUMNS_NO_MEMORY
    enum: KB_COLUMNS_TOO_LARGE
    int kb_columns_add(kb_column_store *s, const kb_column_batch *b, int64_t expect, kb_fault *f,
                       int32_t *record_index)
    int kb_column_store_trim(kb_column_store *s)
    void kb_column_store_free(kb_column_store *s)


cdef extern from "kb_encode.h" nogil:
    ctypedef struct kb_header_in:
        const uint8_t *key
        int32_t key_len
        const uint8_t *value
        int32_t value_len

    ctypedef struct kb_record_in:
        const uint8_t *key
        int32_t key_len
        const uint8_t *value
        int32_t value_len
        const kb_header_in *headers
        int32_t header_count
        int8_t attributes
        int64_t timestamp_delta
        int32_t offset_delta

    int64_t kb_v2_record_body_size(const kb_record_in *r)
    int64_t kb_v2_records_size(const kb_record_in *records, size_t n)
    void kb_v2_write_records(const kb_record_in *records, size_t n, uint8_t *out)
    void kb_v2_write_header(const kb_v2_header *h, uint8_t *batch, size_t size)
    int64_t kb_v2_batch_size(const kb_record_in *records, size_t n)
    void kb_v2_encode(const kb_v2_header *h, const kb_record_in *records, size_t n, uint8_t *out)
    void kb_v2_restamp(uint8_t *batch, size_t size, int64_t producer_id, int16_t producer_epoch,
                       int32_t base_sequence)


cdef extern from "kb_repair.h" nogil:
    ctypedef int (*kb_compress_fn)(void *ctx, int codec, int magic, const uint8_t *src, size_t n,
                                   const uint8_t **out, size_t *out_len)

    ctypedef struct kb_repair_opts:
        int resync_flags
        int keep_unrepairable
        int keep_offsets
        kb_decompress_fn decompress
        void *decompress_ctx
        kb_compress_fn compress
        void *compress_ctx

    ctypedef struct kb_dropped:
        int32_t entry
        int32_t record_index
        int32_t has_fields
        int32_t key_len
        int32_t value_len
        int32_t magic
        int32_t kept
        int64_t offset
        int64_t timestamp
        size_t key
        size_t value
        size_t raw
        size_t raw_len
        size_t first_culprit
        size_t n_culprits

    ctypedef struct kb_repair_out:
        uint8_t *data
        size_t data_len
        kb_dropped *dropped
        size_t n_dropped
        uint8_t *bytes
        size_t bytes_len
        int32_t *culprit_index
        int32_t unrepairable

    int KB_REPAIR_NO_MEMORY
    int KB_REPAIR_COMPRESS_FAILED

    int kb_repair(const uint8_t *buf, size_t len, const kb_culprit *c, size_t n, const kb_repair_opts *o,
                  kb_repair_out *out)
    void kb_repair_out_free(kb_repair_out *out)


cdef extern from "kb_consume.h" nogil:
    enum: KB_CONSUME_MAX_ABORTED
    ctypedef struct kb_consume_opts:
        int64_t fetch_offset
        int committed
        int64_t last_stable_offset
        int compacted
        const int64_t *aborted
        int32_t aborted_count
        kb_decompress_fn decompress
        void *ctx
    enum: KB_SPAN_READ
    enum: KB_SPAN_COMPACTED
    ctypedef struct kb_span:
        int64_t first
        int64_t last
        int kind
    ctypedef enum kb_consume_status:
        KB_CONSUME_DONE
        KB_CONSUME_CAREFUL
        KB_CONSUME_NO_MEMORY
        KB_CONSUME_TOO_LARGE
    ctypedef struct kb_consume_result:
        int64_t next_offset
        int32_t entries
        size_t tail
        size_t careful_at
        int64_t aborted[KB_CONSUME_MAX_ABORTED]
        int32_t aborted_count
        kb_span *spans
        size_t span_count
        size_t span_cap
    kb_consume_status kb_consume(const uint8_t *buf, size_t len, const kb_consume_opts *o, kb_column_store *s,
                                 kb_consume_result *r)


cdef extern from "kb_control.h" nogil:
    int kb_control_key(const uint8_t *key, int32_t len, size_t pos, int *type, kb_fault *f)
    int kb_control_marker(const uint8_t *value, int32_t len, size_t pos, int32_t *coordinator_epoch, kb_fault *f)


cdef extern from "kb_decode.h" nogil:
    ctypedef struct kb_decode_opts:
        int verify_crc
        kb_decompress_fn decompress
        void *ctx
        const kb_ranges *ranges

cdef extern from "kb_ranges.h" nogil:
    int kb_ranges_keeps_entry(const kb_ranges *r, const uint8_t *buf, const kb_entry *e, int records,
                              const kb_decode_opts *o)


cdef extern from "kb_isolation.h" nogil:
    ctypedef struct kb_producer_set:
        int64_t *ids
        int32_t count
    ctypedef struct kb_isolation:
        int committed
        int bounded
        int64_t last_stable_offset
        int64_t *pending
        int32_t pending_count
        int32_t next_pending
        kb_producer_set aborted
        kb_producer_set undecided
    enum: KB_ISO_KEEP
    enum: KB_ISO_DROP
    enum: KB_ISO_HOLD
    enum: KB_ISO_NO_MEMORY
    int kb_isolation_init(kb_isolation *iso, int committed, const int64_t *last_stable_offset, const int64_t *pairs,
                          int32_t n)
    void kb_isolation_free(kb_isolation *iso)
    int kb_isolation_past_end(const kb_isolation *iso, int64_t base_offset)
    int kb_isolation_reads_marker(const kb_isolation *iso, int64_t producer_id, int control)
    int kb_isolation_decide(kb_isolation *iso, int64_t producer_id, int64_t last_offset, int control, int transactional,
                            int abort_marker)
    int kb_isolation_unreadable(kb_isolation *iso, int64_t last_offset)
    int kb_isolation_add_undecided(kb_isolation *iso, const int64_t *producers, int32_t n)
    int kb_isolation_settle(kb_isolation *iso, const int64_t *aborted, int32_t n, int64_t next_offset)


cdef extern from "kb_shrink_guard.h" nogil:
    int kb_shrink_guard_add(const void *map, size_t len)
    int kb_shrink_guard_hit(int handle)
    int kb_shrink_guard_remove(int handle)
