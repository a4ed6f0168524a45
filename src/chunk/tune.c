/* tune.c - the encoder's automatic choices, made as the reference library
 * makes them so that our chunks look like its chunks: whether blocks are
 * split into typesize streams, and the block size for a given codec,
 * level, typesize, filters and input size. */
#include "b2_chunk.h"
#include "chunk/chunk_internal.h"

#define TUNE_L1 (32 * 1024)
#define TUNE_MAX_STREAMS 16

static int has_filter(const b2_cparams *p, int fid) {
  for (int i = 0; i < B2_MAX_FILTERS; i++)
    if (p->filters[i] == fid) return 1;
  return 0;
}

/* Codecs meant for high compression ratios get larger blocks. */
static int high_ratio_codec(int codec) {
  return codec == B2_CODEC_LZ4HC || codec == B2_CODEC_ZLIB ||
         codec == B2_CODEC_ZSTD;
}

int b2_chunk_split_rule(const b2_cparams *p, int32_t typesize,
                        int32_t blocksize) {
  int mode = p->splitmode ? p->splitmode : B2_SPLIT_FORWARD_COMPAT;
  if (mode == B2_SPLIT_ALWAYS) return 1;
  if (mode == B2_SPLIT_NEVER) return 0;
  /* AUTO and FORWARD_COMPAT: fast codecs (and low zstd levels) split
   * shuffled data of small items in big enough blocks. */
  int fast = p->codec == B2_CODEC_BLOSCLZ || p->codec == B2_CODEC_LZ4 ||
             (p->codec == B2_CODEC_ZSTD && p->clevel <= 5);
  return fast && has_filter(p, B2_FILTER_SHUFFLE) &&
         typesize <= TUNE_MAX_STREAMS &&
         blocksize / typesize >= B2_MIN_BUFFERSIZE;
}

int32_t b2_chunk_blocksize(const b2_cparams *p, size_t nbytes_in) {
  int32_t typesize = p->typesize > 0 ? p->typesize : 1;
  int32_t nbytes = nbytes_in > (size_t)B2_CHUNK_MAXSIZE ? B2_CHUNK_MAXSIZE
                                                        : (int32_t)nbytes_in;
  int clevel = p->clevel;
  int32_t bs = nbytes;

  if (nbytes < typesize) return 1;
  int split = b2_chunk_split_rule(p, typesize, nbytes);
  if (p->blocksize > 0) {
    bs = p->blocksize;
  } else {
    if (nbytes >= TUNE_L1) {
      bs = TUNE_L1;
      if (high_ratio_codec(p->codec)) bs *= 2;
      switch (clevel) {
      case 0: bs /= 4; break;
      case 1: bs /= 2; break;
      case 2: break;
      case 3: bs *= 2; break;
      case 4:
      case 5: bs *= 4; break;
      case 6:
      case 7:
      case 8: bs *= 8; break;
      case 9:
        bs *= 8;
        if (high_ratio_codec(p->codec)) bs *= 2;
        break;
      default: break;
      }
    }
    if (clevel > 0 && split) {
      static const int32_t per_level[10] = {0,  32, 32, 32,  64,
                                            64, 64, 128, 256, 512};
      bs = per_level[clevel >= 1 && clevel <= 9 ? clevel : 9] * 1024;
      bs *= typesize; /* whole streams of the same size per item byte */
      if (bs > 4 * 1024 * 1024) bs = 4 * 1024 * 1024;
      if (bs < 32 * 1024) bs = 32 * 1024;
    }
  }
  if (bs > nbytes) bs = nbytes;
  if (bs > typesize) bs = bs / typesize * typesize;
  return bs;
}
