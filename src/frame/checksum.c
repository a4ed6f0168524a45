/*
 * checksum.c - per-chunk CRC-32C checksums kept in the vlmetalayer
 * B2_FRAME_CSUM_VLMETA ("b2fs.crc32c"), verified when chunks are read.
 *
 * Content of the vlmetalayer (MessagePack, so tools that decode every
 * vlmetalayer as MessagePack, as python-blosc2 does, read it too):
 *
 *   [2, nchunks, bin(4 * nchunks), nil | bin((nchunks + 7) / 8), stamp]
 *
 * the format version, the number of chunks, the CRC-32C of each chunk's
 * stored bytes (its cbytes bytes as written in the frame, compressed) as
 * little-endian uint32 in index order (0 for special index entries, which
 * have no stored bytes and are not checked), then either nil or a bitmap
 * whose bit i (bit i % 8 of byte i / 8) says chunk i's checksum is not
 * known.  Unknown checksums come from frames another writer made: when
 * b2fs opens one for writing, its existing chunks are checksummed at the
 * first commit if they add up to at most FILL_BUDGET bytes (else by the
 * next compaction, which reads every chunk anyway), while every chunk b2fs
 * puts gets its checksum at once.  A vlmetalayer that does not describe
 * the frame (wrong version, count or lengths) is ignored, with the reason
 * kept for b2_frame_checksums; a writer replaces it.
 *
 * Other programs change frames without touching the table (the reference
 * library rewrites a replaced chunk in place, often at the same offset and
 * size), so the table also says when it was true: `stamp`, nanoseconds
 * since the epoch, is the modification time the writer gives the header
 * file (the frame file; a sparse frame's chunks.b2frame) once its commit
 * is done.  The stamp is taken just below the coarse clock that file
 * times come from, so a write after the commit always leaves a later
 * time; `cp -p`, tar and rsync -a keep it.  A sparse frame's chunk files
 * get the stamp of the commit that made them.  A time set by hand
 * (b2_frame_set_mtime: touch or cp -p through the mount) is committed as
 * the stamp, and given to the header file and every chunk file; a
 * compaction, the same content, keeps the time the frame had.
 *
 * A chunk whose bytes match its checksum is good.  One that does not is
 * damaged when nothing wrote its file since the table was written (the
 * header file's time is the stamp; a sparse chunk file's time is not past
 * it).  Otherwise another program wrote the file (or its time was set),
 * and the table no longer vouches for that chunk: its bytes are the other
 * program's when the file stayed as it was since the frame was opened (a
 * sparse chunk file: during the read), and read unchecked; when the file
 * changed meanwhile, the read may have met a rewrite half done, and fails
 * with B2_E_STALE for the caller to open the frame again.  A writer opening
 * such a frame drops the table and computes it anew.  Version 1 tables,
 * which had no stamp, are ignored.
 *
 * In memory, f->csum holds the table for the staged index; a writable
 * frame changes it under the writer lock together with the index, and
 * every commit stages the vlmetalayer in the trailer it writes anyway, so
 * checksums and index always reach the disk in the same commit.
 *
 * Cost: read.c loads every chunk whole, range decodes included, and the
 * check is one CRC pass over the stored bytes (about 20 GB/s with SSE4.2,
 * 1-2 GB/s portable): nothing for whole-chunk decodes, and for a small
 * range read of a poorly compressed 1 MiB chunk about as much as the
 * pread itself.  A future read path that loads only some blocks of a
 * chunk must load it whole while b2_frame_csum_active says so.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "b2_chunk.h"
#include "b2_error.h"
#include "common/crc32c.h"
#include "common/msgpack.h"
#include "common/util.h"
#include "frame/frame_impl.h"

#define CSUM_VERSION 2
/* Unknown checksums a commit computes at most (stored bytes read);
 * B2FS_CSUM_BUDGET=BYTES in the environment sets another bound (tests use
 * 0 to keep tables partial). */
