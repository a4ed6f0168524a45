/* test_cache.c - single-threaded behaviour of the chunk cache: hits and
 * misses, LRU order and the byte bound, pins, invalidation and discard,
 * load failures, write sections, dirty write-back on eviction, kept flush
 * errors, the dirty bound, flush by file / entry / idle time, the entry
 * buffers. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "b2_cache.h"
#include "b2_error.h"
#include "t.h"

/* ---- a loader producing key-derived buffers ---------------------------- */

typedef struct loader {
  size_t size;    /* bytes per buffer (0: key-derived) */
  int fail;       /* return this code instead (negative) */
  int calls;      /* loader invocations */
} loader;

static uint8_t pat(uint64_t file, int64_t chunk, size_t i) {
  return (uint8_t)(file * 131u + (uint64_t)chunk * 7u + i * 13u + (i >> 8));
}

static int load_fn(void *arg, uint64_t file, int64_t chunk, uint8_t **data,
                   size_t *len) {
  loader *l = arg;
  l->calls++;
  if (l->fail) return b2_fail(l->fail, "test loader refuses chunk %lld",
                              (long long)chunk);
  size_t n = l->size ? l->size : 100 + (size_t)chunk * 10;
  uint8_t *p = b2_cache_buf_alloc(n);
  if (!p) return B2_E_NOMEM;
  for (size_t i = 0; i < n; i++) p[i] = pat(file, chunk, i);
  *data = p;
  *len = n;
  return 0;
}

static int pattern_ok(const b2_cache_entry *e, uint64_t file, int64_t chunk) {
  const uint8_t *d = b2_cache_data(e);
  for (size_t i = 0; i < b2_cache_len(e); i++)
    if (d[i] != pat(file, chunk, i)) return 0;
  return 1;
}

static b2_cache *mk(size_t cap, size_t dirty, unsigned shards) {
  b2_cache_config cfg = {cap, dirty, shards};
  b2_cache *c = NULL;
  int rc = b2_cache_create(&cfg, &c);
  if (rc < 0) {
    fprintf(stderr, "  create: %s\n", b2_last_detail());
    exit(1);
  }
  return c;
}

/* get + release; returns the get code. */
static int touch(b2_cache *c, loader *l, uint64_t file, int64_t chunk) {
  b2_cache_entry *e;
  int rc = b2_cache_get(c, file, chunk, load_fn, l, &e);
  if (rc == 0) b2_cache_release(c, e);
  return rc;
}

static int present(b2_cache *c, uint64_t file, int64_t chunk) {
  b2_cache_entry *e;
  if (b2_cache_peek(c, file, chunk, &e) != 0) return 0;
  b2_cache_release(c, e);
  return 1;
}

static b2_cache_stats stats(b2_cache *c) {
  b2_cache_stats st;
  b2_cache_get_stats(c, &st);
  return st;
}

/* ---- a flush callback recording what it stores ------------------------- */

#define MAXREC 64
typedef struct store {
  int fail;             /* return this for every flush (negative) */
  int64_t fail_chunk;   /* ... or only for this chunk (-1: all) */
  int calls;
  int64_t chunk[MAXREC];
  size_t len[MAXREC];
  uint8_t first[MAXREC], last[MAXREC];
  int uniform[MAXREC];  /* all bytes equal */
  int drop;             /* return B2_CACHE_FLUSH_DROP */
} store;

static int flush_fn(void *owner, int64_t chunk, const uint8_t *data,
                    size_t len) {
  store *s = owner;
  if (s->fail && (s->fail_chunk < 0 || s->fail_chunk == chunk))
    return b2_fail(s->fail, "test store: chunk %lld refused",
                   (long long)chunk);
  int i = s->calls++;
  if (i < MAXREC) {
    s->chunk[i] = chunk;
    s->len[i] = len;
    s->first[i] = len ? data[0] : 0;
    s->last[i] = len ? data[len - 1] : 0;
    int u = 1;
    for (size_t k = 1; k < len; k++) u &= data[k] == data[0];
    s->uniform[i] = u;
  }
  return s->drop ? B2_CACHE_FLUSH_DROP : 0;
}

/* Overwrite a pinned entry with byte v, marking it dirty. */
static int write_all(b2_cache *c, b2_cache_entry *e, store *s, uint8_t v) {
  int rc = b2_cache_write_begin(c, e, s, flush_fn);
  if (rc < 0) return rc;
  memset(b2_cache_wdata(e), v, b2_cache_len(e));
  b2_cache_write_end(c, e, 1);
  return 0;
}

/* get, write v, release. */
static int dirty_key(b2_cache *c, loader *l, store *s, uint64_t file,
                     int64_t chunk, uint8_t v) {
  b2_cache_entry *e;
  int rc = b2_cache_get(c, file, chunk, load_fn, l, &e);
  if (rc < 0) return rc;
  rc = write_all(c, e, s, v);
  b2_cache_release(c, e);
  return rc;
}

/* ---- tests ------------------------------------------------------------ */

