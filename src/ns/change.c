/*
 * change.c - removing and renaming entries of a SOURCE directory with the
 * crash-safety protocol of docs/architecture.md ("Removing and renaming"):
 * an entry still in use is set aside under a hidden name instead of being
 * deleted; an entry replaced by a rename is first given a hidden second
 * name (a hard link) or moved aside with a restore marker, so that a crash
 * at any step leaves either the state before the change or the one after
 * it (plus hidden leftovers the sweep removes, leftover.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "b2_error.h"
#include "b2_frame.h"
#include "b2_ns.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

static _Thread_local int last_err;

int b2_ns_last_errno(void) { return last_err; }

/* A failed system call on `name`: its code, its errno kept for the caller. */
static int fail_at(const char *name, int err) {
  last_err = err;
  return b2_fail(b2_from_errno(err), "%s: %s", name, strerror(err));
}

/* A call of leftover.c failed (it keeps errno in its detail only). */
static int failed(int rc) {
  last_err = b2_to_errno(rc);
  return rc;
}

void b2_ns_hidden_name(char *out, size_t cap) {
  static atomic_uint seq;
  snprintf(out, cap, B2_NS_GONE_PREFIX "%d-%u.b2tmp", (int)getpid(), atomic_fetch_add(&seq, 1));
}

static int ns_remove(int dirfd, const char *src, int kind, const struct stat *st, int keep,
                     char *hidden, size_t cap);

/* The name of source entry src's `.b2lock` sidecar into out (cap
 * SIDECAR_CAP): 0, or -1 when it does not fit. */
static int sidecar_name(char *out, size_t cap, const char *src) {
  return (size_t)snprintf(out, cap, "%s" B2_FRAME_LOCK_SUFFIX, src) < cap ? 0 : -1;
}

static int is_file_at(int dirfd, const char *name) {
  struct stat ls;
  return fstatat(dirfd, name, &ls, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(ls.st_mode);
}

#define SIDECAR_CAP (B2_NS_NAME_MAX + sizeof B2_FRAME_LOCK_SUFFIX)

/* The `.b2lock` sidecar of a contiguous frame's name that went: the
 * reference library removes it with the frame's path (other processes
 * holding it keep their descriptors).  Also for one name of a hard-linked
 * frame: the sidecar belongs to the name (the other names have their own),
 * and nothing can open the frame by that name any more.  A hidden name's
 * too (a writer of a frame set aside locks it there). */
static void drop_sidecar(int dirfd, const char *src, int kind, const struct stat *st) {
  char lk[SIDECAR_CAP];
  if (kind == B2_NS_PLAIN || kind == B2_NS_STORE || !S_ISREG(st->st_mode) ||
      sidecar_name(lk, sizeof lk, src) < 0)
    return;
  if (is_file_at(dirfd, lk)) (void)unlinkat(dirfd, lk, 0);
}

int b2_ns_delete(int dirfd, const char *name) {
  struct stat st;
  last_err = 0;
  if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) return fail_at(name, errno);
  if (S_ISDIR(st.st_mode)) {
    int rc = b2_ns_remove_frame_dir(dirfd, name);
    return rc < 0 ? failed(rc) : 0;
  }
  if (unlinkat(dirfd, name, 0) < 0) return fail_at(name, errno);
  drop_sidecar(dirfd, name, B2_NS_FRAME, &st);
  return 0;
}

/* The sidecar of a frame file (or a store's zip file) moved from src in
 * m->pfd to target in m->qfd follows it, so that processes holding it
 * (their descriptors stay on it) and those that open the new name lock
 * alike.  If the new name has a sidecar already, that one stays: another
 * process may hold it, and two sidecars of one name would split the
 * locking; the old one goes, as when its name is removed. */
void b2_ns_move_sidecar(int pfd, const char *src, int qfd, const char *target) {
  char from[SIDECAR_CAP], to[SIDECAR_CAP];
  if (sidecar_name(from, sizeof from, src) < 0 || sidecar_name(to, sizeof to, target) < 0 ||
      !is_file_at(pfd, from))
    return;
  if (renameat2(pfd, from, qfd, to, RENAME_NOREPLACE) < 0 && errno == EEXIST)
    (void)unlinkat(pfd, from, 0);
}

