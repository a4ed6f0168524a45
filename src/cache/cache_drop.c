/* cache_drop.c - taking entries out of the chunk cache: capacity eviction
 * (global LRU over the shards' lists, dirty entries flushed first) and
 * invalidation / discard by key or by file. */
#include <limits.h>

#include "b2_error.h"
#include "cache/cache_int.h"

/* Dirty entries one eviction pass may flush before giving up. */
#define EVICT_FLUSH_MAX 64

/* Evict the globally least recently used unpinned entry.  Returns 1 if one
 * was evicted or the LRU changed under us (try again), 0 if every LRU list
 * is empty. */
static int evict_one_clean(b2_cache *c) {
  unsigned best = UINT_MAX;
  uint64_t best_tick = UINT64_MAX;
  for (unsigned i = 0; i < c->nshards; i++) {
    b2_cache_shard *s = b2_cache_shard_at(c, i);
    pthread_mutex_lock(&s->mu);
    if (s->lru_tail && s->lru_tail->tick < best_tick) {
      best = i;
      best_tick = s->lru_tail->tick;
    }
    pthread_mutex_unlock(&s->mu);
  }
  if (best == UINT_MAX) return 0;
  b2_cache_shard *s = b2_cache_shard_at(c, best);
  b2_cache_entry *victim = NULL;
  pthread_mutex_lock(&s->mu);
  b2_cache_entry *e = s->lru_tail;
  if (e && e->tick == best_tick) { /* ticks are unique: same entry */
    b2_cache_lru_remove(s, e);
    b2_cache_hash_remove(s, e);
    s->evictions++;
    victim = e;
  }
  pthread_mutex_unlock(&s->mu);
  if (victim) b2_cache_free_entry(c, victim);
  return 1;
}

void b2_cache_charge(b2_cache *c, size_t n) {
  if (!c) return;
  atomic_fetch_add(&c->bytes, (uint64_t)n);
  while (atomic_load(&c->bytes) > c->capacity && evict_one_clean(c)) {
  }
}

void b2_cache_uncharge(b2_cache *c, size_t n) {
  if (c) atomic_fetch_sub(&c->bytes, (uint64_t)n);
}

void b2_cache_evict(b2_cache *c) {
  int flushed = 0;
  while (atomic_load(&c->bytes) > c->capacity) {
    if (evict_one_clean(c)) continue;
    /* Only pinned or dirty entries left: write back the oldest dirty one
     * (not one whose flush failed: its data stays) and evict it. */
    if (flushed++ >= EVICT_FLUSH_MAX) break;
    b2_cache_filter f = {1, 0, UINT64_MAX, UINT64_MAX, 0, 0};
    int busy = 0;
    pthread_mutex_lock(&c->dmu);
    b2_cache_entry *e = b2_cache_claim_locked(c, &f, &busy, NULL);
    pthread_mutex_unlock(&c->dmu);
    if (!e) break;
    b2_cache_flush_one(c, e, 1);
  }
}

/* Drop an indexed entry (shard lock held).  Unless `force`, a dirty entry
 * or one inside a write section is kept: returns 0.  With `force` and
 * `unflushed`, an entry whose flush is claimed or under way is kept too:
 * returns -1 (wait for it and look again).  Else returns 1 and sets *dead
 * when the entry must be freed by the caller after unlocking. */
static int drop_locked(b2_cache *c, b2_cache_shard *s, b2_cache_entry *e,
                       int force, int unflushed, b2_cache_entry **dead) {
  *dead = NULL;
  pthread_mutex_lock(&c->dmu);
  if (!force && (e->dirty || e->writing)) {
    pthread_mutex_unlock(&c->dmu);
    return 0;
  }
  if (unflushed && e->flushing) {
    pthread_mutex_unlock(&c->dmu);
    return -1;
  }
  if (e->dirty) {
    b2_cache_dirty_remove(c, e);
    if (!e->flushing) e->refs--; /* else the flusher drops the ref */
    pthread_cond_broadcast(&c->dcv);
  }
  pthread_mutex_unlock(&c->dmu);
  b2_cache_lru_remove(s, e);
  b2_cache_hash_remove(s, e);
  if (e->refs == 0) *dead = e;
  return 1;
}

/* Drop the entry of (file, chunk): `force` even if dirty; `idle` only if
 * nobody holds it (pins are only taken by lookups under the shard lock:
 * one not pinned now cannot be between a get and a write section), and
 * keeping it is then no error. */
