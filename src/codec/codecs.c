/*
 * codecs.c - codec and filter names, and the stream (de)compression
 * dispatch: lz4/lz4hc (liblz4), zlib, zstd (libzstd) and blosclz (ours).
 *
 * Each thread keeps its own codec contexts (zstd contexts, an inflate
 * stream, lz4 states, a cached zstd dictionary) so the hot decode path does
 * no allocation.  They are freed by b2_codec_thread_cleanup() or, failing
 * that, when the thread exits (pthread key destructor).
 */
#include "b2_codec.h"
#include "b2_error.h"
#include "codec/codec_internal.h"

#include <limits.h>
#include <lz4.h>
#include <lz4hc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

/* ---- names ------------------------------------------------------------ */

static const char *const codec_names[] = {"blosclz", "lz4",  "lz4hc",
                                          "snappy",  "zlib", "zstd"};
static const char *const format_names[] = {"blosclz", "lz4", "snappy", "zlib",
                                           "zstd"};

/* The codecs for arrays, from id 32 on. */
static const char *const array_codec_names[] = {"ndlz", "zfp_acc", "zfp_prec", "zfp_rate"};
#define NARRAY_CODECS (sizeof array_codec_names / sizeof array_codec_names[0])

const char *b2_codec_name(int codec) {
  if (codec >= B2_CODEC_NDLZ && codec < B2_CODEC_NDLZ + (int)NARRAY_CODECS)
    return array_codec_names[codec - B2_CODEC_NDLZ];
  if (codec < 0 || codec > B2_CODEC_ZSTD) return NULL;
  return codec_names[codec];
}

int b2_codec_from_name(const char *name) {
  if (!name) return B2_E_INVAL;
  for (int i = 0; i <= B2_CODEC_ZSTD; i++)
    if (strcasecmp(name, codec_names[i]) == 0) return i;
  for (size_t i = 0; i < NARRAY_CODECS; i++)
    if (strcasecmp(name, array_codec_names[i]) == 0) return B2_CODEC_NDLZ + (int)i;
  return B2_E_INVAL;
}

int b2_codec_format(int codec) {
  switch (codec) {
  case B2_CODEC_BLOSCLZ: return B2_FORMAT_BLOSCLZ;
  case B2_CODEC_LZ4:
  case B2_CODEC_LZ4HC: return B2_FORMAT_LZ4;
  case B2_CODEC_ZLIB: return B2_FORMAT_ZLIB;
  case B2_CODEC_ZSTD: return B2_FORMAT_ZSTD;
  case B2_CODEC_NDLZ:
  case B2_CODEC_ZFP_ACC:
  case B2_CODEC_ZFP_PREC:
  case B2_CODEC_ZFP_RATE: return B2_FORMAT_USER; /* id in the extended header */
  default: return B2_E_UNSUPPORTED;
  }
}

const char *b2_format_name(int format) {
  if (format < 0 || format > B2_FORMAT_ZSTD) return NULL;
  return format_names[format];
}

static const struct {
  int id;
  const char *name;
} filter_names[] = {
    {B2_FILTER_NONE, "none"},
    {B2_FILTER_SHUFFLE, "shuffle"},
    {B2_FILTER_BITSHUFFLE, "bitshuffle"},
    {B2_FILTER_DELTA, "delta"},
    {B2_FILTER_TRUNC_PREC, "trunc_prec"},
    {B2_FILTER_BYTEDELTA, "bytedelta"},
    {B2_FILTER_NDCELL, "ndcell"},
    {B2_FILTER_NDMEAN, "ndmean"},
    {B2_FILTER_INT_TRUNC, "int_trunc"},
};
#define NFILTER_NAMES (sizeof filter_names / sizeof filter_names[0])

const char *b2_filter_name(int filter) {
  for (size_t i = 0; i < NFILTER_NAMES; i++)
    if (filter_names[i].id == filter) return filter_names[i].name;
  return NULL;
}

int b2_filter_from_name(const char *name) {
  if (!name) return B2_E_INVAL;
  for (size_t i = 0; i < NFILTER_NAMES; i++)
    if (strcasecmp(name, filter_names[i].name) == 0) return filter_names[i].id;
  /* Spellings used by the reference tools. */
  if (strcasecmp(name, "nofilter") == 0 || strcasecmp(name, "noshuffle") == 0)
    return B2_FILTER_NONE;
  if (strcasecmp(name, "truncprec") == 0 || strcasecmp(name, "trunc-prec") == 0)
    return B2_FILTER_TRUNC_PREC;
  return B2_E_INVAL;
}

