/* Avro binary data -> Arrow columns (see kb_avro.h), and the schema registries' framing. */
#include "kb_avro.h"
#include "kb_wire.h"

#include <stdlib.h>
#include <string.h>

/* ---- columns ---- */

static int grow_bytes(void **p, size_t old_bytes, size_t new_bytes, int zero)
{
    void *q = realloc(*p, new_bytes ? new_bytes : 1);
    if (!q)
        return KB_AVRO_NO_MEMORY;
    if (zero && new_bytes > old_bytes)
        memset((uint8_t *)q + old_bytes, 0, new_bytes - old_bytes);
    *p = q;
    return 0;
}

static int value_width(const kb_avro_colspec *s)
{
    switch (s->kind) {
    case KB_COL_INT32:
    case KB_COL_FLOAT32:
        return 4;
    case KB_COL_INT64:
    case KB_COL_FLOAT64:
        return 8;
    case KB_COL_FIXED:
    case KB_COL_DECIMAL:
        return s->width;
    default:
        return 0;
    }
}

/* Room for `more` entries past `length` in every buffer of column i. */
static int room(kb_avro_columns *c, int32_t i, int64_t more)
{
    kb_avro_column *col = &c->cols[i];
    const kb_avro_colspec *s = &c->specs[i];
    int64_t need = col->length + more;
    if (need <= col->cap)
        return 0;
    if (need > INT32_MAX)
        return KB_AVRO_TOO_LARGE;
    int64_t cap = col->cap * 2 > need ? col->cap * 2 : need;
    if (cap < 64)
        cap = 64;
    if (cap > INT32_MAX)
        cap = INT32_MAX;
    size_t old_bits = (size_t)(col->cap + 7) / 8, bits = (size_t)(cap + 7) / 8;
    if (s->kind == KB_COL_NULL) {
        col->cap = cap;
        return 0;
    }
    if (s->kind != KB_COL_UNION && grow_bytes((void **)&col->valid, old_bits, bits, 1))
        return KB_AVRO_NO_MEMORY;
    if (s->kind == KB_COL_BOOL && grow_bytes((void **)&col->data, old_bits, bits, 1))
        return KB_AVRO_NO_MEMORY;
    int w = value_width(s);
    if (w && grow_bytes((void **)&col->data, (size_t)col->cap * w, (size_t)cap * w, 0))
        return KB_AVRO_NO_MEMORY;
    if (s->kind == KB_COL_BINARY || s->kind == KB_COL_LIST || s->kind == KB_COL_UNION) {
        int had = col->offsets != NULL;
        if (grow_bytes((void **)&col->offsets, had ? (size_t)(col->cap + 1) * 4 : 0, (size_t)(cap + 1) * 4, 0))
            return KB_AVRO_NO_MEMORY;
        if (!had)
            col->offsets[0] = 0;
    }
    if (s->kind == KB_COL_UNION && grow_bytes((void **)&col->type_ids, (size_t)col->cap, (size_t)cap, 0))
        return KB_AVRO_NO_MEMORY;
    col->cap = cap;
    return 0;
}

static inline void set_bit(uint8_t *bits, int64_t i, int on)
{
    if (on)
        bits[i >> 3] |= (uint8_t)(1u << (i & 7));
    else
        bits[i >> 3] &= (uint8_t)~(1u << (i & 7));
}

static int append_null(kb_avro_columns *c, int32_t i)
{
    kb_avro_column *col = &c->cols[i];
    const kb_avro_colspec *s = &c->specs[i];
    int rc = room(c, i, 1);
    if (rc)
        return rc;
    int64_t n = col->length;
    switch (s->kind) {
    case KB_COL_NULL:
        break;
    case KB_COL_BOOL:
        set_bit(col->data, n, 0);
        break;
    case KB_COL_BINARY:
    case KB_COL_LIST:
        col->offsets[n + 1] = col->offsets[n];
        break;
    case KB_COL_STRUCT:
        for (int32_t m = 0; m < s->count; m++)
            if ((rc = append_null(c, c->column_children[s->child + m])))
                return rc;
        break;
    case KB_COL_UNION: { /* Arrow unions have no validity: a null member 0 stands for it */
        int32_t m = c->column_children[s->child];
        col->type_ids[n] = 0;
        col->offsets[n] = (int32_t)c->cols[m].length;
        col->length++;
        return append_null(c, m);
    }
    default:
        memset(col->data + (size_t)n * value_width(s), 0, (size_t)value_width(s));
    }
    if (s->kind != KB_COL_UNION && s->kind != KB_COL_NULL)
        set_bit(col->valid, n, 0);
    col->nulls++;
    col->length++;
    return 0;
}

