/*
 * test_codec.c - unit tests of layer 1 (codecs and filters): names, codec
 * round trips, dictionaries, damaged-stream rejection, blosclz known
 * vectors, shuffle/bitshuffle/delta/bytedelta/trunc_prec known answers and
 * SIMD-versus-generic equality.
 */
#include "b2_codec.h"
#include "b2_error.h"
#include "codec/codec_internal.h"
#include "t.h"

#include <pthread.h>
#include <stdint.h>

static const int all_codecs[] = {B2_CODEC_BLOSCLZ, B2_CODEC_LZ4, B2_CODEC_LZ4HC,
                                 B2_CODEC_ZLIB, B2_CODEC_ZSTD};
#define NCODECS (sizeof all_codecs / sizeof all_codecs[0])

static uint32_t rng_state = 1;
static uint32_t rnd(void) {
  rng_state = rng_state * 1103515245u + 12345u;
  return rng_state >> 8;
}

/* kind 0: text-like with repeats, 1: random, 2: mostly zeros, 3: ramp of
 * 32-bit integers (compressible after shuffle only). */
static void fill(uint8_t *p, size_t n, int kind) {
  static const char *words[] = {"blosc ", "frame ", "chunk ", "zstd ",
                                "the ",   "of ",    "data ",  "\n"};
  size_t i = 0;
  switch (kind) {
  case 0:
    while (i < n) {
      const char *w = words[rnd() % 8];
      for (; *w && i < n; w++) p[i++] = (uint8_t)*w;
    }
    break;
  case 1:
    for (; i < n; i++) p[i] = (uint8_t)rnd();
    break;
  case 2:
    memset(p, 0, n);
    for (i = 0; i < n / 97; i++) p[rnd() % n] = (uint8_t)rnd();
    break;
  default:
    for (; i < n; i++) p[i] = (uint8_t)((i / 4 * 3) >> (8 * (i % 4)));
    break;
  }
}

static void test_names(void) {
  CHECK(strcmp(b2_codec_name(B2_CODEC_ZSTD), "zstd") == 0);
  CHECK(strcmp(b2_codec_name(B2_CODEC_LZ4HC), "lz4hc") == 0);
  CHECK(b2_codec_name(6) == NULL);
  CHECK(b2_codec_name(-1) == NULL);
  CHECK_EQ(b2_codec_from_name("blosclz"), B2_CODEC_BLOSCLZ);
  CHECK_EQ(b2_codec_from_name("ZLIB"), B2_CODEC_ZLIB);
  CHECK_EQ(b2_codec_from_name("brotli"), B2_E_INVAL);
  CHECK_EQ(b2_codec_from_name(NULL), B2_E_INVAL);
  CHECK_EQ(b2_codec_format(B2_CODEC_LZ4HC), B2_FORMAT_LZ4);
  CHECK_EQ(b2_codec_format(B2_CODEC_LZ4), B2_FORMAT_LZ4);
  CHECK_EQ(b2_codec_format(B2_CODEC_ZLIB), B2_FORMAT_ZLIB);
  CHECK_EQ(b2_codec_format(B2_CODEC_ZSTD), B2_FORMAT_ZSTD);
  CHECK_EQ(b2_codec_format(B2_CODEC_SNAPPY), B2_E_UNSUPPORTED);
  CHECK(strcmp(b2_format_name(B2_FORMAT_ZLIB), "zlib") == 0);
  CHECK(b2_format_name(5) == NULL);
  CHECK(strcmp(b2_filter_name(B2_FILTER_BYTEDELTA), "bytedelta") == 0);
  CHECK(strcmp(b2_filter_name(B2_FILTER_SHUFFLE), "shuffle") == 0);
  CHECK(b2_filter_name(7) == NULL);
  CHECK_EQ(b2_filter_from_name("bitshuffle"), B2_FILTER_BITSHUFFLE);
  CHECK_EQ(b2_filter_from_name("trunc_prec"), B2_FILTER_TRUNC_PREC);
  CHECK_EQ(b2_filter_from_name("nofilter"), B2_FILTER_NONE);
  CHECK_EQ(b2_filter_from_name("sharpen"), B2_E_INVAL);
  /* python-blosc2's codecs and filters for arrays, by the names new frames take */
  CHECK_EQ(b2_codec_from_name("ndlz"), B2_CODEC_NDLZ);
  CHECK_EQ(b2_codec_from_name("ZFP_RATE"), B2_CODEC_ZFP_RATE);
  CHECK_EQ(b2_codec_from_name("zfp_acc"), B2_CODEC_ZFP_ACC);
  CHECK(strcmp(b2_codec_name(B2_CODEC_ZFP_PREC), "zfp_prec") == 0);
  CHECK(b2_codec_name(36) == NULL);
  CHECK_EQ(b2_filter_from_name("ndcell"), B2_FILTER_NDCELL);
  CHECK_EQ(b2_filter_from_name("ndmean"), B2_FILTER_NDMEAN);
  CHECK_EQ(b2_filter_from_name("int_trunc"), B2_FILTER_INT_TRUNC);
  int v = 0;
  CHECK_EQ(b2_codec_meta(B2_CODEC_ZFP_ACC, 248, &v), 1);
  CHECK_EQ(v, -8);
  CHECK_EQ(b2_codec_meta(B2_CODEC_ZFP_RATE, 200, &v), 1);
  CHECK_EQ(v, 200);
  CHECK_EQ(b2_codec_meta(B2_CODEC_ZSTD, 3, &v), 0);
  CHECK_EQ(b2_filter_meta(B2_FILTER_TRUNC_PREC, 253, &v), 1);
  CHECK_EQ(v, -3);
  CHECK_EQ(b2_filter_meta(B2_FILTER_NDCELL, 200, &v), 1);
  CHECK_EQ(v, 200);
  CHECK_EQ(b2_filter_meta(B2_FILTER_SHUFFLE, 0, &v), 0);
  const char *lvl = b2_simd_level();
  CHECK(strcmp(lvl, "generic") == 0 || strcmp(lvl, "sse2") == 0 ||
        strcmp(lvl, "avx2") == 0);
}

