/*
 * read.c - serve the chunks of an open frame: locate a chunk through the
 * index, check its header against the bytes left in its file and against
 * the frame's geometry, read it, and decode it (whole or a byte range).
 * Special index entries become equivalent special chunks, so every caller
 * decodes the same way.  Callable from many threads at once.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "b2_chunk.h"
#include "b2_error.h"
#include "common/bigbuf.h"
#include "common/util.h"
#include "frame/frame_impl.h"

/* A thread's scratch buffer for compressed chunks is released when it
 * grows past this after use: the daemon has a dozen threads that read
 * chunks (FUSE workers, pool workers), and each kept the largest stored
 * chunk it had read (3 MiB for 8 MiB cubes of float32: 36 MiB over the
 * cache).  Scratch buffers are the engine's large buffers (bigbuf.h), so
 * a larger one released goes back to the system or to the few kept for
 * the next one, never into holes of the heap the process keeps. */
#define SCRATCH_KEEP ((size_t)1 << 20)

int b2_frame_entry_kind(int64_t entry) {
  if (entry >= 0) return B2_SPECIAL_NONE;
  int kind = (int)(((uint64_t)entry >> 56) & 0x07);
  if (kind == B2_SPECIAL_ZERO || kind == B2_SPECIAL_NAN ||
      kind == B2_SPECIAL_UNINIT)
    return kind;
  return -1;
}

static int reserve(b2_chunkbuf *b, size_t n) {
  if (b->cap >= n) return 0;
  if (b->alloc) {
    uint8_t *q = b->alloc(n);
    if (!q) return b2_fail(B2_E_NOMEM, "out of memory for a %zu-byte chunk", n);
    if (b->p) b->release(b->p);
    b->p = q;
    b->cap = n;
    return 0;
  }
  uint8_t *p = realloc(b->p, n);
  if (!p) return b2_fail(B2_E_NOMEM, "out of memory for a %zu-byte chunk", n);
  b->p = p;
  b->cap = n;
  return 0;
}

/* Where chunk i is stored.  For sparse frames the chunk file is opened
 * and must be closed by the caller (owned = 1). */
typedef struct chunk_loc {
  const b2_frame *f; /* whose file fd may be (its image), or NULL */
  int fd;
  int owned;
  int64_t pos;
  int64_t limit;
  struct stat st;    /* owned (a sparse frame's chunk file): its fstat */
} chunk_loc;

static int locate(const b2_frame *f, int64_t entry, chunk_loc *l) {
  l->f = f;
  if (f->info.layout == B2_LAYOUT_SPARSE) {
    l->owned = 1;
    l->pos = 0;
    int rc = b2_sframe_open_chunk(f, entry, &l->fd, &l->st);
    l->limit = rc < 0 ? 0 : (int64_t)l->st.st_size;
    return rc;
  }
  l->fd = f->fd;
  l->owned = 0;
  l->pos = f->base + f->data_pos + entry; /* entry was checked at open */
  l->limit = f->base + f->data_end;
  return 0;
}

static void release(chunk_loc *l) {
  if (l->owned) close(l->fd);
}

/* Read the first header bytes of the chunk at l and check its sizes. */
static int peek(const chunk_loc *l, uint8_t *hdr, size_t *hl, int32_t *nbytes,
                int32_t *cbytes) {
  int64_t left = l->limit - l->pos;
  if (left < B2_CHUNK_HEADER_MIN)
    return b2_fail(B2_E_TRUNCATED, "only %lld bytes at offset %lld, less "
                   "than a chunk header", (long long)left, (long long)l->pos);
  *hl = left < B2_CHUNK_HEADER_EXT ? (size_t)left : B2_CHUNK_HEADER_EXT;
  int rc = b2_frame_fpread(l->f, l->fd, hdr, *hl, l->pos, 0);
  if (rc < 0) return rc;
  int32_t bs;
  rc = b2_chunk_sizes(hdr, *hl, nbytes, cbytes, &bs);
  if (rc < 0) return b2_context(rc, "header at offset %lld", (long long)l->pos);
  if (*cbytes < B2_CHUNK_HEADER_MIN || *cbytes > left)
    return b2_fail(B2_E_FORMAT, "cbytes %d at offset %lld overruns the %lld "
                   "bytes available", *cbytes, (long long)l->pos,
                   (long long)left);
  if (*nbytes < 0)
    return b2_fail(B2_E_FORMAT, "negative nbytes %d", *nbytes);
  return 0;
}

