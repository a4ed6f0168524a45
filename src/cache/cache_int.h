/*
 * cache_int.h - internal structures of the chunk cache (b2_cache.h),
 * shared by cache.c (index, pins, loads), cache_drop.c (eviction,
 * invalidation) and cache_flush.c (write sections, write-back).
 *
 * Locks and what they guard:
 *   shard->mu   the shard's hash index and LRU list, and per entry: refs,
 *               state, linked, on_lru, writing, tick, load_err/detail;
 *   c->dmu      the dirty list and dirty byte count, and per entry every
 *               field below "dirty state";
 *   e->lock     (rwlock) the entry's data and len once loaded.
 * Order: e->lock before shard->mu before c->dmu (write_end and a finishing
 * flush hold all three).  Nobody takes an entry lock while holding a shard
 * lock or dmu, or while holding another entry's lock.
 *
 * References: each user pin is one ref; in addition an entry holds one
 * "write-back ref" while (dirty || flushing), so dirty entries are never on
 * the LRU list and never freed.  An entry is on the LRU list iff it is in
 * the index, loaded and refs == 0; it is freed when refs == 0 and it is out
 * of the index.
 */
#ifndef B2_CACHE_INT_H
#define B2_CACHE_INT_H

/* Buckets of a shard's index at first; they only grow. */
#define B2_CACHE_INITIAL_BUCKETS 16

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "b2_cache.h"

enum { B2_CE_LOADING = 0, B2_CE_READY = 1, B2_CE_FAILED = 2 };

struct b2_cache_entry {
  /* immutable after creation */
  uint64_t file;
  int64_t chunk;
  uint64_t hash;
  unsigned shard;

  /* shard lock */
  b2_cache_entry *hnext;        /* hash chain */
  b2_cache_entry *lprev, *lnext; /* LRU list (head = most recent) */
  uint64_t tick;                /* global clock value at last release */
  int refs;
  int load_err;
  char *load_detail;            /* detail of a failed load, for waiters */
  uint8_t state, linked, on_lru, writing;

  /* data: written by the loader before READY, then under e->lock */
  uint8_t *data;
  size_t len;
  _Atomic size_t alen;          /* copy of len readable without locks */
  atomic_uint uses;             /* b2_cache_use */
  pthread_rwlock_t lock;
  void *w_owner;                /* set in write_begin, under e->lock */
  b2_cache_flush_fn w_flush;

  /* dirty state: c->dmu */
  b2_cache_entry *dprev, *dnext; /* dirty list, oldest first */
  void *owner;
  b2_cache_flush_fn flush;
  uint8_t dirty, flushing;
  int ferr;                     /* last flush error, 0 if none */
  uint64_t ferr_seq;            /* c->fail_clock at that failure */
  uint64_t ferr_ns;             /* monotonic time of that failure */
  uint64_t wstamp;              /* c->wclock at the last write */
  uint64_t dirty_stamp;         /* stamp of the write that dirtied it */
  uint64_t last_write_ns;
  size_t dirty_len;             /* bytes counted in c->dirty_bytes */
  /* written since it was last clean (e->lock held for writing):
   * cache_flush.c, b2_cache_note_write */
  size_t wrun[B2_CACHE_WRUNS][2];
  int nwrun;
};

typedef struct b2_cache_shard {
  pthread_mutex_t mu;
  pthread_cond_t cv; /* a load in this shard finished */
  b2_cache_entry **buckets;
  size_t nbuckets;   /* power of two */
  size_t count;      /* entries in the index */
  b2_cache_entry *lru_head, *lru_tail;
  uint64_t hits, misses, waits, load_errors, evictions;
} b2_cache_shard;

/* Shards padded to their own cache lines. */
typedef union b2_cache_shard_slot {
  b2_cache_shard s;
  char pad[(sizeof(b2_cache_shard) + 63) / 64 * 64];
} b2_cache_shard_slot;

struct b2_cache {
  size_t capacity, dirty_max;
  unsigned nshards;
  b2_cache_shard_slot *shards;
  _Atomic uint64_t bytes;     /* data bytes of all live entries and of the
                                 work buffers charged (b2_cache_charge) */
  _Atomic uint64_t clock;     /* LRU ticks */
  _Atomic uint64_t next_file; /* b2_cache_file_id */

  pthread_mutex_t dmu;
  pthread_cond_t dcv;         /* a flush finished or dirty bytes fell */
  b2_cache_entry *dhead, *dtail;
  size_t dirty_bytes, ndirty;
  uint64_t wclock;            /* stamps writes */
  uint64_t fail_clock;        /* stamps flush failures */
  uint64_t flushes, flush_errors;
};

/* Which dirty entries a flusher may claim (see b2_cache_claim_locked). */
typedef struct b2_cache_filter {
  int all;              /* every file, else only `file` */
  uint64_t file;
  uint64_t max_stamp;   /* dirty_stamp <= max_stamp */
  uint64_t idle_before; /* last_write_ns <= idle_before */
  uint64_t retry_seq;   /* a failed entry is retried only if its failure */
  uint64_t retry_ns;    /*   has ferr_seq <= retry_seq, ferr_ns <= retry_ns */
} b2_cache_filter;

static inline b2_cache_shard *b2_cache_shard_at(b2_cache *c, unsigned i) {
  return &c->shards[i].s;
}


/* cache.c */
/* The shard of a key and the key's hash in *h. */
b2_cache_shard *b2_cache_shard_for(b2_cache *c, uint64_t file, int64_t chunk,
                                   uint64_t *h);
/* The indexed entry of a key or NULL (shard lock held). */
b2_cache_entry *b2_cache_lookup_locked(b2_cache_shard *s, uint64_t h,
                                       uint64_t file, int64_t chunk);
void b2_cache_free_entry(b2_cache *c, b2_cache_entry *e);
void b2_cache_hash_remove(b2_cache_shard *s, b2_cache_entry *e);
void b2_cache_lru_remove(b2_cache_shard *s, b2_cache_entry *e);
/* Take a ref (shard lock held); a first ref takes the entry off the LRU. */
void b2_cache_pin_locked(b2_cache_shard *s, b2_cache_entry *e);
/* Drop one ref (shard lock held).  When it was the last: an indexed entry
 * goes to the LRU head, or is evicted if `evict`; returns the entry if the
 * caller must free it (after unlocking), else NULL. */
b2_cache_entry *b2_cache_unpin_locked(b2_cache *c, b2_cache_shard *s,
                                      b2_cache_entry *e, int evict);

/* cache_drop.c: bring bytes back under capacity (no locks held). */
void b2_cache_evict(b2_cache *c);

/* cache_flush.c */
/* Claim the oldest dirty entry matching f (dmu held): marks it flushing and
 * returns it, else NULL.  *busy is set when a matching entry is being
 * flushed by someone else; *err (if given and 0) gets the error of a
 * matching entry skipped because it failed too recently. */
b2_cache_entry *b2_cache_claim_locked(b2_cache *c, const b2_cache_filter *f,
                                      int *busy, int *err);
/* Flush a claimed entry (no locks held).  If `evict` and it ends clean and
 * unpinned, it is evicted.  Returns the flush callback's code. */
int b2_cache_flush_one(b2_cache *c, b2_cache_entry *e, int evict);
/* Take an entry out of the dirty list (dmu held); the caller settles the
 * write-back ref. */
void b2_cache_dirty_remove(b2_cache *c, b2_cache_entry *e);

#endif /* B2_CACHE_INT_H */
