/* blosclz_enc.c - blosclz encoder (placeholder: stores nothing yet). */
#include "codec/codec_internal.h"

int b2_blosclz_compress(int clevel, const uint8_t *src, size_t srclen,
                        uint8_t *dst, size_t dstcap) {
  (void)clevel; (void)src; (void)srclen; (void)dst; (void)dstcap;
  return 0;
}
