/*
 * stress.c - concurrency stress of a b2fs mount, for tests/t_stress.sh.
 *
 *   stress MNT SECONDS SEED OUTDIR [DAEMON_PID]
 *
 * Writers, readers, a truncator and a renamer work on files under MNT for
 * SECONDS; every read is checked against what the writes that completed
 * allow, and an operation that takes over 10 s is a deadlock.
 *
 * Record files (O_DIRECT, so every read and write is one request to the
 * daemon): "shared", "ren/a" (renamed to "ren/b" and back) and "rd1/g"
 * (its directory renamed rd1 <-> rd2).  Each is cut into REC-byte regions;
 * region r belongs to writer r % NWRITERS, which writes whole records
 * (file, region, writer, seq, checksum, payload: all a function of file,
 * region and seq) with seq going up.  A reader notes the last completed
 * seq of each region before its read and the last started one after it,
 * and must find in each region exactly the record of a seq in between:
 * a torn, stale, future or foreign record fails.  The tail of "shared"
 * (regions NMAIN..NMAIN+NTAIL-1) belongs to the truncator alone: it
 * writes records there, truncates to any byte size in the tail, grows
 * with ftruncate/truncate/fallocate; each of its steps is a numbered
 * state (size, seq and intact length of each tail record) and a reader
 * must find in each tail region, and in the length of its read, the bytes
 * of one of the states from the last completed before its read to the
 * last started after it.  Two things the kernel does are allowed: zeros in
 * bytes that a shrinking truncate in flight cut off, and a region joined
 * at an earlier state's end of file (what an O_DIRECT read gets short of
 * is read on through the page cache).
 *
 * Private files p0..p3 (buffered I/O): writer w writes at random offsets
 * and sizes, truncates, fsyncs, closes and reopens, renames it to pW.tmp
 * and back, all under its write lock, and keeps a shadow copy; readers
 * take the read lock and must read exactly the shadow (through a new open
 * or one kept across renames).  Namespace checks: under the rename lock
 * exactly one of ren/a, ren/b and of rd1, rd2 is shown.  A racer opens
 * ren/c and ren/d for writing, without a lock, while the renamer renames
 * ren/c to ren/d and back: ENOENT is fine, any other error is not.
 *
 * A watchdog checks every operation's start time; one stuck over 10 s
 * prints the operation, dumps the daemon's threads (gdb, when DAEMON_PID
 * is given) and this process's kernel stacks into OUTDIR/hang.txt, kills
 * the daemon (so that the stuck calls return) and exits 3.  At the end the expected content of every file is written to
 * OUTDIR/NAME.expected for a check of SOURCE after unmounting.  Prints
 * "FAIL: ..." lines and exits 1 on a wrong result; else a "done" summary.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define REC 4096
#define NWRITERS 4
#define NREADERS 3
#define NMAIN 40                    /* regions of "shared" written by writers */
#define NTAIL 24                    /* regions of "shared" of the truncator */
#define NREG_OTHER 24               /* regions of ren/a and rd1/g */
#define NRECFILES 3
#define PRIV_MAX (384 * 1024)
#define RING 2048                   /* tail states kept for readers */
#define HANG_NS (10LL * 1000000000LL)
#define MAGIC 0x52533242u           /* "B2SR" */

/* ---- utilities ----------------------------------------------------------- */
static const char *mnt, *outdir;
static int daemon_pid;
static atomic_int stop, failures;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

typedef struct rng { uint64_t s; } rng;
static uint64_t rnd64(rng *r) { return r->s = mix64(r->s); }
static long rnd(rng *r, long n) { return n > 0 ? (long)(rnd64(r) % (uint64_t)n) : 0; }

static void fail(const char *fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (atomic_fetch_add(&failures, 1) < 20) fprintf(stdout, "FAIL: %s\n", line);
  fflush(stdout);
  atomic_store(&stop, 1);
}

static void pathof(char *buf, size_t cap, const char *rel) { snprintf(buf, cap, "%s/%s", mnt, rel); }

/* ---- the watchdog: every thread stamps its operations -------------------- */
#define MAXTHREADS 16
typedef struct slot {
  _Atomic int64_t start;   /* 0: idle */
  const char *_Atomic op;
  char name[24];
} slot;
static slot slots[MAXTHREADS];
static atomic_int nslots;
static _Thread_local slot *my;

static void op_begin(const char *op) {
  atomic_store(&my->op, op);
  atomic_store(&my->start, now_ns());
}
static void op_end(void) { atomic_store(&my->start, 0); }

static void *watchdog(void *arg) {
  (void)arg;
  while (1) {
    struct timespec ts = {0, 200 * 1000000L};
    nanosleep(&ts, NULL);
    int64_t t = now_ns();
    for (int i = 0; i < atomic_load(&nslots); i++) {
      int64_t s = atomic_load(&slots[i].start);
      if (s == 0 || t - s < HANG_NS) continue;
      printf("FAIL: deadlock: %s stuck in %s for %.1f s\n", slots[i].name,
             atomic_load(&slots[i].op), (double)(t - s) / 1e9);
      fflush(stdout);
      char cmd[1024];
      snprintf(cmd, sizeof cmd,
               "{ echo '== stuck: %s in %s'; "
               "for t in /proc/%d/task/*; do echo \"-- client task $t: $(cat $t/comm)\"; cat $t/stack 2>/dev/null; done; "
               "if [ %d -gt 0 ]; then echo '== daemon threads'; "
               "for t in /proc/%d/task/*; do echo \"-- daemon task $t\"; cat $t/stack 2>/dev/null; done; "
               "timeout 120 gdb -batch -p %d -ex 'thread apply all bt' 2>&1; fi; } > '%s/hang.txt' 2>&1",
               slots[i].name, atomic_load(&slots[i].op), (int)getpid(), daemon_pid, daemon_pid,
               daemon_pid, outdir);
      if (system(cmd) != 0) printf("  (diagnosis partly failed: see %s/hang.txt)\n", outdir);
      printf("  thread dumps in %s/hang.txt\n", outdir);
      fflush(stdout);
      /* Stuck calls return (ENOTCONN) only once the daemon is gone. */
      if (daemon_pid > 0) kill(daemon_pid, SIGKILL);
      _exit(3);
    }
    if (atomic_load(&stop) == 2) return NULL;
  }
}