static void test_roundtrip(void) {
  static const size_t sizes[] = {1, 7, 16, 100, 4097, 65536 + 13, 262144};
  static const int levels[] = {1, 3, 5, 9};
  size_t maxn = 262144, cap = maxn + maxn / 8 + 1024;
  uint8_t *in = malloc(maxn), *c = malloc(cap), *out = malloc(maxn + 1);
  for (size_t ci = 0; ci < NCODECS; ci++) {
    int codec = all_codecs[ci], fmt = b2_codec_format(codec);
    for (int kind = 0; kind < 3; kind++) {
      for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        size_t n = sizes[si];
        fill(in, n, kind);
        for (size_t li = 0; li < sizeof levels / sizeof levels[0]; li++) {
          int r = b2_stream_compress(codec, levels[li], in, n, c, cap, NULL, 0);
          CHECK(r >= 0);
          if (r < 0) continue;
          /* Compressible inputs of some size must actually compress. */
          if (kind != 1 && n >= 4097) CHECK(r > 0 && (size_t)r < n * 3 / 4);
          if (r == 0) continue;
          memset(out, 0xee, n);
          CHECK_EQ(b2_stream_decompress(fmt, c, (size_t)r, out, n, NULL, 0), (long long)n);
          CHECK_MEM(out, in, n);
          /* The exact size is required: one byte less or more fails. */
          if (n > 1) CHECK_EQ(b2_stream_decompress(fmt, c, (size_t)r, out, n - 1, NULL, 0), B2_E_CODEC);
          CHECK_EQ(b2_stream_decompress(fmt, c, (size_t)r, out, n + 1, NULL, 0), B2_E_CODEC);
        }
      }
    }
    /* Level 0 and empty input store raw (0); bad levels are refused. */
    fill(in, 1000, 0);
    CHECK_EQ(b2_stream_compress(codec, 0, in, 1000, c, cap, NULL, 0), 0);
    CHECK_EQ(b2_stream_compress(codec, 5, in, 0, c, cap, NULL, 0), 0);
    CHECK_EQ(b2_stream_compress(codec, 10, in, 1000, c, cap, NULL, 0), B2_E_INVAL);
    /* Too little room gives 0, never an overrun. */
    fill(in, 65536, 1);
    CHECK_EQ(b2_stream_compress(codec, 5, in, 65536, c, 65536 / 2, NULL, 0), 0);
  }
  CHECK_EQ(b2_stream_compress(B2_CODEC_SNAPPY, 5, in, 100, c, cap, NULL, 0), B2_E_UNSUPPORTED);
  CHECK_EQ(b2_stream_decompress(B2_FORMAT_SNAPPY, c, 10, out, 100, NULL, 0), B2_E_UNSUPPORTED);
  CHECK_EQ(b2_stream_decompress(9, c, 10, out, 100, NULL, 0), B2_E_UNSUPPORTED);
  free(in);
  free(c);
  free(out);
}

/* Prefix decoding: lz4 and blosclz stop at (or soon after) the bytes wanted, which
 * match the whole decode; zstd decodes everything; a cut stream or a
 * prefix beyond the stream fails. */
static void test_prefix(void) {
  size_t n = 16384, cap = 2 * n + 1024;
  uint8_t *in = malloc(n), *c = malloc(cap), *out = malloc(n);
  for (size_t i = 0; i < n; i++) in[i] = (uint8_t)("the quick brown fox "[i % 20] ^ (i / 997));
  static const int codecs[] = {B2_CODEC_LZ4, B2_CODEC_BLOSCLZ, B2_CODEC_ZSTD};
  for (int k = 0; k < 3; k++) {
    int fmt = b2_codec_format(codecs[k]);
    int r = b2_stream_compress(codecs[k], 1, in, n, c, cap, NULL, 0);
    CHECK(r > 0);
    if (r <= 0) continue;
    static const size_t wants[] = {1, 4096, 10000, 16383, 16384};
    for (size_t w = 0; w < sizeof wants / sizeof wants[0]; w++) {
      memset(out, 0, n);
      int got = b2_stream_decompress_prefix(fmt, c, (size_t)r, out, n, wants[w], NULL, 0);
      CHECK(got >= (int)wants[w] && got <= (int)n);
      if (codecs[k] == B2_CODEC_ZSTD) CHECK_EQ(got, (int)n);
      if (got > 0) CHECK_MEM(out, in, wants[w]);
    }
    CHECK_EQ(b2_stream_decompress_prefix(fmt, c, (size_t)r, out, n, n + 1, NULL, 0), B2_E_INVAL);
    CHECK(b2_stream_decompress_prefix(fmt, c, (size_t)r / 2, out, n, n - 1, NULL, 0) < 0);
  }
  free(in);
  free(c);
  free(out);
}

static void test_dictionary(void) {
  size_t n = 4096, dn = 8192, cap = 8192;
  uint8_t *dict = malloc(dn), *in = malloc(n), *c = malloc(cap), *out = malloc(n);
  fill(dict, dn, 1);
  /* The input repeats pieces of the (random) dictionary. */
  for (size_t i = 0; i < n; i += 64) memcpy(in + i, dict + (rnd() % (dn - 64)), 64);
  static const int codecs[] = {B2_CODEC_LZ4, B2_CODEC_LZ4HC, B2_CODEC_ZSTD};
  for (int k = 0; k < 3; k++) {
    int fmt = b2_codec_format(codecs[k]);
    int r = b2_stream_compress(codecs[k], 5, in, n, c, cap, dict, dn);
    CHECK(r > 0 && (size_t)r < n / 2);
    if (r <= 0) continue;
    CHECK_EQ(b2_stream_decompress(fmt, c, (size_t)r, out, n, dict, dn), (long long)n);
    CHECK_MEM(out, in, n);
    /* Decoding again reuses the cached dictionary state. */
    memset(out, 0, n);
    CHECK_EQ(b2_stream_decompress(fmt, c, (size_t)r, out, n, dict, dn), (long long)n);
    CHECK_MEM(out, in, n);
    /* Without the dictionary (or with another) it cannot be right. */
    int bad = b2_stream_decompress(fmt, c, (size_t)r, out, n, NULL, 0);
    CHECK(bad < 0 || memcmp(out, in, n) != 0);
    uint8_t *other = malloc(dn);
    fill(other, dn, 1);
    bad = b2_stream_decompress(fmt, c, (size_t)r, out, n, other, dn);
    CHECK(bad < 0 || memcmp(out, in, n) != 0);
    free(other);
  }
  free(dict);
  free(in);
  free(c);
  free(out);
}

/* A stream must fail cleanly or decode to exactly n bytes; ASan checks
 * that no byte outside the buffers is touched (exact-size heap copies). */
static void try_decode(int fmt, const uint8_t *s, size_t sn, size_t n) {
  uint8_t *src = malloc(sn ? sn : 1), *out = malloc(n ? n : 1);
  memcpy(src, s, sn);
  int r = b2_stream_decompress(fmt, src, sn, out, n, NULL, 0);
  CHECK(r == (int)n || r < 0);
  if (r < 0) CHECK(b2_last_detail()[0] != '\0');
  free(src);
  free(out);
}

