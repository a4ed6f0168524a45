/*
 * b2_cache.h - layer 5: the shared cache of decoded chunks.
 *
 * One cache serves every open file.  It holds byte buffers keyed by
 * (file id, chunk index) and knows nothing about their format: the caller
 * supplies a loader that produces a buffer on a miss and, for written
 * entries, a flush callback that stores it back.
 *
 * OVERVIEW
 *   - Bounded in bytes (`capacity`), least-recently-used eviction.  The
 *     entries are spread over independent shards (hash of the key), each
 *     with its own mutex, so threads using different chunks rarely contend.
 *     A hit is a hash lookup and a reference-count increment under one shard
 *     lock; it never allocates.
 *   - Entries are handed out pinned (reference counted).  A pinned entry is
 *     never freed or evicted under its user.  An entry dropped from the
 *     cache while pinned (invalidate, discard) is freed by the last release.
 *   - Single flight: when several threads get the same missing key, exactly
 *     one of them runs the loader (with no cache lock held) and the others
 *     wait for it.  A failed load returns the loader's negative code to all
 *     of them and leaves no entry behind.
 *   - Write-back: a writer modifies an entry inside a write section
 *     (b2_cache_write_begin/_end); the entry then becomes dirty and is
 *     stored later through its flush callback.  Dirty data is never dropped
 *     silently (only b2_cache_discard* drop it, on purpose).  Dirty bytes
 *     are bounded by `dirty_max`: a writer that would exceed the bound first
 *     flushes the oldest dirty entries itself (or waits for flushes already
 *     running elsewhere).
 *
 * KEYS
 *   A file id is any 64-bit number the caller chooses; b2_cache_file_id()
 *   hands out unique ones.  A chunk index is any int64_t.
 *
 * EVICTION ORDER
 *   An entry's "last use" is the moment its last pin was released.  When
 *   the bytes held exceed `capacity` after a load, the loading thread evicts
 *   unpinned clean entries, least recently used first, across all shards.
 *   Dirty entries count as pinned for that pass (they are never dropped);
 *   only when nothing clean is left to evict and the cache is still over
 *   capacity does it flush the oldest dirty entries and evict them once they
 *   are clean and unpinned.  Pinned entries may keep the cache over capacity
 *   for as long as they are pinned.  `bytes` counts the data buffers of all
 *   live entries (pinned ones dropped from the index included), not the
 *   bookkeeping around them.
 *
 * LOCKING RULES FOR CALLERS
 *   Each entry has a reader/writer lock guarding its data.
 *   - Entries that are never written (read-only files) can be read with no
 *     lock: their buffer does not change while pinned.
 *   - If an entry may be written, readers must bracket their reads with
 *     b2_cache_read_lock/_unlock, and writers use b2_cache_write_begin/_end.
 *   - While holding an entry lock (read or write) call nothing else in this
 *     API except b2_cache_data/_len/_wdata/_resize/_release and the matching
 *     unlock or write_end.  In particular get, write_begin and the flush
 *     functions may run flush callbacks and wait for other threads; calling
 *     them with an entry lock held can deadlock.  Holding pins is fine.
 *   - Loaders and flush callbacks run on whichever thread needs them (a
 *     reader that evicts, a writer waiting for dirty room, a background
 *     flusher, pool workers).  They must not call into this cache and must
 *     not wait on locks that their own users hold while calling into the
 *     cache.  Flush callbacks of distinct chunks, even of one owner, may run
 *     concurrently; one entry is never flushed by two threads at once.
 *
 * ERRORS
 *   Negative B2_E_* codes (b2_error.h).  Loader and flush codes are passed
 *   through unchanged, with the thread's error detail they left.
 */
#ifndef B2_CACHE_H
#define B2_CACHE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct b2_cache b2_cache;
typedef struct b2_cache_entry b2_cache_entry;
struct b2_pool; /* src/common/pool.h (internal worker pool) */

#define B2_CACHE_DEFAULT_CAPACITY ((size_t)256 << 20) /* 256 MiB */
#define B2_CACHE_DEFAULT_SHARDS 32
#define B2_CACHE_MAX_SHARDS 256

