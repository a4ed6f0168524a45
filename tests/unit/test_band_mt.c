/*
 * test_band_mt.c - sequential reads of arrays whose chunks or blocks split
 * a trailing axis (src/file/band.c, b2_b2nd_band): the geometry of bands;
 * every byte of the C-order and .npy views read in pieces (plain and
 * pinned reads, small and large caches, two threads at once, random reads
 * in between) against the items written; and that a sequential read
 * decodes each band once instead of decoding chunks again and again when
 * a row of chunks does not fit in the cache.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "b2_b2nd.h"
#include "b2_cache.h"
#include "b2_error.h"
#include "b2_file.h"
#include "common/util.h"
#include "file/file_impl.h" /* the env's cache, to count its loads */
#include "t.h"

static char dir[64];

/* ---- geometry ------------------------------------------------------------ */

static void test_band_geometry(void) {
  static const int64_t shape[] = {95, 40, 30};
  static const int32_t cs[] = {20, 16, 30}, bs[] = {6, 8, 30};
  b2_b2nd a;
  CHECK_EQ(b2_b2nd_make(&a, 3, shape, cs, bs, 4, "<f4"), 0);
  int64_t rb = b2_b2nd_row_nbytes(&a);
  CHECK_EQ(rb, 40 * 30 * 4);
  /* max and target pairs: cells grouped, cells whole, cells cut */
  static const int64_t lim[][2] = {{4 << 20, 4 << 20}, {6 * 4800, 4 << 20}, {2 * 4800, 1 << 20},
                                   {4800, 4800}};
  for (size_t t = 0; t < sizeof lim / sizeof lim[0]; t++) {
    int64_t target = lim[t][0], max = lim[t][1], row = 0, r0, r1;
    while (row < shape[0]) {
      CHECK_EQ(b2_b2nd_band(&a, row, target, max, &r0, &r1), 1);
      CHECK_EQ(r0, row); /* bands tile the rows */
      CHECK(r1 > r0 && r1 <= shape[0]);
      CHECK((r1 - r0) * rb <= B2_MAX(max, rb));
      /* inside one chunk; inside one block cell unless whole cells */
      CHECK_EQ(r0 / cs[0], (r1 - 1) / cs[0]);
      if ((r1 - r0) < bs[0] || (r0 % cs[0]) % bs[0] != 0)
        CHECK_EQ((r0 % cs[0]) / bs[0], ((r1 - 1) % cs[0]) / bs[0]);
      for (int64_t x = r0; x < r1; x++) { /* every row of it says so */
        int64_t s0, s1;
        CHECK(b2_b2nd_band(&a, x, target, max, &s0, &s1) == 1 && s0 == r0 && s1 == r1);
      }
      row = r1;
    }
  }
  int64_t r0, r1;
  CHECK_EQ(b2_b2nd_band(&a, 0, 1 << 20, rb - 1, &r0, &r1), 0); /* a row past max */
  CHECK_EQ(b2_b2nd_band(&a, 95, 1 << 20, 1 << 20, &r0, &r1), 0);
  CHECK_EQ(b2_b2nd_band(&a, -1, 1 << 20, 1 << 20, &r0, &r1), 0);
  b2_b2nd_free(&a);
}

/* ---- arrays on disk ------------------------------------------------------ */

typedef struct arr {
  const char *name, *cs, *bs, *dtype;
  int ndim;
  int64_t shape[3];
  int32_t isz;
  char path[128];
  uint8_t *npy; /* the .npy bytes written */
  size_t hl, n;
} arr;

static arr arrays[] = {
    /* cubes: 10 block cells a chunk along the first axis */
    {"cube", "50,32,32", "5,32,32", "<f4", 3, {100, 128, 128}, 4, "", NULL, 0, 0},
    /* tiles with uneven edges and a partial block cell in every chunk */
    {"tiles", "100,64", "30,16", "<i8", 2, {333, 257, 0}, 8, "", NULL, 0, 0},
    /* 1-D, blocks that do not fill their chunk */
    {"pad", "7000", "3000", "<u2", 1, {100003, 0, 0}, 2, "", NULL, 0, 0},
};
#define NARR (sizeof arrays / sizeof arrays[0])

