/*
 * sweep.c - leftovers of crashes in SOURCE, removed the first time the
 * daemon looks into a directory (a lookup in it or a listing of it), so
 * a huge SOURCE costs nothing at mount:
 *   - .b2fs-gone-PID-N.b2tmp: a frame a daemon was deleting (ops_tree.c
 *     sets frames aside under that name), when process PID is dead and is
 *     not us; a file, or a sparse frame's directory of files (perhaps half
 *     deleted).  With a marker .b2fs-gone-PID-N.restore.b2tmp beside it,
 *     the entry was moved aside by a rename that had not yet taken its
 *     target name: it goes back to its name instead (as if the rename had
 *     not begun);
 *   - .NAME.b2tmp for a frame name NAME: the engine's temporaries (the new
 *     file of a compaction or rewrite, the file or sparse directory of a
 *     creation), when no writer of ours works on NAME and no process holds
 *     the file's lock (the engine locks the files it rewrites into).  A
 *     directory goes only if it holds nothing but what creation writes;
 *   - .NAME.redo.b2tmp: the new content of a hard-linked frame that was
 *     being copied over it in place (b2_frame_compact): the copy is done
 *     again (b2_frame_redo), then the file goes.
 * Nothing else is touched: other hidden names, symlinks and other types,
 * and nothing at all under -o ro.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "b2fs.h"

#define TMP_SUFFIX ".b2tmp"
#define RESTORE_SUFFIX ".restore" TMP_SUFFIX
#define INDEX_TMP B2_NS_SPARSE_INDEX ".tmp"

/* The PID of a name B2FS_GONE_PREFIX "PID-N" suffix, 0 for other names. */
static pid_t gone_pid_sfx(const char *name, const char *suffix) {
  size_t k = sizeof B2FS_GONE_PREFIX - 1;
  if (strncmp(name, B2FS_GONE_PREFIX, k) != 0) return 0;
  const char *p = name + k;
  long pid = 0;
  int nd = 0;
  for (; *p >= '0' && *p <= '9'; p++) {
    if (++nd > 9) return 0;
    pid = pid * 10 + (*p - '0');
  }
  if (nd == 0 || *p++ != '-') return 0;
  for (nd = 0; *p >= '0' && *p <= '9'; p++)
    if (++nd > 10) return 0;
  if (nd == 0 || strcmp(p, suffix) != 0) return 0;
  return (pid_t)pid;
}

static pid_t gone_pid(const char *name) { return gone_pid_sfx(name, TMP_SUFFIX); }

/* ---- restore markers --------------------------------------------------------- */

/* The marker's name for hidden name ".b2fs-gone-PID-N.b2tmp". */
static int marker_name(const char *hidden, char *out, size_t cap) {
  size_t n = strlen(hidden), k = sizeof TMP_SUFFIX - 1;
  if (n <= k || strcmp(hidden + n - k, TMP_SUFFIX) != 0) return -EINVAL;
  if ((size_t)snprintf(out, cap, "%.*s%s", (int)(n - k), hidden, RESTORE_SUFFIX) >= cap)
    return -ENAMETOOLONG;
  return 0;
}