static void test_malformed(void) {
  size_t n = 20000, cap = 30000;
  uint8_t *in = malloc(n), *c = malloc(cap), *g = malloc(cap);
  fill(in, n, 0);
  for (size_t ci = 0; ci < NCODECS; ci++) {
    int codec = all_codecs[ci], fmt = b2_codec_format(codec);
    int r = b2_stream_compress(codec, 5, in, n, c, cap, NULL, 0);
    CHECK(r > 16);
    if (r <= 16) continue;
    /* Every truncation is an error. */
    for (int cut = 0; cut < r; cut += (cut < 64 ? 1 : 37)) {
      uint8_t *t = malloc((size_t)cut + 1);
      memcpy(t, c, (size_t)cut);
      uint8_t *out = malloc(n);
      int e = b2_stream_decompress(fmt, t, (size_t)cut, out, n, NULL, 0);
      CHECK(e < 0);
      free(t);
      free(out);
    }
    /* Bit flips and garbage: an error or some n bytes, never a crash. */
    for (int k = 0; k < 200; k++) {
      memcpy(g, c, (size_t)r);
      for (int f = 0; f < 1 + k % 4; f++) g[rnd() % (uint32_t)r] ^= (uint8_t)(1u << (rnd() % 8));
      try_decode(fmt, g, (size_t)r, n);
    }
    for (int k = 0; k < 100; k++) {
      size_t gn = 1 + rnd() % 300;
      for (size_t i = 0; i < gn; i++) g[i] = (uint8_t)rnd();
      try_decode(fmt, g, gn, 1 + rnd() % 5000);
    }
  }
  /* Hand-made blosclz streams that lie. */
  static const uint8_t lit_overrun[] = {0x05, 'a', 'b'};  /* 6 literals, 2 given */
  static const uint8_t before_start[] = {0x00, 'a', 0x20, 0x05}; /* distance 6 > 1 */
  static const uint8_t far_cut[] = {0x00, 'a', 0x3f, 0xff, 0x01}; /* far needs 2 bytes */
  static const uint8_t len_cut[] = {0x01, 'a', 'b', 0xe0, 0xff}; /* extension runs out */
  uint8_t out[64];
  CHECK_EQ(b2_stream_decompress(B2_FORMAT_BLOSCLZ, lit_overrun, 3, out, 6, NULL, 0), B2_E_CODEC);
  CHECK_EQ(b2_stream_decompress(B2_FORMAT_BLOSCLZ, before_start, 4, out, 4, NULL, 0), B2_E_CODEC);
  CHECK_EQ(b2_stream_decompress(B2_FORMAT_BLOSCLZ, far_cut, 5, out, 64, NULL, 0), B2_E_CODEC);
  CHECK_EQ(b2_stream_decompress(B2_FORMAT_BLOSCLZ, len_cut, 5, out, 64, NULL, 0), B2_E_CODEC);
  CHECK_EQ(b2_stream_decompress(B2_FORMAT_BLOSCLZ, lit_overrun, 0, out, 6, NULL, 0), B2_E_CODEC);
  free(in);
  free(c);
  free(g);
}

/* Hand-built blosclz streams: a literal run of `dist` bytes, one match of
 * `len` bytes at distance `dist`, and a literal tail of 0 or 17 bytes (so
 * the match copy runs with and without room to over-write), for every
 * short distance and many lengths; compared with a byte-by-byte copy. */
static void test_blosclz_matches(void) {
  uint8_t s[512], want[512], got[512];
  for (int dist = 1; dist <= 40; dist++)
    for (int len = 3; len <= 300; len += len < 40 ? 1 : 37)
      for (int tail = 0; tail <= 17; tail += 17) {
        size_t k = 0, w = 0;
        for (int done = 0; done < dist;) { /* literal runs of <= 32 */
          int n = dist - done < 32 ? dist - done : 32;
          s[k++] = (uint8_t)(n - 1);
          for (int i = 0; i < n; i++, done++)
            s[k++] = want[w++] = (uint8_t)(rnd() | 1);
        }
        if (len <= 8) {
          s[k++] = (uint8_t)((len - 2) << 5);
        } else {
          s[k++] = 7 << 5;
          int ext = len - 9;
          for (; ext >= 255; ext -= 255) s[k++] = 255;
          s[k++] = (uint8_t)ext;
        }
        s[k++] = (uint8_t)(dist - 1);
        for (int i = 0; i < len; i++, w++) want[w] = want[w - (size_t)dist];
        if (tail) {
          s[k++] = (uint8_t)(tail - 1);
          for (int i = 0; i < tail; i++) s[k++] = want[w++] = (uint8_t)rnd();
        }
        memset(got, 0xEE, sizeof got);
        int rc = b2_stream_decompress(B2_FORMAT_BLOSCLZ, s, k, got, w, NULL, 0);
        if (rc != (int)w || memcmp(got, want, w) != 0 || got[w] != 0xEE) {
          fprintf(stderr, "  dist %d len %d tail %d: rc %d\n", dist, len,
                  tail, rc);
          t_failed_ = 1;
          return;
        }
      }
}

/* Known blosclz streams. */
static void test_blosclz_vectors(void) {
  uint8_t out[16];
  /* "abc", then a 3-byte match at distance 3, then literal "x". */
  static const uint8_t s1[] = {0x22, 'a', 'b', 'c', 0x20, 0x02, 0x00, 'x'};
  CHECK_EQ(b2_stream_decompress(B2_FORMAT_BLOSCLZ, s1, sizeof s1, out, 7, NULL, 0), 7);
  CHECK_MEM(out, "abcabcx", 7);
  /* "ab", a run-like overlapping match of 10 bytes at distance 2 (n=7,
   * extension 1: 7+2+1 = 10), then "z". */
  static const uint8_t s2[] = {0x01, 'a', 'b', 0xe0, 0x01, 0x01, 0x00, 'z'};
  CHECK_EQ(b2_stream_decompress(B2_FORMAT_BLOSCLZ, s2, sizeof s2, out, 13, NULL, 0), 13);
  CHECK_MEM(out, "ababababababz", 13);

  /* A stream written by the reference encoder (level 9): 64 pseudo-random
   * bytes, 9000 zeros, the 64 bytes again (a far match at distance 9064),
   * then 72 bytes of "abcdefgh". */
  static const uint8_t ref[] = {
      0x3f, 0xdc, 0x04, 0x65, 0xaa, 0x1f, 0xad, 0x1d, 0x5a, 0xda, 0xe5, 0xac,
      0x1b, 0x1e, 0x5f, 0x13, 0x70, 0x79, 0x6c, 0xfd, 0x10, 0xff, 0x19, 0xaf,
      0x60, 0x1d, 0x04, 0xac, 0xb4, 0x1d, 0x02, 0x2b, 0x46, 0x1f, 0x78, 0x73,
      0x3a, 0xf2, 0xdf, 0x5f, 0xae, 0xb7, 0x08, 0x59, 0xd1, 0xee, 0x39, 0x10,
      0xcb, 0x48, 0x95, 0xb5, 0xcc, 0x89, 0x29, 0x11, 0xff, 0x06, 0xb6, 0x62,
      0x2e, 0xdf, 0x3c, 0xf9, 0x35, 0xfd, 0x00, 0x00, 0xe0, 0xff, 0xff, 0xff,
      0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
      0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
      0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x40, 0x00, 0x00, 0x00,
      0xff, 0x36, 0xff, 0x03, 0x68, 0x08, 0xfd, 0x61, 0x62, 0x63, 0x64, 0x65,
      0x66, 0x67, 0x68, 0xe0, 0x34, 0x07, 0x02, 0x66, 0x67, 0x68};
  uint8_t want[9200], got[9200];
  uint32_t s = 12345;
  for (int i = 0; i < 64; i++) {
    s = s * 1103515245u + 12345u;
    want[i] = (uint8_t)(s >> 16);
  }
  memset(want + 64, 0, 9000);
  memcpy(want + 9064, want, 64);
  for (int i = 9128; i < 9200; i++) want[i] = (uint8_t)"abcdefgh"[i % 8];
  CHECK_EQ(b2_stream_decompress(B2_FORMAT_BLOSCLZ, ref, sizeof ref, got, 9200, NULL, 0), 9200);
  CHECK_MEM(got, want, 9200);

  /* Our encoder on the same input: decodes back, and has the shape the
   * reference decoder needs (starts and ends with a literal run). */
  uint8_t enc[9200];
  for (int lvl = 1; lvl <= 9; lvl++) {
    int r = b2_stream_compress(B2_CODEC_BLOSCLZ, lvl, want, 9200, enc, sizeof enc, NULL, 0);
    CHECK(r > 0 && r < 400);
    if (r <= 0) continue;
    CHECK((enc[0] & 0x1f) == enc[0] - 0x20); /* marker bit 5, literal token */
    const uint8_t *ip = enc, *ie = enc + r;
    unsigned ctrl = *ip++ & 31u;
    int last_literal = 0;
    for (;;) {
      if (ctrl < 32) {
        ip += ctrl + 1;
        last_literal = 1;
      } else {
        if ((ctrl >> 5) == 7) while (*ip++ == 255) {}
        unsigned lo = *ip++;
        if ((ctrl & 31) == 31 && lo == 255) ip += 2;
        last_literal = 0;
      }
      if (ip >= ie) break;
      ctrl = *ip++;
    }
    CHECK(ip == ie);
    CHECK(last_literal);
    memset(got, 0, sizeof got);
    CHECK_EQ(b2_stream_decompress(B2_FORMAT_BLOSCLZ, enc, (size_t)r, got, 9200, NULL, 0), 9200);
    CHECK_MEM(got, want, 9200);
  }
}