static void register_thread(const char *fmt, int i) {
  int k = atomic_fetch_add(&nslots, 1);
  if (k >= MAXTHREADS) abort();
  my = &slots[k];
  snprintf(my->name, sizeof my->name, fmt, i);
}

/* ---- records --------------------------------------------------------------- */
static size_t region_count(int file) { return file == 0 ? NMAIN + NTAIL : NREG_OTHER; }

/* The record of (file, region, seq): a header and a payload that is partly
 * random and partly repetitive (so that codecs have something to do). */
static void rec_fill(unsigned char *buf, int file, int region, uint64_t seq) {
  uint64_t key = mix64(((uint64_t)file << 56) ^ ((uint64_t)region << 40) ^ seq);
  uint64_t *w = (uint64_t *)buf;
  for (size_t i = 4; i < REC / 8; i++)
    w[i] = (i & 3) == 0 ? mix64(key + i) : (key & 0xffff) * (i >> 3);
  uint64_t sum = key;
  for (size_t i = 4; i < REC / 8; i++) sum = mix64(sum ^ w[i]);
  uint32_t *h = (uint32_t *)buf;
  h[0] = MAGIC;
  h[1] = (uint32_t)file;
  h[2] = (uint32_t)region;
  h[3] = (uint32_t)(file == 0 && region >= NMAIN ? 99 : region % NWRITERS);
  w[2] = seq;
  w[3] = sum;
}

/* Describe a region's bytes for a failure message. */
static void rec_describe(const unsigned char *buf, size_t len, char *out, size_t cap) {
  if (len < 32) {
    snprintf(out, cap, "%zu bytes", len);
    return;
  }
  const uint32_t *h = (const uint32_t *)buf;
  const uint64_t *w = (const uint64_t *)buf;
  int zero = 1;
  for (size_t i = 0; i < len && zero; i++) zero = buf[i] == 0;
  if (zero) {
    snprintf(out, cap, "%zu zero bytes", len);
    return;
  }
  snprintf(out, cap, "%zu bytes, header magic %08x file %u region %u writer %u seq %" PRIu64,
           len, h[0], h[1], h[2], h[3], w[2]);
}

/* Counters of a record file's regions (writers') and the tail states. */
typedef struct recfile {
  const char *_Atomic rel; /* current name under MNT */
  _Atomic uint64_t started[NMAIN + NTAIL], completed[NMAIN + NTAIL];
} recfile;
static recfile rf[NRECFILES];

/* Rename group: the names of ren/{a,b} and rd{1,2}/g change under it. */
static pthread_rwlock_t ren_lock = PTHREAD_RWLOCK_INITIALIZER;
static const char *const ren_names[2] = {"ren/a", "ren/b"};
static const char *const dir_names[2] = {"rd1/g", "rd2/g"};
static int ren_cur, dir_cur; /* under ren_lock */
/* ren/c is renamed to ren/d and back while the racer opens it by either
 * name without any lock: ENOENT is fine, any other error is not. */
static const char *const racy_names[2] = {"ren/c", "ren/d"};
static atomic_int racy_cur;
#define RACY_SIZE 100000

typedef struct tstate {
  int64_t size;
  uint64_t seq[NTAIL];
  uint32_t keep[NTAIL];
} tstate;
static pthread_mutex_t ring_mu = PTHREAD_MUTEX_INITIALIZER;
static tstate ring[RING];
static _Atomic uint64_t tstarted, tcompleted;

static int open_rec(int file, int flags) {
  char p[PATH_MAX];
  pathof(p, sizeof p, atomic_load(&rf[file].rel));
  return open(p, flags | O_DIRECT | O_CLOEXEC);
}

/* Check a writer-owned region read into buf (len bytes) against [lo, hi]. */
static int check_region(int file, int region, const unsigned char *buf, size_t len,
                        uint64_t lo, uint64_t hi, const char *who) {
  _Alignas(64) unsigned char exp[REC];
  char d[160];
  if (len != REC) {
    rec_describe(buf, len, d, sizeof d);
    fail("%s: %s region %d: short read (%s), seq %" PRIu64 "..%" PRIu64 " expected", who,
         atomic_load(&rf[file].rel), region, d, lo, hi);
    return -1;
  }
  uint64_t seq = ((const uint64_t *)buf)[2];
  if (seq >= lo && seq <= hi) {
    rec_fill(exp, file, region, seq);
    if (memcmp(exp, buf, REC) == 0) return 0;
  }
  size_t at = 0;
  if (seq >= lo && seq <= hi)
    while (at < REC && exp[at] == buf[at]) at++;
  rec_describe(buf, len, d, sizeof d);
  fail("%s: %s region %d: got %s%s (first wrong byte %zu); a record with seq %" PRIu64
       "..%" PRIu64 " expected",
       who, atomic_load(&rf[file].rel), region, d,
       seq >= lo && seq <= hi ? " (torn or damaged)" : " (stale or future)", at, lo, hi);
  return -1;
}

/* Expected bytes of tail region t in state s: up to REC, length in *len. */
static void tail_bytes(const tstate *s, int t, unsigned char *out, size_t *len) {
  int64_t start = (int64_t)(NMAIN + t) * REC;
  int64_t l = s->size - start;
  *len = l <= 0 ? 0 : l >= REC ? REC : (size_t)l;
  memset(out, 0, REC);
  if (s->seq[t]) {
    rec_fill(out, 0, NMAIN + t, s->seq[t]);
    memset(out + s->keep[t], 0, REC - s->keep[t]);
  }
}

/* ---- shared file reads ------------------------------------------------------ */
typedef struct rstate {
  rng r;
  int id;
  unsigned char *buf;     /* aligned, (NMAIN + NTAIL) * REC */
  tstate *cand;           /* RING */
  long reads, bytes, unchecked, privreads, nschecks, cutzeros, stitched;
} rstate;

