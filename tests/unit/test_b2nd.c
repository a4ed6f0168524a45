/*
 * test_b2nd.c - b2nd geometry, C-order gathering, and the .npy header.
 *
 * Reads are checked against a fake chunk store built here item by item
 * from the layout rules (chunk grid, block grid inside the padded chunk,
 * items in C order inside a block), with each item holding its own C-order
 * index and padding 0xEE: a wrong mapping cannot pass.  The fake reader
 * also checks that each block is requested at most once per read, that a
 * request never crosses a block, and that every requested block holds an
 * item of the range.  Fixtures (via the frame layer) must hash to the
 * manifest's corder_sha256; .npy headers must equal NumPy's byte for byte.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "b2_b2nd.h"
#include "b2_error.h"
#include "b2_frame.h"
#include "b2nd/b2nd_int.h"
#include "common/util.h"
#include "sha256.h"
#include "t.h"

/* ---- helpers ------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) { return t_xorshift64(&rng_state); }

static void put_be(uint8_t *p, uint64_t v, int w) {
  for (int i = 0; i < w; i++) p[i] = (uint8_t)(v >> (8 * (w - 1 - i)));
}

/* A metalayer as the reference library writes it. */
static size_t make_meta(uint8_t *out, int ndim, const int64_t *shape, const int32_t *cs,
                        const int32_t *bs, const char *dtype) {
  size_t n = 0;
  out[n++] = 0x97;
  out[n++] = 0;
  out[n++] = (uint8_t)ndim;
  out[n++] = (uint8_t)(0x90 + ndim);
  for (int i = 0; i < ndim; i++) {
    out[n++] = 0xd3;
    put_be(out + n, (uint64_t)shape[i], 8);
    n += 8;
  }
  for (int k = 0; k < 2; k++) {
    const int32_t *v = k ? bs : cs;
    out[n++] = (uint8_t)(0x90 + ndim);
    for (int i = 0; i < ndim; i++) {
      out[n++] = 0xd2;
      put_be(out + n, (uint32_t)v[i], 4);
      n += 4;
    }
  }
  out[n++] = 0;
  out[n++] = 0xdb;
  size_t dl = strlen(dtype);
  put_be(out + n, dl, 4);
  n += 4;
  memcpy(out + n, dtype, dl);
  return n + dl;
}

/* ---- the fake chunk store ------------------------------------------------ */

typedef struct fake {
  b2_b2nd a;
  int isz;
  int64_t nitems, nchunks, chunk_items, block_items, bpc;
  uint8_t *store;
  int64_t *owner; /* C-order index held by each stored item slot, or -1 */
  uint8_t *count; /* requests per block during one read */
  int calls, bad, fail_at;
  int windowed; /* blocks may come in several requests */
  int64_t first, last;
} fake;

static uint8_t item_byte(int64_t i, int k) {
  return k < 8 ? (uint8_t)((uint64_t)i >> (8 * k)) : (uint8_t)(0xa5 ^ k);
}

static int fake_init(fake *f, int ndim, const int64_t *shape, const int32_t *cs,
                     const int32_t *bs, int isz) {
  memset(f, 0, sizeof *f);
  uint8_t meta[1024];
  size_t ml = make_meta(meta, ndim, shape, cs, bs, "|V1");
  int rc = b2_b2nd_parse(meta, ml, isz, &f->a);
  if (rc < 0) {
    fprintf(stderr, "  parse: %s\n", b2_last_detail());
    return rc;
  }
  f->isz = isz;
  /* the layout, computed here independently of the library */
  int64_t nitems = 1, nchunks = 1, chunk_items = 1, block_items = 1, bpc = 1;
  int64_t cgrid[B2_B2ND_MAXDIM], bgrid[B2_B2ND_MAXDIM];
  for (int d = 0; d < ndim; d++) {
    cgrid[d] = (shape[d] + cs[d] - 1) / cs[d];
    bgrid[d] = (cs[d] + bs[d] - 1) / bs[d];
    nitems *= shape[d];
    nchunks *= cgrid[d];
    chunk_items *= bgrid[d] * bs[d];
    block_items *= bs[d];
    bpc *= bgrid[d];
  }
  f->nitems = nitems;
  f->nchunks = nchunks;
  f->chunk_items = chunk_items;
  f->block_items = block_items;
  f->bpc = bpc;
  CHECK_EQ(f->a.nitems, nitems);
  CHECK_EQ(f->a.nchunks, nchunks);
  CHECK_EQ(f->a.chunk_nbytes, chunk_items * isz);
  CHECK_EQ(f->a.block_nbytes, block_items * isz);
  size_t slots = (size_t)(nchunks * chunk_items);
  f->store = malloc(slots * (size_t)isz + 1);
  f->owner = malloc(slots * sizeof(int64_t) + 1);
  f->count = malloc((size_t)(nchunks * bpc) + 1);
  memset(f->store, 0xee, slots * (size_t)isz);
  for (size_t s = 0; s < slots; s++) f->owner[s] = -1;
  for (int64_t i = 0; i < nitems; i++) {
    int64_t x[B2_B2ND_MAXDIM], r = i;
    for (int d = ndim - 1; d >= 0; d--) {
      x[d] = r % shape[d];
      r /= shape[d];
    }
    int64_t chunk = 0, blk = 0, inner = 0;
    for (int d = 0; d < ndim; d++) {
      int64_t j = x[d] / cs[d], l = x[d] % cs[d];
      chunk = chunk * cgrid[d] + j;
      blk = blk * bgrid[d] + l / bs[d];
      inner = inner * bs[d] + l % bs[d];
    }
    int64_t slot = chunk * chunk_items + blk * block_items + inner;
    f->owner[slot] = i;
    for (int k = 0; k < isz; k++) f->store[slot * isz + k] = item_byte(i, k);
  }
  return 0;
}

static void fake_free(fake *f) {
  b2_b2nd_free(&f->a);
  free(f->store);
  free(f->owner);
  free(f->count);
}

static int fake_reader(void *ctx, int64_t chunk, size_t off, size_t len, void *dst) {
  fake *f = ctx;
  f->calls++;
  if (f->fail_at && f->calls == f->fail_at) return b2_fail(B2_E_CODEC, "injected failure");
  size_t cnb = (size_t)(f->chunk_items * f->isz), bnb = (size_t)(f->block_items * f->isz);
  if (chunk < 0 || chunk >= f->nchunks || len == 0 || off > cnb || len > cnb - off) {
    f->bad |= 1;
    return b2_fail(B2_E_RANGE, "fake: bad request");
  }
  int64_t blk = (int64_t)(off / bnb);
  if ((off + len - 1) / bnb != (size_t)blk) f->bad |= 2;
  int64_t id = chunk * f->bpc + blk;
  if (++f->count[id] > 1 && !f->windowed) f->bad |= 4;
  int touched = 0;
  int64_t s0 = chunk * f->chunk_items + blk * f->block_items;
  for (int64_t s = s0; s < s0 + f->block_items && !touched; s++)
    touched = f->owner[s] >= f->first && f->owner[s] <= f->last;
  if (!touched) f->bad |= 8;
  memcpy(dst, f->store + (size_t)chunk * cnb + off, len);
  return (int)len;
}

/* Read [off, off+len) and compare with the C-order bytes. */
static int check_read(fake *f, uint64_t off, size_t len) {
  uint64_t nbytes = (uint64_t)(f->nitems * f->isz);
  size_t n = off >= nbytes ? 0 : (size_t)B2_MIN((uint64_t)len, nbytes - off);
  uint8_t *buf = malloc(len + 16);
  memset(buf, 0x5a, len + 16);
  memset(f->count, 0, (size_t)(f->nchunks * f->bpc) + 1);
  f->calls = 0;
  f->bad = 0;
  f->first = (int64_t)(off / (uint64_t)f->isz);
  f->last = n ? (int64_t)((off + n - 1) / (uint64_t)f->isz) : -1;
  int rc = b2_b2nd_read(&f->a, off, len, buf, fake_reader, f);
  int ok = rc == (int)n && f->bad == 0;
  for (size_t b = 0; ok && b < n; b++) {
    uint64_t pos = off + b;
    uint8_t want = item_byte((int64_t)(pos / (uint64_t)f->isz), (int)(pos % (uint64_t)f->isz));
    if (buf[b] != want) {
      fprintf(stderr, "  byte %zu of read(%llu, %zu): 0x%02x, want 0x%02x\n", b,
              (unsigned long long)off, len, buf[b], want);
      ok = 0;
    }
  }
  for (size_t b = n; ok && b < len + 16; b++)
    if (buf[b] != 0x5a) {
      fprintf(stderr, "  read(%llu, %zu) wrote past its %zu bytes\n", (unsigned long long)off, len, n);
      ok = 0;
    }
  if (!ok && (rc != (int)n || f->bad))
    fprintf(stderr, "  read(%llu, %zu): rc %d (want %zu), reader flags %d: %s\n",
            (unsigned long long)off, len, rc, n, f->bad, b2_last_detail());
  free(buf);
  return ok;
}

