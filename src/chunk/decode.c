/* decode.c - decode a whole chunk or only the blocks covering a byte range:
 * special chunks (zeros, NaN, repeated value, uninitialised), memcpy'd
 * chunks, and blocks of streams (zero runs, byte runs, raw or codec
 * streams) followed by the filter pipeline in reverse slot order.
 * Every offset and size read from the chunk is checked before use. */
#include "b2_chunk.h"
#include "b2_codec.h"
#include "b2_error.h"
#include "chunk/chunk_internal.h"
#include "common/pool.h"
#include "common/util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

struct dctx {
  const uint8_t *c;
  b2_chunk_info in;
  const uint8_t *dict;
  size_t dictlen;
  int64_t data_start;  /* first byte past block starts and dictionary */
  int nactive;         /* filters that do something on decode */
  int last_active;     /* lowest slot with such a filter, -1 if none */
  int last_moving;     /* lowest active slot that is not delta (delta works
                          in place, so this step may write to the caller's
                          buffer), -1 if none */
  int has_delta;
  int bounded;         /* a block's stored bytes end at the next block start
                          (b2_chunk_decode_range_spans), not the chunk's end */
  const b2_chunk_geom *geom; /* the array's block shape (ZFP codecs, cell
                                filters), or NULL */
};

/* Whether pipeline slot i leaves a block unchanged on decode: a no-op
 * filter, or a byte shuffle of 1-byte elements (the identity). */
static int slot_is_noop(const b2_chunk_info *in, int i) {
  int f = in->filters[i];
  if (f == B2_FILTER_SHUFFLE)
    return (in->filters_meta[i] ? in->filters_meta[i] : in->typesize) <= 1;
  return b2_filter_is_decode_noop(f);
}

/* The rest of the context, once d->in is parsed. */
static void dctx_setup(struct dctx *d, const void *chunk) {
  d->c = chunk;
  d->bounded = 0;
  d->dict = NULL;
  d->dictlen = 0;
  d->data_start = d->in.header_len + 4 * (int64_t)d->in.nblocks;
  if (d->in.dict) {
    int32_t dsize = (int32_t)b2_le32(d->c + d->data_start);
    if (d->in.format == B2_FORMAT_ZSTD || d->in.format == B2_FORMAT_LZ4) {
      d->dict = d->c + d->data_start + 4;
      d->dictlen = (size_t)dsize;
    }
    d->data_start += 4 + (int64_t)dsize;
  }
  d->nactive = 0;
  d->last_active = -1;
  d->last_moving = -1;
  d->has_delta = 0;
  for (int i = B2_MAX_FILTERS - 1; i >= 0; i--) {
    int f = d->in.filters[i];
    if (slot_is_noop(&d->in, i)) continue;
    d->nactive++;
    d->last_active = i;
    if (f == B2_FILTER_DELTA) d->has_delta = 1;
    else d->last_moving = i;
  }
}

static int dctx_init(struct dctx *d, const void *chunk, size_t len, const b2_chunk_geom *geom) {
  int rc = b2_chunk_parse(chunk, len, &d->in);
  if (rc < 0) return rc;
  dctx_setup(d, chunk);
  d->geom = geom && geom->ndim > 0 ? geom : NULL;
  return 0;
}

/* Stream j (-1: the block's only one) of block nb, `cs` stored bytes,
 * decoded into exactly `n` bytes; with `want` < n only the first `want`
 * need be right (the codec may stop early).  Returns 0 or a negative code
 * naming the block and stream. */
static int stream_fail(int rc, int32_t nb, int32_t j) {
  return j < 0 ? b2_context(rc, "block %d", nb) : b2_context(rc, "block %d stream %d", nb, j);
}

