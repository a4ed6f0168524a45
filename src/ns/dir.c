/*
 * dir.c - the namespace of a live directory (see b2_ns.h): which entries
 * are frames, resolving a shown name, listings, and the source names of
 * new entries, links and renames.  Everything by directory descriptor and
 * name.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "b2_error.h"
#include "b2_frame.h"
#include "b2_ns.h"
#include "b2_store.h"

static int fail_sys(int err) { return b2_from_errno(err); }

/* ---- what an entry is ----------------------------------------------------------- */

int b2_ns_holds_sparse_index(int fd) {
  struct stat cst;
  return fstatat(fd, B2_NS_SPARSE_INDEX, &cst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(cst.st_mode);
}

/* b2_ns_holds_data, with the lstat of a regular file known (or NULL).
 * What does not start like a frame (B2_KIND_NONE) is plain; what does but
 * is damaged is a frame (EIO on open, logged). */
static int holds_data_st(int dirfd, const char *name, const struct stat *st) {
  int kind = b2_frame_kind_at_st(dirfd, name, st);
  return kind < 0 || b2_frame_kind_is_data(kind);
}

int b2_ns_holds_data(int dirfd, const char *name) { return holds_data_st(dirfd, name, NULL); }

int b2_ns_has_sidecar(int dirfd, const char *name, const struct stat *st) {
  char side[B2_NS_NAME_MAX + sizeof B2_FRAME_LOCK_SUFFIX];
  struct stat ss;
  int rc;
  if (S_ISDIR(st->st_mode)) {
    int fd = openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return fail_sys(errno);
    rc = fstatat(fd, B2_FRAME_LOCK_FILE, &ss, AT_SYMLINK_NOFOLLOW);
    int err = errno;
    close(fd);
    errno = err;
  } else {
    if ((size_t)snprintf(side, sizeof side, "%s" B2_FRAME_LOCK_SUFFIX, name) >= sizeof side)
      return B2_E_NAMETOOLONG;
    rc = fstatat(dirfd, side, &ss, AT_SYMLINK_NOFOLLOW);
  }
  if (rc == 0) return 1;
  return errno == ENOENT ? 0 : fail_sys(errno);
}

int b2_ns_is_frame(int dirfd, const char *name, const struct stat *st) {
  int kind = b2_ns_name_kind(name, NULL);
  if (kind == B2_NS_PLAIN) return 0;
  if (kind == B2_NS_STORE) return b2_store_detect(dirfd, name) != B2_STORE_NONE;
  if (S_ISREG(st->st_mode)) return holds_data_st(dirfd, name, st);
  if (!S_ISDIR(st->st_mode)) return 0;
  int fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return 0;
  int yes = b2_ns_holds_sparse_index(fd);
  close(fd);
  return yes && b2_ns_holds_data(dirfd, name);
}

int b2_ns_frame_size(const struct stat *hst, int kind, int64_t *size) {
  int64_t n = 0;
  int k = b2_frame_kind_seen(hst, &n);
  /* The logical view's size is the header's nbytes; a .npy view's is not
   * (an array's header, a python-blosc2 tensor's in its trailer). */
  if ((k == B2_KIND_SCHUNK || k == B2_KIND_NDARRAY) && kind == B2_NS_LOGICAL) {
    *size = n;
    return 0;
  }
  return B2_E_NOENT;
}

int b2_ns_probe_dir(void *ctx, const char *name) {
  int dirfd = *(const int *)ctx;
  struct stat st;
  if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
    if (errno == ENOENT || errno == ENAMETOOLONG || errno == ENOTDIR) return B2_NS_ABSENT;
    return fail_sys(errno);
  }
  return b2_ns_is_frame(dirfd, name, &st) ? B2_NS_FRAME : B2_NS_PRESENT;
}

int b2_ns_is_sparse(int kind, const struct stat *st) {
  return kind != B2_NS_PLAIN && kind != B2_NS_STORE && S_ISDIR(st->st_mode);
}

