/* encode.c - build chunks: the Blosc2 32-byte header, block starts, and
 * per block the forward filter pipeline then the streams (zero runs,
 * byte runs, codec streams, raw streams), as the reference library lays
 * them out; the whole input memcpy'd when it is tiny, clevel is 0, or the
 * encoded chunk would not fit in nbytes + 32; all-zero streams become a
 * special zero chunk.  Also special chunks and the default parameters. */
#include "b2_chunk.h"
#include "b2_codec.h"
#include "b2_error.h"
#include "chunk/chunk_internal.h"
#include "common/util.h"

#include <string.h>

void b2_cparams_default(b2_cparams *p) {
  memset(p, 0, sizeof *p);
  p->codec = B2_CODEC_ZSTD;
  p->clevel = 1;
  p->typesize = 8;
  p->filters[B2_MAX_FILTERS - 1] = B2_FILTER_SHUFFLE;
  p->blocksize = 0;
  p->splitmode = B2_SPLIT_FORWARD_COMPAT;
}

int b2_cparams_lossy_blocks(const b2_cparams *p) {
  if (b2_codec_is_zfp(p->codec)) return 1;
  for (int i = 0; i < B2_MAX_FILTERS; i++)
    if (p->filters[i] == B2_FILTER_NDMEAN) return 1;
  return 0;
}

int b2_cparams_check(const b2_cparams *p) {
  const b2_chunk_geom *g = &p->geom;
  if (p->blocksize > B2_MAX_BLOCKSIZE)
    return b2_fail(B2_E_INVAL, "blocks of %d bytes (the format holds at most %d)", p->blocksize,
                   B2_MAX_BLOCKSIZE);
  size_t nbytes = p->blocksize > 0 ? (size_t)p->blocksize : 0;
  int rc = b2_codec_check(p->codec, p->codec_meta, p->typesize, g->ndim, g->blockshape, nbytes);
  for (int i = 0; rc == 0 && i < B2_MAX_FILTERS; i++) {
    rc = b2_filter_check(p->filters[i], p->filters_meta[i], p->typesize, g->ndim, g->blockshape,
                         nbytes);
    if (rc == 0 && b2_codec_is_zfp(p->codec) && b2_filter_moves_bytes(p->filters[i]))
      rc = b2_fail(B2_E_INVAL, "%s encodes the items' values: %s before it would give it other "
                   "bytes (filters=none, or filters that keep the values)",
                   b2_codec_name(p->codec), b2_filter_name(p->filters[i]));
  }
  return rc < 0 ? B2_E_INVAL : 0; /* a choice that does not fit, whatever the reason */
}

const char *b2_cparams_float_only(const b2_cparams *p) {
  if (b2_codec_is_zfp(p->codec)) return b2_codec_name(p->codec);
  for (int i = 0; i < B2_MAX_FILTERS; i++)
    if (p->filters[i] == B2_FILTER_NDMEAN || p->filters[i] == B2_FILTER_TRUNC_PREC)
      return b2_filter_name(p->filters[i]);
  return NULL;
}

int32_t b2_cparams_min_side(const b2_cparams *p) {
  return b2_codec_is_zfp(p->codec) ? B2_ZFP_MIN_SIDE : 1;
}

size_t b2_chunk_bound(size_t nbytes) { return nbytes + B2_CHUNK_HEADER_EXT; }

static int check_cparams(const b2_cparams *p) {
  if (!p) return b2_fail(B2_E_INVAL, "chunk encode: no parameters");
  if (b2_codec_format(p->codec) < 0)
    return b2_fail(B2_E_UNSUPPORTED, "chunk encode: unsupported codec %d",
                   p->codec);
  if (p->clevel < 0 || p->clevel > 9)
    return b2_fail(B2_E_INVAL, "chunk encode: clevel %d not in 0-9",
                   p->clevel);
  if (p->typesize < 1 || p->typesize > 255)
    return b2_fail(B2_E_INVAL, "chunk encode: typesize %d not in 1-255",
                   p->typesize);
  if (p->blocksize < 0)
    return b2_fail(B2_E_INVAL, "chunk encode: blocksize %d", p->blocksize);
  if (p->splitmode < 0 || p->splitmode > B2_SPLIT_FORWARD_COMPAT)
    return b2_fail(B2_E_INVAL, "chunk encode: split mode %d", p->splitmode);
  for (int i = 0; i < B2_MAX_FILTERS; i++) {
    int f = p->filters[i];
    if (!b2_filter_supported(f))
      return b2_fail(B2_E_UNSUPPORTED, "chunk encode: filter id %d in slot "
                     "%d cannot be encoded", f, i);
  }
  return 0;
}

