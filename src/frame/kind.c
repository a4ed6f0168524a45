/*
 * kind.c - what a frame holds, told from its metalayers as python-blosc2
 * tells its objects apart (b2_frame_kind, b2_frame_kind_at).
 *
 * python-blosc2 marks every object it stores in a frame other than a plain
 * SChunk with a fixed metalayer: `b2nd` (NDArray; `caterva` in older
 * files), `b2o` (carriers of lazy expressions, lazy UDFs and C2Array
 * references, whose content is a map with the "kind"), `LazyArray` (older
 * lazy expressions), `vlarray` (ObjectArray), `batcharray`, `listarray`,
 * `proxy-source` (a Proxy's cache), `b2embed` / `b2dict` / `b2tree`
 * (EmbedStore, and the embed.b2e of DictStore and TreeStore).  Carriers,
 * caches and lists also carry `b2nd` or hold chunks whose decompressed
 * bytes are not the object's data, so the markers are checked first, in
 * python-blosc2's own order (proxy, stores, lists, batches, objects, b2o,
 * LazyArray, then b2nd).
 *
 * b2_frame_kind_at reads only the header of a frame (contiguous file or
 * sparse directory) for callers that decide how to show an entry without
 * opening the whole frame; sizes are checked against the real file.  A
 * file that does not start like a frame (b2_frame_starts_like) is
 * B2_KIND_NONE, remembered as kinds are; one that does but whose header
 * does not parse is a damaged frame (a negative code).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "b2_error.h"
#include "common/fileio.h"
#include "common/msgpack.h"
#include "common/util.h"
#include "frame/frame_impl.h"

/* Enough for the fixed part of any header (the reference writes 87). */
#define HEADER_PREFIX 512

static const char *const kind_names[] = {
    [B2_KIND_SCHUNK] = "schunk",         [B2_KIND_NDARRAY] = "ndarray",
    [B2_KIND_LAZYEXPR] = "lazyexpr",     [B2_KIND_LAZYUDF] = "lazyudf",
    [B2_KIND_C2ARRAY] = "c2array",       [B2_KIND_B2OBJECT] = "b2object",
    [B2_KIND_LAZYARRAY] = "lazyarray",   [B2_KIND_OBJECTARRAY] = "objectarray",
    [B2_KIND_BATCHARRAY] = "batcharray", [B2_KIND_LISTARRAY] = "listarray",
    [B2_KIND_PROXY] = "proxy",           [B2_KIND_EMBEDSTORE] = "embedstore",
    [B2_KIND_DICTSTORE] = "dictstore",   [B2_KIND_TREESTORE] = "treestore",
    [B2_KIND_NONE] = "none",
};

const char *b2_frame_kind_name(int kind) {
  if (kind < 0 || kind >= (int)(sizeof kind_names / sizeof *kind_names)) return "unknown";
  return kind_names[kind];
}

int b2_frame_kind_is_data(int kind) { return kind == B2_KIND_SCHUNK || kind == B2_KIND_NDARRAY; }

/* The kind a `b2o` metalayer names: a map {"kind": str, ...}. */
static int b2o_kind(const uint8_t *d, size_t len) {
  b2_mp_reader r;
  b2_mp_reader_init(&r, d, len);
  uint32_t n;
  if (b2_mp_read_map(&r, &n) < 0) return B2_KIND_B2OBJECT;
  for (uint32_t k = 0; k < n; k++) {
    const uint8_t *s;
    uint32_t sl;
    if (b2_mp_read_str(&r, &s, &sl) < 0) return B2_KIND_B2OBJECT;
    if (sl == 4 && !memcmp(s, "kind", 4)) {
      if (b2_mp_read_str(&r, &s, &sl) < 0) return B2_KIND_B2OBJECT;
      if (sl == 8 && !memcmp(s, "lazyexpr", 8)) return B2_KIND_LAZYEXPR;
      if (sl == 7 && !memcmp(s, "lazyudf", 7)) return B2_KIND_LAZYUDF;
      if (sl == 7 && !memcmp(s, "c2array", 7)) return B2_KIND_C2ARRAY;
      return B2_KIND_B2OBJECT;
    }
    if (b2_mp_skip(&r) < 0) return B2_KIND_B2OBJECT;
  }
  return B2_KIND_B2OBJECT;
}

/* The metalayers that mark a frame's kind, in the order python-blosc2
 * tells its objects apart. */