static void test_hit_miss(void) {
  b2_cache *c = mk(1 << 20, 0, 0);
  loader l = {0};
  b2_cache_entry *e, *e2;
  CHECK_EQ(b2_cache_get(c, 7, 3, load_fn, &l, &e), 0);
  CHECK_EQ(l.calls, 1);
  CHECK_EQ(b2_cache_len(e), 130);
  CHECK(pattern_ok(e, 7, 3));
  CHECK_EQ(b2_cache_entry_file(e), 7);
  CHECK_EQ(b2_cache_entry_chunk(e), 3);
  CHECK_EQ(b2_cache_get(c, 7, 3, load_fn, &l, &e2), 0);
  CHECK(e2 == e);
  CHECK_EQ(l.calls, 1);
  b2_cache_release(c, e2);
  b2_cache_release(c, e);
  /* same chunk, other file: a different key */
  CHECK_EQ(touch(c, &l, 8, 3), 0);
  CHECK_EQ(l.calls, 2);
  CHECK_EQ(b2_cache_peek(c, 9, 3, &e), B2_E_NOENT);
  CHECK(e == NULL);
  b2_cache_stats st = stats(c);
  CHECK_EQ(st.hits, 1);
  CHECK_EQ(st.misses, 2);
  CHECK_EQ(st.entries, 2);
  CHECK_EQ(st.bytes, 260);
  CHECK_EQ(st.capacity, 1 << 20);
  CHECK_EQ(st.dirty_max, (1 << 20) / 4);
  uint64_t a = b2_cache_file_id(c), b = b2_cache_file_id(c);
  CHECK(a != 0 && b != 0 && a != b);
  b2_cache_destroy(c);

  b2_cache_config bad = {1000, 2000, 0};
  CHECK_EQ(b2_cache_create(&bad, &c), B2_E_INVAL);
  CHECK_EQ(b2_cache_get(NULL, 1, 1, load_fn, &l, &e), B2_E_INVAL);
}

/* LRU order: with exact (1 shard) and sharded (global LRU over shards). */
static void lru_case(unsigned shards) {
  b2_cache *c = mk(4000, 1000, shards);
  loader l = {.size = 1000};
  for (int k = 0; k < 4; k++) CHECK_EQ(touch(c, &l, 1, k), 0);
  CHECK_EQ(touch(c, &l, 1, 0), 0); /* 0 becomes most recent */
  CHECK_EQ(l.calls, 4);
  CHECK_EQ(stats(c).bytes, 4000);
  CHECK_EQ(touch(c, &l, 1, 4), 0); /* over capacity: evict 1 */
  CHECK(!present(c, 1, 1));
  CHECK(present(c, 1, 0) && present(c, 1, 2) && present(c, 1, 3) &&
        present(c, 1, 4));
  /* peek does not count as a use of... it does: the peeks above released
   * 0,2,3,4 in that order, so 0 is now the oldest. */
  CHECK_EQ(touch(c, &l, 1, 5), 0);
  CHECK(!present(c, 1, 0));
  CHECK(present(c, 1, 2) && present(c, 1, 3) && present(c, 1, 4) &&
        present(c, 1, 5));
  b2_cache_stats st = stats(c);
  CHECK_EQ(st.bytes, 4000);
  CHECK_EQ(st.entries, 4);
  CHECK_EQ(st.evictions, 2);
  /* an evicted key loads again */
  CHECK_EQ(touch(c, &l, 1, 1), 0);
  CHECK_EQ(l.calls, 7);
  CHECK(!present(c, 1, 2));
  b2_cache_destroy(c);
}

static void test_lru_one_shard(void) { lru_case(1); }
static void test_lru_sharded(void) { lru_case(64); }

static void test_byte_bound(void) {
  b2_cache *c = mk(10000, 1000, 1);
  loader l = {0};
  /* sizes 100 + 10*chunk: chunks 200, 300, 400 -> 2100, 3100, 4100 */
  CHECK_EQ(touch(c, &l, 2, 200), 0);
  CHECK_EQ(touch(c, &l, 2, 300), 0);
  CHECK_EQ(touch(c, &l, 2, 400), 0);
  CHECK_EQ(stats(c).bytes, 9300);
  CHECK_EQ(touch(c, &l, 2, 10), 0); /* 200 bytes: 9500, fits */
  CHECK_EQ(stats(c).entries, 4);
  CHECK_EQ(touch(c, &l, 2, 500), 0); /* 5100: evict 200, 300 (oldest) */
  b2_cache_stats st = stats(c);
  CHECK_EQ(st.bytes, 4100 + 200 + 5100);
  CHECK(!present(c, 2, 200) && !present(c, 2, 300));
  CHECK(present(c, 2, 400) && present(c, 2, 10) && present(c, 2, 500));
  CHECK(st.bytes <= 10000);
  /* one entry larger than the whole capacity: kept while pinned, evicted
   * after (it is the only one left) */
  b2_cache_entry *e;
  CHECK_EQ(b2_cache_get(c, 2, 1000, load_fn, &l, &e), 0); /* 10100 bytes */
  CHECK(pattern_ok(e, 2, 1000));
  st = stats(c);
  CHECK_EQ(st.entries, 1);
  CHECK_EQ(st.bytes, 10100);
  b2_cache_release(c, e);
  CHECK_EQ(touch(c, &l, 2, 0), 0);
  CHECK(!present(c, 2, 1000));
  CHECK_EQ(stats(c).bytes, 100);
  b2_cache_destroy(c);
}