static int make_array(b2_env *env, arr *A) {
  snprintf(A->path, sizeof A->path, "%s/%s.b2nd", dir, A->name);
  int32_t cs[3] = {0}, bs[3] = {0};
  b2_b2nd a;
  if (b2_b2nd_choose_shapes(A->ndim, A->shape, A->isz, 1, cs, bs) < 0 ||
      b2_b2nd_make(&a, A->ndim, A->shape, cs, bs, A->isz, A->dtype) < 0)
    return -1;
  int hl = b2_npy_header(&a, NULL, 0);
  size_t nb = (size_t)b2_b2nd_nbytes(&a);
  A->npy = malloc((size_t)hl + nb);
  b2_npy_header(&a, (char *)A->npy, (size_t)hl);
  b2_b2nd_free(&a);
  A->hl = (size_t)hl;
  A->n = (size_t)hl + nb;
  /* items numbered in C order (compressible, and a misplaced byte shows) */
  for (size_t i = 0; i < nb / (size_t)A->isz; i++) {
    uint64_t v = i * 2654435761u % 1000;
    memcpy(A->npy + hl + i * (size_t)A->isz, &v, (size_t)A->isz);
  }
  b2_file *f;
  if (b2_file_create_npy(env, A->path, NULL, &f) < 0) return -1;
  int rc = b2_file_set_param(f, "chunkshape", A->cs);
  if (rc == 0) rc = b2_file_set_param(f, "blockshape", A->bs);
  if (rc == 0 && b2_file_pwrite(f, A->npy, A->n, 0) != (ssize_t)A->n) rc = -1;
  if (b2_file_close(f) < 0) rc = -1;
  return rc;
}

static b2_env *make_env(size_t cache) {
  b2_env_opts o;
  b2_env_opts_default(&o);
  o.cache_size = cache;
  b2_env *env;
  return b2_env_create(&o, &env) < 0 ? NULL : env;
}

/* Read the whole view in pieces of `piece` bytes from `from` on (then the
 * bytes before it), pinned or not; 1 when every byte matches. */
static int read_all(b2_file *f, const uint8_t *want, size_t n, size_t piece, size_t from,
                    int pin) {
  uint8_t *buf = malloc(piece);
  int same = 1;
  for (int pass = 0; pass < 2; pass++) {
    size_t lo = pass ? 0 : from, hi = pass ? from : n;
    for (size_t o = lo; o < hi && same;) {
      size_t k = B2_MIN(piece, hi - o);
      b2_file_pin p;
      ssize_t got = pin ? b2_file_pread_pin(f, buf, k, (int64_t)o, &p)
                        : b2_file_pread(f, buf, k, (int64_t)o);
      same = got == (ssize_t)k && memcmp(pin ? p.data : buf, want + o, k) == 0;
      if (!same) fprintf(stderr, "  differs in %zu bytes at %zu (got %zd)\n", k, o, got);
      if (pin) b2_file_unpin(&p);
      o += k;
    }
  }
  free(buf);
  return same;
}

static void test_band_reads(void) {
  static const size_t caches[] = {64 << 10, 1 << 20, 256 << 20};
  static const size_t pieces[] = {4096, 65536, 1 << 20, 77777};
  for (size_t c = 0; c < sizeof caches / sizeof caches[0]; c++) {
    b2_env *env = make_env(caches[c]);
    CHECK(env != NULL);
    if (!env) return;
    for (size_t k = 0; k < NARR; k++) {
      arr *A = &arrays[k];
      for (size_t p = 0; p < sizeof pieces / sizeof pieces[0]; p++)
        for (int view = B2_VIEW_CORDER; view <= B2_VIEW_NPY; view++) {
          b2_file *f;
          CHECK_EQ(b2_file_open(env, A->path, view, B2_OPEN_RDONLY, &f), 0);
          const uint8_t *want = view == B2_VIEW_NPY ? A->npy : A->npy + A->hl;
          size_t n = view == B2_VIEW_NPY ? A->n : A->n - A->hl;
          size_t from = p == 3 ? n / 3 : 0; /* start in the middle, then the rest */
          int ok = read_all(f, want, n, pieces[p], from, (int)((p + c) & 1));
          if (!ok)
            fprintf(stderr, "  %s: cache %zu, pieces %zu, view %d\n", A->name, caches[c],
                    pieces[p], view);
          CHECK(ok);
          /* random reads after, from the same handle */
          uint64_t s = 7 + k;
          for (int r = 0; r < 50 && ok; r++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            size_t o = (size_t)(s >> 20) % n, len = B2_MIN((size_t)(s >> 50) % 70000 + 1, n - o);
            uint8_t *buf = malloc(len);
            ok = b2_file_pread(f, buf, len, (int64_t)o) == (ssize_t)len &&
                 memcmp(buf, want + o, len) == 0;
            free(buf);
          }
          CHECK(ok);
          CHECK_EQ(b2_file_close(f), 0);
        }
    }
    b2_env_destroy(env);
  }
}