int kb_avro_columns_init(kb_avro_columns *c, int64_t rows_hint)
{
    c->cols = calloc((size_t)c->n_columns + 1, sizeof(kb_avro_column));
    c->saved = calloc((size_t)c->n_columns * 3 + 1, sizeof(int64_t));
    if (!c->cols || !c->saved)
        return KB_AVRO_NO_MEMORY;
    if (rows_hint > 0 && c->n_columns > 0)
        return room(c, c->root, rows_hint < INT32_MAX ? rows_hint : INT32_MAX);
    return 0;
}

void kb_avro_columns_free(kb_avro_columns *c)
{
    if (c->cols)
        for (int32_t i = 0; i < c->n_columns; i++) {
            free(c->cols[i].valid);
            free(c->cols[i].data);
            free(c->cols[i].offsets);
            free(c->cols[i].type_ids);
        }
    free(c->cols);
    free(c->saved);
    c->cols = NULL;
    c->saved = NULL;
}

void kb_avro_columns_reset(kb_avro_columns *c)
{
    /* every append sets its validity and boolean bits, on or off: nothing to clear */
    for (int32_t i = 0; i < c->n_columns; i++)
        c->cols[i].length = c->cols[i].nulls = c->cols[i].bytes = 0;
}

int kb_avro_append_null(kb_avro_columns *c)
{
    return append_null(c, c->root);
}

/* ---- reading ---- */

typedef struct {
    const kb_avro_program *prog;
    kb_avro_columns *c;
    const uint8_t *p, *end, *base; /* base: byte 0 of the value (positions are counted from it) */
    kb_fault *f;
    int64_t empty_items;           /* items of no bytes met in this datum */
} reader;

static int fault(reader *r, kb_rule rule, const uint8_t *at, int64_t a0, int64_t a1)
{
    kb_fault_set(r->f, rule, (size_t)(at - r->base), a0, a1, (int64_t)(at - r->base));
    return -1;
}

static int truncated(reader *r, const uint8_t *at, int64_t need)
{
    return fault(r, KB_RULE_VALUE_DATUM_TRUNCATED, at, (int64_t)(r->end - r->base), need - (r->end - at));
}

/* Avro's zigzag varint: at most 5 bytes for an int, 10 for a long (Java's BinaryDecoder). */
static inline int read_zigzag(reader *r, int max_bytes, int64_t *out)
{
    const uint8_t *p = r->p;
    if (__builtin_expect(p < r->end && *p < 0x80, 1)) {
        *out = (int64_t)(*p >> 1) ^ -(int64_t)(*p & 1u);
        r->p = p + 1;
        return 0;
    }
    uint64_t raw = 0;
    for (int i = 0; i < max_bytes; i++) {
        if (p + i >= r->end)
            return truncated(r, p, i + 1);
        uint64_t b = p[i];
        if (i == 9 && b > 1)
            break; /* a long's tenth byte holds its last bit: more would wrap, as an int's fifth is refused */
        raw |= (b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            int64_t v = (int64_t)((raw >> 1) ^ (0ull - (raw & 1u)));
            if (max_bytes == 5 && (v < INT32_MIN || v > INT32_MAX))
                break;
            *out = v;
            r->p = p + i + 1;
            return 0;
        }
    }
    return fault(r, KB_RULE_VALUE_BAD_VARINT, p, max_bytes, max_bytes == 5 ? 32 : 64);
}

/* A length (bytes, string): not negative, not past the datum's end. */
static inline int read_length(reader *r, int64_t *n)
{
    const uint8_t *at = r->p;
    if (read_zigzag(r, 10, n))
        return -1;
    if (*n < 0)
        return fault(r, KB_RULE_VALUE_NEGATIVE_LENGTH, at, *n, 0);
    if (*n > r->end - r->p)
        return truncated(r, r->p, *n);
    return 0;
}

