/*
 * internal.h — small helpers shared by every source file of libdtnn: aligned allocation,
 * the invariant assert, string helpers. Nothing here is public API.
 */
#ifndef DTNN_INTERNAL_H
#define DTNN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "dtnn.h"

/* Internal invariants (programming errors, not bad input): abort with file:line. */
#define DTNN_ASSERT(cond)                                                                      \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "dtnn: internal error at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

#define DTNN_ALIGN 64
#define DTNN_MIN(a, b) ((a) < (b) ? (a) : (b))
#define DTNN_MAX(a, b) ((a) > (b) ? (a) : (b))

/* 64-byte aligned, zeroed allocation; NULL on failure. Free with dtnn__free_aligned. */
void *dtnn__alloc_aligned(size_t bytes);
void dtnn__free_aligned(void *p);
size_t dtnn__round_up(size_t x, size_t to);

/* strdup that returns NULL on failure (C11 lacks strdup). */
char *dtnn__strdup(const char *s);

/* Parses a whole string as an integer / float; 0 on success. */
int dtnn__parse_int(const char *s, long long *out);
int dtnn__parse_float(const char *s, double *out);

/* The index of the first NaN or Inf among n little-endian float32 values at bytes (which
 * need not be aligned), or -1 when all are finite. */
int64_t first_nonfinite_f32(const void *bytes, size_t n);

/* Monotonic seconds. */
double dtnn__now(void);

/* 64-bit FNV-1a of n bytes, continuing from h (DTNN_FNV1A_INIT to start): a cheap hash for
 * agreement checks and signatures, not for integrity (that is CRC-32C's). */
#define DTNN_FNV1A_INIT 0xcbf29ce484222325ull
uint64_t dtnn__fnv1a(uint64_t h, const void *data, size_t n);

/* CRC-32C of n bytes, continuing from crc (0 to start). */
uint32_t dtnn__crc32c(uint32_t crc, const void *data, size_t n);
/* The same without the CPU's crc32 instruction, what dtnn__crc32c does without SSE4.2 (tests). */
uint32_t dtnn__crc32c_bytewise(uint32_t crc, const void *data, size_t n);

/* This process's CPU affinity as a bit mask of up to 1024 CPUs; returns how many are set. */
#define DTNN_CPU_MASK_WORDS 16
int dtnn__cpu_affinity(uint64_t mask[DTNN_CPU_MASK_WORDS]);

#endif
