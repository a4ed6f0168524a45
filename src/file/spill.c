/*
 * spill.c - chunks of an array parked uncompressed while its writer is
 * still inside them.
 *
 * A writer going through an array in C order whose chunks split a
 * trailing axis (a volume in cubes, a matrix in tiles: numpy.save, or the
 * write-back of a mapping) is inside every chunk of a row of chunks at
 * once, and completes none until the row's last item.  When the row does
 * not fit under dirty_max or in the cache, the chunks pushed out used to
 * be compressed into the frame, decoded again at the writer's next rows,
 * and compressed again: a 512 MiB volume in 128^3 cubes rewritten through
 * a mapping took 543 s and grew its frame to 21 GB until the compaction
 * at close.
 *
 * So the flush callback (write.c) first offers a chunk here: one whose
 * items (in C order) the writer has reached and not passed (it is inside
 * the write under way, or the last write ended inside it: it will come
 * back) is written as it is, decoded, into an unnamed file beside the
 * frame (O_TMPFILE; at chunk * chunk_nbytes, a sparse file), and its bit
 * set.  From then on the chunk is not loaded into the cache again until
 * the writer passes its end: the writer's runs go straight into the
 * unnamed file (b2_file_spill_write), reads of the chunk come from there
 * (b2_file_spill_read; b2_file_load_chunk refuses a parked chunk with
 * B2_E_STALE, and the reader looks again), and a write that completes
 * the chunk loads it (b2_file_spill_load) as a dirty entry that is
 * compressed at once, as a chunk completed in the cache is.  So each
 * chunk is decoded and compressed once however many rows go by.  A
 * parked chunk may still have an entry in the cache, the one just
 * parked, or the one loaded to be compressed: the cache's is then the
 * newer, and is looked at first.  A commit
 * (flush, the idle flusher, close) compresses every parked chunk into the
 * frame first (b2_file_spill_drain), as do size changes.  What is parked
 * was never committed, like a dirty chunk in memory: a crash loses it as
 * it would lose that.  Where no unnamed file can be made, or writing it
 * fails (no space), chunks are compressed into the frame as before.
 *
 * Everything here runs with f->fmu held, except the reads and
 * compression of b2_file_spill_drain.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "b2_error.h"
#include "common/fileio.h"
#include "common/util.h"
#include "file/file_impl.h"

static int has_bit(const b2_file *f, int64_t i) {
  return i >= 0 && i < f->spill_cap && (f->spill_bits[i / 64] >> (i % 64) & 1);
}

static void clear_bit(b2_file *f, int64_t i) {
  if (!has_bit(f, i)) return;
  f->spill_bits[i / 64] &= ~((uint64_t)1 << (i % 64));
  f->spill_ver++;
}

static int set_bit(b2_file *f, int64_t i) {
  if (i >= f->spill_cap) {
    int64_t cap = B2_MAX(f->spill_cap * 2, (i / 64 + 1) * 64);
    uint64_t *b = realloc(f->spill_bits, (size_t)(cap / 64) * sizeof *b);
    if (!b) return -1;
    memset(b + f->spill_cap / 64, 0, (size_t)((cap - f->spill_cap) / 64) * sizeof *b);
    f->spill_bits = b;
    f->spill_cap = cap;
  }
  f->spill_bits[i / 64] |= (uint64_t)1 << (i % 64);
  f->spill_ver++;
  return 0;
}

int b2_file_tmpfile(b2_file *f) {
  const char *name = NULL, *base;
  int dfd = b2_frame_home(f->frame, &name);
  if (dfd < 0 && f->path) dfd = b2_io_open_parent(f->path, &base);
  int fd = dfd >= 0 ? b2_io_openat(dfd, ".", O_TMPFILE | O_RDWR, 0600) : -1;
  if (dfd >= 0) close(dfd);
  return fd < 0 ? -1 : fd;
}

/* The unnamed file, made at the first chunk parked: -1 when none can be. */
static int spill_fd(b2_file *f) {
  if (f->spill_fd == -1) {
    f->spill_fd = b2_file_tmpfile(f);
    if (f->spill_fd < 0) f->spill_fd = -2; /* not again */
  }
  return f->spill_fd;
}