/* UTF-8 as Arrow and Python require it: no overlongs, no surrogates, nothing past U+10FFFF. */
static int utf8_valid(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        while (i + 8 <= n) { /* ASCII eight bytes at a time */
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ull)
                break;
            i += 8;
        }
        if (i >= n)
            break;
        uint8_t b = s[i];
        if (b < 0x80) {
            i++;
            continue;
        }
        size_t len;
        uint32_t cp;
        if (b >= 0xc2 && b <= 0xdf) {
            len = 2;
            cp = b & 0x1f;
        } else if (b >= 0xe0 && b <= 0xef) {
            len = 3;
            cp = b & 0x0f;
        } else if (b >= 0xf0 && b <= 0xf4) {
            len = 4;
            cp = b & 0x07;
        } else {
            return 0;
        }
        if (i + len > n)
            return 0;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
            return 0;
        i += len;
    }
    return 1;
}

static inline int begin(reader *r, int32_t col)
{
    int rc = room(r->c, col, 1);
    if (rc)
        kb_fault_set(r->f, KB_RULE_NONE, (size_t)(r->p - r->base), 0, 0, 0);
    return rc;
}

static inline void valid_entry(kb_avro_column *col)
{
    set_bit(col->valid, col->length, 1);
    col->length++;
}

static int put_bytes(reader *r, int32_t ci, const uint8_t *s, int64_t n)
{
    kb_avro_column *col = &r->c->cols[ci];
    int rc = begin(r, ci);
    if (rc)
        return rc;
    if (col->bytes + n > INT32_MAX)
        return KB_AVRO_TOO_LARGE;
    if (col->bytes + n > col->data_cap) {
        int64_t cap = col->data_cap * 2 > col->bytes + n ? col->data_cap * 2 : col->bytes + n;
        if (cap < 256)
            cap = 256;
        if (grow_bytes((void **)&col->data, (size_t)col->data_cap, (size_t)cap, 0))
            return KB_AVRO_NO_MEMORY;
        col->data_cap = cap;
    }
    if (n > 0) /* an empty string may come before the data buffer exists */
        memcpy(col->data + col->bytes, s, (size_t)n);
    col->bytes += n;
    col->offsets[col->length + 1] = (int32_t)col->bytes;
    valid_entry(col);
    return 0;
}

/* A column's day in its unit: milliseconds (time32) or microseconds (time64). */
#define KB_DAY_MILLIS INT64_C(86400000)

/* An integer into a column (promoted as the column's kind says); a time of day outside a day is
 * refused (Avro's spec; Java's TimeConversions throw, Spark's TIME cannot hold it). */
static int put_number(reader *r, int32_t ci, int64_t iv, double dv, int is_double, const uint8_t *at)
{
    kb_avro_column *col = &r->c->cols[ci];
    const kb_avro_colspec *spec = &r->c->specs[ci];
    if (spec->count == 1 && (spec->kind == KB_COL_INT32 || spec->kind == KB_COL_INT64)) {
        int64_t day = spec->kind == KB_COL_INT32 ? KB_DAY_MILLIS : KB_DAY_MILLIS * 1000;
        if (iv < 0 || iv >= day)
            return fault(r, KB_RULE_VALUE_TIME_OF_DAY, at, iv, day);
    }
    int rc = begin(r, ci);
    if (rc)
        return rc;
    int64_t n = col->length;
    switch (r->c->specs[ci].kind) {
    case KB_COL_INT32:
        ((int32_t *)col->data)[n] = (int32_t)iv;
        break;
    case KB_COL_INT64:
        ((int64_t *)col->data)[n] = iv;
        break;
    case KB_COL_FLOAT32:
        ((float *)col->data)[n] = is_double ? (float)dv : (float)iv;
        break;
    default: /* FLOAT64 (kb_avro_check allows nothing else) */
        ((double *)col->data)[n] = is_double ? dv : (double)iv;
    }
    valid_entry(col);
    return 0;
}

/* Whether the n-byte big-endian two's complement integer at s (n <= 32) is below 10^digits in
 * magnitude: what a decimal of that precision holds (Arrow's arrays and Spark refuse the rest). */