struct ectx {
  const b2_cparams *p;
  const uint8_t *src;   /* whole chunk input */
  uint8_t *dst;
  int64_t destsize;     /* the encoded chunk may not exceed this */
  int32_t blocksize, nblocks, leftover;
  int split, nfilters;
};

/* Run the forward pipeline over one block; returns the filtered bytes
 * (the input itself when there are no filters) or NULL on failure. */
static const uint8_t *forward_block(const struct ectx *e, int64_t offset,
                                    int32_t bsize, int *rc) {
  const uint8_t *cur = e->src + offset;
  if (e->nfilters == 0) return cur;
  uint8_t *a = b2_chunk_scratch(B2_SCR_PIPE_A, (size_t)bsize);
  uint8_t *b = b2_chunk_scratch(B2_SCR_PIPE_B, (size_t)bsize);
  if (!a || !b) {
    *rc = b2_fail(B2_E_NOMEM, "chunk encode: no scratch memory");
    return NULL;
  }
  for (int i = 0; i < B2_MAX_FILTERS; i++) {
    int f = e->p->filters[i];
    if (f == B2_FILTER_NONE) continue;
    uint8_t *out = cur == a ? b : a;
    /* Block 0 is delta-coded against itself (its current pipeline input),
     * later blocks against the raw first block of the chunk. */
    const uint8_t *ref = offset == 0 ? cur : e->src;
    *rc = b2_filter_forward(f, e->p->filters_meta[i], e->p->typesize,
                            (size_t)offset, (size_t)bsize, ref, cur, out,
                            e->p->geom.ndim > 0 ? &e->p->geom : NULL);
    if (*rc < 0) return NULL;
    cur = out;
  }
  return cur;
}

static int is_run(const uint8_t *s, int32_t n) {
  return n <= 1 || memcmp(s, s + 1, (size_t)n - 1) == 0;
}

/* Encode block j at dst[*pos]; advances *pos.  Returns 1 on success, 0 when
 * the chunk does not fit in destsize (store memcpy'd), or an error. */
static int encode_block(const struct ectx *e, int32_t j, int64_t *pos) {
  int leftoverblock = (j == e->nblocks - 1 && e->leftover > 0);
  int32_t bsize = leftoverblock ? e->leftover : e->blocksize;
  int64_t offset = (int64_t)j * e->blocksize;
  int rc = 0;
  const uint8_t *in = forward_block(e, offset, bsize, &rc);
  if (!in) return b2_context(rc, "block %d", j);
  int32_t nstreams = (e->split && !leftoverblock) ? e->p->typesize : 1;
  int32_t neb = bsize / nstreams;
  int64_t p = *pos;
  for (int32_t s = 0; s < nstreams; s++) {
    const uint8_t *sp = in + (size_t)s * (size_t)neb;
    if (p + 4 > e->destsize) return 0;
    uint8_t *csize = e->dst + p;
    p += 4;
    if (is_run(sp, neb)) {
      /* csize 0: zeros; -v followed by a token byte 1: bytes of value v. */
      b2_put_le32(csize, (uint32_t)-(int32_t)sp[0]);
      if (sp[0] != 0) {
        if (p + 1 > e->destsize) return 0;
        e->dst[p++] = 1;
      }
      continue;
    }
    int64_t maxout = neb;
    if (p + maxout > e->destsize) {
      maxout = e->destsize - p;
      if (maxout <= 0) return 0;
    }
    int c = e->p->codec == B2_CODEC_NDLZ
                ? b2_ndlz_compress(e->p->codec_meta, e->p->geom.ndim, e->p->geom.blockshape, sp,
                                   (size_t)neb, e->dst + p, (size_t)maxout)
            : b2_codec_is_zfp(e->p->codec)
                ? b2_zfp_compress(e->p->codec, e->p->codec_meta, e->p->typesize, e->p->geom.ndim,
                                  e->p->geom.blockshape, sp, (size_t)neb, e->dst + p,
                                  (size_t)maxout)
                : b2_stream_compress(e->p->codec, e->p->clevel, sp, (size_t)neb, e->dst + p,
                                     (size_t)maxout, NULL, 0);
    if (c < 0) return b2_context(c, "block %d stream %d", j, s);
    if (c == 0 || c >= neb) { /* did not compress: store raw */
      if (p + neb > e->destsize) return 0;
      memcpy(e->dst + p, sp, (size_t)neb);
      c = neb;
    }
    b2_put_le32(csize, (uint32_t)c);
    p += c;
  }
  *pos = p;
  return 1;
}

