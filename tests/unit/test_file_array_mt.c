/*
 * test_file_array_mt.c - writing b2nd arrays through file handles: new .npy
 * files streamed in pieces become arrays (or plain frames when their
 * header cannot), array views take random writes against a C-order
 * shadow, resize by whole rows, refuse header changes and other sizes,
 * and keep all of it across reopening.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "b2_b2nd.h"
#include "b2_error.h"
#include "b2_file.h"
#include "b2_frame.h"
#include "common/util.h"
#include "t.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) { return t_xorshift64(&rng_state); }
static int64_t rnd_in(int64_t lo, int64_t hi) { return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1)); }

static char dir[256];

/* A .npy file in memory: header for shape/dtype, then random items. */
static uint8_t *npy_bytes(int ndim, const int64_t *shape, int32_t isz, const char *dtype,
                          size_t *hl, size_t *total) {
  int32_t cs[B2_B2ND_MAXDIM] = {0}, bs[B2_B2ND_MAXDIM] = {0};
  b2_b2nd a;
  if (b2_b2nd_choose_shapes(ndim, shape, isz, 1, cs, bs) < 0 ||
      b2_b2nd_make(&a, ndim, shape, cs, bs, isz, dtype) < 0)
    return NULL;
  int n = b2_npy_header(&a, NULL, 0);
  size_t nb = (size_t)b2_b2nd_nbytes(&a);
  uint8_t *p = malloc((size_t)n + nb + 1);
  b2_npy_header(&a, (char *)p, (size_t)n);
  for (size_t i = 0; i < nb; i++) p[n + i] = (uint8_t)rnd();
  b2_b2nd_free(&a);
  *hl = (size_t)n;
  *total = (size_t)n + nb;
  return p;
}

/* Write buf in C order in pieces of random sizes. */
static int stream(b2_file *f, const uint8_t *buf, size_t n) {
  for (size_t o = 0; o < n;) {
    int64_t r = rnd_in(1, 70000);
    size_t k = (size_t)B2_MIN((int64_t)(n - o), r);
    if (b2_file_pwrite(f, buf + o, k, (int64_t)o) != (ssize_t)k) return -1;
    o += k;
  }
  return 0;
}

/* The whole view of the file at path equals want (len bytes). */
static int view_is(b2_env *env, const char *path, int view, const uint8_t *want, size_t len) {
  b2_file *f;
  if (b2_file_open(env, path, view, B2_OPEN_RDONLY, &f) < 0) return 0;
  uint8_t *got = malloc(len + 1);
  int same = b2_file_size(f) == (int64_t)len && b2_file_pread(f, got, len, 0) == (ssize_t)len &&
             memcmp(got, want, len) == 0;
  free(got);
  b2_file_close(f);
  return same;
}

/* A new .npy file at DIR/name with the chunk and block shapes given. */
static b2_file *create_shaped(b2_env *env, const char *name, const char *cs, const char *bs,
                              char *path, size_t cap) {
  snprintf(path, cap, "%s/%s", dir, name);
  b2_file *f = NULL;
  CHECK_EQ(b2_file_create_npy(env, path, NULL, &f), 0);
  CHECK_EQ(b2_file_set_param(f, "chunkshape", cs), 0);
  CHECK_EQ(b2_file_set_param(f, "blockshape", bs), 0);
  return f;
}

static void test_new_npy_streamed(void) {
  b2_env *env;
  CHECK_EQ(b2_env_create(NULL, &env), 0);
  static const int64_t s3[] = {37, 501, 13};
  size_t hl, n;
  uint8_t *npy = npy_bytes(3, s3, 4, "<f4", &hl, &n);
  char path[300];
  b2_file *f = create_shaped(env, "s.b2nd", "10,100,13", "5x20x13", path, sizeof path);
  CHECK_EQ(b2_file_set_param(f, "blockshape", "0,1"), B2_E_INVAL);
  CHECK_EQ(stream(f, npy, n), 0);
  CHECK_EQ(b2_file_size(f), (int64_t)n);
  CHECK_EQ(b2_file_set_param(f, "chunkshape", "1,1,1"), B2_E_BUSY);
  char note[256];
  CHECK_EQ(b2_file_take_note(f, note, sizeof note), 0);
  CHECK_EQ(b2_file_close(f), 0);
  CHECK(view_is(env, path, B2_VIEW_NPY, npy, n));
  CHECK(view_is(env, path, B2_VIEW_CORDER, npy + hl, n - hl));
  CHECK_EQ(b2_file_open(env, path, B2_VIEW_CORDER, B2_OPEN_RDONLY, &f), 0);
  const b2_b2nd *a = b2_file_array(f);
  CHECK(a && a->chunkshape[0] == 10 && a->chunkshape[1] == 100 && a->blockshape[1] == 20);
  CHECK(a && !strcmp(a->dtype, "<f4"));
  CHECK_EQ(b2_frame_check(b2_file_frame(f)), 0);
  b2_file_close(f);
  free(npy);

  /* Default shapes; the header in two pieces, items in reverse order. */
  static const int64_t s2[] = {3000, 700};
  npy = npy_bytes(2, s2, 8, "<i8", &hl, &n);
  snprintf(path, sizeof path, "%s/r.b2nd", dir);
  CHECK_EQ(b2_file_create_npy(env, path, NULL, &f), 0);
  CHECK_EQ(b2_file_pwrite(f, npy, 7, 0), 7);
  CHECK_EQ(b2_file_pwrite(f, npy + 7, hl - 7, 7), (ssize_t)(hl - 7));
  for (size_t e = n; e > hl;) {
    int64_t r = rnd_in(1, 300000);
    size_t k = (size_t)B2_MIN((int64_t)(e - hl), r);
    ssize_t w = b2_file_pwrite(f, npy + e - k, k, (int64_t)(e - k));
    if (w != (ssize_t)k) fprintf(stderr, "  %s\n", b2_last_detail());
    CHECK_EQ(w, (ssize_t)k);
    e -= k;
  }
  CHECK_EQ(b2_file_close(f), 0);
  CHECK(view_is(env, path, B2_VIEW_NPY, npy, n));
  free(npy);
  b2_env_destroy(env);
}