int b2fs_restore_mark(int dfd, const char *hidden, const char *esrc, const char *target) {
  char mk[128];
  int rc = marker_name(hidden, mk, sizeof mk);
  if (rc < 0) return rc;
  size_t a = strlen(esrc) + 1, b = strlen(target) + 1;
  int fd = openat(dfd, mk, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return -errno;
  struct iovec iov[2] = {{(void *)esrc, a}, {(void *)target, b}};
  ssize_t w = writev(fd, iov, 2);
  rc = w == (ssize_t)(a + b) ? 0 : w < 0 ? -errno : -EIO;
  close(fd);
  if (rc < 0) unlinkat(dfd, mk, 0);
  return rc;
}

void b2fs_restore_unmark(int dfd, const char *hidden) {
  char mk[128];
  if (marker_name(hidden, mk, sizeof mk) == 0) unlinkat(dfd, mk, 0);
}

/* A plain name of this directory (no slash, not . or ..). */
static int plain_name(const char *s) {
  return *s && strchr(s, '/') == NULL && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

/* Hidden entry `hidden` of a dead daemon: if its marker says a rename had
 * moved it aside and the rename's target name is still free, put it back
 * under its own name.  The marker goes either way.  1 if put back. */
static int restore_aside(int dfd, const char *hidden) {
  char mk[128], buf[2 * (NAME_MAX + 1) + 1];
  if (marker_name(hidden, mk, sizeof mk) < 0) return 0;
  int fd = openat(dfd, mk, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  int back = 0;
  if (n > 0) {
    buf[n] = 0;
    const char *esrc = buf, *target = buf + strlen(buf) + 1;
    struct stat st;
    if (target < buf + n && plain_name(esrc) && plain_name(target) && /* buf[n] ends target */
        fstatat(dfd, target, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT &&
        renameat2(dfd, hidden, dfd, esrc, RENAME_NOREPLACE) == 0)
      back = 1;
  }
  unlinkat(dfd, mk, 0);
  return back;
}

/* Is process pid gone for sure (and not us)? */
static int dead(pid_t pid) {
  return pid > 0 && pid != getpid() && kill(pid, 0) < 0 && errno == ESRCH;
}

/* The frame name NAME of a temporary ".NAME.b2tmp" into stem, or -1. */
static int temp_stem(const char *name, char *stem, size_t cap) {
  size_t n = strlen(name), k = sizeof TMP_SUFFIX - 1;
  if (name[0] != '.' || n <= k + 1 || strcmp(name + n - k, TMP_SUFFIX) != 0) return -1;
  size_t m = n - k - 1;
  if (m + 1 > cap) return -1;
  memcpy(stem, name + 1, m);
  stem[m] = 0;
  return b2_ns_name_kind(stem, NULL) == B2_NS_PLAIN ? -1 : 0;
}

/* Remove regular file `name` of dfd unless a process holds its lock or the
 * name now is another file.  1 if removed. */
static int remove_unlocked(int dfd, const char *name, const struct stat *st) {
  int fd = openat(dfd, name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return 0;
  struct stat fst;
  int gone = 0;
  if (fstat(fd, &fst) == 0 && fst.st_ino == st->st_ino && fst.st_dev == st->st_dev &&
      flock(fd, LOCK_EX | LOCK_NB) == 0) {
    struct stat now; /* still that file under that name */
    gone = fstatat(dfd, name, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_ino == st->st_ino &&
           unlinkat(dfd, name, 0) == 0;
  }
  close(fd);
  return gone;
}

/* A creation's sparse directory holds the index or its temporary only. */
static int creation_entry(int dfd, const char *name, unsigned char type, void *arg) {
  (void)dfd, (void)arg;
  if ((type == DT_REG || type == DT_UNKNOWN) &&
      (strcmp(name, B2_NS_SPARSE_INDEX) == 0 || strcmp(name, INDEX_TMP) == 0))
    return 0;
  return -ENOTEMPTY;
}

static int remove_creation_dir(int dfd, const char *name) {
  if (b2fs_each_entry(dfd, name, creation_entry, NULL) < 0) return 0;
  int sub = openat(dfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (sub < 0) return 0;
  struct stat st;
  if (fstatat(sub, B2_NS_SPARSE_INDEX, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
    (void)unlinkat(sub, B2_NS_SPARSE_INDEX, 0);
  if (fstatat(sub, INDEX_TMP, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
    (void)unlinkat(sub, INDEX_TMP, 0);
  close(sub);
  return unlinkat(dfd, name, AT_REMOVEDIR) == 0;
}

/* Remove entry `name` of dfd if it is a leftover; 1 if removed. */
static int sweep_entry(int dfd, const char *name) {
  struct stat st;
  pid_t pid = gone_pid(name);
  if (pid > 0) {
    if (!dead(pid) || fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) return 0;
    if (restore_aside(dfd, name)) return 1;
    if (S_ISREG(st.st_mode)) return unlinkat(dfd, name, 0) == 0;
    if (S_ISDIR(st.st_mode)) return b2fs_remove_frame_dir(dfd, name) == 0;
    return 0;
  }
  pid = gone_pid_sfx(name, RESTORE_SUFFIX);
  if (pid > 0) { /* a marker whose entry is gone (or not yet moved) */
    char hidden[128];
    size_t k = strlen(name) - (sizeof RESTORE_SUFFIX - 1);
    snprintf(hidden, sizeof hidden, "%.*s%s", (int)k, name, TMP_SUFFIX);
    if (!dead(pid) || fstatat(dfd, hidden, &st, AT_SYMLINK_NOFOLLOW) == 0) return 0;
    return unlinkat(dfd, name, 0) == 0;
  }
  char stem[B2_NS_NAME_MAX + 1], path[PATH_MAX];
  size_t n = strlen(name), r = sizeof B2_FRAME_REDO_SUFFIX - 1;
  if (n > r + 1 && strcmp(name + n - r, B2_FRAME_REDO_SUFFIX) == 0) {
    /* A hard-linked frame's in-place rewrite that a crash interrupted:
     * finish it, unless our writer is doing it now. */
    snprintf(stem, sizeof stem, "%.*s", (int)(n - r - 1), name + 1);
    if (b2fs_path_at(dfd, stem, path, sizeof path) < 0 || b2fs_frame_writing_at(path)) return 0;
    int rc = b2_frame_redo(dfd, name);
    if (rc < 0) b2fs_log("%s: %s", path, b2_last_detail());
    return rc == 0;
  }
  if (temp_stem(name, stem, sizeof stem) < 0) return 0;
  if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) return 0;
  if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) return 0;
  if (b2fs_path_at(dfd, stem, path, sizeof path) < 0 || b2fs_frame_writing_at(path)) return 0;
  return S_ISREG(st.st_mode) ? remove_unlocked(dfd, name, &st) : remove_creation_dir(dfd, name);
}

static int sweep_one(int dfd, const char *name, unsigned char type, void *arg) {
  (void)type;
  if (name[0] == '.' && b2_ns_name_hidden(name) && sweep_entry(dfd, name)) (*(int *)arg)++;
  return 0;
}

void b2fs_sweep_dir(b2fs_inode *dir) {
  if (dir->swept || atomic_exchange(&dir->swept, 1) || b2fs_g.opts.ro) return;
  int n = 0;
  int rc = b2fs_each_entry(dir->fd, ".", sweep_one, &n);
  if (n > 0 || (rc < 0 && rc != -EACCES)) {
    char path[PATH_MAX];
    if (b2fs_real_path(dir, path, sizeof path) < 0) snprintf(path, sizeof path, "?");
    if (rc < 0)
      b2fs_log("%s: cannot look for leftovers: %s", path, strerror(-rc));
    else
      b2fs_log("%s: removed %d leftover%s of an earlier run", path, n, n > 1 ? "s" : "");
  }
}
