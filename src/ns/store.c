/*
 * store.c - a python-blosc2 store of SOURCE as a namespace directory node
 * (see b2_ns.h): the store entry's current snapshot (b2_store.h), shared by
 * reference counts, opened again when the store changed (b2_store_stale,
 * checked at most once per `recheck` seconds, or at the next use after
 * b2_ns_store_recheck), and a damaged store not opened again more often.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "b2_error.h"
#include "b2_ns.h"
#include "b2_store.h"

struct b2_ns_snap {
  b2_store *s;
  atomic_int refs;
};

struct b2_ns_store {
  pthread_mutex_t mu;
  b2_ns_snap *snap;        /* current snapshot, NULL: none (yet) */
  struct timespec checked; /* when it was last found current */
  int due;                 /* checked again at the next use (recheck) */
  int dirty;               /* opened again at the next use (changed here) */
  int pending;             /* value files made, renamed or removed here
                              since the snapshot: lookups look where they
                              lie, the next listing or change of groups
                              opens it again (not each value: a copy of
                              many files into a store, or rm -r, would walk
                              it each time) */
  int err;                 /* code of the last failed open (0: none) */
  char *reported;          /* detail of the last failure reported */
  /* where it is and who hears of it (b2_ns_store_bind) */
  b2_env *env;
  int fd;
  double recheck;
  void (*note)(void *arg, const char *line);
  void *arg;
};

/* A key of a store: a group or a value, as a child node. */
struct b2_ns_key {
  b2_ns_store *store;
  char *_Atomic key;       /* changes when a group above moves (b2_ns_key_moved);
                              the strings it held are kept until the node is
                              freed, for readers that loaded them */
  char **old;
  int nold;
  atomic_int gone;         /* another group moved over it */
  int group;
  pthread_mutex_t mu;      /* guards the size remembered */
  int64_t size;            /* size shown, for size_snap */
  b2_ns_snap *size_snap;
};

/* An open value: its snapshot, its entry, its file (NULL: the raw
 * frame of an object). */
struct b2_ns_value {
  b2_ns_snap *snap;
  int64_t i;
  b2_file *f;
};

b2_ns_store *b2_ns_store_new(void) {
  b2_ns_store *n = calloc(1, sizeof *n);
  if (n) pthread_mutex_init(&n->mu, NULL);
  if (n) n->fd = -1;
  return n;
}

void b2_ns_store_bind(b2_ns_store *n, b2_env *env, int fd, double recheck,
                      void (*note)(void *arg, const char *line), void *arg) {
  n->env = env;
  n->fd = fd;
  n->recheck = recheck;
  n->note = note;
  n->arg = arg;
}

void b2_ns_store_free(b2_ns_store *n) {
  if (!n) return;
  b2_ns_snap_put(n->snap);
  free(n->reported);
  pthread_mutex_destroy(&n->mu);
  free(n);
}

b2_store *b2_ns_snap_store(const b2_ns_snap *p) { return p->s; }

b2_ns_snap *b2_ns_snap_ref(b2_ns_snap *p) {
  atomic_fetch_add(&p->refs, 1);
  return p;
}

void b2_ns_snap_put(b2_ns_snap *p) {
  if (p && atomic_fetch_sub(&p->refs, 1) == 1) {
    b2_store_close(p->s);
    free(p);
  }
}

/* Seconds since n was last found current (mutex held); b2_ns_store_recheck
 * makes it too long ago, whatever the clock (a monotonic clock starts near
 * 0 at boot, so a zeroed time is not long ago on a machine up for less
 * than the interval). */
static double since(const b2_ns_store *n) {
  if (n->due) return INFINITY;
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)(now.tv_sec - n->checked.tv_sec) + (now.tv_nsec - n->checked.tv_nsec) / 1e9;
}

/* n found current now (mutex held). */
static void checked_now(b2_ns_store *n) {
  n->due = 0;
  n->dirty = 0;
  clock_gettime(CLOCK_MONOTONIC, &n->checked);
}

/* Open the store entry open at fd (its name, from the descriptor, decides
 * the form: .b2e, .b2d, .b2z). */
static int open_store(b2_env *env, int fd, b2_store **s) {
  char proc[64], real[PATH_MAX];
  snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
  ssize_t k = readlink(proc, real, sizeof real - 1);
  real[k < 0 ? 0 : k] = 0;
  const char *base = strrchr(real, '/');
  return b2_store_open_named(env, AT_FDCWD, proc, base ? base + 1 : real, s);
}