/* Full read (every touched block once, none missing), sweeps and random
 * reads over one geometry. */
static void exercise(int ndim, const int64_t *shape, const int32_t *cs, const int32_t *bs,
                     int isz, int nrandom) {
  fake f;
  int rc = fake_init(&f, ndim, shape, cs, bs, isz);
  CHECK_EQ(rc, 0);
  if (rc < 0) return;
  f.windowed = b2_b2nd_window < (size_t)f.block_items * (size_t)isz;
  uint64_t nbytes = (uint64_t)(f.nitems * isz);
  CHECK(check_read(&f, 0, (size_t)nbytes));
  int64_t nonempty = 0;
  for (int64_t b = 0; b < f.nchunks * f.bpc; b++) {
    int any = 0;
    for (int64_t s = b * f.block_items; s < (b + 1) * f.block_items && !any; s++)
      any = f.owner[s] >= 0;
    nonempty += any;
  }
  if (!f.windowed) CHECK_EQ(f.calls, nonempty);
  /* a row of the last dimension, odd lengths, single items */
  size_t row = (size_t)(ndim ? shape[ndim - 1] : 1) * (size_t)isz;
  size_t lens[] = {1, (size_t)isz, (size_t)isz + 1, row, row + 3, 2 * row - 1, row * 5 + 7};
  int fails = 0;
  for (size_t li = 0; li < sizeof lens / sizeof *lens && fails < 3; li++) {
    uint64_t step = B2_MAX((uint64_t)1, nbytes / 97);
    for (uint64_t off = 0; off < nbytes && fails < 3; off += step) fails += !check_read(&f, off, lens[li]);
  }
  for (int i = 0; i < nrandom && fails < 3; i++) {
    uint64_t off = rnd() % (nbytes + 2);
    size_t len = (size_t)(rnd() % (rnd() % 4 ? 4 * row + 2 : nbytes + 8));
    fails += !check_read(&f, off, len);
  }
  CHECK_EQ(fails, 0);
  /* tail: past the end, at the end, zero length */
  CHECK(check_read(&f, nbytes - 1, 100));
  CHECK(check_read(&f, nbytes, 10));
  CHECK(check_read(&f, nbytes + 1000, 10));
  CHECK(check_read(&f, 0, 0));
  fake_free(&f);
}

/* ---- read tests ------------------------------------------------------------ */

static void test_read_1d(void) {
  int64_t s[] = {1000};
  int32_t c[] = {300}, b[] = {70};
  exercise(1, s, c, b, 8, 300);
  int64_t s2[] = {777};
  int32_t c2[] = {100}, b2[] = {33};
  exercise(1, s2, c2, b2, 3, 300);
  int64_t s3[] = {5};
  int32_t c3[] = {7}, b3[] = {2};
  exercise(1, s3, c3, b3, 2, 50);
}

static void test_read_2d(void) {
  int64_t s[] = {37, 53};
  int32_t c[] = {10, 20}, b[] = {4, 7};
  exercise(2, s, c, b, 2, 400);
  /* last dimension never split: folds into 1-D */
  int64_t s2[] = {13, 11};
  int32_t c2[] = {5, 11}, b2[] = {2, 11};
  exercise(2, s2, c2, b2, 1, 300);
  /* chunk spans the row, blocks do not */
  int64_t s3[] = {20, 6};
  int32_t c3[] = {8, 6}, b3[] = {3, 3};
  exercise(2, s3, c3, b3, 4, 300);
  /* block spans the row, the chunk is wider (padded) */
  int64_t s4[] = {20, 5};
  int32_t c4[] = {8, 8}, b4[] = {3, 5};
  exercise(2, s4, c4, b4, 2, 300);
  /* block wider than the array's rows (padded past the shape) */
  int64_t s6[] = {20, 5};
  int32_t c6[] = {8, 8}, b6[] = {3, 6};
  exercise(2, s6, c6, b6, 2, 300);
  /* like the u8 fixture */
  int64_t s5[] = {400, 3};
  int32_t c5[] = {110, 3}, b5[] = {57, 3};
  exercise(2, s5, c5, b5, 3, 200);
}

static void test_read_3d(void) {
  int64_t s[] = {9, 10, 11};
  int32_t c[] = {4, 5, 6}, b[] = {3, 2, 4};
  exercise(3, s, c, b, 4, 400);
  int64_t s2[] = {1, 1, 50};
  int32_t c2[] = {1, 1, 20}, b2[] = {1, 1, 7};
  exercise(3, s2, c2, b2, 2, 200);
  int64_t s3[] = {5, 6, 7};
  int32_t c3[] = {5, 6, 7}, b3[] = {5, 6, 7};
  exercise(3, s3, c3, b3, 2, 200);
}

static void test_read_4d_5d(void) {
  int64_t s[] = {6, 7, 8, 9};
  int32_t c[] = {4, 4, 4, 4}, b[] = {2, 2, 2, 2};
  exercise(4, s, c, b, 8, 400);
  int64_t s2[] = {3, 4, 2, 5, 3};
  int32_t c2[] = {2, 3, 2, 4, 2}, b2[] = {1, 2, 1, 3, 2};
  exercise(5, s2, c2, b2, 2, 300);
}

/* Several threads reading one array at once (per-thread scratch). */
static int plain_reader(void *ctx, int64_t chunk, size_t off, size_t len, void *dst) {
  const fake *f = ctx;
  memcpy(dst, f->store + (size_t)chunk * (size_t)(f->chunk_items * f->isz) + off, len);
  return 0;
}

typedef struct tjob {
  fake *f;
  uint64_t seed;
  int bad;
} tjob;

static void *reader_thread(void *arg) {
  tjob *t = arg;
  fake *f = t->f;
  uint64_t nbytes = (uint64_t)(f->nitems * f->isz);
  uint8_t *buf = malloc(8192);
  for (int it = 0; it < 300; it++) {
    t->seed = t->seed * 6364136223846793005ull + 1442695040888963407ull;
    uint64_t off = (t->seed >> 20) % nbytes;
    size_t len = 1 + (size_t)((t->seed >> 8) % 8192);
    int rc = b2_b2nd_read(&f->a, off, len, buf, plain_reader, f);
    size_t n = (size_t)B2_MIN((uint64_t)len, nbytes - off);
    if (rc != (int)n) t->bad++;
    for (size_t b = 0; b < n && rc == (int)n; b++)
      if (buf[b] != item_byte((int64_t)((off + b) / (uint64_t)f->isz), (int)((off + b) % (uint64_t)f->isz))) {
        t->bad++;
        break;
      }
  }
  free(buf);
  return NULL;
}

static void test_read_threads(void) {
  fake f;
  int64_t s[] = {60, 70, 9};
  int32_t c[] = {16, 32, 9}, b[] = {5, 8, 3};
  CHECK_EQ(fake_init(&f, 3, s, c, b, 4), 0);
  pthread_t th[4];
  tjob jobs[4];
  for (int i = 0; i < 4; i++) {
    jobs[i].f = &f;
    jobs[i].seed = 1000 + (uint64_t)i;
    jobs[i].bad = 0;
    CHECK_EQ(pthread_create(&th[i], NULL, reader_thread, &jobs[i]), 0);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    CHECK_EQ(jobs[i].bad, 0);
  }
  fake_free(&f);
}

/* Blocks larger than the scratch window come in pieces, still exact. */
static void test_read_windowed(void) {
  size_t saved = b2_b2nd_window;
  size_t wins[] = {1, 5, 64};
  for (size_t w = 0; w < sizeof wins / sizeof *wins; w++) {
    b2_b2nd_window = wins[w];
    int64_t s[] = {37, 53};
    int32_t c[] = {10, 20}, b[] = {4, 7};
    exercise(2, s, c, b, 2, 100);
    int64_t s3[] = {9, 10, 11};
    int32_t c3[] = {4, 5, 6}, b3[] = {3, 2, 4};
    exercise(3, s3, c3, b3, 4, 100);
  }
  b2_b2nd_window = saved;
}

static void test_read_scalar_and_empty(void) {
  exercise(0, NULL, NULL, NULL, 8, 20);
  fake f;
  int64_t s[] = {0, 10};
  int32_t c[] = {5, 10}, b[] = {5, 5};
  CHECK_EQ(fake_init(&f, 2, s, c, b, 8), 0);
  CHECK_EQ(b2_b2nd_nbytes(&f.a), 0);
  CHECK_EQ(f.a.nchunks, 0);
  CHECK(check_read(&f, 0, 100));
  CHECK_EQ(f.calls, 0);
  fake_free(&f);
}