static int stream_decode(const struct dctx *d, int32_t nb, int32_t j, const uint8_t *src,
                         int32_t cs, uint8_t *out, int32_t n, size_t want) {
  const b2_chunk_info *in = &d->in;
  int rc;
  if (b2_codec_is_zfp(in->codec)) {
    if (!d->geom)
      return stream_fail(b2_fail(B2_E_FORMAT, "%s needs the array's block shape (no b2nd "
                                 "metalayer)", b2_codec_name(in->codec)), nb, j);
    rc = b2_zfp_decompress(in->codec, in->codec_meta, in->typesize, d->geom->ndim,
                           d->geom->blockshape, src, (size_t)cs, out, (size_t)n);
  } else if (in->codec == B2_CODEC_NDLZ) {
    rc = b2_ndlz_decompress(in->codec_meta, src, (size_t)cs, out, (size_t)n);
  } else if (want < (size_t)n) {
    rc = b2_stream_decompress_prefix(in->format, src, (size_t)cs, out, (size_t)n, want,
                                     d->dict, d->dictlen);
    return rc < 0 ? stream_fail(rc, nb, j) : 0;
  } else {
    rc = b2_stream_decompress(in->format, src, (size_t)cs, out, (size_t)n, d->dict,
                              d->dictlen);
  }
  if (rc < 0) return stream_fail(rc, nb, j);
  if (rc != n)
    return stream_fail(b2_fail(B2_E_CODEC, "decodes to %d bytes, expected %d", rc, n), nb, j);
  return 0;
}

/* Streams of a fixed-size block: one per byte of the item when split. */
static int32_t block_streams(const struct dctx *d, int leftoverblock) {
  return (d->in.split && !leftoverblock) ? d->in.typesize : 1;
}

/* Decode the streams of block nb (stored from src_start; streams may run
 * to src_end) into out[0, bsize).  Only the first `want` bytes of each
 * stream need be right (want >= the stream's size: all of them). */
static int decode_streams(const struct dctx *d, int32_t nb, int32_t bsize,
                          int leftoverblock, int64_t src_start,
                          int64_t src_end, uint8_t *out, size_t want) {
  const uint8_t *c = d->c;
  const b2_chunk_info *in = &d->in;
  if (in->vlblocks) {
    /* [int32 bsize][stream to the next block start] */
    int64_t p = src_start + 4;
    int64_t cs = src_end - p;
    if (cs == bsize) {
      memcpy(out, c + p, (size_t)bsize);
      return 0;
    }
    return stream_decode(d, nb, -1, c + p, (int32_t)cs, out, bsize, (size_t)bsize);
  }
  int32_t nstreams = block_streams(d, leftoverblock);
  int32_t neb = bsize / nstreams;
  if (neb == 0)
    return b2_fail(B2_E_FORMAT, "block %d: %d bytes cannot hold %d streams",
                   nb, bsize, nstreams);
  int64_t p = src_start;
  size_t fill = want < (size_t)neb ? want : (size_t)neb; /* bytes needed */
  for (int32_t j = 0; j < nstreams; j++) {
    uint8_t *o = out + (size_t)j * (size_t)neb;
    if (p + 4 > src_end)
      return b2_fail(B2_E_FORMAT, "block %d: stream %d size past the chunk "
                     "end", nb, j);
    int32_t cs = (int32_t)b2_le32(c + p);
    p += 4;
    if (cs == 0) {
      memset(o, 0, fill);
    } else if (cs < 0) {
      if (p + 1 > src_end)
        return b2_fail(B2_E_FORMAT, "block %d: stream %d run token past the "
                       "chunk end", nb, j);
      uint8_t token = c[p++];
      if (!(token & 1) || cs < -255)
        return b2_fail(B2_E_FORMAT, "block %d: stream %d: bad run (size %d, "
                       "token %d)", nb, j, cs, token);
      memset(o, (uint8_t)(-cs), fill);
    } else {
      if (cs > src_end - p)
        return b2_fail(B2_E_FORMAT, "block %d: stream %d of %d bytes overruns "
                       "the chunk", nb, j, cs);
      if (cs == neb) {
        memcpy(o, c + p, fill);
      } else {
        /* Only the start of the stream may be wanted: the codec may stop
         * there. */
        int rc = stream_decode(d, nb, nstreams > 1 ? j : -1, c + p, cs, o, neb, fill);
        if (rc < 0) return rc;
      }
      p += cs;
    }
  }
  /* Bytes past the last whole stream (a block not a multiple of typesize)
   * are not stored: make them deterministic. */
  size_t done = (size_t)nstreams * (size_t)neb;
  if (done < (size_t)bsize) memset(out + done, 0, (size_t)bsize - done);
  return 0;
}

