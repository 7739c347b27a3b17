#include "kb_encode.h"

#include <string.h>

#include "kb_crc32c.h"
#include "kb_wire.h"

static int64_t sized_bytes(int32_t n)
{
    return n < 0 ? kb_sizeof_varint(-1) : kb_sizeof_varint(n) + (int64_t)n;
}

int64_t kb_v2_record_body_size(const kb_record_in *r)
{
    int64_t n = 1 + kb_sizeof_varlong(r->timestamp_delta) + kb_sizeof_varint(r->offset_delta) +
                sized_bytes(r->key_len) + sized_bytes(r->value_len) + kb_sizeof_varint(r->header_count);
    for (int32_t i = 0; i < r->header_count; i++)
        n += sized_bytes(r->headers[i].key_len) + sized_bytes(r->headers[i].value_len);
    return n > INT32_MAX ? -1 : n;
}

int64_t kb_v2_records_size(const kb_record_in *records, size_t n)
{
    int64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t body = kb_v2_record_body_size(&records[i]);
        if (body < 0)
            return -1;
        total += kb_sizeof_varint((int32_t)body) + body;
        if (total > INT32_MAX)
            return -1;
    }
    return total;
}

int64_t kb_v2_batch_size(const kb_record_in *records, size_t n)
{
    int64_t records_size = kb_v2_records_size(records, n);
    if (records_size < 0 || records_size + KB_V2_HEADER_SIZE - KB_LOG_OVERHEAD > INT32_MAX)
        return -1;
    return records_size + KB_V2_HEADER_SIZE;
}

static uint8_t *put_bytes(uint8_t *p, const uint8_t *src, int32_t n)
{
    if (n < 0)
        return kb_write_varint(p, -1);
    p = kb_write_varint(p, n);
    if (n)
        memcpy(p, src, (size_t)n);
    return p + n;
}

void kb_v2_write_records(const kb_record_in *records, size_t n, uint8_t *out)
{
    uint8_t *p = out;
    for (size_t i = 0; i < n; i++) {
        const kb_record_in *r = &records[i];
        p = kb_write_varint(p, (int32_t)kb_v2_record_body_size(r));
        *p++ = (uint8_t)r->attributes;
        p = kb_write_varlong(p, r->timestamp_delta);
        p = kb_write_varint(p, r->offset_delta);
        p = put_bytes(p, r->key, r->key_len);
        p = put_bytes(p, r->value, r->value_len);
        p = kb_write_varint(p, r->header_count);
        for (int32_t k = 0; k < r->header_count; k++) {
            p = put_bytes(p, r->headers[k].key, r->headers[k].key_len);
            p = put_bytes(p, r->headers[k].value, r->headers[k].value_len);
        }
    }
}

void kb_v2_write_header(const kb_v2_header *h, uint8_t *out, size_t size)
{
    kb_store_be64(out, (uint64_t)h->base_offset);
    kb_store_be32(out + 8, (uint32_t)(size - KB_LOG_OVERHEAD));
    kb_store_be32(out + 12, (uint32_t)h->partition_leader_epoch);
    out[16] = 2;
    kb_store_be16(out + 21, (uint16_t)h->attributes);
    kb_store_be32(out + 23, (uint32_t)h->last_offset_delta);
    kb_store_be64(out + 27, (uint64_t)h->base_timestamp);
    kb_store_be64(out + 35, (uint64_t)h->max_timestamp);
    kb_store_be64(out + 43, (uint64_t)h->producer_id);
    kb_store_be16(out + 51, (uint16_t)h->producer_epoch);
    kb_store_be32(out + 53, (uint32_t)h->base_sequence);
    kb_store_be32(out + 57, (uint32_t)h->record_count);
    kb_store_be32(out + 17, kb_v2_compute_crc(out, size));
}

void kb_v2_encode(const kb_v2_header *h, const kb_record_in *records, size_t n, uint8_t *out)
{
    kb_v2_write_records(records, n, out + KB_V2_HEADER_SIZE);
    kb_v2_write_header(h, out, (size_t)kb_v2_batch_size(records, n));
}

void kb_v2_restamp(uint8_t *batch, size_t size, int64_t producer_id, int16_t producer_epoch,
                   int32_t base_sequence)
{
    kb_store_be64(batch + KB_V2_AT_PRODUCER_ID, (uint64_t) producer_id);
    kb_store_be16(batch + KB_V2_AT_PRODUCER_EPOCH, (uint16_t) producer_epoch);
    kb_store_be32(batch + KB_V2_AT_BASE_SEQUENCE, (uint32_t) base_sequence);
    kb_store_be32(batch + KB_V2_AT_CRC, kb_crc32c(0, batch + KB_V2_CRC_START, size - KB_V2_CRC_START));
}
