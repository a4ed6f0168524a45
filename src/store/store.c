/*
 * store.c - open a python-blosc2 store: find its form, read the
 * EmbedStore index, gather the external leaves (files of a .b2d, stored
 * members of a .b2z), classify every value by its metalayers, and serve
 * the leaves' frames where they lie.  The tree itself is built in tree.c.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "b2_error.h"
#include "b2_frame.h"
#include "common/fileio.h"
#include "common/util.h"
#include "store/store_impl.h"

#define EMBED_NAME "embed.b2e"
#define INDEX_VLMETA "estore_metadata"
#define REGISTRY_VLMETA "_object_registry"
#define XATTR_VLMETA "user.b2.vlmeta."

void b2_store_add_note(b2_store *s, const char *fmt, ...) {
  if (s->nnotes >= B2_STORE_MAX_NOTES) return;
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  char *p = strdup(buf);
  if (p) s->notes[s->nnotes++] = p;
}

/* ---- names ---------------------------------------------------------------- */

static int ends_with(const char *s, const char *suf) {
  size_t n = strlen(s), k = strlen(suf);
  return n >= k && memcmp(s + n - k, suf, k) == 0;
}

/* Form asked for by a name's suffix (no I/O). */
static int form_of_name(const char *name) {
  const char *b = strrchr(name, '/');
  b = b ? b + 1 : name;
  if (strlen(b) <= 4) return B2_STORE_NONE;
  if (ends_with(b, ".b2e")) return B2_STORE_EMBED;
  if (ends_with(b, ".b2d")) return B2_STORE_DIR;
  if (ends_with(b, ".b2z")) return B2_STORE_ZIP;
  return B2_STORE_NONE;
}

int b2_store_detect(int dirfd, const char *name) {
  int form = form_of_name(name);
  struct stat st;
  if (form == B2_STORE_NONE || fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW))
    return B2_STORE_NONE;
  if (form == B2_STORE_DIR) {
    if (!S_ISDIR(st.st_mode)) return B2_STORE_NONE;
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return B2_STORE_NONE;
    int ok = fstatat(fd, EMBED_NAME, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
             S_ISREG(st.st_mode);
    close(fd);
    return ok ? form : B2_STORE_NONE;
  }
  return S_ISREG(st.st_mode) ? form : B2_STORE_NONE;
}