/* The chunk at l's first bytes (its header, *have of them) into b, sized
 * for the whole chunk (*cbytes), after peek's checks. */
static int read_head(const chunk_loc *l, b2_chunkbuf *b, size_t *have, int32_t *nbytes,
                     int32_t *cbytes) {
  uint8_t hdr[B2_CHUNK_HEADER_EXT];
  size_t hl;
  int rc = peek(l, hdr, &hl, nbytes, cbytes);
  if (rc < 0) return rc;
  rc = reserve(b, (size_t)*cbytes);
  if (rc < 0) return rc;
  *have = B2_MIN(hl, (size_t)*cbytes); /* a chunk may be < 32 bytes */
  memcpy(b->p, hdr, *have);
  return 0;
}

int b2_frame_read_stored(const b2_frame *f, int fd, int64_t pos, int64_t limit,
                         b2_chunkbuf *b, size_t *len, int32_t *nbytes, int last,
                         struct b2_pool *pool) {
  chunk_loc l = {.f = f, .fd = fd, .owned = 0, .pos = pos, .limit = limit};
  size_t have;
  int32_t cb;
  int rc = read_head(&l, b, &have, nbytes, &cb);
  if (rc < 0) return rc;
  if ((size_t)cb > have) {
    rc = b2_frame_fpread_par(f, fd, b->p + have, (size_t)cb - have, pos + (int64_t)have, last,
                             pool);
    if (rc < 0) return rc;
  }
  *len = (size_t)cb;
  return 0;
}

/* rc of a failed read of a stored chunk, or B2_E_STALE when f is a sparse
 * frame whose index another program replaced meanwhile (without the
 * reference library's locking, or before it): the chunk file was removed
 * or reused by that commit, and the caller reads the new state instead. */
static int stale_or(const b2_frame *f, int rc) {
  if (rc >= 0 || rc == B2_E_STALE || rc == B2_E_NOMEM || !b2_sframe_index_moved(f)) return rc;
  return b2_fail(B2_E_STALE, "sparse frame: index replaced by another program while read");
}

static int check_index(const b2_frame *f, int64_t i) {
  if (!f) return b2_fail(B2_E_INVAL, "no frame");
  if (i < 0 || i >= f->info.nchunks)
    return b2_fail(B2_E_RANGE, "chunk %lld is out of range (%lld chunks)",
                   (long long)i, (long long)f->info.nchunks);
  return 0;
}

static int synth_typesize(const b2_frame *f) {
  int32_t ts = f->info.typesize;
  return ts >= 1 && ts <= 255 ? ts : 1;
}

/* Callers hold the read lock of a writable frame. */
int b2_frame_load_chunk(const b2_frame *f, int64_t i, b2_chunkbuf *b,
                        size_t *len, struct b2_pool *pool) {
  int rc = check_index(f, i);
  if (rc < 0) return rc;
  int64_t entry = b2_frame_entry(f, i);
  int kind = b2_frame_entry_kind(entry);
  int32_t expect = b2_frame_nbytes_of(f, i);
  if (kind != B2_SPECIAL_NONE) {
    /* Entries were checked at open, so kind is a known one here. */
    rc = reserve(b, 2 * B2_CHUNK_HEADER_EXT);
    if (rc < 0) return rc;
    rc = b2_chunk_make_special(kind, expect, synth_typesize(f), NULL, b->p,
                               b->cap);
    if (rc < 0) return b2_context(rc, "chunk %lld (special)", (long long)i);
    *len = (size_t)rc;
    return 0;
  }
  chunk_loc l;
  int locked = b2_frame_lk_rd_begin(f, 1);
  if (locked < 0) return b2_context(locked, "chunk %lld", (long long)i);
  rc = locate(f, entry, &l);
  int32_t nb;
  /* A sparse frame's chunk file, as it was around the read (its open's
   * fstat, and one after): another program may have written it since the
   * checksums (the index unchanged). */
  struct stat after;
  int file = 0;
  if (rc == 0) {
    rc = b2_frame_read_stored(f, l.fd, l.pos, l.limit, b, len, &nb,
                              f->info.nchunks == 1, pool);
    file = l.owned && b2_frame_csum_active(f, i) && fstat(l.fd, &after) == 0;
    release(&l);
  }
  b2_frame_lk_rd_end(f, locked);
  if (rc < 0) return b2_context(stale_or(f, rc), "chunk %lld", (long long)i);
  rc = b2_frame_csum_check(f, i, b->p, *len, file ? &l.st : NULL, file ? &after : NULL);
  if (rc < 0) return stale_or(f, rc);
  if (nb != expect)
    return stale_or(f, b2_fail(B2_E_FORMAT, "chunk %lld: holds %d bytes where the frame "
                               "expects %d", (long long)i, nb, expect));
  return 0;
}

