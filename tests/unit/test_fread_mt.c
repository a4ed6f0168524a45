/* test_fread_mt.c - the read path of file handles (src/file/read.c,
 * partial.c): small random reads (decoded from the stored chunk kept in
 * the cache), sequential reads (read-ahead, drop-behind), requests
 * arriving slightly out of order, interleaved readers of one handle,
 * pinned zero-copy reads, handles without a cache, writable handles, and
 * several threads reading one handle (also with a .b2lock sidecar, so that
 * every chunk read takes the shared lock).  Every byte read is compared with
 * the data written.  B2FS_SEED replays a run. */
#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "b2_error.h"
#include "b2_file.h"
#include "file/file_impl.h" /* the env's cache, to see what it holds */
#include "t.h"

#define CHUNK (64 * 1024)
#define NBYTES (3 * 1024 * 1024 + 12345) /* 49 chunks, the last partial */
#define PIECE (16 * 1024)

static uint64_t seed0;
static uint64_t rnd(uint64_t *s) { return t_xorshift64(s); }

static char dir[] = "/tmp/b2fs-test-fread-XXXXXX";
static char sig_path[64], txt_path[64];
static uint8_t *sig, *txt; /* the contents written */

/* A smooth float64 signal (quantised: low bits zero), and words. */
static void make_data(void) {
  sig = malloc(NBYTES);
  txt = malloc(NBYTES);
  for (size_t i = 0; i < NBYTES / 8; i++) {
    int64_t t = (int64_t)(i % 6000), tri = t < 3000 ? t : 6000 - t; /* no libm */
    double v = (double)(tri * tri) / 4096.0 - 1000.0;
    memcpy(sig + 8 * i, &v, 8);
  }
  memset(sig + NBYTES / 8 * 8, 0x5a, NBYTES % 8);
  static const char *const words[] = {"alpha ", "bravo ", "charlie ", "delta ", "echo ",
                                       "foxtrot ", "golf ", "hotel "};
  uint64_t s = 99;
  for (size_t i = 0; i < NBYTES;) { /* words: lz4 finds matches */
    const char *w = words[rnd(&s) % 8];
    for (size_t k = 0; w[k] && i < NBYTES; k++) txt[i++] = (uint8_t)w[k];
  }
}

static int write_frame(const char *path, const char *codec, const char *typesize,
                       const char *blocksize, const uint8_t *data) {
  b2_frame_params p;
  b2_frame_params_default(&p);
  if (b2_params_set(&p, "codec", codec) < 0 || b2_params_set(&p, "typesize", typesize) < 0 ||
      b2_params_set(&p, "blocksize", blocksize) < 0 || b2_params_set(&p, "chunksize", "64K") < 0)
    return -1;
  b2_env *env;
  if (b2_env_create(NULL, &env) < 0) return -1;
  b2_file *f;
  int rc = b2_file_create(env, path, &p, &f);
  if (rc == 0) {
    if (b2_file_pwrite(f, data, NBYTES, 0) != NBYTES) rc = -1;
    if (b2_file_close(f) < 0) rc = -1;
  }
  b2_env_destroy(env);
  return rc;
}

static b2_env *make_env(size_t cache, int readahead) {
  b2_env_opts o;
  b2_env_opts_default(&o);
  o.cache_size = cache;
  o.readahead = readahead;
  o.nthreads = 2;
  b2_env *env = NULL;
  if (b2_env_create(&o, &env) < 0) return NULL;
  return env;
}

/* pread n at off and compare; returns 0 if right. */
static int check_read(b2_file *f, const uint8_t *want, size_t n, int64_t off, uint8_t *buf) {
  ssize_t exp = off >= NBYTES ? 0 : (ssize_t)(n < (size_t)(NBYTES - off) ? n : (size_t)(NBYTES - off));
  ssize_t got = b2_file_pread(f, buf, n, off);
  if (got != exp || (exp > 0 && memcmp(buf, want + off, (size_t)exp) != 0)) {
    fprintf(stderr, "  pread(%zu @ %lld) = %zd, want %zd: %s\n", n, (long long)off, got, exp,
            got < 0 ? b2_last_detail() : "bytes differ");
    return -1;
  }
  return 0;
}

static int cached_stored(b2_file *f, int64_t i) {
  b2_cache_entry *e;
  if (!f->cid || b2_cache_peek(f->env->cache, f->cid, i, &e) < 0) return 0;
  b2_cache_release(f->env->cache, e);
  return 1;
}

static int cached(b2_file *f, int64_t i) { /* chunk i's decoded entry */
  b2_cache_entry *e;
  if (b2_cache_peek(f->env->cache, f->id, i, &e) < 0) return 0;
  b2_cache_release(f->env->cache, e);
  return 1;
}

static uint64_t cache_bytes(b2_env *env) {
  b2_cache_stats st;
  b2_cache_get_stats(env->cache, &st);
  return st.bytes;
}

/* ---- tests ---------------------------------------------------------------- */