static void test_shuffle_vectors(void) {
  /* typesize 4, three elements and two trailing bytes. */
  static const uint8_t in[] = {0x00, 0x01, 0x02, 0x03, 0x10, 0x11, 0x12,
                               0x13, 0x20, 0x21, 0x22, 0x23, 0xaa, 0xbb};
  static const uint8_t want[] = {0x00, 0x10, 0x20, 0x01, 0x11, 0x21, 0x02,
                                 0x12, 0x22, 0x03, 0x13, 0x23, 0xaa, 0xbb};
  uint8_t out[sizeof in], back[sizeof in];
  b2_shuffle(4, sizeof in, in, out);
  CHECK_MEM(out, want, sizeof want);
  b2_unshuffle(4, sizeof in, out, back);
  CHECK_MEM(back, in, sizeof in);
  /* Fewer bytes than one element: a copy. */
  b2_shuffle(8, 5, in, out);
  CHECK_MEM(out, in, 5);
  /* typesize 2 on 40 elements: the first plane holds the low bytes. */
  uint8_t a[80], b[80];
  for (int i = 0; i < 40; i++) {
    a[2 * i] = (uint8_t)i;
    a[2 * i + 1] = (uint8_t)(100 + i);
  }
  b2_shuffle(2, 80, a, b);
  for (int i = 0; i < 40; i++) {
    CHECK_EQ(b[i], i);
    CHECK_EQ(b[40 + i], 100 + i);
  }
}

static void test_bitshuffle_vectors(void) {
  uint8_t in[32], out[32], back[32];
  /* typesize 1: bit k of element i lands in plane k, byte i/8, bit i%8. */
  memset(in, 0, sizeof in);
  in[0] = 0x01;
  in[7] = 0x80;
  in[2] = 0x80;
  CHECK_EQ(b2_bitshuffle(1, 8, in, out), 0);
  static const uint8_t want1[8] = {0x01, 0, 0, 0, 0, 0, 0, 0x84};
  CHECK_MEM(out, want1, 8);
  CHECK_EQ(b2_bitunshuffle(1, 8, out, back), 0);
  CHECK_MEM(back, in, 8);
  /* typesize 2, 11 elements + 1 byte: the first 8 elements are bit
   * shuffled (16 planes of 1 byte), the rest (7 bytes) copied. */
  for (int i = 0; i < 23; i++) in[i] = (uint8_t)(0xa0 + i);
  memset(in, 0, 16);
  in[2 * 3 + 1] = 0x01; /* element 3 = 0x0100: byte 1, bit 0 */
  in[2 * 5] = 0x06;     /* element 5 = 0x0006: byte 0, bits 1 and 2 */
  CHECK_EQ(b2_bitshuffle(2, 23, in, out), 0);
  uint8_t want2[23] = {0};
  want2[1] = 1u << 5; /* plane (byte 0, bit 1) */
  want2[2] = 1u << 5; /* plane (byte 0, bit 2) */
  want2[8] = 1u << 3; /* plane (byte 1, bit 0) */
  memcpy(want2 + 16, in + 16, 7);
  CHECK_MEM(out, want2, 23);
  CHECK_EQ(b2_bitunshuffle(2, 23, out, back), 0);
  CHECK_MEM(back, in, 23);
  CHECK_EQ(b2_bitshuffle(0, 23, in, out), B2_E_INVAL);

  /* Format-2 chunks: a block of 9 elements (not a multiple of 8) was stored
   * as is; one of 8 elements + trailing bytes gets zeros for those. */
  CHECK_EQ(b2_bitunshuffle_v2(2, 18, in, out), 0);
  CHECK_MEM(out, in, 18);
  CHECK_EQ(b2_bitshuffle(2, 16, in, out), 0);
  out[16] = 0x55;
  memset(back, 0x77, sizeof back);
  CHECK_EQ(b2_bitunshuffle_v2(2, 17, out, back), 0);
  CHECK_MEM(back, in, 16);
  CHECK_EQ(back[16], 0);
}

/* Every kernel set this build and CPU offer, the generic one first. */
static int kernel_sets(const struct b2_simd_kernels *ks[3]) {
  static const struct b2_simd_kernels generic = {
      "generic", b2_shuffle_generic, b2_unshuffle_generic,
      b2_bitshuffle_generic, b2_bitunshuffle_generic};
  int n = 0;
  ks[n++] = &generic;
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
  if (b2_simd_sse2_kernels() && __builtin_cpu_supports("sse2")) ks[n++] = b2_simd_sse2_kernels();
  if (b2_simd_avx2_kernels() && __builtin_cpu_supports("avx2")) ks[n++] = b2_simd_avx2_kernels();
#endif
  return n;
}

static void test_simd_equal(void) {
  static const size_t tss[] = {1, 2, 3, 4, 5, 8, 12, 16, 32};
  static const size_t lens[] = {0,   1,   7,    8,    15,   16,          31,
                                32,  33,  100,  255,  1000, 4096 + 3,    8192,
                                65536 + 17, 262144 + 5};
  const struct b2_simd_kernels *ks[3];
  int nk = kernel_sets(ks);
  if (nk == 1) fprintf(stderr, "  (only the generic kernels are available)\n");
  size_t maxn = 262144 + 5;
  uint8_t *in = malloc(maxn), *ref = malloc(maxn), *out = malloc(maxn), *back = malloc(maxn);
  fill(in, maxn, 1);
  for (size_t ti = 0; ti < sizeof tss / sizeof tss[0]; ti++) {
    size_t ts = tss[ti];
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
      size_t n = lens[li];
      if (n < ts) continue;
      size_t nelem = n / ts, n8 = nelem - nelem % 8;
      b2_shuffle_generic(ts, n, in, ref);
      b2_unshuffle_generic(ts, n, ref, back);
      CHECK_MEM(back, in, n);
      for (int k = 1; k < nk; k++) {
        memset(out, 0, n);
        ks[k]->shuffle(ts, n, in, out);
        CHECK_MEM(out, ref, n);
        memset(back, 0, n);
        ks[k]->unshuffle(ts, n, ref, back);
        CHECK_MEM(back, in, n);
      }
      if (n8 == 0) continue;
      CHECK_EQ(b2_bitshuffle_generic(ts, n8, in, ref), 0);
      CHECK_EQ(b2_bitunshuffle_generic(ts, n8, ref, back), 0);
      CHECK_MEM(back, in, n8 * ts);
      for (int k = 1; k < nk; k++) {
        memset(out, 0, n);
        CHECK_EQ(ks[k]->bitshuffle(ts, n8, in, out), 0);
        CHECK_MEM(out, ref, n8 * ts);
        memset(back, 0, n);
        CHECK_EQ(ks[k]->bitunshuffle(ts, n8, ref, back), 0);
        CHECK_MEM(back, in, n8 * ts);
      }
      /* The public entry points too, whatever level they picked. */
      CHECK_EQ(b2_bitshuffle(ts, n, in, out), 0);
      CHECK_MEM(out, ref, n8 * ts);
      CHECK_MEM(out + n8 * ts, in + n8 * ts, n - n8 * ts);
      CHECK_EQ(b2_bitunshuffle(ts, n, out, back), 0);
      CHECK_MEM(back, in, n);
    }
  }
  free(in);
  free(ref);
  free(out);
  free(back);
}