int b2_codec_meta(int codec, int meta, int *value) {
  if (codec == B2_CODEC_ZFP_ACC) *value = (int8_t)meta; /* 10^meta */
  else if (codec == B2_CODEC_NDLZ || codec == B2_CODEC_ZFP_PREC || codec == B2_CODEC_ZFP_RATE)
    *value = (uint8_t)meta;
  else return 0;
  return 1;
}

int b2_filter_meta(int filter, int meta, int *value) {
  if (filter == B2_FILTER_TRUNC_PREC || filter == B2_FILTER_INT_TRUNC ||
      filter == B2_FILTER_NDMEAN)
    *value = (int8_t)meta;
  else if (filter == B2_FILTER_NDCELL) *value = (uint8_t)meta;
  else return 0;
  return 1;
}

void b2_filters_text(const uint8_t *filters, const uint8_t *meta, char *buf, size_t cap) {
  size_t used = 0;
  if (cap == 0) return;
  buf[0] = 0;
  for (int i = 0; i < B2_MAX_FILTERS; i++) {
    int id = filters[i], v, n;
    if (id == B2_FILTER_NONE) continue;
    const char *nm = b2_filter_name(id);
    n = nm ? snprintf(buf + used, cap - used, "%s%s", used ? "," : "", nm)
           : snprintf(buf + used, cap - used, "%sfilter%d", used ? "," : "", id);
    if (n < 0 || (size_t)n >= cap - used) return;
    used += (size_t)n;
    if (b2_filter_meta(id, meta[i], &v)) {
      n = snprintf(buf + used, cap - used, ":%d", v);
      if (n < 0 || (size_t)n >= cap - used) return;
      used += (size_t)n;
    }
  }
  if (!buf[0]) snprintf(buf, cap, "none");
}

/* ---- per-thread contexts --------------------------------------------- */

struct codec_tls {
  ZSTD_DCtx *zdctx;
  ZSTD_CCtx *zcctx;
  /* Cached zstd decoding dictionary: a private copy of the bytes and the
   * DDict built on it, reused while callers pass the same dictionary. */
  uint8_t *zdict;
  size_t zdict_len;
  ZSTD_DDict *zddict;
  z_stream inflater;
  int inflater_ready;
  void *lz4_state;   /* LZ4_stream_t, also used for dictionary streams */
  void *lz4hc_state; /* LZ4_streamHC_t */
  uint8_t *scratch;  /* b2_codec_scratch() */
  size_t scratch_len;
};

static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static _Thread_local struct codec_tls *tls;

static void tls_free(struct codec_tls *t) {
  if (!t) return;
  ZSTD_freeDCtx(t->zdctx);
  ZSTD_freeCCtx(t->zcctx);
  ZSTD_freeDDict(t->zddict);
  free(t->zdict);
  if (t->inflater_ready) inflateEnd(&t->inflater);
  free(t->lz4_state);
  free(t->lz4hc_state);
  free(t->scratch);
  free(t);
}

/* At thread exit; later destructors of other layers may still call in,
 * which then builds a fresh state (POSIX repeats destructor rounds). */
static void tls_destructor(void *p) {
  tls_free(p);
  if (tls == p) tls = NULL;
}

static void tls_key_init(void) {
  if (pthread_key_create(&tls_key, tls_destructor) != 0) abort();
}

static struct codec_tls *get_tls(void) {
  if (tls) return tls;
  pthread_once(&tls_once, tls_key_init);
  struct codec_tls *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  if (pthread_setspecific(tls_key, t) != 0) {
    free(t);
    return NULL;
  }
  tls = t;
  return t;
}

void b2_codec_thread_cleanup(void) {
  if (!tls) return;
  pthread_setspecific(tls_key, NULL);
  tls_free(tls);
  tls = NULL;
}

