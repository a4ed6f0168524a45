/*
 * pool.h - a small bounded worker pool (internal to the engine).
 *
 * N threads take jobs from one FIFO queue of at most `queue_max` jobs.  The
 * job slots are allocated once at creation, so submitting never allocates.
 *
 *   b2_pool_try_submit  never blocks: B2_E_BUSY when the queue is full
 *                       (read-ahead: dropping such work is fine);
 *   b2_pool_submit      waits for a free slot (when called from one of the
 *                       pool's own workers with the queue full it runs the
 *                       job inline instead, so nested use cannot deadlock);
 *   b2_pool_wait        waits until every job submitted with a group has
 *                       finished; jobs of that group still queued are run
 *                       by the waiting thread itself, so a wait issued from
 *                       a worker always makes progress.
 *
 * A group is a plain counter the caller owns (B2_POOL_GROUP_INIT); it must
 * outlive its jobs, i.e. stay valid until b2_pool_wait returns.  One group
 * is used with one pool.  b2_pool_destroy stops accepting jobs, lets the
 * workers run every queued job, then joins them.
 */
#ifndef B2_POOL_H
#define B2_POOL_H

#include <stdatomic.h>
#include <stddef.h>

typedef struct b2_pool b2_pool;
typedef void (*b2_pool_fn)(void *arg);

typedef struct b2_pool_group {
  unsigned long pending; /* jobs submitted and not finished (pool lock) */
} b2_pool_group;
#define B2_POOL_GROUP_INIT {0}

/* Create a pool of `nthreads` (1..256) workers and a queue of `queue_max`
 * (1..65536) jobs.  Returns 0 and *out, or B2_E_INVAL / B2_E_NOMEM. */
int b2_pool_create(int nthreads, int queue_max, b2_pool **out);

/* Drain the queue, join the workers, free the pool.  NULL is a no-op. */
void b2_pool_destroy(b2_pool *p);

/* Queue fn(arg); `g` may be NULL.  0, B2_E_BUSY (queue full) or B2_E_INVAL
 * (pool shutting down). */
int b2_pool_try_submit(b2_pool *p, b2_pool_fn fn, void *arg, b2_pool_group *g);

/* Queue fn(arg), waiting while the queue is full.  0 or B2_E_INVAL. */
int b2_pool_submit(b2_pool *p, b2_pool_fn fn, void *arg, b2_pool_group *g);

/* Wait until every job of `g` has run (helping with its queued jobs). */
void b2_pool_wait(b2_pool *p, b2_pool_group *g);

/* The same, polling for up to `usec` microseconds before sleeping: for a
 * wait expected to be short, where being woken would cost more than the
 * wait itself. */
void b2_pool_wait_poll(b2_pool *p, b2_pool_group *g, long usec);

/* Poll, without sleeping, until *a is no longer `seen` or `usec`
 * microseconds have passed (yielding now and then): for a value another
 * thread is about to change, where waiting on a condition variable would
 * cost a wake-up. */
void b2_poll_change(atomic_uint *a, unsigned seen, long usec);

/* Number of worker threads. */
int b2_pool_threads(const b2_pool *p);

/* Workers waiting for a job right now (sleeping or polling): 0 whenever
 * a job is queued (the pool is behind) or the pool is stopping.  A hint: it may change at
 * once. */
int b2_pool_idle(b2_pool *p);

/* Wake one sleeping worker now to poll for a job for up to `usec`
 * microseconds, for a caller about to queue one shortly (after reading
 * what the job will work on): the job is then taken at once instead of
 * after a wake-up, which costs tens of microseconds on some machines.
 * Only when a worker sleeps, nothing is queued and none polls already.
 * 1 when a worker was asked, else 0. */
int b2_pool_prewake(b2_pool *p, long usec);

/* Workers polling for a job right now (pre-woken or lingering): a job
 * queued now starts within microseconds.  A hint, as b2_pool_idle. */
int b2_pool_polling(b2_pool *p);
/* Called by a job running on a worker: when it ends, that worker polls
 * for the next job for up to `usec` microseconds before sleeping, as a
 * pre-woken one does (for a job its caller follows with another at
 * once).  Outside a worker, nothing. */
void b2_pool_linger(long usec);
/* The job a pre-wake was for will not come: a worker asked to poll, or
 * polling, goes back to sleep now. */
void b2_pool_prewake_cancel(b2_pool *p);

#endif /* B2_POOL_H */
