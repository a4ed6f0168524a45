/*
 * read.c - the read path of file handles: chunks through the shared cache,
 * partial decode for small random reads, read-ahead for sequential ones,
 * pread by view, and pinned (zero-copy) reads.
 *
 * Chunks decoded whole are cached under (f->id, chunk): what sequential
 * readers, large reads and writers use.  Small random reads of chunks not
 * cached so are served by partial.c (decoded blocks and stored chunks).
 */
#include <stdlib.h>
#include <string.h>

#include "b2_error.h"
#include "common/util.h"
#include "file/file_impl.h"

/* ---- cache loaders -------------------------------------------------------- */

/* Decoded chunk: from the stored chunk when that is cached, else from the
 * frame; the blocks shared with the idle workers of `pool` (may be NULL). */
static int load_chunk(b2_file *f, int64_t chunk, uint8_t **data, size_t *len,
                      struct b2_pool *pool) {
  atomic_store(&f->cached, 1);
  /* A chunk parked by the writer (spill.c) is read from there, not cached. */
  if (f->writable && b2_file_spill_has(f, chunk))
    return b2_fail(B2_E_STALE, "chunk %lld is parked", (long long)chunk);
  int32_t nb = b2_frame_chunk_nbytes(f->frame, chunk);
  if (nb < 0) return nb;
  /* A chunk of zeros by its index entry (the chunks a new array is sized
   * with, before its writer fills them): nothing to decode, and a fresh
   * buffer is zeros already. */
  int sp = b2_frame_chunk_special(f->frame, chunk);
  int zeros = sp == B2_SPECIAL_ZERO || sp == B2_SPECIAL_UNINIT;
  uint8_t *buf = zeros ? b2_cache_buf_zalloc(nb ? (size_t)nb : 1)
                       : b2_cache_buf_alloc(nb ? (size_t)nb : 1);
  if (!buf) return b2_fail(B2_E_NOMEM, "no memory to decode a chunk of %d bytes", nb);
  int rc;
  b2_cache_entry *se;
  b2_cache *c = f->env ? f->env->cache : NULL;
  if (zeros) {
    rc = nb;
  } else if (f->cid && c && b2_cache_peek(c, f->cid, chunk, &se) == 0) {
    rc = b2_chunk_decode_par(b2_cache_data(se), b2_cache_len(se), buf, (size_t)nb, pool,
                             b2_frame_geom(f->frame));
    b2_cache_release(c, se);
    if (rc >= 0 && rc != nb)
      rc = b2_fail(B2_E_FORMAT, "decoded %d bytes, expected %d", rc, nb);
    if (rc < 0) rc = b2_context(rc, "chunk %lld", (long long)chunk);
  } else {
    rc = b2_frame_decode_chunk_par(f->frame, chunk, buf, (size_t)nb, pool);
  }
  if (rc < 0) {
    b2_cache_buf_free(buf);
    return rc;
  }
  *data = buf;
  *len = (size_t)nb;
  return 0;
}

int b2_file_load_chunk(void *arg, uint64_t file, int64_t chunk, uint8_t **data, size_t *len) {
  b2_file *f = arg;
  (void)file;
  return load_chunk(f, chunk, data, len, f->env ? f->env->pool : NULL);
}

int b2_file_cache_get(b2_file *f, int64_t i, b2_cache_load_fn load, b2_cache_entry **e) {
  /* A writer's chunks hold at most its chunk size (and may lie past its
   * frame's end); a reader's, what the frame says. */
  int32_t nb = f->writable && f->chunksize > 0 ? f->chunksize : b2_frame_chunk_nbytes(f->frame, i);
  size_t size = nb > 0 ? (size_t)nb : 0;
  return b2_cache_get_sized(f->env->cache, f->id, i, size, load, f, e);
}

/* The same on the calling thread alone: for work already beside the
 * reader's (b2_file_warm), where waking the workers would only cost. */
static int load_chunk_solo(void *arg, uint64_t file, int64_t chunk, uint8_t **data,
                           size_t *len) {
  (void)file;
  return load_chunk(arg, chunk, data, len, NULL);
}

/* ---- one chunk -------------------------------------------------------------- */

/* Copy [off, off+len) out of a pinned cache entry.  Bytes past the
 * entry's end read as zeros: a written chunk being grown by a truncate. */