int b2_chunk_encode(const b2_cparams *p, const void *src, size_t n, void *dst,
                    size_t dstcap) {
  int rc = check_cparams(p);
  if (rc < 0) return rc;
  if (n > (size_t)B2_CHUNK_MAXSIZE)
    return b2_fail(B2_E_LIMIT, "chunk encode: %zu bytes exceed the chunk "
                   "limit %d", n, B2_CHUNK_MAXSIZE);
  if (!dst || (n > 0 && !src))
    return b2_fail(B2_E_INVAL, "chunk encode: no buffer");
  if (dstcap < b2_chunk_bound(n))
    return b2_fail(B2_E_INVAL, "chunk encode: %zu-byte buffer for a chunk "
                   "bound of %zu", dstcap, b2_chunk_bound(n));

  struct ectx e;
  e.p = p;
  e.src = src;
  e.dst = dst;
  e.destsize = (int64_t)b2_chunk_bound(n); /* as the reference's callers */
  e.blocksize = b2_chunk_blocksize(p, n);
  e.nblocks = n ? (int32_t)(n / (size_t)e.blocksize) : 0;
  e.leftover = n ? (int32_t)(n % (size_t)e.blocksize) : 0;
  if (e.leftover) e.nblocks++;
  e.nfilters = 0;
  for (int i = 0; i < B2_MAX_FILTERS; i++)
    if (p->filters[i] != B2_FILTER_NONE) e.nfilters++;
  /* A block smaller than an item cannot be split into item streams. */
  e.split = b2_chunk_split_rule(p, p->typesize, e.blocksize) &&
            e.blocksize >= p->typesize;

  uint8_t *h = dst;
  memset(h, 0, B2_CHUNK_HEADER_EXT);
  h[B2H_VERSION] = B2_VERSION_STABLE;
  h[B2H_VERSIONLZ] = 1;
  h[B2H_TYPESIZE] = (uint8_t)p->typesize;
  b2_put_le32(h + B2H_NBYTES, (uint32_t)n);
  b2_put_le32(h + B2H_BLOCKSIZE, (uint32_t)e.blocksize);
  memcpy(h + B2H_FILTERS, p->filters, B2_MAX_FILTERS);
  memcpy(h + B2H_FMETA, p->filters_meta, B2_MAX_FILTERS);
  h[B2H_UDCODEC] = (uint8_t)p->codec;
  h[B2H_CODEC_META] = (uint8_t)p->codec_meta;
  int flags = B2F_SHUFFLE | B2F_BITSHUFFLE; /* extended header */

  int memcpyed = p->clevel == 0 || n < B2_MIN_BUFFERSIZE;
  int64_t pos = B2_CHUNK_HEADER_EXT + 4 * (int64_t)e.nblocks;
  if (!memcpyed && pos > e.destsize) memcpyed = 1;
  int32_t cbytes = 0;
  if (!memcpyed) {
    for (int i = 0; i < B2_MAX_FILTERS; i++)
      if (p->filters[i] == B2_FILTER_DELTA) flags |= B2F_DELTA;
    if (!e.split) flags |= B2F_NOSPLIT;
    flags |= b2_codec_format(p->codec) << 5;
    for (int32_t j = 0; j < e.nblocks; j++) {
      b2_put_le32(h + B2_CHUNK_HEADER_EXT + 4 * (size_t)j, (uint32_t)pos);
      rc = encode_block(&e, j, &pos);
      if (rc < 0) return rc;
      if (rc == 0) {
        memcpyed = 1; /* does not fit: fall back to a plain copy */
        break;
      }
    }
    if (!memcpyed) {
      int64_t nstreams = e.nblocks;
      if (e.split)
        nstreams = e.leftover ? (int64_t)(e.nblocks - 1) * p->typesize + 1
                              : (int64_t)e.nblocks * p->typesize;
      /* Every stream a run of zeros: a special zero chunk, which the
       * reference library accepts only for whole items. */
      if (pos == B2_CHUNK_HEADER_EXT + 4 * (int64_t)e.nblocks + 4 * nstreams &&
          n % (size_t)p->typesize == 0) {
        h[B2H_B2FLAGS] |= B2_SPECIAL_ZERO << 4;
        pos = B2_CHUNK_HEADER_EXT;
      }
      cbytes = (int32_t)pos;
    }
  }
  if (memcpyed) {
    flags |= B2F_MEMCPYED;
    if (n) memcpy(h + B2_CHUNK_HEADER_EXT, src, n);
    cbytes = (int32_t)(n + B2_CHUNK_HEADER_EXT);
  }
  h[B2H_FLAGS] = (uint8_t)flags;
  b2_put_le32(h + B2H_CBYTES, (uint32_t)cbytes);
  return cbytes;
}

