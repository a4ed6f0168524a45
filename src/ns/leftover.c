/*
 * leftover.c - what crashes leave in a SOURCE directory, and removing
 * entries that take more than one call (see b2_ns.h):
 *   - .b2fs-gone-PID-N.b2tmp: a frame a daemon was deleting (set aside
 *     under that name), when process PID is dead and is not us; a file, or
 *     a sparse frame's directory of files (perhaps half deleted).  With a
 *     marker .b2fs-gone-PID-N.restore.b2tmp beside it, the entry was moved
 *     aside by a rename that had not yet taken its target name: it goes
 *     back to its name instead (as if the rename had not begun);
 *   - .NAME.b2tmp for a frame name NAME: the engine's temporaries (the new
 *     file of a compaction or rewrite, the file or sparse directory of a
 *     creation), when the caller's writer does not work on NAME and no
 *     process holds the file's lock (the engine locks the files it
 *     rewrites into).  A directory goes only if it holds nothing but what
 *     creation writes;
 *   - .b2fs-gone-PID-N.b2tmp.b2lock: the sidecar of such an entry (its
 *     writer locked it under that name), once the entry is gone and no
 *     process holds the sidecar (whoever PID is);
 *   - ..b2fs-gone-PID-N.b2tmp.b2tmp (and ...b2fs-gone-PID-N.b2tmp.b2tmp.b2tmp):
 *     the engine's temporaries of a hidden entry it was making (a frame
 *     made anew for a rename to a name of another kind, b2_ns_convert),
 *     when process PID is dead and no process holds the file's lock;
 *   - .NAME.redo.b2tmp: the new content of a hard-linked frame that was
 *     being copied over it in place (b2_frame_compact): the copy is done
 *     again (b2_frame_redo), then the file goes.
 * A NAME near NAME_MAX gives both a shortened name instead
 * (b2_frame_temp_name: a prefix of NAME and a hash of it); the entry it
 * belongs to is then found by making the names of the directory's
 * entries, and a redo file none gives is removed (its frame is gone).
 * Nothing else is touched: other hidden names, symlinks and other types.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "b2_error.h"
#include "b2_frame.h"
#include "b2_ns.h"

int b2_ns_each_entry(int pfd, const char *name, b2_ns_entry_fn fn, void *arg) {
  int dfd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) return b2_fail(b2_from_errno(errno), "%s: %s", name, strerror(errno));
  DIR *d = fdopendir(dfd);
  if (!d) {
    int err = errno;
    close(dfd);
    return b2_fail(b2_from_errno(err), "%s: %s", name, strerror(err));
  }
  int rc = 0;
  struct dirent *e;
  while (rc >= 0 && (e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    rc = fn(dirfd(d), e->d_name, e->d_type, arg);
  }
  closedir(d);
  return rc;
}

/* A sparse frame holds regular files only (chunks.b2frame, NNNNNNNN.chunk
 * and temporaries); anything else is left, and so is the directory. */
static int unlink_file(int dfd, const char *name, unsigned char type, void *arg) {
  (void)arg;
  if (type != DT_REG && type != DT_UNKNOWN) return 0;
  if (unlinkat(dfd, name, 0) < 0 && errno != ENOENT)
    return b2_fail(b2_from_errno(errno), "%s: %s", name, strerror(errno));
  return 0;
}

int b2_ns_remove_frame_dir(int dirfd, const char *name) {
  int rc = b2_ns_each_entry(dirfd, name, unlink_file, NULL);
  if (rc < 0) return rc;
  if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0)
    return b2_fail(b2_from_errno(errno), "%s: %s", name, strerror(errno));
  return 0;
}

#define TMP_SUFFIX B2_FRAME_TEMP_SUFFIX
#define RESTORE_SUFFIX ".restore" TMP_SUFFIX