int b2_store_key_ok(const char *key) {
  size_t n = strlen(key);
  if (n < 2 || n > B2_STORE_MAX_KEY || key[0] != '/' || key[n - 1] == '/')
    return 0;
  int depth = 0;
  for (const char *p = key + 1; *p;) {
    const char *e = strchr(p, '/');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == 0 || len > B2_STORE_MAX_COMPONENT) return 0;
    if ((len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
      return 0;
    if (memchr(p, '\n', len) || memchr(p, '\r', len) || memchr(p, '\t', len))
      return 0;
    if (++depth > B2_STORE_MAX_DEPTH) return 0;
    p += len + (e ? 1 : 0);
  }
  return 1;
}

#define CARRIER "__vlmeta__"

int b2_store_is_carrier(const char *key, size_t *glen) {
  size_t n = strlen(key), k = sizeof CARRIER - 1;
  if (n < k + 1 || strcmp(key + n - k, CARRIER) != 0 || key[n - k - 1] != '/')
    return 0;
  if (glen) *glen = n - k - 1;
  return 1;
}

/* python's os.path.splitext on the last component: the suffix starts at
 * the last dot unless only dots precede it. */
static const char *suffix_of(const char *rel) {
  const char *b = strrchr(rel, '/');
  b = b ? b + 1 : rel;
  const char *dot = strrchr(b, '.');
  if (!dot) return rel + strlen(rel);
  for (const char *p = b; p < dot; p++)
    if (*p != '.') return dot;
  return rel + strlen(rel);
}

/* Bookkeeping files that are never leaves. */
/* Names the daemon keeps for itself in a directory (removed files still
 * open, crash leftovers: B2_NS_GONE_PREFIX and its kin start so), never
 * keys. */
static int own_name(const char *base) { return strncmp(base, ".b2fs", 5) == 0; }

static int hidden_file(const char *rel) {
  const char *b = strrchr(rel, '/');
  b = b ? b + 1 : rel;
  return strcmp(rel, EMBED_NAME) == 0 || ends_with(b, ".b2lock") ||
         ends_with(b, ".tmp") || ends_with(b, ".b2tmp");
}

/* ---- classification -------------------------------------------------------- */

/* Kind of a value from its metalayers (b2_frame_kind: python-blosc2's
 * order of tests): arrays, SChunks, or objects that are not data. */
static void classify(const b2_frame *f, b2_store_src *src) {
  int k = b2_frame_kind(f);
  if (k < 0) k = B2_KIND_SCHUNK;
  src->objkind = b2_frame_kind_name(k);
  src->kind = k == B2_KIND_NDARRAY  ? B2_STORE_NDARRAY
              : k == B2_KIND_SCHUNK ? B2_STORE_SCHUNK
                                    : B2_STORE_OBJECT;
}

/* Kind from a trusted file suffix, for a leaf whose frame cannot be read. */
static void kind_of_suffix(const char *suf, b2_store_src *src) {
  if (!strcmp(suf, ".b2nd")) {
    src->kind = B2_STORE_NDARRAY;
    src->objkind = "ndarray";
  } else if (!strcmp(suf, ".b2b")) {
    src->kind = B2_STORE_OBJECT;
    src->objkind = "batcharray";
  } else {
    src->kind = B2_STORE_SCHUNK;
    src->objkind = "schunk";
  }
}

/* The suffix python gives a value of this kind when it writes a file. */
static const char *canonical_suffix(const b2_store_src *src) {
  if (src->kind == B2_STORE_NDARRAY) return ".b2nd";
  if (!strcmp(src->objkind, "batcharray") || !strcmp(src->objkind, "listarray"))
    return ".b2b";
  return ".b2f";
}

/* ---- opening leaves ---------------------------------------------------- */

/* Open rel (a/b/c) below dirfd, following no symbolic link. */
static int open_beneath(int dirfd, const char *rel) {
  char buf[B2_STORE_MAX_KEY + 64];
  size_t n = strlen(rel);
  if (n >= sizeof buf) return b2_fail(B2_E_LIMIT, "path too long");
  memcpy(buf, rel, n + 1);
  int fd = dirfd;
  char *p = buf;
  for (;;) {
    char *slash = strchr(p, '/');
    if (slash) *slash = 0;
    int last = !slash;
    int nfd = openat(fd, p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC |
                                (last ? O_NONBLOCK : O_DIRECTORY));
    int e = errno;
    if (fd != dirfd) close(fd);
    if (nfd < 0)
      return b2_fail(b2_from_errno(e), "%s: %s", rel, strerror(e));
    fd = nfd;
    if (last) return fd;
    p = slash + 1;
  }
}

static char *leaf_name(const b2_store *s, const char *key) {
  size_t n = strlen(s->name) + strlen(key) + 2;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s:%s", s->name, key);
  return p;
}

/* ---- the store's lock ------------------------------------------------------
 * python-blosc2 (locking=True) changes a .b2d or .b2e store under an
 * exclusive flock of its EmbedStore's sidecar (`embed.b2e.b2lock`,
 * `NAME.b2e.b2lock`), and rewrites the EmbedStore in place.  Reading the
 * store (its index, every embedded value) holds the shared lock, through a
 * descriptor of its own each time (flock belongs to the open file
 * description: threads do not release each other's lock). */

/* A descriptor of the store's sidecar holding the shared lock, or -1 when
 * there is none (or it cannot be had: the frame layer's own per-chunk
 * checks still apply). */
static int store_lock(const b2_store *s) {
  int fd = -1;
  if (s->form == B2_STORE_DIR) {
    fd = openat(s->fd, EMBED_NAME B2_FRAME_LOCK_SUFFIX,
                O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  } else if (s->form == B2_STORE_EMBED) {
    char proc[64], real[PATH_MAX];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", s->fd);
    ssize_t n = readlink(proc, real, sizeof real - sizeof B2_FRAME_LOCK_SUFFIX);
    if (n > 0 && real[0] == '/') {
      memcpy(real + n, B2_FRAME_LOCK_SUFFIX, sizeof B2_FRAME_LOCK_SUFFIX);
      fd = b2_io_open_path(real, O_RDONLY | O_CLOEXEC | O_NONBLOCK, 0);
    }
  }
  if (fd < 0) return -1;
  while (flock(fd, LOCK_SH) != 0) {
    if (errno == EINTR) continue;
    close(fd);
    return -1;
  }
  return fd;
}

static void store_unlock(int fd) {
  if (fd >= 0) close(fd); /* releases the lock */
}

int b2_store_hold(const b2_store *s) { return s ? store_lock(s) : -1; }
void b2_store_release(int held) { store_unlock(held); }

/* Read n bytes of the EmbedStore's logical content at off. */
static int embed_read(b2_store *s, void *buf, size_t n, int64_t off) {
  size_t done = 0;
  while (done < n) {
    ssize_t got = b2_file_pread(s->embed, (uint8_t *)buf + done, n - done,
                                off + (int64_t)done);
    if (got < 0) return (int)got;
    if (got == 0)
      return b2_fail(B2_E_TRUNCATED, "the store's bytes end at %lld",
                     (long long)(off + (int64_t)done));
    done += (size_t)got;
  }
  return 0;
}

int b2_store_src_frame(b2_store *s, const b2_store_src *src, b2_frame **out) {
  char *name = leaf_name(s, src->key);
  if (!name) return b2_fail(B2_E_NOMEM, "out of memory");
  int rc;
  switch (src->loc) {
  case B2_STORE_IN_FILE: {
    int fd = open_beneath(s->fd, src->relpath);
    struct stat st;
    if (fd < 0) {
      rc = fd;
      break;
    }
    rc = fstat(fd, &st) != 0 ? b2_fail(b2_from_errno(errno), "cannot stat")
         : !S_ISREG(st.st_mode) ? b2_fail(B2_E_FORMAT, "not a regular file")
         : b2_frame_open_fd(fd, 0, (int64_t)st.st_size, name, out);
    close(fd);
    break;
  }
  case B2_STORE_IN_MEMBER:
    rc = b2_frame_open_fd(s->fd, src->offset, src->length, name, out);
    break;
  case B2_STORE_IN_EMBED: {
    if (src->length > B2_STORE_MAX_VALUE) {
      rc = b2_fail(B2_E_LIMIT, "embedded value of %lld bytes (at most %lld)",
                   (long long)src->length, (long long)B2_STORE_MAX_VALUE);
      break;
    }
    uint8_t *buf = malloc(src->length ? (size_t)src->length : 1);
    int lk = s->building ? -1 : store_lock(s); /* (held already while building) */
    rc = buf ? embed_read(s, buf, (size_t)src->length, src->offset)
             : b2_fail(B2_E_NOMEM, "out of memory for a %lld-byte value",
                       (long long)src->length);
    store_unlock(lk);
    if (!rc) rc = b2_frame_open_mem(buf, (size_t)src->length, name, out);
    free(buf);
    break;
  }
  default:
    rc = b2_fail(B2_E_INVAL, "%s has no frame", src->key);
  }
  free(name);
  return rc;
}

/* ---- gathering the leaves --------------------------------------------------- */

static b2_store_src *add_src(b2_store *s) {
  if (s->nsrcs >= B2_STORE_MAX_LEAVES) {
    b2_fail(B2_E_LIMIT, "more than %d values", B2_STORE_MAX_LEAVES);
    return NULL;
  }
  if (s->nsrcs == s->srccap) {
    int64_t cap = s->srccap ? s->srccap * 2 : 64;
    b2_store_src *p = realloc(s->srcs, (size_t)cap * sizeof *p);
    if (!p) {
      b2_fail(B2_E_NOMEM, "out of memory");
      return NULL;
    }
    s->srcs = p;
    s->srccap = cap;
  }
  b2_store_src *src = &s->srcs[s->nsrcs++];
  memset(src, 0, sizeof *src);
  return src;
}

/* Classify src by opening its frame; a failure is kept as the leaf's
 * error (kind from the suffix) when `trusted`, else the leaf is dropped
 * (returns 1). */
static int probe(b2_store *s, b2_store_src *src, int trusted) {
  b2_frame *f;
  int rc = b2_store_src_frame(s, src, &f);
  if (rc == B2_E_NOMEM || rc == B2_E_STALE) return rc; /* STALE: read it again */
  if (rc == 0) {
    classify(f, src);
    /* A .b2nd frame with no metalayer is shown by its name, as outside
     * stores (NAME.npy, its bytes as they are): an empty .npy made through
     * the mount, or a new one still being written, whose header is not
     * settled yet (python-blosc2 finds an SChunk under the same key). */
    if (src->kind == B2_STORE_SCHUNK && !strcmp(src->suffix, ".b2nd") &&
        b2_frame_get_info(f)->nmeta == 0)
      kind_of_suffix(src->suffix, src);
    b2_frame_close(f);
    return 0;
  }
  if (!trusted) return 1;
  kind_of_suffix(src->suffix, src);
  const char *d = b2_last_detail();
  src->error = strdup(d && *d ? d : b2_strerror(rc));
  return src->error ? 0 : b2_fail(B2_E_NOMEM, "out of memory");
}

/* An external leaf at relpath (a .b2d file or a .b2z member). */
static int add_external(b2_store *s, const char *rel, int loc, int64_t off,
                        int64_t len) {
  if (hidden_file(rel)) return 0;
  const char *suf = suffix_of(rel);
  size_t klen = (size_t)(suf - rel);
  char *key = malloc(klen + 2);
  if (!key) return b2_fail(B2_E_NOMEM, "out of memory");
  key[0] = '/';
  memcpy(key + 1, rel, klen);
  key[klen + 1] = 0;
  if (!b2_store_key_ok(key)) {
    b2_store_add_note(s, "%s: a name that cannot be shown, left out", rel);
    free(key);
    return 0;
  }
  b2_store_src *src = add_src(s);
  char *rp = strdup(rel);
  if (!src || !rp) {
    free(key);
    free(rp);
    return src ? b2_fail(B2_E_NOMEM, "out of memory") : B2_E_LIMIT;
  }
  src->key = key;
  src->relpath = rp;
  src->loc = loc;
  src->offset = off;
  src->length = len;
  src->suffix = suf - rel + rp;
  int trusted = !strcmp(suf, ".b2nd") || !strcmp(suf, ".b2f") ||
                !strcmp(suf, ".b2b");
  int rc = probe(s, src, trusted);
  if (rc == 1) { /* not a frame: not a leaf */
    free(src->key);
    free(src->relpath);
    s->nsrcs--;
    return 0;
  }
  return rc;
}

/* A directory of a .b2d: a group, even with no value in it yet (python-blosc2
 * lists no such group; it is where new values go). */
static int add_dir(b2_store *s, const char *rel) {
  if (hidden_file(rel)) return 0;
  size_t len = strlen(rel);
  char *key = malloc(len + 2);
  if (!key) return b2_fail(B2_E_NOMEM, "out of memory");
  key[0] = '/';
  memcpy(key + 1, rel, len + 1);
  if (!b2_store_key_ok(key)) {
    free(key);
    return 0;
  }
  b2_store_src *src = add_src(s);
  if (!src) {
    free(key);
    return B2_E_LIMIT;
  }
  src->key = key;
  src->kind = B2_STORE_GROUP;
  src->loc = B2_STORE_IN_NONE;
  return 0;
}

/* Walk a .b2d below dirfd (rel: the path so far), without following
 * symbolic links. */
static int walk(b2_store *s, int dirfd, const char *rel, int depth) {
  if (depth > B2_STORE_MAX_DEPTH)
    return b2_fail(B2_E_LIMIT, "%s: directories nested too deep", rel);
  int dfd = dup(dirfd);
  DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
  if (!d) {
    int e = errno;
    if (dfd >= 0) close(dfd);
    return b2_fail(b2_from_errno(e), "%s: cannot list: %s", *rel ? rel : ".",
                   strerror(e));
  }
  int rc = 0;
  struct dirent *de;
  char path[B2_STORE_MAX_KEY + 2];
  while (rc == 0 && (de = readdir(d))) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    int n = snprintf(path, sizeof path, "%s%s%s", rel, *rel ? "/" : "",
                     de->d_name);
    if (n < 0 || (size_t)n >= sizeof path) {
      b2_store_add_note(s, "%s/%s: path too long, left out", rel, de->d_name);
      continue;
    }
    struct stat st;
    if (own_name(de->d_name) || fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
      continue;
    if (S_ISDIR(st.st_mode)) {
      int sub = openat(dirfd, de->d_name,
                       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub < 0) {
        b2_store_add_note(s, "%s: cannot open: %s", path, strerror(errno));
        continue;
      }
      rc = b2_store_add_sig(s, path, &st);
      if (!rc) rc = add_dir(s, path);
      if (!rc) rc = walk(s, sub, path, depth + 1);
      close(sub);
    } else if (S_ISREG(st.st_mode)) {
      rc = add_external(s, path, B2_STORE_IN_FILE, 0, (int64_t)st.st_size);
    }
  }
  closedir(d);
  return rc;
}

static int add_members(b2_store *s, const b2_zip_member *m, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    const char *nm = m[i].name;
    size_t len = strlen(nm);
    if (nm[len - 1] == '/' || hidden_file(nm)) continue; /* directories */
    if (!m[i].stored) {
      b2_store_add_note(s, "member %s is compressed (method %d) or "
                        "encrypted: it cannot be read in place, left out",
                        nm, m[i].method);
      continue;
    }
    int rc = add_external(s, nm, B2_STORE_IN_MEMBER, m[i].offset,
                          m[i].length);
    if (rc < 0) return rc;
  }
  return 0;
}

/* The EmbedStore's values. */
static int add_embedded(b2_store *s, const b2_embed_item *it, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    if (!b2_store_key_ok(it[i].key)) {
      b2_store_add_note(s, "key %.200s cannot be shown, left out", it[i].key);
      continue;
    }
    b2_store_src *src = add_src(s);
    if (!src) return B2_E_LIMIT;
    src->key = strdup(it[i].key);
    if (!src->key) return b2_fail(B2_E_NOMEM, "out of memory");
    if (it[i].remote) {
      src->kind = B2_STORE_REMOTE;
      src->objkind = "c2array";
      src->loc = B2_STORE_IN_NONE;
      continue;
    }
    src->loc = B2_STORE_IN_EMBED;
    src->offset = it[i].offset;
    src->length = it[i].length;
    src->suffix = ".b2f";
    int rc = probe(s, src, 1);
    if (rc < 0) return rc;
    if (!src->error) src->suffix = canonical_suffix(src);
  }
  return 0;
}

