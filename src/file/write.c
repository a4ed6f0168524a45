/*
 * write.c - the write side of file handles.
 *
 * Written bytes go into the shared cache as dirty decoded chunks.  A dirty
 * chunk is compressed and staged into the frame by flush_chunk() (called by
 * the cache on eviction, by the idle flusher, by b2_file_flush, or at once
 * on a pool worker when a write completes the chunk); b2_file_flush then
 * commits the frame.  Locks:
 *   wmu  serialises pwrite, truncate, flush and set_param of one file;
 *   fmu  guards the size together with the frame's geometry, so a chunk is
 *        only staged when its length agrees with the current size.
 * Cache calls are never made with fmu held (flush callbacks take it).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "b2_error.h"
#include "common/bigbuf.h"
#include "common/fileio.h"
#include "common/util.h"
#include "file/file_impl.h"

int64_t b2_file_now_ms(void) { return (int64_t)(b2_now_ns() / 1000000); }

void b2_file_touched(b2_file *f) {
  atomic_store(&f->changed_ns, b2_stamp_now_ns());
  atomic_fetch_add(&f->gen, 1);
  atomic_store(&f->last_write_ms, b2_file_now_ms());
}

/* Length chunk i must have for a file of `size` bytes (0 past the end). */
static size_t chunk_len(const b2_file *f, int64_t size, int64_t i) {
  int64_t start = i * (int64_t)f->chunksize;
  if (start >= size) return 0;
  return (size_t)B2_MIN((int64_t)f->chunksize, size - start);
}

/* ---- staging chunks (flush callback) ------------------------------------ */

/* Set while a pool worker compresses a chunk a write completed (flush_job_run). */
static _Thread_local int tl_completed;

int b2_file_flush_chunk(void *owner, int64_t i, const uint8_t *data, size_t len) {
  b2_file *f = owner;
  uint64_t epoch = atomic_load(&f->epoch);
  /* A chunk the writer is still inside: parked, not compressed (and its
   * entry dropped: the writer's next runs go to the parked bytes); but
   * never one a write completed (its last piece may have come in the
   * middle: the writer will not come back for it). */
  if (!tl_completed && b2_file_spill_put(f, i, data, len, epoch) > 0) return B2_CACHE_FLUSH_DROP;
  uint8_t *buf;
  int rc = b2_file_encode(f, i, data, len, &buf);
  if (rc >= 0) {
    size_t clen = (size_t)rc;
    pthread_mutex_lock(&f->fmu);
    size_t want = chunk_len(f, b2_file_fbytes(f), i);
    if (epoch != atomic_load(&f->epoch))
      /* The file was cut while we compressed: this data may belong to a
       * chunk since cut off (and grown back); a live entry stays dirty. */
      rc = b2_fail(B2_E_BUSY, "chunk %lld: the size changed during its flush", (long long)i);
    else if (want == 0)
      rc = 0; /* cut off by a truncate meanwhile: nothing to store */
    else if (want != len)
      rc = b2_fail(B2_E_BUSY, "chunk %lld is being resized", (long long)i); /* retried */
    else if ((rc = b2_frame_put_chunk(f->frame, i, buf, clen)) == 0)
      b2_file_spill_forget(f, i); /* the frame has it now */
    pthread_mutex_unlock(&f->fmu);
  }
  b2_file_encoded_free(f, buf, len);
  if (rc < 0) return b2_context(rc, "%s: chunk %lld", f->path, (long long)i);
  return 0;
}

int b2_file_encode(b2_file *f, int64_t i, const uint8_t *data, size_t len, uint8_t **out) {
  *out = NULL;
  size_t cap = b2_chunk_bound(len);
  b2_cache *c = f->env ? f->env->cache : NULL;
  b2_cache_charge(c, cap); /* (room made in the cache for it) */
  uint8_t *buf = b2_bigbuf_alloc(cap); /* not the heap: see bigbuf.h */
  int rc = buf ? b2_chunk_encode(&f->cp, data, len, buf, cap)
               : b2_fail(B2_E_NOMEM, "no memory to compress chunk %lld", (long long)i);
  if (rc < 0) {
    b2_bigbuf_free(buf);
    b2_cache_uncharge(c, cap);
    return rc;
  }
  *out = buf;
  return rc;
}