/* The PID of a name B2_NS_GONE_PREFIX "PID-N" suffix, 0 for other names. */
static pid_t gone_pid_sfx(const char *name, const char *suffix) {
  size_t k = sizeof B2_NS_GONE_PREFIX - 1;
  if (strncmp(name, B2_NS_GONE_PREFIX, k) != 0) return 0;
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

/* The PID of an engine temporary of a hidden entry (a frame made at a
 * hidden name, b2_ns_convert: "." + ".b2fs-gone-PID-N.b2tmp" +
 * ".b2tmp", and the temporaries of that, one dot and suffix more each),
 * 0 for other names. */
static pid_t gone_temp_pid(const char *name) {
  size_t lead = 0, k = sizeof TMP_SUFFIX - 1;
  while (name[lead] == '.') lead++;
  char g[NAME_MAX + 1];
  if (lead < 2 || (size_t)snprintf(g, sizeof g, "%s", name + lead - 1) >= sizeof g) return 0;
  for (size_t n = strlen(g), strip = 1; strip < lead; strip++) {
    if (n <= k || strcmp(g + n - k, TMP_SUFFIX) != 0) return 0;
    g[n -= k] = 0;
  }
  return gone_pid(g);
}

/* A frame of this process set aside while open, or a temporary of one:
 * its inode deletes it at its last close. */
static int own_gone(const char *name) {
  pid_t me = getpid();
  return gone_pid(name) == me || gone_temp_pid(name) == me ||
         gone_pid_sfx(name, TMP_SUFFIX B2_FRAME_LOCK_SUFFIX) == me;
}

static int count_shown(int dfd, const char *name, unsigned char type, void *arg) {
  (void)dfd, (void)type;
  if (!b2_ns_name_hidden(name)) ((int *)arg)[0]++;
  else if (own_gone(name)) ((int *)arg)[1]++;
  return 0;
}

static int unlink_hidden(int dfd, const char *name, unsigned char type, void *arg) {
  (void)arg;
  if (!b2_ns_name_hidden(name) || own_gone(name)) return 0;
  if (type == DT_DIR) return b2_ns_remove_frame_dir(dfd, name);
  if (unlinkat(dfd, name, 0) < 0 && errno != ENOENT)
    return b2_fail(b2_from_errno(errno), "%s: %s", name, strerror(errno));
  return 0;
}

int b2_ns_clear_hidden(int dirfd, const char *name) {
  int n[2] = {0, 0}; /* shown, own frames set aside */
  int rc = b2_ns_each_entry(dirfd, name, count_shown, n);
  if (rc < 0) return rc;
  if (n[0]) return 0;
  rc = b2_ns_each_entry(dirfd, name, unlink_hidden, NULL);
  return rc < 0 ? rc : n[1] ? 2 : 1;
}

/* ---- restore markers --------------------------------------------------------- */

/* The marker's name for hidden name ".b2fs-gone-PID-N.b2tmp". */
static int marker_name(const char *hidden, char *out, size_t cap) {
  size_t n = strlen(hidden), k = sizeof TMP_SUFFIX - 1;
  if (n <= k || strcmp(hidden + n - k, TMP_SUFFIX) != 0) return B2_E_INVAL;
  if ((size_t)snprintf(out, cap, "%.*s%s", (int)(n - k), hidden, RESTORE_SUFFIX) >= cap)
    return B2_E_NAMETOOLONG;
  return 0;
}

int b2_ns_restore_mark(int dfd, const char *hidden, const char *esrc, const char *target) {
  char mk[128];
  int rc = marker_name(hidden, mk, sizeof mk);
  if (rc < 0) return rc;
  size_t a = strlen(esrc) + 1, b = strlen(target) + 1;
  int fd = openat(dfd, mk, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return b2_fail(b2_from_errno(errno), "%s: %s", mk, strerror(errno));
  struct iovec iov[2] = {{(void *)esrc, a}, {(void *)target, b}};
  ssize_t w = writev(fd, iov, 2);
  rc = w == (ssize_t)(a + b) ? 0 : b2_fail(w < 0 ? b2_from_errno(errno) : B2_E_IO, "%s: short write", mk);
  close(fd);
  if (rc < 0) unlinkat(dfd, mk, 0);
  return rc;
}

void b2_ns_restore_unmark(int dfd, const char *hidden) {
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

typedef struct owner_find {
  const char *temp, *suffix;
  char *stem;
  int found;
} owner_find;

static int owner_one(int dfd, const char *name, unsigned char type, void *arg) {
  (void)dfd, (void)type;
  owner_find *o = arg;
  char t[NAME_MAX + 1];
  if (!o->found && !b2_ns_name_hidden(name) &&
      b2_frame_temp_name(name, o->suffix, t, sizeof t) == 0 && strcmp(t, o->temp) == 0) {
    snprintf(o->stem, B2_NS_NAME_MAX + 1, "%s", name);
    o->found = 1;
  }
  return 0;
}

/* The entry NAME whose temporary (b2_frame_temp_name with suffix) is
 * `name`, into stem (B2_NS_NAME_MAX + 1 bytes): 0, 1 when `name` has the
 * shortened form and no entry of dfd gives it (its frame is gone, or was
 * never made: a creation's), -1 when `name` is no such temporary.  A
 * plain form ".NAME.b2tmp" counts only when NAME is a frame's name. */
static int temp_stem(int dfd, const char *name, const char *suffix, char *stem) {
  size_t n = strlen(name), k = strlen(suffix);
  if (name[0] != '.' || n <= k + 1 || strcmp(name + n - k, suffix) != 0) return -1;
  if (b2_frame_temp_hashed(name, suffix)) {
    owner_find o = {name, suffix, stem, 0};
    int rc = b2_ns_each_entry(dfd, ".", owner_one, &o);
    return rc < 0 ? -1 : o.found ? 0 : 1;
  }
  snprintf(stem, B2_NS_NAME_MAX + 1, "%.*s", (int)(n - k - 1), name + 1);
  if (strcmp(suffix, B2_FRAME_REDO_SUFFIX) == 0) return 0;
  return b2_ns_name_kind(stem, NULL) == B2_NS_PLAIN ? -1 : 0;
}

#define GONE_LOCK_SUFFIX TMP_SUFFIX B2_FRAME_LOCK_SUFFIX

/* The `.b2lock` sidecar of hidden entry `hidden` (a frame set aside, whose
 * writer locked it under that name) when the entry is gone and no process
 * holds the sidecar: removed.  1 if removed. */
static int drop_gone_lock(int dfd, const char *hidden) {
  char lk[128];
  struct stat st, now;
  if ((size_t)snprintf(lk, sizeof lk, "%s" B2_FRAME_LOCK_SUFFIX, hidden) >= sizeof lk ||
      fstatat(dfd, hidden, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT)
    return 0;
  int fd = openat(dfd, lk, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return 0;
  int gone = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && flock(fd, LOCK_EX | LOCK_NB) == 0 &&
             fstatat(dfd, lk, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_ino == st.st_ino &&
             now.st_dev == st.st_dev && unlinkat(dfd, lk, 0) == 0;
  close(fd); /* releases the lock */
  return gone;
}

/* Remove entry `name` of dfd if it is a leftover; 1 if removed. */
static int sweep_entry(int dfd, const char *name, const b2_ns_sweep_ops *ops) {
  struct stat st;
  pid_t pid = gone_pid(name);
  if (pid > 0) {
    if (!dead(pid) || fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) return 0;
    if (restore_aside(dfd, name)) return 1;
    int gone = S_ISREG(st.st_mode)   ? unlinkat(dfd, name, 0) == 0
               : S_ISDIR(st.st_mode) ? b2_ns_remove_frame_dir(dfd, name) == 0
                                     : 0;
    if (gone) (void)drop_gone_lock(dfd, name);
    return gone;
  }
  if (gone_pid_sfx(name, GONE_LOCK_SUFFIX) > 0) { /* a sidecar left by its frame */
    char hidden[128];
    snprintf(hidden, sizeof hidden, "%.*s", (int)(strlen(name) - (sizeof B2_FRAME_LOCK_SUFFIX - 1)),
             name);
    return drop_gone_lock(dfd, hidden);
  }
  pid = gone_pid_sfx(name, RESTORE_SUFFIX);
  if (pid > 0) { /* a marker whose entry is gone (or not yet moved) */
    char hidden[128];
    size_t k = strlen(name) - (sizeof RESTORE_SUFFIX - 1);
    snprintf(hidden, sizeof hidden, "%.*s%s", (int)k, name, TMP_SUFFIX);
    if (!dead(pid) || fstatat(dfd, hidden, &st, AT_SYMLINK_NOFOLLOW) == 0) return 0;
    return unlinkat(dfd, name, 0) == 0;
  }
  pid = gone_temp_pid(name);
  if (pid > 0) /* a temporary of a dead daemon's hidden array, unless held */
    return dead(pid) && b2_frame_drop_temp(dfd, name) == 1;
  char stem[B2_NS_NAME_MAX + 1];
  int t = temp_stem(dfd, name, B2_FRAME_REDO_SUFFIX, stem);
  if (t == 1) /* the redo file of a frame whose every name is gone */
    return unlinkat(dfd, name, 0) == 0;
  if (t == 0) {
    /* A hard-linked frame's in-place rewrite that a crash interrupted:
     * finish it, unless our writer is doing it now. */
    if (ops->busy(ops->ctx, dfd, stem)) return 0;
    int rc = b2_frame_redo(dfd, stem);
    if (rc < 0 && ops->note) ops->note(ops->ctx, stem, b2_last_detail());
    return rc == 0;
  }
  t = temp_stem(dfd, name, B2_FRAME_TEMP_SUFFIX, stem);
  if (t < 0 || (t == 0 && ops->busy(ops->ctx, dfd, stem))) return 0;
  return b2_frame_drop_temp(dfd, name) == 1; /* unless some process holds it */
}

typedef struct sweep_ctx {
  const b2_ns_sweep_ops *ops;
  int n;
} sweep_ctx;

static int sweep_one(int dfd, const char *name, unsigned char type, void *arg) {
  (void)type;
  sweep_ctx *c = arg;
  if (name[0] == '.' && b2_ns_name_hidden(name) && sweep_entry(dfd, name, c->ops)) c->n++;
  return 0;
}

int b2_ns_sweep(int dirfd, const b2_ns_sweep_ops *ops) {
  sweep_ctx c = {ops, 0};
  int rc = b2_ns_each_entry(dirfd, ".", sweep_one, &c);
  return rc < 0 ? rc : c.n;
}