static void test_read_errors(void) {
  fake f;
  int64_t s[] = {37, 53};
  int32_t c[] = {10, 20}, b[] = {4, 7};
  CHECK_EQ(fake_init(&f, 2, s, c, b, 2), 0);
  uint8_t buf[4096];
  memset(f.count, 0, (size_t)(f.nchunks * f.bpc));
  f.first = 0;
  f.last = f.nitems;
  f.fail_at = 3;
  CHECK_EQ(b2_b2nd_read(&f.a, 0, sizeof buf, buf, fake_reader, &f), B2_E_CODEC);
  CHECK_EQ(f.calls, 3);
  f.fail_at = 0;
  CHECK_EQ(b2_b2nd_read(&f.a, 0, (size_t)INT32_MAX + 1, buf, fake_reader, &f), B2_E_INVAL);
  CHECK_EQ(b2_b2nd_read(&f.a, 0, 10, NULL, fake_reader, &f), B2_E_INVAL);
  fake_free(&f);
}

/* Sequential 1 MiB reads of a large 2-D array through a reader that only
 * fills bytes: measures the gather itself.  Prints the rate. */
static int fill_reader(void *ctx, int64_t chunk, size_t off, size_t len, void *dst) {
  (void)chunk;
  (void)off;
  memset(dst, 1, len);
  *(int64_t *)ctx += 1;
  return 0;
}

static void test_read_speed(void) {
  uint8_t meta[512];
  int64_t s[] = {4096, 2048};
  int32_t c[] = {512, 512}, b[] = {64, 128};
  b2_b2nd a;
  CHECK_EQ(b2_b2nd_parse(meta, make_meta(meta, 2, s, c, b, "<f8"), 8, &a), 0);
  size_t step = 1 << 20;
  uint8_t *buf = malloc(step);
  int64_t calls = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int64_t nb = b2_b2nd_nbytes(&a);
  for (int64_t off = 0; off < nb; off += (int64_t)step)
    CHECK_EQ(b2_b2nd_read(&a, (uint64_t)off, step, buf, fill_reader, &calls), (int)step);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double sec = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
  fprintf(stderr, "  %lld MiB in %.3f s (%.0f MiB/s), %lld block requests\n",
          (long long)(nb >> 20), sec, (double)(nb >> 20) / sec, (long long)calls);
  /* each 1 MiB is 64 rows of 2048 items: 16 blocks across, each row band
   * inside one block row, so 16 requests per read */
  CHECK_EQ(calls, (nb / (int64_t)step) * 16);
  free(buf);
  b2_b2nd_free(&a);
}

/* ---- metalayer parsing ------------------------------------------------------- */

static void test_parse_fields(void) {
  uint8_t m[512];
  int64_t s[] = {400, 3};
  int32_t c[] = {110, 3}, b[] = {57, 3};
  size_t n = make_meta(m, 2, s, c, b, "|u1");
  b2_b2nd a;
  CHECK_EQ(b2_b2nd_parse(m, n, 1, &a), 0);
  CHECK_EQ(a.ndim, 2);
  CHECK_EQ(a.shape[0], 400);
  CHECK_EQ(a.shape[1], 3);
  CHECK_EQ(a.chunkshape[0], 110);
  CHECK_EQ(a.blockshape[0], 57);
  CHECK_EQ(a.nitems, 1200);
  CHECK_EQ(a.nchunks, 4);
  CHECK_EQ(a.chunk_nbytes, 342); /* 114 x 3: 110 rounded up to 2 blocks */
  CHECK_EQ(a.block_nbytes, 171);
  CHECK_EQ(a.dtype_format, 0);
  CHECK(strcmp(a.dtype, "|u1") == 0);
  CHECK_EQ(b2_b2nd_nbytes(&a), 1200);
  CHECK_EQ(b2_b2nd_check(&a, 4, 342), 0);
  CHECK_EQ(b2_b2nd_check(&a, 4, 0), 0);
  CHECK_EQ(b2_b2nd_check(&a, 5, 342), B2_E_FORMAT);
  CHECK_EQ(b2_b2nd_check(&a, 4, 330), B2_E_FORMAT);
  b2_b2nd_free(&a);
  b2_b2nd_free(&a); /* idempotent */

  /* every proper prefix fails cleanly */
  for (size_t k = 0; k < n; k++) {
    int rc = b2_b2nd_parse(m, k, 1, &a);
    if (rc >= 0) {
      fprintf(stderr, "  prefix %zu parsed\n", k);
      b2_b2nd_free(&a);
    }
    CHECK(rc < 0);
  }
  /* structured dtype, itemsize 8 */
  int64_t s2[] = {2000, 3};
  int32_t c2[] = {700, 3}, b2[] = {100, 3};
  const char *st = "[('x', '<f4'), ('y', '<i2'), ('flag', '|u1'), ('pad', '|V1')]";
  n = make_meta(m, 2, s2, c2, b2, st);
  CHECK_EQ(b2_b2nd_parse(m, n, 8, &a), 0);
  CHECK(strcmp(a.dtype, st) == 0);
  CHECK_EQ(a.nchunks, 3);
  CHECK_EQ(a.chunk_nbytes, 700 * 3 * 8);
  b2_b2nd_free(&a);
}

static void test_parse_variants(void) {
  uint8_t m[1024];
  b2_b2nd a;
  /* 16 dimensions: the reference writes the array marker as 0xa0 */
  int64_t s[16];
  int32_t c[16], b[16];
  for (int i = 0; i < 16; i++) {
    s[i] = i % 3 ? 2 : 1;
    c[i] = 1;
    b[i] = 1;
  }
  size_t n = make_meta(m, 16, s, c, b, "<i2");
  CHECK_EQ(m[3], 0xa0);
  CHECK_EQ(b2_b2nd_parse(m, n, 2, &a), 0);
  CHECK_EQ(a.ndim, 16);
  CHECK_EQ(a.nitems, 1 << 10);
  b2_b2nd_free(&a);
  /* 0-d (scalar) */
  n = make_meta(m, 0, NULL, NULL, NULL, "<f8");
  CHECK_EQ(b2_b2nd_parse(m, n, 8, &a), 0);
  CHECK_EQ(a.nitems, 1);
  CHECK_EQ(a.nchunks, 1);
  CHECK_EQ(a.chunk_nbytes, 8);
  b2_b2nd_free(&a);
  /* no dtype entries (5-element array): a raw-bytes dtype */
  int64_t s1[] = {10};
  int32_t c1[] = {4}, b1[] = {2};
  n = make_meta(m, 1, s1, c1, b1, "");
  m[0] = 0x95;
  n -= 6;
  CHECK_EQ(b2_b2nd_parse(m, n, 8, &a), 0);
  CHECK(a.dtype && strcmp(a.dtype, "|V8") == 0);
  b2_b2nd_free(&a);
  CHECK_EQ(b2_b2nd_parse(m, n, 1, &a), 0);
  CHECK(a.dtype && strcmp(a.dtype, "|u1") == 0);
  b2_b2nd_free(&a);
  /* compact integer encodings are accepted too */
  const uint8_t compact[] = {0x97, 0, 1, 0x91, 0x0a, 0x91, 0x04, 0x91, 0x02, 0, 0xa3, '<', 'i', '2'};
  CHECK_EQ(b2_b2nd_parse(compact, sizeof compact, 2, &a), 0);
  CHECK_EQ(a.shape[0], 10);
  CHECK(strcmp(a.dtype, "<i2") == 0);
  b2_b2nd_free(&a);
  /* empty dimension with chunkshape 0 (reference empty arrays) */
  int64_t s0[] = {0, 5};
  int32_t c0[] = {0, 5}, b0[] = {0, 5};
  n = make_meta(m, 2, s0, c0, b0, "<f4");
  CHECK_EQ(b2_b2nd_parse(m, n, 4, &a), 0);
  CHECK_EQ(a.nitems, 0);
  CHECK_EQ(a.nchunks, 0);
  CHECK_EQ(b2_b2nd_check(&a, 0, 0), 0);
  b2_b2nd_free(&a);
}

static int parse_rc(const uint8_t *m, size_t n, int isz) {
  b2_b2nd a;
  int rc = b2_b2nd_parse(m, n, isz, &a);
  if (rc >= 0) b2_b2nd_free(&a);
  return rc;
}

