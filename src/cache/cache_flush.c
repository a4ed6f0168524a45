/* cache_flush.c - write sections and write-back of dirty cache entries:
 * the dirty list and its byte bound, claiming and flushing entries, and
 * flush by file, by entry, of idle entries.
 *
 * Writes are stamped from one counter (c->wclock); an entry's dirty_stamp
 * is the stamp of the write that made it dirty.  A flush holds the entry's
 * read lock from before it reads the data until the entry is marked clean,
 * so a successful flush always stores every write made so far.  "Flush
 * what was written before this call" is then "flush entries whose
 * dirty_stamp is at most the counter read at the start", which ends even
 * while writers keep dirtying entries again. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "b2_error.h"
#include "cache/cache_int.h"
#include "common/bigbuf.h"
#include "common/pool.h"
#include "common/util.h"

/* ---- dirty list (dmu held) -------------------------------------------- */

static void dirty_append(b2_cache *c, b2_cache_entry *e) {
  e->dnext = NULL;
  e->dprev = c->dtail;
  if (c->dtail)
    c->dtail->dnext = e;
  else
    c->dhead = e;
  c->dtail = e;
  e->dirty = 1;
  c->ndirty++;
}

void b2_cache_dirty_remove(b2_cache *c, b2_cache_entry *e) {
  if (e->dprev)
    e->dprev->dnext = e->dnext;
  else
    c->dhead = e->dnext;
  if (e->dnext)
    e->dnext->dprev = e->dprev;
  else
    c->dtail = e->dprev;
  e->dprev = e->dnext = NULL;
  e->dirty = 0;
  c->ndirty--;
  c->dirty_bytes -= e->dirty_len;
  e->dirty_len = 0;
  e->ferr = 0;
}

static int matches(const b2_cache_entry *e, const b2_cache_filter *f) {
  return (f->all || e->file == f->file) && e->dirty_stamp <= f->max_stamp &&
         e->last_write_ns <= f->idle_before;
}

b2_cache_entry *b2_cache_claim_locked(b2_cache *c, const b2_cache_filter *f,
                                      int *busy, int *err) {
  for (b2_cache_entry *e = c->dhead; e; e = e->dnext) {
    if (!matches(e, f)) continue;
    if (e->flushing) {
      *busy = 1;
      continue;
    }
    if (e->ferr && (e->ferr_seq > f->retry_seq || e->ferr_ns > f->retry_ns)) {
      /* (a real failure before a size change met: B2_E_BUSY is transient) */
      if (err && (!*err || *err == B2_E_BUSY)) *err = e->ferr;
      continue;
    }
    e->flushing = 1;
    return e;
  }
  return NULL;
}

int b2_cache_flush_one(b2_cache *c, b2_cache_entry *e, int evict) {
  /* The read lock is held until the outcome is recorded: no write can slip
   * in between the data stored and the entry turning clean. */
  pthread_rwlock_rdlock(&e->lock);
  pthread_mutex_lock(&c->dmu);
  void *owner = e->owner;
  b2_cache_flush_fn fn = e->flush;
  pthread_mutex_unlock(&c->dmu);

  int rc = fn(owner, e->chunk, e->data, e->len);
  if (rc == B2_CACHE_FLUSH_DROP) evict = 1;
  if (rc > 0) rc = 0;

  b2_cache_shard *s = b2_cache_shard_at(c, e->shard);
  pthread_mutex_lock(&s->mu);
  pthread_mutex_lock(&c->dmu);
  e->flushing = 0;
  c->flushes++;
  if (rc < 0) {
    c->flush_errors++;
    if (e->dirty) { /* keep the data, remember the error */
      e->ferr = rc;
      e->ferr_seq = ++c->fail_clock;
      e->ferr_ns = b2_now_ns();
    }
  } else if (e->dirty) {
    b2_cache_dirty_remove(c, e);
  }
  int drop_ref = !e->dirty; /* write-back ref held while dirty||flushing */
  pthread_cond_broadcast(&c->dcv);
  pthread_mutex_unlock(&c->dmu);
  b2_cache_entry *dead =
      drop_ref ? b2_cache_unpin_locked(c, s, e, evict) : NULL;
  /* Unlock the entry before the shard: once our ref is gone only the shard
   * lock keeps another thread from evicting and freeing it. */
  pthread_rwlock_unlock(&e->lock);
  pthread_mutex_unlock(&s->mu);
  if (dead) b2_cache_free_entry(c, dead);
  return rc;
}