static void move_sidecar(const b2_ns_move *m) {
  /* (also from the engine's hidden entry put in, b2_ns_plan_put: its own
   * write session's sidecar, under the hidden name, would stay behind) */
  if (m->kind == B2_NS_PLAIN || !S_ISREG(m->st.st_mode)) return;
  b2_ns_move_sidecar(m->pfd, m->src, m->qfd, m->target);
}

int b2_ns_remove(int dirfd, const char *src, int kind, const struct stat *st, int keep,
                 char *hidden, size_t cap) {
  int rc = ns_remove(dirfd, src, kind, st, keep, hidden, cap);
  /* (a hidden name kept stays as it is, with its sidecar) */
  if (rc == 0 || (rc == 1 && !b2_ns_name_hidden(src))) drop_sidecar(dirfd, src, kind, st);
  return rc;
}

static int ns_remove(int dirfd, const char *src, int kind, const struct stat *st, int keep,
                     char *hidden, size_t cap) {
  last_err = 0;
  /* One name of a hard-linked file not kept: the file lives on under the
   * others.  Kept (a writer of that name rewrites it through its
   * directory and name: compaction, empty commits), it is set aside like
   * any entry in use, as one more link of the file. */
  if (S_ISREG(st->st_mode) && st->st_nlink > 1 && !keep)
    return unlinkat(dirfd, src, 0) < 0 ? fail_at(src, errno) : 0;
  if (!keep) {
    if (b2_ns_is_sparse(kind, st)) {
      int rc = b2_ns_remove_frame_dir(dirfd, src);
      return rc < 0 ? failed(rc) : 0;
    }
    return unlinkat(dirfd, src, 0) < 0 ? fail_at(src, errno) : 0;
  }
  if (b2_ns_name_hidden(src)) { /* already hidden: stays as it is */
    if ((size_t)snprintf(hidden, cap, "%s", src) >= cap) return failed(B2_E_NAMETOOLONG);
    return 1;
  }
  char aside[B2_NS_HIDDEN_MAX];
  b2_ns_hidden_name(aside, sizeof aside);
  if ((size_t)snprintf(hidden, cap, "%s", aside) >= cap) return failed(B2_E_NAMETOOLONG);
  if (renameat(dirfd, src, dirfd, aside) < 0) return fail_at(src, errno);
  return 1;
}

/* Give the replaced entry of m its hidden name (m->hidden): a second link
 * when it is a file replaced under its own name by a file, else moved
 * aside with a restore marker.  0 or a negative code (nothing changed). */
static int set_aside(b2_ns_move *m, int ebusy) {
  b2_ns_hidden_name(m->hidden, sizeof m->hidden);
  if (ebusy && strcmp(m->esrc, m->target) == 0 && S_ISREG(m->est.st_mode) &&
      S_ISREG(m->st.st_mode) && linkat(m->qfd, m->esrc, m->qfd, m->hidden, 0) == 0) {
    struct stat hs; /* the link must be the replaced file (no race with another program) */
    if (fstatat(m->qfd, m->hidden, &hs, AT_SYMLINK_NOFOLLOW) == 0 &&
        hs.st_ino == m->est.st_ino && hs.st_dev == m->est.st_dev) {
      m->linked = 1;
      return 0;
    }
    unlinkat(m->qfd, m->hidden, 0);
  }
  int mrc = b2_ns_restore_mark(m->qfd, m->hidden, m->esrc, m->target);
  if (mrc < 0)
    snprintf(m->note, sizeof m->note, "no restore marker for %s: %s", m->esrc, b2_last_detail());
  m->marked = mrc == 0;
  if (renameat(m->qfd, m->esrc, m->qfd, m->hidden) < 0) {
    int err = errno;
    if (m->marked) b2_ns_restore_unmark(m->qfd, m->hidden);
    m->marked = 0;
    return fail_at(m->esrc, err);
  }
#ifdef B2_FAULT_INJECTION
  const char *crash = getenv("B2FS_CRASH_AT"); /* tests: die in the window */
  if (crash && strcmp(crash, "rename-aside") == 0) _exit(9);
#endif
  return 0;
}

