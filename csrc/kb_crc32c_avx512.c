/* CRC-32C of long buffers on x86-64 with AVX-512 and VPCLMULQDQ: folding.
 *
 * The crc32 instruction retires 8 bytes a cycle at best (kb_crc32c_x86.c keeps it busy with
 * three streams); carry-less multiplication on 512-bit registers folds 256 bytes in a handful
 * of instructions, so a batch's checksum stops being a quarter of decoding it.
 *
 * Folding, in the reflected representation the CRC uses (a 16-byte lane loaded little-endian is
 * A = L*x^64 + H, its low quadword L holding the higher powers): a lane D bytes ahead of another
 * contributes A*x^(8D), and clmul(L, k1) ^ clmul(H, k2) with k1 = x^(8D+63), k2 = x^(8D-1)
 * (mod P) is congruent to it (a reflected clmul carries one extra factor x).  Everything is
 * folded into the last 16 bytes' lane, whose CRC the crc32 instruction then takes; the initial
 * state enters XORed into the first four bytes, as the instruction itself does.
 */
#include "kb_crc32c.h"
#include "kb_cpu_x86.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include <string.h>

#if defined(__clang__)
#define TARGET __attribute__((target("avx512f,vpclmulqdq,sse4.2,crc32")))
#else
#define TARGET __attribute__((target("avx512f,vpclmulqdq,sse4.2")))
#endif

#define BLOCK 256       /* bytes folded per step: four 64-byte registers */
#define MIN_BYTES BLOCK /* one block: from there folding is faster (2x at 256 bytes, 2.4x at 16 KiB) */

/* Per 128-bit lane: (k1, k2) for folding 256 bytes ahead, 64 bytes ahead, and each lane of the
 * last register onto its last lane (48, 32, 16 bytes ahead; the last lane's pair is zero). */
static uint64_t k_block[2], k_register[2], k_lanes[8];

/* x^(8*bytes + 63) and x^(8*bytes - 1) mod P, each as a reflected quadword. */
static void fold_pair(uint64_t bytes, uint64_t out[2])
{
    out[0] = (uint64_t)kb_crc32c_xpow8n(bytes + 8, 1) << 32;
    out[1] = (uint64_t)kb_crc32c_xpow8n(bytes, 1) << 32;
}

int kb_crc32c_avx512_available(void)
{
    if (!kb_x86_has_avx512_clmul() || !kb_crc32c_x86_available())
        return 0;
    fold_pair(BLOCK, k_block);
    fold_pair(64, k_register);
    for (int lane = 0; lane < 3; lane++)
        fold_pair(48 - 16 * (uint64_t)lane, &k_lanes[2 * lane]);
    k_lanes[6] = k_lanes[7] = 0;
    return 1;
}

/* `acc` folded `k`'s distance ahead, XORed with `data` there. */
TARGET static inline __m512i fold(__m512i acc, __m512i k, __m512i data)
{
    __m512i lo = _mm512_clmulepi64_epi128(acc, k, 0x00);
    __m512i hi = _mm512_clmulepi64_epi128(acc, k, 0x11);
    return _mm512_ternarylogic_epi64(lo, hi, data, 0x96);
}

TARGET static inline __m512i pairs(const uint64_t k[2])
{
    return _mm512_broadcast_i32x4(_mm_set_epi64x((long long)k[1], (long long)k[0]));
}

TARGET uint32_t kb_crc32c_avx512(uint32_t state, const uint8_t *p, size_t n)
{
    if (n < MIN_BYTES)
        return kb_crc32c_x86(state, p, n);
    size_t folded = n - n % BLOCK;
    __m512i x0 = _mm512_loadu_si512((const void *)p);
    __m512i x1 = _mm512_loadu_si512((const void *)(p + 64));
    __m512i x2 = _mm512_loadu_si512((const void *)(p + 128));
    __m512i x3 = _mm512_loadu_si512((const void *)(p + 192));
    x0 = _mm512_xor_si512(x0, _mm512_castsi128_si512(_mm_cvtsi32_si128((int)state)));
    const __m512i kb = pairs(k_block);
    for (size_t at = BLOCK; at < folded; at += BLOCK) {
        x0 = fold(x0, kb, _mm512_loadu_si512((const void *)(p + at)));
        x1 = fold(x1, kb, _mm512_loadu_si512((const void *)(p + at + 64)));
        x2 = fold(x2, kb, _mm512_loadu_si512((const void *)(p + at + 128)));
        x3 = fold(x3, kb, _mm512_loadu_si512((const void *)(p + at + 192)));
    }
    const __m512i kr = pairs(k_register);
    x1 = fold(x0, kr, x1);
    x2 = fold(x1, kr, x2);
    x3 = fold(x2, kr, x3);
    /* the four lanes of x3 onto its last one */
    const __m512i kl = _mm512_loadu_si512((const void *)k_lanes);
    __m512i m = _mm512_xor_si512(_mm512_clmulepi64_epi128(x3, kl, 0x00), _mm512_clmulepi64_epi128(x3, kl, 0x11));
    __m128i last = _mm_xor_si128(_mm512_extracti32x4_epi32(x3, 3), _mm512_extracti32x4_epi32(m, 0));
    last = _mm_xor_si128(last, _mm512_extracti32x4_epi32(m, 1));
    last = _mm_xor_si128(last, _mm512_extracti32x4_epi32(m, 2));
    last = _mm_xor_si128(last, _mm512_extracti32x4_epi32(m, 3));
    uint64_t c = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(last));
    c = _mm_crc32_u64(c, (uint64_t)_mm_extract_epi64(last, 1));
    return kb_crc32c_x86((uint32_t)c, p + folded, n - folded);
}

#else

int kb_crc32c_avx512_available(void) { return 0; }
uint32_t kb_crc32c_avx512(uint32_t state, const uint8_t *p, size_t n)
{
    (void)p;
    (void)n;
    return state;
}

#endif