int b2_file_spill_put(b2_file *f, int64_t i, const uint8_t *data, size_t len, uint64_t epoch) {
  if (!f->has_array || atomic_load(&f->committing)) return 0;
  pthread_mutex_lock(&f->fmu);
  int64_t lo, hi, wlo = atomic_load(&f->wlo), whi = atomic_load(&f->whi);
  int rc = 0;
  /* The writer has been in the chunk (or is in it now) and not past it. */
  if (epoch == atomic_load(&f->epoch) && len == (size_t)f->array.chunk_nbytes &&
      i < f->array.nchunks && b2_b2nd_chunk_span(&f->array, i, &lo, &hi, NULL) == 0 && lo < whi &&
      wlo < hi && spill_fd(f) >= 0) {
    int64_t at = i * f->array.chunk_nbytes;
    rc = b2_io_pwrite(f->spill_fd, data, len, at) == 0 && set_bit(f, i) == 0;
  }
  pthread_mutex_unlock(&f->fmu);
  return rc; /* a failed write: compressed into the frame instead */
}

void b2_file_spill_forget(b2_file *f, int64_t i) { clear_bit(f, i); }

void b2_file_spill_cut(b2_file *f, int64_t nchunks) {
  for (int64_t i = B2_MAX(nchunks, 0); i < f->spill_cap; i++) clear_bit(f, i);
}

int b2_file_spill_write(b2_file *f, int64_t i, size_t off, const void *src, size_t len) {
  pthread_mutex_lock(&f->fmu);
  int rc = 0;
  if (has_bit(f, i)) {
    f->spill_ver++;
    rc = b2_io_pwrite(f->spill_fd, src, len, i * f->array.chunk_nbytes + (int64_t)off);
    rc = rc < 0 ? b2_context(rc, "%s: chunk %lld: its parked bytes", f->path, (long long)i) : 1;
  }
  pthread_mutex_unlock(&f->fmu);
  return rc;
}

int b2_file_spill_read(b2_file *f, int64_t i, size_t off, size_t len, void *dst) {
  if (!f->writable) return 0;
  pthread_mutex_lock(&f->fmu);
  int rc = 0;
  if (has_bit(f, i)) {
    rc = b2_io_pread(f->spill_fd, dst, len, i * f->array.chunk_nbytes + (int64_t)off);
    rc = rc < 0 ? b2_context(rc, "%s: chunk %lld: its parked bytes", f->path, (long long)i) : 1;
  }
  pthread_mutex_unlock(&f->fmu);
  return rc;
}

int b2_file_spill_load(b2_file *f, int64_t i, uint8_t **data, size_t *len) {
  if (!f->writable) return 0;
  pthread_mutex_lock(&f->fmu);
  int rc = 0;
  if (has_bit(f, i)) {
    size_t n = (size_t)f->array.chunk_nbytes;
    uint8_t *buf = b2_cache_buf_alloc(n ? n : 1);
    if (!buf) {
      rc = b2_fail(B2_E_NOMEM, "no memory for chunk %lld", (long long)i);
    } else if (b2_io_pread(f->spill_fd, buf, n, i * (int64_t)n) < 0) {
      b2_cache_buf_free(buf);
      rc = b2_fail(B2_E_IO, "%s: chunk %lld: reading it back from its parked bytes", f->path,
                   (long long)i);
    } else {
      *data = buf;
      *len = n;
      rc = 1;
    }
  }
  pthread_mutex_unlock(&f->fmu);
  return rc;
}

static int load_parked(void *arg, uint64_t file, int64_t chunk, uint8_t **data, size_t *len) {
  (void)file;
  int rc = b2_file_spill_load(arg, chunk, data, len);
  return rc > 0 ? 0 : rc < 0 ? rc : b2_fail(B2_E_STALE, "chunk %lld is not parked", (long long)chunk);
}