static void test_new_npy_fallback(void) {
  b2_env *env;
  CHECK_EQ(b2_env_create(NULL, &env), 0);
  static const int64_t s2[] = {4, 5};
  size_t hl, n;
  uint8_t *npy = npy_bytes(2, s2, 8, "<f8", &hl, &n);
  char *fo = memmem(npy, hl, "False", 5);
  CHECK(fo != NULL);
  if (fo) memcpy(fo, "True ", 5); /* Fortran order, same length */
  char path[300], note[256];
  snprintf(path, sizeof path, "%s/fortran.b2nd", dir);
  b2_file *f;
  CHECK_EQ(b2_file_create_npy(env, path, NULL, &f), 0);
  CHECK_EQ(stream(f, npy, n), 0);
  CHECK_EQ(b2_file_take_note(f, note, sizeof note), 1);
  CHECK(strstr(note, "Fortran") != NULL);
  CHECK_EQ(b2_file_close(f), 0);
  CHECK(view_is(env, path, B2_VIEW_NPY, npy, n));
  CHECK(view_is(env, path, B2_VIEW_LOGICAL, npy, n));

  /* An incomplete header at close: the bytes, as they are. */
  snprintf(path, sizeof path, "%s/short.b2nd", dir);
  CHECK_EQ(b2_file_create_npy(env, path, NULL, &f), 0);
  CHECK_EQ(b2_file_pwrite(f, npy, 20, 0), 20);
  uint8_t back[20];
  CHECK_EQ(b2_file_pread(f, back, 20, 0), 20);
  CHECK_MEM(back, npy, 20);
  CHECK_EQ(b2_file_flush(f), 0);
  CHECK_EQ(b2_file_take_note(f, note, sizeof note), 1);
  CHECK(strstr(note, "incomplete") != NULL);
  CHECK_EQ(b2_file_close(f), 0);
  CHECK(view_is(env, path, B2_VIEW_NPY, npy, 20));

  /* Not a .npy at all. */
  snprintf(path, sizeof path, "%s/text.b2nd", dir);
  CHECK_EQ(b2_file_create_npy(env, path, NULL, &f), 0);
  CHECK_EQ(b2_file_pwrite(f, "hello world\n", 12, 0), 12);
  CHECK_EQ(b2_file_take_note(f, note, sizeof note), 1);
  CHECK_EQ(b2_file_close(f), 0);
  CHECK(view_is(env, path, B2_VIEW_NPY, (const uint8_t *)"hello world\n", 12));
  /* numpy.save over it (truncate to 0, then a valid file): an array. */
  static const int64_t s1[] = {999};
  size_t hl1, n1;
  uint8_t *good = npy_bytes(1, s1, 2, "<i2", &hl1, &n1);
  CHECK_EQ(b2_file_open(env, path, B2_VIEW_NPY, B2_OPEN_RDWR, &f), 0);
  CHECK_EQ(b2_file_truncate(f, 0), 0);
  CHECK_EQ(stream(f, good, n1), 0);
  CHECK_EQ(b2_file_close(f), 0);
  CHECK(view_is(env, path, B2_VIEW_CORDER, good + hl1, n1 - hl1));
  /* An empty new .npy file (touch), shapes set afterwards, then data. */
  snprintf(path, sizeof path, "%s/touched.b2nd", dir);
  CHECK_EQ(b2_file_create_npy(env, path, NULL, &f), 0);
  CHECK_EQ(b2_file_truncate(f, 0), 0); /* before any byte: nothing held (fsx) */
  CHECK_EQ(b2_file_pwrite(f, good, 0, 0), 0);
  CHECK_EQ(b2_file_size(f), 0);
  CHECK_EQ(b2_file_close(f), 0);
  CHECK_EQ(b2_file_open(env, path, B2_VIEW_NPY, B2_OPEN_RDWR, &f), 0);
  CHECK_EQ(b2_file_set_param(f, "chunkshape", "100"), 0);
  CHECK_EQ(b2_file_set_param(f, "codec", "lz4"), 0);
  CHECK_EQ(b2_file_close(f), 0);
  CHECK_EQ(b2_file_open(env, path, B2_VIEW_NPY, B2_OPEN_RDWR, &f), 0);
  CHECK_EQ(b2_file_set_param(f, "blockshape", "20"), 0);
  CHECK_EQ(stream(f, good, n1), 0);
  CHECK_EQ(b2_file_close(f), 0);
  CHECK_EQ(b2_file_open(env, path, B2_VIEW_CORDER, B2_OPEN_RDONLY, &f), 0);
  const b2_b2nd *a = b2_file_array(f);
  CHECK(a && a->chunkshape[0] == 100 && a->blockshape[0] == 20);
  b2_file_close(f);
  CHECK(view_is(env, path, B2_VIEW_NPY, good, n1));
  free(good);
  free(npy);
  b2_env_destroy(env);
}

/* A .npy header no array can store (items larger than the largest block
 * the format allows): the bytes written are kept as a plain frame, the
 * close succeeds, and nothing of it stays behind to hold up other
 * writers (one such file used to leave its unwritable chunk counted as
 * dirty, and the next new .npy lost its items with no error). */
static void test_new_npy_unencodable(void) {
  b2_env *env;
  CHECK_EQ(b2_env_create(NULL, &env), 0);
  static const char *descrs[] = {"|V2000000000", "|V600000000", "<U200000000"};
  for (size_t i = 0; i < sizeof descrs / sizeof *descrs; i++) {
    char hdr[256];
    int k = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (3,), }",
                     descrs[i]);
    size_t hl = 10 + (size_t)k + 1;
    hl += (64 - hl % 64) % 64;
    uint8_t buf[512];
    memset(buf, ' ', hl);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (uint8_t)((hl - 10) & 0xff);
    buf[9] = (uint8_t)((hl - 10) >> 8);
    memcpy(buf + 10, hdr, (size_t)k);
    buf[hl - 1] = '\n';
    memset(buf + hl, 'x', 100);
    size_t n = hl + 100;
    char path[300], note[256];
    snprintf(path, sizeof path, "%s/big%zu.b2nd", dir, i);
    b2_file *f;
    CHECK_EQ(b2_file_create_npy(env, path, NULL, &f), 0);
    CHECK_EQ(b2_file_pwrite(f, buf, n, 0), (ssize_t)n);
    CHECK_EQ(b2_file_take_note(f, note, sizeof note), 1);
    CHECK(strstr(note, "the format holds at most") != NULL);
    CHECK_EQ(b2_file_close(f), 0);
    CHECK(view_is(env, path, B2_VIEW_NPY, buf, n));
    CHECK(view_is(env, path, B2_VIEW_LOGICAL, buf, n));
  }
  /* Other writers are not held up: a new array after them keeps its items. */
  static const int64_t s1[] = {5000};
  size_t hl, n;
  uint8_t *good = npy_bytes(1, s1, 8, "<f8", &hl, &n);
  char path[300];
  snprintf(path, sizeof path, "%s/after.b2nd", dir);
  b2_file *f;
  CHECK_EQ(b2_file_create_npy(env, path, NULL, &f), 0);
  CHECK_EQ(stream(f, good, n), 0);
  CHECK_EQ(b2_file_close(f), 0);
  CHECK(view_is(env, path, B2_VIEW_CORDER, good + hl, n - hl));
  free(good);
  b2_env_destroy(env);
}