static void copy_entry(const b2_file *f, b2_cache_entry *e, size_t off, size_t len, void *dst) {
  if (f->writable) b2_cache_read_lock(e);
  size_t have = b2_cache_len(e);
  size_t n = off < have ? B2_MIN(len, have - off) : 0;
  if (n) memcpy(dst, b2_cache_data(e) + off, n);
  if (n < len) memset((uint8_t *)dst + n, 0, len - n);
  if (f->writable) b2_cache_read_unlock(e);
}

/* Chunk i's decoded entry pinned in *e when it is in the cache c, or when
 * b2_file_warm has begun it (waited for, or loaded here if the warming
 * thread has not reached it yet): 1; 0 when neither; < 0 on error. */
static int pin_cached_or_warmed(b2_file *f, b2_cache *c, int64_t i, b2_cache_entry **e) {
  if (b2_cache_peek(c, f->id, i, e) == 0) return 1;
  if (i >= atomic_load(&f->warm)) return 0;
  int rc = b2_file_cache_get(f, i, b2_file_load_chunk, e);
  return rc < 0 ? rc : 1;
}

/* Chunk i of the sequential reader st: 1 when the caller takes it, moving
 * the stream's read-ahead mark past it so that read-ahead never queues it;
 * 0 when read-ahead has queued it already.  A reader decoding a whole chunk
 * straight into its reply and read-ahead both take chunks through this one
 * mark, so that requests arriving out of order (the kernel's read-ahead
 * comes on several threads) do not decode a chunk twice, once for the
 * reply and once into the cache. */
static int take_chunk(b2_stream *st, int64_t i) {
  int64_t a = atomic_load(&st->ahead);
  while (a <= i)
    if (atomic_compare_exchange_weak(&st->ahead, &a, i + 1)) return 1;
  return 0;
}

/* Whether a sequential reader's read-ahead has queued chunk i and the
 * reader not passed it: for a read no reader claims (the kernel's
 * read-ahead requests may arrive too far out of order to be taken for the
 * stream's), which should then wait for that decode, not repeat it. */
static int queued_ahead(b2_file *f, int64_t i) {
  for (int k = 0; k < B2_FILE_STREAMS; k++)
    if (i < atomic_load(&f->streams[k].ahead) && i > atomic_load(&f->streams[k].done)) return 1;
  return 0;
}

/* The decoded entry of chunk i pinned in *e: present, or loaded (by this
 * thread or the one already loading it).  1 when pinned, 0 when the read
 * is better served otherwise (not cached, and small and not sequential, or
 * the whole chunk wanted and not queued for read-ahead), < 0 on error. */
static int pin_chunk(b2_file *f, int64_t i, size_t len, int32_t nb, b2_stream *seq,
                     b2_cache_entry **e) {
  b2_cache *c = f->env ? f->env->cache : NULL;
  if (!c) return 0;
  int rc = pin_cached_or_warmed(f, c, i, e);
  if (rc != 0) return rc;
  if (!seq && len <= B2_FILE_PARTIAL_MAX && (size_t)nb / B2_FILE_WHOLE_RATIO > len) return 0;
  /* A whole chunk goes straight to the caller unless read-ahead has queued
   * it (then wait for that decode rather than repeat it). */
  if (len == (size_t)nb && (seq ? take_chunk(seq, i) : !queued_ahead(f, i))) return 0;
  rc = b2_file_cache_get(f, i, b2_file_load_chunk, e);
  return rc < 0 ? rc : 1;
}

static int read_chunk(b2_file *f, int64_t i, size_t off, size_t len, void *dst, b2_stream *seq) {
  int32_t nb = b2_frame_chunk_nbytes(f->frame, i);
  if (nb < 0) return nb;
  b2_cache_entry *e;
  int rc = pin_chunk(f, i, len, nb, seq, &e);
  if (rc < 0) return rc;
  if (rc > 0) {
    copy_entry(f, e, off, len, dst);
    b2_cache_release(f->env->cache, e);
    return 0;
  }
  if (off == 0 && len == (size_t)nb) {
    /* The whole chunk, once: decode straight into the caller's buffer,
     * with the idle workers' help. */
    rc = b2_frame_decode_chunk_par(f->frame, i, dst, len, f->env ? f->env->pool : NULL);
    return rc < 0 ? rc : 0;
  }
  return b2_file_read_partial(f, i, off, len, dst);
}