int b2_ns_store_get(b2_ns_store *n, b2_env *env, int fd, double recheck, b2_ns_snap **out,
                    int *report) {
  *report = 0;
  pthread_mutex_lock(&n->mu);
  b2_ns_snap *p = n->snap;
  if (p && !n->dirty && (since(n) < recheck || !b2_store_stale(p->s))) {
    if (since(n) >= recheck) checked_now(n);
    *out = b2_ns_snap_ref(p);
    pthread_mutex_unlock(&n->mu);
    return 0;
  }
  if (!p && n->err && since(n) < recheck) {
    pthread_mutex_unlock(&n->mu); /* damaged: not opened again before recheck */
    return b2_fail(B2_E_IO, "%s", n->reported ? n->reported : "the store could not be opened");
  }
  b2_store *s = NULL;
  int rc = open_store(env, fd, &s);
  checked_now(n);
  b2_ns_snap *np = rc == 0 ? calloc(1, sizeof *np) : NULL;
  if (rc == 0 && !np) {
    b2_store_close(s);
    rc = b2_fail(B2_E_NOMEM, "out of memory");
  }
  if (rc < 0) {
    const char *d = b2_last_detail();
    if (!n->reported || strcmp(n->reported, d) != 0) {
      *report = 1;
      free(n->reported);
      n->reported = strdup(d);
    }
    n->err = rc;
    b2_ns_snap_put(n->snap); /* a damaged store shows nothing of its old self */
    n->snap = NULL;
    pthread_mutex_unlock(&n->mu);
    return rc;
  }
  *report = 1; /* a new snapshot: its notes are new */
  n->pending = 0;
  free(n->reported);
  n->reported = NULL;
  n->err = 0;
  np->s = s;
  atomic_init(&np->refs, 2); /* the node's and the caller's */
  b2_ns_snap_put(n->snap);
  n->snap = np;
  pthread_mutex_unlock(&n->mu);
  *out = np;
  return 0;
}

void b2_ns_store_recheck(b2_ns_store *n) {
  pthread_mutex_lock(&n->mu);
  n->due = 1;
  pthread_mutex_unlock(&n->mu);
}

/* Open the store again at its next use: changed here (a directory's
 * times may not tell two changes within one clock tick apart). */
static void refresh(b2_ns_store *n) {
  pthread_mutex_lock(&n->mu);
  n->dirty = 1;
  pthread_mutex_unlock(&n->mu);
}

/* Before a listing, or a decision on groups: the value files changed here
 * since the snapshot in it.  1 when there were such changes. */
static int settle(b2_ns_store *n) {
  pthread_mutex_lock(&n->mu);
  int pending = n->pending;
  if (pending) n->dirty = 1;
  pthread_mutex_unlock(&n->mu);
  return pending;
}

/* Were value files changed here since the snapshot? */
static int pending(b2_ns_store *n) {
  pthread_mutex_lock(&n->mu);
  int yes = n->pending;
  pthread_mutex_unlock(&n->mu);
  return yes;
}

/* ---- keys: the store's groups and values as child nodes ------------------ */

/* Reads of a store that another process changes under its lock (python-
 * blosc2 with locking=True) fail with B2_E_STALE: the store is read again
 * and the call retried, at most this often. */
#define STALE_TRIES 20

/* The current snapshot of a bound store node, its reports handed to the
 * note callback. */
static int snap_get(b2_ns_store *n, b2_ns_snap **p) {
  int report = 0;
  int rc = b2_ns_store_get(n, n->env, n->fd, n->recheck, p, &report);
  if (report && n->note) { /* a new snapshot's notes, or a failure not told yet */
    if (rc < 0) n->note(n->arg, b2_last_detail()[0] ? b2_last_detail() : b2_strerror(rc));
    for (int k = 0; rc == 0 && k < b2_store_nnotes(b2_ns_snap_store(*p)); k++)
      n->note(n->arg, b2_store_note(b2_ns_snap_store(*p), k));
  }
  return rc;
}

/* The entry of key k (NULL: the root group) in snapshot p; B2_E_NOENT when
 * the store no longer has it. */
static int64_t entry_of(const b2_ns_key *k, b2_ns_snap *p) {
  if (!k) return 0;
  const char *key = b2_ns_key_name(k);
  int64_t i = atomic_load(&k->gone)    ? -1
              : k->group ? b2_store_find_group(b2_ns_snap_store(p), key)
                         : b2_store_find(b2_ns_snap_store(p), key);
  return i < 0 ? b2_fail(B2_E_NOENT, "%s: no longer in the store", key) : i;
}

/* Snapshot and entry of key k of store n. */
static int resolve(b2_ns_store *n, const b2_ns_key *k, b2_ns_snap **p, int64_t *i) {
  int rc = snap_get(n, p);
  if (rc < 0) return rc;
  *i = entry_of(k, *p);
  if (*i < 0) {
    b2_ns_snap_put(*p);
    return (int)*i;
  }
  return 0;
}

