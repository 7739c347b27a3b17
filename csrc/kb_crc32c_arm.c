/* CRC-32C on aarch64 with the ARMv8 CRC32 extension (crc32cx and friends). */
#include "kb_crc32c.h"

#if defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
#include <arm_acle.h>
#include <string.h>
#if defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)
#endif
#endif

int kb_crc32c_arm_available(void)
{
#if defined(__linux__)
    return (getauxval(AT_HWCAP) & HWCAP_CRC32) != 0;
#elif defined(__APPLE__)
    return 1; /* every Apple arm64 CPU has it */
#else
    return 0;
#endif
}

__attribute__((target("+crc"))) uint32_t kb_crc32c_arm(uint32_t c, const uint8_t *p, size_t n)
{
    while (n && ((uintptr_t)p & 7)) {
        c = __crc32cb(c, *p++);
        n--;
    }
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __crc32cd(c, v);
        p += 8;
        n -= 8;
    }
    while (n--)
        c = __crc32cb(c, *p++);
    return c;
}

#else

int kb_crc32c_arm_available(void) { return 0; }
uint32_t kb_crc32c_arm(uint32_t state, const uint8_t *p, size_t n)
{
    (void)p;
    (void)n;
    return state;
}

#endif