static int resolve_once(int dirfd, const char *shown, char *src, struct stat *st) {
  int kind = b2_ns_name_to_source(shown, b2_ns_probe_dir, &dirfd, src, B2_NS_NAME_MAX + 1);
  if (kind >= 0 && b2_ns_name_hidden(src)) kind = B2_E_NOENT;
  if (kind >= 0 && fstatat(dirfd, src, st, AT_SYMLINK_NOFOLLOW) < 0) kind = fail_sys(errno);
  if (kind >= 0 && kind != B2_NS_PLAIN && !S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode))
    kind = B2_NS_PLAIN;
  return kind;
}

int b2_ns_resolve(int dirfd, const char *shown, char *src, struct stat *st) {
  int kind = resolve_once(dirfd, shown, src, st);
  /* Two source names show a .npy name (NAME.b2nd, NAME.npy.b2frame): a
   * rename from one to the other between the probes (a .npy file kept
   * as its bytes, or an array again) makes both look absent once. */
  if (kind == B2_E_NOENT && b2_ns_shown_npy(shown)) kind = resolve_once(dirfd, shown, src, st);
  return kind;
}

/* ---- listings ------------------------------------------------------------------- */

void b2_ns_list_free(b2_ns_list *l) {
  for (size_t i = 0; i < l->n; i++) {
    if (l->e[i].shown != l->e[i].name) free(l->e[i].shown);
    free(l->e[i].name);
  }
  free(l->e);
  l->e = NULL;
  l->n = 0;
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const b2_ns_entry *)a)->name, ((const b2_ns_entry *)b)->name);
}

/* Probe against the sorted listing (ctx: b2_ns_list *). */
static int list_probe(void *ctx, const char *name) {
  const b2_ns_list *l = ctx;
  b2_ns_entry key;
  memset(&key, 0, sizeof key);
  key.name = (char *)name;
  const b2_ns_entry *d = l->n ? bsearch(&key, l->e, l->n, sizeof *l->e, by_name) : NULL;
  if (!d) return B2_NS_ABSENT;
  return d->frame ? B2_NS_FRAME : B2_NS_PRESENT;
}

/* Is this entry a frame, and what type is shown for it. */
static void classify(int dfd, const struct dirent *de, b2_ns_entry *d) {
  d->type = de->d_type;
  d->frame = 0;
  d->kind = B2_NS_PLAIN;
  int kind = b2_ns_name_kind(de->d_name, NULL);
  if (kind == B2_NS_PLAIN) return;
  if (kind == B2_NS_STORE) { /* shown as a directory */
    d->frame = b2_store_detect(dfd, de->d_name) != B2_STORE_NONE;
    if (d->frame) d->type = DT_DIR;
    if (d->frame) d->kind = kind;
    return;
  }
  struct stat st;
  if (de->d_type == DT_REG) {
    d->frame = b2_ns_holds_data(dfd, de->d_name);
  } else if (de->d_type == DT_DIR || de->d_type == DT_UNKNOWN) {
    if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) return;
    d->type = IFTODT(st.st_mode);
    d->frame = b2_ns_is_frame(dfd, de->d_name, &st);
  }
  if (d->frame) d->type = DT_REG;
  if (d->frame) d->kind = kind;
}

