/*
 * inode.c - the inode table: one b2fs_inode per (st_dev, st_ino, kind) of
 * the source, with the kernel's lookup count; an inode dies (its O_PATH
 * descriptor closed) when the kernel forgets its last lookup.  The FUSE
 * inode number is the inode's address (the root is FUSE_ROOT_ID).  When a
 * frame's file is replaced by a rewrite of our own (compaction, new
 * parameters) the inode is rebound to the new file under the same number.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "b2fs.h"

b2fs b2fs_g;

static size_t hash_key(dev_t dev, ino_t ino, int kind) {
  uint64_t h = (uint64_t)dev * 0x9e3779b97f4a7c15u ^ (uint64_t)ino ^
               ((uint64_t)kind << 61);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdu;
  h ^= h >> 33;
  return (size_t)h;
}

int b2fs_table_init(void) {
  pthread_mutex_init(&b2fs_g.table_lock, NULL);
  b2fs_g.nbuckets = 1024;
  b2fs_g.buckets = calloc(b2fs_g.nbuckets, sizeof *b2fs_g.buckets);
  return b2fs_g.buckets ? 0 : -1;
}

/* A frame removed while open was only hidden: delete it now. */
static void remove_doomed(b2fs_inode *in) {
  if (!in->doomed) return;
  if (b2_ns_delete(in->doomed_dir, in->doomed) < 0)
    b2fs_log("cannot remove the deleted frame %s: %s", in->doomed, b2_last_detail());
  close(in->doomed_dir);
  free(in->doomed);
  in->doomed = NULL;
}

void b2fs_doom(b2fs_inode *in, int dirfd, const char *hidden, int linked) {
  in->hidlink = 1;
  in->hidlinked = linked;
  in->doomed = strdup(hidden);
  in->doomed_dir = in->doomed ? fcntl(dirfd, F_DUPFD_CLOEXEC, 0) : -1;
  if (in->doomed && in->doomed_dir < 0) {
    free(in->doomed);
    in->doomed = NULL;
  }
  if (!in->doomed) b2fs_log("cannot keep the name of a deleted open frame: %s", hidden);
}