/* The same for a group (NULL: the root); B2_E_NOTDIR for a value. */
static int resolve_group(b2_ns_store *n, const b2_ns_key *dir, b2_ns_snap **p, int64_t *g) {
  if (dir && !dir->group) return b2_fail(B2_E_NOTDIR, "%s: not a group", b2_ns_key_name(dir));
  return resolve(n, dir, p, g);
}

/* Tell the store node's listener about key k: "KEY: what: detail". */
static void tell2(const b2_ns_key *k, const char *what, const char *detail) {
  b2_ns_store *n = k->store;
  if (!n->note) return;
  char line[1024];
  snprintf(line, sizeof line, "%s: %s%s%s", b2_ns_key_name(k), what ? what : "", what ? ": " : "",
           detail);
  n->note(n->arg, line);
}

static void tell(const b2_ns_key *k, const char *detail) { tell2(k, NULL, detail); }

const char *b2_ns_key_name(const b2_ns_key *k) { return atomic_load(&((b2_ns_key *)k)->key); }
int b2_ns_key_is_group(const b2_ns_key *k) { return k->group; }

int b2_ns_key_same(const b2_ns_key *a, const b2_ns_key *b) {
  return a->store == b->store && a->group == b->group && !atomic_load(&a->gone) &&
         !atomic_load(&b->gone) && strcmp(b2_ns_key_name(a), b2_ns_key_name(b)) == 0;
}

int b2_ns_key_moved(b2_ns_key *k, const char *from, const char *to) {
  pthread_mutex_lock(&k->mu);
  const char *cur = b2_ns_key_name(k);
  int rc = 0;
  if (b2_store_key_below(cur, from)) {
    size_t tl = strlen(to), rest = strlen(cur + strlen(from));
    char *nk = malloc(tl + rest + 1);
    char **old = realloc(k->old, (size_t)(k->nold + 1) * sizeof *old);
    if (old) k->old = old;
    if (!nk || !old) {
      free(nk);
      atomic_store(&k->gone, 1); /* cannot follow: gone for its users */
      rc = b2_fail(B2_E_NOMEM, "out of memory");
    } else {
      memcpy(nk, to, tl);
      memcpy(nk + tl, cur + strlen(from), rest + 1);
      k->old[k->nold++] = atomic_exchange(&k->key, nk);
    }
  } else if (b2_store_key_below(cur, to)) {
    atomic_store(&k->gone, 1);
  }
  pthread_mutex_unlock(&k->mu);
  return rc;
}

void b2_ns_key_free(b2_ns_key *k) {
  if (!k) return;
  free(atomic_load(&k->key));
  for (int j = 0; j < k->nold; j++) free(k->old[j]);
  free(k->old);
  b2_ns_snap_put(k->size_snap);
  pthread_mutex_destroy(&k->mu);
  free(k);
}

/* Open directory `rel` (len bytes: a/b) below the store directory fd,
 * following no symbolic link (with `make`, each component made first when
 * missing): an O_PATH descriptor or a code. */