int b2_ns_list_load(int fd, b2_ns_list *l) {
  b2_ns_list_free(l);
  int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return b2_fail(fail_sys(errno), "open directory: %s", strerror(errno));
  DIR *dir = fdopendir(dfd);
  if (!dir) {
    int err = errno;
    close(dfd);
    return b2_fail(fail_sys(err), "open directory: %s", strerror(err));
  }
  size_t cap = 0;
  int rc = 0;
  struct dirent *de;
  errno = 0;
  while ((de = readdir(dir))) {
    if (b2_ns_name_hidden(de->d_name) || !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) {
      errno = 0;
      continue;
    }
    if (l->n == cap) {
      size_t ncap = cap ? cap * 2 : 64;
      b2_ns_entry *ne = realloc(l->e, ncap * sizeof *ne);
      if (!ne) {
        rc = b2_fail(B2_E_NOMEM, "out of memory");
        break;
      }
      l->e = ne;
      cap = ncap;
    }
    b2_ns_entry *d = &l->e[l->n];
    d->name = strdup(de->d_name);
    if (!d->name) {
      rc = b2_fail(B2_E_NOMEM, "out of memory");
      break;
    }
    d->shown = d->name;
    d->ino = de->d_ino;
    classify(dirfd(dir), de, d);
    l->n++;
    errno = 0;
  }
  if (!rc && errno) rc = b2_fail(fail_sys(errno), "read directory: %s", strerror(errno));
  closedir(dir);
  if (rc < 0) {
    b2_ns_list_free(l);
    return rc;
  }
  if (l->n) qsort(l->e, l->n, sizeof *l->e, by_name);
  for (size_t i = 0; i < l->n; i++) {
    b2_ns_entry *d = &l->e[i];
    if (!d->frame) continue;
    char shown[B2_NS_NAME_MAX + 1];
    rc = b2_ns_name_to_shown(d->name, 1, list_probe, l, shown, sizeof shown);
    if (rc < 0 || strcmp(shown, d->name) == 0) continue;
    char *dup = strdup(shown);
    if (dup) d->shown = dup;
  }
  return 0;
}

/* ---- choosing names ------------------------------------------------------------- */

int b2_ns_choose_new(int dirfd, const char *shown, mode_t type, int frames, char *src,
                     size_t cap, int *frame) {
  b2_ns_overlay o = {b2_ns_probe_dir, &dirfd, {NULL, NULL}, NULL, 0};
  if (strlen(shown) > B2_NS_NAME_MAX) return B2_E_NAMETOOLONG;
  *frame = 0;
  /* A name that a plain file cannot have (a frame's suffix) may take a
   * shorter suffix when B2_NS_NEW_SUFFIX makes it too long. */
  int framed = S_ISREG(type) && b2_ns_name_kind(shown, NULL) != B2_NS_PLAIN, fit = 0;
  static const int kinds[] = {B2_NS_NPY, B2_NS_LOGICAL};
  for (int k = 0; k < 2 && S_ISREG(type) && frames; k++) {
    int t = framed ? b2_ns_name_target_fit(kinds[k], B2_NS_NEW_SUFFIX, shown, src, cap)
                   : b2_ns_name_target(kinds[k], B2_NS_NEW_SUFFIX, shown, src, cap);
    if (t == 0) fit = 1;
    if (t != 0 || b2_ns_probe_dir(&dirfd, src) != B2_NS_ABSENT) continue;
    o.added = src;
    o.added_as = B2_NS_FRAME;
    if (b2_ns_name_check(shown, src, 1, b2_ns_overlay_probe, &o) == 0) {
      *frame = kinds[k];
      return 0;
    }
  }
  /* The entry under its own name; a regular file with a frame suffix
   * would be taken for a frame. */
  if (framed) return fit || !frames ? B2_E_EXIST : B2_E_NAMETOOLONG;
  if (b2_ns_name_hidden(shown)) return B2_E_INVAL;
  int p = b2_ns_probe_dir(&dirfd, shown);
  if (p < 0) return p;
  if (p != B2_NS_ABSENT) return B2_E_EXIST;
  if ((size_t)snprintf(src, cap, "%s", shown) >= cap) return B2_E_NAMETOOLONG;
  o.added = src;
  o.added_as = B2_NS_PRESENT;
  return b2_ns_name_check(shown, src, 0, b2_ns_overlay_probe, &o);
}

