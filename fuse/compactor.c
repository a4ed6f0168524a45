/*
 * compactor.c - frames kept open for writing are compacted while open.
 *
 * Each commit of a contiguous frame leaves what it replaced as dead space
 * (the chunks written again, the old index and trailer), reclaimed by
 * compaction at the last close.  A file that stays open for hours and is
 * committed often (a log appended to slowly: each idle commit stores its
 * growing last chunk again) would grow without bound until then.  Four
 * times a second this thread looks at every frame open for writing with new writes
 * committed since its last look and none since for the idle commit's
 * delay (the copy holds off the file's reads and writes), and compacts those
 * past the mount's thresholds (b2fs_frame_compact_open, whandle.c).
 */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "b2fs.h"
#include "common/util.h"

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t thread;
  int started, stop;
} C = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};

static void look(void) {
  size_t n;
  if (!b2fs_frame_any_writable()) return;
  b2fs_inode **ins = b2fs_wreg_pinned(&n);
  for (size_t i = 0; i < n; i++) {
    pthread_mutex_lock(&C.mu);
    int stop = C.stop;
    pthread_mutex_unlock(&C.mu);
    if (!stop) b2fs_frame_compact_open(ins[i]);
    b2fs_inode_forget(ins[i], 1);
  }
  free(ins);
}

static void *compactor_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&C.mu);
  while (!C.stop) {
    struct timespec ts = b2_deadline_ms(250);
    pthread_cond_timedwait(&C.cv, &C.mu, &ts);
    if (C.stop) break;
    pthread_mutex_unlock(&C.mu);
    look();
    pthread_mutex_lock(&C.mu);
  }
  pthread_mutex_unlock(&C.mu);
  return NULL;
}

int b2fs_compactor_start(void) {
  if (b2fs_g.opts.compact_pct == 0) return 0;
  pthread_mutex_lock(&C.mu);
  C.stop = 0;
  int rc = pthread_create(&C.thread, NULL, compactor_main, NULL);
  C.started = rc == 0;
  pthread_mutex_unlock(&C.mu);
  return rc == 0 ? 0 : -rc;
}

void b2fs_compactor_stop(void) {
  pthread_mutex_lock(&C.mu);
  int started = C.started;
  C.stop = 1;
  pthread_cond_broadcast(&C.cv);
  pthread_mutex_unlock(&C.mu);
  if (started) pthread_join(C.thread, NULL);
  C.started = 0;
}
