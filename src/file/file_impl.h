/* file_impl.h - internals of the file-handle layer (src/file/). */
#ifndef B2_FILE_IMPL_H
#define B2_FILE_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>

#include "b2_cache.h"
#include "b2_file.h"
#include "common/pool.h"

/* Frames kept open after their last close, for the next open of the same
 * unchanged file (park.c). */
#define B2_PARK_MAX 64

/* Most bytes a new .npy file holds before its header must be complete
 * (awrite.c), and so the longest .npy header read (b2_file_npy_is_array). */
#define PEND_MAX ((size_t)B2_B2ND_MAXDTYPE + ((size_t)1 << 20))
typedef struct b2_parked {
  b2_frame *frame;
  struct stat st;   /* of the frame file when it was opened */
  int64_t since;    /* parked at (monotonic seconds) */
  uint64_t seq;     /* order of parking */
} b2_parked;

struct b2_env {
  b2_env_opts opts;
  b2_cache *cache;  /* NULL when cache_size is 0 */
  b2_pool *pool;    /* read-ahead and parallel compression; may be NULL */
  atomic_uint_fast64_t next_id; /* file ids when there is no cache */

  /* Writable files, for the idle flusher thread. */
  pthread_mutex_t reg_mu;
  pthread_cond_t reg_cv;
  b2_file *writers;
  int stop;
  int have_idler;
  pthread_t idler;

  pthread_mutex_t park_mu;
  b2_parked park[B2_PARK_MAX];
  int npark, park_max;
  uint64_t park_seq;
};

/* Reads smaller than this, of chunks not in the cache and not part of a
 * sequential stream, decode only the blocks they cover, unless the chunk
 * is at most B2_FILE_WHOLE_RATIO times the read: then the whole chunk is
 * decoded into the cache (the first read of a small file, which the next
 * one continues). */
#define B2_FILE_PARTIAL_MAX (256u << 10)
#define B2_FILE_WHOLE_RATIO 4

/* A reader of a handle as read.c tracks it: up to B2_FILE_STREAMS readers
 * of one handle (processes reading the same file) are told apart by where
 * their reads start. */
#define B2_FILE_STREAMS 4
typedef struct b2_stream {
  _Atomic int64_t end;   /* where its last read ended (-1: unused) */
  _Atomic int state;     /* 0 new, 1 near its last read, 2 sequential */
  _Atomic int64_t ahead; /* read-ahead has been queued below this chunk */
  _Atomic int64_t done;  /* the highest chunk of the logical view it finished */
  atomic_uint_fast64_t used; /* f->tick of its last read */
} b2_stream;

struct b2_file {
  b2_env *env;
  b2_frame *frame;
  int view;
  int flags;
  uint64_t id;          /* key of this frame in the shared cache */
  uint64_t cid;         /* key of its stored (compressed) chunks there
                           (partial.c); read-only handles only, else 0 */
  uint64_t bid;         /* key of its bands (band.c): read-only array
                           views, else 0 */
  int has_array;
  int tensor;           /* an array view of a python-blosc2 tensor: `array`
                           holds its shape and dtype, its items are the
                           frame's logical bytes (read-only handles) */
  b2_b2nd array;
  char *npy;            /* .npy header (B2_VIEW_NPY) */
  size_t npylen;
  char *npy_posix;      /* NULL, or the header a plain file would hold
                           (as last written or opened) when npy shows
                           rows its writer's header did not give: bytes
                           appended or cut (wmu) */
  _Atomic int64_t size; /* size of the view (written files: in memory) */
  b2_stream streams[B2_FILE_STREAMS]; /* readers of the handle (read.c) */
  atomic_uint_fast64_t tick;  /* counts reads, for the streams' LRU order */
  b2_pool_group group;        /* read-ahead jobs in flight */
  _Atomic int64_t warm;       /* chunks below this are being or were
                                 decoded by b2_file_warm: readers wait
                                 for them in the cache */
  atomic_int cached;          /* a loader ran for this handle: its keys
                                 may have entries to discard at close */