void b2_file_encoded_free(b2_file *f, uint8_t *buf, size_t len) {
  if (!buf) return;
  b2_bigbuf_free(buf);
  b2_cache_uncharge(f->env ? f->env->cache : NULL, b2_chunk_bound(len));
}

/* ---- chunk buffers -------------------------------------------------------- */

/* Loader for a chunk the write replaces entirely: no need to decode. */
static int load_blank(void *arg, uint64_t file, int64_t chunk, uint8_t **data, size_t *len) {
  b2_file *f = arg;
  (void)file;
  size_t n = chunk_len(f, b2_file_fbytes(f), chunk);
  uint8_t *buf = b2_cache_buf_zalloc(n ? n : 1);
  if (!buf) return b2_fail(B2_E_NOMEM, "no memory for chunk %lld", (long long)chunk);
  *data = buf;
  *len = n;
  return 0;
}

int b2_file_wpin(b2_file *f, int64_t i, int whole, b2_cache_entry **e) {
  return b2_file_cache_get(f, i, whole ? load_blank : b2_file_load_chunk, e);
}

/* Set the length of a pinned chunk buffer and mark it dirty. */
static int resize_chunk(b2_file *f, b2_cache_entry *e, size_t len) {
  b2_cache *c = f->env->cache;
  int rc = b2_cache_write_begin(c, e, f, b2_file_flush_chunk);
  if (rc < 0) return rc;
  rc = b2_cache_resize(c, e, len);
  b2_cache_write_end(c, e, rc == 0);
  return rc;
}

/* Change the size (wmu held).  Partial edge chunks are pinned before the
 * frame's geometry changes and resized after it, so the cache and the
 * frame never disagree for longer than a flush retry. */
static int set_size(b2_file *f, int64_t size) {
  b2_cache *c = f->env->cache;
  int64_t old = atomic_load(&f->size);
  if (size == old) return 0;
  int64_t cs = f->chunksize;
  /* The chunk whose length changes: the old last one when growing, the
   * new last one when shrinking (if partial). */
  int64_t edge = -1;
  if (size > old && old % cs) edge = old / cs;
  if (size < old && size % cs) edge = size / cs;
  b2_cache_entry *e = NULL;
  int rc = 0;
  if (edge >= 0 && (rc = b2_file_wpin(f, edge, 0, &e)) < 0) return rc;

  pthread_mutex_lock(&f->fmu);
  /* Readers see the smaller of the two sizes while the frame changes. */
  if (size < old) atomic_store(&f->size, size);
  rc = b2_frame_resize(f->frame, size);
  atomic_store(&f->size, rc == 0 ? size : old);
  /* Flushes under way store nothing after a cut (their chunk may have been
   * cut off and grown back).  Growing leaves whole chunks as they were and
   * the old edge chunk's new length fails their length check: an appending
   * writer (cp) must not void every compression the pool does meanwhile. */
  if (size < old || rc != 0) atomic_fetch_add(&f->epoch, 1);
  pthread_mutex_unlock(&f->fmu);

  if (rc == 0 && size < old) {
    int64_t first = (size + cs - 1) / cs, last = (old + cs - 1) / cs;
    for (int64_t i = first; i < last; i++) b2_cache_discard(c, f->id, i);
  }
  if (e) {
    if (rc == 0) rc = resize_chunk(f, e, chunk_len(f, size, edge));
    b2_cache_release(c, e);
  }
  b2_file_touched(f);
  return rc;
}

/* ---- compress complete chunks at once, on the pool ------------------------ */
typedef struct {
  b2_file *f;
  b2_cache_entry *e;
  int drop;
} flush_job;

static void flush_job_run(void *arg) {
  flush_job *j = arg;
  b2_cache *c = j->f->env->cache;
  tl_completed = 1;
  int rc = b2_cache_flush_entry(c, j->e); /* an error stays on the entry */
  tl_completed = 0;
  int64_t chunk = b2_cache_entry_chunk(j->e);
  b2_cache_release(c, j->e);
  /* Write-behind: a writer going through the file in order has passed
   * this chunk.  Kept, it would only push out chunks others use and hold
   * memory; freed, its buffer takes the next chunk (no page faults).  A
   * chunk pinned again meanwhile (written, read) stays. */
  if (j->drop && rc == 0) (void)b2_cache_drop_idle(c, j->f->id, chunk);
  free(j);
}

