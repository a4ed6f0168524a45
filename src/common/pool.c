/* pool.c - bounded worker pool: fixed job slots, FIFO queue, groups that a
 * waiter can help finish.  See pool.h for the contract. */
#include "common/pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "b2_error.h"
#include "common/util.h"

typedef struct job {
  b2_pool_fn fn;
  void *arg;
  b2_pool_group *g;
  struct job *next;
} job;

struct b2_pool {
  pthread_mutex_t mu;
  pthread_cond_t work_cv;  /* a job was queued, or stop */
  pthread_cond_t space_cv; /* a slot was freed */
  pthread_cond_t done_cv;  /* a grouped job finished */
  job *slots;              /* queue_max slots, allocated once */
  job *free_list;
  job *head, *tail;        /* FIFO of queued jobs */
  int stop;
  int idle;                /* workers waiting for a job */
  int queued;              /* jobs in the FIFO */
  /* Pre-waking (b2_pool_prewake): one sleeping worker is asked to poll
   * for a job for a while instead of sleeping, so that a job queued
   * soon is taken without a wake-up. */
  int spin_asked;          /* a worker was asked to poll and has not begun */
  int spinning;            /* workers polling */
  long spin_ns;            /* how long the asked worker polls */
  atomic_uint posted;      /* bumped by every job queued and by stop */
  atomic_uint finished;    /* bumped by every grouped job done */
  int nthreads;
  int started;
  pthread_t *threads;
};

/* The pool whose worker runs on this thread (NULL elsewhere). */
static _Thread_local b2_pool *tl_pool;
/* Asked by the job running on this worker (b2_pool_linger): poll this
 * long for the next job before sleeping. */
static _Thread_local long tl_linger_ns;

/* Called with p->mu held after a job of group g finished. */
static void job_done(b2_pool *p, b2_pool_group *g) {
  if (!g) return;
  atomic_fetch_add_explicit(&p->finished, 1, memory_order_release);
  if (--g->pending == 0) pthread_cond_broadcast(&p->done_cv);
}