void b2fs_undoom_linked(b2fs_inode *in) {
  struct stat st;
  if (!in->doomed || !in->hidlinked) return;
  if (fstatat(in->doomed_dir, in->doomed, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
      S_ISREG(st.st_mode) && st.st_nlink > 1) {
    remove_doomed(in);
    in->hidlink = in->hidlinked = 0;
  }
}

size_t b2fs_doomed_pin(b2fs_inode ***out) {
  *out = NULL;
  pthread_mutex_lock(&b2fs_g.table_lock);
  size_t n = 0, cap = 0;
  for (size_t b = 0; b < b2fs_g.nbuckets; b++)
    for (b2fs_inode *in = b2fs_g.buckets[b]; in; in = in->next) {
      if (!in->hidlink || !in->nlookup) continue;
      if (n == cap) {
        b2fs_inode **more = realloc(*out, (cap = cap ? 2 * cap : 8) * sizeof *more);
        if (!more) goto done;
        *out = more;
      }
      in->nlookup++;
      (*out)[n++] = in;
    }
done:
  pthread_mutex_unlock(&b2fs_g.table_lock);
  return n;
}

b2fs_hooks b2fs_hook;

static void inode_free(b2fs_inode *in) {
  if (b2fs_hook.release) b2fs_hook.release(in); /* its store state, its handle */
  remove_doomed(in);
  if (in->fd >= 0) close(in->fd);
  for (int i = 0; i < in->nold; i++) close(in->old_fds[i]);
  if (in->has_pin) close(in->pin_fd);
  free(in->old_fds);
  free(in->places);
  free(in->kname);
  b2_ns_node_free(in->node); /* its file was closed with the handle */
  b2_ns_dir_put(in->nsdir);
  pthread_mutex_destroy(&in->lock);
  pthread_mutex_destroy(&in->wlock);
  pthread_mutex_destroy(&in->nslock);
  free(in);
}

void b2fs_table_destroy(void) {
  for (size_t b = 0; b < b2fs_g.nbuckets; b++) {
    b2fs_inode *in = b2fs_g.buckets[b];
    while (in) {
      b2fs_inode *next = in->next;
      inode_free(in);
      in = next;
    }
  }
  free(b2fs_g.buckets);
  b2fs_g.buckets = NULL;
  b2_ns_dir_put(b2fs_g.root.nsdir);
  b2fs_g.root.nsdir = NULL;
  pthread_mutex_destroy(&b2fs_g.table_lock);
}

b2fs_inode *b2fs_inode_get(fuse_ino_t ino) {
  if (ino == FUSE_ROOT_ID) return &b2fs_g.root;
  return (b2fs_inode *)(uintptr_t)ino;
}

fuse_ino_t b2fs_inode_id(b2fs_inode *in) {
  return in == &b2fs_g.root ? FUSE_ROOT_ID : (fuse_ino_t)(uintptr_t)in;
}

/* Double the buckets when the table gets crowded (under the lock). */
static void grow(void) {
  size_t n = b2fs_g.nbuckets * 2;
  b2fs_inode **nb = calloc(n, sizeof *nb);
  if (!nb) return; /* keep the longer chains */
  for (size_t b = 0; b < b2fs_g.nbuckets; b++) {
    b2fs_inode *in = b2fs_g.buckets[b];
    while (in) {
      b2fs_inode *next = in->next;
      size_t h = hash_key(in->dev, in->ino, in->kind) & (n - 1);
      in->next = nb[h];
      nb[h] = in;
      in = next;
    }
  }
  free(b2fs_g.buckets);
  b2fs_g.buckets = nb;
  b2fs_g.nbuckets = n;
}

/* Was the name the O_PATH descriptor fd was opened at removed (the file
 * itself may live on under other names)? */
static int name_gone(int fd) {
  char proc[64], buf[PATH_MAX];
  static const char tail[] = " (deleted)";
  ssize_t n = readlink(b2fs_fd_path(fd, proc, sizeof proc), buf, sizeof buf);
  size_t k = sizeof tail - 1;
  return n >= (ssize_t)k && (size_t)n < sizeof buf && memcmp(buf + n - k, tail, k) == 0;
}

/* The inode of source entry (dev, ino) of that kind, or NULL (table
 * lock held). */
static b2fs_inode *table_find(dev_t dev, ino_t ino, int kind) {
  size_t h = hash_key(dev, ino, kind) & (b2fs_g.nbuckets - 1);
  for (b2fs_inode *in = b2fs_g.buckets[h]; in; in = in->next)
    if (in->dev == dev && in->ino == ino && in->kind == kind) return in;
  return NULL;
}

b2fs_inode *b2fs_inode_ref(int fd, const struct stat *st, int kind, int sparse) {
  pthread_mutex_lock(&b2fs_g.table_lock);
  size_t h = hash_key(st->st_dev, st->st_ino, kind) & (b2fs_g.nbuckets - 1);
  b2fs_inode *in = table_find(st->st_dev, st->st_ino, kind);
  if (in) {
    in->nlookup++;
    if (st->st_nlink > 1 && (S_ISREG(st->st_mode) || S_ISLNK(st->st_mode)) &&
        name_gone(in->fd)) {
      /* A hard link (of a file or symbolic link) found under another name
       * than the one removed:
       * the inode's descriptor names the file by a live name again
       * (writers and messages find the file through it). */
      int *olds = realloc(in->old_fds, (size_t)(in->nold + 1) * sizeof *olds);
      if (olds) {
        in->old_fds = olds;
        olds[in->nold++] = in->fd;
        in->fd = fd;
        fd = -1;
      }
    }
    pthread_mutex_unlock(&b2fs_g.table_lock);
    if (fd >= 0) close(fd);
    return in;
  }
  in = calloc(1, sizeof *in);
  if (!in) {
    pthread_mutex_unlock(&b2fs_g.table_lock);
    close(fd);
    return NULL;
  }
  in->fd = fd;
  in->dev = st->st_dev;
  in->ino = st->st_ino;
  in->shown = st->st_ino;
  in->kind = kind;
  in->sparse = sparse;
  in->nlookup = 1;
  pthread_mutex_init(&in->lock, NULL);
  pthread_mutex_init(&in->wlock, NULL);
  pthread_mutex_init(&in->nslock, NULL);
  in->next = b2fs_g.buckets[h];
  b2fs_g.buckets[h] = in;
  if (++b2fs_g.count > b2fs_g.nbuckets) grow();
  pthread_mutex_unlock(&b2fs_g.table_lock);
  return in;
}

int b2fs_inode_pin(b2fs_inode *in) {
  if (in == &b2fs_g.root) return 1;
  pthread_mutex_lock(&b2fs_g.table_lock);
  int ok = in->nlookup > 0;
  if (ok) in->nlookup++;
  pthread_mutex_unlock(&b2fs_g.table_lock);
  return ok;
}

b2fs_inode *b2fs_inode_find(const struct stat *st, int kind) {
  pthread_mutex_lock(&b2fs_g.table_lock);
  b2fs_inode *in = table_find(st->st_dev, st->st_ino, kind);
  if (in) in->nlookup++;
  pthread_mutex_unlock(&b2fs_g.table_lock);
  return in;
}

/* Unhook in from its bucket (table lock held). */
static void unhook(b2fs_inode *in) {
  size_t h = hash_key(in->dev, in->ino, in->kind) & (b2fs_g.nbuckets - 1);
  for (b2fs_inode **pp = &b2fs_g.buckets[h]; *pp; pp = &(*pp)->next)
    if (*pp == in) {
      *pp = in->next;
      return;
    }
}

void b2fs_inode_rebind(b2fs_inode *in, int fd, const struct stat *st) {
  pthread_mutex_lock(&b2fs_g.table_lock);
  /* Other threads may be using the old descriptor: it is never closed
   * under them but made to name the new file (dup3: one atomic step), so
   * the old version's space is freed and the inode keeps one descriptor
   * however often its frame is rewritten.  The file whose number is shown
   * is first pinned (a descriptor of its own), so that no other file gets
   * that number. */
  int old = in->fd;
  if (!in->pinned && in->ino == in->shown) { /* leaving the file shown */
    if (in->has_pin) {
      in->pinned = dup3(old, in->pin_fd, O_CLOEXEC) >= 0;
    } else {
      in->pin_fd = fcntl(old, F_DUPFD_CLOEXEC, 0);
      in->pinned = in->has_pin = in->pin_fd >= 0;
    }
  }
  /* (Without a pin, the old descriptors are all kept, as the pin would.) */
  if (in->pinned && dup3(fd, old, O_CLOEXEC) == old) {
    close(fd);
    fd = old;
  } else {
    int *olds = realloc(in->old_fds, (size_t)(in->nold + 1) * sizeof *olds);
    if (olds) {
      in->old_fds = olds;
      olds[in->nold++] = old;
    } /* else the old descriptor leaks */
  }
  unhook(in);
  in->dev = st->st_dev;
  in->ino = st->st_ino;
  in->sparse = S_ISDIR(st->st_mode);
  in->fd = fd;
  size_t h = hash_key(in->dev, in->ino, in->kind) & (b2fs_g.nbuckets - 1);
  in->next = b2fs_g.buckets[h];
  b2fs_g.buckets[h] = in;
  pthread_mutex_unlock(&b2fs_g.table_lock);
  pthread_mutex_lock(&in->lock);
  in->attr_valid = 0;
  pthread_mutex_unlock(&in->lock);
}

void b2fs_inode_unpin(b2fs_inode *in) {
  pthread_mutex_lock(&b2fs_g.table_lock);
  if (in->pinned && dup3(in->fd, in->pin_fd, O_CLOEXEC) >= 0) {
    in->pinned = 0;
    in->shown = in->ino;
  }
  pthread_mutex_unlock(&b2fs_g.table_lock);
}

ino_t b2fs_inode_shown(dev_t dev, ino_t ino, int kind) {
  pthread_mutex_lock(&b2fs_g.table_lock);
  b2fs_inode *in = table_find(dev, ino, kind);
  ino_t shown = in ? (ino_t)in->shown : ino;
  pthread_mutex_unlock(&b2fs_g.table_lock);
  return shown;
}

void b2fs_inode_ident(b2fs_inode *in, dev_t *dev, ino_t *ino) {
  pthread_mutex_lock(&b2fs_g.table_lock);
  *dev = in->dev;
  *ino = in->ino;
  pthread_mutex_unlock(&b2fs_g.table_lock);
}

void b2fs_nslock2(b2fs_inode *a, b2fs_inode *b) {
  if (a == b) b = NULL;
  if (a && b && (uintptr_t)a > (uintptr_t)b) {
    b2fs_inode *t = a;
    a = b;
    b = t;
  }
  if (a) pthread_mutex_lock(&a->nslock);
  if (b) pthread_mutex_lock(&b->nslock);
}

void b2fs_nsunlock2(b2fs_inode *a, b2fs_inode *b) {
  if (a == b) b = NULL;
  if (a) pthread_mutex_unlock(&a->nslock);
  if (b) pthread_mutex_unlock(&b->nslock);
}

void b2fs_inode_forget(b2fs_inode *in, uint64_t n) {
  if (in == &b2fs_g.root) return;
  pthread_mutex_lock(&b2fs_g.table_lock);
  if (n > in->nlookup) {
    b2fs_log("internal: forget of %llu lookups, %llu known",
             (unsigned long long)n, (unsigned long long)in->nlookup);
    n = in->nlookup;
  }
  in->nlookup -= n;
  if (in->nlookup) {
    pthread_mutex_unlock(&b2fs_g.table_lock);
    return;
  }
  if (!in->outside) { /* store members are not in the table */
    unhook(in);
    b2fs_g.count--;
  }
  pthread_mutex_unlock(&b2fs_g.table_lock);
  fuse_ino_t up = in->kparent; /* pinned by b2fs_shed_seen */
  inode_free(in);
  if (up) b2fs_inode_forget(b2fs_inode_get(up), 1);
}

const char *b2fs_fd_path(int fd, char *buf, size_t cap) {
  snprintf(buf, cap, "/proc/self/fd/%d", fd);
  return buf;
}

/* The namespace directory of directory inode `dir` (one more reference),
 * made at its first use from the inode's descriptor; NULL if that fails. */
b2_ns_dir *b2fs_dir_ns(b2fs_inode *dir) {
  b2_ns_dir *d = atomic_load(&dir->nsdir), *nd = NULL;
  if (!d) {
    struct stat dst;
    memset(&dst, 0, sizeof dst);
    dst.st_dev = dir->dev;
    dst.st_ino = dir->ino;
    if (b2_ns_dir_open(dir->fd, &dst, &nd) < 0) return NULL;
    if (atomic_compare_exchange_strong(&dir->nsdir, &d, nd))
      d = nd;
    else
      b2_ns_dir_put(nd); /* another thread made it first: d is that one */
  }
  /* the directory inode is pinned by the caller: its reference stays */
  return b2_ns_dir_ref(d);
}

int b2fs_set_home(b2fs_inode *in, const struct stat *dst, const char *name) {
  if (in->kind != B2_NS_LOGICAL && in->kind != B2_NS_NPY) return 0; /* a frame's view */
  pthread_mutex_lock(&in->lock);
  /* A node open for writing moves only with renames through the mount. */
  int keep = in->node && (b2_ns_node_file(in->node) ||
                          b2_ns_node_is_at(in->node, dst->st_dev, dst->st_ino, name));
  pthread_mutex_unlock(&in->lock);
  if (keep) return 0;
  b2fs_inode *dir = b2fs_dir_find(dst->st_dev, dst->st_ino);
  b2_ns_dir *d = dir ? b2fs_dir_ns(dir) : NULL;
  b2fs_home_put(dir);
  if (!d) return 0; /* not known: opens go by the real path */
  b2_ns_node *n = NULL;
  int rc = 0;
  pthread_mutex_lock(&in->lock);
  if (!in->node) {
    rc = b2_ns_node_new(d, name, in->kind, &n);
    if (rc == 0) in->node = n;
  } else if (!b2_ns_node_file(in->node)) {
    rc = b2_ns_node_place(in->node, d, name);
  }
  pthread_mutex_unlock(&in->lock);
  b2_ns_dir_put(d);
  return rc < 0 ? -b2_to_errno(rc) : 0;
}

b2_ns_node *b2fs_node_swap(b2fs_inode *in, b2_ns_node *n) {
  b2_ns_node *old = in->node;
  in->node = n;
  return old;
}

struct b2fs_place {
  dev_t dev; /* the directory's numbers */
  ino_t ino;
  char name[B2_NS_NAME_MAX + 1];
};

#define PLACES_MAX 8

void b2fs_note_place(b2fs_inode *in, const struct stat *dst, const char *name) {
  if (strlen(name) > B2_NS_NAME_MAX) return;
  pthread_mutex_lock(&in->lock);
  int i;
  for (i = 0; i < in->nplaces; i++) {
    const struct b2fs_place *p = &in->places[i];
    if (p->dev == dst->st_dev && p->ino == dst->st_ino && strcmp(p->name, name) == 0) break;
  }
  if (i == in->nplaces && !in->places) in->places = calloc(PLACES_MAX, sizeof *in->places);
  if (i == in->nplaces && in->places) { /* new: the oldest makes room */
    if (in->nplaces == PLACES_MAX) {
      memmove(in->places, in->places + 1, (PLACES_MAX - 1) * sizeof *in->places);
      in->nplaces--;
    }
    struct b2fs_place *p = &in->places[in->nplaces++];
    p->dev = dst->st_dev;
    p->ino = dst->st_ino;
    snprintf(p->name, sizeof p->name, "%s", name);
  }
  pthread_mutex_unlock(&in->lock);
}

/* Does entry `name` of d hold the file of inode `in`? */
static int holds(b2fs_inode *in, b2_ns_dir *d, const char *name) {
  struct stat st;
  dev_t dev;
  ino_t ino;
  b2fs_inode_ident(in, &dev, &ino); /* a rewrite may rebind it meanwhile */
  return fstatat(b2_ns_dir_fd(d), name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_dev == dev &&
         st.st_ino == ino;
}

/* b2fs_home's search of the other places, latest first. */
static b2_ns_dir *other_place(b2fs_inode *in, char *name, size_t cap) {
  pthread_mutex_lock(&in->lock);
  int n = in->nplaces;
  struct b2fs_place *copy = n ? malloc((size_t)n * sizeof *copy) : NULL;
  if (copy) memcpy(copy, in->places, (size_t)n * sizeof *copy);
  pthread_mutex_unlock(&in->lock);
  b2_ns_dir *found = NULL;
  for (int i = copy ? n - 1 : -1; i >= 0 && !found; i--) {
    b2fs_inode *dir = b2fs_dir_find(copy[i].dev, copy[i].ino);
    b2_ns_dir *d = dir ? b2fs_dir_ns(dir) : NULL;
    b2fs_home_put(dir);
    if (d && strlen(copy[i].name) < cap && holds(in, d, copy[i].name)) {
      snprintf(name, cap, "%s", copy[i].name);
      found = d;
    } else if (d) {
      b2_ns_dir_put(d);
    }
  }
  free(copy);
  if (!found) return NULL;
  pthread_mutex_lock(&in->lock);
  if (in->node && !b2_ns_node_file(in->node)) (void)b2_ns_node_place(in->node, found, name);
  pthread_mutex_unlock(&in->lock);
  return found;
}

b2_ns_dir *b2fs_home(b2fs_inode *in, char *name, size_t cap, int verify) {
  pthread_mutex_lock(&in->lock);
  b2_ns_dir *d = in->node ? b2_ns_node_where(in->node, name, cap) : NULL;
  pthread_mutex_unlock(&in->lock);
  if (!d) return NULL;
  if (verify && !holds(in, d, name)) {
    b2_ns_dir_put(d);
    return other_place(in, name, cap);
  }
  return d;
}

b2fs_inode *b2fs_dir_find(dev_t dev, ino_t ino) {
  if (b2fs_g.root.dev == dev && b2fs_g.root.ino == ino) return &b2fs_g.root;
  struct stat st;
  memset(&st, 0, sizeof st);
  st.st_dev = dev;
  st.st_ino = ino;
  return b2fs_inode_find(&st, B2_NS_PLAIN);
}

void b2fs_home_put(b2fs_inode *dir) {
  if (dir && dir != &b2fs_g.root) b2fs_inode_forget(dir, 1);
}

/* ---- telling the kernel a name is gone ----------------------------------- */

static atomic_int notices; /* told from threads of their own, not yet done */

typedef struct notice {
  b2fs_inode *dir, *in;
  char name[];
} notice;

static void *tell(void *arg) {
  notice *n = arg;
  if (b2fs_g.se)
    (void)fuse_lowlevel_notify_delete(b2fs_g.se, b2fs_inode_id(n->dir), b2fs_inode_id(n->in),
                                      n->name, strlen(n->name));
  b2fs_home_put(n->dir);
  b2fs_inode_forget(n->in, 1);
  free(n);
  atomic_fetch_sub(&notices, 1);
  return NULL;
}

void b2fs_notify_gone(b2fs_inode *dir, b2fs_inode *in, const char *name) {
  size_t len = strlen(name) + 1;
  notice *n = malloc(sizeof *n + len);
  pthread_attr_t attr;
  pthread_t t;
  int made = 0;
  if (n && pthread_attr_init(&attr) == 0) {
    n->dir = dir;
    n->in = in;
    memcpy(n->name, name, len);
    atomic_fetch_add(&notices, 1);
    (void)pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    made = pthread_create(&t, &attr, tell, n) == 0;
    if (!made) atomic_fetch_sub(&notices, 1);
    pthread_attr_destroy(&attr);
  }
  if (!made) { /* the kernel finds the inode stale at its next use */
    b2fs_home_put(dir);
    b2fs_inode_forget(in, 1);
    free(n);
  }
}

void b2fs_notify_drain(void) {
  for (int i = 0; i < 5000 && atomic_load(&notices) > 0; i++) usleep(1000);
}
