/*
 * handle.c - the one b2_file per frame inode shared by all its opens.
 *
 * An open takes the inode's current handle when the frame's signature is
 * the one the handle was opened with, else opens the frame again and makes
 * that handle current; the kernel may keep its cached pages only when the
 * signature is the one of the previous open.  While the frame is open for
 * writing (whandle.c) its writable handle is current and every open takes
 * it, whatever the signature says: the changes are our own.  Read failures
 * are logged once per distinct detail.  Plain files' page-cache decision
 * lives here too.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "b2fs.h"

/* ---- registry of inodes with a writable current handle -------------------- */
static pthread_mutex_t wreg_mu = PTHREAD_MUTEX_INITIALIZER;
static b2fs_inode **wreg;
static size_t nwreg, capwreg;
static atomic_int any_writable;

void b2fs_wreg_add(b2fs_inode *in) {
  pthread_mutex_lock(&wreg_mu);
  if (nwreg == capwreg) {
    size_t ncap = capwreg ? capwreg * 2 : 16;
    b2fs_inode **n = realloc(wreg, ncap * sizeof *n);
    if (n) {
      wreg = n;
      capwreg = ncap;
    }
  }
  if (nwreg < capwreg) wreg[nwreg++] = in; /* else not followed: rare, harmless */
  any_writable = nwreg > 0;
  pthread_mutex_unlock(&wreg_mu);
}

void b2fs_wreg_del(b2fs_inode *in) {
  pthread_mutex_lock(&wreg_mu);
  for (size_t i = 0; i < nwreg; i++)
    if (wreg[i] == in) {
      wreg[i] = wreg[--nwreg];
      break;
    }
  any_writable = nwreg > 0;
  pthread_mutex_unlock(&wreg_mu);
}

int b2fs_frame_any_writable(void) { return any_writable; }

int b2fs_frame_writing(b2fs_inode *in) {
  pthread_mutex_lock(&in->lock);
  int w = in->cur && in->cur->writable;
  pthread_mutex_unlock(&in->lock);
  return w;
}

b2fs_inode **b2fs_wreg_pinned(size_t *n) {
  *n = 0;
  pthread_mutex_lock(&wreg_mu);
  b2fs_inode **out = nwreg ? malloc(nwreg * sizeof *out) : NULL;
  for (size_t i = 0; out && i < nwreg; i++)
    if (b2fs_inode_pin(wreg[i])) out[(*n)++] = wreg[i];
  pthread_mutex_unlock(&wreg_mu);
  return out;
}

int b2fs_open_view(b2fs_inode *in, int flags, b2_file **out) {
  char path[64];
  int view = in->kind == B2_NS_NPY ? B2_VIEW_NPY : B2_VIEW_LOGICAL;
  /* A contiguous frame at its node's directory and name (any depth; its
   * .b2lock sidecar found there) while that name holds the inode's file;
   * else (a sparse frame, a name that moved on) through its descriptor. */
  char name[B2_NS_NAME_MAX + 1];
  b2_ns_dir *d = !in->sparse && in->node ? b2_ns_node_where(in->node, name, sizeof name) : NULL;
  if (d) {
    struct stat st;
    dev_t dev;
    ino_t ino;
    int rc = b2_file_open_at(b2fs_g.env, b2_ns_dir_fd(d), name, view, flags, out);
    b2_ns_dir_put(d);
    b2fs_inode_ident(in, &dev, &ino);
    if (rc == 0 && b2_frame_stat(b2_file_frame(*out), &st) == 0 && st.st_dev == dev &&
        st.st_ino == ino)
      return 0;
    if (rc == 0) b2_file_close(*out);
  }
  return b2_file_open(b2fs_g.env, b2fs_fd_path(in->fd, path, sizeof path), view, flags, out);
}

/* Handles: refs counts the opens (and peeks) using a handle plus one while
 * it is its inode's current handle.  A current read-only handle nobody
 * uses is kept (frame parsed, chunk cache warm) for the next open, up to
 * idle_max of them; a handle of an older version of the frame lives until
 * its last user is done.  All under the inode lock. */
static atomic_int idle_kept;
static int idle_max = 256;

void b2fs_frame_set_idle_max(int n) { idle_max = n; }

b2fs_handle *b2fs_handle_new(b2_file *f, const b2fs_sig *sig) {
  b2fs_handle *h = calloc(1, sizeof *h);
  if (!h) return NULL;
  h->file = f;
  if (sig) h->sig = *sig;
  pthread_mutex_init(&h->errlock, NULL);
  pthread_rwlock_init(&h->use, NULL);
  return h;
}