/* Compressed at once or left to the cache: a chunk is done when the bytes
 * written into it since it was last stored fill it (the kernel's
 * write-back of a mapping sends its pieces on several threads, which take
 * them in any order), or when a write reaches its end and the run of
 * writes, each following on from the one before, that led there began at
 * or before its start (a C-order writer through an array's tiles, whose
 * runs in a chunk are too many to count).  A chunk compressed before its
 * last piece came is compressed again, its first copy dead space in the
 * frame: before, 28-34% of a 1-2 GiB .npy written through numpy.memmap. */
int b2_file_chunk_done(const b2_file *f, int reaches_end, int64_t start, size_t written,
                       size_t len) {
  return written >= len || (reaches_end && f->wrun <= start);
}

/* A write completed chunk e: compress it in the background (keeps the
 * pin, dropped by the job); if the pool is busy the cache does it later. */
void b2_file_flush_soon(b2_file *f, b2_cache_entry *e) {
  flush_job *j = f->env->pool ? malloc(sizeof *j) : NULL;
  if (j) {
    j->f = f;
    j->e = e;
    j->drop = f->wseq;
    if (b2_pool_try_submit(f->env->pool, flush_job_run, j, &f->group) == 0) return;
    free(j);
  }
  b2_cache_release(f->env->cache, e);
}

/* ---- public calls ----------------------------------------------------------- */

int b2_file_writable(const b2_file *f) { return f->writable; }

ssize_t b2_file_lwrite(b2_file *f, const void *buf, size_t n, int64_t off) {
  b2_cache *c = f->env->cache;
  const uint8_t *src = buf;
  int64_t end = off + (int64_t)n;
  int rc = 0;
  /* A write that grows the file holds readers off until its bytes are in. */
  int grows = end > atomic_load(&f->size);
  if (grows) {
    pthread_rwlock_wrlock(&f->szlock);
    rc = set_size(f, end);
  }
  int64_t cs = f->chunksize;
  while (rc == 0 && off < end) {
    int64_t i = off / cs;
    size_t lo = (size_t)(off - i * cs);
    size_t clen = chunk_len(f, atomic_load(&f->size), i);
    size_t take = (size_t)B2_MIN((int64_t)(clen - lo), end - off);
    b2_cache_entry *e;
    int whole = lo == 0 && take == clen; /* then not loaded: no content yet */
    rc = b2_file_wpin(f, i, whole, &e);
    if (rc < 0) break;
    rc = b2_cache_write_begin(c, e, f, b2_file_flush_chunk);
    int done = 0, changed = 0;
    if (rc == 0) {
      changed = whole || b2_cache_len(e) < lo + take;
      if (changed && b2_cache_len(e) < lo + take) rc = b2_cache_resize(c, e, clen);
      uint8_t *dst = b2_cache_wdata(e) + lo;
      if (rc == 0) {
        /* Bytes as they were do not make the chunk dirty: the write-back
         * of a mapping sends a page that straddles two chunks again when
         * the next one is written, and the chunk before would be
         * compressed once more for nothing. */
        changed = changed || memcmp(dst, src, take) != 0;
        if (changed) memcpy(dst, src, take);
        b2_cache_note_write(e, lo, take);
        done = clen == (size_t)cs &&
               b2_file_chunk_done(f, lo + take == clen, i * cs, b2_cache_written(e), clen);
      }
      b2_cache_write_end(c, e, rc == 0 && changed);
    }
    if (done)
      b2_file_flush_soon(f, e);
    else
      b2_cache_release(c, e);
    src += take;
    off += (int64_t)take;
  }
  b2_file_touched(f);
  if (grows) pthread_rwlock_unlock(&f->szlock);
  return rc < 0 ? rc : (ssize_t)n;
}

int b2_file_lresize(b2_file *f, int64_t size) {
  pthread_rwlock_wrlock(&f->szlock);
  int rc = set_size(f, size);
  pthread_rwlock_unlock(&f->szlock);
  return rc;
}