static int decimal_fits(const uint8_t *s, int64_t n, int digits)
{
    if ((8 * n - 1) * 1000 < (int64_t)digits * 3321) /* 2^(8n-1) < 10^digits: always (log2 10 > 3.321) */
        return 1;
    uint32_t mag[9] = {0}, limit[9] = {1};
    int negative = s[0] & 0x80;
    for (int64_t k = 0; k < n; k++) { /* |v|: the bytes, inverted then plus one when negative */
        uint8_t b = negative ? (uint8_t)~s[n - 1 - k] : s[n - 1 - k];
        mag[k / 4] |= (uint32_t)b << (8 * (k % 4));
    }
    for (int j = 0; negative && j < 9; j++)
        if (++mag[j])
            break;
    for (int d = 0; d < digits; d++) {
        uint64_t carry = 0;
        for (int j = 0; j < 9; j++) {
            uint64_t x = (uint64_t)limit[j] * 10 + carry;
            limit[j] = (uint32_t)x;
            carry = x >> 32;
        }
    }
    for (int j = 8; j >= 0; j--)
        if (mag[j] != limit[j])
            return mag[j] < limit[j];
    return 0;
}

/* A big-endian two's complement integer of n bytes into a little-endian column value, refused
 * when it has more digits than the column's precision. */
static int put_decimal(reader *r, int32_t ci, const uint8_t *s, int64_t n, const uint8_t *at)
{
    kb_avro_column *col = &r->c->cols[ci];
    int w = r->c->specs[ci].width, digits = r->c->specs[ci].count;
    int64_t given = n;
    uint8_t sign = n > 0 && (s[0] & 0x80) ? 0xff : 0x00;
    while (n > 1 && s[0] == sign && ((s[1] & 0x80) ? 0xff : 0x00) == sign) { /* redundant sign bytes */
        s++;
        n--;
    }
    if (n > w || (n > 0 && !decimal_fits(s, n, digits)))
        return fault(r, KB_RULE_VALUE_DECIMAL_OVERFLOW, at, given, digits);
    int rc = begin(r, ci);
    if (rc)
        return rc;
    uint8_t *out = col->data + (size_t)col->length * w;
    for (int64_t k = 0; k < n; k++)
        out[k] = s[n - 1 - k];
    memset(out + n, sign, (size_t)(w - n));
    valid_entry(col);
    return 0;
}

static int read_node(reader *r, int32_t ni);

/* Blocks of an array or a map: count, or -count and a byte size; 0 ends them. */
static int read_blocks(reader *r, const kb_avro_node *nd, int map)
{
    const kb_avro_program *prog = r->prog;
    const kb_avro_node *item = &prog->nodes[nd->child];
    int32_t entries = -1, key_col = -1;
    if (nd->col >= 0 && map) {
        const kb_avro_colspec *list = &r->c->specs[nd->col];
        entries = list->child;
        key_col = r->c->column_children[r->c->specs[entries].child];
    }
    int64_t min_item = item->min_bytes + (map ? 1 : 0);
    for (;;) {
        const uint8_t *at = r->p;
        int64_t count = 0;
        if (read_zigzag(r, 10, &count))
            return -1;
        if (count == 0)
            break;
        if (count < 0) {
            int64_t size = 0;
            if (count == INT64_MIN)
                return fault(r, KB_RULE_VALUE_NEGATIVE_LENGTH, at, count, 0);
            count = -count;
            const uint8_t *size_at = r->p;
            if (read_zigzag(r, 10, &size))
                return -1;
            if (size < 0)
                return fault(r, KB_RULE_VALUE_NEGATIVE_LENGTH, size_at, size, 0);
        }
        if (min_item > 0) {
            if (count > (r->end - r->p) / min_item)
                return truncated(r, r->p, count <= INT64_MAX / min_item ? count * min_item : INT64_MAX);
        } else if (count > KB_AVRO_MAX_EMPTY_ITEMS - r->empty_items) {
            return fault(r, KB_RULE_VALUE_TOO_MANY_ITEMS, at, r->empty_items + count, KB_AVRO_MAX_EMPTY_ITEMS);
        } else {
            r->empty_items += count;
        }
        for (int64_t k = 0; k < count; k++) {
            if (map) {
                int64_t n = 0;
                const uint8_t *key_at = r->p;
                if (read_length(r, &n))
                    return -1;
                if (!utf8_valid(r->p, (size_t)n))
                    return fault(r, KB_RULE_VALUE_INVALID_UTF8, key_at, n, 0);
                if (entries >= 0) {
                    int rc = put_bytes(r, key_col, r->p, n);
                    if (!rc)
                        rc = begin(r, entries);
                    if (rc)
                        return rc;
                    valid_entry(&r->c->cols[entries]);
                }
                r->p += n;
            }
            int rc = read_node(r, nd->child);
            if (rc)
                return rc;
        }
    }
    if (nd->col >= 0) {
        kb_avro_column *col = &r->c->cols[nd->col];
        int rc = begin(r, nd->col);
        if (rc)
            return rc;
        int64_t items = r->c->cols[r->c->specs[nd->col].child].length;
        if (items > INT32_MAX)
            return KB_AVRO_TOO_LARGE;
        col->offsets[col->length + 1] = (int32_t)items;
        valid_entry(col);
    }
    return 0;
}