/* Items written before their .npy header are held until it comes, then
 * stored through the cache.  When that fails (here: the dirty limit is
 * held by another file's chunks, which a file size limit keeps from being
 * written back), the writer is told: the write that completed the header
 * fails, and so does every flush and the close.  They used to be dropped
 * with a log line only, every call succeeding and the items reading as
 * zeros. */
static void test_new_npy_held_lost(void) {
  struct rlimit old;
  CHECK_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  void (*oldsig)(int) = signal(SIGXFSZ, SIG_IGN);
  b2_env_opts o;
  b2_env_opts_default(&o);
  o.cache_size = 4u << 20;
  o.dirty_max = 1u << 20;
  o.nthreads = 0;
  o.idle_ms = 0;
  b2_env *env;
  CHECK_EQ(b2_env_create(&o, &env), 0);
  /* Y: 3 MiB of random bytes in 256 KiB chunks, which cannot be written
   * back past the limit of 512 KiB per file. */
  char ypath[300], path[300];
  snprintf(ypath, sizeof ypath, "%s/y.b2frame", dir);
  b2_frame_params yp;
  b2_frame_params_default(&yp);
  yp.chunksize = 256 << 10;
  yp.cparams.codec = B2_CODEC_LZ4;
  b2_file *y;
  CHECK_EQ(b2_file_create(env, ypath, &yp, &y), 0);
  size_t yn = 3u << 20;
  uint8_t *ybuf = malloc(yn);
  for (size_t i = 0; i < yn; i++) ybuf[i] = (uint8_t)rnd();
  struct rlimit lim = {512 << 10, old.rlim_max};
  CHECK_EQ(setrlimit(RLIMIT_FSIZE, &lim), 0);
  for (size_t off = 0; off < yn; off += 256 << 10)
    (void)b2_file_pwrite(y, ybuf + off, 256 << 10, (int64_t)off);
  CHECK(b2_file_flush(y) < 0);
  /* X: a new .npy file, its items first, then its header. */
  static const int64_t s1[] = {40000};
  size_t hl, n;
  uint8_t *npy = npy_bytes(1, s1, 8, "<i8", &hl, &n);
  snprintf(path, sizeof path, "%s/held.b2nd", dir);
  b2_file *f;
  CHECK_EQ(b2_file_create_npy(env, path, NULL, &f), 0);
  CHECK_EQ(b2_file_pwrite(f, npy + hl, n - hl, (int64_t)hl), (ssize_t)(n - hl));
  ssize_t w = b2_file_pwrite(f, npy, hl, 0);
  int told = w != (ssize_t)hl;
  CHECK(told);
  /* Y gives up; the disk is fine again; X's items are still lost. */
  CHECK_EQ(setrlimit(RLIMIT_FSIZE, &old), 0);
  b2_file_close(y);
  if (told) CHECK(b2_file_flush(f) < 0);
  int crc = b2_file_close(f);
  if (crc == 0) CHECK(view_is(env, path, B2_VIEW_NPY, npy, n)); /* else told */
  CHECK(told || crc < 0 || view_is(env, path, B2_VIEW_NPY, npy, n));
  b2_env_destroy(env);
  signal(SIGXFSZ, oldsig);
  free(npy);
  free(ybuf);
}

/* An existing array's .npy view: random writes against a shadow, header
 * writes, resizes by rows, refusals; reopened after each round. */