int b2_file_spill_unpark(b2_file *f, int64_t i, b2_cache_entry **out) {
  if (!b2_file_spill_has(f, i)) return 0;
  b2_cache *c = f->env->cache;
  b2_cache_entry *e;
  int rc = b2_file_cache_get(f, i, load_parked, &e);
  if (rc < 0) return rc;
  /* dirty: compressed into the frame by the caller's flush, which then
   * forgets the parked bytes */
  rc = b2_cache_write_begin(c, e, f, b2_file_flush_chunk);
  if (rc == 0) b2_cache_write_end(c, e, 1);
  if (rc < 0) {
    b2_cache_release(c, e);
    return rc;
  }
  *out = e;
  return 1;
}

int b2_file_spill_has(b2_file *f, int64_t i) {
  if (!f->writable) return 0;
  pthread_mutex_lock(&f->fmu);
  int has = has_bit(f, i);
  pthread_mutex_unlock(&f->fmu);
  return has;
}

/* Compress parked chunk i into the frame, unless it changed meanwhile
 * (a flush of its cache entry stored newer bytes, or parked them): 1
 * stored or no longer parked, 0 to try again, < 0 on error. */
static int drain_one(b2_file *f, int64_t i) {
  pthread_mutex_lock(&f->fmu);
  uint64_t ver = f->spill_ver, epoch = atomic_load(&f->epoch);
  int parked = has_bit(f, i);
  size_t n, cn = (size_t)f->array.chunk_nbytes;
  pthread_mutex_unlock(&f->fmu);
  if (!parked) return 1;
  uint8_t *raw, *buf;
  /* The chunk read back and its compressed form count in the cache. */
  b2_cache *c = f->env->cache;
  b2_cache_charge(c, cn);
  int rc = b2_file_spill_load(f, i, &raw, &n); /* n is cn */
  if (rc <= 0) {
    b2_cache_uncharge(c, cn);
    return rc < 0 ? rc : 1;
  }
  rc = b2_file_encode(f, i, raw, n, &buf);
  b2_cache_buf_free(raw);
  b2_cache_uncharge(c, cn);
  if (rc >= 0) {
    size_t clen = (size_t)rc;
    pthread_mutex_lock(&f->fmu);
    if (!has_bit(f, i)) {
      rc = 1;
    } else if (ver != f->spill_ver || epoch != atomic_load(&f->epoch)) {
      rc = 0;
    } else if ((rc = b2_frame_put_chunk(f->frame, i, buf, clen)) == 0) {
      clear_bit(f, i);
      rc = 1;
    }
    pthread_mutex_unlock(&f->fmu);
  }
  b2_file_encoded_free(f, buf, n);
  return rc < 0 ? b2_context(rc, "%s: chunk %lld", f->path, (long long)i) : rc;
}

int b2_file_spill_drain(b2_file *f) {
  for (int64_t i = 0;; i++) {
    pthread_mutex_lock(&f->fmu);
    while (i < f->spill_cap && !has_bit(f, i)) i++;
    int more = i < f->spill_cap;
    pthread_mutex_unlock(&f->fmu);
    if (!more) return 0;
    int rc;
    while ((rc = drain_one(f, i)) == 0) {
    }
    if (rc < 0) return rc;
  }
}

void b2_file_spill_reset(b2_file *f) {
  free(f->spill_bits);
  f->spill_bits = NULL;
  f->spill_cap = 0;
  if (f->spill_fd >= 0 && ftruncate(f->spill_fd, 0) != 0) {
    close(f->spill_fd);
    f->spill_fd = -1;
  }
}

void b2_file_spill_close(b2_file *f) {
  b2_file_spill_reset(f);
  if (f->spill_fd >= 0) close(f->spill_fd);
  f->spill_fd = -1;
}