/* ---- write sections --------------------------------------------------- */

/* Before a write: make room under dirty_max for the entry (nothing more if
 * it is dirty already) by flushing the oldest dirty entries here, or
 * waiting for running flushes.  Entries that failed before this call are
 * retried once. */
static int wait_dirty_room(b2_cache *c, b2_cache_entry *e) {
  int rc = 0;
  pthread_mutex_lock(&c->dmu);
  b2_cache_filter f = {1, 0, UINT64_MAX, UINT64_MAX, c->fail_clock, UINT64_MAX};
  while (c->dirty_bytes > 0) {
    size_t add =
        e->dirty ? 0 : atomic_load_explicit(&e->alen, memory_order_relaxed);
    if (c->dirty_bytes <= c->dirty_max && add <= c->dirty_max - c->dirty_bytes)
      break;
    int busy = 0, err = 0;
    b2_cache_entry *v = b2_cache_claim_locked(c, &f, &busy, &err);
    if (v) {
      pthread_mutex_unlock(&c->dmu);
      b2_cache_flush_one(c, v, 0);
      pthread_mutex_lock(&c->dmu);
    } else if (busy) {
      pthread_cond_wait(&c->dcv, &c->dmu);
    } else if (err == B2_E_BUSY) {
      /* Only entries whose flush met a size change are left (they are
       * flushed again later): the limit is exceeded by them for now, not a
       * failure of this write. */
      break;
    } else {
      if (!err) err = B2_E_IO;
      rc = b2_fail(err, "dirty limit: %zu dirty bytes cannot be written back "
                   "(%s)", c->dirty_bytes, b2_strerror(err));
      break;
    }
  }
  pthread_mutex_unlock(&c->dmu);
  return rc;
}

int b2_cache_write_begin(b2_cache *c, b2_cache_entry *e, void *owner,
                         b2_cache_flush_fn flush) {
  if (!c || !e || !flush)
    return b2_fail(B2_E_INVAL, "cache write: no cache, entry or callback");
  int rc = wait_dirty_room(c, e);
  if (rc < 0) return b2_context(rc, "chunk %lld", (long long)e->chunk);
  pthread_rwlock_wrlock(&e->lock);
  b2_cache_shard *s = b2_cache_shard_at(c, e->shard);
  pthread_mutex_lock(&s->mu);
  int linked = e->linked;
  if (linked) e->writing = 1;
  pthread_mutex_unlock(&s->mu);
  if (!linked) {
    pthread_rwlock_unlock(&e->lock);
    return b2_fail(B2_E_NOENT, "chunk %lld: entry left the cache",
                   (long long)e->chunk);
  }
  pthread_mutex_lock(&c->dmu);
  if (!e->dirty) e->nwrun = 0; /* stored: nothing written since */
  pthread_mutex_unlock(&c->dmu);
  e->w_owner = owner;
  e->w_flush = flush;
  return 0;
}

uint8_t *b2_cache_wdata(b2_cache_entry *e) { return e->data; }

int b2_cache_resize(b2_cache *c, b2_cache_entry *e, size_t len) {
  if (len > (size_t)INT64_MAX / 2)
    return b2_fail(B2_E_LIMIT, "chunk %lld: buffer of %zu bytes",
                   (long long)e->chunk, len);
  if (len == e->len) return 0;
  uint8_t *p = e->data;
  if (!p || len > b2_cache_buf_cap(p)) {
    p = b2_cache_buf_alloc(len ? len : 1);
    if (!p)
      return b2_fail(B2_E_NOMEM, "chunk %lld: buffer of %zu bytes",
                     (long long)e->chunk, len);
    if (e->len) memcpy(p, e->data, e->len);
    b2_cache_buf_free(e->data);
  }
  b2_bigbuf_use(p, len);
  if (len > e->len) {
    memset(p + e->len, 0, len - e->len);
    atomic_fetch_add(&c->bytes, (uint64_t)(len - e->len));
  } else {
    atomic_fetch_sub(&c->bytes, (uint64_t)(e->len - len));
  }
  e->data = p;
  e->len = len;
  atomic_store_explicit(&e->alen, len, memory_order_relaxed);
  return 0;
}