/* Read regions [a, b) of record file `file` through fd and check them. */
static void read_check(rstate *st, int fd, int file, int a, int b, const char *who) {
  uint64_t lo[NMAIN + NTAIL], hi[NMAIN + NTAIL];
  for (int r = a; r < b; r++) lo[r] = atomic_load(&rf[file].completed[r]);
  uint64_t v0 = atomic_load(&tcompleted);
  op_begin("pread (O_DIRECT)");
  ssize_t n = pread(fd, st->buf, (size_t)(b - a) * REC, (off_t)a * REC);
  int err = errno;
  op_end();
  uint64_t v1 = atomic_load(&tstarted);
  for (int r = a; r < b; r++) hi[r] = atomic_load(&rf[file].started[r]);
  if (n < 0) {
    fail("%s: pread %s regions %d..%d: %s", who, atomic_load(&rf[file].rel), a, b - 1, strerror(err));
    return;
  }
  st->reads++;
  st->bytes += n;
  int main_end = file == 0 ? (b < NMAIN ? b : NMAIN) : b;
  for (int r = a; r < main_end; r++) {
    size_t got = n <= (ssize_t)(r - a) * REC ? 0 : (size_t)(n - (ssize_t)(r - a) * REC);
    if (got > REC) got = REC;
    if (check_region(file, r, st->buf + (size_t)(r - a) * REC, got, lo[r], hi[r], who) < 0) return;
  }
  if (file != 0 || b <= NMAIN) return;
  /* The tail: some state from v0 to v1 for each region. */
  pthread_mutex_lock(&ring_mu);
  uint64_t newest = atomic_load(&tstarted);
  int ok = newest - v0 < RING - 4;
  if (ok)
    for (uint64_t v = v0; v <= v1; v++) st->cand[v - v0] = ring[v % RING];
  pthread_mutex_unlock(&ring_mu);
  if (!ok) {
    st->unchecked++;
    return;
  }
  _Alignas(64) unsigned char exp[REC];
  for (int r = a > NMAIN ? a : NMAIN; r < b; r++) {
    int t = r - NMAIN;
    ssize_t off = (ssize_t)(r - a) * REC;
    size_t got = n <= off ? 0 : (size_t)(n - off) > REC ? REC : (size_t)(n - off);
    int match = 0;
    for (uint64_t v = v0; v <= v1 && !match; v++) {
      size_t len;
      tail_bytes(&st->cand[v - v0], t, exp, &len);
      match = len == got && memcmp(exp, st->buf + off, got) == 0;
    }
    /* A read overlapping a truncate that shrinks the file may find zeros
     * in the bytes that truncate cut off (local file systems zero the
     * partial page; the FUSE kernel module zero-fills a page read that
     * comes back short): allowed there only, never after a growth. */
    int64_t cut_lo = INT64_MAX, cut_hi = 0; /* bytes some shrink in flight cut */
    for (uint64_t v = v0; v < v1; v++) {
      const tstate *a0 = &st->cand[v - v0], *a1 = &st->cand[v + 1 - v0];
      if (a1->size < a0->size) {
        if (a1->size < cut_lo) cut_lo = a1->size;
        if (a0->size > cut_hi) cut_hi = a0->size;
      }
    }
    for (uint64_t v = v0; v <= v1 && !match && cut_lo < cut_hi; v++) {
      size_t len;
      tail_bytes(&st->cand[v - v0], t, exp, &len);
      if (len != got) continue;
      match = 1;
      for (size_t i = 0; i < got && match; i++) {
        int64_t pos = (int64_t)r * REC + (int64_t)i;
        match = st->buf[off + (ssize_t)i] == exp[i] ||
                (st->buf[off + (ssize_t)i] == 0 && pos >= cut_lo && pos < cut_hi);
      }
      if (match && memcmp(exp, st->buf + off, got) != 0) st->cutzeros++;
    }
    /* The kernel serves what an O_DIRECT read gets short of from the page
     * cache (generic_file_read_iter): a region may hold one state's bytes
     * up to that state's end of file and a later state's bytes after. */
    for (uint64_t va = v0; va <= v1 && !match; va++) {
      int64_t k = st->cand[va - v0].size - (int64_t)r * REC;
      if (k <= 0 || k >= (int64_t)got) continue;
      size_t len;
      tail_bytes(&st->cand[va - v0], t, exp, &len);
      if (memcmp(exp, st->buf + off, (size_t)k) != 0) continue;
      for (uint64_t vb = va + 1; vb <= v1 && !match; vb++) {
        tail_bytes(&st->cand[vb - v0], t, exp, &len);
        match = len == got && memcmp(exp + k, st->buf + off + k, got - (size_t)k) == 0;
      }
      if (match) st->stitched++;
    }
    if (!match) {
      char d[160], e[400];
      size_t el = 0;
      rec_describe(st->buf + off, got, d, sizeof d);
      e[0] = 0;
      for (uint64_t v = v0; v <= v1 && v < v0 + 6; v++) {
        const tstate *s = &st->cand[v - v0];
        el += (size_t)snprintf(e + el, sizeof e - el, " [v%" PRIu64 ": size %" PRId64 " seq %" PRIu64
                               " keep %u]", v, s->size, s->seq[t], s->keep[t]);
        if (el >= sizeof e) break;
      }
      /* A known way to fail: a write growing the file made its new size
       * visible before its data (zeros where it writes). */
      int zeros = got > 0, cut = 0;
      for (size_t i = 0; i < got && zeros; i++) zeros = st->buf[off + (ssize_t)i] == 0;
      for (uint64_t v = v0; v <= v1; v++) cut |= st->cand[v - v0].size <= (int64_t)r * REC;
      fail("%s: shared tail region %d (read of regions %d..%d returned %zd bytes): got %s; "
           "states%s%s%s", who, r, a, b - 1, n, d, e, v1 - v0 >= 6 ? " ..." : "",
           zeros && cut ? " - zeros that no state holds where a write in flight grew the file: "
                          "the new size was seen before the data" : "");
      return;
    }
  }
}

/* ---- private files --------------------------------------------------------- */
typedef struct priv {
  pthread_rwlock_t lock;
  char name[32];          /* current name under MNT (write lock) */
  unsigned char *shadow;
  size_t size;
  int fd;                 /* the writer's descriptor */
} priv;
static priv pv[NWRITERS];

static void priv_path(int w, char *p, size_t cap) { pathof(p, cap, pv[w].name); }