static int read_node(reader *r, int32_t ni)
{
    const kb_avro_program *prog = r->prog;
    const kb_avro_node *nd = &prog->nodes[ni];
    const uint8_t *at = r->p;
    int64_t iv = 0, n = 0;
    int rc;
    switch ((kb_avro_op)nd->op) {
    case KB_AVRO_NULL:
        return nd->col >= 0 ? append_null(r->c, nd->col) : 0;
    case KB_AVRO_BOOLEAN:
        if (r->p >= r->end)
            return truncated(r, at, 1);
        r->p++;
        if (nd->col < 0)
            return 0;
        if ((rc = begin(r, nd->col)))
            return rc;
        set_bit(r->c->cols[nd->col].data, r->c->cols[nd->col].length, *at != 0);
        valid_entry(&r->c->cols[nd->col]);
        return 0;
    case KB_AVRO_INT:
    case KB_AVRO_LONG:
        if (read_zigzag(r, nd->op == KB_AVRO_INT ? 5 : 10, &iv))
            return -1;
        return nd->col >= 0 ? put_number(r, nd->col, iv, 0, 0, at) : 0;
    case KB_AVRO_FLOAT: {
        float fv;
        if (r->end - r->p < 4)
            return truncated(r, at, 4);
        memcpy(&fv, r->p, 4); /* little-endian hosts only (x86_64, aarch64) */
        r->p += 4;
        return nd->col >= 0 ? put_number(r, nd->col, 0, fv, 1, at) : 0;
    }
    case KB_AVRO_DOUBLE: {
        double dv;
        if (r->end - r->p < 8)
            return truncated(r, at, 8);
        memcpy(&dv, r->p, 8);
        r->p += 8;
        return nd->col >= 0 ? put_number(r, nd->col, 0, dv, 1, at) : 0;
    }
    case KB_AVRO_BYTES:
    case KB_AVRO_STRING:
        if (read_length(r, &n))
            return -1;
        if (nd->op == KB_AVRO_STRING && !utf8_valid(r->p, (size_t)n))
            return fault(r, KB_RULE_VALUE_INVALID_UTF8, at, n, 0);
        rc = nd->col >= 0 ? put_bytes(r, nd->col, r->p, n) : 0;
        r->p += n;
        return rc;
    case KB_AVRO_FIXED:
        if (r->end - r->p < nd->count)
            return truncated(r, at, nd->count);
        r->p += nd->count;
        if (nd->col < 0)
            return 0;
        if ((rc = begin(r, nd->col)))
            return rc;
        if (nd->count) /* a fixed of size 0 holds nothing */
            memcpy(r->c->cols[nd->col].data + (size_t)r->c->cols[nd->col].length * nd->count, at, (size_t)nd->count);
        valid_entry(&r->c->cols[nd->col]);
        return 0;
    case KB_AVRO_DECIMAL_BYTES:
        if (read_length(r, &n))
            return -1;
        r->p += n;
        return nd->col >= 0 ? put_decimal(r, nd->col, r->p - n, n, at) : 0;
    case KB_AVRO_DECIMAL_FIXED:
        if (r->end - r->p < nd->count)
            return truncated(r, at, nd->count);
        r->p += nd->count;
        return nd->col >= 0 ? put_decimal(r, nd->col, at, nd->count, at) : 0;
    case KB_AVRO_ENUM: {
        if (read_zigzag(r, 5, &iv))
            return -1;
        if (iv < 0 || iv >= nd->count)
            return fault(r, KB_RULE_VALUE_ENUM_INDEX, at, iv, nd->count);
        int32_t mapped = prog->table[nd->aux + iv];
        if (mapped < 0)
            return fault(r, KB_RULE_VALUE_SCHEMA_MISMATCH, at, ni, iv);
        return nd->col >= 0 ? put_number(r, nd->col, mapped, 0, 0, at) : 0;
    }
    case KB_AVRO_RECORD:
        for (int32_t k = 0; k < nd->count; k++)
            if ((rc = read_node(r, prog->children[nd->child + k])))
                return rc;
        if (nd->col < 0)
            return 0;
        if ((rc = begin(r, nd->col)))
            return rc;
        valid_entry(&r->c->cols[nd->col]);
        return 0;
    case KB_AVRO_ARRAY:
    case KB_AVRO_MAP:
        return read_blocks(r, nd, nd->op == KB_AVRO_MAP);
    case KB_AVRO_UNION:
        if (read_zigzag(r, 10, &iv))
            return -1;
        if (iv < 0 || iv >= nd->count)
            return fault(r, KB_RULE_VALUE_UNION_INDEX, at, iv, nd->count);
        return read_node(r, prog->children[nd->child + iv]);
    case KB_AVRO_BRANCH: {
        kb_avro_column *col = &r->c->cols[nd->col];
        const kb_avro_colspec *s = &r->c->specs[nd->col];
        if ((rc = begin(r, nd->col)))
            return rc;
        int32_t member = r->c->column_children[s->child + nd->count];
        if (r->c->cols[member].length > INT32_MAX)
            return KB_AVRO_TOO_LARGE;
        col->type_ids[col->length] = (int8_t)nd->count;
        col->offsets[col->length] = (int32_t)r->c->cols[member].length;
        col->length++;
        return read_node(r, nd->child);
    }
    case KB_AVRO_DEFAULT: {
        const uint8_t *p = r->p, *end = r->end, *base = r->base;
        const uint8_t *d = prog->defaults + prog->default_spans[2 * nd->aux];
        r->p = r->base = d;
        r->end = d + prog->default_spans[2 * nd->aux + 1];
        rc = read_node(r, nd->child);
        if (rc == -1) /* a default that does not decode: the program is wrong, reported where the datum was */
            r->f->pos = (size_t)(p - base);
        r->p = p;
        r->end = end;
        r->base = base;
        return rc;
    }
    case KB_AVRO_MISMATCH:
        return fault(r, KB_RULE_VALUE_SCHEMA_MISMATCH, at, ni, nd->aux);
    }
    return fault(r, KB_RULE_VALUE_SCHEMA_MISMATCH, at, ni, -1);
}