#define FILL_BUDGET ((int64_t)64 << 20)

static int64_t fill_budget(void) {
  const char *e = getenv("B2FS_CSUM_BUDGET");
  if (!e || !*e) return FILL_BUDGET;
  char *end;
  long long v = strtoll(e, &end, 10);
  return *end || v < 0 ? FILL_BUDGET : (int64_t)v;
}

static inline int unknown_bit(const b2_frame_csum *c, int64_t i) {
  return c->unknown && (c->unknown[i >> 3] >> (i & 7)) & 1;
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void set_why(b2_frame_csum *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->why, sizeof c->why, fmt, ap);
  va_end(ap);
}

static int64_t time_ns(const struct timespec *t) {
  return (int64_t)t->tv_sec * 1000000000 + t->tv_nsec;
}

/* The inverse (times before 1970 too: the nanoseconds stay in [0, 1e9)). */
static struct timespec ns_time(int64_t ns) {
  int64_t sec = ns / 1000000000, nsec = ns % 1000000000;
  if (nsec < 0) sec--, nsec += 1000000000;
  return (struct timespec){(time_t)sec, (long)nsec};
}

/* ---- reading the vlmetalayer -------------------------------------------- */

static int find_vlmeta(const b2_frame *f) {
  for (int k = 0; k < f->info.nvlmeta; k++)
    if (strcmp(f->vlmeta[k].name, B2_FRAME_CSUM_VLMETA) == 0) return k;
  return -1;
}

/* Parse content into c (for n chunks); 1 if usable, 0 if ignored (c->why
 * says why), or B2_E_NOMEM. */
static int parse(b2_frame_csum *c, const uint8_t *data, size_t len,
                 int64_t n) {
  b2_mp_reader r;
  b2_mp_reader_init(&r, data, len);
  uint32_t nelem, clen, blen = 0;
  uint64_t version, count;
  int64_t stamp = 0;
  const uint8_t *crcs, *bits = NULL;
  b2_mp_item it;
  if (b2_mp_read_array(&r, &nelem) < 0 || nelem < 4 ||
      b2_mp_read_uint(&r, &version) < 0 || b2_mp_read_uint(&r, &count) < 0 ||
      b2_mp_read_bin(&r, &crcs, &clen) < 0 || b2_mp_next(&r, &it) < 0 ||
      (nelem == 5 && b2_mp_read_int(&r, &stamp) < 0)) {
    set_why(c, "not a checksum table");
    return 0;
  }
  if (version != CSUM_VERSION || nelem != 5) {
    set_why(c, "version %llu (this reader knows %d)",
            (unsigned long long)version, CSUM_VERSION);
    return 0;
  }
  if (count != (uint64_t)n) {
    set_why(c, "a table of %llu chunks for %lld chunks",
            (unsigned long long)count, (long long)n);
    return 0;
  }
  if (clen != 4 * (uint64_t)n) {
    set_why(c, "%u bytes of checksums for %lld chunks", clen, (long long)n);
    return 0;
  }
  if (it.kind == B2_MP_BIN) {
    bits = it.data;
    blen = it.len;
  }
  if ((it.kind != B2_MP_NIL && it.kind != B2_MP_BIN) ||
      (bits && blen != (uint64_t)(n + 7) / 8) || r.pos != len) {
    set_why(c, "malformed map of unknown checksums");
    return 0;
  }
  if (stamp != c->stamp) {
    set_why(c, "the frame changed after its checksums were written (another program, or "
               "its time was set): chunks that differ are read unchecked");
    c->foreign = 1;
    c->stamp = stamp;
  }
  c->crc = malloc(n > 0 ? (size_t)n * sizeof *c->crc : 1);
  if (bits) c->unknown = malloc(blen > 0 ? blen : 1);
  if (!c->crc || (bits && !c->unknown))
    return b2_fail(B2_E_NOMEM, "out of memory for %lld checksums",
                   (long long)n);
  for (int64_t i = 0; i < n; i++) c->crc[i] = b2_le32(crcs + 4 * i);
  if (bits) memcpy(c->unknown, bits, blen);
  c->cap = n;
  return 1;
}

