/* test_chunk_mt.c - a chunk's blocks decoded by several threads at once
 * (b2_chunk_decode_par, b2_frame_decode_chunk_par) give the bytes and the
 * errors of the one-thread decode: every codec and filter pipeline of the
 * encoder, every chunk of the fixture frames and the lone fixture chunks,
 * damaged chunks, and several callers sharing one pool.  The size limit
 * below which chunks are decoded by one thread is lifted here so that the
 * small chunks take the shared path too, and every test checks that pool
 * workers really decoded blocks.  Also built and run under ThreadSanitizer
 * (build/tsan). */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "b2_chunk.h"
#include "b2_codec.h"
#include "b2_error.h"
#include "b2_frame.h"
#include "chunk/chunk_internal.h"
#include "common/fileio.h" /* b2_io_pread_par */
#include "common/util.h" /* b2_le32 */
#include "common/pool.h"
#include "t.h"

#define NWORKERS 3

static b2_pool *pool;

static uint64_t rng_state = 0x2545f4914f6cdd1dULL;
static uint64_t rnd(void) { return t_xorshift64(&rng_state); }

/* Wait (at most ~2 s) until every worker waits for a job, so that the next
 * decode can hand blocks out. */
static void settle(void) {
  for (int k = 0; k < 2000 && b2_pool_idle(pool) < NWORKERS; k++) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
}

/* Decode `chunk` by one thread and shared; 0 when both agree (bytes, and
 * bytes past nbytes untouched; or both failed).  *ok_out: 1 if decoded. */
static int compare(const uint8_t *chunk, size_t len, const char *what,
                   int *ok_out) {
  b2_chunk_info in;
  int prc = b2_chunk_parse(chunk, len, &in);
  size_t nb = prc == 0 ? (size_t)in.nbytes : 0;
  uint8_t *a = malloc(nb + 16), *b = malloc(nb + 16);
  memset(a, 0x5A, nb + 16);
  memset(b, 0xA5, nb + 16);
  int ra = b2_chunk_decode(chunk, len, a, nb);
  settle();
  int rb = b2_chunk_decode_par(chunk, len, b, nb, pool, NULL);
  int bad = 0;
  if ((ra < 0) != (rb < 0) || (ra >= 0 && ra != rb)) {
    fprintf(stderr, "  %s: one thread %d, shared %d (%s)\n", what, ra, rb,
            rb < 0 ? b2_last_detail() : "");
    bad = 1;
  } else if (ra >= 0 && memcmp(a, b, nb) != 0) {
    fprintf(stderr, "  %s: decoded bytes differ\n", what);
    bad = 1;
  } else if (ra >= 0) {
    for (size_t k = nb; k < nb + 16; k++)
      if (b[k] != 0xA5) bad = 1;
    if (bad) fprintf(stderr, "  %s: wrote past nbytes\n", what);
  } else if (rb < 0 && !*b2_last_detail()) {
    fprintf(stderr, "  %s: failure without a detail\n", what);
    bad = 1;
  }
  if (ok_out) *ok_out = ra >= 0;
  free(a);
  free(b);
  return bad;
}

/* ---- encoder output ------------------------------------------------------ */

static void fill(uint8_t *p, size_t n, int kind) {
  for (size_t i = 0; i < n; i++) {
    switch (kind) {
    case 0: { /* smooth doubles */
      double v = 100.0 + (double)(i / 8) * 0.25;
      uint8_t e[8];
      memcpy(e, &v, 8);
      p[i] = e[i % 8];
      break;
    }
    case 1: p[i] = (uint8_t)("the lazy dog sleeps. "[i % 21]); break;
    default: p[i] = (uint8_t)(rnd() >> 40); break;
    }
  }
}