/* ---- public read functions --------------------------------------------- */

int b2_frame_chunk_special(const b2_frame *f, int64_t i) {
  if (!f) return check_index(f, i);
  b2_frame_rdlock(f);
  int rc = check_index(f, i);
  if (rc == 0) rc = b2_frame_entry_kind(b2_frame_entry(f, i));
  b2_frame_rdunlock(f);
  return rc;
}

static int64_t cbytes_of(const b2_frame *f, int64_t i) {
  int rc = check_index(f, i);
  if (rc < 0) return rc;
  int64_t entry = b2_frame_entry(f, i);
  if (b2_frame_entry_kind(entry) != B2_SPECIAL_NONE) return 0;
  chunk_loc l;
  int locked = b2_frame_lk_rd_begin(f, 1);
  if (locked < 0) return b2_context(locked, "chunk %lld", (long long)i);
  rc = locate(f, entry, &l);
  uint8_t hdr[B2_CHUNK_HEADER_EXT];
  size_t hl;
  int32_t nb, cb;
  if (rc == 0) {
    rc = peek(&l, hdr, &hl, &nb, &cb);
    release(&l);
  }
  b2_frame_lk_rd_end(f, locked);
  if (rc < 0) return b2_context(stale_or(f, rc), "chunk %lld", (long long)i);
  return cb;
}

int64_t b2_frame_chunk_cbytes(const b2_frame *f, int64_t i) {
  if (!f) return check_index(f, i);
  b2_frame_rdlock(f);
  int64_t r = cbytes_of(f, i);
  b2_frame_rdunlock(f);
  return r;
}

int b2_frame_read_chunk(b2_frame *f, int64_t i, uint8_t **chunk,
                        size_t *len) {
  return b2_frame_read_chunk_into(f, i, NULL, NULL, chunk, len);
}

int b2_frame_read_chunk_into(b2_frame *f, int64_t i, uint8_t *(*alloc)(size_t n),
                             void (*give_back)(uint8_t *p), uint8_t **chunk, size_t *len) {
  if (!chunk || !len) return b2_fail(B2_E_INVAL, "read chunk: no output");
  if (alloc && !give_back) return b2_fail(B2_E_INVAL, "read chunk: an allocator without release");
  *chunk = NULL;
  *len = 0;
  if (!f) return check_index(f, i);
  b2_chunkbuf b = {.alloc = alloc, .release = alloc ? give_back : NULL};
  size_t n;
  b2_frame_rdlock(f);
  int rc = b2_frame_load_chunk(f, i, &b, &n, NULL);
  b2_frame_rdunlock(f);
  if (rc == 0) {
    b2_chunk_info ci;
    rc = b2_chunk_parse(b.p, n, &ci);
    if (rc < 0) rc = b2_context(rc, "chunk %lld", (long long)i);
  }
  if (rc < 0) {
    if (b.p && alloc) give_back(b.p);
    else free(b.p);
    return rc;
  }
  *chunk = b.p;
  *len = n;
  return 0;
}

/* Per-thread scratch buffer for compressed chunks, freed at thread exit. */
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static int scratch_key_ok;

static void scratch_free(void *p) {
  b2_chunkbuf *b = p;
  b2_bigbuf_free(b->p);
  free(b);
}

static void scratch_init(void) {
  scratch_key_ok = pthread_key_create(&scratch_key, scratch_free) == 0;
}