static void test_pin_prevents_eviction(void) {
  b2_cache *c = mk(2000, 1000, 4);
  loader l = {.size = 1000};
  b2_cache_entry *pinned;
  CHECK_EQ(b2_cache_get(c, 3, 0, load_fn, &l, &pinned), 0);
  for (int k = 1; k <= 20; k++) CHECK_EQ(touch(c, &l, 3, k), 0);
  CHECK(present(c, 3, 0));
  CHECK(pattern_ok(pinned, 3, 0));
  CHECK(stats(c).bytes <= 2000);
  /* pin three: over capacity is allowed while pinned */
  b2_cache_entry *p1, *p2;
  CHECK_EQ(b2_cache_get(c, 3, 100, load_fn, &l, &p1), 0);
  CHECK_EQ(b2_cache_get(c, 3, 101, load_fn, &l, &p2), 0);
  b2_cache_stats st = stats(c);
  CHECK_EQ(st.entries, 3);
  CHECK_EQ(st.bytes, 3000);
  CHECK(pattern_ok(pinned, 3, 0) && pattern_ok(p1, 3, 100) &&
        pattern_ok(p2, 3, 101));
  b2_cache_release(c, p1);
  b2_cache_release(c, p2);
  b2_cache_release(c, pinned);
  CHECK_EQ(touch(c, &l, 3, 200), 0);
  st = stats(c);
  CHECK(st.bytes <= 2000);
  CHECK(present(c, 3, 200));
  CHECK(!present(c, 3, 100)); /* the oldest released went first */
  b2_cache_destroy(c);
}

static void test_invalidate(void) {
  b2_cache *c = mk(1 << 20, 1 << 16, 8);
  loader l = {.size = 500};
  store s = {.fail_chunk = -1};
  CHECK_EQ(touch(c, &l, 4, 1), 0);
  CHECK_EQ(b2_cache_invalidate(c, 4, 1), 1);
  CHECK(!present(c, 4, 1));
  CHECK_EQ(b2_cache_invalidate(c, 4, 1), 0);
  CHECK_EQ(touch(c, &l, 4, 1), 0);
  CHECK_EQ(l.calls, 2);

  /* a pinned entry leaves the index but stays readable */
  b2_cache_entry *old, *nw;
  CHECK_EQ(b2_cache_get(c, 4, 2, load_fn, &l, &old), 0);
  CHECK_EQ(b2_cache_invalidate(c, 4, 2), 1);
  CHECK(!present(c, 4, 2));
  CHECK(pattern_ok(old, 4, 2));
  CHECK_EQ(b2_cache_get(c, 4, 2, load_fn, &l, &nw), 0);
  CHECK(nw != old);
  CHECK_EQ(l.calls, 4);
  CHECK_EQ(stats(c).bytes, 1500); /* 4/1, old 4/2, new 4/2 */
  CHECK_EQ(b2_cache_write_begin(c, old, &s, flush_fn), B2_E_NOENT);
  b2_cache_release(c, old);
  CHECK_EQ(stats(c).bytes, 1000);
  b2_cache_release(c, nw);

  /* by file: other files untouched; dirty entries kept */
  for (int k = 0; k < 10; k++) {
    CHECK_EQ(touch(c, &l, 5, k), 0);
    CHECK_EQ(touch(c, &l, 6, k), 0);
  }
  CHECK_EQ(dirty_key(c, &l, &s, 5, 3, 0x5a), 0);
  CHECK_EQ(b2_cache_invalidate(c, 5, 3), B2_E_BUSY);
  CHECK_EQ(b2_cache_invalidate_file(c, 5), 1);
  for (int k = 0; k < 10; k++) {
    CHECK_EQ(present(c, 5, k), k == 3);
    CHECK(present(c, 6, k));
  }
  CHECK_EQ(s.calls, 0);
  b2_cache_stats st = stats(c);
  CHECK_EQ(st.dirty_entries, 1);
  CHECK_EQ(st.dirty_bytes, 500);

  /* discard drops dirty data on purpose, without flushing */
  CHECK_EQ(b2_cache_discard(c, 5, 3), 1);
  CHECK(!present(c, 5, 3));
  st = stats(c);
  CHECK_EQ(st.dirty_entries, 0);
  CHECK_EQ(st.dirty_bytes, 0);
  CHECK_EQ(dirty_key(c, &l, &s, 6, 0, 1), 0);
  /* by keys: only those below nkeys, looked up one by one (few) */
  CHECK_EQ(b2_cache_discard_keys(c, 6, 3), 3);
  for (int k = 0; k < 10; k++) CHECK_EQ(present(c, 6, k), k >= 3);
  CHECK_EQ(b2_cache_discard_keys(c, 6, -1), 7); /* unknown: the whole walk */
  for (int k = 0; k < 10; k++) {
    b2_cache_entry *g;
    CHECK_EQ(b2_cache_get(c, 6, k, load_fn, &l, &g), 0);
    b2_cache_release(c, g);
  }
  CHECK_EQ(dirty_key(c, &l, &s, 6, 0, 1), 0);
  CHECK_EQ(b2_cache_discard_keys(c, 6, 1000000), 10); /* many: the walk */
  for (int k = 0; k < 10; k++) {
    b2_cache_entry *g;
    CHECK_EQ(b2_cache_get(c, 6, k, load_fn, &l, &g), 0);
    b2_cache_release(c, g);
  }
  CHECK_EQ(dirty_key(c, &l, &s, 6, 0, 1), 0);
  CHECK_EQ(b2_cache_discard_file(c, 6), 10);
  CHECK_EQ(stats(c).dirty_bytes, 0);
  CHECK_EQ(b2_cache_flush_all(c, NULL), 0);
  CHECK_EQ(s.calls, 0);

  /* a write section open during discard: the entry does not turn dirty */
  b2_cache_entry *e;
  CHECK_EQ(b2_cache_get(c, 7, 0, load_fn, &l, &e), 0);
  CHECK_EQ(b2_cache_write_begin(c, e, &s, flush_fn), 0);
  CHECK_EQ(b2_cache_invalidate(c, 7, 0), B2_E_BUSY); /* being written */
  CHECK_EQ(b2_cache_discard(c, 7, 0), 1);
  memset(b2_cache_wdata(e), 9, b2_cache_len(e));
  b2_cache_write_end(c, e, 1);
  CHECK(!b2_cache_is_dirty(c, e));
  b2_cache_release(c, e);
  st = stats(c);
  CHECK_EQ(st.dirty_bytes, 0);
  CHECK_EQ(st.entries, 2); /* 4/1 and the new 4/2 */
  CHECK_EQ(st.bytes, 1000);
  b2_cache_destroy(c);
}

