/*
 * crc32c.c — CRC-32C (Castagnoli), the checksum of dtnn's checkpoints. Where the CPU has SSE4.2
 * (asked at each call: __builtin_cpu_supports reads a word libgcc filled at start-up) its crc32
 * instruction does 8 bytes at a time, compiled for SSE4.2 in that one function, so the build
 * needs no -msse4.2 or -march=native and runs on any x86-64; elsewhere a byte-wise table, built
 * per call (1 KiB, microseconds) so there is no global state. Both give the same values.
 */
#include "internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define DTNN_CRC32C_SSE42 1
#include <nmmintrin.h>
#include <string.h>

__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc, const void *data,
                                                               size_t n)
{
    const unsigned char *p = data;
    uint64_t c = ~crc;
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = _mm_crc32_u64(c, word);
    }
    uint32_t c32 = (uint32_t)c;
    for (; n; n--, p++)
        c32 = _mm_crc32_u8(c32, *p);
    return ~c32;
}
#endif

uint32_t dtnn__crc32c_bytewise(uint32_t crc, const void *data, size_t n)
{
    uint32_t table[256];
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
        table[i] = c;
    }
    const unsigned char *p = data;
    uint32_t c = ~crc;
    for (; n; n--, p++)
        c = table[(c ^ *p) & 0xff] ^ (c >> 8);
    return ~c;
}

uint32_t dtnn__crc32c(uint32_t crc, const void *data, size_t n)
{
#ifdef DTNN_CRC32C_SSE42
    if (__builtin_cpu_supports("sse4.2"))
        return crc32c_sse42(crc, data, n);
#endif
    return dtnn__crc32c_bytewise(crc, data, n);
}