static void test_edit_array(void) {
  b2_env_opts o;
  b2_env_opts_default(&o);
  o.cache_size = 2u << 20; /* evictions of dirty chunks too */
  o.dirty_max = 1u << 20;
  b2_env *env;
  CHECK_EQ(b2_env_create(&o, &env), 0);
  static const int64_t s2[] = {1000, 333};
  size_t hl, n;
  uint8_t *shadow = npy_bytes(2, s2, 2, "<u2", &hl, &n);
  char path[300];
  b2_file *f = create_shaped(env, "edit.b2nd", "64,100", "16,30", path, sizeof path);
  CHECK_EQ(stream(f, shadow, n), 0);
  CHECK_EQ(b2_file_close(f), 0);
  int64_t rowb = 333 * 2;
  uint8_t *buf = malloc(1 << 20);
  for (int round = 0; round < 4; round++) {
    CHECK_EQ(b2_file_open(env, path, B2_VIEW_NPY, B2_OPEN_RDWR, &f), 0);
    for (int w = 0; w < 60; w++) {
      int64_t off = rnd_in((int64_t)hl, (int64_t)n - 1);
      int64_t len = rnd_in(1, B2_MIN((int64_t)n - off, 200000));
      for (int64_t i = 0; i < len; i++) buf[i] = (uint8_t)rnd();
      CHECK_EQ(b2_file_pwrite(f, buf, (size_t)len, off), len);
      memcpy(shadow + off, buf, (size_t)len);
    }
    /* The header: the same bytes pass (test_append_rows has the rest). */
    CHECK_EQ(b2_file_pwrite(f, shadow, hl + 10, 0), (ssize_t)(hl + 10));
    /* A size inside a row: zeros past the old end, the header as it was. */
    CHECK_EQ(b2_file_truncate(f, (int64_t)n + 3), 0);
    uint8_t z[3] = {1, 1, 1};
    CHECK_EQ(b2_file_pread(f, z, 3, (int64_t)n), 3);
    CHECK(z[0] == 0 && z[1] == 0 && z[2] == 0);
    CHECK_EQ(b2_file_pread(f, buf, hl, 0), (ssize_t)hl);
    CHECK(memcmp(buf, shadow, hl) == 0);
    /* Rows: cut some, grow some (new rows read as zeros). */
    int64_t rows = ((int64_t)n - (int64_t)hl) / rowb;
    int64_t step = rnd_in(1, 150);
    int64_t nrows = round % 2 ? rows + step : rows - step;
    size_t nn = hl + (size_t)(nrows * rowb);
    CHECK_EQ(b2_file_truncate(f, (int64_t)nn), 0);
    if (nn > n) {
      shadow = realloc(shadow, nn);
      memset(shadow + n, 0, nn - n);
    }
    n = nn;
    CHECK_EQ(b2_file_size(f), (int64_t)n);
    uint8_t *got = malloc(n);
    CHECK_EQ(b2_file_pread(f, got, n, 0), (ssize_t)n);
    CHECK(memcmp(got + hl, shadow + hl, n - hl) == 0);
    memcpy(shadow, got, hl); /* the header with the new shape */
    CHECK_EQ(b2_file_flush(f), 0);
    CHECK_EQ(b2_file_pread(f, got, n, 0), (ssize_t)n);
    CHECK(memcmp(got, shadow, n) == 0);
    CHECK(view_is(env, path, B2_VIEW_NPY, shadow, n));
    free(got);
    CHECK_EQ(b2_file_close(f), 0);
    CHECK(view_is(env, path, B2_VIEW_NPY, shadow, n));
    CHECK_EQ(b2_file_open(env, path, B2_VIEW_CORDER, B2_OPEN_RDONLY, &f), 0);
    CHECK(b2_file_array(f) && b2_file_array(f)->shape[0] == nrows);
    CHECK_EQ(b2_frame_check(b2_file_frame(f)), 0);
    b2_file_close(f);
  }
  /* Truncated to 0 and written anew: another array. */
  static const int64_t s1[] = {77};
  size_t hl2, n2;
  uint8_t *npy2 = npy_bytes(1, s1, 1, "|i1", &hl2, &n2);
  CHECK_EQ(b2_file_open(env, path, B2_VIEW_NPY, B2_OPEN_RDWR, &f), 0);
  CHECK_EQ(b2_file_truncate(f, 0), 0);
  CHECK_EQ(b2_file_size(f), 0);
  CHECK_EQ(stream(f, npy2, n2), 0);
  CHECK_EQ(b2_file_close(f), 0);
  CHECK(view_is(env, path, B2_VIEW_NPY, npy2, n2));
  free(npy2);
  free(buf);
  free(shadow);
  b2_env_destroy(env);
}

/* A header written slowly: the idle flusher leaves the held bytes alone. */
static void test_new_npy_slow_header(void) {
  b2_env_opts o;
  b2_env_opts_default(&o);
  o.idle_ms = 20;
  b2_env *env;
  CHECK_EQ(b2_env_create(&o, &env), 0);
  static const int64_t s1[] = {5000};
  size_t hl, n;
  uint8_t *npy = npy_bytes(1, s1, 4, "<i4", &hl, &n);
  char path[300];
  snprintf(path, sizeof path, "%s/slow.b2nd", dir);
  b2_file *f;
  CHECK_EQ(b2_file_create_npy(env, path, NULL, &f), 0);
  CHECK_EQ(b2_file_pwrite(f, npy, 30, 0), 30);
  usleep(300 * 1000);
  CHECK_EQ(stream(f, npy, n), 0);
  char note[256];
  CHECK_EQ(b2_file_take_note(f, note, sizeof note), 0);
  CHECK_EQ(b2_file_close(f), 0);
  CHECK_EQ(b2_file_open(env, path, B2_VIEW_NPY, B2_OPEN_RDONLY, &f), 0);
  CHECK(b2_file_array(f) != NULL);
  b2_file_close(f);
  CHECK(view_is(env, path, B2_VIEW_NPY, npy, n));
  free(npy);
  b2_env_destroy(env);
}

/* One write larger than the bytes a new .npy file holds before its header
 * settles (a program writing the whole file at once through the library):
 * the array it describes, not a recursion; and a first write far past the
 * start: a plain file of its bytes. */
static void test_new_npy_one_write(void) {
  b2_env *env;
  CHECK_EQ(b2_env_create(NULL, &env), 0);
  static const int64_t s2[] = {1500, 333};
  size_t hl, n;
  uint8_t *npy = npy_bytes(2, s2, 8, "<f8", &hl, &n);
  char path[300];
  snprintf(path, sizeof path, "%s/one.b2nd", dir);
  b2_file *f;
  CHECK_EQ(b2_file_create_npy(env, path, NULL, &f), 0);
  CHECK_EQ(b2_file_pwrite(f, npy, n, 0), (ssize_t)n);
  CHECK_EQ(b2_file_size(f), (int64_t)n);
  CHECK_EQ(b2_file_close(f), 0);
  CHECK(view_is(env, path, B2_VIEW_NPY, npy, n));
  CHECK(view_is(env, path, B2_VIEW_CORDER, npy + hl, n - hl));

  snprintf(path, sizeof path, "%s/far.b2nd", dir);
  CHECK_EQ(b2_file_create_npy(env, path, NULL, &f), 0);
  const int64_t at = 3 << 20;
  CHECK_EQ(b2_file_pwrite(f, npy, 5000, at), 5000);
  CHECK_EQ(b2_file_size(f), at + 5000);
  CHECK_EQ(b2_file_close(f), 0);
  uint8_t *want = calloc(1, (size_t)at + 5000);
  memcpy(want + at, npy, 5000);
  CHECK(view_is(env, path, B2_VIEW_NPY, want, (size_t)at + 5000));
  free(want);
  free(npy);
  b2_env_destroy(env);
}

/* Wait up to 3 s for the frame of f to store more than `than` bytes (a
 * chunk compressed in the background); returns what it stores. */