ssize_t b2_file_pwrite(b2_file *f, const void *buf, size_t n, int64_t off) {
  if (!f->writable) return b2_fail(B2_E_ROFS, "%s is open read-only", f->path ? f->path : "file");
  if (off < 0 || (int64_t)n < 0 || off > INT64_MAX - (int64_t)n) return b2_fail(B2_E_INVAL, "bad offset");
  if (n == 0) return 0;
  pthread_mutex_lock(&f->wmu);
  f->wseq = off == f->wend;
  if (!f->wseq) f->wrun = off;
  ssize_t rc = b2_file_arrayish(f) ? b2_file_awrite(f, buf, n, off) : b2_file_lwrite(f, buf, n, off);
  f->wend = off + (int64_t)n;
  pthread_mutex_unlock(&f->wmu);
  if (rc < 0) return b2_context((int)rc, "write");
  return rc;
}

int b2_file_truncate(b2_file *f, int64_t size) {
  if (!f->writable) return b2_fail(B2_E_ROFS, "%s is open read-only", f->path ? f->path : "file");
  if (size < 0) return b2_fail(B2_E_INVAL, "negative size");
  pthread_mutex_lock(&f->wmu);
  int rc = b2_file_arrayish(f) ? b2_file_aresize(f, size) : b2_file_lresize(f, size);
  pthread_mutex_unlock(&f->wmu);
  return rc;
}

int b2_file_store_all(b2_file *f) {
  atomic_store(&f->committing, 1);
  /* Compressions started by writes first; a flush that overlapped a size
   * change reports B2_E_BUSY and is simply run again (no size change can
   * start now: wmu is ours). */
  if (f->env->pool) b2_pool_wait(f->env->pool, &f->group);
  int rc;
  for (int tries = 0;; tries++) {
    rc = b2_cache_flush_file(f->env->cache, f->id, f->env->pool);
    if (rc != B2_E_BUSY || tries == 3) break;
  }
  if (rc == 0) rc = b2_file_spill_drain(f); /* and the chunks parked */
  atomic_store(&f->committing, 0);
  return rc;
}

/* Flush and commit (wmu held); with t, in the commit that gives the frame
 * that modification time (b2_frame_set_mtime), made even when nothing
 * was written.  Without, the frame's time is that of its last change,
 * not the commit's (an idle commit, a close or an fsync change no time a
 * stat shows). */
static int flush_locked(b2_file *f, const struct timespec *t) {
  /* An array whose bytes end inside a row would be committed padded:
   * left to the writer's next commit (commit_all keeps such bytes). */
  if (b2_file_aragged(f)) return 0;
  uint64_t gen = atomic_load(&f->gen);
  int changed = gen != atomic_load(&f->committed_gen);
  if (!t && !changed && !b2_frame_dirty(f->frame)) return 0;
  int rc = b2_file_store_all(f);
  if (rc == 0) {
    struct timespec at;
    int has_at = changed && b2_file_changed_at(f, &at);
    pthread_mutex_lock(&f->fmu);
    rc = t ? b2_frame_set_mtime(f->frame, t) : b2_frame_commit_at(f->frame, has_at ? &at : NULL);
    pthread_mutex_unlock(&f->fmu);
  }
  if (rc == 0) atomic_store(&f->committed_gen, gen);
  return rc;
}

/* Settle a new .npy file's held bytes, keep an array's bytes that end
 * inside a row (`sync`: made durable) or a short new one's when its last
 * writer is done (`last`) as a plain frame (b2_file_ashort), and commit,
 * with time t when given. */
static int commit_all(b2_file *f, int last, int sync, const struct timespec *t) {
  pthread_mutex_lock(&f->wmu);
  int rc = b2_file_asettle(f);
  if (rc == 0) rc = b2_file_ashort(f, last, sync);
  /* Left inside a row: its time waits for the commit that will come. */
  if (rc == 0 && t && b2_file_aragged(f))
    atomic_store(&f->changed_ns, (int64_t)t->tv_sec * 1000000000 + t->tv_nsec);
  if (rc == 0) rc = flush_locked(f, t); /* what is written and the time: one commit */
  int lost = atomic_load(&f->lost);
  if (rc == 0 && lost)
    rc = b2_fail(lost, "%s: bytes written before its .npy header was complete were not stored",
                 f->path);
  pthread_mutex_unlock(&f->wmu);
  return rc;
}