/* Creation parameters; zero fields take the defaults. */
typedef struct b2_cache_config {
  size_t capacity;  /* bytes of buffers kept (0: 256 MiB) */
  size_t dirty_max; /* bound on dirty bytes (0: capacity / 4) */
  unsigned shards;  /* lock shards, rounded up to a power of two, at most
                       B2_CACHE_MAX_SHARDS (0: 32).  1 gives exact global LRU
                       order in tests; more shards only reduce contention. */
} b2_cache_config;

/* Buffers of entries (the engine's allocator of large buffers, which also
 * holds chunks being compressed and stored chunks read for a decode).
 * Large ones (64 KiB and up) are mapped on their own in 64 KiB classes
 * and returned to the system when freed (a few are kept for the next
 * buffer of the same class), so that entries of mixed sizes coming and
 * going cannot fragment the heap and grow the process far past the
 * cache's capacity.  Contents of a new buffer are undefined.
 * b2_cache_buf_alloc returns NULL when out of memory; b2_cache_buf_free
 * accepts NULL; b2_cache_buf_cap gives the bytes usable in a buffer. */
uint8_t *b2_cache_buf_alloc(size_t n);
/* b2_cache_buf_alloc with the n bytes zeroed, at no cost when the buffer
 * is a fresh mapping (the kernel's pages are zeros). */
uint8_t *b2_cache_buf_zalloc(size_t n);
void b2_cache_buf_free(uint8_t *p);
size_t b2_cache_buf_cap(const uint8_t *p);

/* Loader, run on a miss by exactly one caller of b2_cache_get.  On success
 * it returns >= 0 and sets *data to a buffer from b2_cache_buf_alloc
 * holding *len bytes (NULL allowed when *len is 0); the cache owns it from
 * then on and releases it with b2_cache_buf_free.  On failure it returns a
 * negative B2_E_* code (with a detail via b2_fail) and must not leave a
 * buffer in *data. */
typedef int (*b2_cache_load_fn)(void *arg, uint64_t file, int64_t chunk,
                                uint8_t **data, size_t *len);

/* Flush callback of a dirty entry: store `len` bytes of `data` as chunk
 * `chunk` of the owner's file.  Returns 0, B2_CACHE_FLUSH_DROP, or a
 * negative B2_E_* code.  The entry's read lock is held during the call, so
 * the data cannot change. */
#define B2_CACHE_FLUSH_DROP 1 /* stored where the owner looks when the chunk
                                 is not cached: the entry, clean, leaves the
                                 cache as soon as nobody pins it, so that
                                 the owner's next writes go there too */
typedef int (*b2_cache_flush_fn)(void *owner, int64_t chunk,
                                 const uint8_t *data, size_t len);

/* Counters for tests and debug logs (a consistent-enough snapshot: each
 * shard is read under its own lock). */
typedef struct b2_cache_stats {
  uint64_t hits;          /* gets served by a present entry */
  uint64_t misses;        /* gets that ran the loader */
  uint64_t waits;         /* gets that waited for another thread's load */
  uint64_t load_errors;   /* loads that failed */
  uint64_t evictions;     /* entries evicted for capacity */
  uint64_t flushes;       /* flush callbacks run */
  uint64_t flush_errors;  /* flush callbacks that failed */
  uint64_t entries;       /* entries in the index (loading ones included) */
  uint64_t bytes;         /* bytes of all live buffers */
  uint64_t dirty_entries; /* entries waiting to be flushed */
  uint64_t dirty_bytes;   /* their bytes */
  uint64_t capacity, dirty_max;
} b2_cache_stats;

/* ---- life cycle ------------------------------------------------------- */

/* Create a cache; cfg may be NULL (all defaults).  0 and *out, or
 * B2_E_INVAL (dirty_max > capacity) / B2_E_NOMEM. */
int b2_cache_create(const b2_cache_config *cfg, b2_cache **out);

/* Free the cache and every entry.  No entry may be pinned or locked.
 * Dirty entries are dropped without flushing: call b2_cache_flush_all
 * first.  NULL is a no-op. */
void b2_cache_destroy(b2_cache *c);

/* A new file id, unique for this cache (never 0). */
uint64_t b2_cache_file_id(b2_cache *c);

/* ---- reading ---------------------------------------------------------- */

/* The entry of (file, chunk), pinned, in *out.  On a miss, load(arg, ...)
 * runs in this thread (or the call waits for the thread already loading
 * that key).  Returns 0, or the loader's negative code (every waiter gets
 * it; no entry is left), or B2_E_NOMEM / B2_E_INVAL.  After a successful
 * load the caller may evict other entries (and flush dirty ones) to stay
 * within capacity.  Release the entry with b2_cache_release. */
