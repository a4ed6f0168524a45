/*
 * test_b2nd_write.c - the write side of b2nd: metalayer encoding, default
 * shapes, chunk layout (scatter), streaming encode, dtype item sizes.
 *
 * The metalayer encoder must give back the reference fixtures' metalayers
 * byte for byte.  Scatter and write are checked as the inverse of
 * b2_b2nd_read (itself checked against an independent model in
 * test_b2nd.c): every random geometry's items, scattered or encoded and
 * read back, must equal the source, and padding must be zero.  Whole
 * arrays also go through real frames (contiguous and sparse) and the
 * frame checker.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "b2_b2nd.h"
#include "b2_chunk.h"
#include "b2_error.h"
#include "b2_frame.h"
#include "common/util.h"
#include "t.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static uint64_t rnd(void) { return t_xorshift64(&rng_state); }
static int64_t rnd_in(int64_t lo, int64_t hi) { return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1)); }

/* A random geometry: ndim 1..5, small shapes, chunks up to a bit past the
 * shape, blocks within chunks. */
static int random_geometry(b2_b2nd *a, int32_t isz, int max_side) {
  int nd = (int)rnd_in(1, 5);
  int64_t s[B2_B2ND_MAXDIM];
  int32_t c[B2_B2ND_MAXDIM], b[B2_B2ND_MAXDIM];
  for (int d = 0; d < nd; d++) {
    s[d] = rnd_in(1, nd > 3 ? 7 : max_side);
    c[d] = (int32_t)rnd_in(1, s[d] + 2);
    b[d] = (int32_t)rnd_in(1, c[d]);
  }
  return b2_b2nd_make(a, nd, s, c, b, isz, NULL);
}

static uint8_t *random_items(const b2_b2nd *a) {
  size_t n = (size_t)b2_b2nd_nbytes(a);
  uint8_t *p = malloc(n + 1);
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(rnd() | 1); /* never 0: padding stands out */
  return p;
}

/* Decoded chunks in memory, read back through b2_b2nd_read. */
typedef struct store {
  const b2_b2nd *a;
  uint8_t **chunk;
} store;

static int store_reader(void *ctx, int64_t chunk, size_t off, size_t len, void *dst) {
  store *s = ctx;
  if (chunk < 0 || chunk >= s->a->nchunks || off + len > (size_t)s->a->chunk_nbytes) return B2_E_RANGE;
  memcpy(dst, s->chunk[chunk] + off, len);
  return 0;
}

static void store_free(store *s) {
  for (int64_t k = 0; s->chunk && k < s->a->nchunks; k++) free(s->chunk[k]);
  free(s->chunk);
}

/* Count of array items in chunk k: the rest of the chunk must be zero. */
static int64_t items_in_chunk(const b2_b2nd *a, int64_t k) {
  int64_t n = 1;
  for (int d = a->ndim - 1; d >= 0; d--) {
    int64_t nc = (a->shape[d] + a->chunkshape[d] - 1) / a->chunkshape[d];
    int64_t o = k % nc * a->chunkshape[d];
    k /= nc;
    n *= B2_MIN((int64_t)a->chunkshape[d], a->shape[d] - o);
  }
  return n;
}

static int64_t nonzero_items(const uint8_t *p, int64_t n, int isz) {
  int64_t c = 0;
  for (int64_t i = 0; i < n; i++) {
    int z = 1;
    for (int k = 0; k < isz; k++) z &= p[i * isz + k] == 0;
    c += !z;
  }
  return c;
}

/* ---- metalayer ------------------------------------------------------------ */

static void test_meta_encode_fixtures(void) {
  char path[2048];
  snprintf(path, sizeof path, "%s/manifest.tsv", t_fixtures());
  FILE *mf = fopen(path, "r");
  if (!mf) T_SKIP("no fixtures at %s", t_fixtures());
  char line[1024];
  int seen = 0;
  while (fgets(line, sizeof line, mf)) {
    char *tab = strchr(line, '\t');
    if (line[0] == '#' || !tab) continue;
    *tab = 0;
    snprintf(path, sizeof path, "%s/%s", t_fixtures(), line);
    b2_frame *f;
    if (b2_frame_open(path, &f) < 0) continue;
    const uint8_t *meta;
    size_t ml;
    if (b2_frame_meta_get(f, "b2nd", &meta, &ml) == 0) {
      b2_b2nd a, m;
      uint8_t *enc = NULL;
      size_t el = 0;
      CHECK_EQ(b2_b2nd_parse(meta, ml, b2_frame_get_info(f)->typesize, &a), 0);
      CHECK_EQ(b2_b2nd_meta_encode(&a, &enc, &el), 0);
      if (el != ml || memcmp(enc, meta, ml) != 0) {
        fprintf(stderr, "  %s: encoded metalayer differs (%zu vs %zu bytes)\n", line, el, ml);
        CHECK(0);
      }
      /* the same through b2_b2nd_make */
      CHECK_EQ(b2_b2nd_make(&m, a.ndim, a.shape, a.chunkshape, a.blockshape, a.itemsize, a.dtype), 0);
      uint8_t *enc2 = NULL;
      CHECK_EQ(b2_b2nd_meta_encode(&m, &enc2, &el), 0);
      CHECK(el == ml && enc2 && memcmp(enc2, meta, ml) == 0);
      CHECK_EQ(m.nchunks, a.nchunks);
      CHECK_EQ(m.chunk_nbytes, a.chunk_nbytes);
      free(enc);
      free(enc2);
      b2_b2nd_free(&a);
      b2_b2nd_free(&m);
      seen++;
    }
    b2_frame_close(f);
  }
  fclose(mf);
  CHECK(seen >= 10);
}