  /* Writing (logical view of a frame opened for writing). */
  int writable;
  int32_t chunksize;
  b2_cparams cp;              /* the frame's own encoding parameters */
  char *path;
  pthread_mutex_t wmu;        /* serialises pwrite, truncate, flush */
  pthread_mutex_t fmu;        /* size + frame geometry vs. chunk puts */
  pthread_rwlock_t szlock;    /* readers (shared) vs. size changes and the
                                 writes that make them (exclusive): a read
                                 never sees a size whose bytes are not in */
  atomic_uint_fast64_t gen;   /* bumped by every change */
  atomic_uint_fast64_t epoch; /* bumped (under fmu) by every change that
                                 can cut chunks off (shrinking, array
                                 resizes, recreation): a flush that began
                                 before one is stale */
  atomic_uint_fast64_t committed_gen; /* gen of the last successful flush */
  _Atomic int64_t last_write_ms;
  _Atomic int64_t changed_ns; /* wall-clock time of the last change, just
                                 below the coarse clock file times come
                                 from (0: none yet): the time the commit
                                 gives the frame (b2_frame_commit_at) */
  int64_t wend;               /* where the last write ended (wmu) */
  int wseq;                   /* the current write continues the last one
                                 (wmu): chunks it completes leave the cache
                                 once compressed (write.c, flush_soon) */
  int64_t wrun;               /* where the run of writes, each continuing
                                 the last, began (wmu): b2_file_chunk_done */
  b2_file *reg_next, *reg_prev; /* env->writers list (env->reg_mu) */
  _Atomic int64_t wlo, whi;   /* array writers: the write under way, in
                                 array bytes, or [end, end) of the last
                                 one (spill.c) */
  atomic_int committing;      /* a commit is compressing every chunk */
  int spill_fd;               /* chunks parked uncompressed (spill.c;
                                 fmu): -1 none yet, -2 none possible */
  uint64_t *spill_bits;       /* which chunks are parked there */
  int64_t spill_cap;
  uint64_t spill_ver;         /* bumped by every change of the parked bytes */

  /* Array views opened for writing, and new .npy files (awrite.c; wmu). */
  int pending;                /* a new .npy file: bytes held until its
                                 header is complete */
  int npy_new;                /* made by b2_file_create_npy, written
                                 anew while empty (restart), or an array
                                 kept as its bytes (b2_file_ashort): a
                                 plain frame's name at the close */
  int npy_plain;              /* a .npy view of a frame without a b2nd
                                 metalayer (its bytes): written anew when
                                 empty or truncated to 0 */
  int npy_born;               /* its array was made from the header its
                                 writer wrote (a new .npy file) */
  int64_t npy_hw;             /* the end of what that writer wrote or
                                 sized: short of the array's size at the
                                 last close, the file keeps its bytes */
  uint8_t *pend;              /* held bytes [0, pend_cap) */
  uint8_t *pend_set;          /* 1 for each held byte written */
  size_t pend_cap;
  b2_frame_params newp;       /* parameters of the frame to create */
  int want_nc, want_nb;       /* user.b2.chunkshape / blockshape given */
  int32_t want_cs[B2_B2ND_MAXDIM], want_bs[B2_B2ND_MAXDIM];
  char note[256];             /* what became of a new .npy file, for a log
                                 line (b2_file_take_note) */
  atomic_int lost;            /* bytes held for a new .npy file could not
                                 be stored (the error): every flush of the
                                 handle reports it */
  atomic_uint_fast64_t recreations; /* frames created anew at path */
};

/* Decoded bytes of the frame under a writable handle: the logical view's
 * size, or the array's chunks (all full-size) for array views. */
static inline int64_t b2_file_fbytes(const b2_file *f) {
  return f->has_array ? f->array.nchunks * f->array.chunk_nbytes : atomic_load(&f->size);
}

/* An array view whose items are the frame's logical bytes in order, read
 * as the logical view is (read-ahead, drop-behind, no gather). */
static inline int b2_file_linear(const b2_file *f) {
  return f->tensor || (f->has_array && b2_b2nd_is_linear(&f->array));
}

/* The .npy header the view of f's array shows (B2_NPY_HEADER_VLMETA when
 * it still describes the array, else numpy.save's), malloc'd into *out
 * with its length.  0 or a negative code. */
int b2_file_view_header(const b2_file *f, char **out, size_t *len);

/* Writes and size changes go through awrite.c (arrays, new .npy files). */
static inline int b2_file_arrayish(const b2_file *f) {
  return f->pending || f->has_array || f->npy_plain;
}

/* write.c internals shared with awrite.c (wmu held where it matters). */
int64_t b2_file_now_ms(void);
/* Something changed: bump gen, note when (for the idle flusher and for
 * the modification time the next commit gives the frame). */
void b2_file_touched(b2_file *f);
int b2_file_flush_chunk(void *owner, int64_t i, const uint8_t *data, size_t len);
/* Compress the len bytes of chunk i with f's parameters into a large
 * buffer (*out) that counts in the cache's bytes while it lives: the
 * compressed length, or < 0 (no buffer).  b2_file_encoded_free gives the
 * buffer and its charge back (len as given here). */