static void test_par_encoded(void) {
  static const int codecs[] = {B2_CODEC_BLOSCLZ, B2_CODEC_LZ4, B2_CODEC_LZ4HC,
                               B2_CODEC_ZLIB, B2_CODEC_ZSTD};
  static const uint8_t sets[][B2_MAX_FILTERS] = {
      {0, 0, 0, 0, 0, 0},
      {0, 0, 0, 0, 0, B2_FILTER_SHUFFLE},
      {0, 0, 0, 0, 0, B2_FILTER_BITSHUFFLE},
      {0, 0, 0, 0, B2_FILTER_DELTA, B2_FILTER_SHUFFLE},
      {0, 0, 0, 0, B2_FILTER_SHUFFLE, B2_FILTER_BYTEDELTA},
      {0, 0, 0, 0, B2_FILTER_TRUNC_PREC, B2_FILTER_SHUFFLE},
      {B2_FILTER_DELTA, 0, 0, 0, 0, B2_FILTER_BITSHUFFLE},
  };
  static const int tsizes[] = {1, 4, 8};
  static const int32_t bsizes[] = {4096, 16384, 0};
  static const size_t sizes[] = {100003, 262144};
  long before = atomic_load(&b2_chunk_par_helped);
  int n = 0, bad = 0;
  size_t maxn = 262144;
  uint8_t *src = malloc(maxn), *c = malloc(b2_chunk_bound(maxn));
  for (int ci = 0; ci < 5; ci++)
    for (int si = 0; si < (int)(sizeof sets / sizeof sets[0]); si++)
      for (int ti = 0; ti < 3; ti++) {
        b2_cparams p;
        b2_cparams_default(&p);
        p.codec = codecs[ci];
        p.clevel = 1 + (si + ti) % 9;
        p.typesize = tsizes[ti];
        memcpy(p.filters, sets[si], B2_MAX_FILTERS);
        for (int i = 0; i < B2_MAX_FILTERS; i++)
          if (p.filters[i] == B2_FILTER_TRUNC_PREC) {
            if (p.typesize < 4) p.filters[i] = 0;
            else p.filters_meta[i] = (uint8_t)(p.typesize == 4 ? 13 : 40);
          }
        p.blocksize = bsizes[(ci + si) % 3];
        p.splitmode = 1 + (ci + si + ti) % 4;
        size_t sz = sizes[(si + ti) % 2];
        fill(src, sz, (ci + si + ti) % 3);
        int cb = b2_chunk_encode(&p, src, sz, c, b2_chunk_bound(maxn));
        CHECK(cb > 0);
        if (cb <= 0) continue;
        char what[96];
        snprintf(what, sizeof what, "codec %d filters %d/%d ts %d bs %d",
                 p.codec, sets[si][4], sets[si][5], p.typesize, p.blocksize);
        bad += compare(c, (size_t)cb, what, NULL);
        n++;
      }
  free(src);
  free(c);
  CHECK_EQ(bad, 0);
  CHECK(n >= 100);
  CHECK(atomic_load(&b2_chunk_par_helped) > before);
}

/* A chunk that does not parse sends back the worker b2_chunk_par_prepare
 * woke for it: the worker is free to be woken again at once, not after
 * its polling time (made 60 s here). */
static void test_par_prepare_bad_chunk(void) {
  settle();
  long was = b2_chunk_par_prepare_us;
  b2_chunk_par_prepare_us = 60000000;
  b2_chunk_par_prepare(pool, 1 << 20);
  b2_chunk_par_prepare_us = was;
  uint8_t junk[64], out[64];
  memset(junk, 0, sizeof junk);
  CHECK(b2_chunk_decode_par(junk, sizeof junk, out, sizeof out, pool, NULL) < 0);
  int again = 0;
  for (int k = 0; k < 5000 && !again; k++) {
    again = b2_pool_prewake(pool, 1000);
    if (!again) {
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
  }
  CHECK(again);
}

/* ---- fixtures -------------------------------------------------------------- */

/* Every chunk (at most 24 per frame) of every frame in `sub`. */
static int frames_in(const char *sub, int *nchunks, int *bad) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/%s", t_fixtures(), sub);
  DIR *d = opendir(dir);
  if (!d) return 0;
  int frames = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    const char *dot = strrchr(de->d_name, '.');
    if (!dot || (strcmp(dot, ".b2frame") && strcmp(dot, ".b2nd"))) continue;
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    b2_frame *f;
    if (b2_frame_open(path, &f) < 0) continue; /* other tests cover opens */
    frames++;
    int64_t n = b2_frame_get_info(f)->nchunks;
    for (int64_t i = 0; i < n && i < 24; i++) {
      uint8_t *c;
      size_t len;
      if (b2_frame_read_chunk(f, i, &c, &len) < 0) continue;
      char what[8300];
      snprintf(what, sizeof what, "%s chunk %lld", path, (long long)i);
      *bad += compare(c, len, what, NULL);
      (*nchunks)++;
      /* The frame layer's entry point agrees as well. */
      int32_t nb = b2_frame_chunk_nbytes(f, i);
      uint8_t *x = malloc((size_t)nb + 1), *y = malloc((size_t)nb + 1);
      int rx = b2_frame_decode_chunk(f, i, x, (size_t)nb);
      settle();
      int ry = b2_frame_decode_chunk_par(f, i, y, (size_t)nb, pool);
      if (rx != ry || (rx >= 0 && memcmp(x, y, (size_t)nb) != 0)) {
        fprintf(stderr, "  %s: frame decode %d vs shared %d\n", what, rx, ry);
        (*bad)++;
      }
      free(x);
      free(y);
      free(c);
    }
    b2_frame_close(f);
  }
  closedir(d);
  return frames;
}