/* Compare [off, off+n) of private file w read through fd with the shadow
 * (read lock held). */
static void priv_check(int w, int fd, rng *r, unsigned char *buf, const char *who) {
  priv *p = &pv[w];
  size_t off = (size_t)rnd(r, (long)p->size + 4096);
  size_t n = 1 + (size_t)rnd(r, 200000);
  if (rnd(r, 4) == 0) off &= ~(size_t)65535;
  op_begin("pread (private)");
  ssize_t got = pread(fd, buf, n, (off_t)off);
  int err = errno;
  op_end();
  size_t want = off >= p->size ? 0 : p->size - off < n ? p->size - off : n;
  if (got < 0) {
    fail("%s: pread %s [%zu, +%zu): %s", who, p->name, off, n, strerror(err));
    return;
  }
  if ((size_t)got != want) {
    fail("%s: pread %s [%zu, +%zu) gave %zd bytes, %zu expected (size %zu)", who, p->name, off, n,
         got, want, p->size);
    return;
  }
  if (memcmp(buf, p->shadow + off, want) != 0) {
    size_t at = 0;
    while (buf[at] == p->shadow[off + at]) at++;
    fail("%s: %s differs from its shadow at offset %zu (got %02x, expected %02x; read [%zu, +%zu), "
         "size %zu)", who, p->name, off + at, buf[at], p->shadow[off + at], off, n, p->size);
    return;
  }
  struct stat sb;
  op_begin("fstat (private)");
  int rc = fstat(fd, &sb);
  op_end();
  if (rc < 0 || (size_t)sb.st_size != p->size)
    fail("%s: fstat %s: size %lld, %zu expected", who, p->name, rc < 0 ? -1LL : (long long)sb.st_size,
         p->size);
}

/* ---- writers --------------------------------------------------------------- */
typedef struct wstate {
  rng r;
  int id;
  int fds[NRECFILES];
  unsigned char *rec;      /* aligned REC */
  unsigned char *buf;      /* private data */
  long recs, privops, fsyncs, reopens, renames, truncs;
} wstate;

static void write_record(wstate *st, int file, int region, int fd, const char *who) {
  uint64_t seq = atomic_load(&rf[file].started[region]) + 1;
  rec_fill(st->rec, file, region, seq);
  atomic_store(&rf[file].started[region], seq);
  op_begin("pwrite (O_DIRECT record)");
  ssize_t n = pwrite(fd, st->rec, REC, (off_t)region * REC);
  int err = errno;
  op_end();
  if (n != REC) {
    fail("%s: pwrite %s region %d seq %" PRIu64 ": %s", who, atomic_load(&rf[file].rel), region, seq,
         n < 0 ? strerror(err) : "short write");
    return;
  }
  atomic_store(&rf[file].completed[region], seq);
  st->recs++;
}

static void reopen_rec(int *fd, int file, int flags, const char *who) {
  pthread_rwlock_rdlock(&ren_lock);
  op_begin("close+open (record file)");
  if (*fd >= 0) close(*fd);
  *fd = open_rec(file, flags);
  int err = errno;
  op_end();
  pthread_rwlock_unlock(&ren_lock);
  if (*fd < 0) fail("%s: open %s: %s", who, atomic_load(&rf[file].rel), strerror(err));
}

/* One operation of writer st on its private file (write lock held). */
static void priv_op(wstate *st) {
  int w = st->id;
  priv *p = &pv[w];
  char path[PATH_MAX], who[32];
  snprintf(who, sizeof who, "writer %d", w);
  long k = rnd(&st->r, 100);
  if (k < 55) { /* write at a random place, maybe past the end */
    size_t off = (size_t)rnd(&st->r, PRIV_MAX - 1);
    if (rnd(&st->r, 3) == 0) { /* near a chunk edge */
      size_t edge = off & ~(size_t)65535, back = (size_t)rnd(&st->r, 8);
      off = edge >= back ? edge - back : edge;
    }
    size_t n = 1 + (size_t)rnd(&st->r, 100000);
    if (off + n > PRIV_MAX) n = PRIV_MAX - off;
    uint64_t key = rnd64(&st->r);
    for (size_t i = 0; i < n; i++)
      st->buf[i] = (i & 64) ? (unsigned char)(key >> ((i & 7) * 8)) : (unsigned char)mix64(key + i / 8);
    op_begin("pwrite (private)");
    ssize_t got = pwrite(p->fd, st->buf, n, (off_t)off);
    int err = errno;
    op_end();
    if (got != (ssize_t)n) {
      fail("%s: pwrite %s [%zu, +%zu): %s", who, p->name, off, n, got < 0 ? strerror(err) : "short");
      return;
    }
    if (off > p->size) memset(p->shadow + p->size, 0, off - p->size);
    memcpy(p->shadow + off, st->buf, n);
    if (off + n > p->size) p->size = off + n;
  } else if (k < 70) { /* truncate down or up, through the descriptor or the name */
    size_t ns = (size_t)rnd(&st->r, PRIV_MAX);
    if (rnd(&st->r, 2)) ns &= ~(size_t)4095;
    int byname = rnd(&st->r, 3) == 0;
    priv_path(w, path, sizeof path);
    op_begin(byname ? "truncate (private)" : "ftruncate (private)");
    int rc = byname ? truncate(path, (off_t)ns) : ftruncate(p->fd, (off_t)ns);
    int err = errno;
    op_end();
    if (rc < 0) {
      fail("%s: truncate %s to %zu: %s", who, p->name, ns, strerror(err));
      return;
    }
    if (ns > p->size) memset(p->shadow + p->size, 0, ns - p->size);
    p->size = ns;
    st->truncs++;
  } else if (k < 78) {
    op_begin(k & 1 ? "fsync (private)" : "fdatasync (private)");
    int rc = k & 1 ? fsync(p->fd) : fdatasync(p->fd);
    int err = errno;
    op_end();
    if (rc < 0) fail("%s: fsync %s: %s", who, p->name, strerror(err));
    st->fsyncs++;
  } else if (k < 86) { /* close (commit, maybe compaction) and reopen */
    op_begin("close (private)");
    int rc = close(p->fd);
    int err = errno;
    op_end();
    if (rc < 0) fail("%s: close %s: %s", who, p->name, strerror(err));
    priv_path(w, path, sizeof path);
    op_begin("open (private)");
    p->fd = open(path, O_RDWR | O_CLOEXEC);
    err = errno;
    op_end();
    if (p->fd < 0) fail("%s: reopen %s: %s", who, p->name, strerror(err));
    st->reopens++;
  } else if (k < 94) { /* rename to pW.tmp or back */
    char to[32], top[PATH_MAX];
    snprintf(to, sizeof to, strchr(p->name, '.') ? "p%d" : "p%d.tmp", w);
    priv_path(w, path, sizeof path);
    pathof(top, sizeof top, to);
    op_begin("rename (private)");
    int rc = rename(path, top);
    int err = errno;
    op_end();
    if (rc < 0) {
      fail("%s: rename %s -> %s: %s", who, p->name, to, strerror(err));
      return;
    }
    snprintf(p->name, sizeof p->name, "%s", to);
    st->renames++;
  } else { /* read back through the writing descriptor */
    priv_check(w, p->fd, &st->r, st->buf, who);
  }
}