int b2_file_encode(b2_file *f, int64_t i, const uint8_t *data, size_t len, uint8_t **out);
void b2_file_encoded_free(b2_file *f, uint8_t *buf, size_t len);
/* Store every chunk written into the frame, parked ones included, without
 * committing (wmu held). */
int b2_file_store_all(b2_file *f);
/* Pin chunk i for writing (decoded from the frame unless `whole`). */
int b2_file_wpin(b2_file *f, int64_t i, int whole, b2_cache_entry **e);
/* Whether a write leaves a chunk done, to be compressed at once (write.c):
 * `reaches_end` it wrote the chunk's last byte, `start` the file offset of
 * the chunk's first byte, `written` its bytes written since it was last
 * stored (b2_cache_written), `len` its bytes. */
int b2_file_chunk_done(const b2_file *f, int reaches_end, int64_t start, size_t written,
                       size_t len);

/* A write completed chunk e: compress it in the background (takes the
 * pin); an in-order writer's chunk then leaves the cache (f->wseq). */
void b2_file_flush_soon(b2_file *f, b2_cache_entry *e);
/* Logical view: write, and set the size (wmu held). */
ssize_t b2_file_lwrite(b2_file *f, const void *buf, size_t n, int64_t off);
int b2_file_lresize(b2_file *f, int64_t size);
void b2_file_params_of(const b2_frame *fr, b2_frame_params *p);
/* Replace the frame by a new one with parameters p and nbytes of zeros,
 * committed (wmu held). */
int b2_file_recreate(b2_file *f, const b2_frame_params *p, int64_t nbytes);

/* awrite.c: writes, size changes and parameters of array views and new
 * .npy files (wmu held); the held bytes of a new .npy file read back. */
ssize_t b2_file_awrite(b2_file *f, const void *buf, size_t n, int64_t off);
int b2_file_aresize(b2_file *f, int64_t size);
int b2_file_aset_param(b2_file *f, const char *key, const char *value);
/* 1 while an array view's size ends inside a row of the first axis (an
 * appender's write stopped mid-row): the array holds the rows reached,
 * the items past the size zeros; such a state is not committed. */
int b2_file_aragged(const b2_file *f);
/* Do .npy headers k (untrusted) and h describe one array: both parse, k
 * exactly klen bytes, the same descr text, C order, the same shape
 * (rows != NULL: but for the first axis, k's count of it in *rows)? */
int b2_file_npy_alike(const char *k, size_t klen, const char *h, size_t hlen, int64_t *rows);
/* "A,B,C" (or "AxBxC") -> out (B2_B2ND_MAXDIM sizes); the count or a
 * negative code.  "chunkshape" and "blockshape" are such values. */
int b2_file_parse_dims(const char *s, int32_t *out);
int b2_file_is_shape_key(const char *key);
int b2_file_pending_read(b2_file *f, void *buf, size_t n, int64_t off);
/* A new .npy file still held is flushed (or closed): store it now, as an
 * array or a plain frame. */
int b2_file_asettle(b2_file *f);
/* Before a commit: an array view whose size ends inside a row
 * (b2_file_aragged) when it must be durable (`sync`), or, when its last
 * writer is done (`last`), a new .npy file that ends short of the size
 * its header gives, becomes a plain frame of its bytes (an array would
 * pad them with zeros). */
int b2_file_ashort(b2_file *f, int last, int sync);
/* The size such a short new .npy file keeps at its last close (the bytes
 * its writer wrote), or -1 when it is not short. */
int64_t b2_file_ashort_size(const b2_file *f);

/* b2_frame_open (b2_frame_open_at when dirfd is not -1: path is a name in
 * it; with probe set, b2_frame_open_probe), taking back a parked frame of
 * the same file unchanged instead of parsing it again when there is one. */
int b2_file_park_open(b2_env *env, int dirfd, const char *path, int probe, b2_frame **out);
/* Park a frame at its last close: 1 if kept (env owns it now), 0 if not
 * (the caller closes it). */
int b2_file_park_put(b2_env *env, b2_frame *fr);
/* Close every parked frame. */
void b2_file_park_clear(b2_env *env);

/* Cache loader: decode chunk `chunk` of the file `arg` (a b2_file) whole. */
int b2_file_load_chunk(void *arg, uint64_t file, int64_t chunk, uint8_t **data, size_t *len);
/* Chunk i's entry (key f->id) pinned in *e, loaded by load(f, ...) on a
 * miss with room made for the chunk's size first (b2_cache_get_sized). */