/* The index of EmbedStore frame fr (msgpack, malloc'd), its size checked
 * before it is decoded. */
static int read_index(const b2_frame *fr, uint8_t **idx, size_t *len) {
  *idx = NULL;
  int rc = b2_frame_vlmeta_get(fr, INDEX_VLMETA, NULL, len);
  if (rc < 0)
    return b2_fail(B2_E_FORMAT, "%s: no %s: not a python-blosc2 store", EMBED_NAME,
                   INDEX_VLMETA);
  if (*len > B2_STORE_MAX_INDEX) return b2_fail(B2_E_LIMIT, "%s of %zu bytes", INDEX_VLMETA, *len);
  rc = b2_frame_vlmeta_get(fr, INDEX_VLMETA, idx, len);
  return rc < 0 ? b2_context(rc, "%s", INDEX_VLMETA) : 0;
}

/* Open the EmbedStore frame fr (taken over) and read its index. */
static int load_embed(b2_store *s, b2_frame *fr) {
  int k = b2_frame_kind(fr);
  s->flavor = k == B2_KIND_DICTSTORE   ? B2_STORE_FLAVOR_DICT
              : k == B2_KIND_TREESTORE ? B2_STORE_FLAVOR_TREE
                                       : B2_STORE_FLAVOR_EMBED;
  int64_t nbytes = b2_frame_get_info(fr)->nbytes;
  size_t len;
  uint8_t *idx;
  int rc = read_index(fr, &idx, &len);
  if (rc < 0) {
    b2_frame_close(fr);
    return rc;
  }
  uint8_t *reg = NULL;
  size_t rlen;
  if (b2_frame_vlmeta_get(fr, REGISTRY_VLMETA, NULL, &rlen) == 0 && rlen <= B2_STORE_MAX_INDEX &&
      b2_frame_vlmeta_get(fr, REGISTRY_VLMETA, &reg, &rlen) == 0 &&
      b2_embed_roots(reg, rlen, &s->roots, &s->nroots) < 0) {
    b2_store_add_note(s, "%s", b2_last_detail()); /* the keys are still there */
  }
  free(reg);
  rc = b2_file_open_frame(s->env, fr, B2_VIEW_LOGICAL, &s->embed);
  b2_embed_item *it = NULL;
  int64_t n = 0;
  if (!rc) rc = b2_embed_parse(idx, len, nbytes, &it, &n);
  free(idx);
  if (!rc) rc = add_embedded(s, it, n);
  b2_embed_free(it, n);
  return rc;
}