static void test_meta_encode_forms(void) {
  /* ndim 16: the reference writes 0x90 + 16 (0xa0) for each list */
  int64_t s[16];
  int32_t c[16], b[16];
  for (int d = 0; d < 16; d++) s[d] = c[d] = b[d] = d % 3 + 1;
  b2_b2nd a, r;
  CHECK_EQ(b2_b2nd_make(&a, 16, s, c, b, 2, "<i2"), 0);
  uint8_t *m = NULL;
  size_t ml = 0;
  CHECK_EQ(b2_b2nd_meta_encode(&a, &m, &ml), 0);
  CHECK_EQ(ml, 3 + 1 + 16 * 9 + 2 * (1 + 16 * 5) + 1 + 5 + 3);
  CHECK(m && m[0] == 0x97 && m[1] == 0 && m[2] == 16 && m[3] == 0xa0 && m[4] == 0xd3);
  CHECK(m && m[ml - 9] == 0 && m[ml - 8] == 0xdb && memcmp(m + ml - 3, "<i2", 3) == 0);
  CHECK_EQ(b2_b2nd_parse(m, ml, 2, &r), 0);
  CHECK_EQ(r.ndim, 16);
  CHECK_EQ(r.nchunks, a.nchunks);
  CHECK(r.dtype && strcmp(r.dtype, "<i2") == 0);
  free(m);
  b2_b2nd_free(&r);
  b2_b2nd_free(&a);
  /* ndim 0: empty lists, one chunk of one item */
  CHECK_EQ(b2_b2nd_make(&a, 0, NULL, NULL, NULL, 8, "<f8"), 0);
  CHECK_EQ(a.nchunks, 1);
  CHECK_EQ(a.chunk_nbytes, 8);
  CHECK_EQ(b2_b2nd_meta_encode(&a, &m, &ml), 0);
  static const uint8_t want0[] = {0x97, 0, 0, 0x90, 0x90, 0x90, 0, 0xdb, 0, 0, 0, 3, '<', 'f', '8'};
  CHECK(ml == sizeof want0 && memcmp(m, want0, ml) == 0);
  free(m);
  b2_b2nd_free(&a);
  /* default dtypes, negative values in shapes are refused */
  int64_t s1 = 10;
  int32_t c1 = 4, b1 = 2;
  CHECK_EQ(b2_b2nd_make(&a, 1, &s1, &c1, &b1, 1, NULL), 0);
  CHECK(a.dtype && strcmp(a.dtype, "|u1") == 0);
  b2_b2nd_free(&a);
  CHECK_EQ(b2_b2nd_make(&a, 1, &s1, &c1, &b1, 12, NULL), 0);
  CHECK(a.dtype && strcmp(a.dtype, "|V12") == 0);
  b2_b2nd_free(&a);
  int64_t neg = -1;
  int32_t big = 5, zero = 0;
  CHECK_EQ(b2_b2nd_make(&a, 1, &neg, &c1, &b1, 1, NULL), B2_E_INVAL);
  CHECK_EQ(b2_b2nd_make(&a, 1, &s1, &c1, &big, 1, NULL), B2_E_FORMAT); /* block > chunk */
  CHECK_EQ(b2_b2nd_make(&a, 1, &s1, &zero, &zero, 1, NULL), B2_E_FORMAT);
  CHECK_EQ(b2_b2nd_make(&a, 17, s, c, b, 1, NULL), B2_E_INVAL);
  CHECK_EQ(b2_b2nd_make(&a, 1, &s1, &c1, &b1, 0, NULL), B2_E_INVAL);
  int32_t huge = INT32_MAX;
  CHECK_EQ(b2_b2nd_make(&a, 1, &s1, &huge, &huge, 2, NULL), B2_E_LIMIT);
  b2_b2nd_free(&a);
}

/* ---- default shapes ----------------------------------------------------------- */

static void shapes_of(int nd, const int64_t *s, int isz, int32_t *c, int32_t *b) {
  memset(c, 0, sizeof(int32_t) * B2_B2ND_MAXDIM);
  memset(b, 0, sizeof(int32_t) * B2_B2ND_MAXDIM);
  CHECK_EQ(b2_b2nd_choose_shapes(nd, s, isz, 1, c, b), 0);
}