static int64_t stored_after(b2_file *f, int64_t than) {
  int64_t stored = 0;
  for (int i = 0; i < 300; i++) {
    if (b2_file_dead_bytes(f, &stored) < 0 || stored > than) break;
    usleep(10 * 1000);
  }
  return stored;
}

/* Pieces of a chunk written out of order, as the kernel's write-back of a
 * mapping sends them on several threads: the piece reaching the chunk's
 * end, right after the one before it, does not make the chunk compressed
 * while its first piece is missing (it was, and compressed again when that
 * piece came: dead bytes); the chunk is compressed once its pieces fill it,
 * before any flush.  An array's chunk, then a plain frame's. */
static void test_pieces_out_of_order(void) {
  b2_env_opts o;
  b2_env_opts_default(&o);
  o.idle_ms = 0;
  b2_env *env;
  CHECK_EQ(b2_env_create(&o, &env), 0);
  static const int64_t s1[] = {3 << 19}; /* 12 MiB of <i8: 3 chunks */
  size_t hl, n;
  uint8_t *npy = npy_bytes(1, s1, 8, "<i8", &hl, &n);
  char path[300];
  snprintf(path, sizeof path, "%s/pieces.b2nd", dir);
  b2_file *f;
  CHECK_EQ(b2_file_create_npy(env, path, NULL, &f), 0);
  CHECK_EQ(b2_file_pwrite(f, npy, hl, 0), (ssize_t)hl);
  const size_t cb = (size_t)4 << 20, q = cb / 4; /* chunk bytes, a piece */
  int64_t stored0 = 0;
  CHECK(b2_file_dead_bytes(f, &stored0) >= 0);
  for (int k = 1; k < 4; k++) /* pieces 1, 2, 3 of chunk 1, in order */
    CHECK_EQ(b2_file_pwrite(f, npy + hl + cb + k * q, q, (int64_t)(hl + cb + k * q)), (ssize_t)q);
  usleep(200 * 1000); /* a compression started by the last one ends here */
  CHECK_EQ(b2_file_pwrite(f, npy + hl + cb, q, (int64_t)(hl + cb)), (ssize_t)q);
  CHECK(stored_after(f, stored0 + (int64_t)cb / 2) > stored0 + (int64_t)cb / 2);
  CHECK_EQ(b2_file_pwrite(f, npy + hl, cb, (int64_t)hl), (ssize_t)cb);
  CHECK_EQ(b2_file_pwrite(f, npy + hl + 2 * cb, n - hl - 2 * cb, (int64_t)(hl + 2 * cb)),
           (ssize_t)(n - hl - 2 * cb));
  CHECK_EQ(b2_file_flush(f), 0);
  int64_t dead = b2_file_dead_bytes(f, NULL);
  CHECK(dead >= 0 && dead < 4096); /* old indexes and trailers, no chunk */
  /* A page written back again as it was (one straddling two chunks)
   * leaves the chunks as they were: nothing compressed again. */
  CHECK_EQ(b2_file_pwrite(f, npy + hl + cb - 100, 4096, (int64_t)(hl + cb - 100)), 4096);
  CHECK_EQ(b2_file_flush(f), 0);
  CHECK(b2_file_dead_bytes(f, NULL) < 8192);
  CHECK_EQ(b2_file_close(f), 0);
  CHECK(view_is(env, path, B2_VIEW_NPY, npy, n));

  snprintf(path, sizeof path, "%s/pieces.b2frame", dir);
  CHECK_EQ(b2_file_create(env, path, NULL, &f), 0);
  const size_t pc = (size_t)1 << 20, pq = pc / 4; /* the default chunk size */
  CHECK_EQ(b2_file_pwrite(f, npy, 2 * pc, 0), (ssize_t)(2 * pc));
  CHECK_EQ(b2_file_flush(f), 0);
  CHECK(b2_file_dead_bytes(f, &stored0) >= 0);
  for (int k = 1; k < 4; k++) /* chunk 1 again: pieces 1, 2, 3, then 0 */
    CHECK_EQ(b2_file_pwrite(f, npy + 3 * pc + k * pq, pq, (int64_t)(pc + k * pq)), (ssize_t)pq);
  usleep(200 * 1000);
  CHECK_EQ(b2_file_pwrite(f, npy + 3 * pc, pq, (int64_t)pc), (ssize_t)pq);
  CHECK(stored_after(f, stored0 + (int64_t)pc / 2) > stored0 + (int64_t)pc / 2);
  CHECK_EQ(b2_file_flush(f), 0);
  dead = b2_file_dead_bytes(f, NULL);
  CHECK(dead > 0 && dead < (int64_t)pc + 4096); /* the old chunk 1 once, old indexes */
  CHECK_EQ(b2_file_pwrite(f, npy + 3 * pc + 5, 4096, (int64_t)pc + 5), 4096); /* as it was */
  CHECK_EQ(b2_file_flush(f), 0);
  CHECK(b2_file_dead_bytes(f, NULL) < dead + 4096);
  CHECK_EQ(b2_file_close(f), 0);
  uint8_t *want = malloc(2 * pc);
  memcpy(want, npy, pc);
  memcpy(want + pc, npy + 3 * pc, pc);
  CHECK(view_is(env, path, B2_VIEW_LOGICAL, want, 2 * pc));
  free(want);
  free(npy);
  b2_env_destroy(env);
}

/* A C-order writer of an array in cubes (a row of chunks larger than the
 * cache) is inside every chunk of the row at once: chunks pushed out of
 * the cache are parked uncompressed (spill.c), not compressed into the
 * frame again and again.  Every chunk reaches the frame once (no dead
 * bytes after a new array's flush; at most one old version of each after
 * a rewrite), reads during the writes see every byte written, and a
 * resize by rows in the middle keeps them. */