/* Open the EmbedStore frame of the open file fd (size bytes) by its
 * /proc/self/fd path, keeping a descriptor for that path: the frame layer
 * then locks it through its `.b2lock` sidecar when one exists (python-blosc2
 * with locking=True changes the EmbedStore in place under that lock). */
static int open_embed_frame(b2_store *s, int fd, int64_t size, const char *name,
                            b2_frame **fr) {
  s->efd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", s->efd);
  int rc = s->efd >= 0 ? b2_frame_open(path, fr) : B2_E_IO;
  if (rc == B2_E_STALE) return rc;
  if (rc < 0) /* no /proc: a frame that does not lock */
    return b2_frame_open_fd(fd, 0, size, name, fr);
  s->locked = b2_frame_locked(*fr);
  if (s->locked && b2_frame_lock_gen(path, &s->gen) < 0) s->gen = 0;
  return 0;
}

static int open_form(b2_store *s, int dirfd, const char *name) {
  int dir = s->form == B2_STORE_DIR;
  s->fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NONBLOCK |
                                  (dir ? O_DIRECTORY : 0));
  if (s->fd < 0)
    return b2_fail(b2_from_errno(errno), "cannot open: %s", strerror(errno));
  struct stat st;
  if (fstat(s->fd, &st) != 0)
    return b2_fail(b2_from_errno(errno), "cannot stat: %s", strerror(errno));
  if (dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
    return b2_fail(B2_E_FORMAT, "not a %s", dir ? "directory" : "regular file");
  int rc = b2_store_add_sig(s, NULL, &st);
  if (rc < 0) return rc;
  s->lockfd = store_lock(s); /* whole reading of the store: shared */
  b2_frame *fr = NULL;
  if (s->form == B2_STORE_EMBED) {
    rc = open_embed_frame(s, s->fd, (int64_t)st.st_size, s->name, &fr);
    return rc < 0 ? rc : load_embed(s, fr);
  }
  if (dir) {
    int fd = openat(s->fd, EMBED_NAME, O_RDONLY | O_NOFOLLOW | O_CLOEXEC |
                                           O_NONBLOCK);
    struct stat es;
    if (fd < 0)
      return b2_fail(b2_from_errno(errno), "%s: cannot open: %s", EMBED_NAME,
                     strerror(errno));
    rc = fstat(fd, &es) != 0 ? b2_fail(B2_E_IO, "%s: cannot stat", EMBED_NAME)
         : !S_ISREG(es.st_mode) ? b2_fail(B2_E_FORMAT, "%s is not a file",
                                          EMBED_NAME)
         : b2_store_add_sig(s, EMBED_NAME, &es) < 0 ? B2_E_NOMEM
         : open_embed_frame(s, fd, (int64_t)es.st_size, EMBED_NAME, &fr);
    close(fd);
    if (rc < 0) return b2_context(rc, "%s", EMBED_NAME);
    rc = load_embed(s, fr);
    return rc < 0 ? rc : walk(s, s->fd, "", 0);
  }
  b2_zip_member *m;
  int64_t n;
  rc = b2_zip_read(s->fd, (int64_t)st.st_size, &m, &n);
  if (rc < 0) return rc;
  int64_t e = -1;
  for (int64_t i = 0; i < n; i++)
    if (!strcmp(m[i].name, EMBED_NAME)) e = i; /* the last one wins */
  if (e < 0)
    rc = b2_fail(B2_E_FORMAT, "zip: no member %s", EMBED_NAME);
  else if (!m[e].stored)
    rc = b2_fail(B2_E_FORMAT, "zip: member %s is compressed (method %d): a "
                 ".b2z is read in place, its members must be stored",
                 EMBED_NAME, m[e].method);
  else {
    rc = b2_frame_open_fd(s->fd, m[e].offset, m[e].length, EMBED_NAME, &fr);
    if (rc < 0) rc = b2_context(rc, "zip: member %s", EMBED_NAME);
  }
  if (!rc) rc = load_embed(s, fr);
  if (!rc) rc = add_members(s, m, n);
  b2_zip_free(m, n);
  return rc;
}