static void test_choose_shapes(void) {
  int32_t c[B2_B2ND_MAXDIM], b[B2_B2ND_MAXDIM];
  /* 1000 x 777 float32: 65536 items a block -> 84 rows, 50 divides 1000 */
  int64_t s2[] = {1000, 777};
  shapes_of(2, s2, 4, c, b);
  CHECK(b[0] == 50 && b[1] == 777 && c[0] == 1000 && c[1] == 777);
  /* 1-D float64: 32768-item blocks, 16 blocks a chunk */
  int64_t s1[] = {10000000};
  shapes_of(1, s1, 8, c, b);
  CHECK(b[0] == 31250 && c[0] == 500000); /* divisors of 1e7 and of its 320 blocks */
  /* rows longer than a block: blocks cut the last dimension */
  int64_t s3[] = {3, 100, 1000003};
  shapes_of(3, s3, 1, c, b);
  CHECK(b[0] == 1 && b[1] == 1 && b[2] == 262144);
  CHECK(c[0] == 1 && c[1] == 4 && c[2] == 1000003); /* 8 blocks end the row, 4 rows */
  /* given chunks: blocks inside; given blocks: chunks as multiples */
  int64_t s4[] = {500, 600};
  int32_t gc[2] = {100, 100}, gb[2] = {0, 0};
  CHECK_EQ(b2_b2nd_choose_shapes(2, s4, 8, 1, gc, gb), 0);
  CHECK(gc[0] == 100 && gc[1] == 100 && gb[0] == 100 && gb[1] == 100);
  int32_t hc[2] = {0, 0}, hb[2] = {7, 9};
  CHECK_EQ(b2_b2nd_choose_shapes(2, s4, 8, 1, hc, hb), 0);
  CHECK(hb[0] == 7 && hb[1] == 9 && (hc[0] % 7 == 0 || hc[0] == 500) && (hc[1] % 9 == 0 || hc[1] == 600));
  /* a least side (ZFP's 4): chosen blocks widened to it where the array
   * (or a given chunk) is that long, given blocks kept */
  int64_t sz[] = {100, 100, 100, 2};
  int32_t zc[4] = {0}, zb[4] = {0};
  CHECK_EQ(b2_b2nd_choose_shapes(4, sz, 8, 4, zc, zb), 0);
  CHECK(zb[0] == 4 && zb[1] >= 4 && zb[2] == 100 && zb[3] == 2);
  CHECK(zc[0] % 4 == 0 && zc[1] % zb[1] == 0);
  int32_t yc[2] = {3, 50}, yb[2] = {0, 0};
  CHECK_EQ(b2_b2nd_choose_shapes(2, s4, 8, 4, yc, yb), 0);
  CHECK(yb[0] == 3 && yb[1] == 50);
  int32_t xc[2] = {0, 0}, xb[2] = {2, 2};
  CHECK_EQ(b2_b2nd_choose_shapes(2, s4, 8, 4, xc, xb), 0);
  CHECK(xb[0] == 2 && xb[1] == 2);
  /* empty arrays: 1 everywhere; ndim 0: nothing */
  int64_t se[] = {0, 10};
  shapes_of(2, se, 8, c, b);
  CHECK(c[0] == 1 && c[1] == 1 && b[0] == 1 && b[1] == 1);
  CHECK_EQ(b2_b2nd_choose_shapes(0, NULL, 8, 1, NULL, NULL), 0);
  /* errors: mixed zeros, negative */
  int32_t mc[2] = {5, 0}, mb[2] = {0, 0};
  CHECK_EQ(b2_b2nd_choose_shapes(2, s4, 8, 1, mc, mb), B2_E_INVAL);
  int64_t sn[] = {-1, 3};
  CHECK_EQ(b2_b2nd_choose_shapes(2, sn, 8, 1, gb, mb), B2_E_INVAL);
  /* properties over random shapes and item sizes */
  int bad = 0;
  for (int it = 0; it < 3000; it++) {
    int nd = (int)rnd_in(1, 6);
    int64_t s[B2_B2ND_MAXDIM];
    for (int d = 0; d < nd; d++) s[d] = rnd() % 4 ? rnd_in(1, 300) : rnd_in(1, 100000);
    int32_t isz = (int32_t)(rnd() % 8 ? rnd_in(1, 16) : rnd_in(1, 300000));
    double total = isz;
    for (int d = 0; d < nd; d++) total *= (double)s[d];
    if (total > 1e18) continue; /* not an array b2nd can describe */
    shapes_of(nd, s, isz, c, b);
    b2_b2nd a;
    if (b2_b2nd_make(&a, nd, s, c, b, isz, NULL) < 0) {
      if (bad < 3) fprintf(stderr, "  make: %s\n", b2_last_detail());
      bad++;
      continue;
    }
    int64_t bi = a.block_nbytes / isz, ci = 1;
    for (int d = 0; d < nd; d++) ci *= c[d];
    /* sizes within targets (a single item may exceed them) */
    int b0 = bad;
    bad += bi > 1 && a.block_nbytes > B2_B2ND_BLOCK_TARGET;
    bad += ci > bi && ci * isz > B2_B2ND_CHUNK_TARGET;
    int cut = 0; /* trailing dims whole up to the first cut one */
    for (int d = nd - 1; d >= 0; d--) {
      bad += c[d] < 1 || b[d] < 1 || b[d] > c[d] || c[d] > s[d];
      bad += c[d] % b[d] != 0 && c[d] != s[d]; /* whole blocks inside */
      bad += cut && b[d] != 1;
      cut |= b[d] != s[d];
    }
    if (bad > b0 && b0 < 3) {
      fprintf(stderr, "  isz %d:", isz);
      for (int d = 0; d < nd; d++) fprintf(stderr, " %lld/%d/%d", (long long)s[d], c[d], b[d]);
      fprintf(stderr, "\n");
    }
    b2_b2nd_free(&a);
  }
  CHECK_EQ(bad, 0);
}

/* ---- scatter ----------------------------------------------------------------- */

static int scatter_all(const b2_b2nd *a, const uint8_t *items, store *st) {
  int64_t z[B2_B2ND_MAXDIM] = {0};
  st->a = a;
  st->chunk = calloc((size_t)a->nchunks + 1, sizeof *st->chunk);
  for (int64_t k = 0; k < a->nchunks; k++) {
    st->chunk[k] = malloc((size_t)a->chunk_nbytes);
    memset(st->chunk[k], 0xee, (size_t)a->chunk_nbytes);
    int rc = b2_b2nd_scatter(a, k, z, a->shape, items, st->chunk[k]);
    if (rc < 0) return rc;
  }
  return 0;
}

