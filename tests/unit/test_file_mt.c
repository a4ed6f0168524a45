/* test_file.c - the file-handle layer: reads through views, and a random
 * exerciser of the write side against a plain shadow buffer (pwrite at
 * random offsets, truncates up and down, flushes, close and reopen), on
 * both layouts and several codecs, with a cache small enough to force
 * evictions.  Every read is compared byte for byte; every frame left on
 * disk passes the strict frame check.  B2FS_SEED replays a run. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "b2_error.h"
#include "b2_file.h"
#include "common/util.h"
#include "t.h"

static uint64_t rng_state;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}
static uint64_t rnd_below(uint64_t n) { return n ? rnd() % n : 0; }

static char dir[] = "/tmp/b2fs-test-file-XXXXXX";

/* Fill with data that compresses a little (runs, text-ish, zeros). */
static void fill(uint8_t *p, size_t n) {
  int kind = (int)rnd_below(3);
  for (size_t i = 0; i < n; i++)
    p[i] = kind == 0 ? 0 : kind == 1 ? (uint8_t)('a' + (i / 7 + rng_state) % 26) : (uint8_t)rnd();
}

/* Compare the whole file with the shadow. */
static int same(b2_file *f, const uint8_t *shadow, int64_t size) {
  if (b2_file_size(f) != size) {
    fprintf(stderr, "  size %lld, expected %lld\n", (long long)b2_file_size(f), (long long)size);
    return 0;
  }
  uint8_t *buf = malloc((size_t)size + 1);
  ssize_t n = b2_file_pread(f, buf, (size_t)size + 1, 0);
  int ok = n == size && memcmp(buf, shadow, (size_t)size) == 0;
  if (!ok) fprintf(stderr, "  content differs (read %zd): %s\n", n, b2_last_detail());
  free(buf);
  return ok;
}

/* The frame on disk: strict check and the committed content. */
static int disk_same(const char *path, const uint8_t *shadow, int64_t size) {
  b2_frame *fr;
  int rc = b2_frame_open(path, &fr);
  if (rc < 0) {
    fprintf(stderr, "  reopen: %s\n", b2_last_detail());
    return 0;
  }
  rc = b2_frame_check(fr);
  if (rc < 0) fprintf(stderr, "  check: %s\n", b2_last_detail());
  b2_frame_close(fr);
  b2_file *f;
  if (rc == 0 && b2_file_open(NULL, path, B2_VIEW_LOGICAL, B2_OPEN_RDONLY, &f) == 0) {
    rc = same(f, shadow, size) ? 0 : -1;
    b2_file_close(f);
  }
  return rc == 0;
}