/* Block 0 of a chunk (the delta reference) being decoded by another
 * thread while this one decodes a later block (b2_chunk_decode_par):
 * `ready` is 0 until it is there, 1 once it is, 2 if it failed (set under
 * mu, with ref0 and ref0_size written before it). */
struct refwait {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  atomic_uint ready;
  const uint8_t *ref0;
  int32_t ref0_size;
};

/* How long a block waiting for block 0 polls before sleeping: block 0
 * usually ends about when the other blocks' codec steps do, and waking a
 * sleeping thread costs 30-60 us on a virtual machine. */
#define REF_POLL_US 300

static int ref_wait(struct refwait *w, const uint8_t **ref0, int32_t *size) {
  b2_poll_change(&w->ready, 0, REF_POLL_US);
  if (atomic_load_explicit(&w->ready, memory_order_acquire) == 0) {
    pthread_mutex_lock(&w->mu);
    while (atomic_load_explicit(&w->ready, memory_order_acquire) == 0)
      pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
  }
  int ok = atomic_load_explicit(&w->ready, memory_order_acquire) == 1;
  *ref0 = w->ref0;
  *size = w->ref0_size;
  return ok ? 0 : b2_fail(B2_E_FORMAT, "block 0, the delta reference, failed");
}

static void ref_set(struct refwait *w, const uint8_t *ref0, int32_t size, int ok) {
  pthread_mutex_lock(&w->mu);
  w->ref0 = ref0;
  w->ref0_size = size;
  atomic_store_explicit(&w->ready, ok ? 1u : 2u, memory_order_release);
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

/* Decode bytes [wlo, whi) of one block into out[0, whi - wlo), filters
 * included.  ref0 is block 0 decoded (the delta reference) or NULL when
 * decoding block 0 itself, or when `rw` will give it: then the streams
 * and the filters before delta run first, and only the delta step waits
 * for block 0. */
static int decode_block(const struct dctx *d, int32_t nb, int64_t boff,
                        int32_t bsize, int leftoverblock, int64_t src_start,
                        int64_t src_end, uint8_t *out, size_t wlo, size_t whi,
                        const uint8_t *ref0, int32_t ref0_size,
                        struct refwait *rw) {
  int rc;
  int whole = wlo == 0 && whi == (size_t)bsize;
  int32_t nstreams = block_streams(d, leftoverblock);
  if (d->nactive == 0) {
    uint8_t *t = whole ? out : b2_chunk_scratch(B2_SCR_BLOCK, (size_t)bsize);
    if (!t) return b2_fail(B2_E_NOMEM, "block %d: no scratch memory", nb);
    rc = decode_streams(d, nb, bsize, leftoverblock, src_start, src_end, t,
                        nstreams == 1 ? whi : (size_t)bsize);
    if (rc == 0 && !whole) memcpy(out, t + wlo, whi - wlo);
    return rc;
  }
  /* With only in-place steps (delta) and the whole block wanted, the
   * streams go straight to the caller's buffer. */
  uint8_t *a = whole && d->last_moving < 0
                   ? out
                   : b2_chunk_scratch(B2_SCR_PIPE_A, (size_t)bsize);
  if (!a) return b2_fail(B2_E_NOMEM, "block %d: no scratch memory", nb);
  /* Shuffle alone over split streams (stream b holds byte b of every
   * item), a window wanted: each stream's first items up to the window's
   * end are enough. */
  size_t want = (size_t)bsize;
  if (!whole && d->nactive == 1 && nstreams > 1 &&
      d->in.filters[d->last_active] == B2_FILTER_SHUFFLE) {
    int meta = d->in.filters_meta[d->last_active];
    size_t ts = (size_t)(meta ? meta : d->in.typesize);
    if (ts == (size_t)nstreams) want = (whi + ts - 1) / ts;
  }
  rc = decode_streams(d, nb, bsize, leftoverblock, src_start, src_end, a, want);
  if (rc < 0) return rc;
  uint8_t *cur = a;
  for (int i = B2_MAX_FILTERS - 1; i >= 0; i--) {
    int f = d->in.filters[i];
    int meta = d->in.filters_meta[i];
    if (slot_is_noop(&d->in, i)) continue;
    if (f == B2_FILTER_DELTA) {
      if (boff != 0 && !ref0 && rw && (rc = ref_wait(rw, &ref0, &ref0_size)) < 0)
        return b2_context(rc, "block %d", nb);
      if (boff != 0 && (!ref0 || bsize > ref0_size))
        return b2_fail(B2_E_UNSUPPORTED, "block %d: delta block larger than "
                       "its reference block", nb);
      rc = b2_filter_backward(f, meta, d->in.typesize, d->in.version,
                              (size_t)boff, (size_t)bsize,
                              boff == 0 ? NULL : ref0, cur, cur, NULL);
    } else if (i == d->last_active && !whole && f == B2_FILTER_SHUFFLE) {
      /* Last step and only a window wanted: gather just those bytes. */
      b2_unshuffle_window((size_t)(meta ? meta : d->in.typesize),
                          (size_t)bsize, cur, wlo, whi, out);
      return 0;
    } else {
      uint8_t *dst;
      if (i == d->last_moving && whole) {
        dst = out; /* only in-place steps (if any) follow */
      } else if (cur == a) {
        dst = b2_chunk_scratch(B2_SCR_PIPE_B, (size_t)bsize);
        if (!dst) return b2_fail(B2_E_NOMEM, "block %d: no scratch memory", nb);
      } else {
        dst = a;
      }
      rc = b2_filter_backward(f, meta, d->in.typesize, d->in.version,
                              (size_t)boff, (size_t)bsize, NULL, cur, dst, d->geom);
      cur = dst;
    }
    if (rc < 0) return b2_context(rc, "block %d", nb);
  }
  if (cur != out) memcpy(out, cur + wlo, whi - wlo);
  return 0;
}

/* Repeat the `psize`-byte pattern over dst[0, n) as if dst started at
 * logical byte `phase` of a buffer filled from offset 0. */
static void fill_pattern(uint8_t *dst, size_t n, const uint8_t *pat,
                         size_t psize, size_t phase) {
  size_t first = n < psize ? n : psize;
  phase %= psize;
  for (size_t k = 0; k < first; k++) dst[k] = pat[(phase + k) % psize];
  size_t done = first;
  while (done < n) {
    size_t step = done < n - done ? done : (n - done);
    memcpy(dst + done, dst, step);
    done += step;
  }
}

static int decode_special(const struct dctx *d, size_t offset, size_t n,
                          uint8_t *dst) {
  switch (d->in.special) {
  case B2_SPECIAL_NAN: {
    uint8_t pat[8];
    if (d->in.typesize == 4)
      b2_put_le32(pat, UINT32_C(0x7fc00000));
    else
      b2_put_le64(pat, UINT64_C(0x7ff8000000000000));
    fill_pattern(dst, n, pat, (size_t)d->in.typesize, offset);
    return 0;
  }
  case B2_SPECIAL_VALUE:
    fill_pattern(dst, n, d->c + B2_CHUNK_HEADER_EXT,
                 (size_t)(d->in.cbytes - B2_CHUNK_HEADER_EXT), offset);
    return 0;
  default: /* zeros, uninitialised */
    memset(dst, 0, n);
    return 0;
  }
}

/* Where fixed-size block b lies: logical offset, size, stored start. */
static int fixed_block(const struct dctx *d, int32_t b, int64_t *boff,
                       int32_t *bsize, int *leftoverblock, int64_t *start) {
  const b2_chunk_info *in = &d->in;
  *boff = (int64_t)b * in->blocksize;
  *leftoverblock = (b == in->nblocks - 1 && in->leftover > 0);
  *bsize = *leftoverblock ? in->leftover : in->blocksize;
  *start = (int32_t)b2_le32(d->c + in->header_len + 4 * (size_t)b);
  if (*start < d->data_start || *start >= in->cbytes)
    return b2_fail(B2_E_FORMAT, "block %d: start %lld outside [%lld, %d)", b,
                   (long long)*start, (long long)d->data_start, in->cbytes);
  return 0;
}

/* Where the stored bytes of the block starting at `start` end: the chunk's
 * end, or, for a chunk of which only some blocks were read
 * (d->bounded), the next block start past it. */
static int64_t block_end(const struct dctx *d, int64_t start) {
  int64_t end = d->in.cbytes;
  if (!d->bounded) return end;
  const uint8_t *bst = d->c + d->in.header_len;
  for (int32_t b = 0; b < d->in.nblocks; b++) {
    int64_t s = (int32_t)b2_le32(bst + 4 * (size_t)b);
    if (s > start && s < end) end = s;
  }
  return end;
}

/* Decode block b's share of [offset, offset + n) into dst; the block
 * spans [boff, boff + bsize). */
static int block_window(const struct dctx *d, int32_t b, int64_t boff,
                        int32_t bsize, int leftoverblock, int64_t start,
                        int64_t end, size_t offset, size_t n, uint8_t *dst,
                        const uint8_t *ref0, int32_t ref0_size) {
  size_t lo = B2_MAX(offset, (size_t)boff);
  size_t hi = B2_MIN(offset + n, (size_t)boff + (size_t)bsize);
  if (lo >= hi) return 0;
  return decode_block(d, b, boff, bsize, leftoverblock, start, end,
                      dst + (lo - offset), lo - (size_t)boff,
                      hi - (size_t)boff, ref0, ref0_size, NULL);
}

/* Block 0 decoded whole (the delta reference): straight into dst when the
 * range covers it, else into per-thread scratch; its share of the range
 * is copied to dst. */
static int delta_reference(const struct dctx *d, int64_t end0, size_t offset,
                           size_t n, uint8_t *dst, const uint8_t **ref0,
                           int32_t *ref0_size) {
  int64_t boff, start;
  int32_t bsize;
  int leftoverblock, rc;
  if (d->in.vlblocks) {
    start = (int32_t)b2_le32(d->c + d->in.header_len);
    bsize = (int32_t)b2_le32(d->c + start);
    boff = 0;
    leftoverblock = 0;
  } else {
    rc = fixed_block(d, 0, &boff, &bsize, &leftoverblock, &start);
    if (rc < 0) return rc;
    end0 = B2_MIN(end0, block_end(d, start));
  }
  int covered = offset == 0 && n >= (size_t)bsize;
  uint8_t *t = covered ? dst : b2_chunk_scratch(B2_SCR_REF, (size_t)bsize);
  if (!t) return b2_fail(B2_E_NOMEM, "block 0: no scratch memory");
  rc = decode_block(d, 0, 0, bsize, leftoverblock, start, end0, t, 0,
                    (size_t)bsize, NULL, 0, NULL);
  if (rc < 0) return rc;
  if (!covered && offset < (size_t)bsize)
    memcpy(dst, t + offset, B2_MIN(n, (size_t)bsize - offset));
  *ref0 = t;
  *ref0_size = bsize;
  return 0;
}

/* Fixed-size blocks: decode blocks [offset/bs, (offset+n-1)/bs]. */
static int decode_fixed(const struct dctx *d, size_t offset, size_t n,
                        uint8_t *dst) {
  const b2_chunk_info *in = &d->in;
  int32_t bs = in->blocksize;
  int32_t bfirst = (int32_t)(offset / (size_t)bs);
  int32_t blast = (int32_t)((offset + n - 1) / (size_t)bs);
  const uint8_t *ref0 = NULL;
  int32_t ref0_size = 0;
  int rc;
  if (d->has_delta) {
    rc = delta_reference(d, in->cbytes, offset, n, dst, &ref0, &ref0_size);
    if (rc < 0) return rc;
    if (bfirst == 0) bfirst = 1;
  }
  for (int32_t b = bfirst; b <= blast; b++) {
    int64_t boff, start;
    int32_t bsize;
    int leftoverblock;
    rc = fixed_block(d, b, &boff, &bsize, &leftoverblock, &start);
    if (rc < 0) return rc;
    rc = block_window(d, b, boff, bsize, leftoverblock, start, block_end(d, start),
                      offset, n, dst, ref0, ref0_size);
    if (rc < 0) return rc;
  }
  return 0;
}

/* Variable-length blocks: walk the block starts to find the offsets. */
static int decode_vl(const struct dctx *d, size_t offset, size_t n,
                     uint8_t *dst) {
  const b2_chunk_info *in = &d->in;
  const uint8_t *bst = d->c + in->header_len;
  const uint8_t *ref0 = NULL;
  int32_t ref0_size = 0;
  int64_t boff = 0;
  int rc;
  /* Spans and sizes were validated by b2_chunk_parse. */
  for (int32_t b = 0; b < in->nblocks && (size_t)boff < offset + n; b++) {
    int64_t start = (int32_t)b2_le32(bst + 4 * (size_t)b);
    int64_t end = b + 1 < in->nblocks
                      ? (int32_t)b2_le32(bst + 4 * (size_t)(b + 1))
                      : in->cbytes;
    int32_t bsize = (int32_t)b2_le32(d->c + start);
    if (b == 0 && d->has_delta)
      rc = delta_reference(d, end, offset, n, dst, &ref0, &ref0_size);
    else
      rc = block_window(d, b, boff, bsize, 0, start, end, offset, n, dst,
                        ref0, ref0_size);
    if (rc < 0) return rc;
    boff += bsize;
  }
  return 0;
}

static int decode_range_ctx(const struct dctx *d, size_t offset, size_t n,
                            uint8_t *dst) {
  const b2_chunk_info *in = &d->in;
  if (n == 0) return 0;
  if (in->special) return decode_special(d, offset, n, dst);
  if (in->memcpyed) {
    memcpy(dst, d->c + in->header_len + offset, n);
    return 0;
  }
  return in->vlblocks ? decode_vl(d, offset, n, dst)
                      : decode_fixed(d, offset, n, dst);
}

/* The whole chunk into dst, on this thread.  Returns nbytes. */
static int decode_whole(const struct dctx *d, void *dst, size_t dstcap) {
  if (dstcap < (size_t)d->in.nbytes)
    return b2_fail(B2_E_INVAL, "chunk decode: %zu-byte buffer for %d bytes",
                   dstcap, d->in.nbytes);
  if (d->in.nbytes > 0 && !dst)
    return b2_fail(B2_E_INVAL, "chunk decode: no output buffer");
  int rc = decode_range_ctx(d, 0, (size_t)d->in.nbytes, dst);
  return rc < 0 ? rc : d->in.nbytes;
}

int b2_chunk_decode(const void *chunk, size_t len, void *dst, size_t dstcap) {
  struct dctx d;
  int rc = dctx_init(&d, chunk, len, NULL);
  return rc < 0 ? rc : decode_whole(&d, dst, dstcap);
}

/* b2_chunk_decode_range, its blocks' bytes bounded as b2_chunk_decode_range_spans
 * needs when `bounded`. */
static int decode_range(const void *chunk, size_t len, size_t offset, size_t n, void *dst,
                        int bounded, const b2_chunk_geom *geom) {
  struct dctx d;
  int rc = dctx_init(&d, chunk, len, geom);
  if (rc < 0) return rc;
  if (offset > (size_t)d.in.nbytes || n > (size_t)d.in.nbytes - offset)
    return b2_fail(B2_E_RANGE, "chunk range [%zu, +%zu) beyond nbytes %d",
                   offset, n, d.in.nbytes);
  if (n > 0 && !dst)
    return b2_fail(B2_E_INVAL, "chunk decode: no output buffer");
  d.bounded = bounded;
  rc = decode_range_ctx(&d, offset, n, dst);
  return rc < 0 ? rc : (int)n;
}

int b2_chunk_decode_range(const void *chunk, size_t len, size_t offset,
                          size_t n, void *dst, const b2_chunk_geom *geom) {
  return decode_range(chunk, len, offset, n, dst, 0, geom);
}

/* ---- ranges read block by block -------------------------------------------
 * A reader of a few bytes of a chunk stored in a file need not read all
 * of it: the header and block starts say where the blocks it decodes lie.
 * A block's stored bytes are taken to end at the next block start past
 * its own (or the chunk's end), which holds for every chunk the reference
 * library writes, whatever the order of its blocks; the decoder is then
 * held to those bytes, so it never reads what was not fetched.  A chunk
 * laid out otherwise fails to decode that way, and its reader falls back
 * to reading it whole. */

int b2_chunk_range_plan(const void *chunk, size_t have, size_t offset, size_t n,
                        size_t *head, b2_chunk_span *spans, int *nspans) {
  if (!head || !spans || !nspans) return b2_fail(B2_E_INVAL, "range plan: no output");
  *head = 0;
  *nspans = -1; /* read it whole */
  struct dctx d;
  int rc = b2_chunk_parse_head(chunk, have, &d.in);
  if (rc == B2_E_TRUNCATED && have >= B2_CHUNK_HEADER_EXT) return 0; /* special, vlblocks,
                                                                        dictionary */
  if (rc < 0) return rc;
  const b2_chunk_info *in = &d.in;
  if (in->special || in->memcpyed || in->vlblocks || in->dict || in->nblocks == 0 || n == 0 ||
      offset > (size_t)in->nbytes || n > (size_t)in->nbytes - offset)
    return 0;
  size_t need = (size_t)in->header_len + 4 * (size_t)in->nblocks;
  if (have < need) {
    *head = need;
    *nspans = 0;
    return 0;
  }
  dctx_setup(&d, chunk);
  d.bounded = 1;
  int32_t bfirst = (int32_t)(offset / (size_t)in->blocksize);
  int32_t blast = (int32_t)((offset + n - 1) / (size_t)in->blocksize);
  int k = 0;
  if (d.has_delta && bfirst > 0) {
    if (blast - bfirst + 2 > B2_CHUNK_SPANS) return 0;
    int64_t s0 = (int32_t)b2_le32(d.c + in->header_len);
    if (s0 < d.data_start || s0 >= in->cbytes) return 0; /* the decoder says why */
    spans[k].lo = s0;
    spans[k++].hi = block_end(&d, s0);
  }
  if (blast - bfirst + 1 + k > B2_CHUNK_SPANS) return 0;
  for (int32_t b = bfirst; b <= blast; b++) {
    int64_t s = (int32_t)b2_le32(d.c + in->header_len + 4 * (size_t)b);
    if (s < d.data_start || s >= in->cbytes) return 0;
    spans[k].lo = s;
    spans[k++].hi = block_end(&d, s);
  }
  *nspans = k;
  return 0;
}

int b2_chunk_decode_range_spans(const void *chunk, size_t len, size_t offset, size_t n,
                                void *dst, const b2_chunk_geom *geom) {
  return decode_range(chunk, len, offset, n, dst, 1, geom);
}

/* ---- whole chunk, blocks shared among threads ---------------------------
 * The blocks of a chunk of fixed-size blocks are independent once block 0
 * (the delta reference, if any) is decoded: the calling thread and the
 * idle workers of a pool each take the next block not yet taken until none
 * is left.  The first failure stops the others; its code and detail
 * (recorded on the thread that failed) are handed back to the caller. */

/* Below this many decoded bytes the hand-over costs more than it saves. */
int32_t b2_chunk_par_min = (int32_t)128 << 10;

atomic_long b2_chunk_par_helped;

/* How long a pre-woken worker waits for the blocks: the read of a
 * compressed chunk from the page cache, its checksum, and the wake-up. */
long b2_chunk_par_prepare_us = 400;
/* How long the caller polls for the helpers' last blocks before sleeping. */
#define PAR_WAIT_US 300

/* Whether this thread's last b2_chunk_par_prepare woke a worker that its
 * next b2_chunk_decode_par has not used or sent back yet. */
static _Thread_local int tl_prewoke;

int b2_chunk_par_prepare(struct b2_pool *pool, int32_t nbytes) {
  tl_prewoke = pool && nbytes >= b2_chunk_par_min && b2_pool_prewake(pool, b2_chunk_par_prepare_us);
  return tl_prewoke;
}

struct par {
  const struct dctx *d;
  uint8_t *dst;
  struct refwait *rw;   /* block 0, when delta needs it; NULL if not */
  int32_t end;          /* blocks [.., end) */
  atomic_int next;      /* next block to take */
  atomic_int rc;        /* first failure, 0 if none */
  char detail[256];     /* its detail (written by the thread that set rc) */
};

/* Take blocks until none is left; returns how many this thread decoded. */
static long par_take(struct par *p) {
  const struct dctx *d = p->d;
  long done = 0;
  while (atomic_load_explicit(&p->rc, memory_order_relaxed) == 0) {
    int32_t b = atomic_fetch_add(&p->next, 1);
    if (b >= p->end) break;
    int64_t boff, start;
    int32_t bsize;
    int leftoverblock;
    int rc = fixed_block(d, b, &boff, &bsize, &leftoverblock, &start);
    if (rc == 0)
      rc = decode_block(d, b, boff, bsize, leftoverblock, start, d->in.cbytes,
                        p->dst + boff, 0, (size_t)bsize, NULL, 0, p->rw);
    if (rc < 0) {
      int zero = 0;
      if (atomic_compare_exchange_strong(&p->rc, &zero, rc))
        snprintf(p->detail, sizeof p->detail, "%s", b2_last_detail());
      break;
    }
    done++;
  }
  return done;
}

static void par_job(void *arg) {
  long n = par_take(arg);
  if (n) atomic_fetch_add(&b2_chunk_par_helped, n);
}

int b2_chunk_decode_par(const void *chunk, size_t len, void *dst,
                        size_t dstcap, struct b2_pool *pool, const b2_chunk_geom *geom) {
  struct dctx d;
  int rc = dctx_init(&d, chunk, len, geom);
  int helpers = 0;
  if (rc == 0 && pool && !d.in.special && !d.in.memcpyed && !d.in.vlblocks &&
      d.in.nblocks >= 2 && d.in.nbytes >= b2_chunk_par_min && dst &&
      dstcap >= (size_t)d.in.nbytes)
    helpers = b2_pool_idle(pool);
  else if (pool && tl_prewoke)
    b2_pool_prewake_cancel(pool); /* woken by our b2_chunk_par_prepare for nothing,
                                     or for a chunk that does not parse */
  tl_prewoke = 0;
  if (rc < 0) return rc;
  if (helpers <= 0) return decode_whole(&d, dst, dstcap);
  struct par p = {.d = &d, .dst = dst, .end = d.in.nblocks};
  atomic_init(&p.next, 0);
  atomic_init(&p.rc, 0);
  struct refwait rw;
  /* Delta: this thread decodes block 0, every other block's reference,
   * while the helpers start on the others (streams and earlier filters
   * need no reference); so the helpers may take all of them. */
  int32_t left = p.end;
  if (d.has_delta) {
    pthread_mutex_init(&rw.mu, NULL);
    pthread_cond_init(&rw.cv, NULL);
    atomic_init(&rw.ready, 0);
    rw.ref0 = NULL;
    rw.ref0_size = 0;
    p.rw = &rw;
    atomic_store(&p.next, 1);
    left = p.end - 1;
  } else {
    left = p.end - 1; /* this thread takes one block too */
  }
  if (helpers > left) helpers = left;
  b2_pool_group g = B2_POOL_GROUP_INIT;
  for (int k = 0; k < helpers; k++)
    if (b2_pool_try_submit(pool, par_job, &p, &g) < 0) break;
  if (d.has_delta) {
    const uint8_t *r0 = NULL;
    int32_t r0size = 0;
    rc = delta_reference(&d, d.in.cbytes, 0, (size_t)d.in.nbytes, dst, &r0, &r0size);
    if (rc < 0) {
      int zero = 0; /* first, so that helpers failing on it do not win */
      if (atomic_compare_exchange_strong(&p.rc, &zero, rc))
        snprintf(p.detail, sizeof p.detail, "%s", b2_last_detail());
    }
    ref_set(&rw, r0, r0size, rc >= 0);
  }
  par_take(&p);
  /* Runs our jobs still queued itself; the helpers end within about a
   * block of this thread, so poll rather than sleep. */
  b2_pool_wait_poll(pool, &g, PAR_WAIT_US);
  if (d.has_delta) {
    pthread_cond_destroy(&rw.cv);
    pthread_mutex_destroy(&rw.mu);
  }
  rc = atomic_load(&p.rc);
  if (rc < 0) return b2_fail(rc, "%s", p.detail);
  return d.in.nbytes;
}