static void test_cube_writer(void) {
  b2_env_opts o;
  b2_env_opts_default(&o);
  o.cache_size = 1u << 20; /* a row of chunks: 40 x 64 KiB */
  o.dirty_max = 256u << 10;
  b2_env *env;
  CHECK_EQ(b2_env_create(&o, &env), 0);
  static const int64_t s3[] = {64, 160, 64};
  size_t hl, n;
  uint8_t *npy = npy_bytes(3, s3, 4, "<f4", &hl, &n);
  for (size_t i = hl; i < n; i++) npy[i] = (uint8_t)(i % 251 < 40 ? i : 0); /* compressible */
  char path[300];
  b2_file *f = create_shaped(env, "cube.b2nd", "16,16,16", "4,16,16", path, sizeof path);
  uint8_t *got = malloc(n);
  struct stat st;
  int reads_ok = 1;
  for (size_t o2 = 0; o2 < n;) { /* C order, reading back behind and ahead */
    size_t r = (size_t)rnd_in(1, 40000), k = B2_MIN(r, n - o2);
    CHECK_EQ(b2_file_pwrite(f, npy + o2, k, (int64_t)o2), (ssize_t)k);
    o2 += k;
    if (o2 > hl + 1000 && rnd() % 8 == 0) {
      int64_t at = rnd_in((int64_t)hl, (int64_t)o2 - 1000);
      reads_ok &= b2_file_pread(f, got, 1000, at) == 1000 && !memcmp(got, npy + at, 1000);
    }
  }
  CHECK(reads_ok);
  CHECK_EQ(b2_file_flush(f), 0);
  int64_t dead = b2_file_dead_bytes(f, NULL);
  CHECK_EQ(stat(path, &st), 0);
  CHECK(dead * 20 < st.st_size); /* each chunk stored about once */
  CHECK_EQ(b2_file_pread(f, got, n, 0), (ssize_t)n);
  CHECK_MEM(got, npy, n);
  CHECK_EQ(b2_file_close(f), 0);
  CHECK(view_is(env, path, B2_VIEW_NPY, npy, n));
  CHECK_EQ(stat(path, &st), 0);
  int64_t first = st.st_size;

  /* Rewritten in C order through an open array, grown by rows midway. */
  CHECK_EQ(b2_file_open(env, path, B2_VIEW_NPY, B2_OPEN_RDWR, &f), 0);
  for (size_t i = hl; i < n; i++) npy[i] = (uint8_t)(npy[i] + 1);
  size_t half = hl + (n - hl) / 2 + 12345;
  for (size_t o2 = hl; o2 < half;) {
    size_t k = B2_MIN((size_t)65536, half - o2);
    CHECK_EQ(b2_file_pwrite(f, npy + o2, k, (int64_t)o2), (ssize_t)k);
    o2 += k;
  }
  int64_t rowb = 160 * 64 * 4;
  CHECK_EQ(b2_file_truncate(f, (int64_t)n + rowb), 0);
  CHECK_EQ(b2_file_pread(f, got, half, 0), (ssize_t)half);
  CHECK_MEM(got + hl, npy + hl, half - hl); /* the header says 65 rows now */
  for (size_t o2 = half; o2 < n;) {
    size_t k = B2_MIN((size_t)65536, n - o2);
    CHECK_EQ(b2_file_pwrite(f, npy + o2, k, (int64_t)o2), (ssize_t)k);
    o2 += k;
  }
  CHECK_EQ(b2_file_flush(f), 0);
  CHECK(b2_file_dead_bytes(f, NULL) <= first);
  CHECK_EQ(b2_file_close(f), 0);
  uint8_t *want = calloc(1, n + (size_t)rowb);
  memcpy(want, npy, n);
  /* the header now says 65 rows */
  CHECK_EQ(b2_file_open(env, path, B2_VIEW_CORDER, B2_OPEN_RDONLY, &f), 0);
  CHECK_EQ(b2_file_size(f), (int64_t)(n - hl) + rowb);
  CHECK_EQ(b2_file_pread(f, got, n - hl, 0), (ssize_t)(n - hl));
  CHECK_MEM(got, want + hl, n - hl);
  CHECK_EQ(b2_file_close(f), 0);
  free(want);
  free(got);
  free(npy);
  b2_env_destroy(env);
}

/* A .npy header for a 40 x 30 <f8 array (or `shape`, `descr`, `order`)
 * spelled as cnpy spells it: padded to 16 bytes.  Its length. */
static size_t cnpy_header(char *out, const char *descr, const char *order, const char *shape) {
  char dict[200];
  int d = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': %s, 'shape': (%s), }",
                   descr, order, shape);
  size_t pad = (16 - (10 + (size_t)d + 1) % 16) % 16, hlen = (size_t)d + pad + 1;
  memcpy(out, "\x93NUMPY\x01\x00", 8);
  out[8] = (char)(hlen & 0xff);
  out[9] = (char)(hlen >> 8);
  memcpy(out + 10, dict, (size_t)d);
  memset(out + 10 + d, ' ', pad);
  out[10 + hlen - 1] = '\n';
  return 10 + hlen;
}

/* Set vlmetalayer B2_NPY_HEADER_VLMETA of the frame at path to v. */
static void set_kept(const char *path, const void *v, size_t len) {
  b2_frame *fr = NULL;
  CHECK_EQ(b2_frame_open_rw(path, &fr), 0);
  if (!fr) return;
  CHECK_EQ(b2_frame_vlmeta_set(fr, B2_NPY_HEADER_VLMETA, v, len), 0);
  CHECK_EQ(b2_frame_commit(fr), 0);
  b2_frame_close(fr);
}

/* A header spelled otherwise than numpy.save's is kept and shown after
 * the close; a kept value that is damaged or describes another array
 * (untrusted: it is in the file) gives numpy.save's header instead; a
 * resize by rows keeps the header's length. */
