/* test_cache_mt.c - the chunk cache and the worker pool under concurrency:
 * random readers checking every buffer's key-derived pattern, single-flight
 * loads (success and failure), dirty writers mixed with readers, flushes
 * and invalidations (no write lost, no torn buffer, no concurrent flush of
 * one chunk), and the pool's busy / blocking / nested / draining paths.
 * A watchdog fails the run if any test blocks for more than 10 s.  Also
 * built and run under ThreadSanitizer (build/tsan). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "b2_cache.h"
#include "b2_error.h"
#include "common/pool.h"
#include "t.h"

/* ---- watchdog ---------------------------------------------------------- */

static pthread_mutex_t wd_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wd_cv = PTHREAD_COND_INITIALIZER;
static const char *wd_name;
static struct timespec wd_deadline;

static void *watchdog(void *arg) {
  (void)arg;
  pthread_mutex_lock(&wd_mu);
  for (;;) {
    if (!wd_name) {
      pthread_cond_wait(&wd_cv, &wd_mu);
      continue;
    }
    int rc = pthread_cond_timedwait(&wd_cv, &wd_mu, &wd_deadline);
    if (rc != 0 && wd_name) {
      struct timespec now;
      clock_gettime(CLOCK_REALTIME, &now);
      if (now.tv_sec > wd_deadline.tv_sec ||
          (now.tv_sec == wd_deadline.tv_sec &&
           now.tv_nsec >= wd_deadline.tv_nsec)) {
        printf("not ok %s: blocked for more than 10 s\n", wd_name);
        fflush(stdout);
        _exit(1);
      }
    }
  }
  return NULL;
}

static void wd_arm(const char *name) {
  pthread_mutex_lock(&wd_mu);
  clock_gettime(CLOCK_REALTIME, &wd_deadline);
  wd_deadline.tv_sec += 10;
  wd_name = name;
  pthread_cond_broadcast(&wd_cv);
  pthread_mutex_unlock(&wd_mu);
}

static void wd_disarm(void) {
  pthread_mutex_lock(&wd_mu);
  wd_name = NULL;
  pthread_cond_broadcast(&wd_cv);
  pthread_mutex_unlock(&wd_mu);
}

