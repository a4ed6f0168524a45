/*
 * warm.c - the files of a directory read one after another in its order
 * (tar, cp -r, grep -r, rsync): while one is read, the next frames are
 * opened and their first chunks decoded on a thread of their own, so that
 * their reads find the bytes ready and the decode leaves the reader's path.
 *
 * A directory inode keeps the source names of its last listing read to
 * its end (ops_dir.c shares it: b2fs_listing).  An open of a frame for
 * reading that comes next after the frame opened before it in that order
 * (directories and plain files between do not count), or of the listing's
 * first frame (a pass begins), queues the next frames of the listing (-o
 * warm=N entries ahead, 8 by default; 0: none); the thread opens each as
 * its inode's current read-only handle (kept when idle, handle.c) and
 * decodes its first B2FS_WARM_BYTES (b2_file_warm).  A frame of at most
 * 1 MiB so decoded whole is then handed to the kernel's page cache
 * (b2fs_handle_store_ahead) unless the kernel may hold pages of another
 * version of it; its open keeps them, so that its reads make no request
 * and the copy into the page cache (dear on a virtual machine whose fresh
 * pages fault in the host) is made here, beside the reader, not in its
 * open.  Frames the kernel holds no inode for, open for writing, or not
 * read in order are left alone; a full queue drops what does not fit.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "b2fs.h"

#define B2FS_WARM_AHEAD_MAX 32 /* largest -o warm= */
#define B2FS_WARM_BYTES ((int64_t)4 << 20) /* of each, from its start */
#define QUEUE_MAX 32
#define LIST_MAX 100000                   /* longer listings are not kept */

struct b2fs_warm_dir {
  b2fs_listing *lst; /* the last listing read to its end (sorted by source
                        name, as listed) */
  size_t next;       /* index after the last frame opened (0: none yet) */
  size_t queued;     /* entries below this were queued already */
};

typedef struct {
  dev_t dev;
  ino_t ino;
  int kind;
} warm_item;

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  warm_item q[QUEUE_MAX];
  int head, n;
  int started, stop;
  pthread_t thread;
  unsigned long warmed; /* frames decoded ahead (logged at the end) */
  unsigned long stored; /* of them, handed to the page cache */
} W = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void push(dev_t dev, ino_t ino, int kind) {
  pthread_mutex_lock(&W.mu);
  if (W.started && !W.stop && W.n < QUEUE_MAX) {
    W.q[(W.head + W.n) % QUEUE_MAX] = (warm_item){dev, ino, kind};
    W.n++;
    pthread_cond_signal(&W.cv);
  }
  pthread_mutex_unlock(&W.mu);
}

static void warm_one(const warm_item *it) {
  struct stat st;
  memset(&st, 0, sizeof st);
  st.st_dev = it->dev;
  st.st_ino = it->ino;
  b2fs_inode *in = b2fs_inode_find(&st, it->kind); /* pinned: one lookup */
  if (!in) return;
  b2fs_handle *h;
  if (!atomic_load(&in->rw) && b2fs_frame_peek(in, &h) == 0) {
    if (h->writable) {
      b2fs_frame_release(in, h);
    } else {
      if (h->file && b2_file_warm(h->file, B2FS_WARM_BYTES) > 0) {
        W.warmed++;
        if (b2fs_handle_store_ahead(in, h)) W.stored++;
      }
      b2fs_frame_release_warmed(in, h);
    }
  }
  b2fs_inode_forget(in, 1);
}

static void *warm_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&W.mu);
  for (;;) {
    while (!W.n && !W.stop) pthread_cond_wait(&W.cv, &W.mu);
    if (W.stop) break;
    warm_item it = W.q[W.head];
    W.head = (W.head + 1) % QUEUE_MAX;
    W.n--;
    pthread_mutex_unlock(&W.mu);
    warm_one(&it);
    pthread_mutex_lock(&W.mu);
  }
  pthread_mutex_unlock(&W.mu);
  return NULL;
}

int b2fs_warm_start(void) {
  pthread_mutex_lock(&W.mu);
  W.stop = 0;
  int rc = pthread_create(&W.thread, NULL, warm_main, NULL);
  W.started = rc == 0;
  pthread_mutex_unlock(&W.mu);
  return rc == 0 ? 0 : -rc;
}

