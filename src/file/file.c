/* file.c - file-like handles over frames: open, size, pread by view. */
#include <stdlib.h>
#include <string.h>

#include "b2_error.h"
#include "common/util.h"
#include "file/file_impl.h"

void b2_env_opts_default(b2_env_opts *o) {
  memset(o, 0, sizeof *o);
  o->cache_size = 256u << 20;
  o->dirty_max = 64u << 20;
  o->nthreads = 2;
  o->readahead = 4;
  b2_cparams_default(&o->cparams);
  o->chunksize = 1 << 20;
  o->layout = B2_LAYOUT_CONTIGUOUS;
}

int b2_env_create(const b2_env_opts *o, b2_env **out) {
  b2_env *env = calloc(1, sizeof *env);
  if (!env) return b2_fail(B2_E_NOMEM, "no memory for the environment");
  if (o)
    env->opts = *o;
  else
    b2_env_opts_default(&env->opts);
  atomic_init(&env->next_id, 1);
  pthread_mutex_init(&env->reg_mu, NULL);
  pthread_cond_init(&env->reg_cv, NULL);
  int rc = 0;
  if (env->opts.cache_size > 0) {
    b2_cache_config cc = {.capacity = env->opts.cache_size,
                          .dirty_max = B2_MIN(env->opts.dirty_max, env->opts.cache_size)};
    rc = b2_cache_create(&cc, &env->cache);
  }
  if (rc == 0 && env->opts.nthreads > 0)
    rc = b2_pool_create(env->opts.nthreads, 256, &env->pool);
  if (rc == 0 && env->opts.idle_ms > 0 && env->cache) rc = b2_env_start_idler(env);
  if (rc < 0) {
    b2_env_destroy(env);
    return rc;
  }
  *out = env;
  return 0;
}

void b2_env_destroy(b2_env *env) {
  if (!env) return;
  b2_env_stop_idler(env);
  b2_pool_destroy(env->pool);
  b2_cache_destroy(env->cache);
  pthread_mutex_destroy(&env->reg_mu);
  pthread_cond_destroy(&env->reg_cv);
  free(env);
}

static int setup_array(b2_file *f) {
  const b2_frame_info *in = b2_frame_get_info(f->frame);
  const uint8_t *meta;
  size_t len;
  int rc = b2_frame_meta_get(f->frame, "b2nd", &meta, &len);
  if (rc < 0) return b2_fail(B2_E_FORMAT, "not a b2nd array (no 'b2nd' metalayer)");
  rc = b2_b2nd_parse(meta, len, in->typesize, &f->array);
  if (rc < 0) return b2_context(rc, "b2nd metalayer");
  f->has_array = 1;
  rc = b2_b2nd_check(&f->array, in->nchunks, in->chunksize);
  if (rc < 0) return b2_context(rc, "b2nd metalayer");
  f->size = b2_b2nd_nbytes(&f->array);
  if (f->view == B2_VIEW_NPY) {
    int n = b2_npy_header(&f->array, NULL, 0);
    if (n < 0) return n;
    f->npy = malloc((size_t)n);
    if (!f->npy) return b2_fail(B2_E_NOMEM, "no memory for the .npy header");
    rc = b2_npy_header(&f->array, f->npy, (size_t)n);
    if (rc != n) return rc < 0 ? rc : b2_fail(B2_E_INVAL, ".npy header size changed");
    f->npylen = (size_t)n;
    f->size += n;
  }
  return 0;
}

/* A handle around an open frame (ownership passes to the handle). */
static int wrap(b2_env *env, b2_frame *fr, const char *path, int view, int flags, b2_file **out) {
  b2_file *f = calloc(1, sizeof *f);
  if (!f) {
    b2_frame_close(fr);
    return b2_fail(B2_E_NOMEM, "no memory for a file handle");
  }
  f->env = env;
  f->frame = fr;
  f->view = view;
  f->flags = flags;
  if (env && env->cache)
    f->id = b2_cache_file_id(env->cache);
  else if (env)
    f->id = atomic_fetch_add(&env->next_id, 1);
  atomic_init(&f->next_off, -1);
  atomic_init(&f->ahead, 0);
  int rc = 0;
  if (view == B2_VIEW_LOGICAL)
    atomic_init(&f->size, b2_frame_get_info(fr)->nbytes);
  else
    rc = setup_array(f);
  if (rc == 0 && (flags & B2_OPEN_RDWR)) {
    f->path = strdup(path);
    rc = f->path ? b2_file_setup_writer(f) : b2_fail(B2_E_NOMEM, "no memory");
  }
  if (rc < 0) {
    b2_file_close(f);
    return rc;
  }
  *out = f;
  return 0;
}