static void test_delta(void) {
  /* typesize 1, reference block: word 0 kept, word i ^= word i-1. */
  uint8_t blk0[] = {5, 7, 7, 1}, enc[8], buf[8];
  b2_delta_encode(blk0, 0, 4, 1, blk0, enc);
  static const uint8_t want0[] = {5, 2, 0, 6};
  CHECK_MEM(enc, want0, 4);
  memcpy(buf, enc, 4);
  b2_delta_decode(buf, 0, 4, 1, buf);
  CHECK_MEM(buf, blk0, 4);
  /* Another block: XOR with the reference block. */
  uint8_t blk1[] = {1, 2, 3, 4};
  b2_delta_encode(blk0, 4, 4, 1, blk1, enc);
  static const uint8_t want1[] = {4, 5, 4, 5};
  CHECK_MEM(enc, want1, 4);
  b2_delta_decode(blk0, 4, 4, 1, enc);
  CHECK_MEM(enc, blk1, 4);
  /* typesize 2 with a trailing byte: 16-bit words, the last byte copied. */
  uint8_t r2[] = {0x01, 0x02, 0x10, 0x20, 0x99}, e2[5];
  b2_delta_encode(r2, 0, 5, 2, r2, e2);
  static const uint8_t want2[] = {0x01, 0x02, 0x11, 0x22, 0x99};
  CHECK_MEM(e2, want2, 5);
  b2_delta_decode(e2, 0, 5, 2, e2);
  CHECK_MEM(e2, r2, 5);
  /* typesize 3 works byte by byte; typesize 16 in 8-byte words. */
  uint8_t r3[6] = {1, 2, 4, 8, 16, 32}, e3[6];
  b2_delta_encode(r3, 0, 6, 3, r3, e3);
  static const uint8_t want3[] = {1, 3, 6, 12, 24, 48};
  CHECK_MEM(e3, want3, 6);
  uint8_t r16[32], e16[32], d16[32];
  for (int i = 0; i < 32; i++) r16[i] = (uint8_t)(i * 7);
  b2_delta_encode(r16, 0, 32, 16, r16, e16);
  CHECK_MEM(e16, r16, 8);
  for (int i = 8; i < 32; i++) CHECK_EQ(e16[i], r16[i] ^ r16[i - 8]);
  memcpy(d16, e16, 32);
  b2_delta_decode(d16, 0, 32, 16, d16);
  CHECK_MEM(d16, r16, 32);
  /* Shorter than one word: copied. */
  b2_delta_encode(r16, 0, 3, 8, r16, e16);
  CHECK_MEM(e16, r16, 3);
}

static void test_bytedelta(void) {
  /* typesize 2, 7 bytes: streams {1,3,6} and {10,5,5}, trailing {2}. */
  static const uint8_t in[] = {1, 3, 6, 10, 5, 5, 2};
  static const uint8_t want[] = {1, 2, 3, 10, 251, 0, 2};
  uint8_t out[7], back[7];
  b2_bytedelta_encode(2, 7, in, out);
  CHECK_MEM(out, want, 7);
  b2_bytedelta_decode(2, 7, out, back);
  CHECK_MEM(back, in, 7);
  /* Longer streams (past any 16-byte vector step) round trip. */
  size_t n = 4 * 1000 + 3;
  uint8_t *a = malloc(n), *b = malloc(n), *c = malloc(n);
  fill(a, n, 1);
  b2_bytedelta_encode(4, n, a, b);
  CHECK_EQ(b[1000], a[1000]);
  CHECK_EQ(b[1001], (uint8_t)(a[1001] - a[1000]));
  b2_bytedelta_decode(4, n, b, c);
  CHECK_MEM(c, a, n);
  free(a);
  free(b);
  free(c);
}

static void test_truncprec(void) {
  uint32_t f[3] = {0x3F8FFFFFu, 0xBF800001u, 0x7F800000u}, g[3];
  CHECK_EQ(b2_truncprec(10, 4, sizeof f, (uint8_t *)f, (uint8_t *)g), 0);
  CHECK_EQ(g[0], 0x3F8FE000u); /* 23 - 10 = 13 low bits cleared */
  CHECK_EQ(g[1], 0xBF800000u);
  CHECK_EQ(g[2], 0x7F800000u); /* infinity stays */
  CHECK_EQ(b2_truncprec(-3, 4, sizeof f, (uint8_t *)f, (uint8_t *)g), 0);
  CHECK_EQ(g[0], 0x3F8FFFF8u);
  uint64_t d = UINT64_C(0x3FF0FFFFFFFFFFFF), e;
  CHECK_EQ(b2_truncprec(20, 8, 8, (uint8_t *)&d, (uint8_t *)&e), 0);
  CHECK(e == UINT64_C(0x3FF0FFFF00000000)); /* 52 - 20 = 32 bits cleared */
  /* Trailing bytes are copied. */
  uint8_t in[6] = {0xff, 0xff, 0xff, 0xff, 0xab, 0xcd}, out[6];
  CHECK_EQ(b2_truncprec(0 + 1, 4, 6, in, out), 0);
  CHECK_EQ(out[4], 0xab);
  CHECK_EQ(out[5], 0xcd);
  CHECK_EQ(out[0], 0x00);
  CHECK_EQ(out[2], 0xc0);
  CHECK_EQ(b2_truncprec(10, 2, 6, in, out), B2_E_UNSUPPORTED);
  CHECK_EQ(b2_truncprec(24, 4, 6, in, out), B2_E_INVAL);
  CHECK_EQ(b2_truncprec(0, 4, 6, in, out), B2_E_INVAL);
  CHECK_EQ(b2_truncprec(-52, 8, 8, in, out), B2_E_INVAL);
}

/* int_trunc masks whole items, read as little-endian unsigned integers, as
 * the reference's filter does (values worked out by hand). */