static void random_small(const char *path, const uint8_t *want, int nblocks) {
  b2_env *env = make_env(1 << 20, 4); /* 16 chunks: evictions happen */
  CHECK(env != NULL);
  if (!env) return;
  b2_file *f;
  CHECK_EQ(b2_file_open(env, path, B2_VIEW_LOGICAL, B2_OPEN_RDONLY, &f), 0);
  uint8_t *buf = malloc(9000);
  uint64_t s = seed0;
  int bad = 0, stored = 0;
  int64_t ends[8] = {-1, -1, -1, -1, -1, -1, -1, -1}; /* recent read ends */
  int reads[NBYTES / CHUNK + 1] = {0}; /* reads of each chunk */
  for (int k = 0; k < 1500 && !bad; k++) {
    int64_t off = (int64_t)(rnd(&s) % (NBYTES + 100));
    size_t n = 1 + rnd(&s) % 8192;
    int near = 0; /* keep clear of them: random reads, not streams */
    for (int j = 0; j < 8; j++) near |= ends[j] >= 0 && off >= ends[j] - 65536 && off <= ends[j] + 65536;
    if (near) continue;
    ends[k % 8] = off + (int64_t)n;
    int64_t hi = off + (int64_t)n < NBYTES ? off + (int64_t)n : NBYTES;
    for (int64_t i = off / CHUNK; off < NBYTES && i <= (hi - 1) / CHUNK; i++) reads[i]++;
    bad = check_read(f, want, n, off, buf);
    /* a small read of an uncached chunk keeps that chunk stored */
    if (off < NBYTES && n <= 4096 && off / CHUNK == (off + (int64_t)n - 1) / CHUNK)
      stored += cached_stored(f, off / CHUNK);
  }
  CHECK_EQ(bad, 0);
  CHECK(stored > 0);
  /* the short last chunk (one block, shorter than the others) */
  CHECK_EQ(check_read(f, want, 100, NBYTES - 300, buf), 0);
  CHECK_EQ(check_read(f, want, 100, NBYTES - 200, buf), 0);
  /* decoded chunks were loaded only for chunks read more often than they
   * have blocks (partial.c: then decoding them whole costs less) */
  for (int64_t i = 0; i < NBYTES / CHUNK; i++) {
    b2_cache_entry *e;
    if (b2_cache_peek(env->cache, f->id, i, &e) == 0) {
      b2_cache_release(env->cache, e);
      if (reads[i] <= nblocks) {
        fprintf(stderr, "  chunk %lld decoded after %d reads\n", (long long)i, reads[i]);
        CHECK(!"decoded chunk cached by a few random reads");
        break;
      }
    }
  }
  free(buf);
  CHECK_EQ(b2_file_close(f), 0);
  b2_env_destroy(env);
}
static void test_random_small_zstd(void) { random_small(sig_path, sig, 4); }
static void test_random_small_lz4(void) { random_small(txt_path, txt, 16); }

/* Whole file in PIECE reads, in order or with each pair swapped (as
 * kernel read-ahead requests handled by two threads may arrive). */
static void sequential(int swap) {
  b2_env *env = make_env(64 << 20, 4);
  CHECK(env != NULL);
  if (!env) return;
  b2_file *f;
  CHECK_EQ(b2_file_open(env, sig_path, B2_VIEW_LOGICAL, B2_OPEN_RDONLY, &f), 0);
  uint8_t *buf = malloc(PIECE);
  int bad = 0;
  int64_t npieces = (NBYTES + PIECE - 1) / PIECE;
  for (int64_t k = 0; k < npieces && !bad; k++) {
    int64_t j = swap ? (k ^ 1) : k;
    if (j >= npieces) j = k;
    bad = check_read(f, sig, PIECE, j * PIECE, buf);
  }
  CHECK_EQ(bad, 0);
  b2_pool_wait(env->pool, &f->group);
  /* drop-behind: what was read is not kept decoded (the read-ahead window
   * and the chunk being read are) */
  uint64_t held = cache_bytes(env);
  if (held > 8 * CHUNK) fprintf(stderr, "  %llu bytes cached\n", (unsigned long long)held);
  CHECK(held <= 8 * CHUNK);
  /* a second pass reads the same */
  for (int64_t k = 0; k < npieces && !bad; k++) bad = check_read(f, sig, PIECE, k * PIECE, buf);
  CHECK_EQ(bad, 0);
  free(buf);
  CHECK_EQ(b2_file_close(f), 0);
  b2_env_destroy(env);
}
static void test_sequential(void) { sequential(0); }
static void test_sequential_swapped(void) { sequential(1); }

/* A random reader whose read happens to start where its last one ended
 * is not taken for a sequential one: no chunk decoded whole, nothing read
 * ahead.  A third read in a row is sequential. */
static void test_random_continuation(void) {
  b2_env *env = make_env(64 << 20, 4);
  CHECK(env != NULL);
  if (!env) return;
  b2_file *f;
  CHECK_EQ(b2_file_open(env, sig_path, B2_VIEW_LOGICAL, B2_OPEN_RDONLY, &f), 0);
  uint8_t *buf = malloc(4096);
  int64_t off = 3 * (int64_t)CHUNK + 8192;
  int bad = check_read(f, sig, 4096, off, buf);
  if (!bad) bad = check_read(f, sig, 4096, off + 4096, buf);
  CHECK_EQ(bad, 0);
  b2_pool_wait(env->pool, &f->group);
  b2_cache_entry *e;
  int whole = 0;
  for (int64_t i = 3; i < 8; i++)
    if (b2_cache_peek(env->cache, f->id, i, &e) == 0) {
      whole++;
      b2_cache_release(env->cache, e);
    }
  CHECK_EQ(whole, 0);
  if (!bad) bad = check_read(f, sig, 4096, off + 8192, buf);
  CHECK_EQ(bad, 0);
  b2_pool_wait(env->pool, &f->group);
  CHECK_EQ(b2_cache_peek(env->cache, f->id, 3, &e), 0); /* sequential now */
  b2_cache_release(env->cache, e);
  free(buf);
  CHECK_EQ(b2_file_close(f), 0);
  b2_env_destroy(env);
}

/* Small reads of one chunk (16 blocks): kept stored while they have
 * decoded fewer blocks than the chunk holds, then decoded whole into the
 * cache when it has room, and never when it has none. */