#define RUN(fn)        \
  do {                 \
    wd_arm(#fn);       \
    T_RUN(fn);         \
    wd_disarm();       \
  } while (0)

/* ---- helpers ----------------------------------------------------------- */

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint32_t rnd(uint64_t *s) { /* xorshift64* */
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return (uint32_t)((*s * 0x2545f4914f6cdd1dull) >> 32);
}

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

static b2_cache *mk(size_t cap, size_t dirty, unsigned shards) {
  b2_cache_config cfg = {cap, dirty, shards};
  b2_cache *c = NULL;
  if (b2_cache_create(&cfg, &c) < 0) {
    fprintf(stderr, "  create: %s\n", b2_last_detail());
    exit(1);
  }
  return c;
}

static b2_cache_stats stats(b2_cache *c) {
  b2_cache_stats st;
  b2_cache_get_stats(c, &st);
  return st;
}

/* ---- random readers ---------------------------------------------------- */

#define RFILES 3
#define RCHUNKS 200
#define RKEY(f, k) (((f) - 1) * RCHUNKS + (k))

static atomic_int rd_loads[RFILES * RCHUNKS];

static size_t rd_size(int64_t chunk) {
  return 1024 + (size_t)(chunk % 7) * 512;
}
static uint8_t rd_pat(uint64_t f, int64_t k, size_t i) {
  return (uint8_t)(f * 61u + (uint64_t)k * 17u + i * 7u + (i >> 9));
}

static int rd_load(void *arg, uint64_t file, int64_t chunk, uint8_t **data,
                   size_t *len) {
  (void)arg;
  atomic_fetch_add(&rd_loads[RKEY(file, chunk)], 1);
  if ((chunk & 15) == 0) sleep_us(100); /* widen the loading window */
  size_t n = rd_size(chunk);
  uint8_t *p = b2_cache_buf_alloc(n);
  if (!p) return B2_E_NOMEM;
  for (size_t i = 0; i < n; i++) p[i] = rd_pat(file, chunk, i);
  *data = p;
  *len = n;
  return 0;
}

typedef struct rd_ctx {
  b2_cache *c;
  uint64_t deadline;
  uint64_t seed;
  long gets, bad, errors;
} rd_ctx;

static void *rd_thread(void *arg) {
  rd_ctx *x = arg;
  while (now_ms() < x->deadline) {
    for (int it = 0; it < 64; it++) {
      uint32_t r = rnd(&x->seed);
      uint64_t f = 1 + r % RFILES;
      int64_t k = (int64_t)((r >> 8) % RCHUNKS);
      unsigned op = (r >> 24) % 100;
      b2_cache_entry *e;
      if (op < 90) {
        x->gets++;
        int rc = b2_cache_get(x->c, f, k, rd_load, NULL, &e);
        if (rc < 0) {
          x->errors++;
          continue;
        }
        const uint8_t *d = b2_cache_data(e);
        size_t n = b2_cache_len(e);
        int ok = n == rd_size(k);
        for (size_t i = 0; ok && i < n; i++) ok = d[i] == rd_pat(f, k, i);
        if (!ok) x->bad++;
        b2_cache_release(x->c, e);
      } else if (op < 95) {
        if (b2_cache_peek(x->c, f, k, &e) == 0) {
          if (b2_cache_len(e) != rd_size(k) ||
              b2_cache_data(e)[5] != rd_pat(f, k, 5))
            x->bad++;
          b2_cache_release(x->c, e);
        }
      } else if (op < 99) {
        if (b2_cache_invalidate(x->c, f, k) < 0) x->errors++;
      } else {
        if (b2_cache_invalidate_file(x->c, f) != 0) x->errors++;
      }
    }
  }
  return NULL;
}

static void test_mt_random_reads(void) {
  const size_t cap = 256 << 10;
  b2_cache *c = mk(cap, 0, 0);
  for (int i = 0; i < RFILES * RCHUNKS; i++) atomic_store(&rd_loads[i], 0);
  enum { N = 8 };
  pthread_t th[N];
  rd_ctx x[N];
  uint64_t deadline = now_ms() + 1500;
  for (int i = 0; i < N; i++) {
    x[i] = (rd_ctx){c, deadline, 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1), 0,
                    0, 0};
    pthread_create(&th[i], NULL, rd_thread, &x[i]);
  }
  long gets = 0, bad = 0, errors = 0;
  for (int i = 0; i < N; i++) {
    pthread_join(th[i], NULL);
    gets += x[i].gets;
    bad += x[i].bad;
    errors += x[i].errors;
  }
  CHECK_EQ(bad, 0);
  CHECK_EQ(errors, 0);
  CHECK(gets > 1000);
  long loads = 0;
  for (int i = 0; i < RFILES * RCHUNKS; i++) loads += atomic_load(&rd_loads[i]);
  b2_cache_stats st = stats(c);
  CHECK_EQ(st.misses, loads);
  CHECK_EQ(st.hits + st.misses + st.waits, gets);
  CHECK(st.evictions > 0);
  CHECK(st.bytes <= cap);
  /* nothing is pinned now: every live buffer is in the index */
  uint64_t sum = 0, n = 0;
  for (uint64_t f = 1; f <= RFILES; f++)
    for (int64_t k = 0; k < RCHUNKS; k++) {
      b2_cache_entry *e;
      if (b2_cache_peek(c, f, k, &e) == 0) {
        sum += b2_cache_len(e);
        n++;
        b2_cache_release(c, e);
      }
    }
  CHECK_EQ(sum, st.bytes);
  CHECK_EQ(n, st.entries);
  fprintf(stderr, "  %ld gets, %llu loads, %llu evictions\n", gets,
          (unsigned long long)st.misses, (unsigned long long)st.evictions);
  b2_cache_destroy(c);
}

/* ---- single flight ----------------------------------------------------- */

enum { SF_THREADS = 8, SF_ROUNDS = 25 };

typedef struct sf_ctx {
  b2_cache *c;
  pthread_barrier_t *bar;
  atomic_int calls;
  int fail;
  uint64_t waits0;  /* stats.waits before the round */
  int64_t chunk;
} sf_ctx;

/* Loads only once every other thread of the round is waiting for it, so
 * the test does not depend on timing. */
static int sf_load(void *arg, uint64_t file, int64_t chunk, uint8_t **data,
                   size_t *len) {
  sf_ctx *x = arg;
  atomic_fetch_add(&x->calls, 1);
  uint64_t t0 = now_ms();
  while (stats(x->c).waits < x->waits0 + SF_THREADS - 1 && now_ms() - t0 < 5000)
    sleep_us(200);
  if (x->fail) return b2_fail(x->fail, "sf loader refuses chunk %lld",
                              (long long)chunk);
  uint8_t *p = b2_cache_buf_alloc(64);
  if (!p) return B2_E_NOMEM;
  for (int i = 0; i < 64; i++)
    p[i] = (uint8_t)(file + (uint64_t)chunk + (unsigned)i);
  *data = p;
  *len = 64;
  return 0;
}

typedef struct sf_res {
  sf_ctx *x;
  b2_cache_entry *e;
  int rc;
  int detail_ok;
  int data_ok; /* checked as soon as get returned */
} sf_res;

static void *sf_thread(void *arg) {
  sf_res *r = arg;
  pthread_barrier_wait(r->x->bar);
  r->rc = b2_cache_get(r->x->c, 1, r->x->chunk, sf_load, r->x, &r->e);
  r->detail_ok = r->rc == 0 || strstr(b2_last_detail(), "refuses") != NULL;
  r->data_ok = r->rc == 0 && b2_cache_len(r->e) == 64 &&
               b2_cache_data(r->e)[9] == (uint8_t)(1 + r->x->chunk + 9);
  return NULL;
}