static void test_load_failure(void) {
  b2_cache *c = mk(1 << 20, 0, 0);
  loader l = {.fail = B2_E_CODEC};
  b2_cache_entry *e = (b2_cache_entry *)&l;
  CHECK_EQ(b2_cache_get(c, 1, 1, load_fn, &l, &e), B2_E_CODEC);
  CHECK(e == NULL);
  CHECK(strstr(b2_last_detail(), "refuses chunk 1") != NULL);
  b2_cache_stats st = stats(c);
  CHECK_EQ(st.entries, 0);
  CHECK_EQ(st.bytes, 0);
  CHECK_EQ(st.load_errors, 1);
  CHECK(!present(c, 1, 1));
  /* no negative caching: the next get tries again */
  l.fail = 0;
  CHECK_EQ(b2_cache_get(c, 1, 1, load_fn, &l, &e), 0);
  CHECK_EQ(l.calls, 2);
  CHECK(pattern_ok(e, 1, 1));
  b2_cache_release(c, e);
  b2_cache_destroy(c);
}

static void test_dirty_flush_on_eviction(void) {
  b2_cache *c = mk(3000, 3000, 1);
  loader l = {.size = 1000};
  store s = {.fail_chunk = -1};
  /* clean entries go before dirty ones */
  CHECK_EQ(dirty_key(c, &l, &s, 1, 0, 0xab), 0);
  CHECK_EQ(touch(c, &l, 1, 1), 0);
  CHECK_EQ(touch(c, &l, 1, 2), 0);
  CHECK_EQ(touch(c, &l, 1, 3), 0);
  CHECK(present(c, 1, 0) && !present(c, 1, 1));
  CHECK_EQ(s.calls, 0);
  /* all dirty: the oldest dirty entry is written back, then evicted */
  CHECK_EQ(dirty_key(c, &l, &s, 1, 2, 0xc2), 0);
  CHECK_EQ(dirty_key(c, &l, &s, 1, 3, 0xc3), 0);
  CHECK_EQ(stats(c).dirty_bytes, 3000);
  CHECK_EQ(touch(c, &l, 1, 4), 0);
  CHECK_EQ(s.calls, 1);
  CHECK_EQ(s.chunk[0], 0);
  CHECK_EQ(s.len[0], 1000);
  CHECK_EQ(s.first[0], 0xab);
  CHECK(s.uniform[0]);
  CHECK(!present(c, 1, 0));
  CHECK(present(c, 1, 2) && present(c, 1, 3) && present(c, 1, 4));
  b2_cache_stats st = stats(c);
  CHECK_EQ(st.dirty_bytes, 2000);
  CHECK_EQ(st.dirty_entries, 2);
  CHECK_EQ(st.bytes, 3000);
  CHECK_EQ(st.flushes, 1);
  /* clean entries keep going first, pinned or not the dirty ones stay */
  b2_cache_entry *e;
  CHECK_EQ(b2_cache_get(c, 1, 2, load_fn, &l, &e), 0);
  CHECK_EQ(touch(c, &l, 1, 4), 0); /* a hit: no pressure */
  CHECK_EQ(touch(c, &l, 1, 5), 0); /* evicts 4 (clean) */
  CHECK_EQ(s.calls, 1);
  CHECK_EQ(touch(c, &l, 1, 6), 0); /* evicts 5, the only clean one */
  CHECK_EQ(touch(c, &l, 1, 7), 0); /* evicts 6 */
  CHECK(present(c, 1, 2) && present(c, 1, 3));
  b2_cache_release(c, e);
  CHECK_EQ(b2_cache_flush_all(c, NULL), 0);
  CHECK_EQ(s.calls, 3);
  CHECK_EQ(stats(c).dirty_bytes, 0);
  b2_cache_destroy(c);
}