static void hot_chunk(size_t cache, int expect_decoded) {
  b2_env *env = make_env(cache, 0);
  CHECK(env != NULL);
  if (!env) return;
  b2_file *f;
  CHECK_EQ(b2_file_open(env, txt_path, B2_VIEW_LOGICAL, B2_OPEN_RDONLY, &f), 0);
  uint8_t buf[64];
  int64_t base = 7 * (int64_t)CHUNK;
  int bad = 0, decoded_early = 0;
  for (int k = 0; k < 40 && !bad; k++) {
    /* 64-byte reads 1 KiB apart or more, out of order: no stream */
    bad = check_read(f, txt, sizeof buf, base + (int64_t)((k * 37) % 58) * 1024, buf);
    if (k < 16) decoded_early |= cached(f, 7);
  }
  CHECK_EQ(bad, 0);
  CHECK_EQ(decoded_early, 0);
  CHECK_EQ(cached(f, 7), expect_decoded);
  CHECK_EQ(cached_stored(f, 7), !expect_decoded);
  CHECK_EQ(b2_file_close(f), 0);
  b2_env_destroy(env);
}
static void test_hot_chunk(void) { hot_chunk(8 << 20, 1); }

/* A cache with no room for another chunk and no checksum to verify
 * (verify off, as for frames the reference library writes): small reads
 * fetch just the blocks they decode (b2_frame_read_range) and keep no
 * stored chunk that would only push another out. */
static void test_blocks_no_room(void) {
  b2_env_opts o;
  b2_env_opts_default(&o);
  o.cache_size = 64 << 10;
  o.readahead = 0;
  o.nthreads = 2;
  o.verify = 0;
  b2_env *env = NULL;
  CHECK_EQ(b2_env_create(&o, &env), 0);
  if (!env) return;
  b2_file *f;
  CHECK_EQ(b2_file_open(env, txt_path, B2_VIEW_LOGICAL, B2_OPEN_RDONLY, &f), 0);
  uint8_t *buf = malloc(CHUNK);
  uint64_t s = seed0 ^ 77;
  int bad = 0, full = 0, stored = 0;
  for (int k = 0; k < 300 && !bad; k++) {
    int64_t off = (int64_t)(rnd(&s) % NBYTES);
    size_t n = 1 + rnd(&s) % 6000;
    /* while the cache has room, chunks are kept stored as before */
    int room = b2_cache_has_room(env->cache, CHUNK), was = cached_stored(f, off / CHUNK);
    bad = check_read(f, txt, n, off, buf);
    if (!room && !was) {
      full++;
      stored += cached_stored(f, off / CHUNK);
    }
  }
  CHECK_EQ(bad, 0);
  CHECK(full >= 100);
  /* (room may appear between the check and the read, as entries of other
   * reads leave: a rare stored chunk then is right) */
  CHECK(stored <= 2);
  CHECK_EQ(check_read(f, txt, 100, NBYTES - 300, buf), 0);
  free(buf);
  CHECK_EQ(b2_file_close(f), 0);
  b2_env_destroy(env);
}
static void test_hot_chunk_no_room(void) { hot_chunk(64 << 10, 0); }

/* Reads of whole chunks (1 MiB FUSE requests on 1 MiB chunks). */
static void test_whole_chunks(void) {
  b2_env *env = make_env(64 << 20, 2);
  CHECK(env != NULL);
  if (!env) return;
  b2_file *f;
  CHECK_EQ(b2_file_open(env, sig_path, B2_VIEW_LOGICAL, B2_OPEN_RDONLY, &f), 0);
  uint8_t *buf = malloc(CHUNK);
  int bad = 0;
  for (int64_t off = 0; off < NBYTES && !bad; off += CHUNK) bad = check_read(f, sig, CHUNK, off, buf);
  for (int64_t off = NBYTES / CHUNK * CHUNK; off >= 0 && !bad; off -= CHUNK)
    bad = check_read(f, sig, CHUNK, off, buf);
  CHECK_EQ(bad, 0);
  free(buf);
  CHECK_EQ(b2_file_close(f), 0);
  b2_env_destroy(env);
}

/* Memory charged to the environment (a daemon's thread buffers) takes the
 * room of clean chunks at once, and is given back by the uncharge. */
static void test_env_charge(void) {
  size_t cap = 4 * (size_t)CHUNK + CHUNK / 2;
  b2_env *env = make_env(cap, 1);
  CHECK(env != NULL);
  if (!env) return;
  b2_file *f;
  CHECK_EQ(b2_file_open(env, sig_path, B2_VIEW_LOGICAL, B2_OPEN_RDONLY, &f), 0);
  uint8_t *buf = malloc(CHUNK);
  int bad = 0; /* read in order: the chunks are decoded into the cache */
  for (int64_t off = 0; off < 3 * (int64_t)CHUNK + CHUNK / 2 && !bad; off += 8192)
    bad = check_read(f, sig, 8192, off, buf);
  CHECK_EQ(bad, 0);
  b2_pool_wait(env->pool, &f->group);
  b2_cache_stats st;
  b2_cache_get_stats(env->cache, &st);
  uint64_t full = st.bytes, entries = st.entries;
  CHECK(full > 3 * (uint64_t)CHUNK); /* decoded chunks kept */
  b2_env_charge(env, 3 * (size_t)CHUNK);
  b2_cache_get_stats(env->cache, &st);
  CHECK(st.bytes <= cap);                 /* chunks evicted for it */
  CHECK(st.bytes >= 3 * (uint64_t)CHUNK); /* the charge itself counts */
  CHECK(st.entries + 2 <= entries);
  CHECK_EQ(check_read(f, sig, CHUNK, 0, buf), 0);
  b2_env_uncharge(env, 3 * (size_t)CHUNK);
  CHECK(cache_bytes(env) <= cap - 3 * (uint64_t)CHUNK + CHUNK);
  b2_env_charge(NULL, 1); /* no environment: nothing to do */
  b2_env_uncharge(NULL, 1);
  free(buf);
  CHECK_EQ(b2_file_close(f), 0);
  b2_env_destroy(env);
}

