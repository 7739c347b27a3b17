#include "kb_unsafe_row.h"

#include <stdlib.h>
#include <string.h>

static int flat(const kb_avro_colspec *s, const int32_t *conv)
{
    switch (s->kind) {
    case KB_COL_NULL:
    case KB_COL_BOOL:
    case KB_COL_FLOAT32:
    case KB_COL_FLOAT64:
    case KB_COL_FIXED:
        return 1;
    case KB_COL_INT32:
        return conv[0] == KB_CONV_PLAIN;  /* an enum's symbol: AvroDecoder's readers */
    case KB_COL_INT64:
        return conv[0] == KB_CONV_PLAIN || conv[0] == KB_CONV_MILLIS_TO_MICROS || conv[0] == KB_CONV_NANOS_TO_MICROS ||
               conv[0] == KB_CONV_MICROS_TO_NANOS;
    case KB_COL_BINARY:
        return 1;
    case KB_COL_DECIMAL:
        return s->count <= 18 && s->width == 16;  /* Spark keeps it as its unscaled long */
    default:
        return 0;
    }
}

int kb_unsafe_row_fits(const kb_avro_columns *c, const int32_t *conversions)
{
    const kb_avro_colspec *root = &c->specs[c->root];
    if (root->kind != KB_COL_STRUCT)
        return 0;
    for (int32_t m = 0; m < root->count; m++) {
        int32_t col = c->column_children[root->child + m];
        if (!flat(&c->specs[col], conversions + 2 * col))
            return 0;
    }
    return 1;
}

static int valid(const kb_avro_column *col, int64_t i)
{
    return col->valid == NULL || (col->valid[i >> 3] >> (i & 7)) & 1;
}

static int64_t load64(const uint8_t *p)
{
    int64_t v;
    memcpy(&v, p, 8);
    return v;
}

int64_t kb_unsafe_row_write(const kb_avro_columns *c, const int32_t *conversions, uint8_t **buf, size_t *cap)
{
    const kb_avro_colspec *root = &c->specs[c->root];
    int32_t n = root->count;
    size_t bitset = (size_t)((n + 63) / 64) * 8, fixed = bitset + 8 * (size_t)n, size = fixed;
    for (int32_t m = 0; m < n; m++) {  /* the variable part: each value rounded up to 8 bytes */
        int32_t k = c->column_children[root->child + m];
        const kb_avro_column *col = &c->cols[k];
        if (!valid(col, 0))
            continue;
        if (c->specs[k].kind == KB_COL_BINARY)
            size += ((size_t)(col->offsets[1] - col->offsets[0]) + 7) & ~(size_t)7;
        else if (c->specs[k].kind == KB_COL_FIXED)
            size += ((size_t)c->specs[k].width + 7) & ~(size_t)7;
    }
    if (size > *cap) {
        uint8_t *grown = realloc(*buf, size);
        if (grown == NULL)
            return -1;
        *buf = grown;
        *cap = size;
    }
    uint8_t *row = *buf;
    memset(row, 0, size);
    size_t cursor = fixed;
    int root_valid = valid(&c->cols[c->root], 0);
    for (int32_t m = 0; m < n; m++) {
        int32_t k = c->column_children[root->child + m];
        const kb_avro_colspec *s = &c->specs[k];
        const kb_avro_column *col = &c->cols[k];
        uint8_t *slot = row + bitset + 8 * (size_t)m;
        if (!root_valid || s->kind == KB_COL_NULL || !valid(col, 0)) {
            row[(size_t)m >> 3] |= (uint8_t)(1u << (m & 7));  /* the bitset's words are little-endian */
            continue;
        }
        int64_t v;
        switch (s->kind) {
        case KB_COL_BOOL:
            slot[0] = col->data[0] & 1;
            break;
        case KB_COL_INT32:
        case KB_COL_FLOAT32:
            memcpy(slot, col->data, 4);
            break;
        case KB_COL_INT64:
            v = load64(col->data);
            switch (conversions[2 * k]) {
            case KB_CONV_MILLIS_TO_MICROS:
            case KB_CONV_MICROS_TO_NANOS:
                v = (int64_t)((uint64_t)v * 1000u);  /* wraps as Java's multiplication does */
                break;
            case KB_CONV_NANOS_TO_MICROS:
                v /= 1000;
                break;
            }
            memcpy(slot, &v, 8);
            break;
        case KB_COL_FLOAT64:
            memcpy(slot, col->data, 8);
            break;
        case KB_COL_DECIMAL:  /* little-endian two's complement of at most 18 digits: its low 8 bytes */
            memcpy(slot, col->data, 8);
            break;
        case KB_COL_BINARY:
        case KB_COL_FIXED: {
            const uint8_t *from = s->kind == KB_COL_BINARY ? col->data + col->offsets[0] : col->data;
            uint64_t len = s->kind == KB_COL_BINARY ? (uint64_t)(col->offsets[1] - col->offsets[0]) : (uint64_t)s->width;
            memcpy(row + cursor, from, (size_t)len);
            uint64_t offset_and_size = ((uint64_t)cursor << 32) | len;
            memcpy(slot, &offset_and_size, 8);
            cursor += ((size_t)len + 7) & ~(size_t)7;
            break;
        }
        }
    }
    return (int64_t)size;
}