void b2_cache_write_end(b2_cache *c, b2_cache_entry *e, int modified) {
  b2_cache_shard *s = b2_cache_shard_at(c, e->shard);
  pthread_mutex_lock(&s->mu);
  pthread_mutex_lock(&c->dmu);
  e->writing = 0;
  if (modified && e->linked) {
    if (!e->dirty) {
      if (!e->flushing) e->refs++; /* the write-back ref */
      dirty_append(c, e);
      e->dirty_stamp = c->wclock + 1;
    }
    e->wstamp = ++c->wclock;
    c->dirty_bytes = c->dirty_bytes - e->dirty_len + e->len;
    e->dirty_len = e->len;
    e->last_write_ns = b2_now_ns();
    e->owner = e->w_owner;
    e->flush = e->w_flush;
  }
  pthread_mutex_unlock(&c->dmu);
  pthread_mutex_unlock(&s->mu);
  pthread_rwlock_unlock(&e->lock);
}

/* ---- what a clean entry's writers have covered ---------------------------
 * Runs [lo, hi) of the buffer, sorted and apart; beyond B2_CACHE_WRUNS the
 * shortest is forgotten, so the sum never counts a byte that was not
 * written. */

void b2_cache_note_write(b2_cache_entry *e, size_t off, size_t len) {
  if (len == 0) return;
  size_t lo = off, hi = off + len;
  int n = 0;
  size_t out[B2_CACHE_WRUNS + 1][2];
  int placed = 0;
  for (int k = 0; k < e->nwrun; k++) {
    size_t a = e->wrun[k][0], b = e->wrun[k][1];
    if (b < lo) { /* wholly before */
      out[n][0] = a, out[n++][1] = b;
    } else if (a > hi) { /* wholly after: the new run goes first */
      if (!placed) out[n][0] = lo, out[n++][1] = hi, placed = 1;
      out[n][0] = a, out[n++][1] = b;
    } else { /* touches: joined */
      lo = B2_MIN(lo, a);
      hi = B2_MAX(hi, b);
    }
  }
  if (!placed) out[n][0] = lo, out[n++][1] = hi;
  if (n > B2_CACHE_WRUNS) {
    int s = 0;
    for (int k = 1; k < n; k++)
      if (out[k][1] - out[k][0] < out[s][1] - out[s][0]) s = k;
    memmove(out[s], out[s + 1], (size_t)(n - s - 1) * sizeof out[0]);
    n--;
  }
  memcpy(e->wrun, out, (size_t)n * sizeof out[0]);
  e->nwrun = n;
}

size_t b2_cache_written(const b2_cache_entry *e) {
  size_t sum = 0;
  for (int k = 0; k < e->nwrun; k++)
    if (e->wrun[k][0] < e->len) sum += B2_MIN(e->wrun[k][1], e->len) - e->wrun[k][0];
  return sum;
}

int b2_cache_is_dirty(b2_cache *c, const b2_cache_entry *e) {
  pthread_mutex_lock(&c->dmu);
  int d = e->dirty;
  pthread_mutex_unlock(&c->dmu);
  return d;
}

int b2_cache_flush_error(b2_cache *c, const b2_cache_entry *e) {
  pthread_mutex_lock(&c->dmu);
  int r = e->ferr;
  pthread_mutex_unlock(&c->dmu);
  return r;
}

/* ---- flushing --------------------------------------------------------- */

typedef struct flush_job {
  b2_cache *c;
  b2_cache_filter f;
  int rc;           /* first error (dmu) */
  char detail[256]; /* its detail, from whichever thread hit it */
} flush_job;

static void job_record(flush_job *j, int rc) { /* dmu held */
  if (rc < 0 && !j->rc) {
    j->rc = rc;
    snprintf(j->detail, sizeof j->detail, "%s", b2_last_detail());
  }
}

/* Pool worker: flush claimable entries until none is left. */
static void flush_worker(void *arg) {
  flush_job *j = arg;
  b2_cache *c = j->c;
  pthread_mutex_lock(&c->dmu);
  for (;;) {
    int busy = 0;
    b2_cache_entry *e = b2_cache_claim_locked(c, &j->f, &busy, NULL);
    if (!e) break;
    pthread_mutex_unlock(&c->dmu);
    int rc = b2_cache_flush_one(c, e, 0);
    pthread_mutex_lock(&c->dmu);
    job_record(j, rc);
  }
  pthread_mutex_unlock(&c->dmu);
}