int b2_file_read_chunk(b2_file *f, int64_t i, size_t off, size_t len, void *dst, b2_stream *seq) {
  if (!f->writable) return read_chunk(f, i, off, len, dst, seq);
  /* A writer's chunk: in the cache (the newest), else parked (spill.c),
   * else as read-only; parked meanwhile: look again. */
  for (;;) {
    b2_cache_entry *e;
    if (b2_cache_peek(f->env->cache, f->id, i, &e) == 0) {
      copy_entry(f, e, off, len, dst);
      b2_cache_release(f->env->cache, e);
      return 0;
    }
    int rc = b2_file_spill_read(f, i, off, len, dst);
    if (rc != 0) return rc < 0 ? rc : 0;
    rc = read_chunk(f, i, off, len, dst, seq);
    if (rc != B2_E_STALE || !b2_file_spill_has(f, i)) return rc;
  }
}

/* The chunks holding the view's first nbytes bytes: [0, *last] (1; *last
 * is -1 when those bytes hold none), 0 for a view not read by whole
 * chunks in order, or a negative code. */
static int view_chunks(b2_file *f, int64_t nbytes, int64_t *last) {
  int64_t hdr = 0; /* bytes of the view before the first chunk's */
  if (f->view != B2_VIEW_LOGICAL) {
    if (!b2_file_linear(f)) return 0;
    hdr = f->view == B2_VIEW_NPY ? (int64_t)f->npylen : 0;
  }
  int64_t end = B2_MIN(nbytes, atomic_load(&f->size)) - hdr;
  *last = end <= 0 ? -1 : b2_frame_chunk_at(f->frame, end - 1);
  return end > 0 && *last < 0 ? (int)*last : 1;
}

int b2_file_resident(b2_file *f, int64_t nbytes) {
  b2_cache *c = f->env ? f->env->cache : NULL;
  int64_t last;
  if (!c || f->writable) return 0;
  if (view_chunks(f, nbytes, &last) <= 0) return 0;
  for (int64_t i = 0; i <= last; i++) {
    b2_cache_entry *e;
    /* A warmed chunk not there yet is waited for: its reader would too. */
    if (pin_cached_or_warmed(f, c, i, &e) <= 0) return 0;
    b2_cache_release(c, e);
  }
  return 1;
}

int b2_file_warm(b2_file *f, int64_t nbytes) {
  b2_cache *c = f->env ? f->env->cache : NULL;
  /* A handle read from already: its reader came first (and decoded what
   * it needed); warming now would decode the same chunks twice. */
  if (!c || f->writable || f->pending || atomic_load(&f->tick) > 0) return 0;
  int64_t last;
  int rc = view_chunks(f, nbytes, &last);
  if (rc <= 0) return rc;
  int64_t w = atomic_load(&f->warm);
  while (w < last + 1 && !atomic_compare_exchange_weak(&f->warm, &w, last + 1)) {
  }
  int loaded = 0;
  for (int64_t i = 0; i <= last; i++) {
    b2_cache_entry *e;
    if (b2_cache_peek(c, f->id, i, &e) == 0) {
      b2_cache_release(c, e);
      continue;
    }
    rc = b2_file_cache_get(f, i, load_chunk_solo, &e);
    if (rc < 0) return rc;
    b2_cache_release(c, e);
    loaded++;
  }
  return loaded;
}

/* ---- read-ahead ------------------------------------------------------------- */
typedef struct {
  b2_file *f;
  b2_stream *st;
  uint64_t id;         /* cache key space: f->id (chunks) or f->bid (bands) */
  int64_t key;
  b2_cache_load_fn load;
} ahead_job;

static void ahead_run(void *arg) {
  ahead_job *j = arg;
  b2_file *f = j->f;
  b2_cache_entry *e;
  /* A writer's file may change size meanwhile.  The load then runs with
   * the size lock held, as a reader's does, and only for a chunk the file
   * still has: a load begun before a truncate and failing after the file
   * grew back would hand its failure to the writer waiting for the same
   * chunk.  A size change under way skips the job (it is only a guess). */
  int locked = f->writable;
  if (locked && pthread_rwlock_tryrdlock(&f->szlock) != 0) {
    free(j);
    return;
  }
  /* Skip a key the reader has passed meanwhile (it loaded it itself):
   * loading it now would only park it in the cache. */
  b2_frame_info in;
  if (j->key > atomic_load(&j->st->done) &&
      (!locked || (b2_frame_info_copy(f->frame, &in) == 0 && j->key < in.nchunks)) &&
      (j->id == f->id ? b2_file_cache_get(f, j->key, j->load, &e)
                      : b2_cache_get(f->env->cache, j->id, j->key, j->load, f, &e)) == 0)
    b2_cache_release(f->env->cache, e);
  if (locked) pthread_rwlock_unlock(&f->szlock);
  free(j);
}

