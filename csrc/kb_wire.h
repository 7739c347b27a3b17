/* Bounds-checked readers for Kafka's wire primitives.
 *
 * Every reader takes a cursor and the end of the readable range and never
 * touches a byte at or past `end`.  Big-endian loads go through memcpy so
 * they are alignment-safe and compile to a single load + bswap.
 */
#ifndef KB_WIRE_H
#define KB_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint16_t kb_load_be16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return (uint16_t)((v >> 8) | (v << 8));
}

static inline uint32_t kb_load_be32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return __builtin_bswap32(v);
}

static inline uint64_t kb_load_be64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return __builtin_bswap64(v);
}

static inline void kb_store_be16(uint8_t *p, uint16_t v)
{
    v = (uint16_t)((v >> 8) | (v << 8));
    memcpy(p, &v, 2);
}

static inline void kb_store_be32(uint8_t *p, uint32_t v)
{
    v = __builtin_bswap32(v);
    memcpy(p, &v, 4);
}

static inline void kb_store_be64(uint8_t *p, uint64_t v)
{
    v = __builtin_bswap64(v);
    memcpy(p, &v, 8);
}

/* Java's wrapping int/long additions (hostile headers overflow them; C must not). */
static inline int64_t kb_wrap_add64(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a + (uint64_t)b);
}

static inline int64_t kb_wrap_sub64(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a - (uint64_t)b);
}

static inline int32_t kb_wrap_add32(int32_t a, int32_t b)
{
    return (int32_t)((uint32_t)a + (uint32_t)b);
}

static inline int32_t kb_wrap_sub32(int32_t a, int32_t b)
{
    return (int32_t)((uint32_t)a - (uint32_t)b);
}

/* DefaultRecordBatch.incrementSequence, in Java's 32-bit wrapping arithmetic:
 * past INT32_MAX the sequence wraps to 0; -1 (no sequence) stays -1. */
static inline int32_t kb_increment_sequence(int32_t base, int32_t delta)
{
    if (base < 0)
        return -1;
    if (base > kb_wrap_sub32(INT32_MAX, delta)) /* Java: Integer.MAX_VALUE - increment, wrapping */
        return (int32_t)((uint32_t)delta - ((uint32_t)INT32_MAX - (uint32_t)base) - 1u);
    return kb_wrap_add32(base, delta);
}

/* Results of the varint readers: > 0 is the number of bytes consumed. */
enum {
    KB_VARINT_TRUNCATED = 0,  /* ran into `end` before the last byte */
    KB_VARINT_TOO_LONG = -1,  /* continuation bit on the 5th (10th) byte */
};

/* Unsigned (non-zigzag) varint (ByteUtils.readUnsignedVarint): five bytes at most.  Like Java,
 * bits 4..6 of a fifth byte are dropped by the 32-bit shift and non-minimal encodings are
 * accepted. */
static inline int kb_read_uvarint(const uint8_t *p, const uint8_t *end, uint32_t *out)
{
    uint32_t raw = 0;
    for (int i = 0; i < 5; i++) {
        if (p + i >= end)
            return KB_VARINT_TRUNCATED;
        uint32_t b = p[i];
        if (i == 4) {
            if (b & 0x80)
                return KB_VARINT_TOO_LONG;
            *out = raw | (b << 28);
            return 5;
        }
        raw |= (b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *out = raw;
            return i + 1;
        }
    }
    return KB_VARINT_TOO_LONG; /* not reached */
}

/* The one- and two-byte encodings most varints of a record have, read without a loop: their
 * length, or 0 when the varint is longer (or fewer than two bytes are left). */
static inline int kb_read_short_uvarint(const uint8_t *p, const uint8_t *end, uint32_t *raw)
{
    if (__builtin_expect(end - p >= 2, 1)) {
        uint32_t b0 = p[0], b1 = p[1];
        if (b0 < 0x80) {
            *raw = b0;
            return 1;
        }
        if (b1 < 0x80) {
            *raw = (b0 & 0x7f) | (b1 << 7);
            return 2;
        }
    }
    return 0;
}

static inline int32_t kb_zigzag32(uint32_t raw)
{
    return (int32_t)((raw >> 1) ^ (0u - (raw & 1u)));
}

static inline int64_t kb_zigzag64(uint64_t raw)
{
    return (int64_t)((raw >> 1) ^ (0ull - (raw & 1u)));
}

/* Kafka's zigzag varint (ByteUtils.readVarint): an unsigned varint, zigzag-decoded. */
static inline int kb_read_varint(const uint8_t *p, const uint8_t *end, int32_t *out)
{
    uint32_t raw;
    int n = kb_read_short_uvarint(p, end, &raw);
    if (__builtin_expect(n == 0, 0))
        n = kb_read_uvarint(p, end, &raw);
    if (n > 0)
        *out = kb_zigzag32(raw);
    return n;
}

/* Kafka's zigzag varlong (ByteUtils.readVarlong): ten bytes at most; bits of
 * the tenth byte above bit 0 are dropped, as Java's 64-bit shift does. */
static inline int kb_read_varlong(const uint8_t *p, const uint8_t *end, int64_t *out)
{
    uint32_t short_raw;
    int n = kb_read_short_uvarint(p, end, &short_raw);
    if (__builtin_expect(n > 0, 1)) {
        *out = kb_zigzag64(short_raw);
        return n;
    }
    uint64_t raw = 0;
    for (int i = 0; i < 10; i++) {
        if (p + i >= end)
            return KB_VARINT_TRUNCATED;
        uint64_t b = p[i];
        if (!(b & 0x80)) {
            raw |= b << (7 * i);
            *out = kb_zigzag64(raw);
            return i + 1;
        }
        if (i == 9)
            return KB_VARINT_TOO_LONG;
        raw |= (b & 0x7f) << (7 * i);
    }
    return KB_VARINT_TOO_LONG; /* not reached */
}

static inline int kb_sizeof_uvarint(uint32_t v)
{
    int n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline int kb_sizeof_varint(int32_t v)
{
    return kb_sizeof_uvarint(((uint32_t)v << 1) ^ (uint32_t)(v >> 31));
}

static inline int kb_sizeof_varlong(int64_t v)
{
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    int n = 1;
    while (z >= 0x80) {
        z >>= 7;
        n++;
    }
    return n;
}

/* Writers: minimal encodings, the caller guarantees room (sizeof_* above). */
static inline uint8_t *kb_write_uvarint(uint8_t *p, uint32_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static inline uint8_t *kb_write_varint(uint8_t *p, int32_t v)
{
    return kb_write_uvarint(p, ((uint32_t)v << 1) ^ (uint32_t)(v >> 31));
}

static inline uint8_t *kb_write_varlong(uint8_t *p, int64_t v)
{
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    while (z >= 0x80) {
        *p++ = (uint8_t)(z | 0x80);
        z >>= 7;
    }
    *p++ = (uint8_t)z;
    return p;
}

#endif