int b2_frame_csum_load(b2_frame *f) {
  b2_frame_csum *c = &f->csum;
  atomic_store_explicit(&c->verify, 1, memory_order_relaxed);
  int k = find_vlmeta(f);
  if (k < 0 || f->info.legacy) return 0;
  uint8_t *data;
  size_t len;
  int rc = b2_frame_vlmeta_get(f, B2_FRAME_CSUM_VLMETA, &data, &len);
  if (rc == B2_E_NOMEM) return rc;
  if (rc < 0) {
    snprintf(c->why, sizeof c->why, "%s", b2_last_detail());
    return 0;
  }
  /* The header file as the frame was read (before its header when opened
   * by path): its time, for the table's stamp, and what a changed file
   * is told by. */
  if (f->st_valid) c->seen = f->st;
  else if (fstat(f->fd, &c->seen) != 0) memset(&c->seen, 0, sizeof c->seen);
  c->stamp = time_ns(&c->seen.st_mtim);
  rc = parse(c, data, len, f->info.nchunks);
  free(data);
  if (rc <= 0) b2_frame_csum_free(f);
  if (rc > 0 && !c->foreign) {
    c->on_disk = c->stamp;
    c->has_on_disk = 1;
  }
  return rc < 0 ? rc : 0;
}

void b2_frame_csum_free(b2_frame *f) {
  f->csum.has_on_disk = 0;
  free(f->csum.crc);
  free(f->csum.unknown);
  f->csum.crc = NULL;
  f->csum.unknown = NULL;
  f->csum.cap = 0;
}

/* ---- writer side --------------------------------------------------------- */

int b2_frame_csum_reserve(b2_frame *f, int64_t cap) {
  b2_frame_csum *c = &f->csum;
  if (!c->crc || cap <= c->cap) return 0;
  uint32_t *p = realloc(c->crc, (size_t)cap * sizeof *p);
  if (!p) return b2_fail(B2_E_NOMEM, "out of memory for %lld checksums",
                         (long long)cap);
  c->crc = p;
  if (c->unknown) {
    size_t old = (size_t)(c->cap + 7) / 8, nb = (size_t)(cap + 7) / 8;
    uint8_t *u = realloc(c->unknown, nb);
    if (!u) return b2_fail(B2_E_NOMEM, "out of memory for %lld checksums",
                           (long long)cap);
    memset(u + old, 0, nb - old);
    c->unknown = u;
  }
  c->cap = cap;
  return 0;
}

int b2_frame_csum_w_init(b2_frame *f) {
  b2_frame_csum *c = &f->csum;
  int64_t cap = f->w->cap, n = f->info.nchunks;
  if (c->foreign) { /* vouches for nothing another program wrote: anew */
    b2_frame_csum_free(f);
    c->foreign = 0;
  }
  if (c->crc) return b2_frame_csum_reserve(f, cap);
  /* No usable table: every stored chunk's checksum is unknown. */
  c->crc = calloc((size_t)cap, sizeof *c->crc);
  c->unknown = calloc((size_t)(cap + 7) / 8, 1);
  if (!c->crc || !c->unknown)
    return b2_fail(B2_E_NOMEM, "out of memory for %lld checksums",
                   (long long)cap);
  c->cap = cap;
  for (int64_t i = 0; i < n; i++)
    if (f->offsets[i] >= 0) c->unknown[i >> 3] |= (uint8_t)(1u << (i & 7));
  return 0;
}

