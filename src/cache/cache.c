/* cache.c - the chunk cache's index: creation, lookups with single-flight
 * loads, pins and releases, the per-shard LRU lists, statistics. */
#include <stdlib.h>
#include <string.h>

#include "b2_error.h"
#include "cache/cache_int.h"
#include "common/bigbuf.h"

static uint64_t key_hash(uint64_t file, int64_t chunk) {
  uint64_t x = file * 0x9e3779b97f4a7c15ull ^ (uint64_t)chunk;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

/* Shard from the high half of the hash, bucket from the low bits. */
static unsigned shard_index(const b2_cache *c, uint64_t h) {
  return (unsigned)(h >> 32) & (c->nshards - 1);
}

int b2_cache_create(const b2_cache_config *cfg, b2_cache **out) {
  if (!out) return b2_fail(B2_E_INVAL, "cache: no output pointer");
  *out = NULL;
  b2_cache_config d = {0};
  if (cfg) d = *cfg;
  if (!d.capacity) d.capacity = B2_CACHE_DEFAULT_CAPACITY;
  if (!d.dirty_max) d.dirty_max = d.capacity / 4 ? d.capacity / 4 : 1;
  if (d.dirty_max > d.capacity)
    return b2_fail(B2_E_INVAL, "cache: dirty_max %zu > capacity %zu",
                   d.dirty_max, d.capacity);
  if (!d.shards) d.shards = B2_CACHE_DEFAULT_SHARDS;
  if (d.shards > B2_CACHE_MAX_SHARDS)
    return b2_fail(B2_E_INVAL, "cache: %u shards (max %d)", d.shards,
                   B2_CACHE_MAX_SHARDS);
  unsigned n = 1;
  while (n < d.shards) n <<= 1;

  b2_cache *c = calloc(1, sizeof *c);
  void *mem = NULL;
  if (!c || posix_memalign(&mem, 64, n * sizeof(b2_cache_shard_slot)) != 0) {
    free(c);
    return b2_fail(B2_E_NOMEM, "cache: out of memory");
  }
  memset(mem, 0, n * sizeof(b2_cache_shard_slot));
  c->shards = mem;
  c->nshards = n;
  c->capacity = d.capacity;
  c->dirty_max = d.dirty_max;
  for (unsigned i = 0; i < n; i++) {
    b2_cache_shard *s = b2_cache_shard_at(c, i);
    s->buckets = calloc(B2_CACHE_INITIAL_BUCKETS, sizeof *s->buckets);
    if (!s->buckets) {
      for (unsigned j = 0; j < i; j++) free(b2_cache_shard_at(c, j)->buckets);
      free(c->shards);
      free(c);
      return b2_fail(B2_E_NOMEM, "cache: out of memory");
    }
    s->nbuckets = B2_CACHE_INITIAL_BUCKETS;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
  }
  pthread_mutex_init(&c->dmu, NULL);
  pthread_cond_init(&c->dcv, NULL);
  *out = c;
  return 0;
}

void b2_cache_free_entry(b2_cache *c, b2_cache_entry *e) {
  if (e->state == B2_CE_READY) atomic_fetch_sub(&c->bytes, (uint64_t)e->len);
  b2_cache_buf_free(e->data);
  free(e->load_detail);
  pthread_rwlock_destroy(&e->lock);
  free(e);
}

void b2_cache_destroy(b2_cache *c) {
  if (!c) return;
  for (unsigned i = 0; i < c->nshards; i++) {
    b2_cache_shard *s = b2_cache_shard_at(c, i);
    for (size_t b = 0; b < s->nbuckets; b++) {
      b2_cache_entry *e = s->buckets[b];
      while (e) {
        b2_cache_entry *next = e->hnext;
        b2_cache_free_entry(c, e);
        e = next;
      }
    }
    free(s->buckets);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
  }
  pthread_cond_destroy(&c->dcv);
  pthread_mutex_destroy(&c->dmu);
  free(c->shards);
  free(c);
}

/* Entries live in the engine's large buffers (common/bigbuf.c). */
uint8_t *b2_cache_buf_alloc(size_t n) { return b2_bigbuf_alloc(n); }
uint8_t *b2_cache_buf_zalloc(size_t n) { return b2_bigbuf_zalloc(n); }
void b2_cache_buf_free(uint8_t *p) { b2_bigbuf_free(p); }
size_t b2_cache_buf_cap(const uint8_t *p) { return b2_bigbuf_cap(p); }

uint64_t b2_cache_file_id(b2_cache *c) {
  return atomic_fetch_add(&c->next_file, 1) + 1;
}

/* ---- index and LRU list (shard lock held) ----------------------------- */

b2_cache_shard *b2_cache_shard_for(b2_cache *c, uint64_t file, int64_t chunk,
                                   uint64_t *h) {
  *h = key_hash(file, chunk);
  return b2_cache_shard_at(c, shard_index(c, *h));
}

b2_cache_entry *b2_cache_lookup_locked(b2_cache_shard *s, uint64_t h,
                                       uint64_t file, int64_t chunk) {
  b2_cache_entry *e = s->buckets[h & (s->nbuckets - 1)];
  while (e && !(e->hash == h && e->file == file && e->chunk == chunk))
    e = e->hnext;
  return e;
}

/* Double the buckets when the table gets full; on allocation failure keep
 * the old table (longer chains, still correct). */
static void maybe_grow(b2_cache_shard *s) {
  if (s->count < s->nbuckets || s->nbuckets > ((size_t)1 << 40)) return;
  size_t nb = s->nbuckets * 2;
  b2_cache_entry **nt = calloc(nb, sizeof *nt);
  if (!nt) return;
  for (size_t b = 0; b < s->nbuckets; b++) {
    b2_cache_entry *e = s->buckets[b];
    while (e) {
      b2_cache_entry *next = e->hnext;
      size_t i = e->hash & (nb - 1);
      e->hnext = nt[i];
      nt[i] = e;
      e = next;
    }
  }
  free(s->buckets);
  s->buckets = nt;
  s->nbuckets = nb;
}

static void hash_insert(b2_cache_shard *s, b2_cache_entry *e) {
  maybe_grow(s);
  size_t i = e->hash & (s->nbuckets - 1);
  e->hnext = s->buckets[i];
  s->buckets[i] = e;
  e->linked = 1;
  s->count++;
}

void b2_cache_hash_remove(b2_cache_shard *s, b2_cache_entry *e) {
  b2_cache_entry **pp = &s->buckets[e->hash & (s->nbuckets - 1)];
  while (*pp && *pp != e) pp = &(*pp)->hnext;
  if (*pp) *pp = e->hnext;
  e->hnext = NULL;
  e->linked = 0;
  s->count--;
}

void b2_cache_lru_remove(b2_cache_shard *s, b2_cache_entry *e) {
  if (!e->on_lru) return;
  if (e->lprev)
    e->lprev->lnext = e->lnext;
  else
    s->lru_head = e->lnext;
  if (e->lnext)
    e->lnext->lprev = e->lprev;
  else
    s->lru_tail = e->lprev;
  e->lprev = e->lnext = NULL;
  e->on_lru = 0;
}

static void lru_push_head(b2_cache *c, b2_cache_shard *s, b2_cache_entry *e) {
  e->tick = atomic_fetch_add_explicit(&c->clock, 1, memory_order_relaxed);
  e->lprev = NULL;
  e->lnext = s->lru_head;
  if (s->lru_head)
    s->lru_head->lprev = e;
  else
    s->lru_tail = e;
  s->lru_head = e;
  e->on_lru = 1;
}

void b2_cache_pin_locked(b2_cache_shard *s, b2_cache_entry *e) {
  if (e->refs++ == 0) b2_cache_lru_remove(s, e);
}

b2_cache_entry *b2_cache_unpin_locked(b2_cache *c, b2_cache_shard *s,
                                      b2_cache_entry *e, int evict) {
  if (--e->refs > 0) return NULL;
  if (!e->linked) return e;
  if (evict) {
    b2_cache_hash_remove(s, e);
    s->evictions++;
    return e;
  }
  lru_push_head(c, s, e);
  return NULL;
}

/* ---- reading ---------------------------------------------------------- */

static b2_cache_entry *entry_new(uint64_t file, int64_t chunk, uint64_t h,
                                 unsigned shard) {
  b2_cache_entry *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  if (pthread_rwlock_init(&e->lock, NULL) != 0) {
    free(e);
    return NULL;
  }
  e->file = file;
  e->chunk = chunk;
  e->hash = h;
  e->shard = shard;
  e->state = B2_CE_LOADING;
  e->refs = 1;
  return e;
}

/* Run the loader for a fresh LOADING entry we own, publish the outcome. */
static int run_load(b2_cache *c, b2_cache_shard *s, b2_cache_entry *e, size_t size,
                    b2_cache_load_fn load, void *arg) {
  uint8_t *data = NULL;
  size_t len = 0;
  if (size) b2_cache_charge(c, size);
  int rc = load(arg, e->file, e->chunk, &data, &len);
  if (size) b2_cache_uncharge(c, size);
  if (rc >= 0 && !data && len)
    rc = b2_fail(B2_E_INVAL, "chunk %lld: loader returned no buffer",
                 (long long)e->chunk);
  char *detail = NULL;
  if (rc < 0) detail = strdup(b2_last_detail());

  pthread_mutex_lock(&s->mu);
  b2_cache_entry *dead = NULL;
  if (rc < 0) {
    e->state = B2_CE_FAILED;
    e->load_err = rc;
    e->load_detail = detail;
    s->load_errors++;
    if (e->linked) b2_cache_hash_remove(s, e);
    dead = b2_cache_unpin_locked(c, s, e, 0);
  } else {
    e->data = data;
    e->len = len;
    atomic_store_explicit(&e->alen, len, memory_order_relaxed);
    e->state = B2_CE_READY;
    atomic_fetch_add(&c->bytes, (uint64_t)len);
  }
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  if (dead) b2_cache_free_entry(c, dead);
  if (rc < 0) return rc;
  if (atomic_load(&c->bytes) > c->capacity) b2_cache_evict(c);
  return 0;
}

int b2_cache_get(b2_cache *c, uint64_t file, int64_t chunk,
                 b2_cache_load_fn load, void *arg, b2_cache_entry **out) {
  return b2_cache_get_sized(c, file, chunk, 0, load, arg, out);
}

int b2_cache_get_sized(b2_cache *c, uint64_t file, int64_t chunk, size_t size,
                       b2_cache_load_fn load, void *arg, b2_cache_entry **out) {
  if (!out) return b2_fail(B2_E_INVAL, "cache get: no output pointer");
  *out = NULL;
  if (!c || !load) return b2_fail(B2_E_INVAL, "cache get: no cache or loader");
  uint64_t h = key_hash(file, chunk);
  unsigned si = shard_index(c, h);
  b2_cache_shard *s = b2_cache_shard_at(c, si);
  b2_cache_entry *fresh = NULL, *e;

  pthread_mutex_lock(&s->mu);
  while (!(e = b2_cache_lookup_locked(s, h, file, chunk))) {
    if (fresh) { /* still absent: ours becomes the loading entry */
      hash_insert(s, fresh);
      s->misses++;
      pthread_mutex_unlock(&s->mu);
      int rc = run_load(c, s, fresh, size, load, arg);
      if (rc < 0) return rc;
      *out = fresh;
      return 0;
    }
    /* Allocate outside the lock, then look again. */
    pthread_mutex_unlock(&s->mu);
    fresh = entry_new(file, chunk, h, si);
    if (!fresh)
      return b2_fail(B2_E_NOMEM, "chunk %lld: cache entry", (long long)chunk);
    pthread_mutex_lock(&s->mu);
  }

  int rc = 0;
  b2_cache_entry *dead = NULL;
  if (e->state == B2_CE_READY) {
    b2_cache_pin_locked(s, e);
    s->hits++;
  } else { /* another thread is loading it: wait for the outcome */
    e->refs++;
    s->waits++;
    while (e->state == B2_CE_LOADING) pthread_cond_wait(&s->cv, &s->mu);
    if (e->state == B2_CE_FAILED) {
      rc = e->load_err;
      b2_fail(rc, "%s", e->load_detail ? e->load_detail : b2_strerror(rc));
      dead = b2_cache_unpin_locked(c, s, e, 0);
    }
  }
  pthread_mutex_unlock(&s->mu);
  if (fresh) b2_cache_free_entry(c, fresh);
  if (dead) b2_cache_free_entry(c, dead);
  if (rc < 0) return rc;
  *out = e;
  return 0;
}

int b2_cache_peek(b2_cache *c, uint64_t file, int64_t chunk,
                  b2_cache_entry **out) {
  if (!out) return b2_fail(B2_E_INVAL, "cache peek: no output pointer");
  *out = NULL;
  if (!c) return b2_fail(B2_E_INVAL, "cache peek: no cache");
  uint64_t h = key_hash(file, chunk);
  b2_cache_shard *s = b2_cache_shard_at(c, shard_index(c, h));
  pthread_mutex_lock(&s->mu);
  b2_cache_entry *e = b2_cache_lookup_locked(s, h, file, chunk);
  if (e && e->state == B2_CE_READY)
    b2_cache_pin_locked(s, e);
  else
    e = NULL;
  pthread_mutex_unlock(&s->mu);
  if (!e) return B2_E_NOENT; /* common and expected: no detail */
  *out = e;
  return 0;
}

void b2_cache_release(b2_cache *c, b2_cache_entry *e) {
  if (!c || !e) return;
  b2_cache_shard *s = b2_cache_shard_at(c, e->shard);
  pthread_mutex_lock(&s->mu);
  b2_cache_entry *dead = b2_cache_unpin_locked(c, s, e, 0);
  pthread_mutex_unlock(&s->mu);
  if (dead) b2_cache_free_entry(c, dead);
}

const uint8_t *b2_cache_data(const b2_cache_entry *e) { return e->data; }
size_t b2_cache_len(const b2_cache_entry *e) { return e->len; }
uint64_t b2_cache_entry_file(const b2_cache_entry *e) { return e->file; }
int64_t b2_cache_entry_chunk(const b2_cache_entry *e) { return e->chunk; }

unsigned b2_cache_use(b2_cache_entry *e) { return atomic_fetch_add(&e->uses, 1) + 1; }

int b2_cache_has_room(b2_cache *c, size_t n) {
  return n <= c->capacity && atomic_load(&c->bytes) <= c->capacity - n;
}

void b2_cache_read_lock(b2_cache_entry *e) { pthread_rwlock_rdlock(&e->lock); }
void b2_cache_read_unlock(b2_cache_entry *e) {
  pthread_rwlock_unlock(&e->lock);
}

void b2_cache_get_stats(b2_cache *c, b2_cache_stats *st) {
  memset(st, 0, sizeof *st);
  for (unsigned i = 0; i < c->nshards; i++) {
    b2_cache_shard *s = b2_cache_shard_at(c, i);
    pthread_mutex_lock(&s->mu);
    st->hits += s->hits;
    st->misses += s->misses;
    st->waits += s->waits;
    st->load_errors += s->load_errors;
    st->evictions += s->evictions;
    st->entries += s->count;
    pthread_mutex_unlock(&s->mu);
  }
  st->bytes = atomic_load(&c->bytes);
  pthread_mutex_lock(&c->dmu);
  st->flushes = c->flushes;
  st->flush_errors = c->flush_errors;
  st->dirty_entries = c->ndirty;
  st->dirty_bytes = c->dirty_bytes;
  pthread_mutex_unlock(&c->dmu);
  st->capacity = c->capacity;
  st->dirty_max = c->dirty_max;
}