int b2_chunk_make_special(int kind, int32_t nbytes, int typesize,
                          const void *value, void *dst, size_t dstcap) {
  if (kind < B2_SPECIAL_ZERO || kind > B2_SPECIAL_UNINIT)
    return b2_fail(B2_E_INVAL, "special chunk: unknown kind %d", kind);
  if (nbytes < 0 || nbytes > B2_CHUNK_MAXSIZE)
    return b2_fail(B2_E_INVAL, "special chunk: nbytes %d", nbytes);
  if (typesize < 1 || typesize > 255)
    return b2_fail(B2_E_INVAL, "special chunk: typesize %d", typesize);
  if (kind != B2_SPECIAL_ZERO && nbytes % typesize != 0)
    return b2_fail(B2_E_INVAL, "special chunk: nbytes %d not a multiple of "
                   "typesize %d", nbytes, typesize);
  if (kind == B2_SPECIAL_NAN && typesize != 4 && typesize != 8)
    return b2_fail(B2_E_INVAL, "special chunk: NaN needs typesize 4 or 8");
  if (kind == B2_SPECIAL_VALUE && (!value || nbytes < typesize))
    return b2_fail(B2_E_INVAL, "special chunk: repeated value needs a value "
                   "and nbytes >= typesize");
  size_t cbytes = B2_CHUNK_HEADER_EXT +
                  (kind == B2_SPECIAL_VALUE ? (size_t)typesize : 0);
  if (!dst || dstcap < cbytes)
    return b2_fail(B2_E_INVAL, "special chunk: %zu-byte buffer, need %zu",
                   dst ? dstcap : 0, cbytes);
  uint8_t *h = dst;
  memset(h, 0, B2_CHUNK_HEADER_EXT);
  h[B2H_VERSION] = B2_VERSION_STABLE;
  h[B2H_VERSIONLZ] = 1;
  h[B2H_FLAGS] = B2F_SHUFFLE | B2F_BITSHUFFLE;
  h[B2H_TYPESIZE] = (uint8_t)typesize;
  b2_put_le32(h + B2H_NBYTES, (uint32_t)nbytes);
  /* No blocks are stored, but readers want a sane blocksize: the one our
   * default parameters would choose (callers may store another). */
  b2_cparams dp;
  b2_cparams_default(&dp);
  dp.typesize = typesize;
  b2_put_le32(h + B2H_BLOCKSIZE, (uint32_t)b2_chunk_blocksize(&dp, (size_t)nbytes));
  b2_put_le32(h + B2H_CBYTES, (uint32_t)cbytes);
  h[B2H_B2FLAGS] = (uint8_t)(kind << 4);
  if (kind == B2_SPECIAL_VALUE)
    memcpy(h + B2_CHUNK_HEADER_EXT, value, (size_t)typesize);
  return (int)cbytes;
}