int b2_ns_choose_link(int dirfd, const char *shown, int kind, const char *src, char *out,
                      size_t cap) {
  /* A hidden name (one kept for a writer after its name was removed) says
   * nothing of the frame's suffix: a new frame's then. */
  const char *sfx = b2_ns_name_hidden(src) ? B2_NS_NEW_SUFFIX : b2_ns_name_suffix(src);
  int rc = b2_ns_name_target(kind, sfx, shown, out, cap);
  if (rc < 0) return rc;
  if (b2_ns_name_hidden(out) || b2_ns_name_hidden(shown)) return B2_E_INVAL;
  int t = b2_ns_probe_dir(&dirfd, out);
  if (t < 0) return t;
  if (t != B2_NS_ABSENT) return B2_E_EXIST;
  b2_ns_overlay o = {b2_ns_probe_dir, &dirfd, {NULL, NULL}, out, B2_NS_FRAME};
  return b2_ns_name_check(shown, out, 1, b2_ns_overlay_probe, &o);
}

/* Would the moved entry become something else under its new source name
 * (a plain file or directory taken for a frame)?  A plain entry already
 * under a frame suffix (not a store's), which holds no data frame (text,
 * a python-blosc2 object shown raw; a directory whose index is such),
 * moves to another such name as it is; one without a suffix does not get
 * one (the caller copies it: a new frame). */