static void *writer(void *arg) {
  wstate *st = arg;
  char who[32];
  snprintf(who, sizeof who, "writer %d", st->id);
  register_thread("writer %d", st->id);
  for (int f = 0; f < NRECFILES; f++) reopen_rec(&st->fds[f], f, O_RDWR, who);
  while (!atomic_load(&stop)) {
    long k = rnd(&st->r, 100);
    if (k < 60) {
      int f = k < 36 ? 0 : k < 48 ? 1 : 2;
      int nreg = f == 0 ? NMAIN : NREG_OTHER;
      int region = (int)rnd(&st->r, nreg / NWRITERS) * NWRITERS + st->id;
      if (st->fds[f] >= 0) write_record(st, f, region, st->fds[f], who);
    } else if (k < 82) {
      pthread_rwlock_wrlock(&pv[st->id].lock);
      priv_op(st);
      pthread_rwlock_unlock(&pv[st->id].lock);
      st->privops++;
    } else if (k < 88) {
      int f = (int)rnd(&st->r, NRECFILES);
      op_begin(k & 1 ? "fsync (record file)" : "fdatasync (record file)");
      int rc = k & 1 ? fsync(st->fds[f]) : fdatasync(st->fds[f]);
      int err = errno;
      op_end();
      if (rc < 0) fail("%s: fsync %s: %s", who, atomic_load(&rf[f].rel), strerror(err));
      st->fsyncs++;
    } else if (k < 92) {
      int f = (int)rnd(&st->r, NRECFILES);
      reopen_rec(&st->fds[f], f, O_RDWR, who);
      st->reopens++;
    } else { /* read back one of its own regions: exactly its last write */
      int f = (int)rnd(&st->r, NRECFILES);
      int nreg = f == 0 ? NMAIN : NREG_OTHER;
      int region = (int)rnd(&st->r, nreg / NWRITERS) * NWRITERS + st->id;
      uint64_t seq = atomic_load(&rf[f].completed[region]);
      op_begin("pread (own record)");
      ssize_t n = pread(st->fds[f], st->rec, REC, (off_t)region * REC);
      int err = errno;
      op_end();
      if (n < 0)
        fail("%s: pread own %s region %d: %s", who, atomic_load(&rf[f].rel), region, strerror(err));
      else
        check_region(f, region, st->rec, (size_t)n, seq, seq, who);
    }
  }
  for (int f = 0; f < NRECFILES; f++) {
    op_begin("close (record file)");
    if (close(st->fds[f]) < 0) fail("%s: close %s: %s", who, atomic_load(&rf[f].rel), strerror(errno));
    op_end();
  }
  return NULL;
}

/* ---- readers --------------------------------------------------------------- */
static void *reader(void *arg) {
  rstate *st = arg;
  char who[32];
  snprintf(who, sizeof who, "reader %d", st->id);
  register_thread("reader %d", st->id);
  int fds[NRECFILES], pfds[NWRITERS];
  for (int f = 0; f < NRECFILES; f++) {
    fds[f] = -1;
    reopen_rec(&fds[f], f, O_RDONLY, who);
  }
  for (int w = 0; w < NWRITERS; w++) { /* kept open across renames and rewrites */
    char p[PATH_MAX];
    pthread_rwlock_rdlock(&pv[w].lock);
    priv_path(w, p, sizeof p);
    pfds[w] = open(p, O_RDONLY | O_CLOEXEC);
    if (pfds[w] < 0) fail("%s: open %s: %s", who, pv[w].name, strerror(errno));
    pthread_rwlock_unlock(&pv[w].lock);
  }
  while (!atomic_load(&stop)) {
    long k = rnd(&st->r, 100);
    if (k < 45) {
      int a = (int)rnd(&st->r, NMAIN + NTAIL);
      int b = a + 1 + (int)rnd(&st->r, 12);
      if (b > NMAIN + NTAIL) b = NMAIN + NTAIL;
      read_check(st, fds[0], 0, a, b, who);
    } else if (k < 65) {
      int f = 1 + (int)rnd(&st->r, 2);
      int a = (int)rnd(&st->r, NREG_OTHER);
      int b = a + 1 + (int)rnd(&st->r, 8);
      if (b > NREG_OTHER) b = NREG_OTHER;
      read_check(st, fds[f], f, a, b, who);
    } else if (k < 85) {
      int w = (int)rnd(&st->r, NWRITERS);
      pthread_rwlock_rdlock(&pv[w].lock);
      if (k & 1) {
        priv_check(w, pfds[w], &st->r, st->buf, who);
      } else {
        char p[PATH_MAX];
        priv_path(w, p, sizeof p);
        op_begin("open (private, read)");
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        int err = errno;
        op_end();
        if (fd < 0) {
          fail("%s: open %s: %s", who, pv[w].name, strerror(err));
        } else {
          priv_check(w, fd, &st->r, st->buf, who);
          op_begin("close (private, read)");
          close(fd);
          op_end();
        }
      }
      pthread_rwlock_unlock(&pv[w].lock);
      st->privreads++;
    } else if (k < 95) { /* names: exactly one of each pair is shown */
      pthread_rwlock_rdlock(&ren_lock);
      const char *pairs[2][2] = {{"ren/a", "ren/b"}, {"rd1", "rd2"}};
      int want[2] = {ren_cur, dir_cur};
      for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
          char p[PATH_MAX];
          struct stat sb;
          pathof(p, sizeof p, pairs[i][j]);
          op_begin("stat (renamed names)");
          int rc = stat(p, &sb);
          int err = errno;
          op_end();
          if ((rc == 0) != (j == want[i]) || (rc < 0 && err != ENOENT))
            fail("%s: stat %s: %s while %s is current", who, pairs[i][j], rc == 0 ? "exists" : strerror(err),
                 pairs[i][want[i]]);
        }
      char p[PATH_MAX];
      pathof(p, sizeof p, "ren");
      op_begin("readdir ren");
      DIR *d = opendir(p);
      int seen = 0, other = 0;
      struct dirent *e;
      while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (!strcmp(e->d_name, "c") || !strcmp(e->d_name, "d")) continue; /* the racer's */
        if (!strcmp(e->d_name, ren_names[ren_cur] + 4)) seen++;
        else other++;
      }
      if (d) closedir(d);
      op_end();
      if (seen != 1 || other) fail("%s: ren/ lists %d x %s and %d other entries", who,
                                   seen, ren_names[ren_cur] + 4, other);
      pthread_rwlock_unlock(&ren_lock);
      st->nschecks++;
    } else {
      int f = (int)rnd(&st->r, NRECFILES);
      reopen_rec(&fds[f], f, O_RDONLY, who);
    }
  }
  for (int f = 0; f < NRECFILES; f++) close(fds[f]);
  for (int w = 0; w < NWRITERS; w++) close(pfds[w]);
  return NULL;
}