static void slot_free(b2_pool *p, job *j) {
  j->next = p->free_list;
  p->free_list = j;
  pthread_cond_signal(&p->space_cv);
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* Poll, without the lock, until *a is no longer `seen` or the clock
 * reaches `end` (ns).  Yields now and then: a thread this one waits for
 * may have been woken on this CPU, and must get it. */
static void poll_change(atomic_uint *a, unsigned seen, uint64_t end) {
  for (unsigned k = 1;; k++) {
    if (atomic_load_explicit(a, memory_order_acquire) != seen) return;
    cpu_relax();
    if (k % 64 == 0) {
      if (b2_now_ns() >= end) return;
      sched_yield();
    }
  }
}

void b2_poll_change(atomic_uint *a, unsigned seen, long usec) {
  poll_change(a, seen, b2_now_ns() + (uint64_t)(usec > 0 ? usec : 0) * 1000);
}

static void *worker(void *arg) {
  b2_pool *p = arg;
  tl_pool = p;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (!p->head && !p->stop) {
      if (p->spin_asked) {
        p->spin_asked = 0;
        p->spinning++;
        long ns = p->spin_ns;
        unsigned seen = atomic_load_explicit(&p->posted, memory_order_relaxed);
        pthread_mutex_unlock(&p->mu);
        poll_change(&p->posted, seen, b2_now_ns() + (uint64_t)ns);
        pthread_mutex_lock(&p->mu);
        p->spinning--;
        continue;
      }
      p->idle++;
      pthread_cond_wait(&p->work_cv, &p->mu);
      p->idle--;
    }
    job *j = p->head;
    if (!j) break; /* stop and nothing left */
    p->head = j->next;
    if (!p->head) p->tail = NULL;
    p->queued--;
    b2_pool_fn fn = j->fn;
    void *a = j->arg;
    b2_pool_group *g = j->g;
    slot_free(p, j);
    pthread_mutex_unlock(&p->mu);
    tl_linger_ns = 0;
    fn(a);
    pthread_mutex_lock(&p->mu);
    job_done(p, g);
    if (tl_linger_ns > 0 && !p->head && !p->stop) { /* counted as polling */
      p->spinning++;
      unsigned seen = atomic_load_explicit(&p->posted, memory_order_relaxed);
      pthread_mutex_unlock(&p->mu);
      poll_change(&p->posted, seen, b2_now_ns() + (uint64_t)tl_linger_ns);
      pthread_mutex_lock(&p->mu);
      p->spinning--;
    }
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

int b2_pool_create(int nthreads, int queue_max, b2_pool **out) {
  *out = NULL;
  if (nthreads < 1 || nthreads > 256 || queue_max < 1 || queue_max > 65536)
    return b2_fail(B2_E_INVAL, "pool: %d threads, queue %d", nthreads,
                   queue_max);
  b2_pool *p = calloc(1, sizeof *p);
  if (!p) return b2_fail(B2_E_NOMEM, "pool: out of memory");
  p->slots = calloc((size_t)queue_max, sizeof *p->slots);
  p->threads = calloc((size_t)nthreads, sizeof *p->threads);
  if (!p->slots || !p->threads) {
    free(p->slots);
    free(p->threads);
    free(p);
    return b2_fail(B2_E_NOMEM, "pool: out of memory");
  }
  for (int i = 0; i < queue_max; i++) {
    p->slots[i].next = p->free_list;
    p->free_list = &p->slots[i];
  }
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->work_cv, NULL);
  pthread_cond_init(&p->space_cv, NULL);
  pthread_cond_init(&p->done_cv, NULL);
  p->nthreads = nthreads;
  for (int i = 0; i < nthreads; i++) {
    if (pthread_create(&p->threads[i], NULL, worker, p) != 0) {
      b2_pool_destroy(p);
      return b2_fail(B2_E_NOMEM, "pool: cannot start thread %d", i);
    }
    p->started++;
  }
  *out = p;
  return 0;
}

void b2_pool_destroy(b2_pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  p->stop = 1;
  atomic_fetch_add_explicit(&p->posted, 1, memory_order_release);
  pthread_cond_broadcast(&p->work_cv);
  pthread_cond_broadcast(&p->space_cv);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->started; i++) pthread_join(p->threads[i], NULL);
  /* No worker ever started: run what was queued so groups complete. */
  while (p->head) {
    job *j = p->head;
    p->head = j->next;
    j->fn(j->arg);
    if (j->g) j->g->pending--;
  }
  pthread_cond_destroy(&p->work_cv);
  pthread_cond_destroy(&p->space_cv);
  pthread_cond_destroy(&p->done_cv);
  pthread_mutex_destroy(&p->mu);
  free(p->slots);
  free(p->threads);
  free(p);
}

/* Append a job; p->mu held and a free slot available. */
static void enqueue(b2_pool *p, b2_pool_fn fn, void *arg, b2_pool_group *g) {
  job *j = p->free_list;
  p->free_list = j->next;
  j->fn = fn;
  j->arg = arg;
  j->g = g;
  j->next = NULL;
  if (p->tail)
    p->tail->next = j;
  else
    p->head = j;
  p->tail = j;
  if (g) g->pending++;
  p->queued++;
  /* A worker asked to poll and not polling yet is awake already, and a
   * polling one takes the job without a wake-up. */
  int asked = p->spin_asked;
  p->spin_asked = 0;
  atomic_fetch_add_explicit(&p->posted, 1, memory_order_release);
  if (p->queued > p->spinning + asked) pthread_cond_signal(&p->work_cv);
}

int b2_pool_try_submit(b2_pool *p, b2_pool_fn fn, void *arg, b2_pool_group *g) {
  if (!p || !fn) return b2_fail(B2_E_INVAL, "pool: no pool or function");
  pthread_mutex_lock(&p->mu);
  int rc = 0;
  if (p->stop)
    rc = b2_fail(B2_E_INVAL, "pool: shutting down");
  else if (!p->free_list)
    rc = B2_E_BUSY; /* expected and frequent: no detail message */
  else
    enqueue(p, fn, arg, g);
  pthread_mutex_unlock(&p->mu);
  return rc;
}