static void test_parse_errors(void) {
  uint8_t m[1024];
  int64_t s[] = {1000, 777};
  int32_t c[] = {256, 200}, b[] = {64, 50};
  size_t n = make_meta(m, 2, s, c, b, "<f4");
  CHECK_EQ(parse_rc(m, n, 4), 0);
  CHECK_EQ(parse_rc(m, n, 0), B2_E_FORMAT);
  /* ndim says 5, arrays hold 2 */
  m[2] = 5;
  CHECK_EQ(parse_rc(m, n, 4), B2_E_FORMAT);
  CHECK(strstr(b2_last_detail(), "shape") != NULL);
  m[2] = 17;
  CHECK_EQ(parse_rc(m, n, 4), B2_E_FORMAT);
  CHECK(strstr(b2_last_detail(), "ndim") != NULL);
  m[2] = 2;
  /* negative shape */
  int64_t sn[] = {-1000, 777};
  n = make_meta(m, 2, sn, c, b, "<f4");
  CHECK_EQ(parse_rc(m, n, 4), B2_E_FORMAT);
  CHECK(strstr(b2_last_detail(), "shape[0]") != NULL);
  /* overflow of the item count / byte count */
  int64_t so[] = {(int64_t)1 << 62 | 1, 777};
  n = make_meta(m, 2, so, c, b, "<f4");
  CHECK_EQ(parse_rc(m, n, 4), B2_E_FORMAT);
  int64_t so2[] = {(int64_t)1 << 61, 2};
  n = make_meta(m, 2, so2, c, b, "<f4");
  CHECK_EQ(parse_rc(m, n, 4), B2_E_FORMAT); /* items fit, bytes do not */
  /* block larger than chunk, zero chunk with data, huge chunk */
  int32_t bb[] = {300, 50};
  n = make_meta(m, 2, s, c, bb, "<f4");
  CHECK_EQ(parse_rc(m, n, 4), B2_E_FORMAT);
  CHECK(strstr(b2_last_detail(), "blockshape[0]") != NULL);
  int32_t cz[] = {0, 200}, bz[] = {0, 50};
  n = make_meta(m, 2, s, cz, bz, "<f4");
  CHECK_EQ(parse_rc(m, n, 4), B2_E_FORMAT);
  int32_t neg[] = {-5, 200};
  n = make_meta(m, 2, s, neg, b, "<f4");
  CHECK_EQ(parse_rc(m, n, 4), B2_E_FORMAT);
  int64_t sh[] = {100000, 100000};
  int32_t ch[] = {65536, 65536}, bh[] = {1, 1};
  n = make_meta(m, 2, sh, ch, bh, "<f4");
  CHECK_EQ(parse_rc(m, n, 4), B2_E_LIMIT);
  int32_t ch2[] = {32768, 32768}, bh2[] = {32768, 32768};
  n = make_meta(m, 2, sh, ch2, bh2, "<f4");
  CHECK_EQ(parse_rc(m, n, 4), B2_E_LIMIT); /* 2^30 items fit int32, 4 GiB does not */
  /* dtype with a NUL; wrong outer array; dtype not a string */
  n = make_meta(m, 2, s, c, b, "<f4");
  m[n - 2] = 0;
  CHECK_EQ(parse_rc(m, n, 4), B2_E_FORMAT);
  n = make_meta(m, 2, s, c, b, "<f4");
  m[0] = 0x96;
  CHECK_EQ(parse_rc(m, n, 4), B2_E_FORMAT);
  n = make_meta(m, 2, s, c, b, "<f4");
  m[n - 8] = 0xc0;
  CHECK_EQ(parse_rc(m, n, 4), B2_E_FORMAT);
  /* random damage never crashes and never yields an inconsistent array */
  uint8_t good[1024];
  size_t gn = make_meta(good, 3, (int64_t[]){50, 60, 70}, (int32_t[]){20, 25, 30},
                        (int32_t[]){5, 10, 15}, "<i2");
  for (int it = 0; it < 20000; it++) {
    memcpy(m, good, gn);
    int flips = 1 + (int)(rnd() % 4);
    for (int k = 0; k < flips; k++) m[rnd() % gn] ^= (uint8_t)(1u << (rnd() % 8));
    size_t len = rnd() % 8 ? gn : rnd() % (gn + 1);
    b2_b2nd a;
    if (b2_b2nd_parse(m, len, 2, &a) == 0) {
      CHECK(a.ndim >= 0 && a.ndim <= 16);
      CHECK(a.nitems >= 0 && a.chunk_nbytes >= 0 && a.chunk_nbytes <= INT32_MAX);
      CHECK(a.dtype != NULL);
      b2_b2nd_free(&a);
    }
  }
}

/* ---- .npy --------------------------------------------------------------------- */

static const char *python(void) {
  const char *py = getenv("PY");
  return py && *py ? py : "/usr/bin/python3";
}

static int have_numpy(void) {
  static int have = -1;
  if (have < 0) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s -c 'import numpy' >/dev/null 2>&1", python());
    have = access(python(), X_OK) == 0 && system(cmd) == 0;
  }
  return have;
}

/* Run python with env NPY_DT/NPY_SHAPE/NPY_PATH set; read its stdout. */
static size_t run_py(const char *code, const char *dt, const char *shape, const char *path,
                     uint8_t *out, size_t cap) {
  char tmp[] = "/tmp/b2nd_py_XXXXXX";
  int fd = mkstemp(tmp);
  if (fd < 0) return 0;
  FILE *fp = fdopen(fd, "w");
  fputs(code, fp);
  fclose(fp);
  setenv("NPY_DT", dt, 1);
  setenv("NPY_SHAPE", shape, 1);
  setenv("NPY_PATH", path ? path : "", 1);
  char cmd[512];
  snprintf(cmd, sizeof cmd, "%s %s 2>/dev/null", python(), tmp);
  FILE *p = popen(cmd, "r");
  size_t n = 0;
  if (p) {
    n = fread(out, 1, cap, p);
    pclose(p);
  }
  unlink(tmp);
  return n;
}

static const char *PY_HEADER =
    "import io, os, sys, warnings\n"
    "import numpy as np\n"
    "from numpy.lib import format as F\n"
    "warnings.simplefilter('ignore')\n"
    "dt = os.environ['NPY_DT']\n"
    "dt = eval(dt) if dt[0] in '[(' else dt\n"
    "sh = tuple(int(x) for x in os.environ['NPY_SHAPE'].split('x') if x)\n"
    "b = io.BytesIO()\n"
    "F._write_array_header(b, {'descr': F.dtype_to_descr(np.dtype(dt)),\n"
    "                          'fortran_order': False, 'shape': sh})\n"
    "sys.stdout.buffer.write(b.getvalue())\n";

static const char *PY_LOAD =
    "import os, sys, warnings\n"
    "import numpy as np\n"
    "warnings.simplefilter('ignore')\n"
    "dt = os.environ['NPY_DT']\n"
    "dt = np.dtype(eval(dt) if dt[0] in '[(' else dt)\n"
    "sh = tuple(int(x) for x in os.environ['NPY_SHAPE'].split('x') if x)\n"
    "p = os.environ['NPY_PATH']\n"
    "a = np.load(p, max_header_size=10**7)\n"
    "raw = open(p, 'rb').read()\n"
    "ok = a.shape == sh and a.dtype == dt and raw.endswith(a.tobytes()) and\\\n"
    "     len(raw) - a.nbytes >= 0\n"
    "sys.stdout.write('OK' if ok else 'BAD %r %r' % (a.shape, a.dtype))\n";

static int make_array(b2_b2nd *a, const char *dt, const char *shape, int isz) {
  int64_t s[B2_B2ND_MAXDIM];
  int32_t c[B2_B2ND_MAXDIM], b[B2_B2ND_MAXDIM];
  int nd = 0;
  for (const char *p = shape; *p && nd < B2_B2ND_MAXDIM;) {
    s[nd] = strtoll(p, (char **)&p, 10);
    c[nd] = s[nd] ? (int32_t)B2_MIN(s[nd], 7) : 1;
    b[nd] = c[nd];
    nd++;
    if (*p == 'x') p++;
  }
  size_t ml = strlen(dt) + 64 + 32 * (size_t)nd;
  uint8_t *m = malloc(ml);
  size_t n = make_meta(m, nd, s, c, b, dt);
  int rc = b2_b2nd_parse(m, n, isz, a);
  free(m);
  return rc;
}