int b2fs_handle_free(b2fs_handle *h) {
  if (!h) return 0;
  /* A writable handle's node is its inode's (freed with it): only its file
   * is closed here. */
  int rc = h->node ? b2_ns_node_close_file(h->node, NULL) : h->file ? b2_file_close(h->file) : 0;
  pthread_mutex_destroy(&h->errlock);
  pthread_rwlock_destroy(&h->use);
  free(h);
  return rc;
}

/* An idle handle leaves the idle count when used again or dropped, unless
 * it was kept for its warming (not counted). */
static void idle_left(b2fs_handle *h) {
  if (h->warmed)
    h->warmed = 0;
  else
    atomic_fetch_sub(&idle_kept, 1);
}

void b2fs_handle_take(b2fs_inode *in) {
  if (in->cur->refs++ == 1 && !in->cur->writable) idle_left(in->cur);
}

b2fs_handle *b2fs_handle_drop(b2fs_inode *in) {
  b2fs_handle *h = in->cur;
  in->cur = NULL;
  if (!h) return NULL;
  if (h->writable) {
    in->rw = 0;
    if (!in->closing) b2fs_wreg_del(in); /* else at the end of the close */
  } else if (h->refs == 1) {
    idle_left(h);
  }
  return --h->refs == 0 ? h : NULL;
}

void b2fs_handle_make_cur(b2fs_inode *in, b2fs_handle *h, b2fs_handle **old) {
  *old = b2fs_handle_drop(in);
  h->refs = 2; /* the inode and this user */
  in->cur = h;
  if (h->writable) {
    atomic_fetch_add(&in->wgen, 1);
    in->rw = 1;
    b2fs_wreg_add(in);
  } else {
    atomic_store_explicit(&h->wgen, atomic_load(&in->wgen), memory_order_relaxed);
  }
}

/* Open the frame again as the inode's current handle, with one user
 * (lock held).  *old gets a replaced handle to free after unlocking. */
static int install_new(b2fs_inode *in, const b2fs_sig *sig, b2fs_handle **old) {
  b2_file *f;
  int rc = b2fs_open_view(in, B2_OPEN_RDONLY, &f);
  if (rc < 0) {
    char path[4096];
    b2fs_log("%s: cannot open: %s", b2fs_src_path(in, path, sizeof path),
             b2_last_detail()[0] ? b2_last_detail() : b2_strerror(rc));
    return -b2fs_errno(rc);
  }
  b2fs_handle *h = b2fs_handle_new(f, sig);
  if (!h) {
    b2_file_close(f);
    return -ENOMEM;
  }
  b2fs_handle_make_cur(in, h, old);
  return 0;
}