int b2_file_queue_ahead(b2_file *f, b2_stream *st, uint64_t id, int64_t key,
                        b2_cache_load_fn load) {
  b2_cache_entry *e;
  if (b2_cache_peek(f->env->cache, id, key, &e) == 0) {
    b2_cache_release(f->env->cache, e);
    return 0;
  }
  ahead_job *job = malloc(sizeof *job);
  if (!job) return -1;
  *job = (ahead_job){f, st, id, key, load};
  if (b2_pool_try_submit(f->env->pool, ahead_run, job, &f->group) < 0) {
    free(job);
    return -1;
  }
  return 1;
}

/* Sequential reader `st` reached chunk `last`: queue the next chunks for
 * decoding in the background (dropped when the pool is busy). */
static void read_ahead(b2_file *f, b2_stream *st, int64_t last) {
  b2_env *env = f->env;
  if (!env || !env->cache || !env->pool || env->opts.readahead <= 0) return;
  b2_frame_info in;
  if (b2_frame_info_copy(f->frame, &in) < 0) return;
  int64_t to = B2_MIN(in.nchunks, last + 1 + env->opts.readahead);
  for (int64_t j = last + 1; j < to; j++) {
    if (!take_chunk(st, j)) continue; /* queued, or a reader decodes it */
    if (b2_file_queue_ahead(f, st, f->id, j, b2_file_load_chunk) < 0) {
      int64_t mine = j + 1; /* the pool is busy: leave j to whoever comes next */
      atomic_compare_exchange_strong(&st->ahead, &mine, j);
      break;
    }
  }
}

/* Which sequential reader, if any, does a read of [off, off+n) belong to?
 * A reader (b2_stream) continues where its last read ended, or near there
 * (within a few read sizes): the kernel's read-ahead requests reach the
 * daemon on several threads and may arrive a little out of order.  A read
 * near no reader starts a new one in the least recently used slot; a
 * reader is sequential from its second continuation on.  (One is not
 * enough: among tens of thousands of random 4 KiB reads of a file, some
 * start exactly where a recent one ended, and each such read taken for a
 * sequential reader decoded its chunk whole and queued read-ahead.) */
#define SEQ_SLACK_READS 4
#define SEQ_SLACK_MAX ((int64_t)1 << 20)
static b2_stream *note_read(b2_file *f, int64_t off, size_t n) {
  uint64_t now = atomic_fetch_add(&f->tick, 1) + 1;
  int64_t slack = B2_MIN((int64_t)n * SEQ_SLACK_READS, SEQ_SLACK_MAX);
  b2_stream *best = NULL, *lru = &f->streams[0];
  int64_t bestd = INT64_MAX;
  for (int k = 0; k < B2_FILE_STREAMS; k++) {
    b2_stream *s = &f->streams[k];
    int64_t end = atomic_load(&s->end);
    int64_t d = end < 0 ? INT64_MAX : end > off ? end - off : off - end;
    if (d <= slack && d < bestd) {
      best = s;
      bestd = d;
    }
    if (atomic_load(&s->used) < atomic_load(&lru->used)) lru = s;
  }
  if (!best) {
    atomic_store(&lru->end, off + (int64_t)n);
    atomic_store(&lru->state, 0);
    atomic_store(&lru->ahead, 0);
    atomic_store(&lru->done, -1);
    atomic_store(&lru->used, now);
    return NULL;
  }
  int seq = atomic_load(&best->state) > 0;
  atomic_store(&best->state, seq ? 2 : 1);
  atomic_store(&best->end, off + (int64_t)n);
  atomic_store(&best->used, now);
  return seq ? best : NULL;
}

/* Drop-behind: a sequential reader finished chunk i, so chunk i - 1 (one
 * behind, as requests may arrive a little out of order) leaves the cache.
 * The kernel keeps the bytes it was given in its own page cache; keeping
 * them decoded here as well would only double the memory and push out
 * chunks that random readers use.  Read-only handles only (written
 * entries may be dirty). */