static void test_flush_error_kept(void) {
  b2_cache *c = mk(3000, 3000, 2);
  loader l = {.size = 1000};
  store s = {.fail = B2_E_NOSPC, .fail_chunk = 0};
  b2_cache_entry *e;
  CHECK_EQ(b2_cache_get(c, 1, 0, load_fn, &l, &e), 0);
  CHECK_EQ(write_all(c, e, &s, 0x77), 0);
  CHECK_EQ(b2_cache_flush_entry(c, e), B2_E_NOSPC);
  CHECK(strstr(b2_last_detail(), "refused") != NULL);
  CHECK(b2_cache_is_dirty(c, e));
  CHECK_EQ(b2_cache_flush_error(c, e), B2_E_NOSPC);
  b2_cache_release(c, e);
  /* eviction pressure never drops it; it is not even retried */
  for (int k = 1; k < 10; k++) CHECK_EQ(touch(c, &l, 1, k), 0);
  CHECK(present(c, 1, 0));
  b2_cache_stats st = stats(c);
  CHECK_EQ(st.dirty_bytes, 1000);
  CHECK_EQ(st.flush_errors, 1);
  /* a background pass fails too; the owner hears it from flush_file */
  CHECK_EQ(b2_cache_flush_idle(c, 0), B2_E_NOSPC);
  CHECK_EQ(b2_cache_flush_file(c, 1, NULL), B2_E_NOSPC);
  CHECK_EQ(b2_cache_flush_file(c, 2, NULL), 0); /* other file: no error */
  CHECK_EQ(stats(c).flush_errors, 3);
  CHECK_EQ(s.calls, 0);
  /* the device recovers: data that was kept is stored */
  s.fail = 0;
  CHECK_EQ(b2_cache_flush_file(c, 1, NULL), 0);
  CHECK_EQ(s.calls, 1);
  CHECK_EQ(s.first[0], 0x77);
  CHECK(s.uniform[0]);
  CHECK_EQ(b2_cache_peek(c, 1, 0, &e), 0);
  CHECK(!b2_cache_is_dirty(c, e));
  CHECK_EQ(b2_cache_flush_error(c, e), 0);
  b2_cache_release(c, e);
  CHECK_EQ(b2_cache_flush_file(c, 1, NULL), 0);
  CHECK_EQ(s.calls, 1); /* nothing left to write */
  b2_cache_destroy(c);
}

static void test_dirty_bound(void) {
  b2_cache *c = mk(1 << 20, 3000, 4);
  loader l = {.size = 1000};
  store s = {.fail_chunk = -1};
  b2_cache_entry *pins[10];
  /* the writer keeps every entry pinned: flushing must not need them */
  for (int k = 0; k < 10; k++) {
    CHECK_EQ(b2_cache_get(c, 9, k, load_fn, &l, &pins[k]), 0);
    CHECK_EQ(write_all(c, pins[k], &s, (uint8_t)(0x10 + k)), 0);
    CHECK(stats(c).dirty_bytes <= 3000);
  }
  CHECK_EQ(s.calls, 7);
  for (int i = 0; i < 7 && i < s.calls; i++) { /* oldest first */
    CHECK_EQ(s.chunk[i], i);
    CHECK_EQ(s.first[i], 0x10 + i);
  }
  /* rewriting an entry that is already dirty needs no room */
  CHECK_EQ(write_all(c, pins[9], &s, 0x99), 0);
  CHECK_EQ(s.calls, 7);
  for (int k = 0; k < 10; k++) b2_cache_release(c, pins[k]);
  CHECK_EQ(b2_cache_flush_file(c, 9, NULL), 0);
  CHECK_EQ(s.calls, 10);
  CHECK_EQ(s.first[9], 0x99);

  /* the store fails: writers get the error instead of waiting forever */
  s.fail = B2_E_IO;
  for (int k = 0; k < 3; k++) CHECK_EQ(dirty_key(c, &l, &s, 8, k, 1), 0);
  CHECK_EQ(dirty_key(c, &l, &s, 8, 3, 1), B2_E_IO);
  CHECK(strstr(b2_last_detail(), "dirty limit") != NULL);
  b2_cache_stats st = stats(c);
  CHECK_EQ(st.dirty_bytes, 3000);
  s.fail = 0;
  CHECK_EQ(dirty_key(c, &l, &s, 8, 3, 2), 0); /* retried and written */
  CHECK(stats(c).dirty_bytes <= 3000);
  CHECK_EQ(b2_cache_flush_all(c, NULL), 0);
  CHECK_EQ(stats(c).dirty_bytes, 0);
  b2_cache_destroy(c);
}

/* A flush that met a size change (B2_E_BUSY: done again later) is no
 * failure of the writer that needs room; a real failure beside it is. */
static void test_dirty_bound_busy(void) {
  b2_cache *c = mk(1 << 20, 3000, 4);
  loader l = {.size = 1000};
  store s = {.fail = B2_E_BUSY, .fail_chunk = -1};
  for (int k = 0; k < 3; k++) CHECK_EQ(dirty_key(c, &l, &s, 7, k, 1), 0);
  CHECK_EQ(dirty_key(c, &l, &s, 7, 3, 1), 0); /* over the limit, for now */
  CHECK_EQ(stats(c).dirty_bytes, 4000);
  s.fail_chunk = 1; /* then only chunk 1 is busy, chunk 0 fails for good */
  s.fail = B2_E_NOSPC;
  CHECK_EQ(b2_cache_flush_file(c, 7, NULL), B2_E_NOSPC);
  s.fail = B2_E_BUSY;
  CHECK_EQ(b2_cache_flush_file(c, 7, NULL), B2_E_BUSY);
  s.fail = 0;
  CHECK_EQ(b2_cache_flush_file(c, 7, NULL), 0);
  CHECK_EQ(stats(c).dirty_bytes, 0);
  b2_cache_destroy(c);
}