uint8_t *b2_codec_scratch(size_t n) {
  struct codec_tls *t = get_tls();
  if (!t) return NULL;
  if (t->scratch_len < n) {
    free(t->scratch);
    t->scratch_len = 0;
    if (!(t->scratch = malloc(n))) return NULL;
    t->scratch_len = n;
  }
  return t->scratch;
}

/* ---- decompression ---------------------------------------------------- */

static int wrong_size(const char *codec, size_t got, size_t want) {
  return b2_fail(B2_E_CODEC, "%s stream decodes to %zu bytes, expected %zu",
                 codec, got, want);
}

static int lz4_decode(const void *src, size_t srclen, void *dst, size_t dstlen,
                      const void *dict, size_t dictlen) {
  int n;
  if (dict && dictlen > 0) {
    if (dictlen > INT_MAX) return b2_fail(B2_E_LIMIT, "lz4 dictionary too large");
    n = LZ4_decompress_safe_usingDict(src, dst, (int)srclen, (int)dstlen,
                                      dict, (int)dictlen);
  } else {
    n = LZ4_decompress_safe(src, dst, (int)srclen, (int)dstlen);
  }
  if (n < 0) return b2_fail(B2_E_CODEC, "lz4 stream is damaged (error %d)", n);
  if ((size_t)n != dstlen) return wrong_size("lz4", (size_t)n, dstlen);
  return (int)dstlen;
}

static int zlib_decode(struct codec_tls *t, const void *src, size_t srclen,
                       void *dst, size_t dstlen) {
  z_stream *z = &t->inflater;
  if (!t->inflater_ready) {
    memset(z, 0, sizeof *z);
    if (inflateInit(z) != Z_OK)
      return b2_fail(B2_E_NOMEM, "zlib: cannot create an inflate stream");
    t->inflater_ready = 1;
  } else if (inflateReset(z) != Z_OK) {
    return b2_fail(B2_E_CODEC, "zlib: inflateReset failed");
  }
  z->next_in = (Bytef *)(uintptr_t)src;
  z->avail_in = (uInt)srclen;
  z->next_out = dst;
  z->avail_out = (uInt)dstlen;
  int rc = inflate(z, Z_FINISH);
  if (rc == Z_STREAM_END) {
    if (z->total_out != dstlen) return wrong_size("zlib", z->total_out, dstlen);
    return (int)dstlen;
  }
  if ((rc == Z_BUF_ERROR || rc == Z_OK) && z->avail_in == 0)
    return b2_fail(B2_E_CODEC, "zlib stream is truncated");
  if (rc == Z_BUF_ERROR || rc == Z_OK)
    return b2_fail(B2_E_CODEC, "zlib stream decodes to more than %zu bytes",
                   dstlen);
  return b2_fail(B2_E_CODEC, "zlib stream is damaged: %s",
                 z->msg ? z->msg : "inflate error");
}

/* The DDict for `dict`, built once per thread and per dictionary content. */
static ZSTD_DDict *zstd_ddict(struct codec_tls *t, const void *dict,
                              size_t dictlen) {
  if (t->zddict && t->zdict_len == dictlen &&
      memcmp(t->zdict, dict, dictlen) == 0)
    return t->zddict;
  ZSTD_freeDDict(t->zddict);
  free(t->zdict);
  t->zddict = NULL;
  t->zdict_len = 0;
  t->zdict = malloc(dictlen);
  if (!t->zdict) return NULL;
  memcpy(t->zdict, dict, dictlen);
  t->zddict = ZSTD_createDDict(t->zdict, dictlen);
  if (!t->zddict) {
    free(t->zdict);
    t->zdict = NULL;
    return NULL;
  }
  t->zdict_len = dictlen;
  return t->zddict;
}

static int zstd_decode(struct codec_tls *t, const void *src, size_t srclen,
                       void *dst, size_t dstlen, const void *dict,
                       size_t dictlen) {
  if (!t->zdctx && !(t->zdctx = ZSTD_createDCtx()))
    return b2_fail(B2_E_NOMEM, "zstd: cannot create a decompression context");
  size_t n;
  if (dict && dictlen > 0) {
    ZSTD_DDict *dd = zstd_ddict(t, dict, dictlen);
    if (!dd) return b2_fail(B2_E_CODEC, "zstd: cannot load the dictionary");
    n = ZSTD_decompress_usingDDict(t->zdctx, dst, dstlen, src, srclen, dd);
  } else {
    n = ZSTD_decompressDCtx(t->zdctx, dst, dstlen, src, srclen);
  }
  if (ZSTD_isError(n))
    return b2_fail(B2_E_CODEC, "zstd stream is damaged: %s",
                   ZSTD_getErrorName(n));
  if (n != dstlen) return wrong_size("zstd", n, dstlen);
  return (int)dstlen;
}

