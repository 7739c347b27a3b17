/* CRC-32C on x86-64: SSE4.2 crc32 on three interleaved streams, whose
 * states are merged by carry-less multiplication (PCLMULQDQ).
 *
 * One crc32 instruction has a latency of 3 cycles and a throughput of 1, so
 * a single stream runs at a third of the port's speed; three independent
 * streams keep it busy.  Merging needs state * x^(8*len) mod P: a 32x32
 * carry-less product by a precomputed constant, reduced by one more crc32.
 */
#include "kb_crc32c.h"
#include "kb_cpu_x86.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include <string.h>

#if defined(__clang__)  /* clang 16+ keeps the crc32 instructions apart from SSE4.2 */
#define TARGET __attribute__((target("sse4.2,crc32,pclmul")))
#else
#define TARGET __attribute__((target("sse4.2,pclmul")))
#endif

/* Stream lengths in bytes (multiples of 8) and their merge constants. */
#define LONG_LANE 8192
#define SHORT_LANE 256
static uint64_t k_long[2], k_short[2];

int kb_crc32c_x86_available(void)
{
    if (!kb_x86_has(KB_X86_SSE42 | KB_X86_PCLMUL))
        return 0;
    /* In reflected form a 32x32 clmul read as a 64-bit value is a*b*x, and
     * crc32(0, v64) is v*x^32 mod P: together a*b*x^33.  Shifting a state by
     * L bytes (a*x^(8L)) therefore multiplies by b = x^(8L-33) mod P. */
    k_long[0] = kb_crc32c_xpow8n(2 * LONG_LANE, 33);
    k_long[1] = kb_crc32c_xpow8n(LONG_LANE, 33);
    k_short[0] = kb_crc32c_xpow8n(2 * SHORT_LANE, 33);
    k_short[1] = kb_crc32c_xpow8n(SHORT_LANE, 33);
    return 1;
}

static inline uint64_t load64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

TARGET static inline uint32_t shift_by(uint32_t state, uint64_t k)
{
    __m128i prod = _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)state), _mm_cvtsi64_si128((long long)k), 0);
    return (uint32_t)_mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(prod));
}

TARGET static inline uint32_t three_way(uint32_t c0, const uint8_t *p, size_t lane, const uint64_t k[2])
{
    uint64_t a = c0, b = 0, c = 0;
    const uint8_t *p1 = p + lane, *p2 = p + 2 * lane;
    /* unrolled so loop bookkeeping does not compete with the crc32 port (lane % 32 == 0) */
    for (size_t i = 0; i < lane; i += 32) {
        a = _mm_crc32_u64(a, load64(p + i));
        b = _mm_crc32_u64(b, load64(p1 + i));
        c = _mm_crc32_u64(c, load64(p2 + i));
        a = _mm_crc32_u64(a, load64(p + i + 8));
        b = _mm_crc32_u64(b, load64(p1 + i + 8));
        c = _mm_crc32_u64(c, load64(p2 + i + 8));
        a = _mm_crc32_u64(a, load64(p + i + 16));
        b = _mm_crc32_u64(b, load64(p1 + i + 16));
        c = _mm_crc32_u64(c, load64(p2 + i + 16));
        a = _mm_crc32_u64(a, load64(p + i + 24));
        b = _mm_crc32_u64(b, load64(p1 + i + 24));
        c = _mm_crc32_u64(c, load64(p2 + i + 24));
    }
    return shift_by((uint32_t)a, k[0]) ^ shift_by((uint32_t)b, k[1]) ^ (uint32_t)c;
}

TARGET uint32_t kb_crc32c_x86(uint32_t state, const uint8_t *p, size_t n)
{
    uint64_t c = state;
    while (n && ((uintptr_t)p & 7)) {
        c = _mm_crc32_u8((uint32_t)c, *p++);
        n--;
    }
    while (n >= 3 * LONG_LANE) {
        c = three_way((uint32_t)c, p, LONG_LANE, k_long);
        p += 3 * LONG_LANE;
        n -= 3 * LONG_LANE;
    }
    while (n >= 3 * SHORT_LANE) {
        c = three_way((uint32_t)c, p, SHORT_LANE, k_short);
        p += 3 * SHORT_LANE;
        n -= 3 * SHORT_LANE;
    }
    while (n >= 8) {
        c = _mm_crc32_u64(c, load64(p));
        p += 8;
        n -= 8;
    }
    while (n--)
        c = _mm_crc32_u8((uint32_t)c, *p++);
    return (uint32_t)c;
}

#else

int kb_crc32c_x86_available(void) { return 0; }
uint32_t kb_crc32c_x86(uint32_t state, const uint8_t *p, size_t n)
{
    (void)p;
    (void)n;
    return state;
}

#endif
