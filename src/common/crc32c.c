/*
 * crc32c.c - portable CRC-32C (slicing-by-8: eight 256-entry tables let
 * one step consume 8 input bytes) and the run-time choice between it and
 * the SSE4.2 version of crc32c_sse42.c.
 */
#include "common/crc32c.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

#define POLY 0x82F63B78u /* reflected Castagnoli polynomial */

/* tab[k][v]: the CRC register after byte v followed by k zero bytes. */
static uint32_t tab[8][256];
static pthread_once_t tab_once = PTHREAD_ONCE_INIT;

static void tab_init(void) {
  for (uint32_t v = 0; v < 256; v++) {
    uint32_t c = v;
    for (int b = 0; b < 8; b++) c = (c >> 1) ^ (POLY & (0u - (c & 1)));
    tab[0][v] = c;
  }
  for (int k = 1; k < 8; k++)
    for (int v = 0; v < 256; v++)
      tab[k][v] = (tab[k - 1][v] >> 8) ^ tab[0][tab[k - 1][v] & 0xff];
}

uint32_t b2_crc32c_generic(uint32_t crc, const void *buf, size_t n) {
  pthread_once(&tab_once, tab_init);
  const uint8_t *p = buf;
  uint32_t c = ~crc;
  for (; n && ((uintptr_t)p & 7); n--) c = tab[0][(c ^ *p++) & 0xff] ^ (c >> 8);
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w = b2_le64(p) ^ c;
    c = tab[7][w & 0xff] ^ tab[6][(w >> 8) & 0xff] ^
        tab[5][(w >> 16) & 0xff] ^ tab[4][(w >> 24) & 0xff] ^
        tab[3][(w >> 32) & 0xff] ^ tab[2][(w >> 40) & 0xff] ^
        tab[1][(w >> 48) & 0xff] ^ tab[0][w >> 56];
  }
  for (; n; n--) c = tab[0][(c ^ *p++) & 0xff] ^ (c >> 8);
  return ~c;
}

/* ---- run-time choice ------------------------------------------------------ */

typedef uint32_t (*crc_fn)(uint32_t, const void *, size_t);
static crc_fn chosen = b2_crc32c_generic;
static pthread_once_t choose_once = PTHREAD_ONCE_INIT;

static void choose(void) {
  const char *want = getenv("B2FS_SIMD");
  int generic_only = want && strcmp(want, "generic") == 0;
  chosen = !generic_only && b2_crc32c_sse42_ok() ? b2_crc32c_sse42
                                                 : b2_crc32c_generic;
}

uint32_t b2_crc32c(uint32_t crc, const void *buf, size_t n) {
  pthread_once(&choose_once, choose);
  return chosen(crc, buf, n);
}

const char *b2_crc32c_impl(void) {
  pthread_once(&choose_once, choose);
  return chosen == b2_crc32c_generic ? "generic" : "sse4.2";
}
