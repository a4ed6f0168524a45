/*
 * shed.c - keeps the descriptors of the inodes the kernel knows within
 * the process's limit.  Each known inode holds one (its O_PATH
 * descriptor, as passthrough_hp's do) for as long as the kernel keeps it,
 * and the kernel keeps inodes until its memory runs short: a walk of a
 * tree of more entries than the limit would end in lookups failing with
 * EMFILE.  Past a high mark of known inodes a thread of its own asks the
 * kernel to drop the names looked up longest ago of inodes no file is
 * open of (fuse_lowlevel_notify_inval_entry: an inode with no other use is
 * then forgotten, its descriptor closed), down to a low mark.  A lookup,
 * create or open that still finds no descriptor free waits a little for that
 * and tries again (b2fs_shed_retry); past the high mark, listings give
 * names without attributes (the kernel looks up those it uses).  The
 * kernel drops nothing in use: a working directory, an open file.  A name
 * is recorded at the lookup, create, listing or rename through the mount
 * that gave it (one renamed behind the mount is not dropped until it is
 * looked up again).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "b2fs.h"

static struct {
  pthread_mutex_t lock; /* guards the fields below but the marks and counts */
  pthread_cond_t wake;
  int started, kicked, stop;
  pthread_t thread;
  size_t high, low;           /* known inodes: set once at start */
  atomic_uint_fast64_t clock; /* lookups so far: the inodes' ages */
  atomic_uint_fast64_t asked; /* names the kernel was asked to drop */
  _Atomic int64_t calm_until; /* a wait in vain: none until then (ms) */
} sh = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

static size_t known(void) { return atomic_load(&b2fs_g.count); }

static int64_t now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

void b2fs_shed_seen(b2fs_inode *in, fuse_ino_t parent, const char *name) {
  if (!in || in == &b2fs_g.root || in->outside) return;
  atomic_store(&in->kused, atomic_fetch_add(&sh.clock, 1) + 1);
  b2fs_inode *old = NULL;
  pthread_mutex_lock(&in->lock);
  if (in->kparent != parent || !in->kname || strcmp(in->kname, name) != 0) {
    char *s = strdup(name);
    /* The parent is pinned while named here: a number forgotten could
     * be another inode's by the time the kernel is told. */
    if (s && (in->kparent == parent || b2fs_inode_pin(b2fs_inode_get(parent)))) {
      if (in->kparent != parent) {
        old = in->kparent ? b2fs_inode_get(in->kparent) : NULL;
        in->kparent = parent;
      }
      free(in->kname);
      in->kname = s;
    } else {
      free(s);
    }
  }
  pthread_mutex_unlock(&in->lock);
  if (old) b2fs_inode_forget(old, 1);
}

typedef struct {
  uint64_t used;
  b2fs_inode *in;
} aged;

static int by_age(const void *a, const void *b) {
  uint64_t x = ((const aged *)a)->used, y = ((const aged *)b)->used;
  return x < y ? -1 : x > y;
}

/* The inodes of the table looked up through a name since they were last
 * told, each pinned (one lookup more), how many the table holds, and how
 * many of them were told in the last 0.2 s and not yet forgotten (told
 * before that, the kernel keeps them: in use): the array (free it) or
 * NULL. */
static aged *pin_all(size_t *n, size_t *count, size_t *told) {
  int64_t now = now_ms();
  pthread_mutex_lock(&b2fs_g.table_lock);
  *count = b2fs_g.count;
  *told = 0;
  aged *a = malloc((*count + 1) * sizeof *a);
  *n = 0;
  for (size_t b = 0; a && b < b2fs_g.nbuckets; b++)
    for (b2fs_inode *in = b2fs_g.buckets[b]; in; in = in->next) {
      uint64_t used = atomic_load(&in->kused);
      if (in->nlookup && !used && now - atomic_load(&in->ktold) < 200) (*told)++;
      if (!in->nlookup || !used || *n >= *count) continue;
      in->nlookup++;
      a[(*n)++] = (aged){used, in};
    }
  pthread_mutex_unlock(&b2fs_g.table_lock);
  return a;
}