int b2_file_create(b2_env *env, const char *path, const b2_frame_params *p, b2_file **out) {
  b2_frame_params dp;
  if (!p) {
    b2_frame_params_default(&dp);
    if (env) {
      dp.cparams = env->opts.cparams;
      dp.chunksize = env->opts.chunksize;
      dp.layout = env->opts.layout;
    }
    p = &dp;
  }
  b2_frame *fr;
  int rc = b2_frame_create(path, p, &fr);
  if (rc < 0) return rc;
  return wrap(env, fr, path, B2_VIEW_LOGICAL, B2_OPEN_RDWR, out);
}

int b2_file_open(b2_env *env, const char *path, int view, int flags, b2_file **out) {
  if (view < B2_VIEW_LOGICAL || view > B2_VIEW_NPY)
    return b2_fail(B2_E_INVAL, "unknown view %d", view);
  if ((flags & B2_OPEN_RDWR) && view != B2_VIEW_LOGICAL)
    return b2_fail(B2_E_ROFS, "array views are read-only");
  if ((flags & B2_OPEN_RDWR) && !(env && env->cache))
    return b2_fail(B2_E_INVAL, "writing needs an environment with a cache");
  b2_frame *fr;
  int rc = (flags & B2_OPEN_RDWR) ? b2_frame_open_rw(path, &fr) : b2_frame_open(path, &fr);
  if (rc < 0) return rc;
  return wrap(env, fr, path, view, flags, out);
}

int b2_file_close(b2_file *f) {
  if (!f) return 0;
  int rc = 0;
  if (f->writable) rc = b2_file_flush(f);
  if (f->env && f->env->pool) b2_pool_wait(f->env->pool, &f->group);
  if (f->writable) b2_file_teardown_writer(f);
  if (f->env && f->env->cache) b2_cache_discard_file(f->env->cache, f->id);
  if (f->has_array) b2_b2nd_free(&f->array);
  free(f->npy);
  free(f->path);
  b2_frame_close(f->frame);
  free(f);
  return rc;
}

int64_t b2_file_size(const b2_file *f) { return atomic_load(&f->size); }
b2_frame *b2_file_frame(const b2_file *f) { return f->frame; }
const b2_b2nd *b2_file_array(const b2_file *f) { return f->has_array ? &f->array : NULL; }

/* Cache loader: decode chunk `chunk` of the file `arg` whole. */
int b2_file_load_chunk(void *arg, uint64_t file, int64_t chunk, uint8_t **data, size_t *len) {
  b2_file *f = arg;
  (void)file;
  int32_t nb = b2_frame_chunk_nbytes(f->frame, chunk);
  if (nb < 0) return nb;
  uint8_t *buf = malloc(nb ? (size_t)nb : 1);
  if (!buf) return b2_fail(B2_E_NOMEM, "no memory to decode a chunk of %d bytes", nb);
  int rc = b2_frame_decode_chunk(f->frame, chunk, buf, (size_t)nb);
  if (rc < 0) {
    free(buf);
    return rc;
  }
  *data = buf;
  *len = (size_t)nb;
  return 0;
}

/* Copy [off, off+len) out of a pinned cache entry.  Bytes past the
 * entry's end read as zeros: a written chunk being grown by a truncate. */
static int copy_entry(const b2_file *f, b2_cache_entry *e, size_t off, size_t len, void *dst) {
  if (f->writable) b2_cache_read_lock(e);
  size_t have = b2_cache_len(e);
  size_t n = off < have ? B2_MIN(len, have - off) : 0;
  if (n) memcpy(dst, b2_cache_data(e) + off, n);
  if (n < len) memset((uint8_t *)dst + n, 0, len - n);
  if (f->writable) b2_cache_read_unlock(e);
  return 0;
}

