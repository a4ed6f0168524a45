/* test_file.c - the file-handle layer: reads through views, and a random
 * exerciser of the write side against a plain shadow buffer (pwrite at
 * random offsets, truncates up and down, flushes, close and reopen), on
 * both layouts and several codecs, with a cache small enough to force
 * evictions.  Every read is compared byte for byte; every frame left on
 * disk passes the strict frame check.  B2FS_SEED replays a run. */
#include <pthread.h>
#include <stdatomic.h>
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
static uint64_t rnd(void) { return t_xorshift64(&rng_state); }
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
  CHECK_EQ(b2_params_set(&p, "colour", "red"), B2_E_INVAL);
  /* NAME:META, python-blosc2's codec_meta and filters_meta */
  CHECK_EQ(b2_params_set(&p, "filters", "trunc_prec:12,shuffle"), 0);
  CHECK_EQ(p.cparams.filters[4], B2_FILTER_TRUNC_PREC);
  CHECK_EQ(p.cparams.filters_meta[4], 12);
  CHECK_EQ(p.cparams.filters_meta[5], 0);
  CHECK_EQ(b2_params_set(&p, "filters", "int_trunc:-3"), 0);
  CHECK_EQ(p.cparams.filters[5], B2_FILTER_INT_TRUNC);
  CHECK_EQ(p.cparams.filters_meta[5], 253);
  CHECK_EQ(b2_params_set(&p, "filters", "trunc_prec"), B2_E_INVAL); /* its bits are needed */
  CHECK_EQ(b2_params_set(&p, "filters", "ndcell:300"), B2_E_INVAL);
  CHECK_EQ(b2_params_set(&p, "filters", "shuffle:2"), B2_E_INVAL); /* takes none */
  CHECK_EQ(b2_params_set(&p, "filters", "ndcell:x"), B2_E_INVAL);
  CHECK_EQ(b2_params_set(&p, "codec", "zstd:3"), B2_E_INVAL);
  CHECK_EQ(b2_params_set(&p, "codec", "ndlz"), B2_E_INVAL);
  CHECK_EQ(b2_params_set(&p, "codec", "ndlz:8"), 0);
  CHECK_EQ(p.cparams.codec, B2_CODEC_NDLZ);
  CHECK_EQ(p.cparams.codec_meta, 8);
  /* a ZFP codec drops the filters that move bytes; trunc_prec stays */
  CHECK_EQ(b2_params_set(&p, "filters", "trunc_prec:20,shuffle"), 0);
  CHECK_EQ(b2_params_set(&p, "codec", "zfp_acc:-8"), 0);
  CHECK_EQ(p.cparams.codec, B2_CODEC_ZFP_ACC);
  CHECK_EQ(p.cparams.codec_meta, 248);
  CHECK_EQ(p.cparams.filters[4], B2_FILTER_TRUNC_PREC);
  CHECK_EQ(p.cparams.filters[5], B2_FILTER_NONE);
  /* not an array: the array codecs and filters are refused by the check */
  CHECK_EQ(b2_cparams_check(&p.cparams), B2_E_INVAL);
  CHECK_EQ(b2_params_set(&p, "codec", "zstd"), 0);
  CHECK_EQ(b2_cparams_check(&p.cparams), 0); /* trunc_prec:20 on 8-byte items */
  CHECK_EQ(b2_params_set(&p, "typesize", "2"), 0);
  CHECK_EQ(b2_cparams_check(&p.cparams), B2_E_INVAL);
  uint64_t v;
  CHECK_EQ(b2_parse_size("256M", &v), 0);
  CHECK_EQ(v, 256u << 20);
  CHECK_EQ(b2_parse_size("12x", &v), B2_E_INVAL);
  CHECK_EQ(b2_parse_size("99999999999999999999", &v), B2_E_INVAL);
}

/* set_param on an empty frame recreates it; after data it is refused;
 * an array's shapes never apply to a frame of bytes.  Which attributes
 * follow from the data. */