/* ---- the truncator: the tail of "shared" ---------------------------------- */
static tstate tcur;

static void *truncator(void *arg) {
  rng *r = arg;
  register_thread("truncator", 0);
  const char *who = "truncator";
  int fd = -1;
  reopen_rec(&fd, 0, O_RDWR, who);
  _Alignas(64) static unsigned char rec[REC];
  uint64_t tseq = 0;
  long ops = 0;
  while (!atomic_load(&stop) && fd >= 0) {
    tstate ns = tcur;
    long k = rnd(r, 100);
    int t = (int)rnd(r, NTAIL);
    int64_t base = (int64_t)NMAIN * REC, size = 0;
    const char *op;
    if (k < 45) {
      op = "pwrite (tail record)";
      ns.seq[t] = ++tseq;
      ns.keep[t] = REC;
      int64_t end = base + (int64_t)(t + 1) * REC;
      if (end > ns.size) ns.size = end;
    } else {
      size = base + rnd(r, (long)NTAIL * REC + 1);
      if (k < 60) size = base + (size - base) / REC * REC;
      op = k < 75 ? "ftruncate (tail)" : k < 88 ? "truncate by name (tail)" : "fallocate (tail)";
      if (k >= 88 && size < ns.size) size = ns.size + rnd(r, REC * 3);
      if (size > base + (int64_t)NTAIL * REC) size = base + (int64_t)NTAIL * REC;
      for (int i = 0; i < NTAIL; i++) {
        int64_t start = base + (int64_t)i * REC;
        if (start >= size) {
          ns.seq[i] = 0;
          ns.keep[i] = 0;
        } else if ((int64_t)ns.keep[i] > size - start) {
          ns.keep[i] = (uint32_t)(size - start);
        }
      }
      if (k >= 88 && size <= ns.size) continue; /* fallocate never shrinks */
      ns.size = size;
    }
    /* Publish the state about to start, do it, then mark it completed. */
    uint64_t v = atomic_load(&tstarted) + 1;
    pthread_mutex_lock(&ring_mu);
    ring[v % RING] = ns;
    atomic_store(&tstarted, v);
    pthread_mutex_unlock(&ring_mu);
    int rc = 0, err = 0;
    op_begin(op);
    if (k < 45) {
      rec_fill(rec, 0, NMAIN + t, ns.seq[t]);
      rc = pwrite(fd, rec, REC, (off_t)(base + (int64_t)t * REC)) == REC ? 0 : -1;
    } else if (k < 75) {
      rc = ftruncate(fd, (off_t)size);
    } else if (k < 88) {
      char p[PATH_MAX];
      pathof(p, sizeof p, "shared");
      rc = truncate(p, (off_t)size);
    } else {
      rc = fallocate(fd, 0, 0, (off_t)size);
    }
    err = errno;
    op_end();
    if (rc < 0) {
      fail("%s: %s to size %" PRId64 ": %s", who, op, ns.size, strerror(err));
      break;
    }
    tcur = ns;
    atomic_store(&tcompleted, v);
    ops++;
    if (rnd(r, 20) == 0) {
      op_begin("fsync (tail)");
      if (fsync(fd) < 0) fail("%s: fsync: %s", who, strerror(errno));
      op_end();
    }
    struct timespec ts = {0, (long)rnd(r, 3000000)};
    nanosleep(&ts, NULL);
  }
  if (fd >= 0) close(fd);
  printf("truncator: %ld steps\n", ops);
  return NULL;
}

/* ---- the racer: opens a file being renamed ------------------------------------ */
static void *racer(void *arg) {
  (void)arg;
  register_thread("racer", 0);
  long opens = 0;
  while (!atomic_load(&stop)) {
    for (int i = 0; i < 2; i++) {
      char p[PATH_MAX];
      pathof(p, sizeof p, racy_names[i]);
      op_begin(i & 1 ? "open O_RDWR ren/d (racing renames)" : "open O_RDWR ren/c (racing renames)");
      int fd = open(p, (opens & 1 ? O_RDWR : O_WRONLY) | O_CLOEXEC);
      int err = errno;
      op_end();
      if (fd < 0) {
        if (err != ENOENT) fail("racer: open %s while it is renamed: %s", racy_names[i], strerror(err));
        continue;
      }
      opens++;
      struct stat sb;
      op_begin("fstat+close (racing renames)");
      if (fstat(fd, &sb) < 0 || sb.st_size != RACY_SIZE)
        fail("racer: %s has size %lld, %d expected", racy_names[i], (long long)sb.st_size, RACY_SIZE);
      if (close(fd) < 0) fail("racer: close %s: %s", racy_names[i], strerror(errno));
      op_end();
    }
  }
  printf("racer: %ld opens of a file being renamed\n", opens);
  return NULL;
}