static void test_inttrunc(void) {
  uint32_t w[3] = {0x12345678u, 0xFFFFFFFFu, 0x00000FFFu}, v[3];
  CHECK_EQ(b2_inttrunc(20, 4, sizeof w, (uint8_t *)w, (uint8_t *)v), 0);
  CHECK_EQ(v[0], 0x12345000u); /* 32 - 20 = 12 low bits cleared */
  CHECK_EQ(v[1], 0xFFFFF000u);
  CHECK_EQ(v[2], 0u);
  CHECK_EQ(b2_inttrunc(-4, 4, sizeof w, (uint8_t *)w, (uint8_t *)v), 0);
  CHECK_EQ(v[0], 0x12345670u);
  uint8_t b[3] = {0xFF, 0x81, 0x7F}, c[3];
  CHECK_EQ(b2_inttrunc(3, 1, 3, b, c), 0); /* 5 low bits cleared */
  CHECK_EQ(c[0], 0xE0);
  CHECK_EQ(c[1], 0x80);
  CHECK_EQ(c[2], 0x60);
  uint16_t h = 0xABCD, k;
  CHECK_EQ(b2_inttrunc(-8, 2, 2, (uint8_t *)&h, (uint8_t *)&k), 0);
  CHECK_EQ(k, 0xAB00);
  uint64_t q = UINT64_C(0x0123456789ABCDEF), r;
  CHECK_EQ(b2_inttrunc(4, 8, 8, (uint8_t *)&q, (uint8_t *)&r), 0);
  CHECK(r == 0); /* 60 low bits cleared, 0x0 in the top nibble */
  CHECK_EQ(b2_inttrunc(-63, 8, 8, (uint8_t *)&q, (uint8_t *)&r), 0);
  CHECK(r == 0);
  /* Trailing bytes are copied. */
  uint8_t in[6] = {0xff, 0xff, 0xff, 0xff, 0xab, 0xcd}, out[6];
  CHECK_EQ(b2_inttrunc(-9, 4, 6, in, out), 0);
  CHECK_EQ(out[0], 0x00);
  CHECK_EQ(out[1], 0xfe);
  CHECK_EQ(out[4], 0xab);
  CHECK_EQ(out[5], 0xcd);
  CHECK_EQ(b2_inttrunc(3, 3, 6, in, out), B2_E_UNSUPPORTED);
  CHECK_EQ(b2_inttrunc(0, 4, 4, in, out), B2_E_INVAL);   /* nothing kept */
  CHECK_EQ(b2_inttrunc(-32, 4, 4, in, out), B2_E_INVAL);
  CHECK_EQ(b2_inttrunc(33, 4, 4, in, out), B2_E_INVAL);
}

/* NDCELL / NDMEAN: the cell order worked out by hand on a 4x6 block of
 * 2x2 cells and on a 5x5 one (cells cut at both edges), round trips over
 * ragged shapes, NDMEAN's means, and refused shapes and cells. */
static void test_ndcell(void) {
  /* 4x6 items 0..23, cells 2x2: cell (0,0) holds 0 1 6 7, cell (0,1)
   * 2 3 8 9, cell (0,2) 4 5 10 11, then the second row of cells. */
  uint8_t a[24], c[24], back[24];
  for (int i = 0; i < 24; i++) a[i] = (uint8_t)i;
  int32_t s46[2] = {4, 6};
  CHECK_EQ(b2_ndcell_encode(0, 2, 1, 2, s46, 24, a, c), 0);
  static const uint8_t want[24] = {0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11,
                                   12, 13, 18, 19, 14, 15, 20, 21, 16, 17, 22, 23};
  CHECK_MEM(c, want, 24);
  CHECK_EQ(b2_ndcell_decode(0, 2, 1, 2, s46, 24, c, back), 0);
  CHECK_MEM(back, a, 24);
  /* 5x5, cells 2x2: the third column and row of cells are 1 wide */
  uint8_t b[25], d[25], e[25];
  for (int i = 0; i < 25; i++) b[i] = (uint8_t)i;
  int32_t s55[2] = {5, 5};
  CHECK_EQ(b2_ndcell_encode(0, 2, 1, 2, s55, 25, b, d), 0);
  static const uint8_t want5[25] = {0, 1, 5, 6, 2, 3, 7, 8, 4, 9, 10, 11, 15, 16,
                                    12, 13, 17, 18, 14, 19, 20, 21, 22, 23, 24};
  CHECK_MEM(d, want5, 25);
  CHECK_EQ(b2_ndcell_decode(0, 2, 1, 2, s55, 25, d, e), 0);
  CHECK_MEM(e, b, 25);
  /* round trips of 4-byte items over ragged 1-4 dimensional blocks */
  static const int32_t shapes[][4] = {{7, 0, 0, 0}, {5, 9, 0, 0}, {3, 7, 5, 0}, {3, 4, 5, 6}};
  for (int nd = 1; nd <= 4; nd++) {
    size_t items = 1;
    for (int i = 0; i < nd; i++) items *= (size_t)shapes[nd - 1][i];
    uint32_t *x = malloc(items * 4), *y = malloc(items * 4), *z = malloc(items * 4);
    for (size_t i = 0; i < items; i++) x[i] = (uint32_t)(i * 2654435761u);
    for (int cell = 1; cell <= 3; cell++) {
      CHECK_EQ(b2_ndcell_encode(0, cell, 4, nd, shapes[nd - 1], items * 4, (uint8_t *)x,
                                (uint8_t *)y), 0);
      CHECK_EQ(b2_ndcell_decode(0, cell, 4, nd, shapes[nd - 1], items * 4, (uint8_t *)y,
                                (uint8_t *)z), 0);
      CHECK_MEM(z, x, items * 4);
    }
    free(x);
    free(y);
    free(z);
  }
  /* NDMEAN: each cell's items become its mean, cells cut at the edge */
  double v[5] = {1, 2, 3, 4, 5}, m[5], w[5];
  int32_t s5 = 5;
  CHECK_EQ(b2_ndcell_encode(1, 2, 8, 1, &s5, 40, (uint8_t *)v, (uint8_t *)m), 0);
  CHECK(m[0] == 1.5 && m[1] == 1.5 && m[2] == 3.5 && m[3] == 3.5 && m[4] == 5);
  CHECK_EQ(b2_ndcell_decode(1, 2, 8, 1, &s5, 40, (uint8_t *)m, (uint8_t *)w), 0);
  CHECK(w[0] == 1.5 && w[4] == 5);
  float fv[4] = {1, 2, 4, 8}, fm[4];
  int32_t s22[2] = {2, 2};
  CHECK_EQ(b2_ndcell_encode(1, 7, 4, 2, s22, 16, (uint8_t *)fv, (uint8_t *)fm), 0);
  CHECK(fm[0] == 3.75f && fm[3] == 3.75f); /* cells cut to the 2x2 block */
  /* refused: shape not the block's, cells larger than it, bad cell sizes */
  CHECK_EQ(b2_ndcell_decode(0, 2, 1, 2, s46, 25, c, back), B2_E_FORMAT);
  CHECK_EQ(b2_ndcell_decode(0, 5, 1, 2, s22, 4, c, back), B2_E_FORMAT);
  CHECK_EQ(b2_ndcell_decode(0, 0, 1, 2, s46, 24, c, back), B2_E_FORMAT);
  CHECK_EQ(b2_ndcell_decode(1, 200, 1, 2, s46, 24, c, back), B2_E_FORMAT);
  CHECK_EQ(b2_ndcell_encode(1, 2, 2, 2, s46, 48, c, back), B2_E_UNSUPPORTED);
  int32_t neg[2] = {4, -6};
  CHECK_EQ(b2_ndcell_decode(0, 2, 1, 2, neg, 24, c, back), B2_E_FORMAT);
  CHECK_EQ(b2_ndcell_decode(0, 2, 1, 9, s46, 24, c, back), B2_E_UNSUPPORTED);
}