static void single_flight(int fail) {
  b2_cache *c = mk(1 << 20, 0, 0);
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, SF_THREADS);
  for (int round = 0; round < SF_ROUNDS; round++) {
    sf_ctx x = {.c = c, .bar = &bar, .fail = fail, .chunk = round};
    atomic_init(&x.calls, 0);
    x.waits0 = stats(c).waits;
    pthread_t th[SF_THREADS];
    sf_res r[SF_THREADS];
    for (int i = 0; i < SF_THREADS; i++) {
      r[i] = (sf_res){&x, NULL, 1, 0, 0};
      pthread_create(&th[i], NULL, sf_thread, &r[i]);
    }
    for (int i = 0; i < SF_THREADS; i++) pthread_join(th[i], NULL);
    CHECK_EQ(atomic_load(&x.calls), 1);
    for (int i = 0; i < SF_THREADS; i++) {
      CHECK_EQ(r[i].rc, fail ? fail : 0);
      CHECK(r[i].detail_ok);
      if (!fail) {
        CHECK(r[i].e == r[0].e);
        CHECK(r[i].data_ok);
        b2_cache_release(c, r[i].e);
      } else {
        CHECK(r[i].e == NULL);
      }
    }
  }
  b2_cache_stats st = stats(c);
  CHECK_EQ(st.misses, SF_ROUNDS);
  CHECK_EQ(st.waits, SF_ROUNDS * (SF_THREADS - 1));
  CHECK_EQ(st.entries, fail ? 0 : SF_ROUNDS);
  CHECK_EQ(st.load_errors, fail ? SF_ROUNDS : 0);
  CHECK_EQ(st.bytes, fail ? 0 : SF_ROUNDS * 64);
  pthread_barrier_destroy(&bar);
  b2_cache_destroy(c);
}

static void test_mt_single_flight(void) { single_flight(0); }
static void test_mt_single_flight_failure(void) { single_flight(B2_E_CODEC); }

/* ---- dirty writers, readers, flushers, invalidators -------------------- */

#define WFILES 2
#define WCHUNKS 64
#define WKEYS (WFILES * WCHUNKS)
#define WKEY(f, k) ((int)((f) - 1) * WCHUNKS + (int)(k))

typedef struct wstore { /* what the "disk" holds for each chunk */
  pthread_mutex_t mu;
  size_t len[WKEYS];
  uint8_t val[WKEYS];
  atomic_int busy[WKEYS];   /* a flush of this chunk is running */
  atomic_long flushes;
  atomic_long concurrent;   /* overlapping flushes of one chunk (bug) */
  atomic_long torn;         /* non-uniform buffers flushed (bug) */
} wstore;

typedef struct wowner { /* one per file, as b2_file would be */
  wstore *st;
  uint64_t file;
} wowner;

static wstore ws;
static wowner wown[WFILES];
/* The last value written to each chunk, updated inside write sections. */
static size_t truth_len[WKEYS];
static uint8_t truth_val[WKEYS];
static int truth_set[WKEYS];

static int w_flush(void *owner, int64_t chunk, const uint8_t *data,
                   size_t len) {
  wowner *o = owner;
  wstore *s = o->st;
  int key = WKEY(o->file, chunk);
  if (atomic_exchange(&s->busy[key], 1)) atomic_fetch_add(&s->concurrent, 1);
  int uniform = 1;
  for (size_t i = 1; i < len; i++) uniform &= data[i] == data[0];
  if (!uniform) atomic_fetch_add(&s->torn, 1);
  if ((chunk & 7) == 0) sleep_us(150); /* slow device for some chunks */
  pthread_mutex_lock(&s->mu);
  s->len[key] = len;
  s->val[key] = len ? data[0] : 0;
  pthread_mutex_unlock(&s->mu);
  atomic_fetch_add(&s->flushes, 1);
  atomic_store(&s->busy[key], 0);
  return 0;
}

static int w_load(void *arg, uint64_t file, int64_t chunk, uint8_t **data,
                  size_t *len) {
  wstore *s = arg;
  int key = WKEY(file, chunk);
  pthread_mutex_lock(&s->mu);
  size_t n = s->len[key];
  uint8_t v = s->val[key];
  pthread_mutex_unlock(&s->mu);
  uint8_t *p = b2_cache_buf_alloc(n ? n : 1);
  if (!p) return B2_E_NOMEM;
  memset(p, v, n);
  *data = p;
  *len = n;
  return 0;
}

typedef struct w_ctx {
  b2_cache *c;
  b2_pool *pool;
  uint64_t deadline;
  uint64_t seed;
  long ops, bad, errors;
  size_t max_dirty;
} w_ctx;