/* ---- the renamer ------------------------------------------------------------ */
static void *renamer(void *arg) {
  rng *r = arg;
  register_thread("renamer", 0);
  long n = 0;
  while (!atomic_load(&stop)) {
    struct timespec ts = {0, 1000000L + (long)rnd(r, 8000000)};
    nanosleep(&ts, NULL);
    pthread_rwlock_wrlock(&ren_lock);
    long k = rnd(r, 4);
    int dir = k == 0, racy = k == 1;
    char from[PATH_MAX], to[PATH_MAX];
    if (dir) {
      pathof(from, sizeof from, dir_cur ? "rd2" : "rd1");
      pathof(to, sizeof to, dir_cur ? "rd1" : "rd2");
    } else if (racy) {
      int cur = atomic_load(&racy_cur);
      pathof(from, sizeof from, racy_names[cur]);
      pathof(to, sizeof to, racy_names[!cur]);
    } else {
      pathof(from, sizeof from, ren_names[ren_cur]);
      pathof(to, sizeof to, ren_names[!ren_cur]);
    }
    op_begin(dir ? "rename rd1 <-> rd2" : racy ? "rename ren/c <-> ren/d" : "rename ren/a <-> ren/b");
    int rc = rename(from, to);
    int err = errno;
    op_end();
    if (rc < 0) {
      fail("renamer: rename %s -> %s: %s", from, to, strerror(err));
    } else if (dir) {
      dir_cur = !dir_cur;
      atomic_store(&rf[2].rel, dir_names[dir_cur]);
    } else if (racy) {
      atomic_store(&racy_cur, !atomic_load(&racy_cur));
    } else {
      ren_cur = !ren_cur;
      atomic_store(&rf[1].rel, ren_names[ren_cur]);
    }
    pthread_rwlock_unlock(&ren_lock);
    n++;
  }
  printf("renamer: %ld renames\n", n);
  return NULL;
}

/* ---- setup and the end --------------------------------------------------- */
static void *xalign(size_t n) {
  void *p = NULL;
  if (posix_memalign(&p, 4096, n) != 0) {
    fprintf(stderr, "out of memory\n");
    exit(2);
  }
  memset(p, 0, n);
  return p;
}

static const unsigned char *racy_content(void) {
  static unsigned char c[RACY_SIZE];
  for (size_t i = 0; i < RACY_SIZE; i++) c[i] = (unsigned char)(i * 7 + (i >> 9));
  return c;
}