int b2_cache_get(b2_cache *c, uint64_t file, int64_t chunk,
                 b2_cache_load_fn load, void *arg, b2_cache_entry **out);
/* b2_cache_get for a load whose buffer will hold about `size` bytes (0:
 * not known): they count in the cache's bytes while it runs, so that
 * clean entries make room before the buffer is made rather than after
 * (ten threads loading 4 MiB chunks at once would otherwise take the
 * process 40 MiB past the capacity). */
int b2_cache_get_sized(b2_cache *c, uint64_t file, int64_t chunk, size_t size,
                       b2_cache_load_fn load, void *arg, b2_cache_entry **out);

/* The entry if it is present and loaded, pinned, in *out: 0.  B2_E_NOENT
 * if absent or still loading.  Never loads or waits; not counted in the
 * hit/miss statistics. */
int b2_cache_peek(b2_cache *c, uint64_t file, int64_t chunk,
                  b2_cache_entry **out);

/* Drop one pin.  The entry becomes the most recently used when the last pin
 * goes (or is freed if it was dropped from the cache meanwhile). */
void b2_cache_release(b2_cache *c, b2_cache_entry *e);

/* The entry's buffer and length (see LOCKING RULES for when a read lock is
 * needed).  The data pointer may change when a writer resizes. */
const uint8_t *b2_cache_data(const b2_cache_entry *e);
size_t b2_cache_len(const b2_cache_entry *e);
uint64_t b2_cache_entry_file(const b2_cache_entry *e);
int64_t b2_cache_entry_chunk(const b2_cache_entry *e);

/* Count one use of a pinned entry; returns the count so far (1 at the
 * first call).  For callers' own policies (src/file/partial.c). */
unsigned b2_cache_use(b2_cache_entry *e);

/* 1 if `n` more bytes fit in the cache without evicting anything. */
int b2_cache_has_room(b2_cache *c, size_t n);

/* Shared lock on a pinned entry's data, for readers of writable entries. */
void b2_cache_read_lock(b2_cache_entry *e);
void b2_cache_read_unlock(b2_cache_entry *e);

/* ---- dropping entries ------------------------------------------------- */

/* Drop the clean entry of (file, chunk), e.g. because the frame changed.
 * 1 if an entry was dropped, 0 if none was present, B2_E_BUSY if it is
 * dirty or inside a write section (kept).  A pinned entry leaves the index
 * now (later gets load afresh) and is freed by its last release; a load in
 * progress still delivers its result to the threads already waiting. */
int b2_cache_invalidate(b2_cache *c, uint64_t file, int64_t chunk);

/* Drop the entry of (file, chunk) only if it is clean, outside a write
 * section and pinned by nobody (a writer that has passed it): 1 if
 * dropped, 0 if absent or kept. */
int b2_cache_drop_idle(b2_cache *c, uint64_t file, int64_t chunk);

/* Drop every clean entry of `file` (the frame changed behind the mount).
 * Returns the number of entries kept because dirty or being written. */
int b2_cache_invalidate_file(b2_cache *c, uint64_t file);

/* Drop the entry of (file, chunk) even if dirty: its unsaved changes are
 * lost on purpose (truncate, delete).  1 if dropped, 0 if absent.  A write
 * section open on it completes without making it dirty; a flush already
 * running completes but the entry does not come back. */
int b2_cache_discard(b2_cache *c, uint64_t file, int64_t chunk);

/* Drop every entry of `file`, dirty or not.  Returns the number dropped. */
int b2_cache_discard_file(b2_cache *c, uint64_t file);
/* The same when the file's entries can only be chunks [0, nkeys): looked
 * up one by one when that is cheaper than walking the whole cache (the
 * close of a handle of a small frame). */
int b2_cache_discard_keys(b2_cache *c, uint64_t file, int64_t nkeys);

/* ---- writing ---------------------------------------------------------- */