int b2_stream_decompress(int format, const void *src, size_t srclen,
                         void *dst, size_t dstlen, const void *dict,
                         size_t dictlen) {
  uint8_t dummy;
  if (srclen > INT_MAX || dstlen > INT_MAX)
    return b2_fail(B2_E_LIMIT, "codec stream of %zu -> %zu bytes is too large",
                   srclen, dstlen);
  if ((!src && srclen) || (!dst && dstlen))
    return b2_fail(B2_E_INVAL, "b2_stream_decompress: NULL buffer");
  if (!dst) dst = &dummy;
  if (!src) src = &dummy;
  struct codec_tls *t;
  switch (format) {
  case B2_FORMAT_BLOSCLZ:
    return b2_blosclz_decompress(src, srclen, dst, dstlen, dstlen);
  case B2_FORMAT_LZ4:
    return lz4_decode(src, srclen, dst, dstlen, dict, dictlen);
  case B2_FORMAT_ZLIB:
    if (!(t = get_tls())) return b2_fail(B2_E_NOMEM, "codec thread state");
    return zlib_decode(t, src, srclen, dst, dstlen);
  case B2_FORMAT_ZSTD:
    if (!(t = get_tls())) return b2_fail(B2_E_NOMEM, "codec thread state");
    return zstd_decode(t, src, srclen, dst, dstlen, dict, dictlen);
  case B2_FORMAT_SNAPPY:
    return b2_fail(B2_E_UNSUPPORTED, "the snappy codec is not supported");
  default:
    return b2_fail(B2_E_UNSUPPORTED, "unknown codec format %d", format);
  }
}

int b2_stream_decompress_prefix(int format, const void *src, size_t srclen,
                                void *dst, size_t dstlen, size_t want,
                                const void *dict, size_t dictlen) {
  if (want > dstlen)
    return b2_fail(B2_E_INVAL, "stream prefix of %zu bytes out of %zu", want, dstlen);
  if ((format != B2_FORMAT_LZ4 && format != B2_FORMAT_BLOSCLZ) || (dict && dictlen > 0) ||
      want == dstlen || !src || !dst || srclen == 0 || srclen > INT_MAX || dstlen > INT_MAX)
    return b2_stream_decompress(format, src, srclen, dst, dstlen, dict, dictlen);
  if (format == B2_FORMAT_BLOSCLZ) return b2_blosclz_decompress(src, srclen, dst, dstlen, want);
  int n = LZ4_decompress_safe_partial(src, dst, (int)srclen, (int)want, (int)dstlen);
  if (n < 0) return b2_fail(B2_E_CODEC, "lz4 stream is damaged (error %d)", n);
  if ((size_t)n < want)
    return b2_fail(B2_E_CODEC, "lz4 stream ends after %d bytes, %zu wanted", n, want);
  return n;
}

/* ---- compression ------------------------------------------------------ */

static int lz4_encode(struct codec_tls *t, int clevel, const void *src,
                      int srclen, void *dst, int dstcap, const void *dict,
                      int dictlen) {
  if (!t->lz4_state && !(t->lz4_state = malloc((size_t)LZ4_sizeofState())))
    return b2_fail(B2_E_NOMEM, "lz4 state");
  int accel = 10 - clevel; /* the reference's mapping */
  if (dict && dictlen > 0) {
    LZ4_stream_t *s = LZ4_initStream(t->lz4_state, (size_t)LZ4_sizeofState());
    LZ4_loadDict(s, dict, dictlen);
    return LZ4_compress_fast_continue(s, src, dst, srclen, dstcap, accel);
  }
  return LZ4_compress_fast_extState(t->lz4_state, src, dst, srclen, dstcap,
                                    accel);
}