static void test_npy_header(void) {
  struct {
    const char *dt, *shape;
    int isz;
  } cases[] = {
      {"<f8", "100000", 8},
      {"|u1", "400x3", 1},
      {"<c16", "", 16},
      {">i4", "300x200", 4},
      {"<f4", "0x10", 4},
      {"<i2", "50x60x70", 2},
      {"<f8", "6x7x8x9", 8},
      {"|b1", "1x1x1x1x1x1x1x1x1x1x1x1x1x1x1x1", 1},
      {"<U3", "5", 12},
      {"<M8[ns]", "4x2", 8},
      {"[('x', '<f4'), ('y', '<i2'), ('flag', '|u1'), ('pad', '|V1')]", "2000x3", 8},
      {"[('a', '<f8', (2,)), ('b', [('c', '<i4')])]", "10", 20},
      {"[('\xc3\xa9t\xc3\xa9', '<f4')]", "3", 4},    /* Latin-1 in format 1.0 */
      {"[('\xce\xbb', '<f4')]", "3", 4},                 /* needs format 3.0 */
      {"<f8", "1234567890123", 8},
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    b2_b2nd a;
    int rc = make_array(&a, cases[k].dt, cases[k].shape, cases[k].isz);
    CHECK_EQ(rc, 0);
    if (rc < 0) continue;
    int n = b2_npy_header(&a, NULL, 0);
    CHECK(n > 0 && n % 64 == 0);
    char *h = malloc((size_t)n + 1);
    CHECK_EQ(b2_npy_header(&a, h, (size_t)n - 1), n); /* too small: nothing written */
    CHECK_EQ(b2_npy_header(&a, h, (size_t)n), n);
    CHECK(h[n - 1] == '\n');
    /* our parser reads it back */
    size_t hl = 0;
    char descr[512];
    int fortran = -1, nd = -1;
    int64_t shape[B2_B2ND_MAXDIM];
    CHECK_EQ(b2_npy_parse(h, (size_t)n, &hl, descr, sizeof descr, &fortran, &nd, shape), 0);
    CHECK_EQ(hl, n);
    CHECK_EQ(fortran, 0);
    CHECK_EQ(nd, a.ndim);
    for (int i = 0; i < nd && i < a.ndim; i++) CHECK_EQ(shape[i], a.shape[i]);
    CHECK(strcmp(descr, cases[k].dt) == 0);
    if (have_numpy()) {
      uint8_t want[4096];
      size_t wn = run_py(PY_HEADER, cases[k].dt, cases[k].shape, NULL, want, sizeof want);
      if (wn != (size_t)n || memcmp(want, h, (size_t)n) != 0) {
        fprintf(stderr, "  %s %s: ours (%d) %.*s\n  numpy (%zu) %.*s\n", cases[k].dt,
                cases[k].shape, n, n - 10, h + 10, wn, (int)(wn > 10 ? wn - 10 : 0), want + 10);
        CHECK(0);
      }
      /* numpy.load accepts header + data (small arrays only) */
      int64_t nb = b2_b2nd_nbytes(&a);
      if (nb <= (1 << 20)) {
        char path[] = "/tmp/b2nd_npy_XXXXXX";
        int fd = mkstemp(path);
        CHECK(fd >= 0);
        FILE *fp = fdopen(fd, "wb");
        fwrite(h, 1, (size_t)n, fp);
        for (int64_t i = 0; i < nb; i++) fputc((int)(i * 7 % 251), fp);
        fclose(fp);
        uint8_t res[256] = {0};
        run_py(PY_LOAD, cases[k].dt, cases[k].shape, path, res, sizeof res - 1);
        if (strcmp((char *)res, "OK") != 0) {
          fprintf(stderr, "  numpy.load %s %s: %s\n", cases[k].dt, cases[k].shape, res);
          CHECK(0);
        }
        unlink(path);
      }
    }
    free(h);
    b2_b2nd_free(&a);
  }
  if (!have_numpy()) T_SKIP("no python3 with numpy: headers checked by our parser only");
}

/* A dtype the header cannot carry safely becomes raw bytes. */
static void test_npy_header_fallback(void) {
  const char *bad[] = {"[('x', '<f4')", "[('x', '<f4')]}, 'shape': (1,), 'x': [", "<f'8",
                       "[('x', '<f4')] [", "<f8\n"};
  for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
    b2_b2nd a;
    CHECK_EQ(make_array(&a, bad[k], "4", 8), 0);
    int n = b2_npy_header(&a, NULL, 0);
    char h[256];
    CHECK(n > 0 && n <= (int)sizeof h);
    if (n <= 0 || n > (int)sizeof h) continue;
    CHECK_EQ(b2_npy_header(&a, h, sizeof h), n);
    size_t hl;
    char descr[64];
    int fortran, nd;
    int64_t shape[B2_B2ND_MAXDIM];
    CHECK_EQ(b2_npy_parse(h, (size_t)n, &hl, descr, sizeof descr, &fortran, &nd, shape), 0);
    CHECK(strcmp(descr, "|V8") == 0);
    CHECK(nd == 1 && shape[0] == 4);
    b2_b2nd_free(&a);
  }
  /* a dtype of another size than the items is kept as the metalayer says */
  {
    b2_b2nd a;
    CHECK_EQ(make_array(&a, "|u1", "4", 4), 0);
    char h[256] = {0};
    int n = b2_npy_header(&a, h, sizeof h - 1);
    CHECK(n > 0 && strstr(h + 10, "'descr': '|u1'") != NULL);
    b2_b2nd_free(&a);
  }
  /* not a NumPy dtype (format 1) */
  b2_b2nd a;
  CHECK_EQ(make_array(&a, "<f8", "2x2", 8), 0);
  a.dtype_format = 1;
  char h[256] = {0};
  int n = b2_npy_header(&a, h, sizeof h - 1);
  CHECK(n > 0 && strstr(h + 10, "'descr': '|V8'") != NULL);
  b2_b2nd_free(&a);
}

static void test_npy_header_v2(void) {
  /* a structured dtype too long for format 1.0 */
  size_t cap = 6000 * 24;
  char *dt = malloc(cap);
  size_t n = 0;
  dt[n++] = '[';
  for (int i = 0; i < 5000; i++) n += (size_t)snprintf(dt + n, cap - n, "%s('f%d', '|u1')", i ? ", " : "", i);
  dt[n++] = ']';
  dt[n] = 0;
  b2_b2nd a;
  CHECK_EQ(make_array(&a, dt, "3", 5000), 0);
  int hn = b2_npy_header(&a, NULL, 0);
  CHECK(hn > 65536 && hn % 64 == 0);
  char *h = malloc((size_t)hn);
  CHECK_EQ(b2_npy_header(&a, h, (size_t)hn), hn);
  CHECK_EQ(h[6], 2);
  CHECK_EQ((int)b2_le32(h + 8) + 12, hn);
  size_t hl;
  char *descr = malloc(cap);
  int fortran, nd;
  int64_t shape[B2_B2ND_MAXDIM];
  CHECK_EQ(b2_npy_parse(h, (size_t)hn, &hl, descr, cap, &fortran, &nd, shape), 0);
  CHECK(strcmp(descr, dt) == 0);
  CHECK_EQ(nd, 1);
  CHECK_EQ(shape[0], 3);
  if (have_numpy()) {
    uint8_t *want = malloc((size_t)hn + 64);
    size_t wn = run_py(PY_HEADER, dt, "3", NULL, want, (size_t)hn + 64);
    CHECK_EQ(wn, hn);
    CHECK(wn == (size_t)hn && memcmp(want, h, wn) == 0);
    free(want);
  }
  free(h);
  free(descr);
  free(dt);
  b2_b2nd_free(&a);
  if (!have_numpy()) T_SKIP("no python3 with numpy");
}

static int npy_rc(const char *dict, int major) {
  char buf[1024];
  size_t dl = strlen(dict), pre = major == 1 ? 10 : 12;
  memcpy(buf, "\x93NUMPY", 6);
  buf[6] = (char)major;
  buf[7] = 0;
  if (major == 1) {
    buf[8] = (char)(dl & 0xff);
    buf[9] = (char)(dl >> 8);
  } else {
    buf[8] = (char)(dl & 0xff);
    buf[9] = (char)(dl >> 8);
    buf[10] = buf[11] = 0;
  }
  memcpy(buf + pre, dict, dl);
  size_t hl;
  char descr[64];
  int fortran, nd;
  int64_t shape[B2_B2ND_MAXDIM];
  return b2_npy_parse(buf, pre + dl, &hl, descr, sizeof descr, &fortran, &nd, shape);
}

/* The dtype conversions, against what NumPy 2.4 gives: the metalayer text
 * python-blosc2 writes -> numpy.lib.format.dtype_to_descr of the dtype
 * python-blosc2 rebuilds (numpy.dtype, else numpy.dtype(literal_eval)),
 * and that descr -> the text python-blosc2 writes for the dtype numpy.load
 * rebuilds (str(dtype) for void dtypes, else dtype.str). */