void b2_file_drop_behind(b2_file *f, b2_stream *st, uint64_t id, int64_t key, int64_t prev) {
  /* `done` only grows: requests finishing out of order must not make
   * read-ahead load keys the reader has already passed. */
  int64_t d = atomic_load(&st->done);
  while (d < key && !atomic_compare_exchange_weak(&st->done, &d, key)) {
  }
  if (prev >= 0 && !f->writable && f->env && f->env->cache)
    b2_cache_invalidate(f->env->cache, id, prev);
}

static void drop_behind(b2_file *f, b2_stream *st, int64_t i) {
  b2_file_drop_behind(f, st, f->id, i, i - 1);
}

/* ---- views --------------------------------------------------------------------- */

/* Logical view: walk the chunks covering the range. */
static int read_logical(b2_file *f, uint8_t *dst, size_t n, int64_t off, b2_stream *seq) {
  int64_t end = off + (int64_t)n;
  int64_t i = b2_frame_chunk_at(f->frame, off);
  if (i < 0) return (int)i;
  while (off < end) {
    int64_t cs = b2_frame_chunk_start(f->frame, i);
    int32_t cn = b2_frame_chunk_nbytes(f->frame, i);
    if (cs < 0 || cn <= 0) return cs < 0 ? (int)cs : cn < 0 ? cn : b2_fail(B2_E_FORMAT, "chunk %lld is empty", (long long)i);
    size_t lo = (size_t)(off - cs);
    size_t take = (size_t)(B2_MIN(end, cs + cn) - off);
    int rc = b2_file_read_chunk(f, i, lo, take, dst, seq);
    if (rc < 0) return rc; /* the frame layer names the chunk */
    dst += take;
    off += (int64_t)take;
    if (seq && off == cs + cn) drop_behind(f, seq, i);
    i++;
  }
  if (seq) read_ahead(f, seq, i - 1);
  return 0;
}

typedef struct {
  b2_file *f;
  b2_stream *seq;
  int64_t last; /* highest chunk read */
} gather_ctx;

static int chunk_reader(void *arg, int64_t chunk, size_t off, size_t len, void *dst) {
  gather_ctx *g = arg;
  int rc = b2_file_read_chunk(g->f, chunk, off, len, dst, g->seq);
  if (chunk > g->last) g->last = chunk;
  return rc < 0 ? rc : 0;
}

/* Read n bytes (already clipped to the size) at off of the view, for the
 * sequential reader `seq` (NULL: a random read). */
static int read_view(b2_file *f, uint8_t *dst, size_t n, int64_t off, b2_stream *seq) {
  if (f->pending) return b2_file_pending_read(f, dst, n, off);
  if (f->view == B2_VIEW_LOGICAL) return read_logical(f, dst, n, off, seq);
  size_t done = 0;
  if (f->view == B2_VIEW_NPY && off < (int64_t)f->npylen) {
    size_t h = B2_MIN(n, f->npylen - (size_t)off);
    memcpy(dst, f->npy + off, h);
    done = h;
    off += (int64_t)h;
  }
  if (done == n) return 0;
  int64_t aoff = off - (f->view == B2_VIEW_NPY ? (int64_t)f->npylen : 0);
  /* Chunks that hold the items in C order: read them as the logical view
   * (read-ahead, drop-behind), no gather. */
  if (b2_file_linear(f)) return read_logical(f, dst + done, n - done, aoff, seq);
  /* Otherwise a sequential reader goes by bands of rows (band.c). */
  int rc = b2_file_band_read(f, dst + done, n - done, aoff, seq);
  if (rc != 0) return rc < 0 ? rc : 0;
  /* A writer's sequential reader decodes just the blocks it needs too: a
   * row of chunks split across may not fit in the cache (no bands: their
   * bytes would go stale under the writes). */
  gather_ctx g = {f, f->writable ? NULL : seq, -1};
  rc = b2_b2nd_read(&f->array, (uint64_t)aoff, n - done, dst + done, chunk_reader, &g);
  if (rc > 0) rc = 0;
  if (rc == 0 && seq && g.last >= 0) read_ahead(f, seq, g.last);
  return rc;
}