static void *writer_thread(void *arg) {
  w_ctx *x = arg;
  while (now_ms() < x->deadline) {
    uint32_t r = rnd(&x->seed);
    uint64_t f = 1 + r % WFILES;
    int64_t k = (int64_t)((r >> 4) % WCHUNKS);
    int key = WKEY(f, k);
    b2_cache_entry *e;
    if (b2_cache_get(x->c, f, k, w_load, &ws, &e) < 0) {
      x->errors++;
      continue;
    }
    int rc = b2_cache_write_begin(x->c, e, &wown[f - 1], w_flush);
    if (rc == B2_E_NOENT) { /* invalidated between get and write */
      b2_cache_release(x->c, e);
      continue;
    }
    if (rc < 0) {
      x->errors++;
      b2_cache_release(x->c, e);
      continue;
    }
    if (((r >> 12) & 7) == 0 &&
        b2_cache_resize(x->c, e, 1024 + ((r >> 16) % 7) * 512) < 0)
      x->errors++;
    uint8_t v = (uint8_t)(r >> 24);
    memset(b2_cache_wdata(e), v, b2_cache_len(e));
    truth_len[key] = b2_cache_len(e);
    truth_val[key] = v;
    truth_set[key] = 1;
    b2_cache_write_end(x->c, e, 1);
    if (((r >> 20) & 15) == 0 && b2_cache_flush_entry(x->c, e) < 0)
      x->errors++;
    b2_cache_release(x->c, e);
    x->ops++;
  }
  return NULL;
}

static void *reader_thread(void *arg) {
  w_ctx *x = arg;
  while (now_ms() < x->deadline) {
    uint32_t r = rnd(&x->seed);
    uint64_t f = 1 + r % WFILES;
    int64_t k = (int64_t)((r >> 4) % WCHUNKS);
    b2_cache_entry *e;
    if (b2_cache_get(x->c, f, k, w_load, &ws, &e) < 0) {
      x->errors++;
      continue;
    }
    b2_cache_read_lock(e);
    const uint8_t *d = b2_cache_data(e);
    size_t n = b2_cache_len(e);
    int ok = n >= 1024 && n <= 4096;
    for (size_t i = 1; ok && i < n; i++) ok = d[i] == d[0];
    b2_cache_read_unlock(e);
    if (!ok) x->bad++;
    b2_cache_release(x->c, e);
    x->ops++;
  }
  return NULL;
}

static void *flusher_thread(void *arg) {
  w_ctx *x = arg;
  while (now_ms() < x->deadline) {
    uint32_t r = rnd(&x->seed);
    int rc;
    if (r % 8 == 0)
      rc = b2_cache_flush_file(x->c, 1 + (r >> 8) % WFILES, x->pool);
    else
      rc = b2_cache_flush_idle(x->c, 2);
    if (rc < 0) x->errors++;
    size_t d = (size_t)stats(x->c).dirty_bytes;
    if (d > x->max_dirty) x->max_dirty = d;
    x->ops++;
    sleep_us(500);
  }
  return NULL;
}

static void *invalidator_thread(void *arg) {
  w_ctx *x = arg;
  while (now_ms() < x->deadline) {
    uint32_t r = rnd(&x->seed);
    uint64_t f = 1 + r % WFILES;
    if (r & 0x100) {
      if (b2_cache_invalidate_file(x->c, f) < 0) x->errors++;
    } else {
      int rc = b2_cache_invalidate(x->c, f, (int64_t)((r >> 12) % WCHUNKS));
      if (rc < 0 && rc != B2_E_BUSY) x->errors++;
    }
    x->ops++;
    sleep_us(300);
  }
  return NULL;
}

/* A one-byte entry: a load that makes the cache evict back to its bound. */
static int tiny_load(void *arg, uint64_t file, int64_t chunk, uint8_t **data, size_t *len) {
  (void)arg, (void)file, (void)chunk;
  *data = b2_cache_buf_alloc(1);
  *len = 1;
  return *data ? 0 : B2_E_NOMEM;
}