static int changes_kind(int kind, int pfd, const char *src, const struct stat *st,
                        const char *target) {
  int tk = b2_ns_name_kind(target, NULL), sk = b2_ns_name_kind(src, NULL);
  if (kind != B2_NS_PLAIN || tk == B2_NS_PLAIN) return 0;
  int as_is = tk != B2_NS_STORE && sk != B2_NS_PLAIN && sk != B2_NS_STORE;
  if (S_ISREG(st->st_mode)) return !as_is || holds_data_st(pfd, src, st);
  if (!S_ISDIR(st->st_mode)) return 0;
  int fd = openat(pfd, src, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return 0;
  int yes = b2_ns_holds_sparse_index(fd);
  close(fd);
  return yes && (!as_is || b2_ns_holds_data(pfd, src));
}

static int plan_at(b2_ns_move *m, const char *newname, int noreplace);

int b2_ns_plan_rename(b2_ns_move *m, const char *name, const char *newname, int noreplace) {
  m->kind = b2_ns_resolve(m->pfd, name, m->src, &m->st);
  if (m->kind < 0) return m->kind;
  int rc = b2_ns_name_target_fit(m->kind, b2_ns_name_suffix(m->src), newname, m->target,
                                 sizeof m->target);
  /* A frame no suffix fits after newname: a copy stores it under a name
   * that fits (b2_ns_choose_new), as for a change of kind. */
  if (rc == B2_E_NAMETOOLONG && m->kind != B2_NS_PLAIN && strlen(newname) <= B2_NS_NAME_MAX)
    return B2_E_XDEV;
  if (rc < 0) return rc;
  /* The engine's temporary names stay invisible: nothing may move there. */
  if (b2_ns_name_hidden(m->target) || b2_ns_name_hidden(newname)) return B2_E_INVAL;
  if (changes_kind(m->kind, m->pfd, m->src, &m->st, m->target)) return B2_E_XDEV;
  return plan_at(m, newname, noreplace);
}

/* The part of a plan past the entry moved and its target name: what
 * newname shows in m->qfd, and whether the move may replace it. */
static int plan_at(b2_ns_move *m, const char *newname, int noreplace) {
  m->ekind = b2_ns_resolve(m->qfd, newname, m->esrc, &m->est);
  if (m->ekind < 0 && m->ekind != B2_E_NOENT) return m->ekind;
  if (m->ekind >= 0) {
    if (noreplace) return B2_E_EXIST;
    if (m->est.st_dev == m->st.st_dev && m->est.st_ino == m->st.st_ino) {
      /* rename(2) between two names of one file does nothing. */
      if (S_ISREG(m->st.st_mode) || (m->pfd == m->qfd && strcmp(m->esrc, m->src) == 0)) return 1;
    }
    /* rename(2) between what is shown: a frame is a file whatever its
     * layout, so only plain directories are directories. */
    int sdir = m->kind == B2_NS_PLAIN && S_ISDIR(m->st.st_mode);
    int edir = m->ekind == B2_NS_PLAIN && S_ISDIR(m->est.st_mode);
    if (sdir != edir) return edir ? B2_E_ISDIR : B2_E_NOTDIR;
  }
  /* The target name must be free (or be the entry replaced), and the new
   * directory must show it as newname. */
  int same_dir = m->pfd == m->qfd;
  if (m->ekind < 0 || strcmp(m->esrc, m->target) != 0) {
    int t = b2_ns_probe_dir(&m->qfd, m->target);
    if (t < 0) return t;
    if (t != B2_NS_ABSENT && !(same_dir && strcmp(m->target, m->src) == 0)) return B2_E_EXIST;
  }
  int is_frame = m->kind != B2_NS_PLAIN;
  b2_ns_overlay o = {b2_ns_probe_dir, &m->qfd,
                     {m->ekind >= 0 ? m->esrc : NULL, same_dir ? m->src : NULL},
                     m->target, is_frame ? B2_NS_FRAME : B2_NS_PRESENT};
  return b2_ns_name_check(newname, m->target, is_frame, b2_ns_overlay_probe, &o);
}

int b2_ns_plan_put(b2_ns_move *m, const char *tmp, int kind, const char *newname,
                   int noreplace) {
  m->pfd = m->qfd;
  m->kind = kind;
  if ((size_t)snprintf(m->src, sizeof m->src, "%s", tmp) >= sizeof m->src) return B2_E_INVAL;
  if (fstatat(m->pfd, m->src, &m->st, AT_SYMLINK_NOFOLLOW) < 0) return fail_sys(errno);
  int rc = b2_ns_name_target_fit(kind, B2_NS_NEW_SUFFIX, newname, m->target, sizeof m->target);
  if (rc < 0) return rc;
  if (b2_ns_name_hidden(m->target) || b2_ns_name_hidden(newname)) return B2_E_INVAL;
  return plan_at(m, newname, noreplace);
}

int b2_ns_plan_exchange(b2_ns_move *m, const char *name, const char *newname) {
  m->kind = b2_ns_resolve(m->pfd, name, m->src, &m->st);
  if (m->kind < 0) return m->kind;
  m->ekind = b2_ns_resolve(m->qfd, newname, m->esrc, &m->est);
  if (m->ekind < 0) return m->ekind;
  snprintf(m->target, sizeof m->target, "%s", m->esrc);
  if (m->est.st_dev == m->st.st_dev && m->est.st_ino == m->st.st_ino) return 1;
  /* Each source name must be what the other entry would take under the
   * other's shown name: the names in SOURCE stay, only what they hold
   * swaps, so every name shows what it showed, the two entries swapped. */
  char ta[B2_NS_NAME_MAX + 1], tb[B2_NS_NAME_MAX + 1];
  int s = S_ISDIR(m->st.st_mode), e = S_ISDIR(m->est.st_mode);
  if (m->kind != m->ekind || (m->kind != B2_NS_PLAIN && s != e) ||
      b2_ns_name_target(m->kind, b2_ns_name_suffix(m->src), newname, ta, sizeof ta) < 0 ||
      b2_ns_name_target(m->ekind, b2_ns_name_suffix(m->esrc), name, tb, sizeof tb) < 0 ||
      strcmp(ta, m->esrc) != 0 || strcmp(tb, m->src) != 0 ||
      changes_kind(m->kind, m->pfd, m->src, &m->st, m->esrc) ||
      changes_kind(m->ekind, m->qfd, m->esrc, &m->est, m->src))
    return B2_E_INVAL;
  return 0;
}