/* Dirty bytes held by default: half the cache, at least 64 MiB, at most
 * the cache; a value given is kept (within the cache). */
static void test_env_dirty_default(void) {
  struct { size_t cache, given, want; } t[] = {
      {256u << 20, 0, 128u << 20}, {1u << 30, 0, 512u << 20}, {100u << 20, 0, 64u << 20},
      {4u << 20, 0, 4u << 20}, {256u << 20, 1u << 20, 1u << 20}, {2u << 20, 8u << 20, 2u << 20}};
  for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
    b2_env_opts o;
    b2_env_opts_default(&o);
    CHECK_EQ(o.dirty_max, 0);
    o.cache_size = t[k].cache;
    o.dirty_max = t[k].given;
    o.nthreads = 0;
    b2_env *env = NULL;
    CHECK_EQ(b2_env_create(&o, &env), 0);
    if (!env) continue;
    b2_cache_stats st;
    b2_cache_get_stats(env->cache, &st);
    CHECK_EQ(st.dirty_max, t[k].want);
    CHECK_EQ(env->opts.dirty_max, t[k].want);
    b2_env_destroy(env);
  }
}

static int check_pin(b2_file *f, const uint8_t *want, size_t n, int64_t off, uint8_t *buf,
                     int *pinned) {
  b2_file_pin p;
  ssize_t exp = off >= NBYTES ? 0 : (ssize_t)(n < (size_t)(NBYTES - off) ? n : (size_t)(NBYTES - off));
  ssize_t got = b2_file_pread_pin(f, buf, n, off, &p);
  int bad = got != exp || (exp > 0 && memcmp(p.data, want + off, (size_t)exp) != 0);
  if (bad)
    fprintf(stderr, "  pread_pin(%zu @ %lld) = %zd, want %zd: %s\n", n, (long long)off, got, exp,
            got < 0 ? b2_last_detail() : "bytes differ");
  if (p.entry) {
    (*pinned)++;
    if (p.data == buf) bad = 1;
  } else if (p.data != buf) {
    bad = 1;
  }
  b2_file_unpin(&p);
  b2_file_unpin(&p); /* harmless twice */
  return bad ? -1 : 0;
}

static void test_pinned(void) {
  b2_env *env = make_env(64 << 20, 4);
  CHECK(env != NULL);
  if (!env) return;
  b2_file *f;
  CHECK_EQ(b2_file_open(env, sig_path, B2_VIEW_LOGICAL, B2_OPEN_RDONLY, &f), 0);
  uint8_t *buf = malloc(3 * PIECE);
  int bad = 0, pinned = 0;
  int64_t npieces = (NBYTES + PIECE - 1) / PIECE;
  for (int64_t k = 0; k < npieces && !bad; k++) bad = check_pin(f, sig, PIECE, k * PIECE, buf, &pinned);
  CHECK_EQ(bad, 0);
  CHECK(pinned >= npieces - 2); /* all but the first reads of the stream */
  /* random small ones, ranges across chunk ends, the end of the file */
  uint64_t s = seed0 + 1;
  for (int k = 0; k < 300 && !bad; k++) {
    int64_t off = (int64_t)(rnd(&s) % NBYTES);
    bad = check_pin(f, sig, 1 + rnd(&s) % 5000, off, buf, &pinned);
  }
  for (int64_t c = 1; c < 5 && !bad; c++) bad = check_pin(f, sig, 3 * PIECE, c * CHUNK - PIECE, buf, &pinned);
  if (!bad) bad = check_pin(f, sig, PIECE, NBYTES - 10, buf, &pinned);
  if (!bad) bad = check_pin(f, sig, PIECE, NBYTES, buf, &pinned);
  if (!bad) bad = check_pin(f, sig, PIECE, NBYTES + 5, buf, &pinned);
  CHECK_EQ(bad, 0);
  b2_file_pin p;
  CHECK_EQ(b2_file_pread_pin(f, buf, 10, -1, &p), B2_E_INVAL);
  b2_file_unpin(&p);
  free(buf);
  CHECK_EQ(b2_file_close(f), 0);
  b2_env_destroy(env);
}

/* Two sequential readers and a random one interleaved on one handle (as
 * when several processes read the same file): both streams are seen as
 * such (their reads come pinned from the cache) and drop behind them.
 * (Chunks the random reader read more often than they have blocks, 4, may
 * stay cached decoded: partial.c.) */
