/* CRC-32 (IEEE, reflected) on x86-64 by carry-less multiplication (PCLMULQDQ): four 128-bit
 * lanes are folded forward 64 bytes at a time, then into one lane, then reduced to 32 bits with
 * a Barrett step (Intel, "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ").  The
 * constants are powers of x modulo the polynomial, as that paper lists them for CRC-32. */
#include "kb_crc32.h"
#include "kb_cpu_x86.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define TARGET __attribute__((target("sse4.1,pclmul")))

int kb_crc32_x86_available(void)
{
    return kb_x86_has(KB_X86_SSE41 | KB_X86_PCLMUL);
}

/* Folds `acc` 128 bits forward (by the distance the pair of constants encodes) onto `next`. */
TARGET static inline __m128i fold(__m128i acc, __m128i k, __m128i next)
{
    __m128i lo = _mm_clmulepi64_si128(acc, k, 0x00);
    __m128i hi = _mm_clmulepi64_si128(acc, k, 0x11);
    return _mm_xor_si128(_mm_xor_si128(lo, hi), next);
}

/* Raw state in and out; n >= 64 and a multiple of 16. */
TARGET uint32_t kb_crc32_x86(uint32_t state, const uint8_t *p, size_t n)
{
    const __m128i k1k2 = _mm_set_epi64x(0x01c6e41596, 0x0154442bd4); /* fold by 512 bits */
    const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009e, 0x01751997d0); /* fold by 128 bits */
    const __m128i k5 = _mm_set_epi64x(0, 0x0163cd6124);              /* 64 -> 32 bits */
    const __m128i poly_mu = _mm_set_epi64x(0x01f7011641, 0x01db710641);
    const __m128i low32 = _mm_setr_epi32(~0, 0, ~0, 0);

    __m128i x1 = _mm_loadu_si128((const __m128i *)p);
    __m128i x2 = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(p + 32));
    __m128i x4 = _mm_loadu_si128((const __m128i *)(p + 48));
    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)state));
    p += 64;
    n -= 64;
    while (n >= 64) {
        x1 = fold(x1, k1k2, _mm_loadu_si128((const __m128i *)p));
        x2 = fold(x2, k1k2, _mm_loadu_si128((const __m128i *)(p + 16)));
        x3 = fold(x3, k1k2, _mm_loadu_si128((const __m128i *)(p + 32)));
        x4 = fold(x4, k1k2, _mm_loadu_si128((const __m128i *)(p + 48)));
        p += 64;
        n -= 64;
    }
    x1 = fold(x1, k3k4, x2);
    x1 = fold(x1, k3k4, x3);
    x1 = fold(x1, k3k4, x4);
    while (n >= 16) {
        x1 = fold(x1, k3k4, _mm_loadu_si128((const __m128i *)p));
        p += 16;
        n -= 16;
    }
    /* 128 -> 64 bits */
    __m128i t = _mm_clmulepi64_si128(x1, k3k4, 0x10);
    x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), t);
    t = _mm_srli_si128(x1, 4);
    x1 = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, low32), k5, 0x00), t);
    /* Barrett reduction to 32 bits */
    t = _mm_clmulepi64_si128(_mm_and_si128(x1, low32), poly_mu, 0x10);
    t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), poly_mu, 0x00);
    return (uint32_t)_mm_extract_epi32(_mm_xor_si128(x1, t), 1);
}

#else

int kb_crc32_x86_available(void) { return 0; }
uint32_t kb_crc32_x86(uint32_t state, const uint8_t *p, size_t n)
{
    (void)p;
    (void)n;
    return state;
}

#endif