void b2_frame_csum_set(b2_frame *f, int64_t i, uint32_t crc) {
  b2_frame_csum *c = &f->csum;
  if (!c->crc || i >= c->cap) return;
  c->crc[i] = crc;
  if (c->unknown) c->unknown[i >> 3] &= (uint8_t)~(1u << (i & 7));
}

/* Stored bytes of the chunks whose checksum is unknown. */
static int64_t unknown_bytes(const b2_frame *f) {
  const b2_frame_csum *c = &f->csum;
  int64_t sum = 0;
  if (!c->unknown) return 0;
  for (int64_t i = 0; i < f->info.nchunks; i++)
    if (f->offsets[i] >= 0 && unknown_bit(c, i)) sum += f->w->csize[i];
  return sum;
}

int b2_frame_csum_fill(b2_frame *f, int64_t budget) {
  b2_frame_csum *c = &f->csum;
  if (!c->crc || !c->unknown) return 0;
  int64_t want = unknown_bytes(f);
  if (want == 0 || (budget >= 0 && want > budget)) return 0;
  b2_chunkbuf b = {.p = NULL};
  int filled = 0;
  for (int64_t i = 0; i < f->info.nchunks; i++) {
    if (f->offsets[i] < 0 || !unknown_bit(c, i)) continue;
    size_t len;
    /* The writer mutex is held: nothing changes the entry meanwhile. */
    b2_frame_rdlock(f);
    int rc = b2_frame_load_chunk(f, i, &b, &len, NULL);
    b2_frame_rdunlock(f);
    if (rc == B2_E_NOMEM) {
      free(b.p);
      return rc;
    }
    if (rc < 0) continue; /* unreadable: stays unknown (and is reported
                             by whoever reads it) */
    uint32_t crc = b2_crc32c(0, b.p, len);
    pthread_rwlock_wrlock(&f->w->lock);
    b2_frame_csum_set(f, i, crc);
    pthread_rwlock_unlock(&f->w->lock);
    filled = 1;
  }
  free(b.p);
  if (filled) f->w->dirty = 1;
  return 0;
}

/* The vlmetalayer's content for the staged index. */
static int encode(const b2_frame *f, uint8_t **out, size_t *olen) {
  const b2_frame_csum *c = &f->csum;
  int64_t n = f->info.nchunks, nunknown = 0;
  uint8_t *le = malloc(n > 0 ? 4 * (size_t)n : 1);
  uint8_t *bits = calloc((size_t)(n + 7) / 8 + 1, 1);
  if (!le || !bits) {
    free(le);
    free(bits);
    return b2_fail(B2_E_NOMEM, "out of memory for %lld checksums",
                   (long long)n);
  }
  for (int64_t i = 0; i < n; i++) {
    int stored = f->offsets[i] >= 0;
    b2_put_le32(le + 4 * i, stored ? c->crc[i] : 0);
    if (stored && unknown_bit(c, i)) {
      bits[i >> 3] |= (uint8_t)(1u << (i & 7));
      nunknown++;
    }
  }
  b2_mp_writer w;
  b2_mp_writer_init(&w, NULL, 0);
  b2_mp_put_array(&w, 5);
  b2_mp_put_uint(&w, CSUM_VERSION);
  b2_mp_put_uint(&w, (uint64_t)n);
  b2_mp_put_bin(&w, le, 4 * (size_t)n);
  if (nunknown)
    b2_mp_put_bin(&w, bits, (size_t)(n + 7) / 8);
  else
    b2_mp_put_nil(&w);
  int rc = b2_mp_put_int(&w, c->stamp); /* signed: times before 1970 too */
  free(le);
  free(bits);
  if (rc < 0) {
    b2_mp_writer_free(&w);
    return b2_fail(rc, "checksum table of %lld chunks", (long long)n);
  }
  *out = w.buf;
  *olen = w.len;
  return 0;
}