static void test_interleaved(void) {
  b2_env *env = make_env(64 << 20, 4);
  CHECK(env != NULL);
  if (!env) return;
  b2_file *f;
  CHECK_EQ(b2_file_open(env, sig_path, B2_VIEW_LOGICAL, B2_OPEN_RDONLY, &f), 0);
  uint8_t *buf = malloc(PIECE);
  int bad = 0, pinned = 0, rpinned = 0, reads = 0;
  int64_t a = 0, b = NBYTES / 2 / PIECE * PIECE;
  uint64_t s = seed0 + 3;
  int rreads[NBYTES / CHUNK + 1] = {0}, hot = 0;
  while ((a < NBYTES / 2 || b < NBYTES) && !bad) {
    if (a < NBYTES / 2) {
      bad |= check_pin(f, sig, PIECE, a, buf, &pinned);
      a += PIECE;
      reads++;
    }
    if (b < NBYTES) {
      bad |= check_pin(f, sig, PIECE, b, buf, &pinned);
      b += PIECE;
      reads++;
    }
    int64_t r = (int64_t)(rnd(&s) % NBYTES);
    bad |= check_pin(f, sig, 512, r, buf, &rpinned);
    for (int64_t i = r / CHUNK; i <= (r + 511) / CHUNK && i <= NBYTES / CHUNK; i++)
      hot += ++rreads[i] == 5;
  }
  CHECK_EQ(bad, 0);
  if (pinned < reads - 4) fprintf(stderr, "  %d of %d stream reads pinned\n", pinned, reads);
  CHECK(pinned >= reads - 4);
  b2_pool_wait(env->pool, &f->group);
  uint64_t held = cache_bytes(env);
  if (held > (16 + (uint64_t)hot) * CHUNK)
    fprintf(stderr, "  %llu bytes cached, %d chunks read 5 times or more\n",
            (unsigned long long)held, hot);
  CHECK(held <= (16 + (uint64_t)hot) * CHUNK);
  free(buf);
  CHECK_EQ(b2_file_close(f), 0);
  b2_env_destroy(env);
}

/* Without a cache (cache_size 0), and without an env at all. */
static void test_no_cache(void) {
  b2_env *env = make_env(0, 4);
  CHECK(env != NULL);
  for (int k = 0; k < 2; k++) {
    b2_file *f;
    CHECK_EQ(b2_file_open(k ? NULL : env, txt_path, B2_VIEW_LOGICAL, B2_OPEN_RDONLY, &f), 0);
    uint8_t *buf = malloc(PIECE);
    int bad = 0, pinned = 0;
    for (int64_t off = 0; off < NBYTES && !bad; off += PIECE) bad = check_pin(f, txt, PIECE, off, buf, &pinned);
    uint64_t s = seed0 + 2;
    for (int j = 0; j < 200 && !bad; j++) bad = check_read(f, txt, 1 + rnd(&s) % PIECE, (int64_t)(rnd(&s) % NBYTES), buf);
    CHECK_EQ(bad, 0);
    CHECK_EQ(pinned, 0);
    free(buf);
    CHECK_EQ(b2_file_close(f), 0);
  }
  b2_env_destroy(env);
}

/* A writable handle: reads see unflushed writes; pins never expose
 * entries a writer may change. */
static void test_writable(void) {
  char path[80];
  snprintf(path, sizeof path, "%s/w.b2frame", dir);
  CHECK_EQ(write_frame(path, "zstd", "8", "16K", sig), 0);
  b2_env *env = make_env(8 << 20, 4);
  CHECK(env != NULL);
  if (!env) return;
  b2_file *f;
  CHECK_EQ(b2_file_open(env, path, B2_VIEW_LOGICAL, B2_OPEN_RDWR, &f), 0);
  uint8_t *shadow = malloc(NBYTES), *buf = malloc(PIECE);
  memcpy(shadow, sig, NBYTES);
  memset(shadow + 100000, 7, 5000);
  CHECK_EQ(b2_file_pwrite(f, shadow + 100000, 5000, 100000), 5000);
  int bad = 0, pinned = 0;
  for (int64_t off = 0; off < NBYTES && !bad; off += PIECE) bad = check_pin(f, shadow, PIECE, off, buf, &pinned);
  CHECK_EQ(bad, 0);
  CHECK_EQ(pinned, 0);
  free(shadow);
  free(buf);
  CHECK_EQ(b2_file_close(f), 0);
  b2_env_destroy(env);
}

/* Write-behind: chunks a writer completes in order leave the cache once
 * compressed; a writer out of order keeps them.  All read back right.
 * in_order 2: appending to a new file, every write growing it (the pool's
 * compressions must not be voided by the growth, or the chunks stay
 * dirty until the flush and then cached). */
static void write_behind(int in_order) {
  char path[80];
  snprintf(path, sizeof path, "%s/wb%d.b2frame", dir, in_order);
  b2_env *env = make_env(8 << 20, 4); /* holds all 49 chunks */
  CHECK(env != NULL);
  if (!env) return;
  b2_file *f;
  if (in_order == 2) {
    b2_frame_params p;
    b2_frame_params_default(&p);
    CHECK_EQ(b2_params_set(&p, "codec", "zstd"), 0);
    CHECK_EQ(b2_params_set(&p, "clevel", "9"), 0); /* slow: flushes overlap writes */
    CHECK_EQ(b2_params_set(&p, "chunksize", "64K"), 0);
    CHECK_EQ(b2_file_create(env, path, &p, &f), 0);
  } else {
    CHECK_EQ(write_frame(path, "zstd", "8", "16K", sig), 0);
    CHECK_EQ(b2_file_open(env, path, B2_VIEW_LOGICAL, B2_OPEN_RDWR, &f), 0);
  }
  uint8_t *shadow = malloc(NBYTES), *buf = malloc(PIECE);
  for (size_t i = 0; i < NBYTES; i++) shadow[i] = (uint8_t)(sig[i] ^ (i % 251));
  int64_t npieces = (NBYTES + PIECE - 1) / PIECE;
  for (int64_t k = 0; k < npieces; k++) {
    int64_t off = (in_order ? k : npieces - 1 - k) * PIECE;
    size_t n = (size_t)(NBYTES - off < PIECE ? NBYTES - off : PIECE);
    CHECK_EQ(b2_file_pwrite(f, shadow + off, n, off), (ssize_t)n);
    if (in_order == 2) usleep(100); /* the pool compresses while the file grows */
  }
  CHECK_EQ(b2_file_flush(f), 0);
  uint64_t held = cache_bytes(env);
  if (in_order)
    CHECK(held <= 2 * CHUNK); /* the partial last chunk, and a straggler */
  else
    CHECK(held >= 40 * CHUNK);
  int bad = 0;
  for (int64_t off = 0; off < NBYTES && !bad; off += PIECE) bad = check_read(f, shadow, PIECE, off, buf);
  CHECK_EQ(bad, 0);
  CHECK_EQ(b2_file_close(f), 0);
  b2_env_destroy(env);
  CHECK_EQ(b2_env_create(NULL, &env), 0); /* and from the frame on disk */
  CHECK_EQ(b2_file_open(env, path, B2_VIEW_LOGICAL, B2_OPEN_RDONLY, &f), 0);
  for (int64_t off = 0; off < NBYTES && !bad; off += PIECE) bad = check_read(f, shadow, PIECE, off, buf);
  CHECK_EQ(bad, 0);
  CHECK_EQ(b2_file_close(f), 0);
  b2_env_destroy(env);
  free(shadow);
  free(buf);
}
static void test_write_behind(void) {
  write_behind(1);
  write_behind(0);
  write_behind(2);
}