static void test_mt_dirty_mixed(void) {
  const size_t cap = 96 << 10, dmax = 24 << 10;
  b2_cache *c = mk(cap, dmax, 16);
  b2_pool *pool;
  CHECK_EQ(b2_pool_create(2, 16, &pool), 0);
  pthread_mutex_init(&ws.mu, NULL);
  for (int i = 0; i < WKEYS; i++) {
    ws.len[i] = 2048;
    ws.val[i] = (uint8_t)i;
    atomic_init(&ws.busy[i], 0);
    truth_set[i] = 0;
  }
  atomic_init(&ws.flushes, 0);
  atomic_init(&ws.concurrent, 0);
  atomic_init(&ws.torn, 0);
  for (int f = 0; f < WFILES; f++) wown[f] = (wowner){&ws, (uint64_t)f + 1};

  enum { NW = 4, NR = 2, N = NW + NR + 2 };
  pthread_t th[N];
  w_ctx x[N];
  uint64_t deadline = now_ms() + 1500;
  for (int i = 0; i < N; i++) {
    x[i] = (w_ctx){c, pool, deadline, 0x2545f4914f6cdd1dull * (uint64_t)(i + 3),
                   0, 0, 0, 0};
    void *(*fn)(void *) = i < NW        ? writer_thread
                          : i < NW + NR ? reader_thread
                          : i == N - 2  ? flusher_thread
                                        : invalidator_thread;
    pthread_create(&th[i], NULL, fn, &x[i]);
  }
  long ops[4] = {0}, bad = 0, errors = 0;
  size_t max_dirty = 0;
  for (int i = 0; i < N; i++) {
    pthread_join(th[i], NULL);
    ops[i < NW ? 0 : i < NW + NR ? 1 : i == N - 2 ? 2 : 3] += x[i].ops;
    bad += x[i].bad;
    errors += x[i].errors;
    if (x[i].max_dirty > max_dirty) max_dirty = x[i].max_dirty;
  }
  CHECK_EQ(b2_cache_flush_all(c, pool), 0);
  CHECK_EQ(bad, 0);
  CHECK_EQ(errors, 0);
  CHECK_EQ(atomic_load(&ws.concurrent), 0);
  CHECK_EQ(atomic_load(&ws.torn), 0);
  CHECK(ops[0] > 100 && ops[1] > 100 && ops[2] > 10 && ops[3] > 10);
  /* the bound holds up to one entry per writer checking concurrently */
  CHECK(max_dirty <= dmax + NW * 4096);
  b2_cache_stats st = stats(c);
  CHECK_EQ(st.dirty_bytes, 0);
  CHECK_EQ(st.dirty_entries, 0);
  CHECK_EQ(st.flush_errors, 0);
  CHECK_EQ((long)st.flushes, atomic_load(&ws.flushes));
  /* Entries that were dirty could not be evicted: the cache may stand over
   * its bound until the next load, which brings it back. */
  b2_cache_entry *te;
  CHECK_EQ(b2_cache_get(c, 1000, 0, tiny_load, NULL, &te), 0);
  b2_cache_release(c, te);
  st = stats(c);
  CHECK(st.bytes <= cap);
  /* no write was lost: the store holds the last value of every chunk */
  int lost = 0, written = 0;
  for (int i = 0; i < WKEYS; i++) {
    if (!truth_set[i]) continue;
    written++;
    if (ws.len[i] != truth_len[i] || ws.val[i] != truth_val[i]) lost++;
  }
  CHECK_EQ(lost, 0);
  CHECK(written > WKEYS / 2);
  fprintf(stderr, "  writes %ld, reads %ld, flush passes %ld, "
          "invalidations %ld, flushes %ld, evictions %llu, max dirty %zu\n",
          ops[0], ops[1], ops[2], ops[3], atomic_load(&ws.flushes),
          (unsigned long long)st.evictions, max_dirty);
  b2_pool_destroy(pool);
  b2_cache_destroy(c);
  pthread_mutex_destroy(&ws.mu);
}

/* ---- flush_file through the pool --------------------------------------- */

enum { PF_CHUNKS = 60 };
static atomic_int pf_count[PF_CHUNKS];

static int pf_flush(void *owner, int64_t chunk, const uint8_t *data,
                    size_t len) {
  (void)owner;
  if (chunk < 0 || chunk >= PF_CHUNKS || len != 512 ||
      data[0] != (uint8_t)chunk || data[511] != (uint8_t)chunk)
    return b2_fail(B2_E_FORMAT, "pf: unexpected chunk %lld", (long long)chunk);
  sleep_us(200);
  atomic_fetch_add(&pf_count[chunk], 1);
  return 0;
}

static int pf_load(void *arg, uint64_t file, int64_t chunk, uint8_t **data,
                   size_t *len) {
  (void)arg;
  (void)file;
  (void)chunk;
  *data = b2_cache_buf_alloc(512);
  if (*data) memset(*data, 0, 512);
  *len = 512;
  return *data ? 0 : B2_E_NOMEM;
}

static void test_mt_flush_file_pool(void) {
  b2_cache *c = mk(1 << 20, 1 << 20, 0);
  b2_pool *pool;
  CHECK_EQ(b2_pool_create(3, 4, &pool), 0);
  for (int k = 0; k < PF_CHUNKS; k++) {
    atomic_init(&pf_count[k], 0);
    b2_cache_entry *e;
    CHECK_EQ(b2_cache_get(c, 5, k, pf_load, NULL, &e), 0);
    CHECK_EQ(b2_cache_write_begin(c, e, NULL, pf_flush), 0);
    memset(b2_cache_wdata(e), k, 512);
    b2_cache_write_end(c, e, 1);
    b2_cache_release(c, e);
  }
  b2_cache_entry *other;
  CHECK_EQ(b2_cache_get(c, 6, 0, pf_load, NULL, &other), 0);
  CHECK_EQ(b2_cache_write_begin(c, other, NULL, pf_flush), 0);
  b2_cache_write_end(c, other, 1);
  CHECK_EQ(b2_cache_flush_file(c, 5, pool), 0);
  for (int k = 0; k < PF_CHUNKS; k++) CHECK_EQ(atomic_load(&pf_count[k]), 1);
  b2_cache_stats st = stats(c);
  CHECK_EQ(st.dirty_entries, 1);
  CHECK_EQ(st.flushes, PF_CHUNKS);
  CHECK(b2_cache_is_dirty(c, other));
  b2_cache_release(c, other);
  CHECK_EQ(b2_cache_flush_all(c, pool), 0);
  CHECK_EQ(atomic_load(&pf_count[0]), 2);
  CHECK_EQ(stats(c).dirty_entries, 0);
  b2_pool_destroy(pool);
  b2_cache_destroy(c);
}

