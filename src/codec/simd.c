/*
 * simd.c - picks the filter kernels once per process: AVX2, SSE2 or the
 * portable ones, from what the compiler targeted and the CPU supports.
 * B2FS_SIMD=generic|sse2|avx2 in the environment can force a lower level
 * (never a higher one), for tests comparing the implementations.
 */
#include "b2_codec.h"
#include "codec/codec_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static const struct b2_simd_kernels generic = {
    "generic", b2_shuffle_generic, b2_unshuffle_generic,
    b2_bitshuffle_generic, b2_bitunshuffle_generic};

static const struct b2_simd_kernels *chosen = &generic;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static int cpu_has(const char *feature) {
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
  __builtin_cpu_init();
  if (strcmp(feature, "avx2") == 0) return __builtin_cpu_supports("avx2");
  if (strcmp(feature, "sse2") == 0) return __builtin_cpu_supports("sse2");
#endif
  (void)feature;
  return 0;
}

static void choose(void) {
  const char *want = getenv("B2FS_SIMD");
  int limit = 2; /* 0 generic, 1 sse2, 2 avx2 */
  if (want && strcmp(want, "generic") == 0) limit = 0;
  else if (want && strcmp(want, "sse2") == 0) limit = 1;
  const struct b2_simd_kernels *k;
  if (limit >= 2 && (k = b2_simd_avx2_kernels()) && cpu_has("avx2"))
    chosen = k;
  else if (limit >= 1 && (k = b2_simd_sse2_kernels()) && cpu_has("sse2"))
    chosen = k;
  else
    chosen = &generic;
}

const struct b2_simd_kernels *b2_simd(void) {
  pthread_once(&once, choose);
  return chosen;
}

const char *b2_simd_level(void) { return b2_simd()->name; }