/* Several threads on one handle: sequential readers from different
 * starts, random readers, pinned and copied. */
typedef struct {
  b2_file *f;
  int kind;
  uint64_t seed;
  int bad;
} reader_arg;

static void *reader(void *p) {
  reader_arg *a = p;
  uint8_t *buf = malloc(PIECE);
  int pinned = 0;
  if (a->kind < 2) {
    int64_t start = a->kind ? NBYTES / 2 / PIECE * PIECE : 0;
    for (int64_t off = start; off < NBYTES && !a->bad; off += PIECE)
      a->bad = a->kind ? check_pin(a->f, sig, PIECE, off, buf, &pinned) : check_read(a->f, sig, PIECE, off, buf);
  } else {
    for (int k = 0; k < 300 && !a->bad; k++) {
      int64_t off = (int64_t)(rnd(&a->seed) % NBYTES);
      size_t n = 1 + rnd(&a->seed) % 6000;
      a->bad = a->kind == 2 ? check_read(a->f, sig, n, off, buf) : check_pin(a->f, sig, n, off, buf, &pinned);
    }
  }
  free(buf);
  return NULL;
}

static void threads(int locked) {
  char lock[80];
  snprintf(lock, sizeof lock, "%s.b2lock", sig_path);
  if (locked) { /* the reference library's sidecar: every load and chunk read locks */
    FILE *fp = fopen(lock, "wb");
    CHECK(fp != NULL);
    if (fp) fclose(fp);
  }
  b2_env *env = make_env(2 << 20, 4);
  CHECK(env != NULL);
  if (!env) return;
  b2_file *f;
  CHECK_EQ(b2_file_open(env, sig_path, B2_VIEW_LOGICAL, B2_OPEN_RDONLY, &f), 0);
  pthread_t t[4];
  reader_arg a[4];
  for (int k = 0; k < 4; k++) {
    a[k] = (reader_arg){f, k, seed0 + 10 + (uint64_t)k, 0};
    CHECK_EQ(pthread_create(&t[k], NULL, reader, &a[k]), 0);
  }
  for (int k = 0; k < 4; k++) {
    pthread_join(t[k], NULL);
    CHECK_EQ(a[k].bad, 0);
  }
  CHECK_EQ(b2_file_close(f), 0);
  b2_env_destroy(env);
  if (locked) unlink(lock);
}

static void test_threads(void) { threads(0); }
/* the shared flock of a frame is taken once for all its threads */
static void test_threads_locked(void) { threads(1); }

/* A read of a quarter of a chunk or more loads the whole chunk decoded
 * (the next read of a small file continues there). */
static void test_quarter_chunk(void) {
  b2_env *env = make_env(8 << 20, 4);
  CHECK(env != NULL);
  if (!env) return;
  b2_file *f;
  CHECK_EQ(b2_file_open(env, sig_path, B2_VIEW_LOGICAL, B2_OPEN_RDONLY, &f), 0);
  uint8_t *buf = malloc(CHUNK);
  CHECK_EQ(check_read(f, sig, CHUNK / 4, 5 * CHUNK, buf), 0);
  b2_cache_entry *e;
  CHECK_EQ(b2_cache_peek(env->cache, f->id, 5, &e), 0);
  if (e) b2_cache_release(env->cache, e);
  CHECK_EQ(cached_stored(f, 5), 0);
  CHECK_EQ(check_read(f, sig, CHUNK / 4 - 1, 9 * CHUNK + 100, buf), 0); /* partial */
  CHECK(b2_cache_peek(env->cache, f->id, 9, &e) < 0);
  CHECK_EQ(cached_stored(f, 9), 1);
  free(buf);
  CHECK_EQ(b2_file_close(f), 0);
  b2_env_destroy(env);
}

static int parked(b2_env *env) {
  pthread_mutex_lock(&env->park_mu);
  int n = env->npark;
  pthread_mutex_unlock(&env->park_mu);
  return n;
}

static int open_fds(void) {
  int n = 0;
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  while (readdir(d)) n++;
  closedir(d);
  return n;
}

static int copy_file(const char *from, const char *to) {
  size_t len;
  unsigned char *b = t_read_file(from, &len);
  FILE *fp = b ? fopen(to, "wb") : NULL;
  int ok = fp && fwrite(b, 1, len, fp) == len;
  if (fp && fclose(fp) != 0) ok = 0;
  free(b);
  return ok ? 0 : -1;
}

