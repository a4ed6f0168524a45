/*
 * crc32c.h - CRC-32C (Castagnoli polynomial, reflected 0x82F63B78) of byte
 * buffers, as used by iSCSI, ext4 and SSE4.2's crc32 instruction.
 *
 * b2_crc32c picks, once per process, the SSE4.2 version on x86_64 CPUs
 * that have it and the portable slicing-by-8 one otherwise
 * (B2FS_SIMD=generic in the environment forces the portable one).  The
 * value chains: b2_crc32c(b2_crc32c(0, a, n), b, m) is the CRC of a then
 * b; start with 0.  CRC-32C("123456789") == 0xE3069283.
 */
#ifndef B2_CRC32C_H
#define B2_CRC32C_H

#include <stddef.h>
#include <stdint.h>

uint32_t b2_crc32c(uint32_t crc, const void *buf, size_t n);

/* The implementations, for tests and benchmarks. */
uint32_t b2_crc32c_generic(uint32_t crc, const void *buf, size_t n);
/* 1 when b2_crc32c_sse42 may be called (x86_64 with SSE4.2). */
int b2_crc32c_sse42_ok(void);
uint32_t b2_crc32c_sse42(uint32_t crc, const void *buf, size_t n);
/* "sse4.2" or "generic": the one b2_crc32c uses. */
const char *b2_crc32c_impl(void);

#endif /* B2_CRC32C_H */
