/*
 * create.c - create an empty frame (header with the given parameters and
 * fixed metalayers, then an empty trailer) and open it for writing.  The
 * file is written under a temporary name, synced and renamed into place
 * without replacing anything, so `path` either does not exist or holds a
 * complete frame.  A sparse frame is built the same way: its directory is
 * made under the temporary name, chunks.b2frame placed in it, and the
 * directory renamed into place (a crash never leaves an empty directory
 * under the frame's name).  Every temporary (these, and compaction's) is
 * held under an exclusive flock from its making until it has its name, so
 * that only a crash's leftovers are ever swept (b2_frame_drop_temp).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "b2_error.h"
#include "common/fileio.h"
#include "frame/frame_impl.h"

/* The bytes of an empty frame. */
static int empty_frame(const b2_frame_params *p, uint8_t **out, size_t *len) {
  uint8_t fixed[B2_FH_FIXED];
  int rc = b2_frame_build_fixed(p, fixed);
  if (rc < 0) return rc;
  if (p->nmeta < 0 || p->nmeta > B2_FRAME_MAX_META || (p->nmeta && !p->meta))
    return b2_fail(B2_E_INVAL, "%d metalayers (at most %d)", p->nmeta,
                   B2_FRAME_MAX_META);
  b2_blob b[B2_FRAME_MAX_META];
  for (int k = 0; k < p->nmeta; k++) {
    const b2_frame_meta_init *m = &p->meta[k];
    if (!m->name || (m->len && !m->data) || m->len > UINT32_MAX)
      return b2_fail(B2_E_INVAL, "metalayer %d: bad name or content", k);
    for (int j = 0; j < k; j++)
      if (strcmp(b[j].name, m->name) == 0)
        return b2_fail(B2_E_INVAL, "metalayer \"%s\" given twice", m->name);
    b[k].name = m->name;
    b[k].data = m->data;
    b[k].len = (uint32_t)m->len;
  }
  uint8_t *h, *t;
  size_t hl, tl;
  rc = b2_frame_build_header(fixed, b, p->nmeta, &h, &hl);
  if (rc < 0) return rc;
  rc = b2_frame_build_trailer(NULL, 0, &t, &tl);
  uint8_t *buf = rc < 0 ? NULL : realloc(h, hl + tl);
  if (!rc && !buf) rc = b2_fail(B2_E_NOMEM, "out of memory");
  if (rc < 0) {
    free(h);
    free(t);
    return rc;
  }
  memcpy(buf + hl, t, tl);
  free(t);
  b2_frame_patch_sizes(buf, (int64_t)(hl + tl), 0, 0, p->chunksize, 0);
  *out = buf;
  *len = hl + tl;
  return 0;
}

/* ---- temporaries ------------------------------------------------------- */

#define HASH_DIGITS 16

int b2_frame_temp_name(const char *base, const char *suffix, char *out, size_t cap) {
  size_t n = strlen(base), k = strlen(suffix);
  if (1 + n + k <= (size_t)B2_FRAME_TEMP_NAME_MAX)
    return (size_t)snprintf(out, cap, ".%s%s", base, suffix) < cap ? 0 : -1;
  uint64_t h = 14695981039346656037ull; /* FNV-1a */
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)base[i]) * 1099511628211ull;
  int keep = B2_FRAME_TEMP_NAME_MAX - 2 - HASH_DIGITS - (int)k;
  return (size_t)snprintf(out, cap, ".%.*s~%016llx%s", keep, base, (unsigned long long)h,
                          suffix) < cap ? 0 : -1;
}

int b2_frame_temp_hashed(const char *name, const char *suffix) {
  size_t n = strlen(name), k = strlen(suffix);
  if (n != (size_t)B2_FRAME_TEMP_NAME_MAX || name[0] != '.' || strcmp(name + n - k, suffix) != 0)
    return 0;
  const char *h = name + n - k - HASH_DIGITS;
  if (h[-1] != '~') return 0;
  for (int i = 0; i < HASH_DIGITS; i++)
    if (!strchr("0123456789abcdef", h[i])) return 0;
  return 1;
}