static void test_scatter_roundtrip(void) {
  int bad = 0;
  for (int it = 0; it < 400; it++) {
    static const int32_t sizes[] = {1, 2, 3, 4, 8, 16};
    b2_b2nd a;
    if (random_geometry(&a, sizes[rnd() % 6], 40) < 0) {
      bad++;
      continue;
    }
    int64_t nb = b2_b2nd_nbytes(&a);
    uint8_t *items = random_items(&a), *back = malloc((size_t)nb + 1);
    store st;
    int rc = scatter_all(&a, items, &st);
    bad += rc < 0;
    if (rc == 0) {
      bad += b2_b2nd_read(&a, 0, (size_t)nb, back, store_reader, &st) != nb;
      bad += memcmp(back, items, (size_t)nb) != 0;
      /* every chunk: its items non-zero, its padding zero */
      for (int64_t k = 0; k < a.nchunks; k++)
        bad += nonzero_items(st.chunk[k], a.chunk_nbytes / a.itemsize, a.itemsize) !=
               items_in_chunk(&a, k);
      /* a sub-box holding one chunk gives the same chunk */
      int64_t k = (int64_t)(rnd() % (uint64_t)a.nchunks), rest = k;
      int64_t b0[B2_B2ND_MAXDIM], bn[B2_B2ND_MAXDIM];
      for (int d = a.ndim - 1; d >= 0; d--) {
        int64_t nc = (a.shape[d] + a.chunkshape[d] - 1) / a.chunkshape[d];
        int64_t o = rest % nc * a.chunkshape[d];
        rest /= nc;
        b0[d] = o > 0 ? o - (int64_t)(rnd() % 2) : 0; /* maybe one more row before */
        bn[d] = B2_MIN(o + a.chunkshape[d], a.shape[d]) - b0[d];
      }
      uint8_t *box = malloc((size_t)nb + 1), *one = malloc((size_t)a.chunk_nbytes);
      size_t pos = 0;
      int64_t idx[B2_B2ND_MAXDIM] = {0};
      for (;;) { /* copy the box out of the items in C order */
        int64_t off = 0, stride = 1;
        for (int d = a.ndim - 1; d >= 0; d--) {
          off += (b0[d] + idx[d]) * stride;
          stride *= a.shape[d];
        }
        memcpy(box + pos, items + off * a.itemsize, (size_t)a.itemsize);
        pos += (size_t)a.itemsize;
        int d = a.ndim - 1;
        while (d >= 0 && ++idx[d] == bn[d]) idx[d--] = 0;
        if (d < 0) break;
      }
      bad += b2_b2nd_scatter(&a, k, b0, bn, box, one) != 0;
      bad += memcmp(one, st.chunk[k], (size_t)a.chunk_nbytes) != 0;
      free(box);
      free(one);
    }
    if (bad) {
      fprintf(stderr, "  failed at iteration %d (ndim %d)\n", it, a.ndim);
      store_free(&st);
      free(items);
      free(back);
      b2_b2nd_free(&a);
      break;
    }
    store_free(&st);
    free(items);
    free(back);
    b2_b2nd_free(&a);
  }
  CHECK_EQ(bad, 0);
}

static void test_scatter_errors(void) {
  int64_t s[] = {10, 10}, z[] = {0, 0}, part[] = {5, 10}, off[] = {1, 0};
  int32_t c[] = {5, 5}, b[] = {5, 5};
  b2_b2nd a;
  CHECK_EQ(b2_b2nd_make(&a, 2, s, c, b, 1, NULL), 0);
  uint8_t src[100] = {0}, dst[25];
  CHECK_EQ(b2_b2nd_scatter(&a, 0, z, s, src, dst), 0);
  CHECK_EQ(b2_b2nd_scatter(&a, 3, z, s, src, dst), 0);
  CHECK_EQ(b2_b2nd_scatter(&a, 4, z, s, src, dst), B2_E_RANGE);
  CHECK_EQ(b2_b2nd_scatter(&a, -1, z, s, src, dst), B2_E_RANGE);
  CHECK_EQ(b2_b2nd_scatter(&a, 2, z, part, src, dst), B2_E_INVAL); /* box misses it */
  CHECK_EQ(b2_b2nd_scatter(&a, 0, off, s, src, dst), B2_E_INVAL);
  CHECK_EQ(b2_b2nd_scatter(&a, 0, NULL, s, src, dst), B2_E_INVAL);
  b2_b2nd_free(&a);
  int64_t e[] = {0, 4};
  int32_t one[] = {1, 1};
  CHECK_EQ(b2_b2nd_make(&a, 2, e, one, one, 1, NULL), 0);
  CHECK_EQ(b2_b2nd_scatter(&a, 0, z, e, src, dst), B2_E_RANGE);
  b2_b2nd_free(&a);
  /* ndim 0: the one item */
  CHECK_EQ(b2_b2nd_make(&a, 0, NULL, NULL, NULL, 4, "<i4"), 0);
  uint8_t v[4] = {1, 2, 3, 4}, o[4] = {0};
  CHECK_EQ(b2_b2nd_scatter(&a, 0, NULL, NULL, v, o), 0);
  CHECK_MEM(o, v, 4);
  CHECK_EQ(b2_b2nd_scatter(&a, 1, NULL, NULL, v, o), B2_E_RANGE);
  b2_b2nd_free(&a);
}

/* ---- streaming write ------------------------------------------------------------ */

typedef struct msrc {
  const uint8_t *items;
  uint64_t size, pos;
  int sequential;
  int64_t reads;
  int fail_at; /* fail the Nth read (1-based), 0 never */
} msrc;

static int mem_source(void *ctx, uint64_t off, size_t len, void *dst) {
  msrc *m = ctx;
  m->reads++;
  if (m->fail_at && m->reads == m->fail_at) return b2_fail(B2_E_IO, "injected read error");
  if (off + len > m->size) return b2_fail(B2_E_TRUNCATED, "past the end");
  if (m->sequential && off != m->pos) return b2_fail(B2_E_INVAL, "out of order");
  memcpy(dst, m->items + off, len);
  m->pos = off + len;
  return 0;
}

typedef struct msink {
  const b2_b2nd *a;
  uint8_t **chunk; /* decoded */
  int64_t next;
  int order_ok;
  int fail_at; /* fail chunk N, -1 never */
} msink;