static const struct {
  const char *meta;
  int kind;
} order[] = {
    {"proxy-source", B2_KIND_PROXY},   {"b2embed", B2_KIND_EMBEDSTORE},
    {"b2dict", B2_KIND_DICTSTORE},     {"b2tree", B2_KIND_TREESTORE},
    {"listarray", B2_KIND_LISTARRAY},  {"batcharray", B2_KIND_BATCHARRAY},
    {"vlarray", B2_KIND_OBJECTARRAY},  {"b2o", B2_KIND_B2OBJECT},
    {"LazyArray", B2_KIND_LAZYARRAY},  {"b2nd", B2_KIND_NDARRAY},
    {"caterva", B2_KIND_NDARRAY},
};

int b2_frame_kind_marker(const char *meta) {
  for (size_t o = 0; o < sizeof order / sizeof *order; o++)
    if (!strcmp(meta, order[o].meta)) return 1;
  return 0;
}

/* The kind from n metalayers: names[k], content data[k] of len[k]. */
static int classify(int n, const char *const *names, const uint8_t *const *data,
                    const size_t *len) {
  for (size_t o = 0; o < sizeof order / sizeof *order; o++)
    for (int k = 0; k < n; k++)
      if (!strcmp(names[k], order[o].meta))
        return order[o].kind == B2_KIND_B2OBJECT ? b2o_kind(data[k], len[k]) : order[o].kind;
  return B2_KIND_SCHUNK;
}

int b2_frame_kind(const b2_frame *f) {
  if (!f) return b2_fail(B2_E_INVAL, "frame kind: no frame");
  const char *names[B2_FRAME_MAX_META];
  const uint8_t *data[B2_FRAME_MAX_META];
  size_t len[B2_FRAME_MAX_META];
  int n = 0;
  for (int k = 0; k < B2_FRAME_MAX_META; k++) {
    const char *name = b2_frame_meta_name(f, k);
    if (!name) break;
    if (b2_frame_meta_get(f, name, &data[n], &len[n]) < 0) continue;
    names[n++] = name;
  }
  return classify(n, names, data, len);
}

/* Kinds found lately, by the identity, size and times of the header file
 * read: a listing and the lookups and stats that follow probe each frame
 * several times.  A change to the file changes its ctime (or inode). */
#define KIND_CACHE 4096
static struct kind_seen {
  dev_t dev;
  ino_t ino;
  off_t size;
  struct timespec mtim, ctim;
  int kind; /* -1: empty slot */
  int64_t nbytes; /* the header's uncompressed size */
} kinds_seen[KIND_CACHE];
static pthread_mutex_t kinds_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t kinds_once = PTHREAD_ONCE_INIT;

static void kinds_init(void) {
  for (size_t k = 0; k < KIND_CACHE; k++) kinds_seen[k].kind = -1;
}

static struct kind_seen *kind_slot(const struct stat *st) {
  return &kinds_seen[((uint64_t)st->st_ino * 2654435761u ^ (uint64_t)st->st_dev) % KIND_CACHE];
}