int b2fs_handle_sig(b2fs_inode *in, b2fs_sig *sig) {
  struct stat st;
  if (fstatat(in->fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
    return -errno;
  b2fs_sig_of(in, &st, sig);
  return 0;
}

int b2fs_handle_keep(b2fs_inode *in, const b2fs_sig *sig) {
  int keep = in->open_valid && b2fs_sig_eq(&in->open_sig, sig);
  in->open_sig = *sig;
  in->open_valid = 1;
  return keep;
}

/* ---- per-thread read buffer --------------------------------------------- */
/* A worker thread that reads holds two buffers of up to B2FS_IO_MAX beside
 * the cache: libfuse's for the requests it receives and this one for its
 * replies; with libfuse's ten workers, 20 MiB.  Both count in the cache's
 * bytes while the thread lives (b2_env_charge), up to an eighth of
 * cache_size in all so that a small cache still holds chunks, and the
 * daemon's size stays near cache_size (a mapped rewrite of a 512 MiB
 * array peaked 20 MiB over the cache without this). */
static pthread_key_t buf_key;
static pthread_once_t buf_once = PTHREAD_ONCE_INIT;
static atomic_size_t bufs_charged; /* by all threads */
typedef struct tls_buf {
  size_t cap;
  size_t charged; /* this thread's share of bufs_charged */
  unsigned char data[];
} tls_buf;

static void buf_release(void *p) {
  tls_buf *b = p;
  if (b->charged) {
    b2_env_uncharge(b2fs_g.env, b->charged);
    atomic_fetch_sub(&bufs_charged, b->charged);
  }
  free(b);
}

static void buf_key_init(void) { pthread_key_create(&buf_key, buf_release); }

/* Charge what this thread holds now (its buffer of cap bytes and
 * libfuse's), as far as the eighth of cache_size allows. */
static void buf_charge(tls_buf *b) {
  size_t want = b->cap + B2FS_IO_MAX, limit = b2fs_g.opts.env.cache_size / 8;
  if (want <= b->charged) return;
  size_t add = want - b->charged, cur = atomic_load(&bufs_charged);
  do {
    if (cur >= limit) return;
    if (add > limit - cur) add = limit - cur;
  } while (!atomic_compare_exchange_weak(&bufs_charged, &cur, cur + add));
  b2_env_charge(b2fs_g.env, add);
  b->charged += add;
}

void *b2fs_tls_buf(size_t n) {
  pthread_once(&buf_once, buf_key_init);
  tls_buf *b = pthread_getspecific(buf_key);
  if (b && b->cap >= n) return b->data;
  size_t cap = n < B2FS_IO_MAX ? B2FS_IO_MAX : n;
  tls_buf *nb = malloc(sizeof *nb + cap);
  if (!nb) return NULL;
  nb->cap = cap;
  nb->charged = b ? b->charged : 0;
  free(b);
  pthread_setspecific(buf_key, nb);
  buf_charge(nb);
  return nb->data;
}

/* Frames of at most this many bytes are handed to the page cache whole
 * (b2fs_handle_store). */
#define STORE_MAX ((int64_t)1 << 20)

int b2fs_handle_store(fuse_ino_t ino, b2fs_handle *h) {
  if (!b2fs_g.se || h->writable) return 0;
  b2_file *f = h->file; /* read-only: never moved (no b2fs_use) */
  if (!f) return 0;
  int64_t size = b2_file_size(f);
  int stored = 0;
  if (size > 0 && size <= STORE_MAX && b2_file_resident(f, size)) {
    /* Sent from the cache entry itself when the frame is one chunk. */
    unsigned char *buf = b2fs_tls_buf((size_t)size);
    b2_file_pin pin = {0};
    if (buf && b2_file_pread_pin(f, buf, (size_t)size, 0, &pin) == size) {
      struct fuse_bufvec bv = FUSE_BUFVEC_INIT((size_t)size);
      bv.buf[0].mem = (void *)pin.data;
      /* Written from memory: libfuse's splice path would first copy the
       * bytes into a pipe, then the kernel from the pipe. */
      stored = fuse_lowlevel_notify_store(b2fs_g.se, ino, 0, &bv, FUSE_BUF_NO_SPLICE) == 0;
    }
    b2_file_unpin(&pin);
  }
  return stored;
}

/* Whether the kernel's pages of the inode can only be of h's version:
 * h is current and no open saw another signature (lock). */
static int pages_of(b2fs_inode *in, const b2fs_handle *h) {
  return in->cur == h && !h->writable &&
         (!in->open_valid || b2fs_sig_eq(&in->open_sig, &h->sig));
}

int b2fs_handle_store_ahead(b2fs_inode *in, b2fs_handle *h) {
  pthread_mutex_lock(&in->lock);
  int ok = pages_of(in, h) && !atomic_load(&h->stored) && in->kopen == 0;
  if (ok) atomic_fetch_add(&in->storing, 1); /* before another handle is current */
  pthread_mutex_unlock(&in->lock);
  if (!ok) return 0;
  int stored = b2fs_handle_store(b2fs_inode_id(in), h);
  pthread_mutex_lock(&in->lock);
  ok = stored && pages_of(in, h);
  atomic_fetch_sub(&in->storing, 1);
  if (ok) {
    /* The kernel holds these pages now: the next open of this version
     * keeps them. */
    in->open_sig = h->sig;
    in->open_valid = 1;
    atomic_store(&h->stored, 1);
  }
  pthread_mutex_unlock(&in->lock);
  return ok;
}

void b2fs_handle_store_wait(b2fs_inode *in) {
  /* Rare (an open racing the hand-over of its own frame) and short. */
  while (atomic_load(&in->storing)) usleep(100);
}

int b2fs_stale_reply(fuse_req_t req, b2fs_inode *in, int opens) {
  if (!atomic_load(&in->stale)) return 0;
  if (opens) {
    pthread_mutex_lock(&in->lock);
    int open_now = in->kopen > 0;
    pthread_mutex_unlock(&in->lock);
    if (open_now) return 0;
  }
  fuse_reply_err(req, ESTALE);
  return 1;
}

void b2fs_frame_kopen(b2fs_inode *in, int delta) {
  pthread_mutex_lock(&in->lock);
  in->kopen += delta;
  pthread_mutex_unlock(&in->lock);
}

/* The inode's current handle for the frame as it is now, with one more
 * user; with keep_cache, also the page-cache decision of an open. */
static int get_handle(b2fs_inode *in, b2fs_handle **h, int *keep_cache) {
  b2fs_sig sig;
  b2fs_handle *old = NULL;
  /* A writable handle being closed may be rewriting the file in place (a
   * hard-linked frame's compaction): open what it leaves. */
  pthread_mutex_lock(&in->lock);
  int closing = in->closing != NULL;
  pthread_mutex_unlock(&in->lock);
  if (closing) {
    pthread_mutex_lock(&in->wlock);
    pthread_mutex_unlock(&in->wlock);
  }
  int rc = b2fs_handle_sig(in, &sig);
  if (rc < 0) return rc;
  pthread_mutex_lock(&in->lock);
  if (in->cur && (in->cur->writable || b2fs_sig_eq(&in->cur->sig, &sig))) {
    b2fs_handle_take(in);
  } else {
    rc = install_new(in, &sig, &old);
  }
  if (rc == 0) {
    *h = in->cur;
    if (keep_cache) *keep_cache = in->cur->writable ? 1 : b2fs_handle_keep(in, &sig);
  }
  pthread_mutex_unlock(&in->lock);
  if (keep_cache) b2fs_handle_store_wait(in); /* an open: before its reply */
  b2fs_handle_free(old);
  return rc;
}

int b2fs_frame_open(b2fs_inode *in, b2fs_handle **h, int *keep_cache) {
  return get_handle(in, h, keep_cache);
}

int b2fs_frame_peek(b2fs_inode *in, b2fs_handle **h) {
  return get_handle(in, h, NULL);
}

b2fs_handle *b2fs_handle_unref(b2fs_inode *in, b2fs_handle *h, int warmed, int *close_rw) {
  b2fs_handle *dead = NULL;
  *close_rw = 0;
  pthread_mutex_lock(&in->lock);
  if (--h->refs == 0) {
    dead = h; /* an older version, no longer current */
  } else if (h->refs == 1 && in->cur == h) {
    if (h->writable) {
      *close_rw = !h->wclosing; /* a closer already at work sees refs == 1 */
      h->wclosing = 1;
    }
    else if (warmed)
      h->warmed = 1; /* kept for its reader, whatever the idle count */
    else if (atomic_fetch_add(&idle_kept, 1) >= idle_max)
      dead = b2fs_handle_drop(in);
  }
  pthread_mutex_unlock(&in->lock);
  return dead;
}

void b2fs_frame_forget(b2fs_inode *in) {
  pthread_mutex_lock(&in->lock);
  b2fs_handle *cur = in->cur;
  b2fs_handle *dead = b2fs_handle_drop(in);
  /* Files of it still open: the kernel forgets no inode it has files of,
   * so the daemon is stopping (a signal) and their releases never come;
   * the references of those opens go with it. */
  if (!dead && cur && in->kopen > 0) {
    cur->refs = 0;
    dead = cur;
  }
  pthread_mutex_unlock(&in->lock);
  if (dead && dead->writable && dead->file) {
    int rc = b2_file_flush(dead->file);
    if (rc < 0) b2fs_frame_log(in, dead, "commit at unmount", rc);
  }
  b2fs_handle_free(dead);
}

static uint64_t fnv1a(const char *s) {
  uint64_t h = 0xcbf29ce484222325u;
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3u;
  return h;
}

void b2fs_frame_log(b2fs_inode *in, b2fs_handle *h, const char *what, int rc) {
  const char *detail = b2_last_detail()[0] ? b2_last_detail() : b2_strerror(rc);
  uint64_t key = fnv1a(detail);
  size_t n = sizeof h->logged / sizeof h->logged[0];
  int repeat = 0;
  pthread_mutex_lock(&h->errlock);
  for (size_t i = 0; i < n && i < h->nlogged; i++) repeat |= h->logged[i] == key;
  if (!repeat) h->logged[h->nlogged++ % n] = key;
  pthread_mutex_unlock(&h->errlock);
  if (repeat) return;
  char path[4096];
  b2fs_log("%s: %s: %s", b2fs_src_path(in, path, sizeof path), what, detail);
}

int b2fs_plain_keep_cache(b2fs_inode *in, const struct stat *st) {
  b2fs_sig sig;
  memset(&sig, 0, sizeof sig);
  sig.size = st->st_size;
  sig.mtime = st->st_mtim;
  sig.ino = st->st_ino;
  pthread_mutex_lock(&in->lock);
  int keep = in->open_valid && b2fs_sig_eq(&in->open_sig, &sig);
  in->open_sig = sig;
  in->open_valid = 1;
  pthread_mutex_unlock(&in->lock);
  return keep;
}