static void test_resize(void) {
  b2_cache *c = mk(1 << 20, 1 << 16, 0);
  loader l = {.size = 1000};
  store s = {.fail_chunk = -1};
  b2_cache_entry *e;
  CHECK_EQ(b2_cache_get(c, 1, 5, load_fn, &l, &e), 0);
  CHECK_EQ(b2_cache_write_begin(c, e, &s, flush_fn), 0);
  CHECK_EQ(b2_cache_resize(c, e, 300), 0);
  CHECK_EQ(b2_cache_len(e), 300);
  CHECK(pattern_ok(e, 1, 5));
  CHECK_EQ(b2_cache_resize(c, e, 400), 0);
  const uint8_t *d = b2_cache_data(e);
  CHECK(pattern_ok(e, 1, 5) == 0);
  int zeros = 1;
  for (int i = 300; i < 400; i++) zeros &= d[i] == 0;
  CHECK(zeros);
  CHECK_EQ(d[299], pat(1, 5, 299));
  b2_cache_write_end(c, e, 1);
  b2_cache_stats st = stats(c);
  CHECK_EQ(st.bytes, 400);
  CHECK_EQ(st.dirty_bytes, 400);
  CHECK_EQ(b2_cache_flush_entry(c, e), 0);
  CHECK_EQ(s.calls, 1);
  CHECK_EQ(s.len[0], 400);
  CHECK_EQ(s.last[0], 0);
  CHECK_EQ(stats(c).dirty_bytes, 0);
  /* an unmodified write section leaves it clean */
  CHECK_EQ(b2_cache_write_begin(c, e, &s, flush_fn), 0);
  b2_cache_write_end(c, e, 0);
  CHECK(!b2_cache_is_dirty(c, e));
  CHECK_EQ(b2_cache_flush_entry(c, e), 0);
  CHECK_EQ(s.calls, 1);
  b2_cache_release(c, e);
  b2_cache_destroy(c);
  CHECK_EQ(b2_cache_write_begin(NULL, NULL, &s, flush_fn), B2_E_INVAL);
}

/* Bytes written since the entry was last clean: runs in any order, joined
 * where they touch or overlap; exact up to B2_CACHE_WRUNS runs apart and
 * never above the truth beyond; started afresh once the entry is stored. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) { return t_xorshift64(&rng_state); }

static void test_written_runs(void) {
  b2_cache *c = mk(1 << 20, 1 << 18, 0);
  loader l = {.size = 4096};
  store s = {.fail_chunk = -1};
  b2_cache_entry *e;
  CHECK_EQ(b2_cache_get(c, 3, 1, load_fn, &l, &e), 0);
  int bad = 0;
  for (int round = 0; round < 300; round++) {
    uint8_t seen[4096] = {0};
    int nw = 1 + (int)(rnd() % 24);
    for (int w = 0; w < nw; w++) {
      size_t off = rnd() % 4096, len = 1 + rnd() % (round % 3 == 0 ? 1024 : 96);
      if (off + len > 4096) len = 4096 - off;
      if (b2_cache_write_begin(c, e, &s, flush_fn) != 0) { bad++; break; }
      b2_cache_note_write(e, off, len);
      memset(seen + off, 1, len);
      size_t got = b2_cache_written(e);
      b2_cache_write_end(c, e, 1);
      size_t truth = 0, runs = 0;
      for (size_t i = 0; i < 4096; i++) {
        truth += seen[i];
        runs += seen[i] && (i == 0 || !seen[i - 1]);
      }
      /* runs that only touch are joined too, so "apart" counts gaps */
      if (got > truth || (runs <= B2_CACHE_WRUNS && got != truth)) bad++;
    }
    CHECK_EQ(b2_cache_flush_entry(c, e), 0); /* stored: clean again */
    CHECK_EQ(b2_cache_write_begin(c, e, &s, flush_fn), 0);
    if (b2_cache_written(e) != 0) bad++;
    b2_cache_write_end(c, e, 0);
  }
  CHECK_EQ(bad, 0);
  /* pieces of a chunk in any order fill it */
  CHECK_EQ(b2_cache_write_begin(c, e, &s, flush_fn), 0);
  for (int k = 3; k >= 0; k--) b2_cache_note_write(e, (size_t)k * 1024, 1024);
  CHECK_EQ(b2_cache_written(e), 4096);
  b2_cache_write_end(c, e, 1);
  b2_cache_release(c, e);
  b2_cache_destroy(c);
}

static void test_flush_file_and_idle(void) {
  b2_cache *c = mk(1 << 20, 1 << 20, 0);
  loader l = {.size = 100};
  store sa = {.fail_chunk = -1}, sb = {.fail_chunk = -1};
  for (int k = 0; k < 20; k++) CHECK_EQ(dirty_key(c, &l, &sa, 1, k, 1), 0);
  for (int k = 0; k < 5; k++) CHECK_EQ(dirty_key(c, &l, &sb, 2, k, 2), 0);
  CHECK_EQ(b2_cache_flush_idle(c, 600000), 0); /* nothing idle 10 min */
  CHECK_EQ(b2_cache_flush_file(c, 1, NULL), 0);
  CHECK_EQ(sa.calls, 20);
  CHECK_EQ(sb.calls, 0);
  int seen[20] = {0};
  for (int i = 0; i < 20; i++)
    if (sa.chunk[i] >= 0 && sa.chunk[i] < 20) seen[sa.chunk[i]]++;
  for (int k = 0; k < 20; k++) CHECK_EQ(seen[k], 1);
  CHECK_EQ(stats(c).dirty_bytes, 500);
  CHECK_EQ(b2_cache_flush_idle(c, 0), 5);
  CHECK_EQ(sb.calls, 5);
  CHECK_EQ(b2_cache_flush_idle(c, 0), 0);
  CHECK_EQ(stats(c).dirty_entries, 0);
  b2_cache_destroy(c);
}