static int drop_key(b2_cache *c, uint64_t file, int64_t chunk, int force, int idle) {
  if (!c) return idle ? 0 : b2_fail(B2_E_INVAL, "cache: no cache");
  uint64_t h;
  b2_cache_shard *s = b2_cache_shard_for(c, file, chunk, &h);
  b2_cache_entry *dead = NULL;
  int rc = 0;
  pthread_mutex_lock(&s->mu);
  b2_cache_entry *e = b2_cache_lookup_locked(s, h, file, chunk);
  /* A discard (force, not idle) waits for a flush of the entry claimed or
   * under way, so that no flush callback runs with discarded data once it
   * returns: a flush claimed before a truncate but run after the file grew
   * back would store the cut chunk's old bytes over the new ones.  Dropped
   * under both locks while not flushing, the entry leaves the dirty list
   * before anyone can claim it again. */
  int k = -1; /* drop_locked's last answer, -1 if it never gave one */
  while (e && !(idle && e->refs > 0) &&
         (k = drop_locked(c, s, e, force, force && !idle, &dead)) < 0) {
    b2_cache_pin_locked(s, e);
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_lock(&c->dmu);
    while (e->flushing) pthread_cond_wait(&c->dcv, &c->dmu);
    pthread_mutex_unlock(&c->dmu);
    pthread_mutex_lock(&s->mu);
    b2_cache_entry *gone = b2_cache_unpin_locked(c, s, e, 0);
    if (gone) { /* dropped by another thread meanwhile */
      pthread_mutex_unlock(&s->mu);
      b2_cache_free_entry(c, gone);
      pthread_mutex_lock(&s->mu);
    }
    e = b2_cache_lookup_locked(s, h, file, chunk);
  }
  if (k >= 0) rc = k ? 1 : idle ? 0 : B2_E_BUSY;
  pthread_mutex_unlock(&s->mu);
  if (dead) b2_cache_free_entry(c, dead);
  if (rc == B2_E_BUSY)
    return b2_fail(B2_E_BUSY, "chunk %lld: dirty, kept in the cache",
                   (long long)chunk);
  return rc;
}

int b2_cache_invalidate(b2_cache *c, uint64_t file, int64_t chunk) {
  return drop_key(c, file, chunk, 0, 0);
}

int b2_cache_discard(b2_cache *c, uint64_t file, int64_t chunk) {
  return drop_key(c, file, chunk, 1, 0);
}

int b2_cache_drop_idle(b2_cache *c, uint64_t file, int64_t chunk) {
  return drop_key(c, file, chunk, 0, 1);
}

/* Drop every entry of a file; returns the number kept (dirty) if !force,
 * else the number dropped. */
static int drop_file(b2_cache *c, uint64_t file, int force) {
  if (!c) return b2_fail(B2_E_INVAL, "cache: no cache");
  int kept = 0, dropped = 0;
  for (unsigned i = 0; i < c->nshards; i++) {
    b2_cache_shard *s = b2_cache_shard_at(c, i);
    b2_cache_entry *dead_list = NULL;
    pthread_mutex_lock(&s->mu);
    for (size_t b = 0; b < s->nbuckets; b++) {
      b2_cache_entry *e = s->buckets[b];
      while (e) {
        b2_cache_entry *next = e->hnext;
        if (e->file == file) {
          b2_cache_entry *dead;
          if (drop_locked(c, s, e, force, 0, &dead)) {
            dropped++;
            if (dead) {
              dead->hnext = dead_list; /* out of the index: reuse link */
              dead_list = dead;
            }
          } else {
            kept++;
          }
        }
        e = next;
      }
    }
    pthread_mutex_unlock(&s->mu);
    while (dead_list) {
      b2_cache_entry *next = dead_list->hnext;
      b2_cache_free_entry(c, dead_list);
      dead_list = next;
    }
  }
  return force ? dropped : kept;
}

int b2_cache_discard_keys(b2_cache *c, uint64_t file, int64_t nkeys) {
  if (!c) return b2_fail(B2_E_INVAL, "cache: no cache");
  /* A walk visits at least every shard's first buckets: fewer keys than a
   * quarter of those are looked up one by one (no shard lock to count). */
  uint64_t least = (uint64_t)c->nshards * B2_CACHE_INITIAL_BUCKETS;
  if (nkeys < 0 || (uint64_t)nkeys * 4 > least) return drop_file(c, file, 1);
  int dropped = 0;
  for (int64_t k = 0; k < nkeys; k++) dropped += drop_key(c, file, k, 1, 0) > 0;
  return dropped;
}

int b2_cache_invalidate_file(b2_cache *c, uint64_t file) {
  return drop_file(c, file, 0);
}

int b2_cache_discard_file(b2_cache *c, uint64_t file) {
  return drop_file(c, file, 1);
}