/* ---- waiting for a flush that another thread is running ---------------- */

typedef struct fw {
  b2_cache *c;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int open, started, calls;
  b2_cache_entry *e0;
  int rc_t, rc_u, rc_w;
  atomic_int done_u, done_w;
} fw;

static int fw_flush(void *owner, int64_t chunk, const uint8_t *data,
                    size_t len) {
  fw *x = owner;
  (void)chunk;
  (void)data;
  (void)len;
  pthread_mutex_lock(&x->mu);
  x->calls++;
  x->started = 1;
  pthread_cond_broadcast(&x->cv);
  while (!x->open) pthread_cond_wait(&x->cv, &x->mu);
  pthread_mutex_unlock(&x->mu);
  return 0;
}

static void *fw_t(void *arg) { /* flushes entry 0, blocking in the store */
  fw *x = arg;
  x->rc_t = b2_cache_flush_entry(x->c, x->e0);
  return NULL;
}

static void *fw_u(void *arg) { /* fsync of the file */
  fw *x = arg;
  x->rc_u = b2_cache_flush_file(x->c, 1, NULL);
  atomic_store(&x->done_u, 1);
  return NULL;
}

static void *fw_w(void *arg) { /* a writer over the dirty bound */
  fw *x = arg;
  b2_cache_entry *e;
  x->rc_w = b2_cache_get(x->c, 1, 1, pf_load, NULL, &e);
  if (x->rc_w == 0) {
    x->rc_w = b2_cache_write_begin(x->c, e, x, fw_flush);
    if (x->rc_w == 0) b2_cache_write_end(x->c, e, 1);
    b2_cache_release(x->c, e);
  }
  atomic_store(&x->done_w, 1);
  return NULL;
}

/* Entry 0 of file 1 dirtied, and thread *t flushing it, blocked in the
 * store until fw_open. */
static void fw_start(fw *x, pthread_t *t) {
  x->c = mk(1 << 20, 512, 0);
  pthread_mutex_init(&x->mu, NULL);
  pthread_cond_init(&x->cv, NULL);
  atomic_init(&x->done_u, 0);
  atomic_init(&x->done_w, 0);
  CHECK_EQ(b2_cache_get(x->c, 1, 0, pf_load, NULL, &x->e0), 0);
  CHECK_EQ(b2_cache_write_begin(x->c, x->e0, x, fw_flush), 0);
  b2_cache_write_end(x->c, x->e0, 1);
  pthread_create(t, NULL, fw_t, x);
  pthread_mutex_lock(&x->mu);
  while (!x->started) pthread_cond_wait(&x->cv, &x->mu);
  pthread_mutex_unlock(&x->mu);
}

/* Set *flag under mu and wake every waiter on cv (fw_open, gate_open). */
static void raise_flag(pthread_mutex_t *mu, pthread_cond_t *cv, int *flag) {
  pthread_mutex_lock(mu);
  *flag = 1;
  pthread_cond_broadcast(cv);
  pthread_mutex_unlock(mu);
}

static void fw_open(fw *x) { raise_flag(&x->mu, &x->cv, &x->open); }

static void test_mt_flush_waits(void) {
  fw x = {0};
  pthread_t t, u, w;
  fw_start(&x, &t);
  pthread_create(&u, NULL, fw_u, &x);
  pthread_create(&w, NULL, fw_w, &x);
  sleep_us(150000);
  CHECK_EQ(atomic_load(&x.done_u), 0); /* both wait for the running flush */
  CHECK_EQ(atomic_load(&x.done_w), 0);
  fw_open(&x);
  pthread_join(t, NULL);
  pthread_join(u, NULL);
  pthread_join(w, NULL);
  CHECK_EQ(x.rc_t, 0);
  CHECK_EQ(x.rc_u, 0);
  CHECK_EQ(x.rc_w, 0);
  /* entry 0 was stored once; entry 1, written after the fsync began, is
   * normally still dirty (the count allows for a very late fsync start) */
  b2_cache_stats st = stats(x.c);
  CHECK(!b2_cache_is_dirty(x.c, x.e0));
  CHECK_EQ(x.calls + (int)st.dirty_entries, 2);
  CHECK_EQ(st.dirty_bytes, st.dirty_entries * 512);
  b2_cache_release(x.c, x.e0);
  CHECK_EQ(b2_cache_flush_all(x.c, NULL), 0);
  CHECK_EQ(x.calls, 2);
  b2_cache_destroy(x.c);
  pthread_cond_destroy(&x.cv);
  pthread_mutex_destroy(&x.mu);
}

/* A discard (truncate) of an entry whose flush is running returns only
 * after the flush callback has returned: else the callback, started before
 * the cut, could store the cut chunk's bytes after the file grew back. */
static void *fw_d(void *arg) {
  fw *x = arg;
  x->rc_u = b2_cache_discard(x->c, 1, 0);
  atomic_store(&x->done_u, 1);
  return NULL;
}