/* Clip a read to the view's size: the byte count to read (0 at the end). */
static ssize_t clip(const b2_file *f, size_t n, int64_t off) {
  if (off < 0) return b2_fail(B2_E_INVAL, "negative offset");
  int64_t size = atomic_load(&f->size);
  if (off >= size || n == 0) return 0;
  if ((int64_t)n > size - off) n = (size_t)(size - off);
  return (ssize_t)n;
}

/* A truncate racing a read of a writable file can take chunks away under
 * it (B2_E_RANGE): the read is then clipped to the new size and redone. */
static int raced_truncate(const b2_file *f, int rc, int64_t off, ssize_t k) {
  return rc == B2_E_RANGE && f->writable && b2_file_size(f) < off + k;
}

static ssize_t pread_once(b2_file *f, void *buf, size_t n, int64_t off) {
  for (int tries = 0;; tries++) {
    ssize_t k = clip(f, n, off);
    if (k <= 0) return k;
    int rc = read_view(f, buf, (size_t)k, off, note_read(f, off, (size_t)k));
    if (rc >= 0) return k;
    if (tries == 3 || !raced_truncate(f, rc, off, k)) return rc;
  }
}

ssize_t b2_file_pread(b2_file *f, void *buf, size_t n, int64_t off) {
  if (!f->writable) return pread_once(f, buf, n, off);
  pthread_rwlock_rdlock(&f->szlock); /* no size change under this read */
  ssize_t k = pread_once(f, buf, n, off);
  pthread_rwlock_unlock(&f->szlock);
  return k;
}

/* ---- pinned reads ------------------------------------------------------------------ */

/* The logical range [off, off+n) within one chunk whose decoded entry is
 * (or, for a sequential reader, becomes) cached: pin it.  1 when pinned,
 * 0 when not served this way, < 0 on error. */
static int pin_range(b2_file *f, size_t n, int64_t off, b2_stream *seq, b2_file_pin *p) {
  if (f->writable || !f->env || !f->env->cache) return 0;
  if (f->view != B2_VIEW_LOGICAL) {
    /* An array's items past the header: chunks in C order, or bands. */
    int64_t hdr = f->view == B2_VIEW_NPY ? (int64_t)f->npylen : 0;
    if (off < hdr) return 0;
    off -= hdr;
    if (!b2_file_linear(f))
      return f->has_array ? b2_file_band_pin(f, n, off, seq, p) : 0; /* by bands, or not */
  }
  int64_t i = b2_frame_chunk_at(f->frame, off);
  if (i < 0) return (int)i;
  int64_t cs = b2_frame_chunk_start(f->frame, i);
  int32_t cn = b2_frame_chunk_nbytes(f->frame, i);
  if (cs < 0) return (int)cs;
  if (cn < 0) return cn;
  if (off + (int64_t)n > cs + cn) return 0; /* spans chunks */
  b2_cache_entry *e;
  int rc = pin_chunk(f, i, n, cn, seq, &e);
  if (rc <= 0) return rc;
  size_t lo = (size_t)(off - cs);
  if (b2_cache_len(e) < lo + n) { /* cannot happen read-only; be safe */
    b2_cache_release(f->env->cache, e);
    return 0;
  }
  p->data = b2_cache_data(e) + lo;
  p->entry = e;
  if (seq) {
    if (lo + n == (size_t)cn) drop_behind(f, seq, i);
    read_ahead(f, seq, i);
  }
  return 1;
}

ssize_t b2_file_pread_pin(b2_file *f, void *buf, size_t n, int64_t off, b2_file_pin *p) {
  p->data = buf;
  p->entry = NULL;
  p->cache = f->env ? f->env->cache : NULL;
  if (f->writable) return b2_file_pread(f, buf, n, off); /* pins read-only data only */
  ssize_t k = clip(f, n, off);
  if (k <= 0) return k;
  b2_stream *seq = note_read(f, off, (size_t)k);
  int rc = pin_range(f, (size_t)k, off, seq, p);
  if (rc == 0) rc = read_view(f, buf, (size_t)k, off, seq);
  if (rc < 0 && raced_truncate(f, rc, off, k)) return b2_file_pread(f, buf, n, off);
  return rc < 0 ? rc : k;
}

void b2_file_unpin(b2_file_pin *p) {
  if (p->entry) b2_cache_release(p->cache, p->entry);
  p->entry = NULL;
  p->data = NULL;
}
