/*
 * park.c - parsed frames kept across opens.
 *
 * Opening a frame reads and checks its header, trailer, index and
 * checksum table; for a small file that costs more than reading it.  A
 * program that looks at a file and then opens it (a FUSE lookup or getattr
 * followed by open; `ls -l` then `cat`) would parse it twice.  So a frame
 * closed read-only is parked here, its file closed (a parked frame must
 * not keep a deleted file's space), and the next read-only open of a path
 * whose file, once opened, has the same device, inode, size, modification
 * and change times (fstat) takes it back with the new descriptor instead
 * of parsing the file again: the same inode unchanged holds the same
 * bytes.  A read-only frame is immutable, so nothing else needs checking.
 *
 * At most B2_PARK_MAX frames (least recently parked go first), only
 * contiguous frames whose index and trailer take at most PARK_META_MAX
 * bytes, each for at most PARK_SECONDS.  Frames are taken out while in
 * use: each b2_frame still has one user at a time.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "b2_error.h"
#include "common/util.h"
#include "file/file_impl.h"

#define PARK_META_MAX ((int64_t)256 << 10)
#define PARK_SECONDS 30


/* Close the frames parked for longer than PARK_SECONDS (env->park_mu
 * held); they are moved to *old for closing after the lock. */
static int expire(b2_env *env, int64_t now, b2_frame **old, int nold) {
  int k = 0;
  for (int i = 0; i < env->npark;) {
    if (now - env->park[i].since > PARK_SECONDS && k < nold) {
      old[k++] = env->park[i].frame;
      env->park[i] = env->park[--env->npark];
    } else {
      i++;
    }
  }
  return k;
}

/* b2_frame_reuse_fn: the parked frame of the file whose fstat is st. */
static b2_frame *take(void *ctx, const struct stat *st) {
  b2_env *env = ctx;
  b2_frame *fr = NULL;
  pthread_mutex_lock(&env->park_mu);
  for (int i = 0; i < env->npark; i++) {
    if (!b2_same_file(&env->park[i].st, st)) continue;
    fr = env->park[i].frame;
    env->park[i] = env->park[--env->npark];
    break;
  }
  pthread_mutex_unlock(&env->park_mu);
  return fr;
}

int b2_file_park_open(b2_env *env, int dirfd, const char *path, int probe, b2_frame **out) {
  int use = 0;
  if (env && env->park_max > 0) {
    pthread_mutex_lock(&env->park_mu);
    use = env->npark > 0;
    pthread_mutex_unlock(&env->park_mu);
  }
  if (probe) return b2_frame_open_probe(dirfd, path, use ? take : NULL, env, out);
  if (dirfd != -1)
    return use ? b2_frame_open_reusing_at(dirfd, path, take, env, out)
               : b2_frame_open_at(dirfd, path, out);
  return use ? b2_frame_open_reusing(path, take, env, out) : b2_frame_open(path, out);
}

int b2_file_park_put(b2_env *env, b2_frame *fr) {
  if (!env || env->park_max <= 0 || b2_frame_writable(fr)) return 0;
  b2_frame_info in;
  struct stat st;
  if (b2_frame_info_copy(fr, &in) < 0 || in.layout != B2_LAYOUT_CONTIGUOUS ||
      in.frame_size - in.header_size - in.cbytes > PARK_META_MAX || b2_frame_stat(fr, &st) < 0 ||
      b2_frame_detach(fr) < 0)
    return 0;
  b2_frame *old[B2_PARK_MAX + 1];
  int nold;
  int64_t now = (int64_t)(b2_now_ns() / 1000000000u);
  pthread_mutex_lock(&env->park_mu);
  nold = expire(env, now, old, B2_PARK_MAX);
  if (env->npark >= env->park_max) { /* the oldest makes room */
    int o = 0;
    for (int i = 1; i < env->npark; i++)
      if (env->park[i].seq < env->park[o].seq) o = i;
    old[nold++] = env->park[o].frame;
    env->park[o] = env->park[--env->npark];
  }
  env->park[env->npark].frame = fr;
  env->park[env->npark].st = st;
  env->park[env->npark].since = now;
  env->park[env->npark].seq = ++env->park_seq;
  env->npark++;
  pthread_mutex_unlock(&env->park_mu);
  for (int i = 0; i < nold; i++) b2_frame_close(old[i]);
  return 1;
}

void b2_file_park_clear(b2_env *env) {
  pthread_mutex_lock(&env->park_mu);
  int n = env->npark;
  b2_frame *old[B2_PARK_MAX];
  for (int i = 0; i < n; i++) old[i] = env->park[i].frame;
  env->npark = 0;
  pthread_mutex_unlock(&env->park_mu);
  for (int i = 0; i < n; i++) b2_frame_close(old[i]);
}