/* Open a write section on a pinned entry.  If dirty bytes would exceed
 * dirty_max once this entry is dirty (or already exceed it, for an entry
 * that is dirty), first flushes the oldest dirty entries (any file) or
 * waits for flushes in progress until there is room; then takes the
 * entry's write lock.  `owner` and `flush` are recorded when
 * the section ends and used for every later flush of the entry (all writers
 * of one file id must pass the same pair).  The owner must stay valid until
 * the file's entries are flushed (b2_cache_flush_file) or discarded
 * (b2_cache_discard_file): any thread may flush them at any time.
 * Returns 0, B2_E_NOENT if the entry was dropped from the cache (get it
 * again), B2_E_INVAL, or the flush error that keeps dirty bytes above the
 * bound (every remaining dirty entry failed to flush, retried once during
 * this call).  On error no lock is held.  Dirty bytes can exceed dirty_max
 * only by what the writers inside their sections add (each checked the
 * bound before): their entries, and their buffers' growth (resize). */
int b2_cache_write_begin(b2_cache *c, b2_cache_entry *e, void *owner,
                         b2_cache_flush_fn flush);

/* Writable buffer of an entry inside its write section. */
uint8_t *b2_cache_wdata(b2_cache_entry *e);

/* Inside a write section: set the buffer length to `len`, keeping the first
 * min(old, new) bytes and zero-filling growth.  0, B2_E_NOMEM or
 * B2_E_LIMIT; on error the buffer is unchanged. */
int b2_cache_resize(b2_cache *c, b2_cache_entry *e, size_t len);

/* Close the write section.  If `modified`, the entry becomes (or stays)
 * dirty; a dirty entry stays in memory until flushed. */
void b2_cache_write_end(b2_cache *c, b2_cache_entry *e, int modified);

/* Inside a write section: note that bytes [off, off+len) of the buffer
 * were written, and how many distinct bytes have been noted since the
 * entry was last clean (these included).  The count is exact for writes
 * in up to B2_CACHE_WRUNS separate runs and below it beyond: a writer can
 * tell a chunk it has filled whole, in whatever order its pieces came. */
#define B2_CACHE_WRUNS 8
void b2_cache_note_write(b2_cache_entry *e, size_t off, size_t len);
size_t b2_cache_written(const b2_cache_entry *e);

/* Is the entry dirty?  Its last flush error (0 if none or if a later flush
 * succeeded)?  Snapshot values for tests and logs. */
int b2_cache_is_dirty(b2_cache *c, const b2_cache_entry *e);
int b2_cache_flush_error(b2_cache *c, const b2_cache_entry *e);

/* ---- flushing --------------------------------------------------------- */

/* Write back every dirty entry of `file` that holds data written before
 * this call began (fsync, close), waiting for flushes of them already in
 * progress.  Entries whose earlier flush failed are retried.  With a pool
 * (may be NULL) distinct chunks are flushed in parallel by pool workers
 * and this thread together.  Returns 0 or the first flush error; failed
 * entries stay dirty and keep their error. */
int b2_cache_flush_file(b2_cache *c, uint64_t file, struct b2_pool *pool);

/* The same for every file (unmount, before destroy). */
int b2_cache_flush_all(b2_cache *c, struct b2_pool *pool);

/* Flush one pinned entry now if it holds unflushed data written before the
 * call (waits for a flush of it already running).  0 or the flush error. */
int b2_cache_flush_entry(b2_cache *c, b2_cache_entry *e);

/* For a background thread: flush every dirty entry whose last write is at
 * least `idle_ms` old (entries whose last flush failed are retried once
 * their failure is that old too).  Returns the number of entries flushed,
 * or the first flush error (the remaining candidates are still tried). */
int b2_cache_flush_idle(b2_cache *c, unsigned idle_ms);

/* ---- work buffers ------------------------------------------------------ */

/* A buffer of n bytes the owner works in beside its entries (a chunk
 * being compressed) counts in the cache's bytes while it lives: clean,
 * unpinned entries are evicted to keep the total within the capacity, so
 * that the process's memory stays near it while writers work.  Nothing is
 * flushed to make room (a flush callback may charge).  Uncharge the same n
 * when the buffer is freed.  NULL c: no-op. */
void b2_cache_charge(b2_cache *c, size_t n);
void b2_cache_uncharge(b2_cache *c, size_t n);

/* ---- statistics ------------------------------------------------------- */

void b2_cache_get_stats(b2_cache *c, b2_cache_stats *st);

#ifdef __cplusplus
}
#endif
#endif /* B2_CACHE_H */