/* One round: ask the kernel to drop the names of the coldest inodes no
 * file is open of, as many as the table holds above the low mark besides
 * those told just before whose FORGET is still to come. */
static void shed_round(void) {
  size_t n, count, pending;
  aged *a = pin_all(&n, &count, &pending);
  if (!a) return;
  qsort(a, n, sizeof *a, by_age);
  size_t want = count > sh.low + pending ? count - sh.low - pending : 0, told = 0;
  for (size_t i = 0; i < n; i++) {
    b2fs_inode *in = a[i].in;
    char *name = NULL;
    fuse_ino_t parent = 0;
    if (told < want) {
      pthread_mutex_lock(&in->lock);
      if (!in->kopen && in->kname) { /* an open file is not forgotten */
        name = strdup(in->kname);
        parent = in->kparent;
        atomic_store(&in->kused, 0); /* told: not again, unless looked up */
        atomic_store(&in->ktold, now_ms());
      }
      pthread_mutex_unlock(&in->lock);
    }
    b2fs_inode_forget(in, 1);
    if (!name) continue;
    /* A name gone or holding another inode meanwhile: nothing dropped
     * that the kernel would not look up again. */
    if (b2fs_g.se) (void)fuse_lowlevel_notify_inval_entry(b2fs_g.se, parent, name, strlen(name));
    free(name);
    told++;
  }
  atomic_fetch_add(&sh.asked, told);
  free(a);
}

static void *shedder(void *arg) {
  (void)arg;
  pthread_mutex_lock(&sh.lock);
  while (!sh.stop) {
    if (!sh.kicked) {
      pthread_cond_wait(&sh.wake, &sh.lock);
      continue;
    }
    sh.kicked = 0;
    pthread_mutex_unlock(&sh.lock);
    shed_round();
    pthread_mutex_lock(&sh.lock);
  }
  pthread_mutex_unlock(&sh.lock);
  return NULL;
}

/* Wake the thread (made at the first need). */
static void kick(void) {
  pthread_mutex_lock(&sh.lock);
  if (!sh.started && !sh.stop)
    sh.started = pthread_create(&sh.thread, NULL, shedder, NULL) == 0;
  sh.kicked = 1;
  pthread_cond_signal(&sh.wake);
  pthread_mutex_unlock(&sh.lock);
}

void b2fs_shed_init(unsigned long limit, unsigned long idle) {
  /* Room for what is not an inode's: the frames kept open after their
   * close (a descriptor or two each), open files, libfuse's, the log;
   * half the limit at most. */
  unsigned long keep = 64 + 2 * idle;
  if (keep > limit / 2) keep = limit / 2;
  sh.high = limit > keep ? (size_t)(limit - keep) : 1;
  sh.low = sh.high * 3 / 4;
}

int b2fs_shed_crowded(void) { return sh.high && known() > sh.high; }

void b2fs_shed_note(void) {
  if (b2fs_shed_crowded()) kick();
}

int b2fs_shed_retry(int err) {
  if (err != EMFILE && err != ENFILE && err != B2_E_NOFILES) return 0;
  /* Not ours when the inodes hold few: other descriptors fill the limit. */
  if (!sh.high || known() < sh.low) return 0;
  kick();
  /* The kernel drops a name only when no system call holds its
   * directory: the caller's own (a lookup there) may be the one the
   * thread waits for, and the wait is then in vain; after one such wait
   * the next ones fail at once for a second. */
  if (now_ms() < atomic_load(&sh.calm_until)) return 0;
  for (int i = 0; i < 30; i++) { /* its FORGETs reach other workers */
    struct timespec ms = {0, 10 * 1000 * 1000};
    nanosleep(&ms, NULL);
    if (known() < sh.high) return 1;
  }
  atomic_store(&sh.calm_until, now_ms() + 1000);
  return 0;
}

uint64_t b2fs_shed_asked(void) { return atomic_load(&sh.asked); }

void b2fs_shed_stop(void) {
  pthread_mutex_lock(&sh.lock);
  sh.stop = 1;
  int started = sh.started;
  pthread_cond_broadcast(&sh.wake);
  pthread_mutex_unlock(&sh.lock);
  if (started) pthread_join(sh.thread, NULL);
}