static void test_dtype_convert(void) {
  static const struct {
    const char *text, *descr;
    int64_t itemsize;
    const char *back;
  } cases[] = {
    {"<f8", "<f8", 8, "<f8"},
    {">i2", ">i2", 2, ">i2"},
    {"|b1", "|b1", 1, "|b1"},
    {"?", "|b1", 1, "|b1"},
    {"u1", "|u1", 1, "|u1"},
    {"i1", "|i1", 1, "|i1"},
    {"|S7", "|S7", 7, "|S7"},
    {"a3", "|S3", 3, "|S3"},
    {"<U5", "<U5", 20, "<U5"},
    {">U3", ">U3", 12, ">U3"},
    {"=f4", "<f4", 4, "<f4"},
    {"f4", "<f4", 4, "<f4"},
    {"d", "<f8", 8, "<f8"},
    {"<M8[ns]", "<M8[ns]", 8, "<M8[ns]"},
    {">m8[10us]", ">m8[10us]", 8, ">m8[10us]"},
    {"<M8", "<M8", 8, "<M8"},
    {"<c16", "<c16", 16, "<c16"},
    {"|V8", "|V8", 8, "|V8"},
    {"float64", "<f8", 8, "<f8"},
    {"[('a', '<i4'), ('b', '<f8')]", "[('a', '<i4'), ('b', '<f8')]", 12, "[('a', '<i4'), ('b', '<f8')]"},
    {"[('a', '<i4', (2, 3)), ('b', 'S3')]", "[('a', '<i4', (2, 3)), ('b', '|S3')]", 27, "[('a', '<i4', (2, 3)), ('b', 'S3')]"},
    {"[('outer', [('x', '<f4'), ('y', '<i2')])]", "[('outer', [('x', '<f4'), ('y', '<i2')])]", 6, "[('outer', [('x', '<f4'), ('y', '<i2')])]"},
    {"{'names': ['a', 'b'], 'formats': ['u1', '<f8'], 'offsets': [0, 8], 'itemsize': 16, 'aligned': True}", "[('a', '|u1'), ('', '|V7'), ('b', '<f8')]", 16, "{'names': ['a', 'b'], 'formats': ['u1', '<f8'], 'offsets': [0, 8], 'itemsize': 16}"},
    {"{'names': ['x'], 'formats': ['<i2'], 'offsets': [4], 'itemsize': 12}", "[('', '|V4'), ('x', '<i2'), ('', '|V6')]", 12, "{'names': ['x'], 'formats': ['<i2'], 'offsets': [4], 'itemsize': 12}"},
    {"{'names': ['a', 'b'], 'formats': ['u1', ('<f8', (2,))], 'offsets': [0, 8], 'itemsize': 24}", "[('a', '|u1'), ('', '|V7'), ('b', '<f8', (2,))]", 24, "{'names': ['a', 'b'], 'formats': ['u1', ('<f8', (2,))], 'offsets': [0, 8], 'itemsize': 24}"},
    {"{'names': ['a', 'b'], 'formats': ['u1', {'names': ['x'], 'formats': ['<i2'], 'offsets': [4], 'itemsize': 12}], 'offsets': [0, 8], 'itemsize': 24}", "[('a', '|u1'), ('', '|V7'), ('b', [('', '|V4'), ('x', '<i2'), ('', '|V6')]), ('', '|V4')]", 24, "{'names': ['a', 'b'], 'formats': ['u1', {'names': ['x'], 'formats': ['<i2'], 'offsets': [4], 'itemsize': 12}], 'offsets': [0, 8], 'itemsize': 24}"},
    {"[(('T', 't'), '<i4'), ('u', '>u2')]", "[(('T', 't'), '<i4'), ('u', '>u2')]", 6, "[(('T', 't'), '<i4'), ('u', '>u2')]"},
    {"[('a', 'u1'), ('f1', 'V7'), ('b', '<f8')]", "[('a', '|u1'), ('f1', '|V7'), ('b', '<f8')]", 16, "[('a', 'u1'), ('f1', 'V7'), ('b', '<f8')]"},
    {"{'names': ['a', 'b'], 'formats': ['u1', '<f8'], 'titles': ['T', None], 'offsets': [0, 4], 'itemsize': 12}", "[(('T', 'a'), '|u1'), ('', '|V3'), ('b', '<f8')]", 12, "{'names': ['a', 'b'], 'formats': ['u1', '<f8'], 'offsets': [0, 4], 'titles': ['T', None], 'itemsize': 12}"},
    {"{'names': ['a', 'b'], 'formats': ['u1', '<f8'], 'aligned': True}", "[('a', '|u1'), ('', '|V7'), ('b', '<f8')]", 16, "{'names': ['a', 'b'], 'formats': ['u1', '<f8'], 'offsets': [0, 8], 'itemsize': 16}"},
    {"{'names': ['a', 'b'], 'formats': ['u1', '<f8']}", "[('a', '|u1'), ('b', '<f8')]", 9, "[('a', 'u1'), ('b', '<f8')]"},
    {"[('', '<i4'), ('b', '?')]", "[('f0', '<i4'), ('b', '|b1')]", 5, "[('f0', '<i4'), ('b', '?')]"},
    {"[(\"it's\", '<i2'), ('say \"hi\"', 'u1'), ('tab\\there', 'S2')]", "[(\"it's\", '<i2'), ('say \"hi\"', '|u1'), ('tab\\there', '|S2')]", 5, "[(\"it's\", '<i2'), ('say \"hi\"', 'u1'), ('tab\\there', 'S2')]"},
    {"[('v', '>f4', 3), ('w', ('<i2', (2,)), (3,)), ('s', '<f8', ())]", "[('v', '>f4', (3,)), ('w', ('<i2', (2,)), (3,)), ('s', '<f8')]", 32, "[('v', '>f4', (3,)), ('w', ('<i2', (2,)), (3,)), ('s', '<f8')]"},
    {"('<f8', (2, 3))", "|V48", 48, "|V48"},
    {"[('\xc3\xa9t\xc3\xa9', '<f4'), ('\\xad', '<f4')]", "[('\xc3\xa9t\xc3\xa9', '<f4'), ('\\xad', '<f4')]", 8, "[('\xc3\xa9t\xc3\xa9', '<f4'), ('\\xad', '<f4')]"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    char *descr = NULL, *back = NULL;
    int64_t isz = 0, isz2 = 0;
    int rc = b2_dtype_to_npy(cases[k].text, &descr, &isz);
    if (rc == 0) rc = b2_dtype_from_npy(descr, &back, &isz2);
    if (rc < 0 || strcmp(descr, cases[k].descr) || isz != cases[k].itemsize ||
        isz2 != cases[k].itemsize || strcmp(back, cases[k].back)) {
      fprintf(stderr, "  %s: rc %d (%s) descr %s (%lld) back %s (%lld)\n", cases[k].text, rc,
              rc < 0 ? b2_last_detail() : "", descr ? descr : "-", (long long)isz,
              back ? back : "-", (long long)isz2);
      CHECK(0);
    }
    free(descr);
    free(back);
  }
  /* not dtypes numpy.save could write: raw bytes in the .npy view */
  static const char *const bad[] = {
    "[('x', '<f4')", "[('x', '<f4')] x", "<f'8", "{'names': ['a'], 'formats': ['<f4'], 'bogus': 1}",
    "{'names': ['a', 'b'], 'formats': ['<f4']}", "{'names': ['a', 'b'], 'formats': ['u1', '<f8'], 'offsets': [8, 0], 'itemsize': 16}",
    "{'names': ['a'], 'formats': ['<f8'], 'offsets': [4], 'itemsize': 8}", "[('a', '<f4', (2, 'x'))]",
    "[('a\\q', '<f4')]", "[('a\\x0', '<f4')]", "[('a', '|O')]", "(numpy.record, [('a', '<i4')])", "[]", "{}",
    "[('a', '<f4', (1073741824, 4))]", "<M8[nsssssssssssssssssssssssssssss]",
    "('<f4', 0)", "[('\xff', '<f4')]", "[('a\xc3', '<f4')]", /* no items; not UTF-8 */
  };
  for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
    char *descr = NULL;
    int rc = b2_dtype_to_npy(bad[k], &descr, NULL);
    if (rc >= 0 || descr) {
      fprintf(stderr, "  %s accepted: %s\n", bad[k], descr ? descr : "-");
      CHECK(0);
    }
    free(descr);
  }
  /* .npy descrs that are no dtype python-blosc2 could store */
  CHECK(b2_dtype_from_npy("{'names': ['a'], 'formats': ['<f4']}", NULL, NULL) == B2_E_FORMAT);
  CHECK(b2_dtype_from_npy("('<f8', (2,))", NULL, NULL) == 0);
  char *t = NULL;
  CHECK(b2_dtype_from_npy("('<f8', (2,))", &t, NULL) == B2_E_UNSUPPORTED && t == NULL);
  /* a dict literal nested 40 deep is refused, not a stack overflow */
  char deep[8192];
  size_t n = 0;
  for (int k = 0; k < 40; k++) n += (size_t)snprintf(deep + n, sizeof deep - n, "{'names': ['a'], 'formats': [");
  n += (size_t)snprintf(deep + n, sizeof deep - n, "'<f8'");
  for (int k = 0; k < 40; k++) n += (size_t)snprintf(deep + n, sizeof deep - n, "]}");
  CHECK_EQ(b2_dtype_to_npy(deep, NULL, NULL), B2_E_LIMIT);
}