int b2_file_flush(b2_file *f) { return f->writable ? commit_all(f, 0, 0, NULL) : 0; }

int b2_file_sync(b2_file *f) { return f->writable ? commit_all(f, 0, 1, NULL) : 0; }

int b2_file_finish(b2_file *f) { return f->writable ? commit_all(f, 1, 1, NULL) : 0; }

int b2_file_changed_at(b2_file *f, struct timespec *t) {
  int64_t ns = f->writable ? atomic_load(&f->changed_ns) : 0;
  if (ns <= 0) return 0;
  t->tv_sec = (time_t)(ns / 1000000000);
  t->tv_nsec = (long)(ns % 1000000000);
  return 1;
}

int b2_file_set_mtime(b2_file *f, const struct timespec *t) {
  if (!f->writable) return b2_fail(B2_E_ROFS, "%s is open read-only", f->path ? f->path : "file");
  return commit_all(f, 0, 0, t);
}

int64_t b2_file_dead_bytes(b2_file *f, int64_t *stored) {
  if (stored) *stored = 0;
  if (!f->writable) return 0;
  pthread_mutex_lock(&f->fmu);
  int64_t n = b2_frame_dead_bytes(f->frame, stored);
  pthread_mutex_unlock(&f->fmu);
  return n;
}

uint64_t b2_file_committed(b2_file *f, int64_t *quiet_ms) {
  if (quiet_ms) *quiet_ms = f->writable ? b2_file_now_ms() - atomic_load(&f->last_write_ms) : 0;
  return f->writable ? atomic_load(&f->committed_gen) : 0;
}

int b2_file_compact(b2_file *f) {
  if (!f->writable) return b2_fail(B2_E_ROFS, "%s is open read-only", f->path ? f->path : "file");
  pthread_mutex_lock(&f->wmu);
  int rc = flush_locked(f, NULL);
  if (rc == 0 && !b2_file_aragged(f)) { /* not committed: later */
    pthread_mutex_lock(&f->fmu);
    rc = b2_frame_compact(f->frame);
    pthread_mutex_unlock(&f->fmu);
  }
  pthread_mutex_unlock(&f->wmu);
  return rc;
}

/* The creation parameters of an open frame. */
void b2_file_params_of(const b2_frame *fr, b2_frame_params *p) {
  b2_frame_info in;
  b2_frame_info_copy(fr, &in);
  b2_frame_params_default(p);
  p->layout = in.layout;
  p->chunksize = in.chunksize;
  p->cparams.codec = in.codec;
  p->cparams.codec_meta = in.codec_meta;
  p->cparams.clevel = in.clevel;
  p->cparams.typesize = in.typesize;
  p->cparams.blocksize = in.blocksize;
  if (in.splitmode) p->cparams.splitmode = in.splitmode;
  memcpy(p->cparams.filters, in.filters, sizeof in.filters);
  memcpy(p->cparams.filters_meta, in.filters_meta, sizeof in.filters_meta);
}

/* Remove an empty frame: a file, or a sparse directory's files, entry
 * base of directory pfd (closed). */
static int remove_frame(int pfd, const char *base, int layout) {
  int rc = 0;
  if (layout == B2_LAYOUT_SPARSE) {
    int dfd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
      rc = b2_from_errno(errno);
      if (dfd >= 0) close(dfd);
    }
    struct dirent *de;
    while (d && rc == 0 && (de = readdir(d)))
      if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && unlinkat(dirfd(d), de->d_name, 0) != 0)
        rc = b2_from_errno(errno);
    if (d) closedir(d);
  }
  if (rc == 0 && unlinkat(pfd, base, layout == B2_LAYOUT_SPARSE ? AT_REMOVEDIR : 0) != 0)
    rc = b2_from_errno(errno);
  b2_io_close(pfd);
  return rc;
}