/* NDLZ streams made by hand: each kind of cell (literal, repeated byte,
 * earlier cell, rows from earlier bytes with literal rows) on 4x4 and 8x8
 * cells, cells cut at the block's edges, and damaged streams refused. */
static uint8_t rnd_byte(void) {
  static uint32_t x = 2463534242u;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  return (uint8_t)(x >> 24);
}

static size_t ndlz_head(uint8_t *b, int32_t h, int32_t w) {
  b[0] = 2;
  memcpy(b + 1, &h, 4);
  memcpy(b + 5, &w, 4);
  return 9;
}

static void test_ndlz(void) {
  uint8_t s[256], out[256];
  /* 4x8: a literal cell, then the same cell by reference */
  size_t n = ndlz_head(s, 4, 8);
  s[n++] = 0;
  for (int i = 0; i < 16; i++) s[n++] = (uint8_t)i;
  s[n++] = 0xc0; /* at 26: back to 10, offset 16 */
  s[n++] = 16;
  s[n++] = 0;
  CHECK_EQ(b2_ndlz_decompress(4, s, n, out, 32), 32);
  for (int r = 0; r < 4; r++)
    for (int c = 0; c < 8; c++) CHECK_EQ(out[r * 8 + c], (uint8_t)(r * 4 + c % 4));
  /* 5x5: a repeated byte, a 4x1 literal, a 1x4 cell whose pair of rows
   * 2-3 comes from the first literal (token 128, offset + 3), then literal
   * rows 0-1 of which row 0 lands; a 1x1 literal */
  n = ndlz_head(s, 5, 5);
  s[n++] = 0x40;
  s[n++] = 7;
  s[n++] = 0; /* at 11 */
  for (int i = 1; i <= 4; i++) s[n++] = (uint8_t)i;
  size_t cur = n; /* 16 */
  s[n++] = 128;
  uint16_t off = (uint16_t)(cur + 3 - 12 - 3); /* rows from bytes 12.. */
  memcpy(s + n, &off, 2);
  n += 2;
  for (int i = 0; i < 8; i++) s[n++] = (uint8_t)(100 + i);
  s[n++] = 0;
  s[n++] = 9;
  CHECK_EQ(b2_ndlz_decompress(4, s, n, out, 25), 25);
  static const uint8_t want5[25] = {7, 7, 7, 7, 1, 7, 7, 7, 7, 2, 7, 7, 7, 7, 3,
                                    7, 7, 7, 7, 4, 100, 101, 102, 103, 9};
  CHECK_MEM(out, want5, 25);
  /* 8x16: a literal 8x8 cell, then rows 2-4 of it (token 21 << 3 | 2,
   * offset back from the token) and five literal rows */
  n = ndlz_head(s, 8, 16);
  s[n++] = 0;
  for (int i = 0; i < 64; i++) s[n++] = (uint8_t)i;
  cur = n; /* 74 */
  s[n++] = (21 << 3) | 2;
  off = (uint16_t)(cur - (10 + 16));
  memcpy(s + n, &off, 2);
  n += 2;
  for (int i = 0; i < 40; i++) s[n++] = (uint8_t)(200 + i / 8);
  CHECK_EQ(b2_ndlz_decompress(8, s, n, out, 128), 128);
  static const int lit_row[8] = {200, 201, -1, -1, -1, 202, 203, 204};
  for (int r = 0; r < 8; r++)
    for (int c = 0; c < 8; c++) {
      CHECK_EQ(out[r * 16 + c], (uint8_t)(r * 8 + c));
      CHECK_EQ(out[r * 16 + 8 + c], (uint8_t)(lit_row[r] < 0 ? r * 8 + c : lit_row[r]));
    }
  /* our encoder: repeated bytes, repeated cells, literals, cut edge cells;
   * what it makes decodes to the block */
  static const int32_t shapes[][2] = {{32, 48}, {30, 37}, {5, 5}, {64, 9}};
  for (int k = 0; k < 4; k++)
    for (int meta = 4; meta <= 8; meta += 4) {
      size_t sz = (size_t)shapes[k][0] * (size_t)shapes[k][1];
      uint8_t *blk = malloc(sz), *enc = malloc(sz), *dec = malloc(sz);
      for (size_t i = 0; i < sz; i++) /* tiles of 8 columns, a flat band */
        blk[i] = i / (size_t)shapes[k][1] < 8 ? 3 : (uint8_t)((i % (size_t)shapes[k][1]) % 8 * 7);
      int c = b2_ndlz_compress(meta, 2, shapes[k], blk, sz, enc, sz);
      if (sz > 25) CHECK(c > 0); /* these compress */
      if (c > 0) {
        CHECK_EQ(b2_ndlz_decompress(meta, enc, (size_t)c, dec, sz), (int)sz);
        CHECK_MEM(dec, blk, sz);
      }
      for (size_t i = 0; i < sz; i++) blk[i] = (uint8_t)(rnd_byte());
      CHECK_EQ(b2_ndlz_compress(meta, 2, shapes[k], blk, sz, enc, sz), 0); /* noise: raw */
      free(blk);
      free(enc);
      free(dec);
    }
  CHECK_EQ(b2_ndlz_compress(4, 3, shapes[0], s, 10, out, 100), 0); /* not 2-D */
  /* damaged */
  CHECK(b2_ndlz_decompress(8, s, n - 1, out, 128) < 0);  /* a literal row cut */
  CHECK(b2_ndlz_decompress(8, s, n, out, 127) < 0);      /* not the block */
  CHECK(b2_ndlz_decompress(4, s, n, out, 128) < 0);      /* 4x4 cells: token 170 */
  CHECK(b2_ndlz_decompress(5, s, n, out, 128) < 0);      /* cell size */
  off = 200; /* before the input's start */
  memcpy(s + cur + 1, &off, 2);
  CHECK(b2_ndlz_decompress(8, s, n, out, 128) < 0);
  s[cur] = (21 << 3) | 6; /* rows 6-8: past the cell */
  CHECK(b2_ndlz_decompress(8, s, n, out, 128) < 0);
  s[cur] = 1; /* unknown token */
  CHECK(b2_ndlz_decompress(8, s, n, out, 128) < 0);
  s[0] = 3;
  CHECK(b2_ndlz_decompress(8, s, n, out, 128) < 0);
  CHECK(b2_ndlz_decompress(8, s, 8, out, 128) < 0);
}

/* Codec contexts live per thread and are freed at thread exit or by
 * b2_codec_thread_cleanup (ASan's leak check watches both). */