/* The calling thread's buffer; NULL only when out of memory. */
static b2_chunkbuf *scratch(void) {
  pthread_once(&scratch_once, scratch_init);
  if (!scratch_key_ok) return NULL;
  b2_chunkbuf *b = pthread_getspecific(scratch_key);
  if (b) return b;
  b = calloc(1, sizeof *b);
  if (b) {
    b->alloc = b2_bigbuf_alloc;
    b->release = b2_bigbuf_free;
  }
  if (b && pthread_setspecific(scratch_key, b) != 0) {
    free(b);
    b = NULL;
  }
  return b;
}

static void scratch_trim(b2_chunkbuf *b) {
  if (b->cap > SCRATCH_KEEP) {
    b2_bigbuf_free(b->p);
    b->p = NULL;
    b->cap = 0;
  }
}

int b2_frame_decode_chunk(b2_frame *f, int64_t i, void *dst, size_t dstcap) {
  return b2_frame_decode_chunk_par(f, i, dst, dstcap, NULL);
}

int b2_frame_decode_chunk_par(b2_frame *f, int64_t i, void *dst,
                              size_t dstcap, struct b2_pool *pool) {
  if (!f) return check_index(f, i);
  b2_chunkbuf *b = scratch();
  if (!b) return b2_fail(B2_E_NOMEM, "no scratch buffer");
  /* Look up and read under the lock; decode after it. */
  b2_frame_rdlock(f);
  int rc = check_index(f, i);
  int32_t expect = rc < 0 ? 0 : b2_frame_nbytes_of(f, i);
  if (rc == 0 && (!dst || dstcap < (size_t)expect))
    rc = b2_fail(B2_E_INVAL, "chunk %lld: %zu-byte buffer for %d bytes",
                 (long long)i, dstcap, expect);
  size_t n = 0;
  int woke = 0; /* a worker wakes while we read, and may read part of it */
  if (rc == 0 && pool && b2_frame_entry_kind(b2_frame_entry(f, i)) == B2_SPECIAL_NONE)
    woke = b2_chunk_par_prepare(pool, expect);
  if (rc == 0) rc = b2_frame_load_chunk(f, i, b, &n, woke ? pool : NULL);
  b2_frame_rdunlock(f);
  if (rc == 0) {
    rc = b2_chunk_decode_par(b->p, n, dst, dstcap, pool, b2_frame_geom(f));
    if (rc < 0) rc = b2_context(rc, "chunk %lld", (long long)i);
    else if (rc != expect)
      rc = b2_fail(B2_E_FORMAT, "chunk %lld: decoded %d bytes, expected %d",
                   (long long)i, rc, expect);
  }
  scratch_trim(b);
  return rc;
}

static int range_ok(const b2_frame *f, int64_t i, size_t offset, size_t n,
                    const void *dst) {
  int rc = check_index(f, i);
  if (rc < 0) return rc;
  size_t have = (size_t)b2_frame_nbytes_of(f, i);
  if (offset > have || n > have - offset)
    return b2_fail(B2_E_RANGE, "chunk %lld: bytes [%zu, +%zu) are outside "
                   "its %zu bytes", (long long)i, offset, n, have);
  if (n == 0) return 0;
  if (!dst) return b2_fail(B2_E_INVAL, "chunk %lld: no output buffer",
                           (long long)i);
  if (n > (size_t)INT32_MAX)
    return b2_fail(B2_E_RANGE, "chunk %lld: range of %zu bytes", (long long)i,
                   n);
  return 0;
}

int b2_frame_decode_range(b2_frame *f, int64_t i, size_t offset, size_t n,
                          void *dst) {
  if (!f) return check_index(f, i);
  b2_chunkbuf *b = scratch();
  if (!b) return b2_fail(B2_E_NOMEM, "no scratch buffer");
  size_t len = 0;
  b2_frame_rdlock(f);
  int rc = range_ok(f, i, offset, n, dst);
  if (rc == 0 && n > 0) rc = b2_frame_load_chunk(f, i, b, &len, NULL);
  b2_frame_rdunlock(f);
  if (rc == 0 && n > 0) {
    rc = b2_chunk_decode_range(b->p, len, offset, n, dst, b2_frame_geom(f));
    if (rc < 0) rc = b2_context(rc, "chunk %lld", (long long)i);
    else if ((size_t)rc != n)
      rc = b2_fail(B2_E_FORMAT, "chunk %lld: range decode gave %d bytes, "
                   "expected %zu", (long long)i, rc, n);
  }
  scratch_trim(b);
  return rc;
}