static int mem_sink(void *ctx, int64_t chunk, const void *data, size_t len) {
  msink *k = ctx;
  if (chunk == k->fail_at) return b2_fail(B2_E_NOSPC, "injected sink error");
  k->order_ok &= chunk == k->next++;
  if (chunk < 0 || chunk >= k->a->nchunks) return B2_E_RANGE;
  k->chunk[chunk] = malloc((size_t)k->a->chunk_nbytes);
  int rc = b2_chunk_decode(data, len, k->chunk[chunk], (size_t)k->a->chunk_nbytes);
  return rc == k->a->chunk_nbytes ? 0 : B2_E_FORMAT;
}

/* Write a with opts, decode everything back, compare; returns failures. */
static int write_check(const b2_b2nd *a, const b2_b2nd_write_opts *o, const uint8_t *items,
                       int64_t *reads) {
  int64_t nb = b2_b2nd_nbytes(a);
  msrc m = {items, (uint64_t)nb, 0, o->sequential, 0, 0};
  msink k = {a, calloc((size_t)a->nchunks + 1, sizeof(uint8_t *)), 0, 1, -1};
  int bad = 0;
  int rc = b2_b2nd_write(a, o, mem_source, &m, mem_sink, &k);
  if (rc < 0) fprintf(stderr, "  write: %s\n", b2_last_detail());
  bad += rc != 0 || !k.order_ok || k.next != a->nchunks;
  if (rc == 0) {
    store st = {a, k.chunk};
    uint8_t *back = malloc((size_t)nb + 1);
    bad += b2_b2nd_read(a, 0, (size_t)nb, back, store_reader, &st) != nb;
    bad += memcmp(back, items, (size_t)nb) != 0;
    free(back);
  }
  for (int64_t c = 0; c < a->nchunks; c++) free(k.chunk[c]);
  free(k.chunk);
  if (reads) *reads = m.reads;
  return bad;
}

static void test_write_memory(void) {
  int bad = 0;
  for (int it = 0; it < 150 && !bad; it++) {
    static const int32_t sizes[] = {1, 2, 4, 8, 12, 300};
    b2_b2nd a;
    if (random_geometry(&a, sizes[rnd() % 6], 30) < 0) {
      bad++;
      break;
    }
    uint8_t *items = random_items(&a);
    if (it % 3 == 0) memset(items, 0, (size_t)b2_b2nd_nbytes(&a) / 2); /* zero chunks too */
    b2_b2nd_write_opts o;
    b2_b2nd_write_opts_default(&o);
    static const int codecs[] = {B2_CODEC_BLOSCLZ, B2_CODEC_LZ4, B2_CODEC_ZSTD, B2_CODEC_ZLIB};
    o.cparams.codec = codecs[it % 4];
    o.nthreads = (int)(it % 3) + 1;
    /* slab limits: everything, a row of chunks at most, one chunk's box */
    size_t row = (size_t)a.chunkshape[0] * (size_t)(b2_b2nd_nbytes(&a) / a.shape[0]);
    size_t limits[] = {0, row, 1};
    for (int l = 0; l < 3; l++) {
      o.slab_max = limits[l];
      int b = write_check(&a, &o, items, NULL);
      if (b) fprintf(stderr, "  iteration %d, slab limit %zu: %d failures\n", it, limits[l], b);
      bad += b;
    }
    o.sequential = 1; /* a pipe: one read per row of chunks */
    o.slab_max = 0;
    int64_t reads = 0;
    bad += write_check(&a, &o, items, &reads);
    int64_t rows = (a.shape[0] + a.chunkshape[0] - 1) / a.chunkshape[0];
    bad += reads != rows;
    free(items);
    b2_b2nd_free(&a);
  }
  CHECK_EQ(bad, 0);
}

static void test_write_special(void) {
  b2_b2nd a;
  b2_b2nd_write_opts o;
  b2_b2nd_write_opts_default(&o);
  /* ndim 0 */
  CHECK_EQ(b2_b2nd_make(&a, 0, NULL, NULL, NULL, 8, "<f8"), 0);
  uint8_t v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  CHECK_EQ(write_check(&a, &o, v, NULL), 0);
  b2_b2nd_free(&a);
  /* empty: no chunks, no reads */
  int64_t e[] = {4, 0};
  int32_t one[] = {1, 1};
  CHECK_EQ(b2_b2nd_make(&a, 2, e, one, one, 8, "<f8"), 0);
  int64_t reads = -1;
  CHECK_EQ(write_check(&a, &o, v, &reads), 0);
  CHECK_EQ(reads, 0);
  b2_b2nd_free(&a);
  /* a sequential source whose row of chunks exceeds the slab */
  int64_t s[] = {4, 1000};
  int32_t c[] = {1, 10}, b[] = {1, 10};
  CHECK_EQ(b2_b2nd_make(&a, 2, s, c, b, 1, NULL), 0);
  uint8_t *items = calloc(4000, 1);
  msrc m = {items, 4000, 0, 1, 0, 0};
  msink k = {&a, calloc(400, sizeof(uint8_t *)), 0, 1, -1};
  o.sequential = 1;
  o.slab_max = 500;
  CHECK_EQ(b2_b2nd_write(&a, &o, mem_source, &m, mem_sink, &k), B2_E_LIMIT);
  CHECK_EQ(m.reads, 0);
  /* read and sink errors stop the write and name the place */
  o.sequential = 0;
  for (int t = 1; t <= 2; t++) {
    o.nthreads = t;
    for (int i = 0; i < 400; i++) {
      free(k.chunk[i]);
      k.chunk[i] = NULL;
    }
    k.next = 0;
    m.reads = 0;
    m.fail_at = 3;
    m.sequential = 0;
    CHECK_EQ(b2_b2nd_write(&a, &o, mem_source, &m, mem_sink, &k), B2_E_IO);
    CHECK(strstr(b2_last_detail(), "injected read error") != NULL);
    m.fail_at = 0;
    k.fail_at = 7;
    k.next = 0;
    for (int i = 0; i < 400; i++) {
      free(k.chunk[i]);
      k.chunk[i] = NULL;
    }
    CHECK_EQ(b2_b2nd_write(&a, &o, mem_source, &m, mem_sink, &k), B2_E_NOSPC);
    CHECK(strstr(b2_last_detail(), "chunk 7") != NULL);
    CHECK_EQ(k.next, 7);
    k.fail_at = -1;
  }
  for (int i = 0; i < 400; i++) free(k.chunk[i]);
  free(k.chunk);
  free(items);
  b2_b2nd_free(&a);
}