static void test_kept_header(void) {
  b2_env *env;
  CHECK_EQ(b2_env_create(NULL, &env), 0);
  char hdr[256], other[256], path[300];
  size_t hl = cnpy_header(hdr, "<f8", "False", "40, 30"), nb = 40 * 30 * 8;
  uint8_t *file = malloc(hl + nb), *items = file + hl;
  memcpy(file, hdr, hl);
  for (size_t i = 0; i < nb; i++) items[i] = (uint8_t)rnd();
  b2_file *f = NULL;
  snprintf(path, sizeof path, "%s/kept.b2nd", dir);
  CHECK_EQ(b2_file_create_npy(env, path, NULL, &f), 0);
  CHECK_EQ(stream(f, file, hl + nb), 0);
  CHECK_EQ(b2_file_close(f), 0);
  CHECK(hl % 64 != 0);
  CHECK(view_is(env, path, B2_VIEW_NPY, file, hl + nb));
  CHECK(view_is(env, path, B2_VIEW_CORDER, items, nb));

  /* numpy.save's header + the items: what damaged kept values give */
  static const int64_t shape[] = {40, 30};
  static const int32_t cs[] = {40, 30}, bs[] = {40, 30};
  b2_b2nd a;
  CHECK_EQ(b2_b2nd_make(&a, 2, shape, cs, bs, 8, "<f8"), 0);
  int n = b2_npy_header(&a, NULL, 0);
  uint8_t *saved = malloc((size_t)n + nb);
  CHECK_EQ(b2_npy_header(&a, (char *)saved, (size_t)n), n);
  memcpy(saved + n, items, nb);
  b2_b2nd_free(&a);
  uint8_t v[600];
  for (int k = 0; k < 7; k++) {
    size_t ol = 0, len;
    uint8_t *p = v;
    switch (k) {
    case 0: ol = cnpy_header(other, "<f8", "False", "41, 30"); break; /* another shape */
    case 1: ol = cnpy_header(other, "<f8", "True", "40, 30"); break;  /* Fortran order */
    case 2: ol = cnpy_header(other, "<i8", "False", "40, 30"); break; /* another descr */
    case 3: ol = cnpy_header(other, "<f8", "False", "40, 30"); other[ol++] = ' '; break; /* a byte more */
    case 4: ol = hl - 3; memcpy(other, hdr, ol); break;               /* cut short */
    case 5: memcpy(other, hdr, hl); other[5] = 'X'; ol = hl; break;   /* no magic */
    default: break;
    }
    if (k < 6) {
      p[0] = 0xc5, p[1] = (uint8_t)(ol >> 8), p[2] = (uint8_t)ol; /* bin16 */
      memcpy(p + 3, other, ol);
      len = ol + 3;
    } else { /* a bin32 claiming 4 GiB */
      memcpy(p, "\xc6\xff\xff\xff\xff", 5);
      memcpy(p + 5, hdr, hl);
      len = hl + 5;
    }
    set_kept(path, v, len);
    if (!view_is(env, path, B2_VIEW_NPY, saved, (size_t)n + nb)) fprintf(stderr, "  kept value %d shown\n", k);
    CHECK(view_is(env, path, B2_VIEW_NPY, saved, (size_t)n + nb));
  }
  memcpy(v, "hello", 5); /* no msgpack at all */
  set_kept(path, v, 5);
  CHECK(view_is(env, path, B2_VIEW_NPY, saved, (size_t)n + nb));

  /* the right one again; a resize by rows keeps the header's length */
  v[0] = 0xc5, v[1] = (uint8_t)(hl >> 8), v[2] = (uint8_t)hl;
  memcpy(v + 3, hdr, hl);
  set_kept(path, v, hl + 3);
  CHECK(view_is(env, path, B2_VIEW_NPY, file, hl + nb));
  CHECK_EQ(b2_file_open(env, path, B2_VIEW_NPY, B2_OPEN_RDWR, &f), 0);
  if (f) {
    CHECK_EQ(b2_file_truncate(f, (int64_t)(hl + 10 * 30 * 8)), 0);
    CHECK_EQ(b2_file_close(f), 0);
  }
  uint8_t *ten = malloc(hl + 10 * 30 * 8);
  size_t tl = cnpy_header((char *)ten, "<f8", "False", "10, 30");
  CHECK(tl <= hl);
  /* numpy.save's text for 10 rows, padded to the old length */
  b2_b2nd t;
  static const int64_t s10[] = {10, 30};
  CHECK_EQ(b2_b2nd_make(&t, 2, s10, cs, bs, 8, "<f8"), 0);
  CHECK_EQ(b2_npy_header_sized(&t, (char *)ten, hl), (int)hl);
  b2_b2nd_free(&t);
  memcpy(ten + hl, items, 10 * 30 * 8);
  CHECK(view_is(env, path, B2_VIEW_NPY, ten, hl + 10 * 30 * 8));
  free(ten);
  free(saved);
  free(file);
  b2_env_destroy(env);
}

/* An existing array appended to as an appender does it: the rows at the
 * end in pieces that end mid-row (the header keeps the complete rows
 * meanwhile), then a header for the new rows spelled otherwise (kept); a
 * header for fewer rows cuts them; bytes left inside a row at the close,
 * another dtype's header, part of the header changed or a size inside it
 * make a plain frame of the file's bytes. */