/* Frames closed read-only are parked and taken back by the next open of
 * the same unchanged file; a changed, replaced or removed file is opened
 * afresh (never the parked parse). */
static void test_park(void) {
  b2_env *env = make_env(8 << 20, 4);
  CHECK(env != NULL);
  if (!env) return;
  char path[96], other[96];
  snprintf(path, sizeof path, "%s/park.b2frame", dir);
  snprintf(other, sizeof other, "%s/park2.b2frame", dir);
  CHECK_EQ(copy_file(sig_path, path), 0);
  uint8_t *buf = malloc(PIECE);
  b2_file *f;
  int fds = open_fds();
  CHECK_EQ(b2_file_open(env, path, B2_VIEW_LOGICAL, B2_OPEN_RDONLY, &f), 0);
  CHECK_EQ(check_read(f, sig, PIECE, 7, buf), 0);
  CHECK_EQ(b2_file_close(f), 0);
  CHECK_EQ(parked(env), 1);
  CHECK_EQ(open_fds(), fds); /* parked without its file */
  /* unchanged: taken back */
  CHECK_EQ(b2_file_open(env, path, B2_VIEW_LOGICAL, B2_OPEN_RDONLY, &f), 0);
  CHECK_EQ(parked(env), 0);
  CHECK_EQ(check_read(f, sig, PIECE, 3 * CHUNK - 5, buf), 0);
  CHECK_EQ(b2_file_close(f), 0);
  CHECK_EQ(parked(env), 1);
  /* rewritten in place with the same bytes: times change, parse again */
  CHECK_EQ(copy_file(sig_path, path), 0);
  CHECK_EQ(b2_file_open(env, path, B2_VIEW_LOGICAL, B2_OPEN_RDONLY, &f), 0);
  CHECK_EQ(parked(env), 1);
  CHECK_EQ(check_read(f, sig, PIECE, 100, buf), 0);
  CHECK_EQ(b2_file_close(f), 0);
  CHECK_EQ(parked(env), 2);
  /* replaced by another frame: its bytes, not the parked ones */
  CHECK_EQ(copy_file(txt_path, other), 0);
  CHECK_EQ(rename(other, path), 0);
  CHECK_EQ(b2_file_open(env, path, B2_VIEW_LOGICAL, B2_OPEN_RDONLY, &f), 0);
  CHECK_EQ(check_read(f, txt, PIECE, 100, buf), 0);
  CHECK_EQ(b2_file_close(f), 0);
  /* removed: the open fails though frames of it are parked */
  CHECK_EQ(unlink(path), 0);
  CHECK_EQ(b2_file_open(env, path, B2_VIEW_LOGICAL, B2_OPEN_RDONLY, &f), B2_E_NOENT);
  /* a frame shared through a .b2lock sidecar is not parked (another
   * program may bump the lock's generation without changing the file) */
  char lock[120];
  snprintf(lock, sizeof lock, "%s.b2lock", other);
  CHECK_EQ(copy_file(sig_path, other), 0);
  FILE *lf = fopen(lock, "wb");
  CHECK(lf != NULL);
  if (lf) {
    fwrite("\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 1, 16, lf);
    fclose(lf);
  }
  int n0 = parked(env);
  CHECK_EQ(b2_file_open(env, other, B2_VIEW_LOGICAL, B2_OPEN_RDONLY, &f), 0);
  CHECK_EQ(check_read(f, sig, PIECE, 100, buf), 0);
  CHECK_EQ(b2_file_close(f), 0);
  CHECK_EQ(parked(env), n0);
  unlink(lock);
  unlink(other);
  /* writable handles never park */
  int before = parked(env);
  CHECK_EQ(copy_file(sig_path, path), 0);
  CHECK_EQ(b2_file_open(env, path, B2_VIEW_LOGICAL, B2_OPEN_RDWR, &f), 0);
  CHECK_EQ(check_read(f, sig, PIECE, 100, buf), 0);
  CHECK_EQ(b2_file_close(f), 0);
  CHECK_EQ(parked(env), before);
  free(buf);
  b2_env_destroy(env); /* closes the parked frames (leak check) */
}

/* b2_file_warm decodes the chunks of the first bytes into the cache (and
 * b2_file_resident then says so, decoding only a warmed chunk gone): a
 * reader of them then loads nothing (whole-chunk reads included, which
 * otherwise decode straight into the caller's buffer), and a reader racing
 * the warm waits for it rather than decoding the chunk a second time. */
static void test_warm(void) {
  b2_env *env = make_env(8 << 20, 0);
  CHECK(env != NULL);
  if (!env) return;
  uint8_t *buf = malloc(2 * CHUNK);
  b2_file *f;
  CHECK_EQ(b2_file_open(env, sig_path, B2_VIEW_LOGICAL, B2_OPEN_RDONLY, &f), 0);
  b2_cache_stats a, b;
  CHECK_EQ(b2_file_resident(f, 1), 0);
  CHECK_EQ(b2_file_resident(f, 0), 1); /* nothing asked */
  b2_cache_get_stats(env->cache, &a);
  CHECK_EQ(b2_file_warm(f, 2 * CHUNK + 1), 3); /* chunks 0, 1 and 2 */
  b2_cache_get_stats(env->cache, &b);
  CHECK_EQ(b.misses - a.misses, 3);
  /* resident: those chunks decoded, asked without decoding anything */
  CHECK_EQ(b2_file_resident(f, 3 * CHUNK), 1);
  CHECK_EQ(b2_file_resident(f, 3 * CHUNK + 1), 0);
  b2_cache_get_stats(env->cache, &a);
  CHECK_EQ(a.misses, b.misses);
  /* a chunk the warm has begun but that is not there (as when the open of
   * its reader comes first): resident decodes it rather than say no */
  CHECK_EQ(b2_cache_discard(env->cache, f->id, 1), 1);
  CHECK(!cached(f, 1));
  CHECK_EQ(b2_file_resident(f, 3 * CHUNK), 1);
  CHECK(cached(f, 1));
  b2_cache_get_stats(env->cache, &b);
  CHECK_EQ(b.misses - a.misses, 1);
  CHECK_EQ(b2_file_resident(f, 3 * CHUNK + 1), 0); /* chunk 3 not warmed */
  CHECK(!cached(f, 3));
  b2_cache_get_stats(env->cache, &a);
  CHECK_EQ(a.misses, b.misses);
  CHECK_EQ(b2_file_warm(f, CHUNK), 0); /* there already: nothing more */
  b2_cache_get_stats(env->cache, &a);
  CHECK_EQ(a.misses, b.misses);
  CHECK_EQ(check_read(f, sig, CHUNK, 0, buf), 0);         /* a whole chunk */
  CHECK_EQ(check_read(f, sig, 2 * CHUNK, CHUNK, buf), 0); /* two more */
  CHECK_EQ(check_read(f, sig, 100, 2 * CHUNK + 5, buf), 0);
  b2_cache_get_stats(env->cache, &b);
  CHECK_EQ(b.misses, a.misses); /* every byte from the warmed chunks */
  /* past the warmed chunks a whole-chunk read decodes on its own */
  CHECK_EQ(check_read(f, sig, CHUNK, 5 * CHUNK, buf), 0);
  b2_cache_get_stats(env->cache, &a);
  CHECK_EQ(a.misses, b.misses);
  CHECK(!cached(f, 5));
  CHECK_EQ(b2_file_close(f), 0);
  /* more than the file: warms to its end */
  CHECK_EQ(b2_file_open(env, sig_path, B2_VIEW_LOGICAL, B2_OPEN_RDONLY, &f), 0);
  CHECK_EQ(b2_file_warm(f, (int64_t)NBYTES * 2), NBYTES / CHUNK + 1);
  CHECK(cached(f, NBYTES / CHUNK));
  CHECK_EQ(check_read(f, sig, 12345, NBYTES - 12345, buf), 0);
  CHECK_EQ(b2_file_close(f), 0);
  /* a handle read from already is left alone: its reader came first */
  CHECK_EQ(b2_file_open(env, sig_path, B2_VIEW_LOGICAL, B2_OPEN_RDONLY, &f), 0);
  CHECK_EQ(check_read(f, sig, 10, 0, buf), 0);
  b2_cache_get_stats(env->cache, &a);
  CHECK_EQ(b2_file_warm(f, 4 * CHUNK), 0);
  b2_cache_get_stats(env->cache, &b);
  CHECK_EQ(b.misses, a.misses);
  CHECK(!cached(f, 2));
  CHECK_EQ(b2_file_close(f), 0);
  /* a writable handle is left alone */
  char path[96];
  snprintf(path, sizeof path, "%s/warm.b2frame", dir);
  CHECK_EQ(copy_file(txt_path, path), 0);
  CHECK_EQ(b2_file_open(env, path, B2_VIEW_LOGICAL, B2_OPEN_RDWR, &f), 0);
  CHECK_EQ(b2_file_resident(f, CHUNK), 0); /* never for a writer */
  b2_cache_get_stats(env->cache, &a);
  CHECK_EQ(b2_file_warm(f, CHUNK), 0);
  b2_cache_get_stats(env->cache, &b);
  CHECK_EQ(b.misses, a.misses);
  CHECK_EQ(b2_file_close(f), 0);
  unlink(path);
  free(buf);
  b2_env_destroy(env);
}

int main(void) {
  const char *seed = getenv("B2FS_SEED");
  seed0 = seed ? strtoull(seed, NULL, 0) : (uint64_t)time(NULL) * 2654435761u + (uint64_t)getpid();
  if (!seed0) seed0 = 1;
  printf("# seed %llu (B2FS_SEED replays)\n", (unsigned long long)seed0);
  if (!mkdtemp(dir)) return 1;
  make_data();
  snprintf(sig_path, sizeof sig_path, "%s/sig.b2frame", dir);
  snprintf(txt_path, sizeof txt_path, "%s/txt.b2frame", dir);
  if (write_frame(sig_path, "zstd", "8", "16K", sig) < 0 ||
      write_frame(txt_path, "lz4", "1", "4K", txt) < 0) {
    fprintf(stderr, "cannot write the test frames: %s\n", b2_last_detail());
    return 1;
  }
  T_RUN(test_random_small_zstd);
  T_RUN(test_random_small_lz4);
  T_RUN(test_sequential);
  T_RUN(test_random_continuation);
  T_RUN(test_hot_chunk);
  T_RUN(test_hot_chunk_no_room);
  T_RUN(test_blocks_no_room);
  T_RUN(test_sequential_swapped);
  T_RUN(test_whole_chunks);
  T_RUN(test_env_charge);
  T_RUN(test_env_dirty_default);
  T_RUN(test_pinned);
  T_RUN(test_interleaved);
  T_RUN(test_no_cache);
  T_RUN(test_writable);
  T_RUN(test_write_behind);
  T_RUN(test_threads);
  T_RUN(test_threads_locked);
  T_RUN(test_quarter_chunk);
  T_RUN(test_park);
  T_RUN(test_warm);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) return 1;
  free(sig);
  free(txt);
  T_END();
}