static int same_time(struct timespec a, struct timespec b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

/* The kind remembered for the file st describes, or -1. */
static int kind_cached(const struct stat *st, int64_t *nbytes) {
  pthread_once(&kinds_once, kinds_init);
  pthread_mutex_lock(&kinds_mu);
  const struct kind_seen *s = kind_slot(st);
  int kind = s->kind >= 0 && s->dev == st->st_dev && s->ino == st->st_ino &&
                     s->size == st->st_size && same_time(s->mtim, st->st_mtim) &&
                     same_time(s->ctim, st->st_ctim)
                 ? s->kind
                 : -1;
  if (kind >= 0 && nbytes) *nbytes = s->nbytes;
  pthread_mutex_unlock(&kinds_mu);
  return kind;
}

int b2_frame_kind_seen(const struct stat *st, int64_t *nbytes) {
  if (!st) return -1;
  return kind_cached(st, nbytes);
}

static void kind_remember(const struct stat *st, int kind, int64_t nbytes) {
  pthread_once(&kinds_once, kinds_init);
  pthread_mutex_lock(&kinds_mu);
  struct kind_seen *s = kind_slot(st);
  s->dev = st->st_dev;
  s->ino = st->st_ino;
  s->size = st->st_size;
  s->mtim = st->st_mtim;
  s->ctim = st->st_ctim;
  s->kind = kind;
  s->nbytes = nbytes;
  pthread_mutex_unlock(&kinds_mu);
}

/* The header file of `name` in dirfd as it is now, without opening it:
 * 0 and *st, or -1 (then the caller opens and finds out why). */
static int header_stat(int dirfd, const char *name, struct stat *st) {
  int flags = dirfd == AT_FDCWD ? 0 : AT_SYMLINK_NOFOLLOW;
  if (fstatat(dirfd, name, st, flags) != 0) return -1;
  if (S_ISDIR(st->st_mode)) {
    char sub[PATH_MAX];
    if (snprintf(sub, sizeof sub, "%s/%s", name, B2_FRAME_SPARSE_INDEX) >= (int)sizeof sub ||
        fstatat(dirfd, sub, st, AT_SYMLINK_NOFOLLOW) != 0)
      return -1;
  }
  return S_ISREG(st->st_mode) ? 0 : -1;
}

/* Open `name` in dirfd (AT_FDCWD: a path, as b2_frame_open opens one): the
 * frame file, or a sparse frame's index file; *out gets its fstat. */
static int open_header_file(int dirfd, const char *name, struct stat *out) {
  /* A probe (a listing, a lookup) is no read of the data: it leaves the
   * access time alone where it may (the file's owner, or CAP_FOWNER). */
  int flags = O_RDONLY | O_NONBLOCK | (dirfd == AT_FDCWD ? 0 : O_NOFOLLOW);
  int fd = b2_io_openat(dirfd, name, flags | O_NOATIME, 0);
  if (fd == B2_E_PERM) fd = b2_io_openat(dirfd, name, flags, 0);
  if (fd < 0) return fd;
  struct stat st;
  if (fstat(fd, &st) < 0) st.st_mode = 0;
  if (S_ISDIR(st.st_mode)) {
    flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW;
    int ifd = b2_io_open_noatime(fd, B2_FRAME_SPARSE_INDEX, flags);
    int e = errno;
    close(fd);
    if (ifd < 0)
      return b2_fail(b2_from_errno(e), "sparse frame: cannot open %s: %s", B2_FRAME_SPARSE_INDEX,
                     strerror(e));
    fd = ifd;
    if (fstat(fd, &st) < 0) st.st_mode = 0;
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return b2_fail(B2_E_FORMAT, "not a regular file or a directory");
  }
  *out = st;
  return fd;
}

int b2_frame_kind_at(int dirfd, const char *name) { return b2_frame_kind_at_st(dirfd, name, NULL); }

int b2_frame_kind_at_st(int dirfd, const char *name, const struct stat *known) {
  if (!name || !*name) return b2_fail(B2_E_INVAL, "frame kind: no name");
  struct stat st;
  int have = known && S_ISREG(known->st_mode);
  if (have) st = *known;
  int kind = have || header_stat(dirfd, name, &st) == 0 ? kind_cached(&st, NULL) : -1;
  if (kind >= 0) return kind;
  int fd = open_header_file(dirfd, name, &st); /* st: what is read below */
  if (fd < 0) return fd;
  int64_t size = (int64_t)st.st_size;
  uint8_t pre[HEADER_PREFIX];
  size_t n = size < HEADER_PREFIX ? (size_t)size : HEADER_PREFIX;
  b2_frame_header h;
  uint8_t *hdr = NULL;
  b2_frame_meta *meta = NULL;
  int nmeta = 0;
  int rc = n ? b2_io_pread(fd, pre, n, 0) : 0;
  if (rc == 0 && !b2_frame_starts_like(pre, n)) { /* text, empty, another format */
    close(fd);
    kind_remember(&st, B2_KIND_NONE, 0);
    return B2_KIND_NONE;
  }
  if (rc == 0) rc = b2_frame_parse_header(pre, n, &h);
  if (rc == 0 && h.header_size > size) /* the allocation is bounded by the file */
    rc = b2_fail(B2_E_TRUNCATED, "frame header: header_size %lld exceeds the file's %lld bytes",
                 (long long)h.header_size, (long long)size);
  /* a listing probes every frame: one read when the header is small */
  const uint8_t *hp = pre;
  if (rc == 0 && (size_t)h.header_size > n) {
    if (!(hdr = malloc((size_t)h.header_size)))
      rc = b2_fail(B2_E_NOMEM, "out of memory for the header");
    if (rc == 0) rc = b2_io_pread(fd, hdr, (size_t)h.header_size, 0);
    if (rc == 0) rc = b2_frame_parse_header(hdr, (size_t)h.header_size, &h);
    hp = hdr;
  }
  if (rc == 0)
    rc = b2_frame_parse_metalayers(hp, (size_t)h.header_size, h.meta_pos, B2_FRAME_MAX_META,
                                   &meta, &nmeta);
  close(fd);
  if (rc == 0) {
    const char *names[B2_FRAME_MAX_META];
    const uint8_t *data[B2_FRAME_MAX_META];
    size_t len[B2_FRAME_MAX_META];
    for (int k = 0; k < nmeta && k < B2_FRAME_MAX_META; k++) {
      names[k] = meta[k].name;
      data[k] = hp + meta[k].pos;
      len[k] = meta[k].len;
    }
    rc = classify(B2_MIN(nmeta, B2_FRAME_MAX_META), names, data, len);
    if (rc >= 0) kind_remember(&st, rc, h.nbytes);
  }
  free(meta);
  free(hdr);
  return rc;
}