int kb_avro_decode(const kb_avro_program *p, kb_avro_columns *c, const uint8_t *data, size_t start, size_t len,
                   int allow_trailing, kb_fault *f)
{
    int64_t *saved = c->saved;
    for (int32_t i = 0; i < c->n_columns; i++) {
        saved[3 * i] = c->cols[i].length;
        saved[3 * i + 1] = c->cols[i].nulls;
        saved[3 * i + 2] = c->cols[i].bytes;
    }
    reader r = {p, c, data + start, data + len, data, f, 0};
    int rc = read_node(&r, p->root);
    if (!rc && !allow_trailing && r.p < r.end)
        rc = fault(&r, KB_RULE_VALUE_TRAILING_BYTES, r.p, (int64_t)(r.end - r.p), 0);
    if (!rc && c->cols[c->root].length != saved[3 * c->root] + 1) /* kb_avro_check cannot see this */
        rc = fault(&r, KB_RULE_VALUE_SCHEMA_MISMATCH, r.p, -1, -1);
    if (rc) {
        for (int32_t i = 0; i < c->n_columns; i++) {
            c->cols[i].length = saved[3 * i];
            c->cols[i].nulls = saved[3 * i + 1];
            c->cols[i].bytes = saved[3 * i + 2];
        }
    }
    return rc;
}

/* ---- checking a program ---- */

