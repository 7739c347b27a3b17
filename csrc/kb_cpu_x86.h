/* x86-64 CPU features, read with CPUID leaf 1 (ECX bits, Intel SDM vol. 2A, table 3-10).
 * CPUID itself rather than __builtin_cpu_supports: the latter needs the compiler runtime's
 * CPU model data, which some toolchains (zig cc, used for the manylinux wheels) leave unset,
 * so every feature read as absent there. */
#ifndef KB_CPU_X86_H
#define KB_CPU_X86_H

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>

#define KB_X86_PCLMUL (1u << 1)
#define KB_X86_SSE41 (1u << 19)
#define KB_X86_SSE42 (1u << 20)

/* 1 when the CPU has every feature in `ecx_bits`. */
static inline int kb_x86_has(unsigned ecx_bits)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return 0;
    return (c & ecx_bits) == ecx_bits;
}

/* AVX-512 (foundation) with the 512-bit carry-less multiply, usable: CPUID leaf 7 says the CPU
 * has them (EBX bit 16, ECX bit 10) and XCR0 says the OS saves the zmm state (bits 1, 2, 5-7). */
static inline int kb_x86_has_avx512_clmul(void)
{
    unsigned a, b, c, d, lo, hi;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) /* OSXSAVE: xgetbv may be used */
        return 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & 0xE6u) != 0xE6u)
        return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return 0;
    return (b & (1u << 16)) && (c & (1u << 10));
}
#endif

#endif