/* The entry buffers: sizes on both sides of the mapping threshold, the
 * usable capacity, alignment, contents kept, a freed mapping reused for
 * the next buffer of its class, NULL accepted. */
static void test_buffers(void) {
  static const size_t sizes[] = {1, 100, 4096, 65536 - 64, 65536, 100000, 1 << 20, (1 << 20) + 1};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    size_t n = sizes[k];
    uint8_t *p = b2_cache_buf_alloc(n);
    CHECK(p != NULL);
    if (!p) continue;
    CHECK(b2_cache_buf_cap(p) >= n);
    CHECK_EQ((uintptr_t)p % 64, 0);
    memset(p, (int)(k + 1), n);
    CHECK_EQ(p[0], (uint8_t)(k + 1));
    CHECK_EQ(p[n - 1], (uint8_t)(k + 1));
    b2_cache_buf_free(p);
  }
  uint8_t *a = b2_cache_buf_alloc(1 << 20);
  CHECK(a != NULL);
  if (a) memset(a, 0x5a, 1 << 20);
  b2_cache_buf_free(a);
  uint8_t *b = b2_cache_buf_alloc((1 << 20) + 1000); /* same 64 KiB class */
  CHECK(b == a); /* kept and handed out again, no new mapping */
  b2_cache_buf_free(b);
  b2_cache_buf_free(NULL);
  CHECK(b2_cache_buf_cap(NULL) == 0);

  /* zeroed buffers: fresh, kept (dirty bytes reused), small (malloc) */
  static const size_t zs[] = {1 << 20, 1 << 20, (1 << 20) + 70000, 100, 3 << 20};
  for (size_t k = 0; k < sizeof zs / sizeof zs[0]; k++) {
    uint8_t *z = b2_cache_buf_zalloc(zs[k]);
    CHECK(z != NULL);
    if (!z) continue;
    size_t nz = 0;
    for (size_t i = 0; i < zs[k]; i++) nz += z[i] != 0;
    CHECK_EQ(nz, 0);
    memset(z, 0xee, zs[k]); /* the next one may reuse these bytes */
    b2_cache_buf_free(z);
  }
}

/* drop_idle: only clean entries nobody holds leave the cache. */
static void test_drop_idle(void) {
  b2_cache *c = mk(1 << 20, 1 << 16, 8);
  loader l = {.size = 500};
  store s = {.fail_chunk = -1};
  CHECK_EQ(touch(c, &l, 4, 1), 0);
  CHECK_EQ(b2_cache_drop_idle(c, 4, 1), 1);
  CHECK(!present(c, 4, 1));
  CHECK_EQ(b2_cache_drop_idle(c, 4, 1), 0); /* absent */
  b2_cache_entry *e;
  CHECK_EQ(b2_cache_get(c, 4, 2, load_fn, &l, &e), 0);
  CHECK_EQ(b2_cache_drop_idle(c, 4, 2), 0); /* pinned: kept, still writable */
  CHECK(present(c, 4, 2));
  CHECK_EQ(b2_cache_write_begin(c, e, &s, flush_fn), 0);
  b2_cache_write_end(c, e, 1);
  b2_cache_release(c, e);
  CHECK_EQ(b2_cache_drop_idle(c, 4, 2), 0); /* dirty: kept */
  CHECK(present(c, 4, 2));
  CHECK_EQ(b2_cache_flush_all(c, NULL), 0);
  CHECK_EQ(s.calls, 1);
  CHECK_EQ(b2_cache_drop_idle(c, 4, 2), 1); /* clean now */
  CHECK_EQ(stats(c).bytes, 0);
  b2_cache_destroy(c);
}

#if defined(__SANITIZE_ADDRESS__)
/* In a child with stderr closed: 1 if `what` on a mapped buffer of n
 * bytes made AddressSanitizer stop the child. */
static int asan_stops(size_t n, int what) {
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open("/dev/null", O_WRONLY);
    if (fd >= 0) dup2(fd, 2);
    volatile uint8_t *p = b2_cache_buf_alloc(n);
    if (what == 0) p[n] = 1;            /* one past the end */
    if (what == 1) p[n + 63] = 1;       /* the end of the red zone */
    if (what == 2) {                    /* use after free (kept) */
      b2_cache_buf_free((uint8_t *)p);
      p[0] = 1;
    }
    _exit(0);
  }
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) != pid) return 0;
  return !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}
#endif

/* Under AddressSanitizer, a mapped buffer has a red zone after its bytes
 * and a kept (freed) one is off limits. */