static void test_mt_discard_waits_flush(void) {
  fw x = {0};
  pthread_t t, d;
  fw_start(&x, &t);
  pthread_create(&d, NULL, fw_d, &x);
  sleep_us(150000);
  CHECK_EQ(atomic_load(&x.done_u), 0); /* the callback is still running */
  fw_open(&x);
  pthread_join(d, NULL);
  pthread_join(t, NULL);
  CHECK_EQ(x.rc_u, 1); /* dropped, once the flush was over */
  CHECK_EQ(x.calls, 1);
  b2_cache_entry *e;
  CHECK_EQ(b2_cache_peek(x.c, 1, 0, &e), B2_E_NOENT);
  b2_cache_stats st = stats(x.c);
  CHECK_EQ(st.dirty_entries, 0);
  b2_cache_release(x.c, x.e0); /* the last ref frees the dropped entry */
  CHECK_EQ(stats(x.c).entries, 0);
  b2_cache_destroy(x.c);
  pthread_cond_destroy(&x.cv);
  pthread_mutex_destroy(&x.mu);
}

/* ---- the pool ---------------------------------------------------------- */

typedef struct gate {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int open, started;
  atomic_int done;
} gate;

static void gated_job(void *arg) {
  gate *g = arg;
  pthread_mutex_lock(&g->mu);
  g->started++;
  pthread_cond_broadcast(&g->cv);
  while (!g->open) pthread_cond_wait(&g->cv, &g->mu);
  pthread_mutex_unlock(&g->mu);
  atomic_fetch_add(&g->done, 1);
}

/* Queue two gated jobs in group grp and wait until both run: the two
 * workers of p are busy then. */
static void gate_fill(b2_pool *p, gate *g, b2_pool_group *grp) {
  CHECK_EQ(b2_pool_try_submit(p, gated_job, g, grp), 0);
  CHECK_EQ(b2_pool_try_submit(p, gated_job, g, grp), 0);
  pthread_mutex_lock(&g->mu);
  while (g->started < 2) pthread_cond_wait(&g->cv, &g->mu);
  pthread_mutex_unlock(&g->mu);
}

static void gate_open(gate *g) { raise_flag(&g->mu, &g->cv, &g->open); }

static void count_job(void *arg) {
  sleep_us(300);
  atomic_fetch_add((atomic_int *)arg, 1);
}

typedef struct nest {
  b2_pool *p;
  atomic_int inner;
} nest;

static void inner_job(void *arg) { atomic_fetch_add(&((nest *)arg)->inner, 1); }

/* A job that fans out on its own pool and waits: must not deadlock even
 * when every worker does it and the queue is full. */
static void outer_job(void *arg) {
  nest *n = arg;
  b2_pool_group g = B2_POOL_GROUP_INIT;
  for (int i = 0; i < 8; i++) b2_pool_submit(n->p, inner_job, n, &g);
  b2_pool_wait(n->p, &g);
}

static void test_mt_pool(void) {
  b2_pool *p;
  CHECK_EQ(b2_pool_create(0, 4, &p), B2_E_INVAL);
  CHECK_EQ(b2_pool_create(2, 3, &p), 0);
  CHECK_EQ(b2_pool_threads(p), 2);
  gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};
  b2_pool_group grp = B2_POOL_GROUP_INIT;
  gate_fill(p, &g, &grp);
  /* both workers busy: three queue slots, then busy */
  for (int i = 0; i < 3; i++)
    CHECK_EQ(b2_pool_try_submit(p, gated_job, &g, &grp), 0);
  CHECK_EQ(b2_pool_try_submit(p, gated_job, &g, &grp), B2_E_BUSY);
  gate_open(&g);
  /* blocking submits get through once slots free up */
  atomic_int cnt;
  atomic_init(&cnt, 0);
  for (int i = 0; i < 20; i++)
    CHECK_EQ(b2_pool_submit(p, count_job, &cnt, &grp), 0);
  b2_pool_wait(p, &grp);
  CHECK_EQ(atomic_load(&g.done), 5);
  CHECK_EQ(atomic_load(&cnt), 20);
  CHECK_EQ(grp.pending, 0);

  /* nested fan-out from every worker */
  nest n = {.p = p};
  atomic_init(&n.inner, 0);
  b2_pool_group og = B2_POOL_GROUP_INIT;
  for (int i = 0; i < 6; i++)
    CHECK_EQ(b2_pool_submit(p, outer_job, &n, &og), 0);
  b2_pool_wait(p, &og);
  CHECK_EQ(atomic_load(&n.inner), 48);

  /* destroy runs what is still queued */
  atomic_init(&cnt, 0);
  for (int i = 0; i < 10; i++)
    CHECK_EQ(b2_pool_submit(p, count_job, &cnt, NULL), 0);
  b2_pool_destroy(p);
  CHECK_EQ(atomic_load(&cnt), 10);
}

static void *open_gate_later(void *arg) {
  sleep_us(20000);
  gate_open(arg);
  return NULL;
}

/* A pre-wake that succeeds within ~5 s (once an earlier poll has ended). */
static int prewake_soon(b2_pool *p, long usec) {
  for (int k = 0; k < 500; k++) {
    sleep_us(10000);
    if (b2_pool_prewake(p, usec)) return 1;
  }
  return 0;
}