static void test_par_fixture_frames(void) {
  long before = atomic_load(&b2_chunk_par_helped);
  int chunks = 0, bad = 0, frames = 0;
  static const char *subs[] = {"cframe", "sframe", "legacy", "b2nd"};
  for (int k = 0; k < 4; k++) frames += frames_in(subs[k], &chunks, &bad);
  if (!frames) T_SKIP("no fixtures at %s", t_fixtures());
  CHECK_EQ(bad, 0);
  CHECK(frames >= 40);
  CHECK(chunks >= 100);
  CHECK(atomic_load(&b2_chunk_par_helped) > before);
}

static void test_par_fixture_chunks(void) {
  char path[8192];
  snprintf(path, sizeof path, "%s/chunks/manifest.tsv", t_fixtures());
  FILE *m = fopen(path, "r");
  if (!m) T_SKIP("no %s", path);
  char line[8192];
  int count = 0, bad = 0;
  while (fgets(line, sizeof line, m)) {
    char name[512];
    if (line[0] == '#' || sscanf(line, "%511s", name) != 1) continue;
    snprintf(path, sizeof path, "%s/%s", t_fixtures(), name);
    size_t len;
    uint8_t *buf = t_read_file(path, &len);
    CHECK(buf != NULL);
    if (!buf) continue;
    int ok;
    bad += compare(buf, len, name, &ok);
    CHECK(ok);
    count++;
    free(buf);
  }
  fclose(m);
  CHECK_EQ(bad, 0);
  CHECK(count >= 27);
}

/* ---- damaged chunks -------------------------------------------------------- */

/* Byte flips in the streams of a many-block chunk: the shared decode fails
 * exactly when the one-thread decode does, else gives the same bytes. */
/* delta: 0 plain shuffle; 1 delta + shuffle, every other trial damaging
 * only block 0 (the reference the helpers wait for while it fails). */
static void par_damaged(int delta) {
  b2_cparams p;
  b2_cparams_default(&p);
  p.blocksize = 8192;
  if (delta) p.filters[4] = B2_FILTER_DELTA;
  size_t n = 200000;
  uint8_t *src = malloc(n), *c = malloc(b2_chunk_bound(n));
  uint8_t *d = malloc(b2_chunk_bound(n));
  fill(src, n, 0);
  int cb = b2_chunk_encode(&p, src, n, c, b2_chunk_bound(n));
  CHECK(cb > 1000);
  b2_chunk_info in;
  CHECK_EQ(b2_chunk_parse(c, (size_t)cb, &in), 0);
  uint32_t b0 = b2_le32(c + in.header_len), b1 = b2_le32(c + in.header_len + 4);
  CHECK(b1 > b0 && (int)b1 <= cb);
  int bad = 0, failed = 0;
  for (int t = 0; t < 300 && cb > 1000; t++) {
    memcpy(d, c, (size_t)cb);
    int flips = 1 + (int)(rnd() % 4);
    for (int k = 0; k < flips; k++) { /* past the header and block starts */
      size_t at = delta && t % 2 ? b0 + rnd() % (uint64_t)(b1 - b0)
                                 : 200 + rnd() % (uint64_t)(cb - 200);
      d[at] ^= (uint8_t)(1u << (rnd() % 8));
    }
    int ok;
    char what[32];
    snprintf(what, sizeof what, "trial %d%s", t, delta ? " (delta)" : "");
    bad += compare(d, (size_t)cb, what, &ok);
    failed += !ok;
  }
  CHECK_EQ(bad, 0);
  CHECK(failed > 0); /* some flips must have hit a stream */
  free(src);
  free(c);
  free(d);
}

static void test_par_damaged(void) {
  par_damaged(0);
  par_damaged(1);
}

/* ---- a read shared with the worker woken for the decode ---------------------- */

/* Wake a worker and wait until it polls: the next b2_io_pread_par shares. */
static int woken_polling(void) {
  /* A worker still polling after the last shared read stops first. */
  b2_pool_prewake_cancel(pool);
  for (int k = 0; k < 2000 && b2_pool_polling(pool) > 0; k++) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  settle();
  if (!b2_pool_prewake(pool, 2000000)) return 0;
  for (int k = 0; k < 2000 && b2_pool_polling(pool) == 0; k++) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  return b2_pool_polling(pool) > 0;
}

