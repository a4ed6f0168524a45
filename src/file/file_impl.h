/* file_impl.h - internals of the file-handle layer (src/file/). */
#ifndef B2_FILE_IMPL_H
#define B2_FILE_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "b2_cache.h"
#include "b2_file.h"
#include "common/pool.h"

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
};

/* Reads smaller than this, of chunks not in the cache and not part of a
 * sequential stream, decode only the blocks they cover. */
#define B2_FILE_PARTIAL_MAX (256u << 10)

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
  int has_array;
  b2_b2nd array;
  char *npy;            /* .npy header (B2_VIEW_NPY) */
  size_t npylen;
  _Atomic int64_t size; /* size of the view (written files: in memory) */
  b2_stream streams[B2_FILE_STREAMS]; /* readers of the handle (read.c) */
  atomic_uint_fast64_t tick;  /* counts reads, for the streams' LRU order */
  b2_pool_group group;        /* read-ahead jobs in flight */

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
  atomic_uint_fast64_t epoch; /* bumped by every size change (under fmu):
                                 a flush that began before one is stale */
  atomic_uint_fast64_t committed_gen; /* gen of the last successful flush */
  _Atomic int64_t last_write_ms;
  b2_file *reg_next, *reg_prev; /* env->writers list (env->reg_mu) */
};

/* Cache loader: decode chunk `chunk` of the file `arg` (a b2_file) whole. */
int b2_file_load_chunk(void *arg, uint64_t file, int64_t chunk, uint8_t **data, size_t *len);

/* Internal: open/close hooks of the write side (write.c). */
int b2_file_setup_writer(b2_file *f);
void b2_file_teardown_writer(b2_file *f);
int b2_env_start_idler(b2_env *env);
void b2_env_stop_idler(b2_env *env);

/* Small read of bytes [off, off+len) of chunk i when that chunk is not
 * cached decoded: decode only the blocks covering it (partial.c). */
int b2_file_read_partial(b2_file *f, int64_t i, size_t off, size_t len, void *dst);

/* Read bytes [off, off+len) of decoded chunk i: from the cache, by partial
 * decode (small reads, not part of a sequential stream `seq`), straight
 * into dst (whole chunk), or by loading the whole chunk into the cache. */
int b2_file_read_chunk(b2_file *f, int64_t i, size_t off, size_t len, void *dst, b2_stream *seq);

#endif