static void exercise(const char *codec, int layout, int nops) {
  char path[256];
  snprintf(path, sizeof path, "%s/ex-%s-%d.b2frame", dir, codec, layout);
  b2_env_opts eo;
  b2_env_opts_default(&eo);
  eo.cache_size = 96 << 10; /* a few chunks: evictions all the time */
  eo.dirty_max = 48 << 10;
  eo.nthreads = 2;
  b2_env *env;
  CHECK_EQ(b2_env_create(&eo, &env), 0);
  b2_frame_params p;
  b2_frame_params_default(&p);
  p.layout = layout;
  p.chunksize = 10000; /* not a power of two: edges everywhere */
  p.cparams.typesize = 4;
  CHECK_EQ(b2_params_set(&p, "codec", codec), 0);
  b2_file *f;
  CHECK_EQ(b2_file_create(env, path, &p, &f), 0);
  size_t cap = 400000;
  uint8_t *shadow = calloc(1, cap), *buf = malloc(cap);
  int64_t size = 0;
  int bad = 0;
  for (int op = 0; op < nops && !bad; op++) {
    int what = (int)rnd_below(100);
    if (what < 55) { /* write */
      int64_t off = (int64_t)rnd_below((uint64_t)size + 30000);
      size_t n = 1 + rnd_below(what < 10 ? 60000 : 3000);
      if (off + (int64_t)n > (int64_t)cap) continue;
      fill(buf, n);
      if (b2_file_pwrite(f, buf, n, off) != (ssize_t)n) {
        fprintf(stderr, "  op %d pwrite: %s\n", op, b2_last_detail());
        bad = 1;
        break;
      }
      if (off > size) memset(shadow + size, 0, (size_t)(off - size));
      memcpy(shadow + off, buf, n);
      if (off + (int64_t)n > size) size = off + (int64_t)n;
    } else if (what < 80) { /* read a range */
      int64_t off = (int64_t)rnd_below((uint64_t)size + 100);
      size_t n = 1 + rnd_below(30000);
      ssize_t got = b2_file_pread(f, buf, n, off);
      ssize_t want = off >= size ? 0 : (ssize_t)B2_MIN((int64_t)n, size - off);
      if (got != want || (want > 0 && memcmp(buf, shadow + off, (size_t)want))) {
        fprintf(stderr, "  op %d pread(%zu @ %lld) = %zd, want %zd: %s\n", op, n, (long long)off,
                got, want, b2_last_detail());
        bad = 1;
      }
    } else if (what < 90) { /* truncate */
      int64_t ns = (int64_t)rnd_below(B2_MIN((uint64_t)size * 2 + 20000, cap));
      if (b2_file_truncate(f, ns) < 0) {
        fprintf(stderr, "  op %d truncate: %s\n", op, b2_last_detail());
        bad = 1;
        break;
      }
      if (ns > size) memset(shadow + size, 0, (size_t)(ns - size));
      size = ns;
    } else if (what < 96) { /* flush: the disk then holds everything */
      if (b2_file_flush(f) < 0) {
        fprintf(stderr, "  op %d flush: %s\n", op, b2_last_detail());
        bad = 1;
      } else if (!disk_same(path, shadow, size)) {
        fprintf(stderr, "  op %d: disk differs after flush\n", op);
        bad = 1;
      }
    } else { /* close and reopen */
      if (b2_file_close(f) < 0) {
        fprintf(stderr, "  op %d close: %s\n", op, b2_last_detail());
        bad = 1;
        break;
      }
      if (b2_file_open(env, path, B2_VIEW_LOGICAL, B2_OPEN_RDWR, &f) < 0) {
        fprintf(stderr, "  op %d reopen: %s\n", op, b2_last_detail());
        bad = 1;
        break;
      }
      if (!same(f, shadow, size)) bad = 1;
    }
  }
  if (!bad) {
    CHECK(same(f, shadow, size));
    CHECK_EQ(b2_file_close(f), 0);
    CHECK(disk_same(path, shadow, size));
  } else {
    CHECK(0);
  }
  free(shadow);
  free(buf);
  b2_env_destroy(env);
}

static void test_exercise_zstd_contiguous(void) { exercise("zstd", B2_LAYOUT_CONTIGUOUS, 3000); }
static void test_exercise_lz4_sparse(void) { exercise("lz4", B2_LAYOUT_SPARSE, 3000); }
static void test_exercise_blosclz_contiguous(void) { exercise("blosclz", B2_LAYOUT_CONTIGUOUS, 2000); }
static void test_exercise_zlib_sparse(void) { exercise("zlib", B2_LAYOUT_SPARSE, 1500); }

/* Parameters parse and reject. */
static void test_params(void) {
  b2_frame_params p;
  b2_frame_params_default(&p);
  CHECK_EQ(b2_params_set(&p, "codec", "lz4hc"), 0);
  CHECK_EQ(p.cparams.codec, B2_CODEC_LZ4HC);
  CHECK_EQ(b2_params_set(&p, "filters", "delta,shuffle"), 0);
  CHECK_EQ(p.cparams.filters[4], B2_FILTER_DELTA);
  CHECK_EQ(p.cparams.filters[5], B2_FILTER_SHUFFLE);
  CHECK_EQ(b2_params_set(&p, "chunksize", "2M"), 0);
  CHECK_EQ(p.chunksize, 2 << 20);
  CHECK_EQ(b2_params_set(&p, "clevel", "10"), B2_E_INVAL);
  CHECK_EQ(b2_params_set(&p, "codec", "snappy"), B2_E_INVAL);
  CHECK_EQ(b2_params_set(&p, "filters", "shuffle,bogus"), B2_E_INVAL);
  CHECK_EQ(b2_params_set(&p, "colour", "red"), B2_E_NOENT);
  uint64_t v;
  CHECK_EQ(b2_parse_size("256M", &v), 0);
  CHECK_EQ(v, 256u << 20);
  CHECK_EQ(b2_parse_size("12x", &v), B2_E_INVAL);
  CHECK_EQ(b2_parse_size("99999999999999999999", &v), B2_E_INVAL);
}