void b2fs_warm_stop(void) {
  pthread_mutex_lock(&W.mu);
  int started = W.started;
  W.stop = 1;
  W.n = 0;
  pthread_cond_broadcast(&W.cv);
  pthread_mutex_unlock(&W.mu);
  if (started) pthread_join(W.thread, NULL);
  W.started = 0;
  if (W.warmed)
    b2fs_log("%lu frames were decoded ahead of their readers, %lu of them handed to "
             "the page cache", W.warmed, W.stored);
}

b2fs_listing *b2fs_listing_new(void) {
  b2fs_listing *x = calloc(1, sizeof *x);
  if (x) atomic_init(&x->refs, 1);
  return x;
}

void b2fs_listing_put(b2fs_listing *x) {
  if (!x || atomic_fetch_sub(&x->refs, 1) != 1) return;
  b2_ns_list_free(&x->l);
  free(x);
}

void b2fs_warm_keep(b2fs_inode *dir, b2fs_listing *x) {
  struct b2fs_warm_dir *w = NULL;
  if (x->l.n >= 2 && x->l.n <= LIST_MAX && (w = calloc(1, sizeof *w))) {
    atomic_fetch_add(&x->refs, 1);
    w->lst = x;
  }
  pthread_mutex_lock(&dir->lock);
  struct b2fs_warm_dir *old = dir->warm;
  dir->warm = w;
  pthread_mutex_unlock(&dir->lock);
  b2fs_warm_free(old);
}

void b2fs_warm_free(struct b2fs_warm_dir *w) {
  if (!w) return;
  b2fs_listing_put(w->lst);
  free(w);
}

static int by_name(const void *key, const void *e) {
  return strcmp(key, ((const b2_ns_entry *)e)->name);
}

void b2fs_warm_opened(b2fs_inode *in) {
  int ahead = b2fs_g.opts.warm;
  if (ahead > B2FS_WARM_AHEAD_MAX) ahead = B2FS_WARM_AHEAD_MAX;
  if (!W.started || ahead <= 0 || (in->kind != B2_NS_LOGICAL && in->kind != B2_NS_NPY)) return;
  char name[B2_NS_NAME_MAX + 1];
  dev_t ddev = 0; /* the directory the frame's node is in */
  ino_t dino = 0;
  pthread_mutex_lock(&in->lock);
  int have = in->node && strlen(b2_ns_node_name(in->node)) < sizeof name;
  if (have) {
    strcpy(name, b2_ns_node_name(in->node));
    b2_ns_node_dir(in->node, &ddev, &dino);
  }
  pthread_mutex_unlock(&in->lock);
  b2fs_inode *dir = have ? b2fs_dir_find(ddev, dino) : NULL;
  if (!dir) return;
  warm_item todo[B2FS_WARM_AHEAD_MAX];
  int ntodo = 0;
  pthread_mutex_lock(&dir->lock);
  struct b2fs_warm_dir *w = dir->warm;
  const b2_ns_list *l = w ? &w->lst->l : NULL;
  const b2_ns_entry *e = l ? bsearch(name, l->e, l->n, sizeof *l->e, by_name) : NULL;
  if (e) {
    size_t i = (size_t)(e - l->e);
    /* In order: the first frame of the listing (a pass begins), or a frame
     * after the one opened before with only other entries between. */
    int from_start = w->next == 0 || i < w->next;
    int in_order = 1;
    for (size_t k = from_start ? 0 : w->next; in_order && k < i; k++)
      in_order = l->e[k].kind != B2_NS_LOGICAL && l->e[k].kind != B2_NS_NPY;
    if (in_order && from_start) w->queued = 0;
    w->next = i + 1;
    size_t k = w->queued > i + 1 ? w->queued : i + 1;
    size_t lim = i + 1 + (size_t)ahead; /* entries, not only frames */
    for (; in_order && k < l->n && k < lim; k++) {
      const b2_ns_entry *x = &l->e[k];
      if (x->kind == B2_NS_LOGICAL || x->kind == B2_NS_NPY)
        todo[ntodo++] = (warm_item){ddev, x->ino, x->kind};
    }
    if (in_order) w->queued = k;
  }
  pthread_mutex_unlock(&dir->lock);
  b2fs_home_put(dir);
  for (int k = 0; k < ntodo; k++) push(todo[k].dev, todo[k].ino, todo[k].kind);
}