static void test_set_param(void) {
  char path[256];
  snprintf(path, sizeof path, "%s/param.b2frame", dir);
  b2_env *env;
  CHECK_EQ(b2_env_create(NULL, &env), 0);
  b2_file *f;
  CHECK_EQ(b2_file_create(env, path, NULL, &f), 0);
  /* The user's metalayers set first (tar -x --xattrs) stay through the
   * recreations; the engine's own vlmetalayers do not. */
  CHECK_EQ(b2_frame_vlmeta_set(b2_file_frame(f), "note", "\xa2hi", 3), 0);
  CHECK_EQ(b2_frame_vlmeta_set(b2_file_frame(f), "b2fs.x", "\x01", 1), 0);
  CHECK_EQ(b2_frame_meta_set(b2_file_frame(f), "mine", "\x93\x01\x02\x03", 4), 0);
  CHECK_EQ(b2_file_set_param(f, "codec", "lz4"), 0);
  CHECK_EQ(b2_file_set_param(f, "layout", "sparse"), 0);
  uint8_t *v = NULL;
  size_t vlen = 0;
  const uint8_t *m;
  size_t mlen;
  CHECK_EQ(b2_frame_vlmeta_get(b2_file_frame(f), "note", &v, &vlen), 0);
  CHECK(vlen == 3 && v && memcmp(v, "\xa2hi", 3) == 0);
  free(v);
  CHECK(b2_frame_vlmeta_get(b2_file_frame(f), "b2fs.x", NULL, &vlen) < 0);
  CHECK_EQ(b2_frame_meta_get(b2_file_frame(f), "mine", &m, &mlen), 0);
  CHECK(mlen == 4 && memcmp(m, "\x93\x01\x02\x03", 4) == 0);
  CHECK_EQ(b2_frame_get_info(b2_file_frame(f))->codec, B2_CODEC_LZ4);
  CHECK_EQ(b2_frame_get_info(b2_file_frame(f))->layout, B2_LAYOUT_SPARSE);
  CHECK_EQ(b2_file_pwrite(f, "hello", 5, 0), 5);
  CHECK_EQ(b2_file_set_param(f, "codec", "zstd"), B2_E_BUSY);
  /* After the data: the value's form is checked first (a copy's good
   * value, an array's shapes included, is BUSY; a bad one INVAL). */
  CHECK_EQ(b2_file_set_param(f, "codec", "nosuch"), B2_E_INVAL);
  CHECK_EQ(b2_file_set_param(f, "clevel", "10"), B2_E_INVAL);
  CHECK_EQ(b2_file_set_param(f, "chunkshape", "10,20"), B2_E_BUSY);
  CHECK_EQ(b2_file_set_param(f, "blockshape", "10,x"), B2_E_INVAL);
  CHECK_EQ(b2_frame_get_info(b2_file_frame(f))->codec, B2_CODEC_LZ4);
  CHECK_EQ(b2_file_close(f), 0);
  struct stat st;
  CHECK(stat(path, &st) == 0 && S_ISDIR(st.st_mode));
  snprintf(path, sizeof path, "%s/param2.b2frame", dir);
  CHECK_EQ(b2_file_create(env, path, NULL, &f), 0);
  CHECK_EQ(b2_file_set_param(f, "chunkshape", "10,20"), B2_E_INVAL);
  CHECK_EQ(b2_file_close(f), 0);
  b2_env_destroy(env);
  CHECK_EQ(b2_file_xattr_derived("user.b2.nchunks"), 1);
  CHECK_EQ(b2_file_xattr_derived("user.b2.shape"), 1);
  CHECK_EQ(b2_file_xattr_derived("user.b2.meta.b2nd"), 1);
  CHECK_EQ(b2_file_xattr_derived("user.b2.meta.mine"), 0);
  CHECK_EQ(b2_file_xattr_derived("user.b2.codec"), 0);
  CHECK_EQ(b2_file_xattr_derived("user.b2.vlmeta.nchunks"), 0);
  CHECK_EQ(b2_file_xattr_derived("user.other.nchunks"), 0);
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

/* An array written through its .npy view by one thread while two others
 * read it: every byte read is 0 (not written yet) or its pattern value;
 * the pool compresses completed chunks meanwhile (TSan runs this). */
#define AR_ROWS 600
#define AR_COLS 300
static uint8_t pat(int64_t x) { return (uint8_t)((x * 7 + 3) | 1); }
typedef struct {
  b2_file *f;
  size_t hl;
  _Atomic int done;
  int bad;
} ar_ctx;

static void *ar_reader(void *arg) {
  ar_ctx *c = arg;
  uint64_t s = (uint64_t)(uintptr_t)&s | 1;
  uint8_t *buf = malloc(70000);
  while (!atomic_load(&c->done)) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    int64_t n = (int64_t)(AR_ROWS * AR_COLS * 4), off = (int64_t)(s % (uint64_t)n);
    size_t len = (size_t)B2_MIN(n - off, (int64_t)(s >> 40) % 70000 + 1);
    ssize_t k = b2_file_pread(c->f, buf, len, (int64_t)c->hl + off);
    if (k != (ssize_t)len) c->bad++;
    for (ssize_t i = 0; i < k; i++)
      if (buf[i] && buf[i] != pat(off + i)) c->bad++;
  }
  free(buf);
  return NULL;
}