#define STALE_TRIES 20

static int open_once(b2_env *env, int dirfd, const char *path,
                     const char *name, b2_store **out) {
  if (!out || !path || !name) return b2_fail(B2_E_INVAL, "store open: no name");
  *out = NULL;
  int form = form_of_name(name);
  if (form == B2_STORE_NONE)
    return b2_fail(B2_E_INVAL, "not a store name (.b2e, .b2d or .b2z)");
  b2_store *s = calloc(1, sizeof *s);
  if (!s) return b2_fail(B2_E_NOMEM, "out of memory");
  s->fd = -1;
  s->pfd = dirfd == AT_FDCWD ? AT_FDCWD : fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
  s->env = env;
  s->form = form;
  s->name = strdup(name);
  s->path = strdup(path);
  s->efd = -1;
  s->lockfd = -1;
  s->building = 1;
  int rc = !s->name || !s->path ? b2_fail(B2_E_NOMEM, "out of memory")
           : s->pfd == -1 ? b2_fail(b2_from_errno(errno), "dup: %s", strerror(errno))
           : open_form(s, dirfd, path);
  if (!rc) rc = b2_store_build(s);
  store_unlock(s->lockfd); /* taken in open_form */
  s->lockfd = -1;
  s->building = 0;
  if (rc < 0) {
    b2_store_close(s);
    return rc;
  }
  *out = s;
  return 0;
}

int b2_store_open_named(b2_env *env, int dirfd, const char *path,
                        const char *name, b2_store **out) {
  /* Another process changed the store while it was read (under its lock):
   * read it again, a few times. */
  int rc = B2_E_STALE;
  for (int tries = 0; rc == B2_E_STALE && tries < STALE_TRIES; tries++)
    rc = open_once(env, dirfd, path, name, out);
  return rc;
}

int b2_store_openat(b2_env *env, int dirfd, const char *name, b2_store **out) {
  return b2_store_open_named(env, dirfd, name, name, out);
}

int b2_store_open(b2_env *env, const char *path, b2_store **out) {
  return b2_store_openat(env, AT_FDCWD, path, out);
}

void b2_store_close(b2_store *s) {
  if (!s) return;
  for (int64_t i = 0; i < s->nsrcs; i++) {
    free(s->srcs[i].key);
    free(s->srcs[i].relpath);
    free(s->srcs[i].error);
  }
  free(s->srcs);
  for (int64_t i = 0; i < s->n; i++) {
    free((char *)s->e[i].key);
    free((char *)s->e[i].shown);
  }
  free(s->e);
  free(s->kids);
  free(s->bykey);
  free(s->src);
  for (int k = 0; k < s->nnotes; k++) free(s->notes[k]);
  for (int k = 0; k < s->nroots; k++) free(s->roots[k]);
  free(s->roots);
  b2_file_close(s->embed);
  if (s->efd >= 0) close(s->efd);
  if (s->fd >= 0) close(s->fd);
  if (s->pfd >= 0) close(s->pfd);
  for (int k = 0; k < s->nsigs; k++) free(s->sigs[k].rel);
  free(s->sigs);
  free(s->name);
  free(s->path);
  free(s);
}

/* ---- changes -------------------------------------------------------------- */

int b2_store_add_sig(b2_store *s, const char *rel, const struct stat *st) {
  if (s->nsigs == s->sigcap) {
    int cap = s->sigcap ? s->sigcap * 2 : 8;
    b2_store_sig *p = realloc(s->sigs, (size_t)cap * sizeof *p);
    if (!p) return b2_fail(B2_E_NOMEM, "out of memory");
    s->sigs = p;
    s->sigcap = cap;
  }
  b2_store_sig *g = &s->sigs[s->nsigs];
  g->rel = rel ? strdup(rel) : NULL;
  if (rel && !g->rel) return b2_fail(B2_E_NOMEM, "out of memory");
  g->dev = st->st_dev;
  g->ino = st->st_ino;
  g->size = S_ISREG(st->st_mode) ? st->st_size : 0;
  g->mtime = st->st_mtim;
  g->ctime = st->st_ctim;
  s->nsigs++;
  return 0;
}