int b2_file_cache_get(b2_file *f, int64_t i, b2_cache_load_fn load, b2_cache_entry **e);

/* Internal: open/close hooks of the write side (write.c). */
int b2_file_setup_writer(b2_file *f);
void b2_file_teardown_writer(b2_file *f);
int b2_env_start_idler(b2_env *env);
void b2_env_stop_idler(b2_env *env);

/* Small read of bytes [off, off+len) of chunk i when that chunk is not
 * cached decoded: decode only the blocks covering it (partial.c). */
int b2_file_read_partial(b2_file *f, int64_t i, size_t off, size_t len, void *dst);
/* The same, never decoding the chunk whole into the cache. */
int b2_file_read_blocks(b2_file *f, int64_t i, size_t off, size_t len, void *dst);

/* Read-ahead: load `key` of the cache key space `id` with `load` on a pool
 * worker, for the sequential reader st (skipped if st has passed it by
 * then).  1 queued, 0 already cached, -1 not queued (pool busy, no
 * memory).  The env has a cache and a pool. */
int b2_file_queue_ahead(b2_file *f, b2_stream *st, uint64_t id, int64_t key,
                        b2_cache_load_fn load);
/* Drop-behind: st finished `key` (its `done` grows to it); the entry
 * `prev` of key space id (the one before, -1: none) leaves the cache of
 * a read-only handle. */
void b2_file_drop_behind(b2_file *f, b2_stream *st, uint64_t id, int64_t key, int64_t prev);

/* Chunks an array writer is still inside, parked uncompressed instead of
 * compressed into the frame when pushed out of the cache (spill.c).
 * b2_file_spill_put (the flush callback, before compressing; `epoch` as
 * it read it): 1 parked, 0 not (compress it).  b2_file_spill_forget
 * (fmu held): chunk i was stored in the frame.  b2_file_spill_load: 1
 * and the chunk's bytes in a cache buffer, 0 when not parked.  b2_file_spill_has: parked now.  b2_file_spill_drain (with
 * f->committing set, dirty chunks flushed): every parked chunk compressed
 * into the frame.  b2_file_spill_reset: forget them all (a new frame);
 * b2_file_spill_close also closes the file. */
int b2_file_spill_put(b2_file *f, int64_t i, const uint8_t *data, size_t len, uint64_t epoch);
void b2_file_spill_forget(b2_file *f, int64_t i);
int b2_file_spill_load(b2_file *f, int64_t i, uint8_t **data, size_t *len);
/* Bytes [off, off+len) of parked chunk i written (the writer's) or read:
 * 1 done, 0 not parked, < 0 on error. */
int b2_file_spill_write(b2_file *f, int64_t i, size_t off, const void *src, size_t len);
int b2_file_spill_read(b2_file *f, int64_t i, size_t off, size_t len, void *dst);
int b2_file_spill_has(b2_file *f, int64_t i);
/* The writer completed parked chunk i: loaded into the cache as a dirty
 * entry, pinned in *e (1), for b2_file_flush_soon; 0 when not parked. */
int b2_file_spill_unpark(b2_file *f, int64_t i, b2_cache_entry **e);
int b2_file_spill_drain(b2_file *f);
/* An unnamed file (O_TMPFILE) beside f's frame: its descriptor, or -1. */
int b2_file_tmpfile(b2_file *f);
/* Chunks from `nchunks` on are gone (an array cut by rows; fmu held). */
void b2_file_spill_cut(b2_file *f, int64_t nchunks);
void b2_file_spill_reset(b2_file *f);
void b2_file_spill_close(b2_file *f);

/* Sequential reads of an array view whose chunks are not in C order
 * (band.c): bytes [aoff, aoff+n) of the items, by bands of rows decoded
 * into the cache under f->bid.  1 when served, 0 when the array has no
 * bands (then read as before), < 0 on error.  b2_file_band_pin pins the
 * band holding the whole range instead (1), 0 when it does not. */
int b2_file_band_read(b2_file *f, uint8_t *dst, size_t n, int64_t aoff, b2_stream *seq);
int b2_file_band_pin(b2_file *f, size_t n, int64_t aoff, b2_stream *seq, b2_file_pin *p);

/* Read bytes [off, off+len) of decoded chunk i: from the cache, by partial
 * decode (small reads, not part of a sequential stream `seq`), straight
 * into dst (whole chunk), or by loading the whole chunk into the cache. */
int b2_file_read_chunk(b2_file *f, int64_t i, size_t off, size_t len, void *dst, b2_stream *seq);

#endif
