/*
 * store.c - a python-blosc2 store of SOURCE as a namespace directory node
 * (see b2_ns.h): the store entry's current snapshot (b2_store.h), shared by
 * reference counts, opened again when the store changed (b2_store_stale,
 * checked at most once per `recheck` seconds, or at the next use after
 * b2_ns_store_recheck), and a damaged store not opened again more often.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
  int err;                 /* code of the last failed open (0: none) */
  char *reported;          /* detail of the last failure reported */
};

b2_ns_store *b2_ns_store_new(void) {
  b2_ns_store *n = calloc(1, sizeof *n);
  if (n) pthread_mutex_init(&n->mu, NULL);
  return n;
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

static double since(const struct timespec *t) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)(now.tv_sec - t->tv_sec) + (now.tv_nsec - t->tv_nsec) / 1e9;
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
  if (p && (since(&n->checked) < recheck || !b2_store_stale(p->s))) {
    if (since(&n->checked) >= recheck) clock_gettime(CLOCK_MONOTONIC, &n->checked);
    *out = b2_ns_snap_ref(p);
    pthread_mutex_unlock(&n->mu);
    return 0;
  }
  if (!p && n->err && since(&n->checked) < recheck) {
    pthread_mutex_unlock(&n->mu); /* damaged: not opened again before recheck */
    return b2_fail(B2_E_IO, "%s", n->reported ? n->reported : "the store could not be opened");
  }
  b2_store *s = NULL;
  int rc = open_store(env, fd, &s);
  clock_gettime(CLOCK_MONOTONIC, &n->checked);
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
  memset(&n->checked, 0, sizeof n->checked);
  pthread_mutex_unlock(&n->mu);
}