static int op_fits(const kb_avro_node *nd, const kb_avro_columns *c)
{
    if (nd->col < 0)
        return 1;
    const kb_avro_colspec *s = &c->specs[nd->col];
    int k = s->kind;
    switch ((kb_avro_op)nd->op) {
    case KB_AVRO_NULL:
        return 1;
    case KB_AVRO_BOOLEAN:
        return k == KB_COL_BOOL;
    case KB_AVRO_INT:
        return k == KB_COL_INT32 || k == KB_COL_INT64 || k == KB_COL_FLOAT32 || k == KB_COL_FLOAT64;
    case KB_AVRO_LONG:
        return k == KB_COL_INT64 || k == KB_COL_FLOAT32 || k == KB_COL_FLOAT64;
    case KB_AVRO_FLOAT:
        return k == KB_COL_FLOAT32 || k == KB_COL_FLOAT64;
    case KB_AVRO_DOUBLE:
        return k == KB_COL_FLOAT64;
    case KB_AVRO_BYTES:
    case KB_AVRO_STRING:
        return k == KB_COL_BINARY;
    case KB_AVRO_FIXED:
        return k == KB_COL_FIXED && s->width == nd->count;
    case KB_AVRO_DECIMAL_BYTES:
    case KB_AVRO_DECIMAL_FIXED:
        return k == KB_COL_DECIMAL && (s->width == 16 || s->width == 32);
    case KB_AVRO_ENUM:
        return k == KB_COL_INT32;
    case KB_AVRO_RECORD:
        return k == KB_COL_STRUCT;
    case KB_AVRO_ARRAY:
        return k == KB_COL_LIST;
    case KB_AVRO_MAP: {
        if (k != KB_COL_LIST)
            return 0;
        const kb_avro_colspec *e = &c->specs[s->child];
        return e->kind == KB_COL_STRUCT && e->count == 2 &&
               c->specs[c->column_children[e->child]].kind == KB_COL_BINARY;
    }
    case KB_AVRO_BRANCH:
        return k == KB_COL_UNION && nd->count >= 0 && nd->count < s->count && nd->count < 128;
    case KB_AVRO_UNION:
    case KB_AVRO_DEFAULT:
    case KB_AVRO_MISMATCH:
        return 0; /* they write nothing themselves */
    }
    return 0;
}

int kb_avro_check(const kb_avro_program *p, const kb_avro_columns *c, int32_t *where)
{
    /* columns: members after their parent (so the tree has no cycle), in range */
    if (c->n_columns <= 0 || c->root < 0 || c->root >= c->n_columns) {
        *where = -2;
        return -1;
    }
    for (int32_t i = 0; i < c->n_columns; i++) {
        const kb_avro_colspec *s = &c->specs[i];
        int ok = s->kind >= KB_COL_NULL && s->kind <= KB_COL_UNION;
        if (s->kind == KB_COL_FIXED)
            ok = s->width >= 0;
        if (s->kind == KB_COL_DECIMAL) /* count: the precision */
            ok = (s->width == 16 && s->count >= 1 && s->count <= 38) ||
                 (s->width == 32 && s->count >= 1 && s->count <= 76);
        if (s->kind == KB_COL_LIST)
            ok = s->child > i && s->child < c->n_columns;
        if (s->kind == KB_COL_STRUCT || s->kind == KB_COL_UNION) {
            /* column_children holds n_columns entries at most: each column is one parent's member */
            ok = s->count >= 0 && s->child >= 0 && (int64_t)s->child + s->count <= c->n_columns;
            for (int32_t m = 0; ok && m < s->count; m++) {
                int32_t mc = c->column_children[s->child + m];
                ok = mc > i && mc < c->n_columns;
            }
            if (s->kind == KB_COL_UNION && (s->count < 1 || s->count > 127))
                ok = 0;
        }
        if (!ok) {
            *where = -2 - i;
            return -1;
        }
    }
    if (p->root < 0 || p->root >= p->n_nodes) {
        *where = -1;
        return -1;
    }
    for (int32_t i = 0; i < p->n_nodes; i++) {
        const kb_avro_node *nd = &p->nodes[i];
        int ok = nd->op >= KB_AVRO_NULL && nd->op <= KB_AVRO_DECIMAL_FIXED && nd->col >= -1 &&
                 nd->col < c->n_columns && nd->min_bytes >= 0 && op_fits(nd, c);
        if (nd->op == KB_AVRO_BRANCH)
            ok = ok && nd->col >= 0;
        switch ((kb_avro_op)nd->op) {
        case KB_AVRO_RECORD:
        case KB_AVRO_UNION:
            ok = ok && nd->count >= 0 && nd->child >= 0 && (int64_t)nd->child + nd->count <= p->n_children;
            for (int32_t k = 0; ok && k < nd->count; k++) {
                int32_t ch = p->children[nd->child + k];
                ok = ch > i && ch < p->n_nodes; /* children after their parent: no cycle */
            }
            break;
        case KB_AVRO_ARRAY:
        case KB_AVRO_MAP:
        case KB_AVRO_BRANCH:
            ok = ok && nd->child > i && nd->child < p->n_nodes;
            break;
        case KB_AVRO_DEFAULT:
            ok = ok && nd->child > i && nd->child < p->n_nodes && nd->aux >= 0 && nd->aux < p->n_defaults &&
                 p->default_spans[2 * nd->aux] >= 0 && p->default_spans[2 * nd->aux + 1] >= 0 &&
                 p->default_spans[2 * nd->aux] + p->default_spans[2 * nd->aux + 1] <= p->n_default_bytes;
            break;
        case KB_AVRO_ENUM:
            ok = ok && nd->count > 0 && nd->aux >= 0 && (int64_t)nd->aux + nd->count <= p->n_table;
            break;
        case KB_AVRO_FIXED:
        case KB_AVRO_DECIMAL_FIXED:
            ok = ok && nd->count >= 0;
            break;
        default:
            break;
        }
        if (!ok) {
            *where = i;
            return -1;
        }
    }
    return 0;
}