int b2_file_recreate(b2_file *f, const b2_frame_params *p, int64_t nbytes) {
  int old_layout = b2_frame_get_info(f->frame)->layout;
  b2_frame_params q;
  b2_file_params_of(f->frame, &q);
  pthread_mutex_lock(&f->fmu);
  /* A frame opened at a directory is made again there, else at its path. */
  const char *hname = NULL, *base;
  int home = b2_frame_home(f->frame, &hname);
  char name[NAME_MAX + 1];
  snprintf(name, sizeof name, "%s", hname ? hname : "");
  /* The user's metalayers stay with the file, as attributes stay with a
   * file rewritten (set before its data: tar -x --xattrs). */
  b2_frame_user_meta *um = NULL;
  int rc = b2_frame_user_meta_take(f->frame, &um);
  /* A contiguous frame is made anew in one step: never missing or half
   * made for other processes (b2_frame_remake). */
  if (rc == 0) rc = b2_frame_remake(&f->frame, p, nbytes);
  if (rc == B2_E_UNSUPPORTED) { /* sparse: removed, then created */
    b2_frame_close(f->frame);
    f->frame = NULL;
    int pfd = home >= 0 ? fcntl(home, F_DUPFD_CLOEXEC, 0) : b2_io_open_parent(f->path, &base);
    if (home >= 0) base = name;
    rc = pfd < 0 ? (home >= 0 ? b2_from_errno(errno) : pfd) : remove_frame(pfd, base, old_layout);
    if (rc == 0) rc = home >= 0 ? b2_frame_create_at(home, name, p, &f->frame)
                                : b2_frame_create(f->path, p, &f->frame);
    if (rc == 0 && nbytes > 0) rc = b2_frame_resize(f->frame, nbytes);
  }
  if (rc == 0) rc = b2_frame_user_meta_put(f->frame, um);
  b2_frame_user_meta_free(um);
  if (rc == 0) {
    b2_file_spill_reset(f); /* parked chunks were the old frame's */
    b2_frame_set_verify(f->frame, f->env->opts.verify);
    f->cp = p->cparams;
    f->chunksize = p->chunksize;
  } else if (!f->frame) {
    /* Leave a usable frame behind with the old parameters if we can. */
    int rc2 = home >= 0 ? b2_frame_open_rw_at(home, name, &f->frame)
                        : b2_frame_open_rw(f->path, &f->frame);
    if (rc2 < 0) {
      q.nmeta = 0;
      if (home >= 0)
        b2_frame_create_at(home, name, &q, &f->frame);
      else
        b2_frame_create(f->path, &q, &f->frame);
    }
    b2_fail(rc, "%s: cannot recreate the frame", f->path);
  }
  if (f->frame) b2_b2nd_attach(f->frame);
  if (home >= 0) close(home);
  atomic_fetch_add(&f->epoch, 1);
  atomic_fetch_add(&f->recreations, 1);
  pthread_mutex_unlock(&f->fmu);
  return rc;
}

uint64_t b2_file_recreations(b2_file *f) { return f->writable ? atomic_load(&f->recreations) : 0; }

int b2_file_set_param(b2_file *f, const char *key, const char *value) {
  if (!f->writable) return b2_fail(B2_E_ROFS, "%s is open read-only", f->path ? f->path : "file");
  pthread_mutex_lock(&f->wmu);
  if (b2_file_arrayish(f)) {
    int rc = b2_file_aset_param(f, key, value);
    pthread_mutex_unlock(&f->wmu);
    return rc;
  }
  /* The value's form first: B2_E_BUSY says a good value came too late
   * (an array's shapes too: a copy of an array's .npy bytes is a frame of
   * bytes until renamed to its .npy name). */
  b2_frame_params p;
  b2_file_params_of(f->frame, &p);
  int shape = b2_file_is_shape_key(key);
  int32_t dims[B2_B2ND_MAXDIM];
  int rc = shape ? b2_file_parse_dims(value, dims) : b2_params_set(&p, key, value);
  if (rc >= 0 && (atomic_load(&f->size) != 0 || atomic_load(&f->gen) != 0))
    rc = b2_fail(B2_E_BUSY, "%s: parameters are fixed once data has been written", f->path);
  else if (rc >= 0 && shape)
    rc = b2_fail(B2_E_INVAL, "%s: %s is a parameter of .npy files", f->path, key);
  else if (rc >= 0)
    rc = b2_cparams_check(&p.cparams); /* a frame of bytes: no array's blocks */
  if (rc == 0) rc = b2_file_recreate(f, &p, 0); /* the empty frame anew */
  pthread_mutex_unlock(&f->wmu);
  return rc;
}

