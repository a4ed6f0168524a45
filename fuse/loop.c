/*
 * loop.c - the session loop.  One thread at a time reads /dev/fuse (the
 * reader); it serves what it read itself when that is quick, so that a
 * program asking one thing after another (ls -lR, tar) talks to one thread,
 * woken where it last ran, as with -s.  Before a request that may take long
 * (writes, namespace changes, a writer's close, and any other request but
 * the quick kinds below) the reader hands the reading to an idle thread -
 * the one idle the shortest time - or starts one (up to max_threads), so
 * that requests keep being read while it works.
 *
 * Quick kinds may still wait, but only on work already under way in other
 * threads (a writer's close, a rewrite): none waits for a request not yet
 * read.  Worker threads run with signals blocked; the calling thread waits
 * for the session to end and then cancels the thread blocked in read.
 */
#include <errno.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "b2fs.h"

typedef struct worker {
  pthread_t thread;
  pthread_cond_t cv;          /* woken to become the reader */
  int wake;                   /* told to read (or to leave at the end) */
  struct worker *next_idle;   /* the idle stack */
  struct worker *next_all;    /* every worker, to join them */
} worker;

static struct {
  struct fuse_session *se;
  pthread_mutex_t mu;
  worker *idle;               /* idle threads, most recent first */
  worker *all;
  int reading;                /* a thread reads or is about to */
  int nthreads, max_threads;
  int exiting;
  sem_t finish;
} L = {.mu = PTHREAD_MUTEX_INITIALIZER};

static _Thread_local int tl_handed; /* this thread gave the reading away */

/* Requests served by the reader itself (it may still wait for work other
 * threads have under way, never for a request not yet read). */
static int quick(const struct fuse_buf *buf) {
  if (buf->flags & FUSE_BUF_IS_FD || buf->size < sizeof(struct fuse_in_header)) return 0;
  const struct fuse_in_header *h = buf->mem;
  switch (h->opcode) {
  case FUSE_GETATTR: case FUSE_LOOKUP: case FUSE_FORGET: case FUSE_BATCH_FORGET:
  case FUSE_GETXATTR: case FUSE_LISTXATTR: case FUSE_OPENDIR: case FUSE_READDIR:
  case FUSE_READDIRPLUS: case FUSE_RELEASEDIR: case FUSE_STATFS: case FUSE_ACCESS:
  case FUSE_READLINK: case FUSE_READ:
    return 1;
  case FUSE_OPEN: { /* read-only opens: no truncation, no writer */
    const struct fuse_open_in *in = (const void *)(h + 1);
    return buf->size >= sizeof *h + sizeof *in && (in->flags & O_ACCMODE) == O_RDONLY &&
           !(in->flags & O_TRUNC);
  }
  case FUSE_RELEASE: { /* of a read-only open (fh bit 0: it may write) */
    const struct fuse_release_in *in = (const void *)(h + 1);
    return buf->size >= sizeof *h + sizeof *in && !(in->fh & 1) &&
           (in->flags & O_ACCMODE) == O_RDONLY;
  }
  default:
    return 0;
  }
}

static void *work(void *arg);

/* Someone else reads from now on: the most recently idle thread, or a new
 * one (mu held).  With neither, this thread reads again when done. */
static void hand_over(void) {
  worker *w = L.idle;
  if (w) {
    L.idle = w->next_idle;
    w->wake = 1;
    L.reading = 1;
    pthread_cond_signal(&w->cv);
    return;
  }
  if (L.nthreads >= L.max_threads) return;
  w = calloc(1, sizeof *w);
  if (!w) return;
  pthread_cond_init(&w->cv, NULL);
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  int rc = pthread_create(&w->thread, NULL, work, w);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) {
    pthread_cond_destroy(&w->cv);
    free(w);
    return;
  }
  w->next_all = L.all;
  L.all = w;
  L.nthreads++;
  L.reading = 1; /* the new thread reads first */
}

void b2fs_loop_may_block(void) {
  if (tl_handed || !L.se) return;
  tl_handed = 1;
  pthread_mutex_lock(&L.mu);
  if (!L.reading && !L.exiting) hand_over();
  pthread_mutex_unlock(&L.mu);
}

static void end(void) { /* mu held */
  L.exiting = 1;
  for (worker *w = L.idle; w; w = w->next_idle) {
    w->wake = 1;
    pthread_cond_signal(&w->cv);
  }
  L.idle = NULL;
  sem_post(&L.finish);
}

static void free_buf(void *arg) { free(((struct fuse_buf *)arg)->mem); }

static void *work(void *arg) {
  worker *self = arg;
  struct fuse_buf buf;
  memset(&buf, 0, sizeof buf);
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
  pthread_cleanup_push(free_buf, &buf);
  for (;;) {
    /* the reading is ours here (L.reading set for us) */
    int old;
    pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old);
    int res = fuse_session_receive_buf(L.se, &buf);
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    pthread_mutex_lock(&L.mu);
    if (res == -EINTR || res == -EAGAIN) {
      int stop = L.exiting || fuse_session_exited(L.se);
      if (stop) end();
      pthread_mutex_unlock(&L.mu);
      if (stop) break;
      continue;
    }
    if (res <= 0 || L.exiting || fuse_session_exited(L.se)) {
      if (res < 0 && res != -ENODEV) fuse_session_exit(L.se);
      if (res == 0 || res == -ENODEV) fuse_session_exit(L.se);
      end();
      pthread_mutex_unlock(&L.mu);
      break;
    }
    L.reading = 0;
    tl_handed = 0;
    if (!quick(&buf)) {
      tl_handed = 1;
      hand_over();
    }
    pthread_mutex_unlock(&L.mu);
    fuse_session_process_buf(L.se, &buf);
    pthread_mutex_lock(&L.mu);
    if (L.exiting) {
      pthread_mutex_unlock(&L.mu);
      break;
    }
    if (!L.reading) { /* nobody reads: this thread does */
      L.reading = 1;
      pthread_mutex_unlock(&L.mu);
      continue;
    }
    self->wake = 0; /* idle until told to read */
    self->next_idle = L.idle;
    L.idle = self;
    while (!self->wake) pthread_cond_wait(&self->cv, &L.mu);
    int stop = L.exiting;
    pthread_mutex_unlock(&L.mu);
    if (stop) break;
  }
  pthread_cleanup_pop(1);
  return NULL;
}

int b2fs_loop_run(struct fuse_session *se, int max_threads) {
  L.se = se;
  L.max_threads = max_threads > 0 ? max_threads : 10;
  L.exiting = 0;
  if (sem_init(&L.finish, 0, 0) != 0) return -errno;
  pthread_mutex_lock(&L.mu);
  hand_over(); /* the first reader */
  int started = L.nthreads;
  if (!started) end();
  pthread_mutex_unlock(&L.mu);
  while (!fuse_session_exited(se)) {
    if (sem_wait(&L.finish) == 0) break; /* the loop ended (unmounted) */
    /* EINTR: a signal; its handler may have ended the session */
  }
  pthread_mutex_lock(&L.mu);
  if (!L.exiting) end();
  pthread_mutex_unlock(&L.mu);
  /* The thread blocked in read, if any, leaves by cancellation (enabled
   * only around the read); the idle ones were woken. */
  for (worker *w = L.all; w; w = w->next_all) pthread_cancel(w->thread);
  while (L.all) {
    worker *w = L.all;
    L.all = w->next_all;
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->cv);
    free(w);
  }
  sem_destroy(&L.finish);
  L.se = NULL;
  L.nthreads = 0;
  L.idle = NULL;
  L.reading = 0;
  return started ? 0 : -EAGAIN;
}