int b2_frame_csum_stage(b2_frame *f) {
  if (!f->csum.crc) return 0;
  f->csum.stamp = b2_stamp_now_ns();
  if (f->csum.has_at) f->csum.stamp = f->csum.stamp_at;
  int rc = b2_frame_csum_fill(f, fill_budget());
  uint8_t *content = NULL, *chunk = NULL;
  size_t len = 0, clen = 0;
  if (!rc) rc = encode(f, &content, &len);
  if (!rc) rc = b2_frame_build_vlchunk(content, len, &chunk, &clen);
  free(content);
  if (!rc) rc = b2_frame_w_vlmeta_put(f, B2_FRAME_CSUM_VLMETA, chunk, clen);
  free(chunk);
  /* No room for one more vlmetalayer: the frame goes without. */
  if (rc == B2_E_LIMIT) rc = 0;
  return rc < 0 ? b2_context(rc, "checksums") : 0;
}

/* The modification time of file fd set to `ns`; failing, the table vouches
 * for less: nothing worse. */
static void set_mtime_ns(int fd, int64_t ns) {
  struct timespec t[2] = {{0, UTIME_OMIT}, ns_time(ns)};
  (void)futimens(fd, t);
}

void b2_frame_csum_seal_fd(const b2_frame *f, int fd) {
  if (f->csum.crc) set_mtime_ns(fd, f->csum.stamp); /* staged by the commit */
}

void b2_frame_csum_seal(b2_frame *f) {
  b2_frame_csum_seal_fd(f, f->fd);
  f->csum.on_disk = f->csum.stamp;
  f->csum.has_on_disk = f->csum.crc != NULL;
}

void b2_frame_csum_hold(const b2_frame *f) {
  if (f->csum.has_on_disk && f->info.layout != B2_LAYOUT_SPARSE)
    set_mtime_ns(f->fd, f->csum.on_disk);
}

/* A sparse frame's chunk files written after the stamp would read as
 * another program's: each gets the stamp as its time. */
static int retime_chunk_files(b2_frame *f) {
  struct timespec t[2] = {{0, UTIME_OMIT}, ns_time(f->csum.stamp)};
  for (int64_t i = 0; i < f->info.nchunks; i++) {
    int64_t e = f->offsets[i];
    if (e < 0) continue;
    char name[32];
    b2_sframe_name(e, name);
    if (utimensat(f->dirfd, name, t, AT_SYMLINK_NOFOLLOW) != 0)
      return b2_fail(b2_from_errno(errno), "chunk file %s: cannot set its time: %s", name,
                     strerror(errno));
  }
  return 0;
}

void b2_frame_csum_keep_time(b2_frame *f) {
  struct stat st;
  if (fstat(f->fd, &st) == 0) {
    f->csum.stamp_at = time_ns(&st.st_mtim);
    f->csum.has_at = 1;
  }
}

/* The header file's time (and a sparse frame's directory's: its commits
 * change it) set to ns. */
static int set_times(b2_frame *f, int64_t ns) {
  struct timespec ts[2] = {{0, UTIME_OMIT}, ns_time(ns)};
  if (futimens(f->fd, ts) != 0 || (f->dirfd >= 0 && futimens(f->dirfd, ts) != 0))
    return b2_fail(b2_from_errno(errno), "cannot set the frame's time: %s", strerror(errno));
  return 0;
}

int b2_frame_csum_restamp(b2_frame *f, const struct timespec *t) {
  int64_t want = time_ns(t);
  int rc = 0;
  /* A commit (what is staged, which writes the table too) or a table on
   * disk (this writer's last commit's, or the one it opened), which says
   * the time it is true at: committed saying t. */
  if (f->w->dirty || (find_vlmeta(f) >= 0 && f->csum.stamp != want)) {
    f->csum.stamp_at = want;
    f->csum.has_at = 1;
    f->w->dirty = 1;
    rc = b2_frame_commit_locked(f);
    f->csum.has_at = 0;
    if (rc == 0 && f->info.layout == B2_LAYOUT_SPARSE) rc = retime_chunk_files(f);
  }
  return rc < 0 ? rc : set_times(f, want);
}