/* ---- open/close hooks and the idle flusher --------------------------------- */

int b2_file_setup_writer(b2_file *f) {
  if (!f->env || !f->env->cache) return b2_fail(B2_E_INVAL, "writing needs a cache");
  b2_frame_params p;
  b2_file_params_of(f->frame, &p);
  if (p.chunksize <= 0) return b2_fail(B2_E_UNSUPPORTED, "frames of variable-length chunks are read-only");
  f->cp = p.cparams;
  if (f->has_array) b2_b2nd_cparams(&f->array, &f->cp); /* item sizes above 255: 1 */
  f->chunksize = p.chunksize;
  pthread_mutex_init(&f->wmu, NULL);
  pthread_rwlock_init(&f->szlock, NULL);
  pthread_mutex_init(&f->fmu, NULL);
  atomic_init(&f->gen, 0);
  atomic_init(&f->committed_gen, 0);
  atomic_init(&f->epoch, 0);
  atomic_init(&f->last_write_ms, 0);
  atomic_init(&f->changed_ns, 0);
  atomic_init(&f->wlo, -1);
  atomic_init(&f->whi, -1);
  atomic_init(&f->committing, 0);
  f->writable = 1;
  b2_env *env = f->env;
  pthread_mutex_lock(&env->reg_mu);
  f->reg_prev = NULL;
  f->reg_next = env->writers;
  if (env->writers) env->writers->reg_prev = f;
  env->writers = f;
  pthread_mutex_unlock(&env->reg_mu);
  return 0;
}

void b2_file_teardown_writer(b2_file *f) {
  b2_env *env = f->env;
  pthread_mutex_lock(&env->reg_mu);
  if (f->reg_prev)
    f->reg_prev->reg_next = f->reg_next;
  else
    env->writers = f->reg_next;
  if (f->reg_next) f->reg_next->reg_prev = f->reg_prev;
  pthread_mutex_unlock(&env->reg_mu);
  b2_file_spill_close(f);
  pthread_mutex_destroy(&f->wmu);
  pthread_rwlock_destroy(&f->szlock);
  pthread_mutex_destroy(&f->fmu);
  f->writable = 0;
}

/* Every 100 ms: compress and commit files idle for idle_ms. */
static void *idler_main(void *arg) {
  b2_env *env = arg;
  pthread_mutex_lock(&env->reg_mu);
  while (!env->stop) {
    struct timespec ts = b2_deadline_ms(100);
    pthread_cond_timedwait(&env->reg_cv, &env->reg_mu, &ts);
    int64_t now = b2_file_now_ms();
    for (b2_file *f = env->writers; f && !env->stop; f = f->reg_next) {
      if (atomic_load(&f->gen) == atomic_load(&f->committed_gen)) continue;
      if (now - atomic_load(&f->last_write_ms) < (int64_t)env->opts.idle_ms) continue;
      /* An error stays for the owner's next flush; a new .npy file still
       * waiting for its header is left alone (its writer may be slow). */
      pthread_mutex_lock(&f->wmu);
      if (!f->pending) flush_locked(f, NULL);
      pthread_mutex_unlock(&f->wmu);
    }
  }
  pthread_mutex_unlock(&env->reg_mu);
  return NULL;
}

int b2_env_start_idler(b2_env *env) {
  int err = pthread_create(&env->idler, NULL, idler_main, env);
  if (err) return b2_fail(B2_E_NOMEM, "cannot start the idle flusher: %s", strerror(err));
  env->have_idler = 1;
  return 0;
}

void b2_env_stop_idler(b2_env *env) {
  if (!env->have_idler) return;
  pthread_mutex_lock(&env->reg_mu);
  env->stop = 1;
  pthread_cond_broadcast(&env->reg_cv);
  pthread_mutex_unlock(&env->reg_mu);
  pthread_join(env->idler, NULL);
  env->have_idler = 0;
}