static void *thread_main(void *arg) {
  int *ok = arg;
  size_t n = 50000;
  uint8_t *in = malloc(n), *c = malloc(n), *out = malloc(n);
  for (size_t i = 0; i < n; i++) in[i] = (uint8_t)(i % 251 * (i % 3));
  *ok = 1;
  for (size_t ci = 0; ci < NCODECS; ci++) {
    int r = b2_stream_compress(all_codecs[ci], 5, in, n, c, n, NULL, 0);
    if (r <= 0 || b2_stream_decompress(b2_codec_format(all_codecs[ci]), c, (size_t)r, out, n, NULL, 0) != (int)n ||
        memcmp(in, out, n) != 0)
      *ok = 0;
  }
  if (b2_bitshuffle(4, n, in, c) != 0 || b2_bitunshuffle(4, n, c, out) != 0 || memcmp(in, out, n))
    *ok = 0;
  free(in);
  free(c);
  free(out);
  return NULL;
}

/* What each codec and filter can encode, asked before a frame is made. */
static void test_check(void) {
  const int32_t b2[2] = {8, 8}, b3[3] = {4, 2, 8}, b1[1] = {64};
  /* general-purpose codecs and byte filters take anything */
  CHECK_EQ(b2_codec_check(B2_CODEC_ZSTD, 0, 3, 0, NULL, 0), 0);
  CHECK_EQ(b2_filter_check(B2_FILTER_SHUFFLE, 0, 7, 0, NULL, 0), 0);
  CHECK_EQ(b2_filter_check(B2_FILTER_BYTEDELTA, 0, 2, 2, b2, 128), 0);
  CHECK_EQ(b2_codec_check(B2_CODEC_SNAPPY, 0, 1, 0, NULL, 0), B2_E_UNSUPPORTED);
  /* ndlz: 2-D arrays of bytes, cells of 4 or 8 */
  CHECK_EQ(b2_codec_check(B2_CODEC_NDLZ, 4, 1, 2, b2, 64), 0);
  CHECK_EQ(b2_codec_check(B2_CODEC_NDLZ, 8, 1, 0, NULL, 0), B2_E_INVAL); /* not an array */
  CHECK(strstr(b2_last_detail(), "arrays only") != NULL);
  CHECK_EQ(b2_codec_check(B2_CODEC_NDLZ, 4, 2, 2, b2, 128), B2_E_INVAL);
  CHECK_EQ(b2_codec_check(B2_CODEC_NDLZ, 4, 1, 3, b3, 64), B2_E_INVAL);
  CHECK_EQ(b2_codec_check(B2_CODEC_NDLZ, 5, 1, 2, b2, 64), B2_E_INVAL);
  /* trunc_prec / int_trunc: an item size they know, bits left */
  CHECK_EQ(b2_filter_check(B2_FILTER_TRUNC_PREC, 10, 8, 0, NULL, 0), 0);
  CHECK_EQ(b2_filter_check(B2_FILTER_TRUNC_PREC, (uint8_t)-20, 4, 0, NULL, 0), 0);
  CHECK(b2_filter_check(B2_FILTER_TRUNC_PREC, 0, 8, 0, NULL, 0) < 0); /* no mantissa left */
  CHECK(b2_filter_check(B2_FILTER_TRUNC_PREC, 10, 2, 0, NULL, 0) < 0);
  CHECK_EQ(b2_filter_check(B2_FILTER_INT_TRUNC, 20, 4, 0, NULL, 0), 0);
  CHECK(b2_filter_check(B2_FILTER_INT_TRUNC, 40, 4, 0, NULL, 0) < 0);
  CHECK(b2_filter_check(B2_FILTER_INT_TRUNC, 3, 3, 0, NULL, 0) < 0);
  /* ndcell / ndmean: arrays; ndmean floats; a cell the block can hold */
  CHECK_EQ(b2_filter_check(B2_FILTER_NDCELL, 4, 2, 2, b2, 128), 0);
  CHECK_EQ(b2_filter_check(B2_FILTER_NDCELL, 4, 2, 0, NULL, 0), B2_E_INVAL);
  CHECK_EQ(b2_filter_check(B2_FILTER_NDMEAN, 4, 8, 3, b3, 512), 0);
  CHECK(b2_filter_check(B2_FILTER_NDMEAN, 4, 2, 3, b3, 128) < 0);
  CHECK(b2_filter_check(B2_FILTER_NDCELL, 0, 2, 2, b2, 128) < 0);
  CHECK(b2_filter_check(B2_FILTER_NDCELL, 4, 2, 2, b2, 100) < 0); /* shape not the block's */
  CHECK_EQ(b2_filter_moves_bytes(B2_FILTER_SHUFFLE), 1);
  CHECK_EQ(b2_filter_moves_bytes(B2_FILTER_DELTA), 1);
  CHECK_EQ(b2_filter_moves_bytes(B2_FILTER_TRUNC_PREC), 0);
  CHECK_EQ(b2_filter_moves_bytes(B2_FILTER_NDCELL), 0);
  /* zfp: arrays of floats or doubles, blocks at least 4 wide */
  if (b2_zfp_available()) {
    CHECK_EQ(b2_codec_check(B2_CODEC_ZFP_RATE, 30, 8, 2, b2, 512), 0);
    CHECK_EQ(b2_codec_check(B2_CODEC_ZFP_ACC, 248, 4, 1, b1, 256), 0);
    CHECK_EQ(b2_codec_check(B2_CODEC_ZFP_PREC, 20, 2, 2, b2, 128), B2_E_UNSUPPORTED);
    CHECK_EQ(b2_codec_check(B2_CODEC_ZFP_PREC, 20, 4, 3, b3, 256), B2_E_INVAL); /* a side of 2 */
    CHECK(strstr(b2_last_detail(), "at least 4") != NULL);
  } else {
    CHECK_EQ(b2_codec_check(B2_CODEC_ZFP_RATE, 30, 8, 2, b2, 512), B2_E_UNSUPPORTED);
    CHECK(strstr(b2_last_detail(), "libzfp") != NULL);
  }
  CHECK_EQ(b2_codec_check(B2_CODEC_ZFP_RATE, 30, 8, 0, NULL, 0), B2_E_INVAL);
}

static void test_threads(void) {
  pthread_t th[3];
  int ok[3] = {0, 0, 0};
  for (int i = 0; i < 3; i++) CHECK_EQ(pthread_create(&th[i], NULL, thread_main, &ok[i]), 0);
  for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < 3; i++) CHECK(ok[i]);
  int mine = 0;
  thread_main(&mine);
  CHECK(mine);
  b2_codec_thread_cleanup();
  b2_codec_thread_cleanup(); /* twice is harmless */
  thread_main(&mine);        /* and the codecs work again afterwards */
  CHECK(mine);
  b2_codec_thread_cleanup();
}

int main(void) {
  T_RUN(test_names);
  T_RUN(test_roundtrip);
  T_RUN(test_prefix);
  T_RUN(test_dictionary);
  T_RUN(test_malformed);
  T_RUN(test_blosclz_vectors);
  T_RUN(test_blosclz_matches);
  T_RUN(test_shuffle_vectors);
  T_RUN(test_bitshuffle_vectors);
  T_RUN(test_simd_equal);
  T_RUN(test_delta);
  T_RUN(test_bytedelta);
  T_RUN(test_truncprec);
  T_RUN(test_inttrunc);
  T_RUN(test_ndcell);
  T_RUN(test_ndlz);
  T_RUN(test_check);
  T_RUN(test_threads);
  T_END();
}