/* ---- whole arrays through frames ------------------------------------------------ */

static int frame_sink(void *ctx, int64_t chunk, const void *data, size_t len) {
  return b2_frame_put_chunk(ctx, chunk, data, len);
}

static int frame_reader(void *ctx, int64_t chunk, size_t off, size_t len, void *dst) {
  int rc = b2_frame_decode_range(ctx, chunk, off, len, dst);
  return rc < 0 ? rc : 0;
}

static void rm_rf(const char *p) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", p);
  if (system(cmd) != 0) fprintf(stderr, "  could not remove %s\n", p);
}

static void test_write_frame(void) {
  char dir[] = "/tmp/b2nd_write_XXXXXX";
  if (!mkdtemp(dir)) T_SKIP("no temporary directory");
  struct {
    int nd;
    int64_t s[3];
    int32_t isz;
    const char *dtype;
    int layout;
  } cases[] = {
      {2, {300, 200}, 4, ">i4", B2_LAYOUT_CONTIGUOUS},
      {3, {17, 33, 65}, 8, "<f8", B2_LAYOUT_SPARSE},
      {1, {100001}, 2, "<i2", B2_LAYOUT_CONTIGUOUS},
      {2, {40, 7}, 300, "|V300", B2_LAYOUT_CONTIGUOUS}, /* chunks of typesize 1 */
      {2, {0, 9}, 8, "<f8", B2_LAYOUT_CONTIGUOUS},
      {0, {0}, 16, "<c16", B2_LAYOUT_CONTIGUOUS},
  };
  for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
    int32_t c[B2_B2ND_MAXDIM] = {0}, b[B2_B2ND_MAXDIM] = {0};
    b2_b2nd a;
    CHECK_EQ(b2_b2nd_choose_shapes(cases[ci].nd, cases[ci].s, cases[ci].isz, 1, c, b), 0);
    if (ci == 1) { /* odd shapes instead: padding inside chunks */
      int32_t c1[] = {5, 10, 30}, b1[] = {2, 3, 7};
      memcpy(c, c1, sizeof c1);
      memcpy(b, b1, sizeof b1);
    }
    CHECK_EQ(b2_b2nd_make(&a, cases[ci].nd, cases[ci].s, c, b, cases[ci].isz, cases[ci].dtype), 0);
    uint8_t *items = random_items(&a), *meta = NULL;
    size_t ml = 0;
    CHECK_EQ(b2_b2nd_meta_encode(&a, &meta, &ml), 0);
    char path[256];
    snprintf(path, sizeof path, "%s/a%zu.b2nd", dir, ci);
    b2_frame_params fp;
    b2_frame_params_default(&fp);
    fp.layout = cases[ci].layout;
    b2_b2nd_cparams(&a, &fp.cparams);
    fp.cparams.typesize = a.itemsize;
    fp.chunksize = (int32_t)a.chunk_nbytes;
    b2_frame_meta_init mi = {"b2nd", meta, ml};
    fp.nmeta = 1;
    fp.meta = &mi;
    b2_frame *f = NULL;
    CHECK_EQ(b2_frame_create(path, &fp, &f), 0);
    b2_b2nd_write_opts o;
    b2_b2nd_write_opts_default(&o);
    o.nthreads = 2;
    msrc m = {items, (uint64_t)b2_b2nd_nbytes(&a), 0, 0, 0, 0};
    if (f) {
      CHECK_EQ(b2_b2nd_write(&a, &o, mem_source, &m, frame_sink, f), 0);
      CHECK_EQ(b2_frame_commit(f), 0);
      b2_frame_close(f);
    }
    free(meta);
    /* reopen as a reader would */
    if (b2_frame_open(path, &f) == 0) {
      const b2_frame_info *in = b2_frame_get_info(f);
      const uint8_t *rm;
      size_t rl;
      b2_b2nd r;
      CHECK_EQ(in->typesize, a.itemsize);
      CHECK_EQ(b2_frame_check(f), 0);
      CHECK_EQ(b2_frame_meta_get(f, "b2nd", &rm, &rl), 0);
      CHECK_EQ(b2_b2nd_parse(rm, rl, in->typesize, &r), 0);
      CHECK_EQ(b2_b2nd_check(&r, in->nchunks, in->chunksize), 0);
      int64_t nb = b2_b2nd_nbytes(&r);
      CHECK_EQ(nb, b2_b2nd_nbytes(&a));
      uint8_t *back = malloc((size_t)nb + 1);
      CHECK_EQ(b2_b2nd_read(&r, 0, (size_t)nb, back, frame_reader, f), nb);
      CHECK_MEM(back, items, (size_t)nb);
      free(back);
      b2_b2nd_free(&r);
      b2_frame_close(f);
    } else {
      fprintf(stderr, "  case %zu: %s\n", ci, b2_last_detail());
      CHECK(0);
    }
    free(items);
    b2_b2nd_free(&a);
  }
  rm_rf(dir);
}

/* ---- dtype item sizes ----------------------------------------------------------------- */