static int open_dir_beneath(int fd, const char *rel, size_t len, int make, uid_t uid,
                            gid_t gid) {
  char buf[PATH_MAX];
  if (len >= sizeof buf) return b2_fail(B2_E_NAMETOOLONG, "%.64s...: path too long", rel);
  memcpy(buf, rel, len);
  buf[len] = 0;
  int cur = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  for (char *q = buf, *slash; cur >= 0 && len; q = slash + 1) {
    slash = strchr(q, '/');
    if (slash) *slash = 0;
    if (make && mkdirat(cur, q, 0755) == 0) {
      if ((uid != (uid_t)-1 || gid != (gid_t)-1) &&
          fchownat(cur, q, uid, gid, AT_SYMLINK_NOFOLLOW) != 0) {
        int e = errno;
        close(cur);
        return b2_fail(b2_from_errno(e), "%s: cannot give it its owner: %s", buf, strerror(e));
      }
    } else if (make && errno != EEXIST) {
      int e = errno;
      close(cur);
      return b2_fail(b2_from_errno(e), "%s: cannot make it: %s", buf, strerror(e));
    }
    int next = openat(cur, q, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int e = errno;
    close(cur);
    if (next < 0) return b2_fail(b2_from_errno(e), "%s: %s", buf, strerror(e));
    cur = next;
    if (!slash) break;
  }
  return cur < 0 ? b2_fail(b2_from_errno(errno), "%s: %s", buf, strerror(errno)) : cur;
}

/* Has group g of a .b2d's snapshot p, in its directory, a file or
 * directory for shown name `name` that the snapshot lacks (made since,
 * here or behind the mount)?  0: none; 1: a value's file, into *file (an
 * SChunk's NAME.b2f, or for NAME.npy the array's NAME.b2nd or the bytes
 * kept, NAME.npy.b2f); 2: a directory (a group the snapshot lacks). */
static int newer_entry(b2_ns_store *n, b2_ns_snap *p, int64_t g, const char *name,
                       b2_ns_store_file *file) {
  char rel[B2_STORE_KEY_CAP], f[3][B2_NS_NAME_MAX + 1];
  if (b2_store_group_dir(b2_ns_snap_store(p), g, rel, sizeof rel) < 0) return 0;
  size_t len = strlen(name);
  int nf = snprintf(f[0], sizeof f[0], "%s", name) < (int)sizeof f[0] &&
           b2_store_file_name(name, B2_STORE_SCHUNK, f[1], sizeof f[1]) == 0 ? 2 : 0;
  if (nf == 2 && b2_ns_shown_npy(name)) {
    char stem[B2_NS_NAME_MAX + 1];
    snprintf(stem, sizeof stem, "%.*s", (int)(len - 4), name);
    if (b2_store_file_name(stem, B2_STORE_NDARRAY, f[2], sizeof f[2]) == 0) nf = 3;
  }
  int fd = nf ? open_dir_beneath(n->fd, rel, strlen(rel), 0, (uid_t)-1, (gid_t)-1) : -1;
  int found = 0;
  struct stat st;
  for (int k = 0; fd >= 0 && k < nf && !found; k++) {
    if (fstatat(fd, f[k], &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (k == 0 && S_ISDIR(st.st_mode) && !b2_ns_name_hidden(name)) {
      found = 2;
    } else if (k > 0 && S_ISREG(st.st_mode) && strlen(f[k]) <= B2_NS_NAME_MAX) {
      found = 1;
      file->dirfd = fd;
      memcpy(file->name, f[k], strlen(f[k]) + 1); /* fits: checked above */
      file->kind = k == 2 ? B2_NS_NPY : B2_NS_LOGICAL;
    }
  }
  if (fd >= 0 && found != 1) close(fd);
  return found;
}

/* b2_ns_store_lookup in the current snapshot; with `again`, B2_E_STALE
 * when the snapshot's file for the name is gone, or a file the snapshot
 * lacks is there (the store changed through a writer's close, or behind
 * the mount: look again). */
static int lookup_in(b2_ns_store *n, const b2_ns_key *dir, const char *name, b2_ns_key **out,
                     b2_ns_store_file *file, int again) {
  b2_ns_snap *p;
  int64_t g;
  int rc = resolve_group(n, dir, &p, &g);
  if (rc < 0) return rc;
  b2_store *s = b2_ns_snap_store(p);
  int64_t i = b2_store_child(s, g, name);
  if (i < 0) {
    int newer = newer_entry(n, p, g, name, file);
    b2_ns_snap_put(p);
    if (newer == 1) return 1; /* a value's file made since: found where it is */
    return newer && again ? B2_E_STALE : b2_fail(B2_E_NOENT, "%s: not in the store", name);
  }
  const b2_store_entry *e = b2_store_entry_at(s, i);
  if (e->loc == B2_STORE_IN_FILE) {
    /* A file of a .b2d: an ordinary frame (or, for an object, plain). */
    const char *slash = strrchr(e->relpath, '/');
    size_t dlen = slash ? (size_t)(slash - e->relpath) : 0;
    const char *base = slash ? slash + 1 : e->relpath;
    file->kind = e->kind == B2_STORE_NDARRAY ? B2_NS_NPY
                 : e->kind == B2_STORE_SCHUNK ? B2_NS_LOGICAL
                                              : B2_NS_PLAIN;
    rc = strlen(base) > B2_NS_NAME_MAX ? b2_fail(B2_E_NAMETOOLONG, "%.64s...: name too long", base)
                                       : open_dir_beneath(n->fd, e->relpath, dlen, 0, (uid_t)-1, (gid_t)-1);
    struct stat st;
    int gone = rc == B2_E_NOENT ||
               (rc >= 0 && fstatat(rc, base, &st, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT);
    if (gone) { /* renamed or removed: here (pending), or behind the mount */
      if (rc >= 0) close(rc);
      rc = newer_entry(n, p, g, name, file);
      rc = rc == 1 ? 1 : again && !pending(n) ? B2_E_STALE : b2_fail(B2_E_NOENT, "%s: gone", name);
    } else if (rc >= 0) {
      file->dirfd = rc;
      snprintf(file->name, sizeof file->name, "%s", base);
      rc = 1;
    }
    b2_ns_snap_put(p);
    return rc;
  }
  b2_ns_key *k = calloc(1, sizeof *k);
  char *key = strdup(e->key);
  int group = e->kind == B2_STORE_GROUP;
  b2_ns_snap_put(p);
  if (!k || !key) {
    free(k);
    free(key);
    return b2_fail(B2_E_NOMEM, "out of memory");
  }
  k->store = n;
  k->key = key;
  k->group = group;
  pthread_mutex_init(&k->mu, NULL);
  *out = k;
  return 0;
}

int b2_ns_store_lookup(b2_ns_store *n, const b2_ns_key *dir, const char *name, b2_ns_key **out,
                       b2_ns_store_file *file) {
  int rc = lookup_in(n, dir, name, out, file, 1);
  if (rc != B2_E_STALE) return rc;
  refresh(n);
  return lookup_in(n, dir, name, out, file, 0);
}

int b2_ns_store_create(b2_ns_store *n, const b2_ns_key *dir, const char *name, int replace,
                       uid_t uid, gid_t gid, b2_ns_store_file *file) {
  b2_ns_snap *p;
  int64_t g;
  int rc = resolve_group(n, dir, &p, &g);
  if (rc < 0) return rc;
  char rel[PATH_MAX];
  int kind = file->kind == B2_NS_LOGICAL ? B2_STORE_SCHUNK : 0;
  int there = b2_store_new_value(b2_ns_snap_store(p), g, name, replace, rel, sizeof rel, &kind);
  b2_ns_snap_put(p);
  if (there < 0) return there;
  const char *slash = strrchr(rel, '/');
  const char *base = slash ? slash + 1 : rel;
  if (strlen(base) > B2_NS_NAME_MAX) return b2_fail(B2_E_NAMETOOLONG, "%s: name too long", name);
  rc = open_dir_beneath(n->fd, rel, slash ? (size_t)(slash - rel) : 0, 1, uid, gid);
  if (rc < 0) return rc;
  struct stat st;
  if (!there && fstatat(rc, base, &st, AT_SYMLINK_NOFOLLOW) == 0) {
    /* A value made since the snapshot: its very file when replaced. */
    if (!replace || !S_ISREG(st.st_mode)) {
      close(rc);
      return b2_fail(B2_E_EXIST, "%s: a file %s is there", name, rel);
    }
    there = 1;
  }
  /* Its key taken since the snapshot by a value of the other kind, or a
   * group (their files lie beside it: KEY.b2nd, KEY.b2f, KEY/). */
  char stem[B2_NS_NAME_MAX + 1], other[B2_NS_NAME_MAX + 8];
  size_t slen = strlen(base) - strlen(kind == B2_STORE_NDARRAY ? B2_STORE_NDARRAY_SUFFIX
                                                               : B2_STORE_SCHUNK_SUFFIX);
  snprintf(stem, sizeof stem, "%.*s", (int)slen, base);
  int taken = fstatat(rc, stem, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) ? B2_E_ISDIR : 0;
  if (!taken &&
      b2_store_file_name(stem, kind == B2_STORE_NDARRAY ? B2_STORE_SCHUNK : B2_STORE_NDARRAY,
                         other, sizeof other) == 0 &&
      fstatat(rc, other, &st, AT_SYMLINK_NOFOLLOW) == 0)
    taken = B2_E_EXIST;
  if (taken) {
    close(rc);
    return b2_fail(taken, "%s: its key is taken (by %s)", name,
                   taken == B2_E_ISDIR ? "a group" : "a value of the other kind");
  }
  file->dirfd = rc;
  memcpy(file->name, base, strlen(base) + 1); /* fits: checked above */
  file->kind = kind == B2_STORE_NDARRAY ? B2_NS_NPY : B2_NS_LOGICAL;
  return there;
}

int b2_ns_store_mkdir(b2_ns_store *n, const b2_ns_key *dir, const char *name, mode_t mode,
                      uid_t uid, gid_t gid) {
  settle(n);
  b2_ns_snap *p;
  int64_t g;
  int rc = resolve_group(n, dir, &p, &g);
  if (rc < 0) return rc;
  char rel[PATH_MAX];
  rc = b2_store_new_group(b2_ns_snap_store(p), g, name, rel, sizeof rel);
  b2_ns_snap_put(p);
  if (rc < 0) return rc;
  const char *slash = strrchr(rel, '/');
  const char *base = slash ? slash + 1 : rel;
  int pfd = open_dir_beneath(n->fd, rel, slash ? (size_t)(slash - rel) : 0, 1, uid, gid);
  if (pfd < 0) return pfd;
  rc = mkdirat(pfd, base, mode & 07777) == 0
           ? 0
           : b2_fail(b2_from_errno(errno), "%s: %s", rel, strerror(errno));
  if (rc == 0 && (uid != (uid_t)-1 || gid != (gid_t)-1) &&
      fchownat(pfd, base, uid, gid, AT_SYMLINK_NOFOLLOW) != 0)
    rc = b2_fail(b2_from_errno(errno), "%s: cannot give it its owner: %s", rel, strerror(errno));
  close(pfd);
  refresh(n);
  return rc;
}

int b2_ns_store_group_dir(b2_ns_store *n, const b2_ns_key *dir, int make) {
  b2_ns_snap *p;
  int64_t g;
  int rc = resolve_group(n, dir, &p, &g);
  if (rc < 0) return rc;
  char rel[PATH_MAX];
  rc = b2_store_group_dir(b2_ns_snap_store(p), g, rel, sizeof rel);
  b2_ns_snap_put(p);
  return rc < 0 ? rc : open_dir_beneath(n->fd, rel, strlen(rel), make, (uid_t)-1, (gid_t)-1);
}

int b2_ns_store_rmdir(b2_ns_store *n, const b2_ns_key *dir, const char *name, char *base,
                      size_t cap) {
  settle(n);
  b2_ns_snap *p;
  int64_t g;
  int rc = resolve_group(n, dir, &p, &g);
  if (rc < 0) return rc;
  char rel[PATH_MAX], carrier[PATH_MAX];
  rc = b2_store_old_group(b2_ns_snap_store(p), g, name, rel, sizeof rel, carrier, sizeof carrier);
  b2_ns_snap_put(p);
  if (rc < 0) return rc;
  /* python-blosc2's del of a group takes its attributes too: their
   * carrier, a file of the group's directory. */
  size_t rlen = strlen(rel);
  const char *slash = strrchr(rel, '/');
  if (carrier[0] && (strncmp(carrier, rel, rlen) != 0 || carrier[rlen] != '/' ||
                     strchr(carrier + rlen + 1, '/')))
    return b2_fail(B2_E_NOTEMPTY, "%s: its attributes are elsewhere (%s)", rel, carrier);
  int gfd = open_dir_beneath(n->fd, rel, rlen, 0, (uid_t)-1, (gid_t)-1);
  if (gfd < 0) return gfd;
  if (carrier[0] && unlinkat(gfd, carrier + rlen + 1, 0) != 0 && errno != ENOENT)
    rc = b2_fail(b2_from_errno(errno), "%s: %s", carrier, strerror(errno));
  close(gfd);
  if (rc == 0 && snprintf(base, cap, "%s", slash ? slash + 1 : rel) >= (int)cap)
    rc = b2_fail(B2_E_NAMETOOLONG, "%s: name too long", rel);
  return rc < 0 ? rc
                : open_dir_beneath(n->fd, rel, slash ? (size_t)(slash - rel) : 0, 0, (uid_t)-1,
                                   (gid_t)-1);
}

int b2_ns_store_move_group(b2_ns_store *n, const b2_ns_key *dir, const char *name,
                           const b2_ns_key *ndir, const char *newname, int noreplace, char *key,
                           char *nkey) {
  if (ndir && !ndir->group) return b2_fail(B2_E_NOTDIR, "%s: not a group", b2_ns_key_name(ndir));
  char rel[B2_STORE_KEY_CAP], nrel[B2_STORE_KEY_CAP];
  int rc;
  /* A value's rename (2) needs no fresh snapshot; a group's decision
   * does: again after the value files changed here, when there were. */
  for (int pass = 0;; pass++) {
    b2_ns_snap *p;
    int64_t g, ng;
    rc = resolve_group(n, dir, &p, &g);
    if (rc < 0) return rc;
    ng = entry_of(ndir, p);
    rc = ng < 0 ? (int)ng
                : b2_store_group_move(b2_ns_snap_store(p), g, name, ng, newname, noreplace, rel,
                                      nrel, key, nkey);
    b2_ns_snap_put(p);
    if (rc == 2 || pass || !settle(n)) break;
  }
  if (rc != 0) return rc;
  const char *s1 = strrchr(rel, '/'), *s2 = strrchr(nrel, '/');
  int pfd = open_dir_beneath(n->fd, rel, s1 ? (size_t)(s1 - rel) : 0, 0, (uid_t)-1, (gid_t)-1);
  int qfd = pfd < 0 ? pfd
                    : open_dir_beneath(n->fd, nrel, s2 ? (size_t)(s2 - nrel) : 0, 1, (uid_t)-1,
                                       (gid_t)-1);
  if (pfd < 0 || qfd < 0) {
    if (pfd >= 0) close(pfd);
    return pfd < 0 ? pfd : qfd;
  }
  rc = renameat2(pfd, s1 ? s1 + 1 : rel, qfd, s2 ? s2 + 1 : nrel, noreplace ? RENAME_NOREPLACE : 0);
  rc = rc == 0 ? 0 : b2_fail(b2_from_errno(errno), "%s: %s", rel, strerror(errno));
  close(pfd);
  close(qfd);
  b2_ns_store_changed(n, 0);
  return rc;
}

int b2_ns_store_rekey(b2_ns_store *n, const b2_ns_key *dir, const char *name,
                      const b2_ns_key *ndir, const char *newname, int replace) {
  settle(n);
  b2_ns_snap *p;
  int64_t g, ng = 0, i;
  int rc = resolve_group(n, dir, &p, &g);
  if (rc < 0) return rc;
  b2_store *s = b2_ns_snap_store(p);
  char newkey[PATH_MAX];
  rc = b2_store_embedded(s, g, name, &i);
  if (rc == B2_E_ISDIR && newname) rc = b2_fail(B2_E_ROFS, "%s: a group keeps its name", name);
  if (rc == 0 && newname) {
    ng = entry_of(ndir, p);
    rc = ng < 0 ? (int)ng
                : b2_store_embedded_target(s, i, ng, newname, replace, newkey, sizeof newkey);
  }
  if (rc == 0) rc = b2_store_embed_rekey(s, b2_store_entry_at(s, i)->key, newname ? newkey : NULL);
  b2_ns_snap_put(p);
  refresh(n);
  return rc;
}

void b2_ns_store_changed(b2_ns_store *n, int files) {
  int rc = b2_store_files_changed(n->fd);
  if (rc < 0 && n->note) {
    char line[1024];
    snprintf(line, sizeof line, "cannot tell python-blosc2 of a change: %s",
             b2_last_detail()[0] ? b2_last_detail() : b2_strerror(rc));
    n->note(n->arg, line);
  }
  pthread_mutex_lock(&n->mu);
  if (files)
    n->pending = 1;
  else
    n->dirty = 1;
  pthread_mutex_unlock(&n->mu);
}


int b2_ns_store_list(b2_ns_store *n, const b2_ns_key *dir, b2_ns_list *l) {
  b2_ns_snap *p;
  int64_t g;
  settle(n);
  int rc = resolve_group(n, dir, &p, &g);
  if (rc < 0) return rc;
  b2_store *s = b2_ns_snap_store(p);
  const b2_store_entry *ge = b2_store_entry_at(s, g);
  size_t cnt = (size_t)ge->nchildren;
  l->e = calloc(cnt ? cnt : 1, sizeof *l->e);
  l->n = 0;
  if (!l->e) rc = b2_fail(B2_E_NOMEM, "out of memory");
  for (size_t k = 0; !rc && k < cnt; k++) {
    const b2_store_entry *ce = b2_store_entry_at(s, ge->children[k]);
    b2_ns_entry *d = &l->e[k];
    d->name = strdup(ce->shown);
    d->shown = d->name;
    d->type = ce->kind == B2_STORE_GROUP ? DT_DIR : DT_REG;
    d->kind = B2_NS_STORE;
    d->ino = (ino_t)k + 3; /* its place after "." and ".." (readers skip inode 0) */
    if (!d->name) rc = b2_fail(B2_E_NOMEM, "out of memory");
    l->n = k + 1;
  }
  b2_ns_snap_put(p);
  if (rc < 0) b2_ns_list_free(l);
  return rc;
}

/* View a value is shown in: arrays as .npy, SChunks their bytes, objects
 * their raw frame (-1). */
static int view_of(const b2_store_entry *e) {
  return e->kind == B2_STORE_NDARRAY ? B2_VIEW_NPY
         : e->kind == B2_STORE_SCHUNK ? B2_VIEW_LOGICAL
                                      : -1;
}

/* Size of value i as shown (0 when it cannot be read), or B2_E_STALE. */
static int64_t value_size(b2_ns_snap *p, int64_t i) {
  const b2_store_entry *e = b2_store_entry_at(b2_ns_snap_store(p), i);
  int view = view_of(e);
  if (view < 0) return b2_store_raw_size(b2_ns_snap_store(p), i);
  b2_file *f;
  int rc = b2_store_open_file(b2_ns_snap_store(p), NULL, i, view, &f);
  if (rc < 0) return rc == B2_E_STALE ? rc : 0;
  int64_t sz = b2_file_size(f);
  b2_file_close(f);
  return sz < 0 ? 0 : sz;
}

int b2_ns_key_size(b2_ns_key *k, int64_t *size, int64_t *raw) {
  if (k->group) return b2_fail(B2_E_ISDIR, "%s: a group", b2_ns_key_name(k));
  b2_ns_snap *p;
  int64_t i;
  int held = -1;
  for (int tries = 0;; tries++) {
    int rc = resolve(k->store, k, &p, &i);
    if (rc < 0) {
      b2_store_release(held);
      return rc;
    }
    pthread_mutex_lock(&k->mu);
    if (k->size_snap != p) {
      int64_t sz = value_size(p, i);
      if (sz != B2_E_STALE) {
        b2_ns_snap_put(k->size_snap);
        k->size_snap = b2_ns_snap_ref(p);
        k->size = sz;
      }
    }
    int ok = k->size_snap == p;
    *size = k->size;
    pthread_mutex_unlock(&k->mu);
    if (ok) break;
    /* Another process changed the store meanwhile: again, holding its
     * sidecar so that it cannot change once more in between. */
    if (held < 0) held = b2_store_hold(b2_ns_snap_store(p));
    b2_ns_snap_put(p);
    b2_ns_store_recheck(k->store);
    if (tries == STALE_TRIES) {
      b2_store_release(held);
      return b2_fail(B2_E_IO, "%s: the store keeps changing", b2_ns_key_name(k));
    }
  }
  b2_store_release(held);
  *raw = b2_store_raw_size(b2_ns_snap_store(p), i);
  b2_ns_snap_put(p);
  return 0;
}

int b2_ns_key_open(b2_ns_key *k, b2_ns_value **out) {
  if (k->group) return b2_fail(B2_E_ISDIR, "%s: a group", b2_ns_key_name(k));
  b2_ns_value *v = calloc(1, sizeof *v);
  if (!v) return b2_fail(B2_E_NOMEM, "out of memory");
  int held = -1;
  for (int tries = 0;; tries++) {
    int rc = resolve(k->store, k, &v->snap, &v->i);
    if (rc < 0) {
      b2_store_release(held);
      free(v);
      return rc;
    }
    b2_store *s = b2_ns_snap_store(v->snap);
    int view = view_of(b2_store_entry_at(s, v->i));
    int erc = view < 0 ? 0 : b2_store_open_file(s, k->store->env, v->i, view, &v->f);
    if (erc == B2_E_STALE && tries < STALE_TRIES) {
      /* Changed meanwhile: again, holding the store's sidecar so that it
       * cannot change once more in between. */
      if (held < 0) held = b2_store_hold(s);
      b2_ns_snap_put(v->snap);
      b2_ns_store_recheck(k->store);
      continue;
    }
    b2_store_release(held);
    if (erc < 0) {
      tell(k, b2_last_detail());
      b2_ns_store_recheck(k->store);
      b2_ns_snap_put(v->snap);
      free(v);
      return erc;
    }
    break;
  }
  *out = v;
  return 0;
}

ssize_t b2_ns_value_pread(b2_ns_key *k, b2_ns_value *v, void *buf, size_t size, int64_t off) {
  size_t done = 0;
  while (done < size) {
    ssize_t r = v->f ? b2_file_pread(v->f, (char *)buf + done, size - done, off + (int64_t)done)
                     : b2_store_pread_raw(b2_ns_snap_store(v->snap), v->i, (char *)buf + done,
                                          size - done, off + (int64_t)done);
    if (r < 0) {
      char what[64];
      snprintf(what, sizeof what, "read at offset %lld", (long long)(off + (int64_t)done));
      tell2(k, what, b2_last_detail());
      b2_ns_store_recheck(k->store); /* it may have been changed in place */
      return r;
    }
    if (r == 0) break;
    done += (size_t)r;
  }
  return (ssize_t)done;
}

void b2_ns_value_close(b2_ns_value *v) {
  if (!v) return;
  b2_file_close(v->f);
  b2_ns_snap_put(v->snap);
  free(v);
}

#define KIND_XATTR "user.b2.kind"

ssize_t b2_ns_key_xattr(b2_ns_store *n, const b2_ns_key *k, const char *name, char *buf,
                        size_t size) {
  b2_ns_snap *p;
  int64_t i;
  int rc = resolve(n, k, &p, &i);
  if (rc < 0) return rc;
  b2_store *s = b2_ns_snap_store(p);
  const b2_store_entry *e = b2_store_entry_at(s, i);
  ssize_t r;
  if (e->kind == B2_STORE_GROUP) {
    r = name ? b2_store_xattr_get(s, i, name, buf, size) : b2_store_xattr_list(s, i, buf, size);
  } else if (view_of(e) < 0) {
    size_t kl = strlen(e->objkind);
    if (name && strcmp(name, KIND_XATTR)) r = B2_E_NOENT;
    else if (!name) r = size && size < sizeof KIND_XATTR ? B2_E_RANGE : (ssize_t)sizeof KIND_XATTR;
    else r = size && size < kl ? B2_E_RANGE : (ssize_t)kl;
    if (r > 0 && size) memcpy(buf, name ? e->objkind : KIND_XATTR, (size_t)r);
  } else {
    b2_file *f;
    r = b2_store_open_file(s, NULL, i, view_of(e), &f);
    if (r == 0) {
      r = name ? b2_file_xattr_get(f, name, buf, size) : b2_file_xattr_list(f, buf, size);
      b2_file_close(f);
    }
  }
  b2_ns_snap_put(p);
  return r;
}