static void test_array_concurrent(void) {
  char path[300];
  snprintf(path, sizeof path, "%s/conc.b2nd", dir);
  b2_env_opts o;
  b2_env_opts_default(&o);
  o.cache_size = 4u << 20;
  o.dirty_max = 1u << 20;
  b2_env *env;
  CHECK_EQ(b2_env_create(&o, &env), 0);
  int64_t shape[2] = {AR_ROWS, AR_COLS};
  int32_t cs[2] = {64, 300}, bs[2] = {10, 100};
  b2_b2nd a;
  CHECK_EQ(b2_b2nd_make(&a, 2, shape, cs, bs, 4, "<u4"), 0);
  char hdr[256];
  int hl = b2_npy_header(&a, hdr, sizeof hdr);
  b2_b2nd_free(&a);
  CHECK(hl > 0);
  ar_ctx c = {NULL, (size_t)hl, 0, 0};
  CHECK_EQ(b2_file_create_npy(env, path, NULL, &c.f), 0);
  CHECK_EQ(b2_file_set_param(c.f, "chunkshape", "64,300"), 0);
  CHECK_EQ(b2_file_set_param(c.f, "blockshape", "10,100"), 0);
  CHECK_EQ(b2_file_pwrite(c.f, hdr, (size_t)hl, 0), hl);
  pthread_t th[2];
  for (int k = 0; k < 2; k++) pthread_create(&th[k], NULL, ar_reader, &c);
  int64_t n = AR_ROWS * AR_COLS * 4;
  uint8_t *src = malloc((size_t)n);
  for (int64_t x = 0; x < n; x++) src[x] = pat(x);
  for (int64_t off = 0; off < n;) {
    int64_t r = (int64_t)(rnd() % 50000) + 1, len = B2_MIN(n - off, r);
    CHECK_EQ(b2_file_pwrite(c.f, src + off, (size_t)len, hl + off), len);
    off += len;
    if (rnd() % 8 == 0) CHECK_EQ(b2_file_flush(c.f), 0);
  }
  atomic_store(&c.done, 1);
  for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);
  CHECK_EQ(c.bad, 0);
  CHECK_EQ(b2_file_close(c.f), 0);
  b2_file *f;
  CHECK_EQ(b2_file_open(env, path, B2_VIEW_CORDER, B2_OPEN_RDONLY, &f), 0);
  uint8_t *got = malloc((size_t)n);
  CHECK_EQ(b2_file_pread(f, got, (size_t)n, 0), n);
  CHECK(memcmp(got, src, (size_t)n) == 0);
  b2_file_close(f);
  free(got);
  free(src);
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
  T_RUN(test_array_concurrent);
  T_RUN(test_exercise_zstd_contiguous);
  T_RUN(test_exercise_lz4_sparse);
  T_RUN(test_exercise_blosclz_contiguous);
  T_RUN(test_exercise_zlib_sparse);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) return 1;
  T_END();
}