static void test_descr_itemsize(void) {
  static const struct {
    const char *d;
    int64_t want;
  } cases[] = {
      {"<f8", 8},
      {"|u1", 1},
      {">i4", 4},
      {"<c16", 16},
      {"|b1", 1},
      {"<f2", 2},
      {"|S10", 10},
      {"<U3", 12},
      {"|V7", 7},
      {"<M8[ns]", 8},
      {"<m8[10us]", 8},
      {"<M8", 8},
      {"[('x', '<f4'), ('y', '<i2'), ('flag', '|u1'), ('pad', '|V1')]", 8},
      {"[('a', '<f8', (2, 3)), ('b', [('c', '|u1'), ('d', '>i2', 4)])]", 57},
      {"[(('Title', 'n'), '<i4'), (\"it's\", '|S3')]", 7},
      {"[('', '|V4'), ('q', '<u2',)]", 6},
      {"('<f8', (2, 3))", 48},
      {"[('s', '<f8', ())]", 8},
      {"O", B2_E_UNSUPPORTED},
      {"|O", B2_E_UNSUPPORTED},
      {"[('o', '|O')]", B2_E_UNSUPPORTED},
      {"<f3", B2_E_FORMAT},
      {"<i16", B2_E_FORMAT},
      {"|S0", B2_E_FORMAT},
      {"<x8", B2_E_FORMAT},
      {"<f8 ", B2_E_FORMAT},
      {"", B2_E_FORMAT},
      {"[", B2_E_FORMAT},
      {"[]", B2_E_FORMAT},
      {"[('x', '<f4')", B2_E_FORMAT},
      {"[('x', '<f4')] junk", B2_E_FORMAT},
      {"[('x' '<f4')]", B2_E_FORMAT},
      {"[('x', '<f4', (3,]", B2_E_FORMAT},
      {"<M8[ns", B2_E_FORMAT},
      {"|V99999999999", B2_E_LIMIT},
      {"[('a', '|V65536', (65536,))]", B2_E_LIMIT},
      {"[('a', '|V1073741824'), ('b', '|V1073741824')]", B2_E_LIMIT},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    int64_t got = b2_npy_descr_itemsize(cases[i].d);
    if (got != cases[i].want) {
      fprintf(stderr, "  %s: %lld, expected %lld (%s)\n", cases[i].d, (long long)got,
              (long long)cases[i].want, b2_last_detail());
      CHECK(0);
    }
  }
  /* deep nesting is refused, not a stack overflow */
  char deep[4096];
  size_t n = 0;
  for (int k = 0; k < 200; k++) n += (size_t)snprintf(deep + n, sizeof deep - n, "[('a', ");
  n += (size_t)snprintf(deep + n, sizeof deep - n, "'<f8'");
  for (int k = 0; k < 200; k++) n += (size_t)snprintf(deep + n, sizeof deep - n, ")]");
  CHECK_EQ(b2_npy_descr_itemsize(deep), B2_E_LIMIT);
  CHECK_EQ(b2_npy_descr_itemsize(NULL), B2_E_INVAL);
}

/* ---- editing stored chunks ----------------------------------------------- */

static int store_writer(void *ctx, int64_t chunk, size_t off, size_t len, const void *src) {
  store *s = ctx;
  if (chunk < 0 || chunk >= s->a->nchunks || off + len > (size_t)s->a->chunk_nbytes) return B2_E_RANGE;
  memcpy(s->chunk[chunk] + off, src, len);
  return 0;
}

/* b2_b2nd_update against a C-order shadow: random ranges of random
 * geometries, read back whole; padding stays zero. */
static void test_update_random(void) {
  int bad = 0, linear = 0;
  for (int it = 0; it < 300 && !bad; it++) {
    static const int32_t sizes[] = {1, 2, 3, 8};
    b2_b2nd a;
    if (random_geometry(&a, sizes[rnd() % 4], 30) < 0) {
      bad++;
      continue;
    }
    int64_t nb = b2_b2nd_nbytes(&a);
    uint8_t *shadow = random_items(&a), *got = malloc((size_t)nb + 1), *src = malloc((size_t)nb + 1);
    store st;
    if (scatter_all(&a, shadow, &st) < 0) bad++;
    for (int w = 0; w < 20 && !bad; w++) {
      int64_t off = rnd_in(0, nb - 1), len = rnd_in(1, nb - off);
      for (int64_t i = 0; i < len; i++) src[i] = (uint8_t)(rnd() | 1);
      if (b2_b2nd_update(&a, (uint64_t)off, (size_t)len, src, store_writer, &st) != len) bad++;
      memcpy(shadow + off, src, (size_t)len);
    }
    if (b2_b2nd_read(&a, 0, (size_t)nb, got, store_reader, &st) != nb || memcmp(got, shadow, (size_t)nb))
      bad++;
    for (int64_t k = 0; k < a.nchunks; k++)
      if (nonzero_items(st.chunk[k], a.chunk_nbytes / a.itemsize, a.itemsize) != items_in_chunk(&a, k))
        bad++;
    if (b2_b2nd_update(&a, (uint64_t)nb, 1, src, store_writer, &st) != B2_E_RANGE) bad++;
    if (b2_b2nd_is_linear(&a)) { /* the chunks in order are the C-order bytes */
      linear++;
      for (int64_t x = 0; x < nb; x += a.chunk_nbytes)
        if (memcmp(st.chunk[x / a.chunk_nbytes], shadow + x, (size_t)B2_MIN(a.chunk_nbytes, nb - x)))
          bad++;
    }
    if (bad) fprintf(stderr, "  iteration %d: ndim %d\n", it, a.ndim);
    store_free(&st);
    free(shadow);
    free(got);
    free(src);
    b2_b2nd_free(&a);
  }
  CHECK_EQ(bad, 0);
  CHECK(linear > 5);
}