/* ---- two readers of one handle ------------------------------------------- */

typedef struct reader {
  b2_file *f;
  const uint8_t *want;
  size_t n, piece;
  int ok;
} reader;

static void *read_thread(void *arg) {
  reader *r = arg;
  r->ok = read_all(r->f, r->want, r->n, r->piece, 0, r->piece == 65536);
  return NULL;
}

static void test_band_threads(void) {
  b2_env *env = make_env(2 << 20);
  CHECK(env != NULL);
  if (!env) return;
  for (size_t k = 0; k < NARR; k++) {
    arr *A = &arrays[k];
    b2_file *f;
    CHECK_EQ(b2_file_open(env, A->path, B2_VIEW_NPY, B2_OPEN_RDONLY, &f), 0);
    reader r[2] = {{f, A->npy, A->n, 65536, 0}, {f, A->npy, A->n, 131072, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) CHECK_EQ(pthread_create(&t[i], NULL, read_thread, &r[i]), 0);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    CHECK(r[0].ok && r[1].ok);
    CHECK_EQ(b2_file_close(f), 0);
  }
  b2_env_destroy(env);
}

/* ---- decoding each band once ---------------------------------------------- */

/* The cube: a row of chunks (32 chunks of 50 x 32 x 32 items, 3.2 MiB
 * decoded) does not fit a 2 MiB cache, a band (one block cell, 5 rows,
 * 320 KiB) does.  Reading the view in order must load each band once and
 * each stored chunk about once: chunks decoded whole for every few rows
 * read would take thousands of loads. */
static void test_band_once(void) {
  arr *A = &arrays[0];
  b2_env *env = make_env(2 << 20);
  CHECK(env != NULL);
  if (!env) return;
  b2_file *f;
  CHECK_EQ(b2_file_open(env, A->path, B2_VIEW_NPY, B2_OPEN_RDONLY, &f), 0);
  b2_cache_stats before, after;
  b2_cache_get_stats(env->cache, &before);
  CHECK(read_all(f, A->npy, A->n, 128 << 10, 0, 0));
  b2_cache_get_stats(env->cache, &after);
  uint64_t loads = after.misses - before.misses;
  int64_t nbands = 100 / 5, nchunks = 2 * 4 * 4;
  fprintf(stderr, "  %llu loads for %lld bands and %lld chunks\n", (unsigned long long)loads,
          (long long)nbands, (long long)nchunks);
  CHECK(loads >= (uint64_t)nbands);
  CHECK(loads <= (uint64_t)(nbands + nchunks + 8));
  /* no chunk decoded whole */
  for (int64_t i = 0; i < nchunks; i++) {
    b2_cache_entry *e;
    int rc = b2_cache_peek(env->cache, f->id, i, &e);
    if (rc == 0) b2_cache_release(env->cache, e);
    CHECK(rc != 0);
  }
  CHECK_EQ(b2_file_close(f), 0);
  b2_env_destroy(env);
}

static int made;

static void test_band_arrays_made(void) {
  b2_env *env = make_env(64 << 20);
  CHECK(env != NULL);
  made = env != NULL;
  for (size_t k = 0; k < NARR && made; k++) {
    made = make_array(env, &arrays[k]) == 0;
    if (!made) fprintf(stderr, "  %s: %s\n", arrays[k].name, b2_last_detail());
  }
  b2_env_destroy(env);
  CHECK(made);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/b2fs-band-%d", (int)getpid());
  mkdir(dir, 0700);
  T_RUN(test_band_geometry);
  T_RUN(test_band_arrays_made);
  if (made) {
    T_RUN(test_band_reads);
    T_RUN(test_band_threads);
    T_RUN(test_band_once);
  }
  for (size_t k = 0; k < NARR; k++) free(arrays[k].npy);
  char cmd[100];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "  could not remove %s\n", dir);
  T_END();
}