int b2_pool_submit(b2_pool *p, b2_pool_fn fn, void *arg, b2_pool_group *g) {
  if (!p || !fn) return b2_fail(B2_E_INVAL, "pool: no pool or function");
  pthread_mutex_lock(&p->mu);
  while (!p->free_list && !p->stop) {
    if (tl_pool == p) { /* a worker waiting on its own pool: run inline */
      pthread_mutex_unlock(&p->mu);
      fn(arg);
      return 0;
    }
    pthread_cond_wait(&p->space_cv, &p->mu);
  }
  int rc = 0;
  if (p->stop)
    rc = b2_fail(B2_E_INVAL, "pool: shutting down");
  else
    enqueue(p, fn, arg, g);
  pthread_mutex_unlock(&p->mu);
  return rc;
}

void b2_pool_wait(b2_pool *p, b2_pool_group *g) { b2_pool_wait_poll(p, g, 0); }

void b2_pool_wait_poll(b2_pool *p, b2_pool_group *g, long usec) {
  if (!p || !g) return;
  uint64_t end = usec > 0 ? b2_now_ns() + (uint64_t)usec * 1000 : 0;
  pthread_mutex_lock(&p->mu);
  while (g->pending) {
    job *prev = NULL, *j = p->head;
    while (j && j->g != g) {
      prev = j;
      j = j->next;
    }
    if (!j && end && b2_now_ns() < end) {
      unsigned seen = atomic_load_explicit(&p->finished, memory_order_relaxed);
      pthread_mutex_unlock(&p->mu);
      poll_change(&p->finished, seen, end);
      pthread_mutex_lock(&p->mu);
      continue;
    }
    if (!j) {
      pthread_cond_wait(&p->done_cv, &p->mu);
      continue;
    }
    /* Take our own queued job and run it here. */
    if (prev)
      prev->next = j->next;
    else
      p->head = j->next;
    if (p->tail == j) p->tail = prev;
    p->queued--;
    b2_pool_fn fn = j->fn;
    void *a = j->arg;
    slot_free(p, j);
    pthread_mutex_unlock(&p->mu);
    fn(a);
    pthread_mutex_lock(&p->mu);
    job_done(p, g);
  }
  pthread_mutex_unlock(&p->mu);
}

int b2_pool_threads(const b2_pool *p) { return p ? p->nthreads : 0; }

int b2_pool_idle(b2_pool *p) {
  if (!p) return 0;
  pthread_mutex_lock(&p->mu);
  int n = p->head || p->stop ? 0 : p->idle + p->spinning;
  pthread_mutex_unlock(&p->mu);
  return n;
}

int b2_pool_polling(b2_pool *p) {
  if (!p) return 0;
  pthread_mutex_lock(&p->mu);
  int n = p->head || p->stop ? 0 : p->spinning;
  pthread_mutex_unlock(&p->mu);
  return n;
}

void b2_pool_linger(long usec) {
  if (tl_pool) tl_linger_ns = usec > 0 ? usec * 1000 : 0;
}

void b2_pool_prewake_cancel(b2_pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  if (p->spin_asked || p->spinning) {
    p->spin_asked = 0;
    atomic_fetch_add_explicit(&p->posted, 1, memory_order_release); /* ends the polls */
  }
  pthread_mutex_unlock(&p->mu);
}

int b2_pool_prewake(b2_pool *p, long usec) {
  if (!p || usec <= 0) return 0;
  pthread_mutex_lock(&p->mu);
  int ok = !p->stop && !p->head && !p->spin_asked && !p->spinning && p->idle > 0;
  if (ok) {
    p->spin_asked = 1;
    p->spin_ns = usec * 1000;
    pthread_cond_signal(&p->work_cv);
  }
  pthread_mutex_unlock(&p->mu);
  return ok;
}