static int setup(unsigned char *rec) {
  char p[PATH_MAX];
  const char *dirs[] = {"ren", "rd1"};
  for (int i = 0; i < 2; i++) {
    pathof(p, sizeof p, dirs[i]);
    if (mkdir(p, 0755) < 0) {
      fprintf(stderr, "mkdir %s: %s\n", p, strerror(errno));
      return -1;
    }
  }
  const char *names[NRECFILES] = {"shared", "ren/a", "rd1/g"};
  for (int f = 0; f < NRECFILES; f++) {
    rf[f].rel = names[f];
    pathof(p, sizeof p, names[f]);
    int fd = open(p, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_DIRECT, 0644);
    if (fd < 0) {
      fprintf(stderr, "create %s: %s\n", p, strerror(errno));
      return -1;
    }
    int nreg = f == 0 ? NMAIN : NREG_OTHER;
    for (int r = 0; r < nreg; r++) {
      rec_fill(rec, f, r, 0);
      if (pwrite(fd, rec, REC, (off_t)r * REC) != REC) {
        fprintf(stderr, "prefill %s: %s\n", p, strerror(errno));
        return -1;
      }
    }
    if (close(fd) < 0) {
      fprintf(stderr, "close %s: %s\n", p, strerror(errno));
      return -1;
    }
  }
  pathof(p, sizeof p, racy_names[0]);
  int cfd = open(p, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (cfd < 0 || pwrite(cfd, racy_content(), RACY_SIZE, 0) != RACY_SIZE || close(cfd) < 0) {
    fprintf(stderr, "create %s: %s\n", p, strerror(errno));
    return -1;
  }
  tcur.size = (int64_t)NMAIN * REC;
  ring[0] = tcur;
  for (int w = 0; w < NWRITERS; w++) {
    pthread_rwlock_init(&pv[w].lock, NULL);
    snprintf(pv[w].name, sizeof pv[w].name, "p%d", w);
    pv[w].shadow = xalign(PRIV_MAX + 4096);
    pathof(p, sizeof p, pv[w].name);
    pv[w].fd = open(p, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (pv[w].fd < 0) {
      fprintf(stderr, "create %s: %s\n", p, strerror(errno));
      return -1;
    }
  }
  return 0;
}

/* Expected final content of each file, for the check of SOURCE. */
static int write_expected(const char *name, const unsigned char *data, size_t n) {
  char p[PATH_MAX];
  snprintf(p, sizeof p, "%s/%s.expected", outdir, name);
  FILE *f = fopen(p, "wb");
  if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) {
    fprintf(stderr, "cannot write %s\n", p);
    return -1;
  }
  return 0;
}

/* After every worker stopped: each file read whole matches the model. */
static void final_check(unsigned char *buf) {
  rstate st;
  memset(&st, 0, sizeof st);
  st.buf = buf;
  st.cand = calloc(RING, sizeof *st.cand);
  const char *who = "final check";
  for (int f = 0; f < NRECFILES; f++) {
    int fd = -1;
    reopen_rec(&fd, f, O_RDONLY, who);
    if (fd < 0) continue;
    int n = (int)region_count(f);
    read_check(&st, fd, f, 0, n, who);
    struct stat sb;
    int64_t want = f == 0 ? tcur.size : (int64_t)n * REC;
    if (fstat(fd, &sb) < 0 || sb.st_size != want)
      fail("final check: %s has size %lld, %" PRId64 " expected", atomic_load(&rf[f].rel),
           (long long)sb.st_size, want);
    close(fd);
    /* The model's content: last records (and the tail's final state). */
    size_t total = f == 0 ? (size_t)tcur.size : (size_t)n * REC;
    unsigned char *img = calloc(1, (size_t)n * REC);
    for (int r = 0; r < (f == 0 ? NMAIN : n); r++)
      rec_fill(img + (size_t)r * REC, f, r, atomic_load(&rf[f].completed[r]));
    if (f == 0)
      for (int t = 0; t < NTAIL; t++) {
        size_t len;
        _Alignas(64) unsigned char e[REC];
        tail_bytes(&tcur, t, e, &len);
        memcpy(img + (size_t)(NMAIN + t) * REC, e, len);
      }
    char name[16];
    snprintf(name, sizeof name, "rec%d", f);
    write_expected(name, img, total);
    free(img);
  }
  rng r = {42};
  for (int w = 0; w < NWRITERS; w++) {
    for (int i = 0; i < 8; i++) priv_check(w, pv[w].fd, &r, buf, who);
    close(pv[w].fd);
    char name[16];
    snprintf(name, sizeof name, "priv%d", w);
    write_expected(name, pv[w].shadow, pv[w].size);
  }
  write_expected("racy", racy_content(), RACY_SIZE);
  /* Where the files ended up (for the shell). */
  char p[PATH_MAX];
  snprintf(p, sizeof p, "%s/names", outdir);
  FILE *nf = fopen(p, "w");
  if (nf) {
    for (int f = 0; f < NRECFILES; f++) fprintf(nf, "rec%d %s\n", f, atomic_load(&rf[f].rel));
    for (int w = 0; w < NWRITERS; w++) fprintf(nf, "priv%d %s\n", w, pv[w].name);
    fprintf(nf, "racy %s\n", racy_names[atomic_load(&racy_cur)]);
    fclose(nf);
  }
  free(st.cand);
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: stress MNT SECONDS SEED OUTDIR [DAEMON_PID]\n");
    return 2;
  }
  mnt = argv[1];
  double seconds = atof(argv[2]);
  uint64_t seed = strtoull(argv[3], NULL, 10);
  outdir = argv[4];
  daemon_pid = argc > 5 ? atoi(argv[5]) : 0;
  setvbuf(stdout, NULL, _IOLBF, 0);
  printf("seed %" PRIu64 ", %.0f s\n", seed, seconds);

  register_thread("main", 0);
  pthread_t wd;
  pthread_create(&wd, NULL, watchdog, NULL);
  unsigned char *big = xalign((NMAIN + NTAIL) * REC + 256 * 1024);
  op_begin("setup");
  if (setup(big) < 0) return 2;
  op_end();

  pthread_t wt[NWRITERS], rt[NREADERS], tt, nt, ct;
  wstate ws[NWRITERS];
  rstate rs[NREADERS];
  rng trng = {mix64(seed ^ 0x7777)}, nrng = {mix64(seed ^ 0x8888)};
  for (int i = 0; i < NWRITERS; i++) {
    memset(&ws[i], 0, sizeof ws[i]);
    ws[i].r.s = mix64(seed + 100 + (uint64_t)i);
    ws[i].id = i;
    for (int f = 0; f < NRECFILES; f++) ws[i].fds[f] = -1;
    ws[i].rec = xalign(REC);
    ws[i].buf = xalign(PRIV_MAX + 4096);
    pthread_create(&wt[i], NULL, writer, &ws[i]);
  }
  for (int i = 0; i < NREADERS; i++) {
    memset(&rs[i], 0, sizeof rs[i]);
    rs[i].r.s = mix64(seed + 200 + (uint64_t)i);
    rs[i].id = i;
    rs[i].buf = xalign((NMAIN + NTAIL) * REC + 256 * 1024);
    rs[i].cand = calloc(RING, sizeof *rs[i].cand);
    pthread_create(&rt[i], NULL, reader, &rs[i]);
  }
  pthread_create(&tt, NULL, truncator, &trng);
  pthread_create(&nt, NULL, renamer, &nrng);
  pthread_create(&ct, NULL, racer, NULL);

  int64_t end = now_ns() + (int64_t)(seconds * 1e9);
  while (!atomic_load(&stop) && now_ns() < end) {
    struct timespec ts = {0, 100 * 1000000L};
    nanosleep(&ts, NULL);
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < NWRITERS; i++) pthread_join(wt[i], NULL);
  for (int i = 0; i < NREADERS; i++) pthread_join(rt[i], NULL);
  pthread_join(tt, NULL);
  pthread_join(nt, NULL);
  pthread_join(ct, NULL);

  long recs = 0, privops = 0, fsyncs = 0, reopens = 0, renames = 0, truncs = 0;
  for (int i = 0; i < NWRITERS; i++) {
    recs += ws[i].recs, privops += ws[i].privops, fsyncs += ws[i].fsyncs;
    reopens += ws[i].reopens, renames += ws[i].renames, truncs += ws[i].truncs;
  }
  long reads = 0, bytes = 0, unchecked = 0, privreads = 0, nschecks = 0, cutzeros = 0, stitched = 0;
  for (int i = 0; i < NREADERS; i++) {
    reads += rs[i].reads, bytes += rs[i].bytes, unchecked += rs[i].unchecked, cutzeros += rs[i].cutzeros;
    stitched += rs[i].stitched;
    privreads += rs[i].privreads, nschecks += rs[i].nschecks;
  }
  if (atomic_load(&failures) == 0) {
    op_begin("final check");
    final_check(big);
    op_end();
  }
  atomic_store(&stop, 2);
  pthread_join(wd, NULL);
  int nf = atomic_load(&failures);
  printf("writers: %ld records, %ld private ops (%ld truncates, %ld renames), %ld fsyncs, %ld reopens\n",
         recs, privops, truncs, renames, fsyncs, reopens);
  printf("readers: %ld checked record reads (%ld MiB), %ld private reads, %ld name checks, "
         "%ld tail reads unchecked (ring overrun); tail regions with zeros cut by a truncate in flight %ld, "
         "joined at an old end of file %ld\n",
         reads, bytes >> 20, privreads, nschecks, unchecked, cutzeros, stitched);
  if (nf) {
    printf("%d failures\n", nf);
    return 1;
  }
  printf("done\n");
  return 0;
}