static void test_par_read_split(void) {
  const char *t = getenv("TMPDIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/b2fs-readsplit-XXXXXX", t && *t ? t : "/tmp");
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  if (fd < 0) return;
  unlink(path);
  size_t n = (3 << 20) + 12345;
  uint8_t *src = malloc(n), *got = malloc(n + 1);
  fill(src, n, 2);
  CHECK_EQ(b2_io_pwrite(fd, src, n, 0), 0);
  /* Reads at odd offsets and lengths, every one shared: the same bytes. */
  static const size_t offs[] = {0, 1, 4095, 777777, 1 << 20};
  for (int k = 0; k < 5; k++) {
    size_t off = offs[k], len = n - off - (size_t)k * 1111;
    long before = atomic_load(&b2_io_par_shared);
    CHECK(woken_polling());
    memset(got, 0xEE, n + 1);
    CHECK_EQ(b2_io_pread_par(fd, got, len, (int64_t)off, pool, 1000), 0);
    CHECK_EQ(memcmp(got, src + off, len), 0);
    CHECK_EQ(got[len], 0xEE); /* nothing written past the read */
    CHECK_EQ(atomic_load(&b2_io_par_shared), before + 1);
  }
  /* The file ends inside the worker's part: the one-thread read's error. */
  long before = atomic_load(&b2_io_par_shared);
  CHECK(woken_polling());
  int rc = b2_io_pread_par(fd, got, n, 4096, pool, 1000);
  CHECK_EQ(rc, B2_E_TRUNCATED);
  CHECK(strstr(b2_last_detail(), "file ends at") != NULL);
  CHECK_EQ(atomic_load(&b2_io_par_shared), before + 1);
  /* No pool, or a read too small to share: a plain read. */
  before = atomic_load(&b2_io_par_shared);
  CHECK_EQ(b2_io_pread_par(fd, got, n, 0, NULL, 0), 0);
  CHECK_EQ(memcmp(got, src, n), 0);
  CHECK_EQ(b2_io_pread_par(fd, got, B2_IO_PAR_PIECE, 5, pool, 0), 0);
  CHECK_EQ(memcmp(got, src + 5, B2_IO_PAR_PIECE), 0);
  CHECK_EQ(atomic_load(&b2_io_par_shared), before);
  b2_pool_prewake_cancel(pool);
  close(fd);
  free(src);
  free(got);
}

/* ---- several callers at once --------------------------------------------------- */

typedef struct {
  const uint8_t *chunk;
  size_t len;
  const uint8_t *want;
  size_t nb;
  int bad;
} caller;

static void *caller_run(void *arg) {
  caller *k = arg;
  uint8_t *out = malloc(k->nb);
  for (int r = 0; r < 40; r++) {
    int rc = b2_chunk_decode_par(k->chunk, k->len, out, k->nb, pool, NULL);
    if (rc != (int)k->nb || memcmp(out, k->want, k->nb) != 0) k->bad++;
  }
  free(out);
  return NULL;
}

static void test_par_callers(void) {
  b2_cparams p;
  b2_cparams_default(&p);
  p.blocksize = 16384;
  size_t n = 1 << 20;
  uint8_t *src = malloc(n), *c = malloc(b2_chunk_bound(n));
  fill(src, n, 0);
  int cb = b2_chunk_encode(&p, src, n, c, b2_chunk_bound(n));
  CHECK(cb > 0);
  caller k[3];
  pthread_t th[3];
  for (int i = 0; i < 3; i++) {
    k[i] = (caller){c, (size_t)cb, src, n, 0};
    pthread_create(&th[i], NULL, caller_run, &k[i]);
  }
  for (int i = 0; i < 3; i++) {
    pthread_join(th[i], NULL);
    CHECK_EQ(k[i].bad, 0);
  }
  free(src);
  free(c);
}

int main(void) {
  b2_chunk_par_min = 0; /* share even the small chunks */
  if (b2_pool_create(NWORKERS, 64, &pool) < 0) {
    printf("not ok pool_create: %s\n", b2_last_detail());
    return 1;
  }
  T_RUN(test_par_encoded);
  T_RUN(test_par_prepare_bad_chunk);
  T_RUN(test_par_fixture_frames);
  T_RUN(test_par_fixture_chunks);
  T_RUN(test_par_damaged);
  T_RUN(test_par_callers);
  T_RUN(test_par_read_split);
  b2_pool_destroy(pool);
  b2_chunk_thread_cleanup();
  T_END();
}