/* ---- ranges read block by block (b2_frame_read_range) ------------------ */

/* Read the head of chunk i (stored at entry) and the spans of the blocks
 * that [offset, offset + n) needs into b; *whole = 1 (nothing else done)
 * when the chunk is to be read whole instead.  Callers hold the read lock
 * of a writable frame. */
static int read_blocks(const b2_frame *f, int64_t i, int64_t entry, size_t offset, size_t n,
                       b2_chunkbuf *b, size_t *len, int *whole) {
  chunk_loc l;
  int locked = b2_frame_lk_rd_begin(f, 1);
  if (locked < 0) return b2_context(locked, "chunk %lld", (long long)i);
  int rc = locate(f, entry, &l);
  if (rc < 0) {
    b2_frame_lk_rd_end(f, locked);
    return b2_context(stale_or(f, rc), "chunk %lld", (long long)i);
  }
  size_t have = 0;
  int32_t nb, cb = 0;
  rc = read_head(&l, b, &have, &nb, &cb);
  if (rc == 0 && nb != b2_frame_nbytes_of(f, i))
    rc = b2_fail(B2_E_FORMAT, "holds %d bytes where the frame expects %d", nb,
                 b2_frame_nbytes_of(f, i));
  for (int round = 0; rc == 0; round++) {
    size_t head;
    b2_chunk_span sp[B2_CHUNK_SPANS];
    int ns;
    rc = b2_chunk_range_plan(b->p, have, offset, n, &head, sp, &ns);
    if (rc < 0) break;
    if (ns < 0 || (ns == 0 && (round > 0 || head <= have || head > (size_t)cb))) break;
    if (ns == 0) { /* the block starts */
      rc = b2_frame_fpread(f, l.fd, b->p + have, head - have, l.pos + (int64_t)have, 0);
      have = head;
      continue;
    }
    for (int k = 0; k < ns && rc == 0; k++)
      rc = b2_frame_fpread(f, l.fd, b->p + sp[k].lo, (size_t)(sp[k].hi - sp[k].lo),
                           l.pos + sp[k].lo, 0);
    if (rc == 0) {
      *len = (size_t)cb;
      *whole = 0;
    }
    break;
  }
  release(&l);
  b2_frame_lk_rd_end(f, locked);
  return rc < 0 ? b2_context(stale_or(f, rc), "chunk %lld", (long long)i) : 0;
}

int b2_frame_chunk_has_csum(const b2_frame *f, int64_t i) {
  if (!f) return 0;
  b2_frame_rdlock(f);
  int on = check_index(f, i) == 0 && b2_frame_csum_active(f, i);
  b2_frame_rdunlock(f);
  return on;
}

int b2_frame_read_range(b2_frame *f, int64_t i, size_t offset, size_t n, void *dst) {
  if (!f) return check_index(f, i);
  b2_chunkbuf *b = scratch();
  if (!b) return b2_fail(B2_E_NOMEM, "no scratch buffer");
  size_t len = 0;
  int whole = 1;
  b2_frame_rdlock(f);
  int rc = range_ok(f, i, offset, n, dst);
  if (rc == 0 && n > 0) {
    int64_t entry = b2_frame_entry(f, i);
    /* A checksum covers the whole chunk: such chunks are read whole. */
    if (b2_frame_entry_kind(entry) == B2_SPECIAL_NONE && !b2_frame_csum_active(f, i))
      rc = read_blocks(f, i, entry, offset, n, b, &len, &whole);
  }
  b2_frame_rdunlock(f);
  if (rc == 0 && !whole) {
    rc = b2_chunk_decode_range_spans(b->p, len, offset, n, dst, b2_frame_geom(f));
    if (rc == B2_E_FORMAT) {
      whole = 1; /* blocks not one after another: the whole chunk says */
      rc = 0;
    } else if (rc < 0) {
      rc = b2_context(rc, "chunk %lld", (long long)i);
    } else if ((size_t)rc != n) {
      rc = b2_fail(B2_E_FORMAT, "chunk %lld: range decode gave %d bytes, expected %zu",
                   (long long)i, rc, n);
    }
  }
  scratch_trim(b);
  if (rc >= 0 && whole && n > 0) return b2_frame_decode_range(f, i, offset, n, dst);
  return rc < 0 ? rc : (int)n;
}