static void test_npy_parse(void) {
  CHECK_EQ(npy_rc("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }   \n", 1), 0);
  CHECK_EQ(npy_rc("{\"shape\": (3, 4), \"descr\": \"<f8\", \"fortran_order\": True}\n", 2), 0);
  CHECK_EQ(npy_rc("{'descr': '<f8', 'fortran_order': False, 'shape': ()}", 3), 0);
  CHECK_EQ(npy_rc("{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': (2L, 3L)}", 1), 0);
  CHECK_EQ(npy_rc("{'descr': '<f8', 'fortran_order': False, 'shape': (3)}", 1), B2_E_FORMAT);
  CHECK_EQ(npy_rc("{'descr': '<f8', 'fortran_order': False, 'shape': (-3,)}", 1), B2_E_FORMAT);
  CHECK_EQ(npy_rc("{'descr': '<f8', 'fortran_order': 0, 'shape': (3,)}", 1), B2_E_FORMAT);
  CHECK_EQ(npy_rc("{'descr': '<f8', 'shape': (3,)}", 1), B2_E_FORMAT);
  CHECK_EQ(npy_rc("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), 'x': 1}", 1), B2_E_FORMAT);
  CHECK_EQ(npy_rc("{'descr': '<f8', 'fortran_order': False, 'shape': (3,)} x", 1), B2_E_FORMAT);
  CHECK_EQ(npy_rc("{'descr': [('a', '<f8'), 'fortran_order': False, 'shape': (3,)}", 1), B2_E_FORMAT);
  CHECK_EQ(npy_rc("{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999,)}", 1),
           B2_E_FORMAT);
  CHECK_EQ(npy_rc("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296)}", 1),
           B2_E_LIMIT);
  CHECK_EQ(npy_rc("{'descr': '<f8', 'fortran_order': False, 'shape': "
                  "(1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1)}", 1), B2_E_LIMIT);
  CHECK_EQ(npy_rc("{'descr': 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', "
                  "'fortran_order': False, 'shape': (3,)}", 1), B2_E_LIMIT);
  CHECK_EQ(npy_rc("{'descr': '<f8', 'fortran_order': False, 'shape': (3,)}", 4), B2_E_UNSUPPORTED);
  /* the results of a good parse */
  const char *d = "{'descr': [('x', '<f4'), ('y', '|u1')], 'fortran_order': True, 'shape': (7, 0, 2), }\n";
  char buf[256];
  size_t dl = strlen(d);
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = (char)dl;
  buf[9] = 0;
  memcpy(buf + 10, d, dl);
  size_t hl;
  char descr[64];
  int fortran, nd;
  int64_t shape[B2_B2ND_MAXDIM];
  CHECK_EQ(b2_npy_parse(buf, 10 + dl + 5, &hl, descr, sizeof descr, &fortran, &nd, shape), 0);
  CHECK_EQ(hl, 10 + dl);
  CHECK(strcmp(descr, "[('x', '<f4'), ('y', '|u1')]") == 0);
  CHECK_EQ(fortran, 1);
  CHECK_EQ(nd, 3);
  CHECK(shape[0] == 7 && shape[1] == 0 && shape[2] == 2);
  /* truncations and bad magic */
  for (size_t k = 0; k < 10 + dl; k++)
    CHECK(b2_npy_parse(buf, k, &hl, descr, sizeof descr, &fortran, &nd, shape) == B2_E_TRUNCATED);
  buf[1] = 'X';
  CHECK_EQ(b2_npy_parse(buf, 10 + dl, &hl, descr, sizeof descr, &fortran, &nd, shape), B2_E_FORMAT);
  /* random damage of a good header never crashes */
  char good[256];
  buf[1] = 'N';
  memcpy(good, buf, 10 + dl);
  for (int it = 0; it < 20000; it++) {
    memcpy(buf, good, 10 + dl);
    for (int k = 0; k < 3; k++) buf[rnd() % (10 + dl)] = (char)rnd();
    b2_npy_parse(buf, 10 + dl, &hl, descr, sizeof descr, &fortran, &nd, shape);
  }
}

/* ---- fixtures through the frame layer ----------------------------------------- */

typedef struct freader {
  b2_frame *f;
  int64_t calls;
} freader;

static int frame_reader(void *ctx, int64_t chunk, size_t off, size_t len, void *dst) {
  freader *r = ctx;
  r->calls++;
  int rc = b2_frame_decode_range(r->f, chunk, off, len, dst);
  return rc < 0 ? rc : 0;
}

static void shape_text(const b2_b2nd *a, char *out, size_t cap) {
  size_t n = 0;
  out[0] = 0;
  for (int i = 0; i < a->ndim; i++)
    n += (size_t)snprintf(out + n, cap - n, "%s%lld", i ? "x" : "", (long long)a->shape[i]);
}

/* python-blosc2's __pack_tensor__ triples, as its save_tensor wrote them
 * (4.14.1; 2.7.1 writes the same), and hand-made variants. */
#define TUP "\xa9__tuple__"
static void test_tensor_parse(void) {
  static const struct {
    const char *mp;
    size_t len;
    int64_t nbytes;
    int rc;
    const char *dtype, *descr; /* b2nd dtype text; descr in the .npy header */
    int ndim;
    int64_t shape0;
  } cases[] = {
#define C(lit, ...) {lit, sizeof lit - 1, __VA_ARGS__}
      C("\x94" TUP "\xa5numpy\x93" TUP "\x03\x04\xa3<i4", 48, 0, "<i4", "'<i4'", 2, 3),
      C("\x94" TUP "\xa5numpy\x92" TUP "\x03\x92\x93" TUP "\xa1x\xa3<f8\x93" TUP "\xa1y\xa3|S3", 33, 0,
        "[('x', '<f8'), ('y', 'S3')]", "[('x', '<f8'), ('y', '|S3')]", 1, 3),
      /* aligned: padding fields, read as numpy.lib.format reads them */
      C("\x94" TUP "\xa5numpy\x92" TUP "\x02\x93\x93" TUP "\xa1" "a\xa3|u1\x93" TUP "\xa0\xa3|V7\x93" TUP
        "\xa1" "b\xa3<f8", 32, 0, "{'names': ['a', 'b'], 'formats': ['u1', '<f8'], 'offsets': [0, 8], 'itemsize': 16}",
        "[('a', '|u1'), ('', '|V7'), ('b', '<f8')]", 1, 2),
      /* title, nested fields, a sub-array */
      C("\x94" TUP "\xa5torch\x92" TUP "\x02\x93\x94" TUP "\xa1" "a\xa3<f4\x93" TUP "\x02\x03\x93" TUP "\x93" TUP
        "\xa1T\xa1" "b\xa3>i2\x93" TUP "\xa1n\x92\x93" TUP "\xa1p\xa3|u1\x93" TUP "\xa1q\xa3<c8", 70, 0,
        "[('a', '<f4', (2, 3)), (('T', 'b'), '>i2'), ('n', [('p', 'u1'), ('q', '<c8')])]",
        "[('a', '<f4', (2, 3)), (('T', 'b'), '>i2'), ('n', [('p', '|u1'), ('q', '<c8')])]", 1, 2),
      /* plain arrays for tuples, an integer sub-array shape */
      C("\x93\xa5numpy\x92\x05\x02\x91\x93\xa1v\xa3<i2\x02", 40, 0, "[('v', '<i2', (2,))]", "[('v', '<i2', (2,))]", 2, 5),
      C("\x93\xa5numpy\x90\xa3<f8", 8, 0, "<f8", "'<f8'", 0, 0),  /* a 0-d array */
      C("\x93\xa5numpy\x92\x00\x05\xa3<U3", 0, 0, "<U3", "'<U3'", 2, 0), /* empty */
      /* refused */
      C("\x94" TUP "\xa5numpy\x93" TUP "\x03\x04\xa3<i4", 47, B2_E_FORMAT, 0, 0, 0, 0), /* size */
      C("\x94" TUP "\xa5numpy\x93" TUP "\x03\x04\xa3<i4\xc0", 48, B2_E_FORMAT, 0, 0, 0, 0), /* junk */
      C("\x94" TUP "\xa5numpy\x93" TUP "\x03\x04\xa3<i", 48, B2_E_TRUNCATED, 0, 0, 0, 0), /* cut */
      C("\x93\xa5numpy\x91\xff\xa3<i4", 4, B2_E_FORMAT, 0, 0, 0, 0),    /* length -1 */
      C("\x93\xa5numpy\x91\x01\xa3|O8", 8, B2_E_UNSUPPORTED, 0, 0, 0, 0), /* objects */
      C("\x93\xa5numpy\x91\x01\xa3<x4", 4, B2_E_FORMAT, 0, 0, 0, 0),
      C("\x93\xa5numpy\x91\x01\x91\x92\xa0\xa3|V8", 8, B2_E_FORMAT, 0, 0, 0, 0), /* padding only */
      C("\x93\xa0\x91\x01\xa3<i4", 4, B2_E_FORMAT, 0, 0, 0, 0),          /* no kind */
      C("\x93\xa5numpy\x91\x03\x91\x93\xa1" "a\xa3<f4\x91\x00", 0, B2_E_FORMAT, 0, 0, 0, 0), /* items of 0 bytes */
      C("\x92\xa5numpy\x91\x01", 4, B2_E_FORMAT, 0, 0, 0, 0),            /* a pair */
      C("\x93\xa5numpy\xdc\x00\x11\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\xa3<i4",
        4, B2_E_LIMIT, 0, 0, 0, 0),                                         /* 17 dimensions */
      C("\x93\xa5numpy\x92\xcf\x10\0\0\0\0\0\0\0\xcf\x10\0\0\0\0\0\0\0\xa3<i4", 0, B2_E_FORMAT, 0, 0, 0,
        0), /* 2^60 squared: no int64 */
      C("\x93\xa5numpy\x91\x01\xdd\xff\xff\xff\xff", 4, B2_E_TRUNCATED, 0, 0, 0, 0), /* 2^32-1 fields */
#undef C
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    b2_b2nd a;
    int rc = b2_tensor_parse((const uint8_t *)cases[k].mp, cases[k].len, cases[k].nbytes, &a);
    if (cases[k].rc) {
      if (rc != cases[k].rc) fprintf(stderr, "  case %zu: %d (%s)\n", k, rc, b2_last_detail());
      CHECK_EQ(rc, cases[k].rc);
      continue;
    }
    if (rc < 0) fprintf(stderr, "  case %zu: %s\n", k, b2_last_detail());
    CHECK_EQ(rc, 0);
    if (rc < 0) continue;
    CHECK_EQ(a.ndim, cases[k].ndim);
    if (a.ndim) CHECK_EQ(a.shape[0], cases[k].shape0);
    CHECK(a.dtype && strcmp(a.dtype, cases[k].dtype) == 0);
    CHECK_EQ(a.nitems * a.itemsize, cases[k].nbytes);
    char h[512];
    int n = b2_npy_header(&a, h, sizeof h);
    CHECK(n > 0 && n <= (int)sizeof h);
    const char *want = cases[k].descr;
    CHECK(n > 0 && memmem(h, (size_t)n, want, strlen(want)) != NULL);
    b2_b2nd_free(&a);
  }
}