static int same_time(struct timespec a, struct timespec b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

int b2_store_stale(const b2_store *s) {
  if (s->locked) { /* another process took the EmbedStore's lock to change it */
    char path[64];
    uint64_t gen;
    snprintf(path, sizeof path, "/proc/self/fd/%d", s->efd);
    if (b2_frame_lock_gen(path, &gen) < 0 || gen != s->gen) return 1;
  }
  for (int k = 0; k < s->nsigs; k++) {
    const b2_store_sig *g = &s->sigs[k];
    struct stat st;
    int rc = g->rel ? fstatat(s->fd, g->rel, &st, AT_SYMLINK_NOFOLLOW)
                    : fstatat(s->pfd, s->path, &st, 0);
    if (rc != 0) return 1; /* gone, or moved away */
    if (st.st_dev != g->dev || st.st_ino != g->ino ||
        (S_ISREG(st.st_mode) ? st.st_size : 0) != g->size ||
        !same_time(st.st_mtim, g->mtime) || !same_time(st.st_ctim, g->ctime))
      return 1;
  }
  return 0;
}

/* The key of a new entry shown as `shown` (of `len` bytes) in group
 * `group` of a .b2d (embed: or of a .b2e, for a key of its EmbedStore),
 * into key: 0, B2_E_NOTDIR, B2_E_ROFS or B2_E_INVAL. */
static int new_key(const b2_store *s, int64_t group, const char *shown, size_t len, int embed,
                   char key[B2_STORE_MAX_KEY + 2]) {
  const b2_store_entry *ge = b2_store_entry_at(s, group);
  if (!ge || ge->kind != B2_STORE_GROUP) return b2_fail(B2_E_NOTDIR, "not a group");
  if (s->form != B2_STORE_DIR && !(embed && s->form == B2_STORE_EMBED))
    return b2_fail(B2_E_ROFS, "a .b2z store is read-only");
  if (ge->object_root || b2_store_inside_object(s, group))
    return b2_fail(B2_E_ROFS, "%s holds an object (a CTable)", ge->key);
  int klen = snprintf(key, B2_STORE_MAX_KEY + 2, "%s/%.*s", strcmp(ge->key, "/") ? ge->key : "",
                      (int)len, shown);
  if (klen < 0 || klen >= B2_STORE_MAX_KEY + 2 || !b2_store_key_ok(key) ||
      b2_store_is_carrier(key, NULL) || own_name(shown) || hidden_file(key + 1))
    return b2_fail(B2_E_INVAL, "%s: not a key python-blosc2 would make", shown);
  return 0;
}

int b2_store_file_name(const char *name, int kind, char *out, size_t cap) {
  if (snprintf(out, cap, "%s%s", name,
               kind == B2_STORE_NDARRAY ? B2_STORE_NDARRAY_SUFFIX : B2_STORE_SCHUNK_SUFFIX) >=
      (int)cap)
    return b2_fail(B2_E_NAMETOOLONG, "%s: name too long", name);
  return 0;
}

int b2_store_new_group(const b2_store *s, int64_t group, const char *shown, char *rel,
                       size_t cap) {
  char key[B2_STORE_MAX_KEY + 2];
  int rc = new_key(s, group, shown, strlen(shown), 0, key);
  if (rc < 0) return rc;
  if (b2_store_child(s, group, shown) >= 0 || b2_store_find(s, key) >= 0 ||
      b2_store_find_group(s, key) >= 0)
    return b2_fail(B2_E_EXIST, "%s: already in the store", key);
  if (snprintf(rel, cap, "%s", key + 1) >= (int)cap)
    return b2_fail(B2_E_NAMETOOLONG, "%s: path too long", key);
  return 0;
}

int b2_store_old_group(const b2_store *s, int64_t group, const char *shown, char *rel,
                       size_t cap, char *carrier, size_t ccap) {
  const b2_store_entry *ge = b2_store_entry_at(s, group);
  int64_t i = b2_store_child(s, group, shown);
  const b2_store_entry *e = i >= 0 ? b2_store_entry_at(s, i) : NULL;
  if (!ge || !e) return b2_fail(B2_E_NOENT, "%s: not in the store", shown);
  if (e->kind != B2_STORE_GROUP) return b2_fail(B2_E_NOTDIR, "%s: a value", e->key);
  if (s->form != B2_STORE_DIR) return b2_fail(B2_E_ROFS, "only a .b2d store loses groups");
  if (e->object_root || ge->object_root)
    return b2_fail(B2_E_ROFS, "%s: part of an object (a CTable)", e->key);
  if (e->nchildren > 0) return b2_fail(B2_E_NOTEMPTY, "%s: holds values", e->key);
  const b2_store_src *c = e->has_attrs ? &s->srcs[s->src[i]] : NULL;
  if (c && c->loc != B2_STORE_IN_FILE)
    return b2_fail(B2_E_ROFS, "%s: its attributes are embedded", e->key);
  if (snprintf(rel, cap, "%s", e->key + 1) >= (int)cap ||
      snprintf(carrier, ccap, "%s", c ? c->relpath : "") >= (int)ccap)
    return b2_fail(B2_E_NAMETOOLONG, "%s: path too long", e->key);
  return 0;
}

int b2_store_group_dir(const b2_store *s, int64_t group, char *rel, size_t cap) {
  const b2_store_entry *e = b2_store_entry_at(s, group);
  if (!e || e->kind != B2_STORE_GROUP) return b2_fail(B2_E_NOTDIR, "not a group");
  if (s->form != B2_STORE_DIR) return b2_fail(B2_E_ROFS, "only a .b2d store has directories");
  if (e->object_root || (group > 0 && b2_store_inside_object(s, group)))
    return b2_fail(B2_E_ROFS, "%s: part of an object (a CTable)", e->key);
  if (snprintf(rel, cap, "%s", e->key + 1) >= (int)cap)
    return b2_fail(B2_E_NAMETOOLONG, "%s: path too long", e->key);
  return 0;
}

int b2_store_key_below(const char *key, const char *g) {
  size_t n = strlen(g);
  return strncmp(key, g, n) == 0 && (key[n] == 0 || key[n] == '/');
}

/* Does the subtree of group entry i hold anything not in a file of the
 * .b2d (values or a group's attributes in the EmbedStore, references)? */
static int holds_embedded(const b2_store *s, int64_t i) {
  const char *g = s->e[i].key;
  for (int64_t k = 1; k < s->n; k++) {
    if (!b2_store_key_below(s->e[k].key, g) || s->src[k] < 0) continue;
    if (s->srcs[s->src[k]].loc != B2_STORE_IN_FILE) return 1;
  }
  return 0;
}

_Static_assert(B2_STORE_KEY_CAP == B2_STORE_MAX_KEY + 2, "key buffers");

int b2_store_group_move(const b2_store *s, int64_t group, const char *shown, int64_t ngroup,
                        const char *nshown, int noreplace, char *rel, char *nrel, char *key,
                        char *nkey) {
  int64_t i = b2_store_child(s, group, shown);
  const b2_store_entry *e = i >= 0 ? b2_store_entry_at(s, i) : NULL;
  if (!e) return 2; /* maybe a value made since the snapshot: the caller looks */
  int rc = new_key(s, ngroup, nshown, strlen(nshown), 0, nkey);
  if (rc == 0 && b2_store_key_below(s->e[group].key, nkey)) /* as rename(2): onto a directory above */
    return b2_fail(B2_E_NOTEMPTY, "%s: holds %s", nkey, e->key);
  if (e->kind != B2_STORE_GROUP) return 2;
  if (s->form != B2_STORE_DIR) return b2_fail(B2_E_ROFS, "only a .b2d store moves groups");
  if (e->object_root || b2_store_inside_object(s, i))
    return b2_fail(B2_E_ROFS, "%s: part of an object (a CTable)", e->key);
  if (rc < 0) return rc;
  int64_t t = b2_store_child(s, ngroup, nshown);
  if (t == i) return 1;
  if (b2_store_key_below(nkey, e->key)) return b2_fail(B2_E_INVAL, "%s: into itself", nkey);
  if (holds_embedded(s, i))
    return b2_fail(B2_E_XDEV, "%s: holds entries of the EmbedStore", e->key);
  const b2_store_entry *te = t >= 0 ? b2_store_entry_at(s, t) : NULL;
  if (te && te->kind != B2_STORE_GROUP) return b2_fail(B2_E_NOTDIR, "%s: a value", te->key);
  if (te && noreplace) return b2_fail(B2_E_EXIST, "%s: already in the store", te->key);
  if (te && te->nchildren > 0) return b2_fail(B2_E_NOTEMPTY, "%s: holds values", te->key);
  if (te && holds_embedded(s, t))
    return b2_fail(B2_E_ROFS, "%s: its attributes are embedded", te->key);
  if (!te && (b2_store_find(s, nkey) >= 0 || b2_store_find_group(s, nkey) >= 0))
    return b2_fail(B2_E_EXIST, "%s: already in the store", nkey);
  snprintf(key, B2_STORE_MAX_KEY + 2, "%s", e->key);
  snprintf(rel, B2_STORE_MAX_KEY + 2, "%s", e->key + 1);
  snprintf(nrel, B2_STORE_MAX_KEY + 2, "%s", nkey + 1);
  return 0;
}

int b2_store_embedded(const b2_store *s, int64_t group, const char *shown, int64_t *entry) {
  int64_t i = b2_store_child(s, group, shown);
  const b2_store_entry *e = i >= 0 ? b2_store_entry_at(s, i) : NULL;
  if (!e) return b2_fail(B2_E_NOENT, "%s: not in the store", shown);
  if (e->kind == B2_STORE_GROUP) return b2_fail(B2_E_ISDIR, "%s: a group", e->key);
  if (e->loc != B2_STORE_IN_EMBED || (s->form != B2_STORE_DIR && s->form != B2_STORE_EMBED))
    return b2_fail(B2_E_ROFS, "%s: not a value of the EmbedStore", e->key);
  if (b2_store_inside_object(s, i)) return b2_fail(B2_E_ROFS, "%s: part of an object (a CTable)", e->key);
  *entry = i;
  return 0;
}

int b2_store_embedded_target(const b2_store *s, int64_t from, int64_t group, const char *shown,
                             int replace, char *key, size_t cap) {
  const b2_store_entry *fe = b2_store_entry_at(s, from);
  size_t len = strlen(shown);
  int npy = len > 4 && strcmp(shown + len - 4, ".npy") == 0;
  if (!fe) return b2_fail(B2_E_NOENT, "no such value");
  if (fe->kind != B2_STORE_NDARRAY && fe->kind != B2_STORE_SCHUNK)
    return b2_fail(B2_E_ROFS, "%s: an object keeps its key", fe->key);
  if (npy != (fe->kind == B2_STORE_NDARRAY))
    return b2_fail(B2_E_XDEV, "%s: an array is NAME.npy, an SChunk NAME", shown);
  char k[B2_STORE_MAX_KEY + 2];
  int rc = new_key(s, group, shown, npy ? len - 4 : len, 1, k);
  if (rc < 0) return rc;
  int64_t old = b2_store_child(s, group, shown);
  const b2_store_entry *oe = old >= 0 ? b2_store_entry_at(s, old) : NULL;
  if (oe && (!replace || oe->kind != fe->kind || oe->loc != B2_STORE_IN_EMBED ||
             strcmp(oe->key, k) != 0))
    return b2_fail(oe->kind == B2_STORE_GROUP ? B2_E_ISDIR : B2_E_EXIST,
                   "%s: already in the store", k);
  if (!oe && (b2_store_find(s, k) >= 0 || b2_store_find_group(s, k) >= 0))
    return b2_fail(B2_E_EXIST, "%s: already in the store", k);
  if (snprintf(key, cap, "%s", k) >= (int)cap)
    return b2_fail(B2_E_NAMETOOLONG, "%s: key too long", k);
  return 0;
}

int b2_store_new_value(const b2_store *s, int64_t group, const char *shown, int replace,
                       char *rel, size_t cap, int *kind) {
  size_t len = strlen(shown);
  int npy = *kind != B2_STORE_SCHUNK && len > 4 && strcmp(shown + len - 4, ".npy") == 0;
  char key[B2_STORE_MAX_KEY + 2];
  int rc = new_key(s, group, shown, npy ? len - 4 : len, 0, key);
  if (rc < 0) return rc;
  *kind = npy ? B2_STORE_NDARRAY : B2_STORE_SCHUNK;
  if (b2_store_file_name(key + 1, *kind, rel, cap) < 0)
    return b2_fail(B2_E_NAMETOOLONG, "%s: path too long", key);
  int64_t old = b2_store_child(s, group, shown);
  const b2_store_entry *oe = old >= 0 ? b2_store_entry_at(s, old) : NULL;
  if (replace && oe && oe->loc == B2_STORE_IN_FILE && oe->kind == *kind &&
      strcmp(oe->key, key) == 0 && strcmp(oe->relpath, rel) == 0)
    return 1; /* that very file */
  if (replace && oe && oe->kind != B2_STORE_GROUP && oe->loc != B2_STORE_IN_FILE)
    return b2_fail(B2_E_ROFS, "%s: an embedded value is not replaced", key);
  if (replace && oe && oe->kind != B2_STORE_GROUP && oe->kind != *kind)
    return b2_fail(B2_E_XDEV, "%s: an array is NAME.npy, an SChunk NAME", key);
  if (oe || b2_store_find(s, key) >= 0 || b2_store_find_group(s, key) >= 0)
    return b2_fail(oe && oe->kind == B2_STORE_GROUP ? B2_E_ISDIR : B2_E_EXIST,
                   "%s: already in the store", key);
  return 0;
}

int b2_store_files_changed(int dirfd) { return b2_frame_lock_touch(dirfd, EMBED_NAME); }

int b2_store_embed_rekey(const b2_store *s, const char *key, const char *newkey) {
  b2_frame *f;
  char proc[64];
  snprintf(proc, sizeof proc, "/proc/self/fd/%d", s->fd);
  int rc = s->form == B2_STORE_DIR     ? b2_frame_open_rw_at(s->fd, EMBED_NAME, &f)
           : s->form == B2_STORE_EMBED ? b2_frame_open_rw(proc, &f)
                                       : b2_fail(B2_E_ROFS, "a .b2z store is read-only");
  if (rc < 0) return b2_context(rc, "%s", EMBED_NAME); /* its lock, when shared, is held */
  uint8_t *old = NULL, *neu = NULL;
  size_t olen, nlen;
  rc = read_index(f, &old, &olen);
  if (!rc) rc = b2_embed_rekey(old, olen, key, newkey, &neu, &nlen);
  if (!rc) rc = b2_frame_vlmeta_set(f, INDEX_VLMETA, neu, nlen);
  if (!rc) rc = b2_frame_commit(f);
  free(old);
  free(neu);
  b2_frame_close(f);
  return rc < 0 ? b2_context(rc, "%s", EMBED_NAME) : 0;
}

int b2_store_form(const b2_store *s) { return s->form; }
int b2_store_flavor(const b2_store *s) { return s->flavor; }
const char *b2_store_name(const b2_store *s) { return s->name; }
int b2_store_nnotes(const b2_store *s) { return s->nnotes; }
const char *b2_store_note(const b2_store *s, int k) {
  return k >= 0 && k < s->nnotes ? s->notes[k] : NULL;
}

/* ---- leaves ------------------------------------------------------------------ */

static const b2_store_src *leaf_src(const b2_store *s, int64_t i) {
  if (i < 0 || i >= s->n || s->e[i].kind == B2_STORE_GROUP || s->src[i] < 0) {
    b2_fail(B2_E_INVAL, "entry %lld is not a value", (long long)i);
    return NULL;
  }
  return &s->srcs[s->src[i]];
}

int b2_store_open_frame(b2_store *s, int64_t i, b2_frame **out) {
  const b2_store_src *src = leaf_src(s, i);
  if (!src) return B2_E_INVAL;
  if (src->loc == B2_STORE_IN_NONE)
    return b2_fail(B2_E_INVAL, "%s: a remote reference, no bytes here",
                   src->key);
  return b2_store_src_frame(s, src, out);
}

int b2_store_open_file(b2_store *s, b2_env *env, int64_t i, int view,
                       b2_file **out) {
  b2_frame *fr;
  int rc = b2_store_open_frame(s, i, &fr);
  if (rc < 0) return rc;
  return b2_file_open_frame(env, fr, view, out);
}

int64_t b2_store_raw_size(const b2_store *s, int64_t i) {
  const b2_store_src *src = leaf_src(s, i);
  return src ? src->length : B2_E_INVAL;
}

ssize_t b2_store_pread_raw(b2_store *s, int64_t i, void *buf, size_t n,
                           int64_t off) {
  const b2_store_src *src = leaf_src(s, i);
  if (!src) return B2_E_INVAL;
  if (off < 0) return b2_fail(B2_E_RANGE, "negative offset");
  if (off >= src->length) return 0;
  size_t want = (size_t)B2_MIN((int64_t)n, src->length - off);
  int rc;
  switch (src->loc) {
  case B2_STORE_IN_FILE: {
    int fd = open_beneath(s->fd, src->relpath);
    if (fd < 0) return fd;
    rc = b2_io_pread(fd, buf, want, off);
    close(fd);
    break;
  }
  case B2_STORE_IN_MEMBER:
    rc = b2_io_pread(s->fd, buf, want, src->offset + off);
    break;
  case B2_STORE_IN_EMBED:
    rc = embed_read(s, buf, want, src->offset + off);
    break;
  default:
    return b2_fail(B2_E_INVAL, "%s: no bytes here", src->key);
  }
  return rc < 0 ? rc : (ssize_t)want;
}

/* ---- group attributes -------------------------------------------------------- */

static int group_carrier(b2_store *s, int64_t i, b2_frame **out) {
  *out = NULL;
  if (i < 0 || i >= s->n || s->e[i].kind != B2_STORE_GROUP)
    return b2_fail(B2_E_INVAL, "entry %lld is not a group", (long long)i);
  if (s->src[i] < 0) return 0;
  return b2_store_src_frame(s, &s->srcs[s->src[i]], out);
}

ssize_t b2_store_xattr_list(b2_store *s, int64_t i, char *buf, size_t cap) {
  b2_frame *f;
  int rc = group_carrier(s, i, &f);
  if (rc < 0 || !f) return rc;
  size_t total = 0;
  int nv = b2_frame_get_info(f)->nvlmeta;
  for (int k = 0; k < nv; k++) {
    const char *nm = b2_frame_vlmeta_name(f, k);
    size_t len;
    if (!nm || !strcmp(nm, B2_FRAME_CSUM_VLMETA) ||
        b2_frame_vlmeta_get(f, nm, NULL, &len) < 0 || len > B2_XATTR_VALUE_MAX)
      continue; /* b2fs's own checksums are no attribute of the group */
    size_t need = sizeof XATTR_VLMETA - 1 + strlen(nm) + 1;
    if (cap && total + need <= cap) {
      memcpy(buf + total, XATTR_VLMETA, sizeof XATTR_VLMETA - 1);
      memcpy(buf + total + sizeof XATTR_VLMETA - 1, nm, strlen(nm) + 1);
    }
    total += need;
  }
  b2_frame_close(f);
  if (cap && total > cap) return b2_fail(B2_E_RANGE, "attribute list too long");
  return (ssize_t)total;
}

ssize_t b2_store_xattr_get(b2_store *s, int64_t i, const char *name,
                           void *buf, size_t cap) {
  size_t k = sizeof XATTR_VLMETA - 1;
  if (strncmp(name, XATTR_VLMETA, k) != 0 || !name[k])
    return b2_fail(B2_E_NOENT, "no attribute %s", name);
  b2_frame *f;
  int rc = group_carrier(s, i, &f);
  if (rc < 0) return rc;
  if (!f) return b2_fail(B2_E_NOENT, "no attribute %s", name);
  uint8_t *v = NULL;
  size_t len;
  rc = b2_frame_vlmeta_get(f, name + k, cap ? &v : NULL, &len);
  b2_frame_close(f);
  if (rc < 0) return b2_fail(B2_E_NOENT, "no attribute %s", name);
  if (cap && len > cap) rc = b2_fail(B2_E_RANGE, "attribute %s too long", name);
  else if (cap) memcpy(buf, v, len);
  free(v);
  return rc < 0 ? rc : (ssize_t)len;
}