/* The chunk holding item i (C order), by its coordinates. */
static int64_t item_chunk(const b2_b2nd *a, int64_t i) {
  int64_t k = 0, mul = 1;
  for (int d = a->ndim - 1; d >= 0; d--) {
    int64_t x = i % a->shape[d], nc = (a->shape[d] + a->chunkshape[d] - 1) / a->chunkshape[d];
    i /= a->shape[d];
    k += x / a->chunkshape[d] * mul;
    mul *= nc;
  }
  return k;
}

/* b2_b2nd_chunk_span against every item's chunk; b2_b2nd_zero_rows
 * against the chunks of the array cut to `from` rows. */
static void test_chunk_span_zero_rows(void) {
  int bad = 0;
  for (int it = 0; it < 200 && !bad; it++) {
    b2_b2nd a;
    if (random_geometry(&a, (int32_t)rnd_in(1, 4), 12) < 0) {
      bad++;
      continue;
    }
    int64_t *lo = malloc((size_t)a.nchunks * sizeof *lo), *hi = malloc((size_t)a.nchunks * sizeof *hi);
    int64_t *nb = calloc((size_t)a.nchunks, sizeof *nb);
    for (int64_t k = 0; k < a.nchunks; k++) lo[k] = INT64_MAX, hi[k] = -1;
    for (int64_t i = 0; i < a.nitems; i++) {
      int64_t k = item_chunk(&a, i);
      lo[k] = B2_MIN(lo[k], i * a.itemsize);
      hi[k] = B2_MAX(hi[k], (i + 1) * a.itemsize);
      nb[k] += a.itemsize;
    }
    for (int64_t k = 0; k < a.nchunks; k++) {
      int64_t l, h, held;
      if (b2_b2nd_chunk_span(&a, k, &l, &h, &held) != 0 || l != lo[k] || h != hi[k] || held != nb[k])
        bad++;
    }
    if (b2_b2nd_chunk_span(&a, a.nchunks, &lo[0], &hi[0], NULL) != B2_E_RANGE) bad++;
    free(nb);
    free(lo);
    free(hi);
    /* zero_rows */
    int64_t from = rnd_in(1, a.shape[0]);
    uint8_t *items = random_items(&a);
    store full, cut;
    b2_b2nd b;
    int64_t s2[B2_B2ND_MAXDIM];
    memcpy(s2, a.shape, sizeof s2);
    s2[0] = from;
    if (b2_b2nd_make(&b, a.ndim, s2, a.chunkshape, a.blockshape, a.itemsize, NULL) < 0 ||
        scatter_all(&a, items, &full) < 0 || scatter_all(&b, items, &cut) < 0) {
      bad++;
    } else {
      for (int64_t k = 0; k < b.nchunks; k++) {
        if (b2_b2nd_zero_rows(&a, k, from, full.chunk[k]) != 0 ||
            memcmp(full.chunk[k], cut.chunk[k], (size_t)a.chunk_nbytes))
          bad++;
      }
    }
    store_free(&full);
    store_free(&cut);
    b2_b2nd_free(&b);
    free(items);
    b2_b2nd_free(&a);
  }
  CHECK_EQ(bad, 0);
}

/* b2_b2nd_seek against every item's chunk: random chunks are holes; for
 * each start, the first item of each kind at or after it.  A small budget
 * stops the walk no later than the answer. */
static int test_hole(void *holes, int64_t chunk) { return ((const uint8_t *)holes)[chunk]; }

static void test_seek(void) {
  int bad = 0;
  for (int it = 0; it < 200 && !bad; it++) {
    b2_b2nd a;
    if (random_geometry(&a, (int32_t)rnd_in(1, 4), 12) < 0) {
      bad++;
      continue;
    }
    uint8_t *holes = malloc((size_t)a.nchunks), *item = malloc((size_t)a.nitems + 1);
    for (int64_t k = 0; k < a.nchunks; k++) holes[k] = (uint8_t)(rnd() % 3 == 0);
    for (int64_t i = 0; i < a.nitems; i++) item[i] = holes[item_chunk(&a, i)]; /* its chunk's */
    int64_t nb = b2_b2nd_nbytes(&a);
    for (int t = 0; t < 30 && !bad; t++) {
      int64_t off = rnd_in(0, nb - 1);
      for (int want = 0; want < 2; want++) {
        int64_t i = off / a.itemsize, exp;
        while (i < a.nitems && item[i] != want) i++;
        exp = i == off / a.itemsize ? off : i * a.itemsize;
        int cut = 1;
        int64_t got = b2_b2nd_seek(&a, off, want, test_hole, holes, INT64_MAX, &cut);
        if (got != exp || cut) bad++;
        int64_t part = b2_b2nd_seek(&a, off, want, test_hole, holes, 2, &cut);
        if (part > exp || part < off || (!cut && part != exp)) bad++;
        if (bad) fprintf(stderr, "  ndim %d, off %lld, want %d: %lld (expected %lld), budget 2: %lld\n",
                         a.ndim, (long long)off, want, (long long)got, (long long)exp, (long long)part);
      }
    }
    int cut;
    if (b2_b2nd_seek(&a, nb, 0, test_hole, holes, 10, &cut) != nb) bad++;
    free(holes);
    free(item);
    b2_b2nd_free(&a);
  }
  CHECK_EQ(bad, 0);
}

int main(void) {
  T_RUN(test_meta_encode_fixtures);
  T_RUN(test_meta_encode_forms);
  T_RUN(test_choose_shapes);
  T_RUN(test_scatter_roundtrip);
  T_RUN(test_scatter_errors);
  T_RUN(test_write_memory);
  T_RUN(test_write_special);
  T_RUN(test_write_frame);
  T_RUN(test_descr_itemsize);
  T_RUN(test_update_random);
  T_RUN(test_chunk_span_zero_rows);
  T_RUN(test_seek);
  T_END();
}