static void test_buffer_red_zones(void) {
#if defined(__SANITIZE_ADDRESS__)
  CHECK(asan_stops(100000, 0));
  CHECK(asan_stops(65536 * 2 - 64 - 64, 1)); /* ends where the class ends */
  CHECK(asan_stops(1 << 20, 2));
  uint8_t *p = b2_cache_buf_alloc(100000); /* in bounds: fine */
  CHECK(p != NULL);
  if (p) {
    memset(p, 1, 100000);
    b2_cache_buf_free(p);
  }
#else
  T_SKIP("not an AddressSanitizer build");
#endif
}

/* Work buffers charged to the cache push clean, unpinned entries out (and
 * flush none); a flush callback returning B2_CACHE_FLUSH_DROP takes its
 * entry out of the cache once written back. */
static void test_charge_and_drop(void) {
  b2_cache *c = mk(4000, 2000, 1);
  loader l = {.size = 1000};
  store s = {.fail_chunk = -1};
  for (int k = 0; k < 3; k++) CHECK_EQ(touch(c, &l, 1, k), 0);
  b2_cache_entry *e;
  CHECK_EQ(b2_cache_get(c, 1, 3, load_fn, &l, &e), 0);
  CHECK_EQ(stats(c).bytes, 4000);
  b2_cache_charge(c, 2500); /* 6500: the three clean ones go, not the pinned one */
  CHECK(!present(c, 1, 0) && !present(c, 1, 1) && !present(c, 1, 2));
  CHECK_EQ(stats(c).bytes, 3500);
  b2_cache_release(c, e);
  CHECK(present(c, 1, 3));
  b2_cache_uncharge(c, 2500);
  CHECK_EQ(stats(c).bytes, 1000);
  CHECK_EQ(dirty_key(c, &l, &s, 1, 5, 0x55), 0);
  b2_cache_charge(c, 10000); /* only dirty entries left: nothing flushed */
  CHECK_EQ(s.calls, 0);
  CHECK(present(c, 1, 5));
  CHECK(!present(c, 1, 3));
  b2_cache_uncharge(c, 10000);
  CHECK_EQ(stats(c).bytes, 1000);
  b2_cache_charge(NULL, 1); /* no cache: nothing */
  b2_cache_uncharge(NULL, 1);
  /* written back elsewhere: dropped; a plain write-back stays */
  s.drop = 1;
  CHECK_EQ(b2_cache_flush_all(c, NULL), 0);
  CHECK_EQ(s.calls, 1);
  CHECK(!present(c, 1, 5));
  s.drop = 0;
  CHECK_EQ(dirty_key(c, &l, &s, 1, 6, 0x66), 0);
  CHECK_EQ(b2_cache_flush_all(c, NULL), 0);
  CHECK(present(c, 1, 6));
  CHECK_EQ(stats(c).bytes, 1000);
  b2_cache_destroy(c);
}

/* A load of known size: room is made for it before its buffer exists. */
typedef struct seen_load {
  loader l;
  b2_cache *c;
  uint64_t bytes, entries; /* the cache as the loader saw it */
} seen_load;

static int load_seen(void *arg, uint64_t file, int64_t chunk, uint8_t **data, size_t *len) {
  seen_load *s = arg;
  b2_cache_stats st = stats(s->c);
  s->bytes = st.bytes;
  s->entries = st.entries;
  return load_fn(&s->l, file, chunk, data, len);
}

static void test_sized_load(void) {
  b2_cache *c = mk(4000, 2000, 1);
  seen_load s = {.l = {.size = 1000}, .c = c};
  for (int k = 0; k < 4; k++) CHECK_EQ(touch(c, &s.l, 1, k), 0);
  b2_cache_entry *e;
  CHECK_EQ(b2_cache_get_sized(c, 1, 9, 2500, load_seen, &s, &e), 0);
  /* three clean entries went before the load (the loading one counts) */
  CHECK_EQ(s.bytes, 3500);
  CHECK_EQ(s.entries, 2);
  CHECK(pattern_ok(e, 1, 9));
  b2_cache_release(c, e);
  CHECK_EQ(stats(c).bytes, 2000); /* the charge gone, the entry counted */
  CHECK(present(c, 1, 3) && present(c, 1, 9) && !present(c, 1, 0));
  /* size 0: as b2_cache_get, room made after */
  for (int k = 4; k < 6; k++) CHECK_EQ(touch(c, &s.l, 1, k), 0);
  CHECK_EQ(b2_cache_get_sized(c, 1, 10, 0, load_seen, &s, &e), 0);
  CHECK_EQ(s.bytes, 4000);
  b2_cache_release(c, e);
  CHECK_EQ(stats(c).bytes, 4000);
  b2_cache_destroy(c);
}

int main(void) {
  T_RUN(test_hit_miss);
  T_RUN(test_sized_load);
  T_RUN(test_charge_and_drop);
  T_RUN(test_lru_one_shard);
  T_RUN(test_lru_sharded);
  T_RUN(test_byte_bound);
  T_RUN(test_pin_prevents_eviction);
  T_RUN(test_invalidate);
  T_RUN(test_drop_idle);
  T_RUN(test_load_failure);
  T_RUN(test_dirty_flush_on_eviction);
  T_RUN(test_flush_error_kept);
  T_RUN(test_dirty_bound);
  T_RUN(test_dirty_bound_busy);
  T_RUN(test_resize);
  T_RUN(test_written_runs);
  T_RUN(test_buffer_red_zones);
  T_RUN(test_flush_file_and_idle);
  T_RUN(test_buffers);
  T_END();
}