static void test_fixtures(void) {
  char path[1024];
  snprintf(path, sizeof path, "%s/manifest.tsv", t_fixtures());
  FILE *mf = fopen(path, "r");
  if (!mf) T_SKIP("no fixtures at %s", t_fixtures());
  char line[4096];
  int seen = 0;
  while (fgets(line, sizeof line, mf)) {
    if (line[0] == '#') continue;
    char *fld[8];
    int nf = 0;
    char *save, *tok = strtok_r(line, "\t\n", &save);
    while (tok && nf < 8) {
      fld[nf++] = tok;
      tok = strtok_r(NULL, "\t\n", &save);
    }
    if (nf < 7 || strcmp(fld[6], "-") == 0) continue;
    seen++;
    snprintf(path, sizeof path, "%s/%s", t_fixtures(), fld[0]);
    b2_frame *f;
    int rc = b2_frame_open(path, &f);
    if (rc < 0) {
      fprintf(stderr, "  %s: open: %s\n", fld[0], b2_last_detail());
      CHECK(0);
      continue;
    }
    const b2_frame_info *in = b2_frame_get_info(f);
    const uint8_t *meta;
    size_t ml;
    b2_b2nd a;
    CHECK_EQ(b2_frame_meta_get(f, "b2nd", &meta, &ml), 0);
    rc = b2_b2nd_parse(meta, ml, in->typesize, &a);
    if (rc < 0) {
      fprintf(stderr, "  %s: parse: %s\n", fld[0], b2_last_detail());
      CHECK(0);
      b2_frame_close(f);
      continue;
    }
    CHECK_EQ(b2_b2nd_check(&a, in->nchunks, in->chunksize), 0);
    char st[256];
    shape_text(&a, st, sizeof st);
    if (strcmp(st, fld[4]) != 0 || strcmp(a.dtype, fld[5]) != 0) {
      fprintf(stderr, "  %s: shape %s dtype %s, manifest %s %s\n", fld[0], st, a.dtype, fld[4], fld[5]);
      CHECK(0);
    }
    int64_t nb = b2_b2nd_nbytes(&a);
    uint8_t *all = malloc((size_t)nb + 1), *part = malloc((size_t)nb + 1);
    freader r = {f, 0};
    rc = b2_b2nd_read(&a, 0, (size_t)nb, all, frame_reader, &r);
    CHECK_EQ(rc, nb);
    char hex[65];
    t_sha256_of(all, (size_t)nb, hex);
    if (strcmp(hex, fld[6]) != 0) {
      fprintf(stderr, "  %s: C-order sha256 %s, manifest %s\n", fld[0], hex, fld[6]);
      CHECK(0);
    }
    /* odd-sized pieces agree with the whole; then random small reads */
    size_t piece[] = {4093, 65537};
    for (size_t pi = 0; pi < sizeof piece / sizeof *piece; pi++) {
      memset(part, 0, (size_t)nb);
      int64_t off = 0;
      while (off < nb) {
        rc = b2_b2nd_read(&a, (uint64_t)off, piece[pi], part + off, frame_reader, &r);
        if (rc <= 0) break;
        off += rc;
      }
      CHECK_EQ(off, nb);
      CHECK(memcmp(all, part, (size_t)nb) == 0);
    }
    int bad = 0;
    for (int it = 0; it < 200 && nb > 0; it++) {
      uint64_t off = rnd() % (uint64_t)nb;
      size_t len = 1 + (size_t)(rnd() % 3000);
      size_t want = (size_t)B2_MIN((uint64_t)len, (uint64_t)nb - off);
      rc = b2_b2nd_read(&a, off, len, part, frame_reader, &r);
      bad += rc != (int)want || memcmp(part, all + off, want) != 0;
    }
    CHECK_EQ(bad, 0);
    /* the .npy header describes it */
    int hn = b2_npy_header(&a, NULL, 0);
    char *h = malloc((size_t)hn);
    CHECK_EQ(b2_npy_header(&a, h, (size_t)hn), hn);
    size_t hl;
    char descr[256];
    int fortran, nd;
    int64_t shape[B2_B2ND_MAXDIM];
    CHECK_EQ(b2_npy_parse(h, (size_t)hn, &hl, descr, sizeof descr, &fortran, &nd, shape), 0);
    /* The header carries the metalayer's dtype as written, even where the
     * reference example stores 4-byte items under the dtype "|u1" (the
     * manifest expects NumPy to load it as |u1). */
    if (strstr(fld[0], "example_day_month_temp")) CHECK_EQ(a.itemsize, 4);
    if (strcmp(descr, a.dtype) != 0) {
      fprintf(stderr, "  %s: npy descr %s, dtype %s\n", fld[0], descr, a.dtype);
      CHECK(0);
    }
    free(h);
    free(all);
    free(part);
    b2_b2nd_free(&a);
    b2_frame_close(f);
  }
  fclose(mf);
  CHECK(seen >= 10);
}

static void test_bad_fixtures(void) {
  const char *bad[] = {"b2nd-ndim-mismatch.b2nd", "b2nd-shape-negative.b2nd",
                       "b2nd-shape-overflow.b2nd"};
  char path[1024];
  snprintf(path, sizeof path, "%s/bad", t_fixtures());
  struct stat sb;
  if (stat(path, &sb) != 0) T_SKIP("no fixtures at %s", t_fixtures());
  for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
    snprintf(path, sizeof path, "%s/bad/%s", t_fixtures(), bad[k]);
    b2_frame *f;
    if (b2_frame_open(path, &f) < 0) continue; /* refused earlier: fine */
    const b2_frame_info *in = b2_frame_get_info(f);
    const uint8_t *meta;
    size_t ml;
    int rc = b2_frame_meta_get(f, "b2nd", &meta, &ml);
    if (rc == 0) {
      b2_b2nd a;
      rc = b2_b2nd_parse(meta, ml, in->typesize, &a);
      if (rc == 0) {
        rc = b2_b2nd_check(&a, in->nchunks, in->chunksize);
        b2_b2nd_free(&a);
      }
    }
    if (rc >= 0) fprintf(stderr, "  %s accepted\n", bad[k]);
    else fprintf(stderr, "  %s: %s\n", bad[k], b2_last_detail());
    CHECK(rc < 0);
    b2_frame_close(f);
  }
}

int main(void) {
  T_RUN(test_read_1d);
  T_RUN(test_read_2d);
  T_RUN(test_read_3d);
  T_RUN(test_read_4d_5d);
  T_RUN(test_read_windowed);
  T_RUN(test_read_threads);
  T_RUN(test_read_scalar_and_empty);
  T_RUN(test_read_errors);
  T_RUN(test_read_speed);
  T_RUN(test_parse_fields);
  T_RUN(test_parse_variants);
  T_RUN(test_parse_errors);
  T_RUN(test_npy_header);
  T_RUN(test_npy_header_fallback);
  T_RUN(test_npy_header_v2);
  T_RUN(test_dtype_convert);
  T_RUN(test_npy_parse);
  T_RUN(test_tensor_parse);
  T_RUN(test_fixtures);
  T_RUN(test_bad_fixtures);
  T_END();
}