int b2_ns_rename(b2_ns_move *m, int ebusy) {
  int exists = m->ekind >= 0;
  m->linked = m->marked = m->kept = 0;
  m->hidden[0] = 0;
  m->note[0] = 0;
  last_err = 0;
  /* The entry replaced goes aside first unless the rename replaces it in
   * one step: same source name, neither entry a frame directory (rename(2)
   * cannot put a directory over a file or a file over a directory, nor
   * replace a non-empty directory), and not in use by the caller. */
  int aside = exists && (strcmp(m->esrc, m->target) != 0 || b2_ns_is_sparse(m->ekind, &m->est) ||
                         b2_ns_is_sparse(m->kind, &m->st) || ebusy);
  if (aside) {
    int rc = set_aside(m, ebusy);
    if (rc < 0) return rc;
  }
  if (renameat2(m->pfd, m->src, m->qfd, m->target, aside && !m->linked ? RENAME_NOREPLACE : 0) <
      0) {
    int err = errno;
    if (m->linked) {
      if (unlinkat(m->qfd, m->hidden, 0) < 0)
        snprintf(m->note, sizeof m->note, "cannot remove the link %s: %s", m->hidden,
                 strerror(errno));
    } else if (aside && renameat(m->qfd, m->hidden, m->qfd, m->esrc) < 0) {
      snprintf(m->note, sizeof m->note, "cannot put %s back (left as %s): %s", m->esrc,
               m->hidden, strerror(errno));
      m->marked = 0; /* the sweep may still put it back */
    }
    if (m->marked) b2_ns_restore_unmark(m->qfd, m->hidden);
    m->marked = 0;
    return fail_at(m->src, err);
  }
  if (m->marked) b2_ns_restore_unmark(m->qfd, m->hidden); /* the target name is taken */
  m->marked = 0;
  /* A frame file replaced while in use takes its sidecar along: its
   * writer's session holds it locked, and a session of the new file
   * would wait for that lock for good. */
  if (aside && ebusy && m->ekind != B2_NS_PLAIN && S_ISREG(m->est.st_mode))
    b2_ns_move_sidecar(m->qfd, m->esrc, m->qfd, m->hidden);
  move_sidecar(m);
  if (!aside) return 0;
  char kept[B2_NS_HIDDEN_MAX];
  int rc = b2_ns_remove(m->qfd, m->hidden, m->ekind, &m->est, ebusy, kept, sizeof kept);
  if (rc < 0)
    snprintf(m->note, sizeof m->note, "cannot remove the replaced %s (left as %s): %s", m->esrc,
             m->hidden, b2_last_detail());
  m->kept = rc == 1;
  return 0;
}

int b2_ns_exchange(b2_ns_move *m) {
  last_err = 0;
  m->note[0] = 0;
  if (renameat2(m->pfd, m->src, m->qfd, m->esrc, RENAME_EXCHANGE) < 0) return fail_at(m->src, errno);
  /* Frame files swap their sidecars too (each stays with its frame). */
  char a[SIDECAR_CAP], b[SIDECAR_CAP];
  if (m->kind == B2_NS_PLAIN || !S_ISREG(m->st.st_mode) || !S_ISREG(m->est.st_mode) ||
      sidecar_name(a, sizeof a, m->src) < 0 || sidecar_name(b, sizeof b, m->esrc) < 0)
    return 0;
  int ha = is_file_at(m->pfd, a), hb = is_file_at(m->qfd, b), rc = 0;
  if (ha && hb) rc = renameat2(m->pfd, a, m->qfd, b, RENAME_EXCHANGE);
  else if (ha) rc = renameat2(m->pfd, a, m->qfd, b, RENAME_NOREPLACE);
  else if (hb) rc = renameat2(m->qfd, b, m->pfd, a, RENAME_NOREPLACE);
  if (rc < 0)
    snprintf(m->note, sizeof m->note, "the lock sidecars of %s and %s stay: %s", m->src, m->esrc,
             strerror(errno));
  return 0;
}
