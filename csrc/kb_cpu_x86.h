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
#endif

#endif