static int lz4hc_encode(struct codec_tls *t, int clevel, const void *src,
                        int srclen, void *dst, int dstcap, const void *dict,
                        int dictlen) {
  if (!t->lz4hc_state &&
      !(t->lz4hc_state = malloc((size_t)LZ4_sizeofStateHC())))
    return b2_fail(B2_E_NOMEM, "lz4hc state");
  if (dict && dictlen > 0) {
    LZ4_streamHC_t *s =
        LZ4_initStreamHC(t->lz4hc_state, (size_t)LZ4_sizeofStateHC());
    LZ4_resetStreamHC_fast(s, clevel);
    LZ4_loadDictHC(s, dict, dictlen);
    return LZ4_compress_HC_continue(s, src, dst, srclen, dstcap);
  }
  return LZ4_compress_HC_extStateHC(t->lz4hc_state, src, dst, srclen, dstcap,
                                    clevel);
}

static int zlib_encode(int clevel, const void *src, size_t srclen, void *dst,
                       size_t dstcap) {
  uLongf cl = (uLongf)dstcap;
  int rc = compress2(dst, &cl, src, (uLong)srclen, clevel);
  if (rc == Z_BUF_ERROR) return 0;
  if (rc == Z_MEM_ERROR) return b2_fail(B2_E_NOMEM, "zlib compress2");
  if (rc != Z_OK) return b2_fail(B2_E_CODEC, "zlib compress2 failed (%d)", rc);
  return (int)cl;
}

static int zstd_encode(struct codec_tls *t, int clevel, const void *src,
                       size_t srclen, void *dst, size_t dstcap,
                       const void *dict, size_t dictlen) {
  /* The reference maps 1..8 to odd zstd levels and 9 to the maximum. */
  int level = clevel < 9 ? clevel * 2 - 1 : ZSTD_maxCLevel();
  if (!t->zcctx && !(t->zcctx = ZSTD_createCCtx()))
    return b2_fail(B2_E_NOMEM, "zstd: cannot create a compression context");
  size_t n;
  if (dict && dictlen > 0)
    n = ZSTD_compress_usingDict(t->zcctx, dst, dstcap, src, srclen, dict,
                                dictlen, level);
  else
    n = ZSTD_compressCCtx(t->zcctx, dst, dstcap, src, srclen, level);
  if (ZSTD_isError(n)) {
    if (ZSTD_getErrorCode(n) == ZSTD_error_dstSize_tooSmall) return 0;
    return b2_fail(B2_E_CODEC, "zstd compression failed: %s",
                   ZSTD_getErrorName(n));
  }
  return (int)n;
}

int b2_stream_compress(int codec, int clevel, const void *src, size_t srclen,
                       void *dst, size_t dstcap, const void *dict,
                       size_t dictlen) {
  if (clevel < 0 || clevel > 9)
    return b2_fail(B2_E_INVAL, "compression level %d is not in 0..9", clevel);
  if (srclen > INT_MAX || dictlen > INT_MAX)
    return b2_fail(B2_E_LIMIT, "%zu bytes are too many to compress", srclen);
  if ((!src && srclen) || (!dst && dstcap))
    return b2_fail(B2_E_INVAL, "b2_stream_compress: NULL buffer");
  if (dstcap > INT_MAX) dstcap = INT_MAX;
  if (b2_codec_format(codec) < 0)
    return b2_fail(B2_E_UNSUPPORTED, "codec %d is not supported", codec);
  /* Level 0 means "store": the caller keeps the data raw. */
  if (clevel == 0 || srclen == 0 || dstcap == 0) return 0;
  if (codec == B2_CODEC_BLOSCLZ)
    return b2_blosclz_compress(clevel, src, srclen, dst, dstcap);
  if (codec == B2_CODEC_ZLIB) return zlib_encode(clevel, src, srclen, dst, dstcap);
  struct codec_tls *t = get_tls();
  if (!t) return b2_fail(B2_E_NOMEM, "codec thread state");
  switch (codec) {
  case B2_CODEC_LZ4:
    return lz4_encode(t, clevel, src, (int)srclen, dst, (int)dstcap, dict,
                      (int)dictlen);
  case B2_CODEC_LZ4HC:
    return lz4hc_encode(t, clevel, src, (int)srclen, dst, (int)dstcap, dict,
                        (int)dictlen);
  default:
    return zstd_encode(t, clevel, src, srclen, dst, dstcap, dict, dictlen);
  }
}