int b2_file_read_chunk(b2_file *f, int64_t i, size_t off, size_t len, void *dst, int seq) {
  int32_t nb = b2_frame_chunk_nbytes(f->frame, i);
  if (nb < 0) return nb;
  b2_cache *c = f->env ? f->env->cache : NULL;
  b2_cache_entry *e;
  int rc;
  if (c && b2_cache_peek(c, f->id, i, &e) == 0) {
    rc = copy_entry(f, e, off, len, dst);
    b2_cache_release(c, e);
    return rc;
  }
  if (off == 0 && len == (size_t)nb) {
    /* The whole chunk: decode straight into the caller's buffer. */
    rc = b2_frame_decode_chunk(f->frame, i, dst, len);
    return rc < 0 ? rc : 0;
  }
  if (!c || (!seq && len <= B2_FILE_PARTIAL_MAX)) {
    rc = b2_frame_decode_range(f->frame, i, off, len, dst);
    return rc < 0 ? rc : 0;
  }
  rc = b2_cache_get(c, f->id, i, b2_file_load_chunk, f, &e);
  if (rc < 0) return rc;
  rc = copy_entry(f, e, off, len, dst);
  b2_cache_release(c, e);
  return rc;
}

/* ---- read-ahead --------------------------------------------------------- */
typedef struct {
  b2_file *f;
  int64_t chunk;
} ahead_job;

static void ahead_run(void *arg) {
  ahead_job *j = arg;
  b2_cache_entry *e;
  if (b2_cache_get(j->f->env->cache, j->f->id, j->chunk, b2_file_load_chunk, j->f, &e) == 0)
    b2_cache_release(j->f->env->cache, e);
  free(j);
}

/* A sequential reader reached chunk `last`: queue the next chunks for
 * decoding in the background (dropped when the pool is busy). */
static void read_ahead(b2_file *f, int64_t last) {
  b2_env *env = f->env;
  if (!env || !env->cache || !env->pool || env->opts.readahead <= 0) return;
  b2_frame_info in;
  if (b2_frame_info_copy(f->frame, &in) < 0) return;
  int64_t n = in.nchunks;
  int64_t from = B2_MAX(last + 1, atomic_load(&f->ahead));
  int64_t to = B2_MIN(n, last + 1 + env->opts.readahead);
  for (int64_t j = from; j < to; j++) {
    b2_cache_entry *e;
    if (b2_cache_peek(env->cache, f->id, j, &e) == 0) {
      b2_cache_release(env->cache, e);
      continue;
    }
    ahead_job *job = malloc(sizeof *job);
    if (!job) break;
    job->f = f;
    job->chunk = j;
    if (b2_pool_try_submit(env->pool, ahead_run, job, &f->group) < 0) {
      free(job);
      break;
    }
    atomic_store(&f->ahead, j + 1);
  }
}

/* Logical view: walk the chunks covering the range. */
static int read_logical(b2_file *f, uint8_t *dst, size_t n, int64_t off, int seq) {
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
    i++;
  }
  if (seq) read_ahead(f, i - 1);
  return 0;
}

typedef struct {
  b2_file *f;
  int seq;
  int64_t last; /* highest chunk read */
} gather_ctx;

static int chunk_reader(void *arg, int64_t chunk, size_t off, size_t len, void *dst) {
  gather_ctx *g = arg;
  int rc = b2_file_read_chunk(g->f, chunk, off, len, dst, g->seq);
  if (chunk > g->last) g->last = chunk;
  return rc < 0 ? rc : 0;
}

ssize_t b2_file_pread(b2_file *f, void *buf, size_t n, int64_t off) {
  if (off < 0) return b2_fail(B2_E_INVAL, "negative offset");
  int64_t size = atomic_load(&f->size);
  if (off >= size || n == 0) return 0;
  if ((int64_t)n > size - off) n = (size_t)(size - off);
  uint8_t *dst = buf;
  size_t done = 0;
  int rc = 0;
  /* Sequential: this read starts where the previous one ended. */
  int64_t prev = atomic_exchange(&f->next_off, off + (int64_t)n);
  int seq = prev == off;
  if (f->view == B2_VIEW_LOGICAL) {
    rc = read_logical(f, dst, n, off, seq);
  } else {
    if (f->view == B2_VIEW_NPY && off < (int64_t)f->npylen) {
      size_t h = B2_MIN(n, f->npylen - (size_t)off);
      memcpy(dst, f->npy + off, h);
      done = h;
      off += (int64_t)h;
    }
    int64_t aoff = off - (f->view == B2_VIEW_NPY ? (int64_t)f->npylen : 0);
    if (done < n) {
      gather_ctx g = {f, seq, -1};
      rc = b2_b2nd_read(&f->array, (uint64_t)aoff, n - done, dst + done, chunk_reader, &g);
      if (rc > 0) rc = 0;
      if (rc == 0 && seq && g.last >= 0) read_ahead(f, g.last);
    }
  }
  return rc < 0 ? rc : (ssize_t)n;
}