/* ---- the registries' framing ---- */

int kb_read_frame(const uint8_t *data, size_t len, kb_framing framing, kb_frame *out, int32_t *indexes,
                  int32_t max_indexes, kb_fault *f)
{
    memset(out, 0, sizeof(*out));
    if (framing == KB_FRAMING_GLUE) {
        if (len >= 1 && data[0] != 3) {
            kb_fault_set(f, KB_RULE_VALUE_SCHEMA_FRAMING, 0, data[0], 3, 0);
            return -1;
        }
        if (len >= 2 && data[1] != 0 && data[1] != 5) {
            kb_fault_set(f, KB_RULE_VALUE_SCHEMA_FRAMING, 1, data[1], 0, 1);
            return -1;
        }
        if (len < 18) {
            kb_fault_set(f, KB_RULE_VALUE_HEADER_TRUNCATED, len, (int64_t)len, 18, 0);
            return -1;
        }
        out->compression = data[1];
        out->payload = 18;
        return 0;
    }
    if (len >= 1 && data[0] != 0) { /* the magic byte first: a value not framed at all says so */
        kb_fault_set(f, KB_RULE_VALUE_SCHEMA_FRAMING, 0, data[0], 0, 0);
        return -1;
    }
    if (len < 5) {
        kb_fault_set(f, KB_RULE_VALUE_HEADER_TRUNCATED, len, (int64_t)len, 5, 0);
        return -1;
    }
    out->schema_id = (int32_t)((uint32_t)data[1] << 24 | (uint32_t)data[2] << 16 | (uint32_t)data[3] << 8 | data[4]);
    out->payload = 5;
    if (framing != KB_FRAMING_CONFLUENT_PROTOBUF)
        return 0;
    /* Protobuf: a count, then that many indexes, zig-zag varints; a count of 0 is the [0] shortcut */
    size_t pos = 5;
    int32_t count = 0;
    int n = kb_read_varint(data + pos, data + len, &count);
    if (n <= 0) {
        kb_fault_set(f, n == 0 ? KB_RULE_VALUE_HEADER_TRUNCATED : KB_RULE_VALUE_MESSAGE_INDEX, n == 0 ? len : pos,
                     n == 0 ? (int64_t)len : -1, n == 0 ? (int64_t)pos + 1 : (int64_t)pos, 0);
        return -1;
    }
    if (count < 0 || count > max_indexes || count > KB_FRAME_MAX_INDEXES) {
        kb_fault_set(f, KB_RULE_VALUE_MESSAGE_INDEX, pos, count, (int64_t)pos, 0);
        return -1;
    }
    pos += (size_t)n;
    if (count == 0) {
        if (max_indexes > 0)
            indexes[0] = 0;
        out->index_count = 1;
    }
    for (int32_t k = 0; k < count; k++) {
        int32_t ix = 0;
        n = kb_read_varint(data + pos, data + len, &ix);
        if (n == 0) {
            kb_fault_set(f, KB_RULE_VALUE_HEADER_TRUNCATED, len, (int64_t)len, (int64_t)pos + 1, 0);
            return -1;
        }
        if (n < 0 || ix < 0) {
            kb_fault_set(f, KB_RULE_VALUE_MESSAGE_INDEX, pos, n < 0 ? -1 : ix, (int64_t)pos, 0);
            return -1;
        }
        indexes[k] = ix;
        pos += (size_t)n;
        out->index_count = count;
    }
    out->payload = (int32_t)pos;
    return 0;
}