static int flush_matching(b2_cache *c, int all, uint64_t file,
                          struct b2_pool *pool) {
  if (!c) return b2_fail(B2_E_INVAL, "cache flush: no cache");
  flush_job j = {.c = c, .rc = 0};
  pthread_mutex_lock(&c->dmu);
  j.f = (b2_cache_filter){all, file, c->wclock, UINT64_MAX, c->fail_clock,
                          UINT64_MAX};
  size_t n = 0;
  for (b2_cache_entry *e = c->dhead; e; e = e->dnext) n += matches(e, &j.f);
  pthread_mutex_unlock(&c->dmu);

  b2_pool_group g = B2_POOL_GROUP_INIT;
  if (pool && n > 1) {
    size_t helpers = (size_t)b2_pool_threads(pool);
    if (helpers > n - 1) helpers = n - 1;
    for (size_t i = 0; i < helpers; i++)
      if (b2_pool_try_submit(pool, flush_worker, &j, &g) < 0) break;
  }
  /* This thread flushes too, then waits for flushes still running (ours in
   * the pool or anybody's) and takes whatever they left dirty. */
  pthread_mutex_lock(&c->dmu);
  for (;;) {
    int busy = 0, err = 0;
    b2_cache_entry *e = b2_cache_claim_locked(c, &j.f, &busy, &err);
    if (e) {
      pthread_mutex_unlock(&c->dmu);
      int rc = b2_cache_flush_one(c, e, 0);
      pthread_mutex_lock(&c->dmu);
      job_record(&j, rc);
    } else if (busy) {
      pthread_cond_wait(&c->dcv, &c->dmu);
    } else {
      if (err && !j.rc) {
        j.rc = err;
        snprintf(j.detail, sizeof j.detail, "write-back failed: %s",
                 b2_strerror(err));
      }
      break;
    }
  }
  pthread_mutex_unlock(&c->dmu);
  if (pool) b2_pool_wait(pool, &g);
  if (j.rc < 0) return b2_fail(j.rc, "%s", j.detail);
  return 0;
}

int b2_cache_flush_file(b2_cache *c, uint64_t file, struct b2_pool *pool) {
  return flush_matching(c, 0, file, pool);
}

int b2_cache_flush_all(b2_cache *c, struct b2_pool *pool) {
  return flush_matching(c, 1, 0, pool);
}

int b2_cache_flush_entry(b2_cache *c, b2_cache_entry *e) {
  if (!c || !e) return b2_fail(B2_E_INVAL, "cache flush: no cache or entry");
  int rc = 0;
  pthread_mutex_lock(&c->dmu);
  uint64_t target = e->wstamp;
  while (e->dirty && e->dirty_stamp <= target) {
    if (e->flushing) {
      pthread_cond_wait(&c->dcv, &c->dmu);
      continue;
    }
    e->flushing = 1;
    pthread_mutex_unlock(&c->dmu);
    rc = b2_cache_flush_one(c, e, 0);
    pthread_mutex_lock(&c->dmu);
    if (rc < 0) break;
  }
  pthread_mutex_unlock(&c->dmu);
  return rc;
}

int b2_cache_flush_idle(b2_cache *c, unsigned idle_ms) {
  if (!c) return b2_fail(B2_E_INVAL, "cache flush: no cache");
  uint64_t now = b2_now_ns();
  uint64_t age = (uint64_t)idle_ms * 1000000u;
  uint64_t cutoff = now > age ? now - age : 0;
  int n = 0, first = 0;
  char detail[256] = "";
  pthread_mutex_lock(&c->dmu);
  b2_cache_filter f = {1, 0, c->wclock, cutoff, c->fail_clock, cutoff};
  for (;;) {
    int busy = 0;
    b2_cache_entry *e = b2_cache_claim_locked(c, &f, &busy, NULL);
    if (!e) break;
    pthread_mutex_unlock(&c->dmu);
    int rc = b2_cache_flush_one(c, e, 0);
    if (rc < 0 && !first) {
      first = rc;
      snprintf(detail, sizeof detail, "%s", b2_last_detail());
    }
    pthread_mutex_lock(&c->dmu);
    if (rc >= 0 && n < INT32_MAX) n++;
  }
  pthread_mutex_unlock(&c->dmu);
  if (first < 0) return b2_fail(first, "%s", detail);
  return n;
}