/* Wait (up to ~5 s) until `n` workers of p are idle. */
static int wait_idle(b2_pool *p, int n) {
  for (int k = 0; k < 5000; k++) {
    if (b2_pool_idle(p) == n) return 1;
    sleep_us(1000);
  }
  return 0;
}

/* Pre-waking: one worker at a time is asked to poll; what it polls for
 * runs (also jobs beyond the one it takes, which need a wake-up); the
 * polling worker counts as idle and goes back to sleep when its time is
 * up; polling waits end with their group; a pool stops at once under a
 * poller with a long time left (a 60 s poll would trip the watchdog). */
static void test_mt_pool_prewake(void) {
  b2_pool *p;
  CHECK_EQ(b2_pool_create(2, 8, &p), 0);
  CHECK(wait_idle(p, 2));
  CHECK_EQ(b2_pool_prewake(NULL, 100), 0);
  CHECK_EQ(b2_pool_prewake(p, 0), 0);
  CHECK_EQ(b2_pool_prewake(p, 5000000), 1);
  CHECK_EQ(b2_pool_prewake(p, 5000000), 0); /* one asked already */
  CHECK_EQ(b2_pool_idle(p), 2);             /* the poller is available */
  atomic_int cnt;
  atomic_init(&cnt, 0);
  b2_pool_group grp = B2_POOL_GROUP_INIT;
  for (int i = 0; i < 3; i++) CHECK_EQ(b2_pool_try_submit(p, count_job, &cnt, &grp), 0);
  b2_pool_wait(p, &grp);
  CHECK_EQ(atomic_load(&cnt), 3);
  CHECK(wait_idle(p, 2));

  /* a short poll ends by itself; jobs later still wake a worker */
  CHECK_EQ(b2_pool_prewake(p, 1000), 1);
  CHECK(prewake_soon(p, 1000)); /* asked again once the poller went back to sleep */
  sleep_us(20000);
  for (int i = 0; i < 4; i++) CHECK_EQ(b2_pool_try_submit(p, count_job, &cnt, &grp), 0);
  b2_pool_wait(p, &grp);
  CHECK_EQ(atomic_load(&cnt), 7);

  /* nothing to pre-wake while jobs are queued and the workers busy */
  gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};
  CHECK(wait_idle(p, 2));
  gate_fill(p, &g, &grp);
  CHECK_EQ(b2_pool_prewake(p, 1000), 0);
  CHECK_EQ(b2_pool_try_submit(p, count_job, &cnt, &grp), 0);
  CHECK_EQ(b2_pool_prewake(p, 1000), 0);
  gate_open(&g);
  b2_pool_wait(p, &grp);
  CHECK_EQ(atomic_load(&cnt), 8);
  CHECK_EQ(atomic_load(&g.done), 2);

  /* polling waits: done when the group is, past the polling time too,
   * running its queued jobs itself */
  for (int i = 0; i < 3; i++) CHECK_EQ(b2_pool_try_submit(p, count_job, &cnt, &grp), 0);
  b2_pool_wait_poll(p, &grp, 1000);
  CHECK_EQ(atomic_load(&cnt), 11);
  CHECK_EQ(grp.pending, 0);
  gate g2 = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};
  CHECK(wait_idle(p, 2));
  gate_fill(p, &g2, &grp);
  CHECK_EQ(b2_pool_try_submit(p, count_job, &cnt, &grp), 0); /* queued: ours to run */
  pthread_t opener;
  CHECK_EQ(pthread_create(&opener, NULL, open_gate_later, &g2), 0);
  b2_pool_wait_poll(p, &grp, 500); /* the gate opens after 20 ms */
  CHECK_EQ(atomic_load(&g2.done), 2);
  CHECK_EQ(atomic_load(&cnt), 12);
  CHECK_EQ(grp.pending, 0);
  pthread_join(opener, NULL);

  /* a cancelled pre-wake ends the poll at once (else 60 s) */
  CHECK(prewake_soon(p, 60000000));
  sleep_us(5000);
  b2_pool_prewake_cancel(p);
  CHECK(prewake_soon(p, 1000));
  b2_pool_prewake_cancel(p); /* ends that 1 ms poll */
  b2_pool_prewake_cancel(p); /* nothing polling: harmless */

  /* stop under a poller with 60 s left (once the last poll has ended) */
  CHECK(prewake_soon(p, 60000000));
  sleep_us(5000);
  b2_pool_destroy(p);
}

int main(void) {
  pthread_t wd;
  pthread_create(&wd, NULL, watchdog, NULL);
  pthread_detach(wd);
  RUN(test_mt_pool);
  RUN(test_mt_pool_prewake);
  RUN(test_mt_single_flight);
  RUN(test_mt_single_flight_failure);
  RUN(test_mt_random_reads);
  RUN(test_mt_dirty_mixed);
  RUN(test_mt_flush_file_pool);
  RUN(test_mt_flush_waits);
  RUN(test_mt_discard_waits_flush);
  T_END();
}
