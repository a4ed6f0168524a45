/* file.c - file-like handles over frames: the environment (cache, pool),
 * open, close, size.  The read path is in read.c, writing in write.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "b2_error.h"
#include "common/msgpack.h"
#include "common/util.h"
#include "file/file_impl.h"

void b2_env_opts_default(b2_env_opts *o) {
  memset(o, 0, sizeof *o);
  o->cache_size = 256u << 20;
  o->dirty_max = 0; /* half the cache, at least 64 MiB (b2_env_create) */
  /* A worker per core, at most 4: each holds scratch buffers and codec
   * contexts (a few MiB), and a FUSE mount rarely keeps more busy. */
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  o->nthreads = ncpu < 2 ? 2 : ncpu > 4 ? 4 : (int)ncpu;
  o->readahead = 4;
  b2_cparams_default(&o->cparams);
  o->chunksize = 1 << 20;
  o->layout = B2_LAYOUT_CONTIGUOUS;
  o->verify = 1;
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
  pthread_mutex_init(&env->park_mu, NULL);
  env->park_max = B2_PARK_MAX;
  int rc = 0;
  /* Dirty bytes held by default: half the cache, at least 64 MiB.  A
   * C-order writer of an array is inside a whole row of chunks at once;
   * under a 64 MiB bound with a 256 MiB cache, the rewrite through a
   * mapping of a 512 MiB matrix in 4 MiB tiles (rows of 64 MiB) compressed
   * each tile 2.5-4 times (318-507 write-backs of 128 chunks) and took
   * 5.9-9.3 s; under 128 MiB 3.1-4.4 s. */
  size_t dmax = env->opts.dirty_max;
  if (dmax == 0) dmax = B2_MAX(env->opts.cache_size / 2, (size_t)64 << 20);
  env->opts.dirty_max = dmax = B2_MIN(dmax, env->opts.cache_size);
  if (env->opts.cache_size > 0) {
    b2_cache_config cc = {.capacity = env->opts.cache_size, .dirty_max = dmax};
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

void b2_env_charge(b2_env *env, size_t n) {
  if (env) b2_cache_charge(env->cache, n);
}

void b2_env_uncharge(b2_env *env, size_t n) {
  if (env) b2_cache_uncharge(env->cache, n);
}

void b2_env_destroy(b2_env *env) {
  if (!env) return;
  b2_env_stop_idler(env);
  b2_file_park_clear(env);
  pthread_mutex_destroy(&env->park_mu);
  b2_pool_destroy(env->pool);
  b2_cache_destroy(env->cache);
  pthread_mutex_destroy(&env->reg_mu);
  pthread_cond_destroy(&env->reg_cv);
  free(env);
}

int b2_file_npy_alike(const char *k, size_t klen, const char *h, size_t hlen, int64_t *rows) {
  char *d = malloc(klen + hlen + 2); /* a descr is shorter than its header */
  if (!d) return 0;
  char *e = d + klen + 1;
  size_t kl = 0, hl = 0;
  int kf = 1, hf = 1, kn = -1, hn = -2;
  int64_t ks[B2_B2ND_MAXDIM], hs[B2_B2ND_MAXDIM];
  int from = rows ? 1 : 0; /* rows: the first axis may differ */
  int same = b2_npy_parse(k, klen, &kl, d, klen + 1, &kf, &kn, ks) == 0 && kl == klen &&
             b2_npy_parse(h, hlen, &hl, e, hlen + 1, &hf, &hn, hs) == 0 && !kf && !hf &&
             kn == hn && kn >= from &&
             memcmp(ks + from, hs + from, (size_t)(kn - from) * sizeof ks[0]) == 0 &&
             strcmp(d, e) == 0;
  if (same && rows) *rows = ks[0];
  free(d);
  return same;
}

/* The header its writer kept (B2_NPY_HEADER_VLMETA), malloc'd; NULL when
 * there is none or it does not read as one msgpack bin. */
static char *kept_header(const b2_file *f, size_t *len) {
  uint8_t *v = NULL;
  size_t vlen = 0;
  if (!f->frame || b2_frame_vlmeta_get(f->frame, B2_NPY_HEADER_VLMETA, NULL, &vlen) < 0 ||
      vlen > B2_NPY_HEADER_KEPT_MAX + 8 ||
      b2_frame_vlmeta_get(f->frame, B2_NPY_HEADER_VLMETA, &v, &vlen) < 0)
    return NULL;
  b2_mp_reader r;
  b2_mp_reader_init(&r, v, vlen);
  const uint8_t *d;
  uint32_t n;
  char *out = NULL;
  if (b2_mp_read_bin(&r, &d, &n) == 0 && r.pos == vlen && n > 0 && n <= B2_NPY_HEADER_KEPT_MAX &&
      (out = malloc(n)) != NULL) {
    memcpy(out, d, n);
    *len = n;
  }
  free(v);
  return out;
}

int b2_npy_header_keep(b2_frame *fr, const b2_b2nd *a, const void *npy, size_t len) {
  int n = b2_npy_header(a, NULL, 0);
  if (n < 0) return n;
  char *h = malloc((size_t)n);
  if (!h) return b2_fail(B2_E_NOMEM, "no memory for the .npy header");
  int same = b2_npy_header(a, h, (size_t)n) == n && (size_t)n == len && memcmp(h, npy, len) == 0;
  free(h);
  if (same) return 0;
  if (len > B2_NPY_HEADER_KEPT_MAX)
    return b2_fail(B2_E_LIMIT, "a .npy header of %zu bytes is not kept", len);
  b2_mp_writer w;
  b2_mp_writer_init(&w, NULL, 0);
  int rc = b2_mp_put_bin(&w, npy, len);
  if (rc == 0) rc = b2_frame_vlmeta_set(fr, B2_NPY_HEADER_VLMETA, w.buf, w.len);
  b2_mp_writer_free(&w);
  return rc < 0 ? rc : 1;
}

int b2_file_view_header(const b2_file *f, char **out, size_t *len) {
  int n = b2_npy_header(&f->array, NULL, 0);
  if (n < 0) return n;
  char *h = malloc((size_t)n);
  if (!h) return b2_fail(B2_E_NOMEM, "no memory for the .npy header");
  int rc = b2_npy_header(&f->array, h, (size_t)n);
  if (rc != n) {
    free(h);
    return rc < 0 ? rc : b2_fail(B2_E_INVAL, ".npy header size changed");
  }
  size_t klen = 0;
  char *k = kept_header(f, &klen);
  if (k && b2_file_npy_alike(k, klen, h, (size_t)n, NULL)) {
    free(h);
    *out = k;
    *len = klen;
    return 0;
  }
  free(k);
  *out = h;
  *len = (size_t)n;
  return 0;
}

/* The .npy header of an array view (f->array set), counted in its size. */
static int setup_npy(b2_file *f) {
  size_t n;
  int rc = b2_file_view_header(f, &f->npy, &n);
  if (rc < 0) return rc;
  f->npylen = n;
  f->size += (int64_t)n;
  return 0;
}

/* A python-blosc2 tensor: its items are the logical bytes.  Writing them
 * through the array view would need the tensor's own rules (its shape in
 * the vlmetalayer), which b2fs does not implement: read-only. */
static int setup_tensor(b2_file *f) {
  f->tensor = 1;
  if (f->flags & B2_OPEN_RDWR)
    return b2_fail(B2_E_PERM, "a python-blosc2 tensor (vlmetalayer %s): its array view is read-only",
                   B2_TENSOR_VLMETA);
  f->size = b2_frame_get_info(f->frame)->nbytes;
  return f->view == B2_VIEW_NPY ? setup_npy(f) : 0;
}

static int setup_array(b2_file *f) {
  const b2_frame_info *in = b2_frame_get_info(f->frame);
  const uint8_t *meta;
  size_t len;
  int rc = b2_frame_meta_get(f->frame, "b2nd", &meta, &len);
  /* No array: a tensor (one whose vlmetalayer does not parse is none). */
  if (rc < 0 && b2_tensor_get(f->frame, &f->array) == 1) return setup_tensor(f);
  if (rc < 0 && f->view == B2_VIEW_NPY) {
    /* A .npy file that could not become an array, kept as its bytes. */
    f->view = B2_VIEW_LOGICAL;
    f->npy_plain = 1;
    atomic_init(&f->size, in->nbytes);
    return 0;
  }
  if (rc < 0) return b2_fail(B2_E_FORMAT, "not a b2nd array (no 'b2nd' metalayer)");
  rc = b2_b2nd_parse(meta, len, in->typesize, &f->array);
  if (rc < 0) return b2_context(rc, "b2nd metalayer");
  f->has_array = 1;
  b2_chunk_geom g; /* its ZFP chunks and cell filters need the block shape */
  b2_b2nd_geom(&f->array, &g);
  b2_frame_set_geom(f->frame, &g);
  rc = b2_b2nd_check(&f->array, in->nchunks, in->chunksize);
  if (rc < 0) return b2_context(rc, "b2nd metalayer");
  f->size = b2_b2nd_nbytes(&f->array);
  return f->view == B2_VIEW_NPY ? setup_npy(f) : 0;
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
  f->spill_fd = -1;
  b2_frame_set_verify(fr, env ? env->opts.verify : 1);
  f->view = view;
  f->flags = flags;
  if (env && env->cache) {
    f->id = b2_cache_file_id(env->cache);
    if (!(flags & B2_OPEN_RDWR)) f->cid = b2_cache_file_id(env->cache);
    if (!(flags & B2_OPEN_RDWR) && view != B2_VIEW_LOGICAL) f->bid = b2_cache_file_id(env->cache);
  }
  else if (env)
    f->id = atomic_fetch_add(&env->next_id, 1);
  for (int k = 0; k < B2_FILE_STREAMS; k++) {
    atomic_init(&f->streams[k].end, -1);
    atomic_init(&f->streams[k].state, 0);
    atomic_init(&f->streams[k].ahead, 0);
    atomic_init(&f->streams[k].done, -1);
    atomic_init(&f->streams[k].used, 0);
  }
  atomic_init(&f->tick, 0);
  atomic_init(&f->warm, 0);
  atomic_init(&f->cached, 0);
  int rc = 0;
  if (view == B2_VIEW_LOGICAL) {
    atomic_init(&f->size, b2_frame_get_info(fr)->nbytes);
    b2_b2nd_attach(fr); /* an array's ZFP chunks and cell filters need its
                           block shape (array views: setup_array) */
  } else {
    rc = setup_array(f);
  }
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

void b2_file_env_params(const b2_env *env, b2_frame_params *p) {
  b2_frame_params_default(p);
  if (env) {
    p->cparams = env->opts.cparams;
    p->chunksize = env->opts.chunksize;
    p->layout = env->opts.layout;
  }
}

/* Create at entry `name` of dirfd, or at path `name` when dirfd is -1. */
static int create_in(b2_env *env, int dirfd, const char *name, const b2_frame_params *p,
                     b2_file **out) {
  b2_frame_params dp;
  if (!p) {
    b2_file_env_params(env, &dp);
    p = &dp;
  }
  b2_frame *fr;
  int rc = dirfd == -1 ? b2_frame_create(name, p, &fr) : b2_frame_create_at(dirfd, name, p, &fr);
  if (rc < 0) return rc;
  return wrap(env, fr, name, B2_VIEW_LOGICAL, B2_OPEN_RDWR, out);
}

int b2_file_create(b2_env *env, const char *path, const b2_frame_params *p, b2_file **out) {
  return create_in(env, -1, path, p, out);
}

int b2_file_create_at(b2_env *env, int dirfd, const char *name, const b2_frame_params *p,
                      b2_file **out) {
  if (dirfd == -1) return b2_fail(B2_E_INVAL, "file create: no directory");
  return create_in(env, dirfd, name, p, out);
}

static int create_npy_in(b2_env *env, int dirfd, const char *path, const b2_frame_params *p,
                         b2_file **out) {
  b2_frame_params dp;
  if (!p) {
    b2_file_env_params(env, &dp);
    p = &dp;
  }
  b2_frame_params plain = *p;
  plain.nmeta = 0;
  plain.meta = NULL;
  int rc = create_in(env, dirfd, path, &plain, out);
  if (rc < 0) return rc;
  (*out)->newp = plain;
  (*out)->view = B2_VIEW_NPY;
  (*out)->pending = 1;
  (*out)->npy_new = 1;
  return 0;
}

int b2_file_npy_kept_as_bytes(const b2_file *f) {
  return b2_file_npy_fell_back(f) ||
         (f && f->writable && (b2_file_aragged(f) || b2_file_ashort_size(f) >= 0));
}

/* Bytes of a file read first for its .npy header (then up to PEND_MAX). */
#define HEADER_PEEK ((size_t)64 << 10)

int b2_file_npy_is_array(b2_file *f) {
  int64_t size = b2_file_size(f);
  b2_frame_params p;
  b2_file_env_params(f->env, &p);
  int rc = B2_E_TRUNCATED;
  for (size_t want = HEADER_PEEK; rc == B2_E_TRUNCATED && size > B2_NPY_MAGIC_LEN;
       want = PEND_MAX) {
    size_t n = (size_t)B2_MIN((int64_t)want, size);
    uint8_t *buf = malloc(n);
    if (!buf) return 0;
    b2_b2nd a;
    size_t hl;
    ssize_t got = b2_file_pread(f, buf, n, 0);
    rc = got != (ssize_t)n || memcmp(buf, B2_NPY_MAGIC, B2_NPY_MAGIC_LEN)
             ? B2_E_FORMAT
             : b2_b2nd_of_npy(buf, n, size, NULL, 0, NULL, 0, b2_cparams_min_side(&p.cparams),
                              &a, &hl);
    free(buf);
    if (rc == 0) {
      int whole = size == (int64_t)hl + b2_b2nd_nbytes(&a);
      b2_b2nd_free(&a);
      return whole;
    }
    if (n == (size_t)size || want == PEND_MAX) break;
  }
  return 0;
}

int b2_file_npy_fell_back(const b2_file *f) {
  return f && f->writable && f->npy_new && f->npy_plain && !f->pending &&
         atomic_load(&f->size) > 0;
}

int b2_file_create_npy(b2_env *env, const char *path, const b2_frame_params *p, b2_file **out) {
  return create_npy_in(env, -1, path, p, out);
}

int b2_file_create_npy_at(b2_env *env, int dirfd, const char *name, const b2_frame_params *p,
                          b2_file **out) {
  if (dirfd == -1) return b2_fail(B2_E_INVAL, "file create: no directory");
  return create_npy_in(env, dirfd, name, p, out);
}

int b2_file_take_note(b2_file *f, char *buf, size_t cap) {
  if (!f->writable) return 0;
  pthread_mutex_lock(&f->wmu);
  int have = f->note[0] != 0;
  if (have && cap) snprintf(buf, cap, "%s", f->note);
  f->note[0] = 0;
  pthread_mutex_unlock(&f->wmu);
  return have;
}

/* Open entry `name` of dirfd, or path `name` when dirfd is -1. */
static int open_in(b2_env *env, int dirfd, const char *path, int view, int flags, b2_file **out) {
  if (view < B2_VIEW_LOGICAL || view > B2_VIEW_NPY)
    return b2_fail(B2_E_INVAL, "unknown view %d", view);
  if ((flags & B2_OPEN_RDWR) && !(env && env->cache))
    return b2_fail(B2_E_INVAL, "writing needs an environment with a cache");
  b2_frame *fr;
  int rc;
  if (flags & B2_OPEN_RDWR)
    rc = dirfd == -1 ? b2_frame_open_rw(path, &fr) : b2_frame_open_rw_at(dirfd, path, &fr);
  else
    rc = b2_file_park_open(env, dirfd, path, flags & B2_OPEN_PROBE, &fr);
  if (rc < 0) return rc;
  return wrap(env, fr, path, view, flags, out);
}

int b2_file_open(b2_env *env, const char *path, int view, int flags, b2_file **out) {
  return open_in(env, -1, path, view, flags, out);
}

int b2_file_open_at(b2_env *env, int dirfd, const char *name, int view, int flags,
                    b2_file **out) {
  if (dirfd == -1) return b2_fail(B2_E_INVAL, "file open: no directory");
  return open_in(env, dirfd, name, view, flags, out);
}

int b2_file_open_frame(b2_env *env, b2_frame *fr, int view, b2_file **out) {
  if (!fr || !out) return b2_fail(B2_E_INVAL, "file open: no frame");
  if (view < B2_VIEW_LOGICAL || view > B2_VIEW_NPY) {
    b2_frame_close(fr);
    return b2_fail(B2_E_INVAL, "unknown view %d", view);
  }
  if (b2_frame_writable(fr)) {
    b2_frame_close(fr);
    return b2_fail(B2_E_INVAL, "file open: the frame is open for writing");
  }
  return wrap(env, fr, b2_frame_path(fr), view, B2_OPEN_RDONLY, out);
}

int b2_file_close(b2_file *f) {
  if (!f) return 0;
  int rc = 0;
  int writable = f->writable; /* the teardown clears it */
  if (writable) rc = b2_file_sync(f); /* nothing written is left behind */
  if (f->env && f->env->pool) b2_pool_wait(f->env->pool, &f->group);
  if (writable) b2_file_teardown_writer(f);
  /* Only for handles that loaded (read only: the loaders say so) or
   * wrote. */
  if (f->env && f->env->cache && (writable || atomic_load(&f->cached))) {
    /* A read-only handle keys its entries by the frame's chunks. */
    b2_frame_info in;
    int64_t nkeys = !writable && b2_frame_info_copy(f->frame, &in) == 0 ? in.nchunks : -1;
    b2_cache_discard_keys(f->env->cache, f->id, nkeys);
    if (f->cid) b2_cache_discard_keys(f->env->cache, f->cid, nkeys);
    if (f->bid) b2_cache_discard_file(f->env->cache, f->bid);
  }
  if (f->has_array || f->tensor) b2_b2nd_free(&f->array);
  free(f->npy);
  free(f->npy_posix);
  free(f->pend);
  free(f->pend_set);
  free(f->path);
  if (writable || !b2_file_park_put(f->env, f->frame)) b2_frame_close(f->frame);
  free(f);
  return rc;
}

int64_t b2_file_size(const b2_file *f) { return atomic_load(&f->size); }

int64_t b2_file_reopen_size(const b2_file *f) {
  int64_t size = atomic_load(&f->size), kept = f->writable ? b2_file_ashort_size(f) : -1;
  if (kept >= 0) return kept;
  if (f->view != B2_VIEW_NPY || !f->has_array) return size;
  char *h;
  size_t n;
  if (b2_file_view_header(f, &h, &n) < 0) return size;
  free(h);
  return size - (int64_t)f->npylen + (int64_t)n;
}
b2_frame *b2_file_frame(const b2_file *f) { return f->frame; }

int b2_file_frame_now(b2_file *f, struct stat *st) {
  pthread_mutex_lock(&f->fmu); /* a recreation swaps the frame */
  int rc = f->frame ? b2_frame_file_now(f->frame, st) : b2_fail(B2_E_IO, "%s: no frame", f->path);
  pthread_mutex_unlock(&f->fmu);
  return rc;
}
const b2_b2nd *b2_file_array(const b2_file *f) { return f->has_array || f->tensor ? &f->array : NULL; }