int b2_frame_csum_commit_at(b2_frame *f, const struct timespec *t) {
  int wrote = f->w->dirty;
  f->csum.stamp_at = time_ns(t);
  f->csum.has_at = 1;
  int rc = b2_frame_commit_locked(f);
  f->csum.has_at = 0;
  /* The data is committed: a time that cannot be set (a file of another
   * owner, a writer without CAP_FOWNER) leaves the commit's own. */
  if (rc == 0 && wrote) {
    set_mtime_ns(f->fd, time_ns(t));
    if (f->dirfd >= 0) set_mtime_ns(f->dirfd, time_ns(t));
  }
  return rc;
}

/* ---- reading ------------------------------------------------------------- */

int b2_frame_csum_active(const b2_frame *f, int64_t i) {
  const b2_frame_csum *c = &f->csum;
  return c->crc && i < c->cap && !unknown_bit(c, i) &&
         atomic_load_explicit(&c->verify, memory_order_relaxed);
}

int b2_frame_csum_check(const b2_frame *f, int64_t i, const uint8_t *p, size_t len,
                        const struct stat *before, const struct stat *after) {
  if (!b2_frame_csum_active(f, i)) return 0;
  int rc = b2_frame_csum_match(f, i, p, len);
  if (rc == 0) return 0;
  const b2_frame_csum *c = &f->csum;
  struct stat now;
  int stable;
  if (before && after && time_ns(&before->st_mtim) > c->stamp) /* a chunk file written since */
    stable = b2_same_file(before, after);
  else if (c->foreign) /* the frame file written since */
    stable = fstat(f->fd, &now) == 0 && b2_same_file(&now, &c->seen);
  else
    return rc; /* damaged */
  return stable ? 0
                : b2_fail(B2_E_STALE, "chunk %lld: changed by another program while read",
                          (long long)i);
}

int b2_frame_csum_match(const b2_frame *f, int64_t i, const uint8_t *p,
                        size_t len) {
  const b2_frame_csum *c = &f->csum;
  if (!c->crc || i >= c->cap || unknown_bit(c, i)) return 0;
  uint32_t want = c->crc[i], got = b2_crc32c(0, p, len);
  if (got == want) return 0;
  return b2_fail(B2_E_CHECKSUM, "chunk %lld: checksum mismatch (stored "
                 "0x%08x, computed 0x%08x)", (long long)i, want, got);
}

/* ---- public ------------------------------------------------------------- */

void b2_frame_set_verify(b2_frame *f, int on) {
  if (f) atomic_store_explicit(&f->csum.verify, on != 0, memory_order_relaxed);
}

int b2_frame_checksums(const b2_frame *f, b2_frame_csum_info *out) {
  if (!f || !out) return b2_fail(B2_E_INVAL, "frame checksums: no argument");
  memset(out, 0, sizeof *out);
  b2_frame_rdlock(f);
  const b2_frame_csum *c = &f->csum;
  out->verify = atomic_load_explicit(&c->verify, memory_order_relaxed);
  snprintf(out->why, sizeof out->why, "%s", c->why);
  if (c->crc && !c->foreign) {
    for (int64_t i = 0; i < f->info.nchunks; i++) {
      if (b2_frame_entry(f, i) < 0) continue;
      if (unknown_bit(c, i)) out->unchecked++;
      else out->checked++;
    }
    out->state = out->unchecked ? B2_CSUM_PARTIAL : B2_CSUM_ALL;
  } else {
    out->state = c->why[0] ? B2_CSUM_IGNORED : B2_CSUM_NONE;
    for (int64_t i = 0; i < f->info.nchunks; i++)
      if (b2_frame_entry(f, i) >= 0) out->unchecked++;
  }
  b2_frame_rdunlock(f);
  return 0;
}
