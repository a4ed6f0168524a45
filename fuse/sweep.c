/*
 * sweep.c - leftovers of crashes in SOURCE, removed the first time the
 * daemon looks into a directory (a lookup in it or a listing of it), so a
 * huge SOURCE costs nothing at mount; nothing at all under -o ro.  What is
 * a leftover and how it goes is the namespace layer's (b2_ns_sweep,
 * src/ns/leftover.c); the daemon tells which frames its writers use.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "b2fs.h"

/* Does our writer work on frame `name` of dirfd? */
static int busy(void *ctx, int dirfd, const char *name) {
  (void)ctx;
  return b2fs_frame_writing_at(dirfd, name);
}

static void note(void *ctx, const char *name, const char *detail) {
  (void)ctx;
  b2fs_log("%s: %s", name, detail);
}

void b2fs_sweep_dir(b2fs_inode *dir) {
  if (dir->swept || atomic_exchange(&dir->swept, 1) || b2fs_g.opts.ro) return;
  b2_ns_sweep_ops ops = {busy, note, NULL};
  int dfd = openat(dir->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int rc = dfd < 0 ? b2_from_errno(errno) : b2_ns_sweep(dfd, &ops);
  if (dfd >= 0) close(dfd);
  int n = rc > 0 ? rc : 0;
  if (n > 0 || (rc < 0 && rc != B2_E_PERM)) {
    char path[PATH_MAX];
    if (b2fs_real_path(dir, path, sizeof path) < 0) snprintf(path, sizeof path, "?");
    if (rc < 0)
      b2fs_log("%s: cannot look for leftovers: %s", path,
               b2_last_detail()[0] ? b2_last_detail() : b2_strerror(rc));
    else
      b2fs_log("%s: removed %d leftover%s of an earlier run", path, n, n > 1 ? "s" : "");
  }
}