/* Take the exclusive flock of a temporary just made (fd) and check that it
 * is still linked: a sweep (this daemon's or another's) that opened it
 * first may hold the lock to remove it.  0, or 1 to make it again. */
static int hold_new(int fd) {
  struct stat st;
  for (int k = 0; k < 100; k++) {
    if (flock(fd, LOCK_EX | LOCK_NB) == 0)
      return fstat(fd, &st) == 0 && st.st_nlink > 0 ? 0 : 1;
    if (errno != EWOULDBLOCK && errno != EINTR) return 1;
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  return 1;
}

/* Only the two names a creation writes into its directory. */
static int creation_dir_clean(int sub) {
  int fd = dup(sub);
  DIR *d = fd < 0 ? NULL : fdopendir(fd);
  if (!d) {
    if (fd >= 0) close(fd);
    return 0;
  }
  int clean = 1;
  struct dirent *e;
  while (clean && (e = readdir(d)))
    clean = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
            !strcmp(e->d_name, B2_FRAME_SPARSE_INDEX) ||
            !strcmp(e->d_name, B2_FRAME_SPARSE_INDEX ".tmp");
  closedir(d);
  return clean;
}

int b2_frame_drop_temp(int dirfd, const char *name) {
  size_t n = name ? strlen(name) : 0, k = sizeof B2_FRAME_TEMP_SUFFIX - 1;
  if (n <= k + 1 || name[0] != '.' || strcmp(name + n - k, B2_FRAME_TEMP_SUFFIX) != 0) return 0;
  int fd = openat(dirfd, name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT || errno == ELOOP ? 0
                     : b2_fail(b2_from_errno(errno), "%s: %s", name, strerror(errno));
  struct stat st, now;
  int gone = 0, rc = 0;
  if (fstat(fd, &st) == 0 && (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) &&
      flock(fd, LOCK_EX | LOCK_NB) == 0 && /* nobody makes or renames it now */
      fstatat(dirfd, name, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_ino == st.st_ino &&
      now.st_dev == st.st_dev) {
    if (S_ISREG(st.st_mode)) {
      rc = b2_io_unlinkat(dirfd, name, 0);
    } else if (creation_dir_clean(fd)) {
      (void)unlinkat(fd, B2_FRAME_SPARSE_INDEX ".tmp", 0);
      (void)unlinkat(fd, B2_FRAME_SPARSE_INDEX, 0);
      rc = b2_io_unlinkat(dirfd, name, AT_REMOVEDIR);
    } else {
      rc = 1; /* holds more than a creation writes: not ours to remove */
    }
    gone = rc == 0;
  }
  close(fd); /* releases the lock */
  return rc < 0 ? rc : gone;
}

int b2_frame_make_temp(int dirfd, const char *tmp, int dir, mode_t mode) {
  /* A sweep may take a new temporary in the moment before it is locked
   * (then it is gone, and made again): a few attempts, not one. */
  for (int attempt = 0; attempt < 64; attempt++) {
    int fd;
    if (dir) {
      fd = b2_io_mkdirat(dirfd, tmp, mode);
      if (fd == 0) fd = b2_io_openat(dirfd, tmp, O_RDONLY | O_DIRECTORY, 0);
      if (fd == B2_E_NOENT) continue; /* swept before it was opened */
    } else {
      fd = b2_io_openat(dirfd, tmp, O_RDWR | O_CREAT | O_EXCL, mode);
    }
    if (fd == B2_E_EXIST) {
      int rc = b2_frame_drop_temp(dirfd, tmp);
      if (rc < 0) return rc;
      struct stat st;
      if (rc == 0 && fstatat(dirfd, tmp, &st, AT_SYMLINK_NOFOLLOW) == 0)
        return b2_fail(B2_E_BUSY, "%s: another process is creating this frame", tmp);
      continue;
    }
    if (fd < 0) return fd;
    if (hold_new(fd) == 0) return fd;
    b2_io_close(fd); /* removed under us before it was ours: again */
  }
  return b2_fail(B2_E_BUSY, "%s: cannot hold a temporary file", tmp);
}

/* Write `buf` to a new file `tmp` in dirfd, sync it and rename it to `name`
 * (without replacing when noreplace), then sync the directory.  The file
 * stays locked until it has its name (b2_frame_drop_temp). */
static int place_file(int dirfd, const char *tmp, const char *name,
                      const uint8_t *buf, size_t len, int noreplace) {
  int fd = b2_frame_make_temp(dirfd, tmp, 0, 0644);
  if (fd < 0) return fd;
  int rc = b2_io_pwrite(fd, buf, len, 0);
  if (!rc) rc = b2_io_fsync(fd);
  if (!rc) rc = b2_io_renameat(dirfd, tmp, dirfd, name, noreplace);
  if (rc < 0) (void)b2_io_unlinkat(dirfd, tmp, 0);
  b2_io_close(fd);
  return rc < 0 ? rc : b2_io_fsync(dirfd);
}

/* A sparse frame: directory `tmp` with its index, renamed to `name`
 * without replacing anything, then the parent synced; the directory is
 * locked until then. */
static int place_dir(int dirfd, const char *tmp, const char *name,
                     const uint8_t *buf, size_t len) {
  int sub = b2_frame_make_temp(dirfd, tmp, 1, 0755);
  if (sub < 0) return sub;
  int rc = place_file(sub, B2_FRAME_SPARSE_INDEX ".tmp", B2_FRAME_SPARSE_INDEX,
                      buf, len, 0);
  if (!rc) rc = b2_io_renameat(dirfd, tmp, dirfd, name, 1);
  if (rc < 0) {
    (void)unlinkat(sub, B2_FRAME_SPARSE_INDEX ".tmp", 0);
    (void)unlinkat(sub, B2_FRAME_SPARSE_INDEX, 0);
    (void)unlinkat(dirfd, tmp, AT_REMOVEDIR);
  }
  b2_io_close(sub);
  return rc < 0 ? rc : b2_io_fsync(dirfd);
}

/* Create the frame at entry `name` of dirfd, or at path `name` when dirfd
 * is -1.  A `temp` name is the caller's own (b2_frame_remake's): a file
 * left there by a failed or interrupted attempt is replaced, and one this
 * call placed but could not open is removed, so that the next attempt
 * finds the name free. */
static int create_in(int dirfd, const char *name, const b2_frame_params *p, b2_frame **out,
                     int temp) {
  if (!out) return b2_fail(B2_E_INVAL, "frame create: no output");
  *out = NULL;
  if (!name || !*name || !p)
    return b2_fail(B2_E_INVAL, "frame create: missing argument");
  if (dirfd != -1 && strchr(name, '/'))
    return b2_fail(B2_E_INVAL, "frame create: %s is not a name in a directory", name);
  if (p->layout != B2_LAYOUT_CONTIGUOUS && p->layout != B2_LAYOUT_SPARSE)
    return b2_fail(B2_E_INVAL, "frame create: layout %d", p->layout);
  uint8_t *buf = NULL;
  size_t len = 0;
  int rc = empty_frame(p, &buf, &len);
  if (rc < 0) return b2_context(rc, "frame create");
  const char *base = name;
  int pfd = dirfd == -1 ? b2_io_open_parent(name, &base)
                        : openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (pfd < 0) {
    free(buf);
    return dirfd == -1 ? pfd : b2_fail(b2_from_errno(errno), "frame create %s: directory: %s",
                                       name, strerror(errno));
  }
  char tmp[NAME_MAX + 1];
  if (b2_frame_temp_name(base, B2_FRAME_TEMP_SUFFIX, tmp, sizeof tmp) < 0) {
    rc = b2_fail(B2_E_LIMIT, "file name too long for a temporary file");
  } else if (p->layout == B2_LAYOUT_CONTIGUOUS) {
    rc = place_file(pfd, tmp, base, buf, len, !temp);
  } else {
    rc = place_dir(pfd, tmp, base, buf, len);
  }
  b2_io_close(pfd);
  free(buf);
  if (rc < 0) return b2_context(rc, "frame create %s", name);
  rc = b2_frame_open_rw_in(dirfd, name, out);
  if (rc < 0 && temp && p->layout == B2_LAYOUT_CONTIGUOUS) (void)unlinkat(dirfd, name, 0);
  return rc;
}

int b2_frame_create(const char *path, const b2_frame_params *p, b2_frame **out) {
  return create_in(-1, path, p, out, 0);
}

int b2_frame_create_at(int dirfd, const char *name, const b2_frame_params *p, b2_frame **out) {
  if (dirfd == -1) return b2_fail(B2_E_INVAL, "frame create: no directory");
  return create_in(dirfd, name, p, out, 0);
}

/* ---- making an open frame anew ------------------------------------------ */

int b2_frame_remake(b2_frame **fp, const b2_frame_params *p, int64_t nbytes) {
  b2_frame *f = fp ? *fp : NULL;
  if (!f || !p || nbytes < 0) return b2_fail(B2_E_INVAL, "frame remake: missing argument");
  if (!f->w || f->info.layout != B2_LAYOUT_CONTIGUOUS || p->layout != B2_LAYOUT_CONTIGUOUS)
    return b2_fail(B2_E_UNSUPPORTED, "frame remake: contiguous frames open for writing only");
  const char *base;
  int dirfd = b2_frame_w_home(f, &base);
  if (dirfd < 0) return dirfd;
  char name[NAME_MAX + 1], tmp[NAME_MAX + 1], tlock[NAME_MAX + 1];
  char *path = f->home_dir >= 0 ? NULL : strdup(f->path);
  int rc = f->home_dir < 0 && !path ? b2_fail(B2_E_NOMEM, "out of memory") : 0;
  if (!rc && (snprintf(name, sizeof name, "%s", base) >= (int)sizeof name ||
              b2_frame_temp_name(base, B2_FRAME_TEMP_SUFFIX, tmp, sizeof tmp) < 0 ||
              snprintf(tlock, sizeof tlock, "%s" B2_FRAME_LOCK_SUFFIX, tmp) >= (int)sizeof tlock))
    rc = b2_fail(B2_E_LIMIT, "file name too long for a temporary file");
  /* The new frame, whole and committed under the temporary name (held by
   * its writer's lock meanwhile, so no sweep takes it). */
  b2_frame *nf = NULL;
  if (!rc) rc = create_in(dirfd, tmp, p, &nf, 1);
  if (!rc && nbytes > 0) rc = b2_frame_resize(nf, nbytes);
  if (!rc) rc = b2_frame_commit(nf);
  /* Over the old file while f's session still holds the sidecar. */
  if (!rc) rc = b2_io_renameat(dirfd, tmp, dirfd, name, 0);
  if (nf) b2_frame_close(nf);
  (void)unlinkat(dirfd, tlock, 0); /* a sidecar the temporary got (locking on) */
  if (rc < 0) {
    if (nf) (void)unlinkat(dirfd, tmp, 0);
    b2_io_close(dirfd);
    free(path);
    return b2_context(rc, "remake of %s", f->path);
  }
  rc = b2_io_fsync(dirfd);
  /* The session's lock goes to the new frame: other lockers see the old
   * frame, then the new one. */
  b2_frame_lk_hand_over(f);
  b2_frame_close(f);
  *fp = NULL;
  int rc2 = path ? b2_frame_open_rw(path, fp) : b2_frame_open_rw_at(dirfd, name, fp);
  b2_frame_lk_drop_handed(); /* (not taken: the open failed) */
  b2_io_close(dirfd);
  free(path);
  return rc2 < 0 ? rc2 : rc;
}