static void test_append_rows(void) {
  b2_env *env;
  CHECK_EQ(b2_env_create(NULL, &env), 0);
  static const int64_t s2[] = {50, 37}, s3[] = {130, 37};
  size_t hl, n, hl3, n3;
  uint8_t *npy = npy_bytes(2, s2, 4, "<i4", &hl, &n);
  uint8_t *big = npy_bytes(2, s3, 4, "<i4", &hl3, &n3);
  CHECK_EQ(hl, hl3);
  memcpy(big + hl, npy + hl, n - hl); /* the first 50 rows the same */
  char path[300];
  b2_file *f = create_shaped(env, "app.b2nd", "16,37", "8,37", path, sizeof path);
  CHECK_EQ(stream(f, npy, n), 0);
  CHECK_EQ(b2_file_close(f), 0);
  CHECK_EQ(b2_file_open(env, path, B2_VIEW_NPY, B2_OPEN_RDWR, &f), 0);
  uint8_t head[256];
  /* A row in two writes (the kernel splits one at a page): the second
   * ends where the rows the first gave end. */
  CHECK_EQ(b2_file_pwrite(f, big + n, 100, (int64_t)n), 100);
  CHECK_EQ(b2_file_size(f), (int64_t)n + 100);
  CHECK_EQ(b2_file_pwrite(f, big + n + 100, 48, (int64_t)n + 100), 48);
  CHECK_EQ(b2_file_size(f), (int64_t)n + 148);
  CHECK_EQ(b2_file_truncate(f, (int64_t)n), 0);
  for (size_t o = n; o < n3; o += 1000) {
    size_t k = B2_MIN((size_t)1000, n3 - o);
    CHECK_EQ(b2_file_pwrite(f, big + o, k, (int64_t)o), (ssize_t)k);
    CHECK_EQ(b2_file_size(f), (int64_t)(o + k));
    CHECK_EQ(b2_file_pread(f, head, hl, 0), (ssize_t)hl);
    int64_t rows = (int64_t)(o + k - hl) / (37 * 4);
    char want[32];
    snprintf(want, sizeof want, "(%lld, 37)", (long long)rows);
    CHECK(memmem(head, hl, want, strlen(want)) != NULL);
  }
  /* Whole again: the header for 130 rows, here spelled with no spaces. */
  char *sp = memmem(big, hl, "(130, 37)", 9);
  CHECK(sp != NULL);
  memcpy(sp, "(130,37) ", 9);
  CHECK_EQ(b2_file_pwrite(f, big, hl, 0), (ssize_t)hl);
  CHECK_EQ(b2_file_close(f), 0);
  CHECK(view_is(env, path, B2_VIEW_NPY, big, n3));
  CHECK_EQ(b2_file_open(env, path, B2_VIEW_CORDER, B2_OPEN_RDONLY, &f), 0);
  CHECK(b2_file_array(f) && b2_file_array(f)->shape[0] == 130);
  b2_file_close(f);
  /* A header for 50 rows cuts the rest (rsync --inplace of a smaller
   * array writes it first). */
  CHECK_EQ(b2_file_open(env, path, B2_VIEW_NPY, B2_OPEN_RDWR, &f), 0);
  CHECK_EQ(b2_file_pwrite(f, npy, hl, 0), (ssize_t)hl);
  CHECK_EQ(b2_file_size(f), (int64_t)n);
  /* 5 bytes more, inside a row, at the close: a plain frame of them. */
  CHECK_EQ(b2_file_pwrite(f, "tail!", 5, (int64_t)n), 5);
  CHECK_EQ(b2_file_flush(f), 0); /* another descriptor's close: not yet */
  CHECK_EQ(b2_file_npy_fell_back(f), 0);
  CHECK_EQ(b2_file_npy_kept_as_bytes(f), 1);
  CHECK_EQ(b2_file_sync(f), 0); /* fsync: durable, so its bytes */
  CHECK_EQ(b2_file_npy_fell_back(f), 1);
  CHECK_EQ(b2_file_close(f), 0);
  npy = realloc(npy, n + 5);
  memcpy(npy + n, "tail!", 5);
  CHECK(view_is(env, path, B2_VIEW_LOGICAL, npy, n + 5));
  CHECK_EQ(b2_file_open(env, path, B2_VIEW_LOGICAL, B2_OPEN_RDONLY, &f), 0);
  CHECK(b2_file_array(f) == NULL);
  b2_file_close(f);
  /* Two rows and 5 bytes appended with no header written, at fsync: the
   * bytes as a plain file holds them, its header still giving 50 rows
   * (the view showed 52 meanwhile). */
  f = create_shaped(env, "rows.b2nd", "16,37", "8,37", path, sizeof path);
  CHECK_EQ(stream(f, npy, n), 0);
  CHECK_EQ(b2_file_close(f), 0);
  CHECK_EQ(b2_file_open(env, path, B2_VIEW_NPY, B2_OPEN_RDWR, &f), 0);
  uint8_t *rows = malloc(n + 2 * 148 + 5);
  CHECK_EQ(b2_file_pread(f, rows, n, 0), (ssize_t)n);
  memcpy(rows + n, big + n, 2 * 148 + 5);
  CHECK_EQ(b2_file_pwrite(f, rows + n, 2 * 148 + 5, (int64_t)n), 2 * 148 + 5);
  CHECK_EQ(b2_file_pread(f, head, hl, 0), (ssize_t)hl);
  CHECK(memmem(head, hl, "(52, 37)", 8) != NULL);
  CHECK_EQ(b2_file_sync(f), 0);
  CHECK_EQ(b2_file_close(f), 0);
  CHECK(memmem(rows, hl, "(50, 37)", 8) != NULL);
  CHECK(view_is(env, path, B2_VIEW_LOGICAL, rows, n + 2 * 148 + 5));
  free(rows);
  /* What the array cannot say makes it the plain frame of its bytes, as
   * written: a header of another dtype, a change to part of the header, a
   * size inside it. */
  for (int k = 0; k < 3; k++) {
    char name[32];
    snprintf(name, sizeof name, "over%d.b2nd", k);
    f = create_shaped(env, name, "16,37", "8,37", path, sizeof path);
    CHECK_EQ(stream(f, big, n3), 0);
    CHECK_EQ(b2_file_close(f), 0);
    CHECK_EQ(b2_file_open(env, path, B2_VIEW_NPY, B2_OPEN_RDWR, &f), 0);
    uint8_t *want = malloc(n3);
    memcpy(want, big, n3);
    size_t len = n3;
    if (k == 0) {
      uint8_t *dt = memmem(want, hl, "<i4", 3);
      CHECK(dt != NULL);
      dt[2] = '2';
      CHECK_EQ(b2_file_pwrite(f, want, hl + 100, 0), (ssize_t)(hl + 100));
    } else if (k == 1) {
      want[20] ^= 1;
      CHECK_EQ(b2_file_pwrite(f, want + 20, 1, 20), 1);
    } else {
      len = 40;
      CHECK_EQ(b2_file_truncate(f, 40), 0);
    }
    CHECK_EQ(b2_file_size(f), (int64_t)len);
    CHECK_EQ(b2_file_npy_fell_back(f), 1);
    CHECK_EQ(b2_file_close(f), 0);
    CHECK(view_is(env, path, B2_VIEW_LOGICAL, want, len));
    free(want);
  }
  b2_env_destroy(env);
  free(npy);
  free(big);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/b2fs-farray-%d", (int)getpid());
  mkdir(dir, 0700);
  T_RUN(test_new_npy_streamed);
  T_RUN(test_new_npy_fallback);
  T_RUN(test_new_npy_unencodable);
  T_RUN(test_new_npy_held_lost);
  T_RUN(test_new_npy_slow_header);
  T_RUN(test_new_npy_one_write);
  T_RUN(test_edit_array);
  T_RUN(test_cube_writer);
  T_RUN(test_pieces_out_of_order);
  T_RUN(test_kept_header);
  T_RUN(test_append_rows);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "  could not remove %s\n", dir);
  T_END();
}