/* set_param on an empty frame recreates it; after data it is refused. */
static void test_set_param(void) {
  char path[256];
  snprintf(path, sizeof path, "%s/param.b2frame", dir);
  b2_env *env;
  CHECK_EQ(b2_env_create(NULL, &env), 0);
  b2_file *f;
  CHECK_EQ(b2_file_create(env, path, NULL, &f), 0);
  CHECK_EQ(b2_file_set_param(f, "codec", "lz4"), 0);
  CHECK_EQ(b2_file_set_param(f, "layout", "sparse"), 0);
  CHECK_EQ(b2_frame_get_info(b2_file_frame(f))->codec, B2_CODEC_LZ4);
  CHECK_EQ(b2_frame_get_info(b2_file_frame(f))->layout, B2_LAYOUT_SPARSE);
  CHECK_EQ(b2_file_pwrite(f, "hello", 5, 0), 5);
  CHECK_EQ(b2_file_set_param(f, "codec", "zstd"), B2_E_BUSY);
  CHECK_EQ(b2_file_close(f), 0);
  struct stat st;
  CHECK(stat(path, &st) == 0 && S_ISDIR(st.st_mode));
  b2_env_destroy(env);
}

/* Read-only handles refuse writes; a frame without a b2nd metalayer has
 * no C-order view, and its .npy view is its bytes. */
static void test_refusals(void) {
  char path[256];
  snprintf(path, sizeof path, "%s/ro.b2frame", dir);
  b2_env *env;
  CHECK_EQ(b2_env_create(NULL, &env), 0);
  b2_file *f;
  CHECK_EQ(b2_file_create(env, path, NULL, &f), 0);
  CHECK_EQ(b2_file_pwrite(f, "abc", 3, 0), 3);
  CHECK_EQ(b2_file_close(f), 0);
  CHECK_EQ(b2_file_open(env, path, B2_VIEW_LOGICAL, B2_OPEN_RDONLY, &f), 0);
  CHECK_EQ(b2_file_pwrite(f, "x", 1, 0), B2_E_ROFS);
  CHECK_EQ(b2_file_truncate(f, 0), B2_E_ROFS);
  b2_file_close(f);
  CHECK_EQ(b2_file_create(env, path, NULL, &f), B2_E_EXIST);
  CHECK_EQ(b2_file_open(env, path, B2_VIEW_CORDER, B2_OPEN_RDWR, &f), B2_E_FORMAT);
  CHECK_EQ(b2_file_open(env, path, B2_VIEW_NPY, B2_OPEN_RDWR, &f), 0);
  char got[4] = {0};
  CHECK_EQ(b2_file_pread(f, got, 4, 0), 3);
  CHECK(memcmp(got, "abc", 3) == 0);
  CHECK_EQ(b2_file_close(f), 0);
  b2_env_destroy(env);
}

int main(void) {
  const char *seed = getenv("B2FS_SEED");
  rng_state = seed ? strtoull(seed, NULL, 0) : (uint64_t)time(NULL) * 2654435761u + (uint64_t)getpid();
  if (!rng_state) rng_state = 1;
  printf("# seed %llu (B2FS_SEED replays)\n", (unsigned long long)rng_state);
  fprintf(stderr, "  seed %llu (B2FS_SEED replays)\n", (unsigned long long)rng_state);
  if (!mkdtemp(dir)) return 1;
  T_RUN(test_params);
  T_RUN(test_refusals);
  T_RUN(test_set_param);
  T_RUN(test_exercise_zstd_contiguous);
  T_RUN(test_exercise_lz4_sparse);
  T_RUN(test_exercise_blosclz_contiguous);
  T_RUN(test_exercise_zlib_sparse);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) return 1;
  T_END();
}
