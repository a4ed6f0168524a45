/*
 * crash_writer.c - the writer and the oracle of tests/t_crash.sh (libc only,
 * built by the script with `cc`).
 *
 *   crash_writer run DIR LOGDIR SEED MAXOPS
 *       DIR is a directory under a b2fs mount.  First the remount check:
 *       DIR must list exactly the files LOGDIR/state names, each with the
 *       content LOGDIR/base<slot> (what the checker accepted after the
 *       previous crash).  Then MAXOPS (-1: until killed) random operations
 *       on NSLOT files: writes (in place, appends, past the end), truncates,
 *       fsync, fdatasync, close + reopen, times set (futimens: on a frame
 *       open for writing, its data and the time go in one commit),
 *       reads checked against the model,
 *       renames to a new name, renames over another slot's file (left open),
 *       unlinks of open files, writes to those orphans, creations.  Every
 *       operation is logged to LOGDIR/log before it starts ("B ...") and
 *       when it returns ("E n rc errno"), with plain write(2)s: the log
 *       lives outside the mount and survives the kill.  The first error
 *       ends the run (exit 4): after the daemon is killed every call fails.
 *       Data of a write is a function of a logged seed, so the checker
 *       regenerates it.  No write exceeds 124 KiB (at most 32 pages even
 *       when unaligned), so the kernel sends each write as one request,
 *       except that a write starting inside a page not in its page cache
 *       goes as two: that page's part, then the rest (fuse_fill_write_pages
 *       stops at a page it could not mark up to date).  A commit may fall
 *       between the two (the idle flusher), so the state "before the write
 *       plus its first page's part" is a state too (split_state).
 *
 *   crash_writer check SRCDIR LOGDIR B2F CHUNKSIZE
 *       SRCDIR is the same directory in SOURCE, after the daemon was killed
 *       and unmounted.  Replays the log and checks (one "ok"/"FAIL" line
 *       per finding on stdout, exit 1 on any failure):
 *       - names: the frames in SRCDIR are exactly the names the slots have
 *         after every completed operation, or (when the operation under way
 *         at the kill was a rename, unlink or creation) after it as well;
 *         no other visible entry; hidden engine temporaries are counted.
 *         A frame a rename had set aside (a restore marker beside it) is
 *         first put back, as the next daemon does (restore_set_aside).
 *       - content (read with `B2F cat`): let S_a ... S_z be the states of a
 *         file's content from the last acknowledged commit (a completed
 *         fsync, fdatasync or close, or its creation, or the start of the
 *         trial) to the state after the operation under way at the kill.
 *         The frame must equal one S_k as a whole (size and every byte).
 *         Commits are atomic and each write reaches the daemon as one
 *         request, so nothing weaker is correct; still, a failure is
 *         classified: "chunk c mixed" when some CHUNKSIZE region equals
 *         that region in no S_k (a torn chunk), "torn across chunks" when
 *         each region matches some S_k but no single S_k matches all of
 *         them, "acknowledged data lost" when it equals a state older
 *         than S_a.
 *       On success it writes LOGDIR/state.new and LOGDIR/base<slot>.new:
 *       the next trial's starting point.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NSLOT 3
#define MAXSZ ((int64_t)2 << 20)   /* files stay below 2 MiB */
#define MAXW ((int64_t)124 << 10)  /* one FUSE request per write (but split_state) */
#define KPAGE 4096                  /* the kernel's page: where it may split a write */
#define MAXLOG 100000              /* operations per trial */

/* ---- common ------------------------------------------------------------- */

static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "crash_writer: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  exit(2);
}

typedef struct buf {
  uint8_t *b;
  int64_t n, cap;
} buf;

static void buf_resize(buf *m, int64_t n) {
  if (n > m->cap) {
    int64_t c = m->cap ? m->cap : 65536;
    while (c < n) c *= 2;
    m->b = realloc(m->b, (size_t)c);
    if (!m->b) die("out of memory");
    m->cap = c;
  }
  if (n > m->n) memset(m->b + m->n, 0, (size_t)(n - m->n));
  m->n = n;
}

static void buf_set(buf *m, const uint8_t *p, int64_t n) {
  buf_resize(m, n);
  if (n) memcpy(m->b, p, (size_t)n);
}

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* The bytes of a write with data seed `ds`: random, runs, text or zeros
 * (chunks stored raw, compressed, and as special zero chunks). */
static void gen_data(uint64_t ds, uint8_t *p, int64_t n) {
  uint64_t s = ds;
  uint64_t h = splitmix(&s);
  int mode = (int)(h % 8);
  if (mode < 3) {
    for (int64_t k = 0; k < n; k += 8) {
      uint64_t v = splitmix(&s);
      int64_t t = n - k < 8 ? n - k : 8;
      memcpy(p + k, &v, (size_t)t);
    }
  } else if (mode < 5) {
    uint8_t v = (uint8_t)(h >> 8);
    int64_t run = (int64_t)(h >> 16) % 700 + 1;
    for (int64_t k = 0; k < n; k++) {
      if (k % run == 0) v = (uint8_t)splitmix(&s);
      p[k] = v;
    }
  } else if (mode < 7) {
    uint64_t w = h >> 20;
    int64_t k = 0;
    while (k < n) {
      char word[32];
      int l = snprintf(word, sizeof word, "w%llu ", (unsigned long long)(w++ % 100000));
      for (int j = 0; j < l && k < n; j++) p[k++] = (uint8_t)word[j];
    }
  } else {
    memset(p, 0, (size_t)n);
  }
}

static int read_all(const char *path, buf *out) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) return -1;
  out->n = 0;
  for (;;) {
    buf_resize(out, out->n + 65536);
    ssize_t r = read(fd, out->b + out->n - 65536, 65536);
    if (r < 0) {
      if (errno == EINTR) {
        out->n -= 65536;
        continue;
      }
      close(fd);
      return -1;
    }
    out->n -= 65536 - r;
    if (r == 0) break;
  }
  close(fd);
  return 0;
}

static int write_all(const char *path, const uint8_t *p, int64_t n) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return -1;
  int64_t done = 0;
  while (done < n) {
    ssize_t w = write(fd, p + done, (size_t)(n - done));
    if (w <= 0) {
      close(fd);
      return -1;
    }
    done += w;
  }
  return close(fd);
}

/* Slots: present (with the name f<ns>g<gen>) or absent.  A slot names its
 * new files f<slot>g<nextgen++>, so that no name is used twice in one
 * source tree; a rename over another slot's file takes that file's name. */
typedef struct slotst {
  int present, ns, gen, nextgen;
} slotst;

static void load_state(const char *logdir, slotst *st, buf *base) {
  char p[4096];
  snprintf(p, sizeof p, "%s/state", logdir);
  for (int s = 0; s < NSLOT; s++) {
    st[s] = (slotst){0, s, 0, 1};
    base[s].n = 0;
  }
  FILE *fp = fopen(p, "r");
  if (!fp) return;
  int s, pr, nm, g, ng;
  while (fscanf(fp, "%d %d %d %d %d", &s, &pr, &nm, &g, &ng) == 5) {
    if (s < 0 || s >= NSLOT) die("bad state file");
    st[s] = (slotst){pr, nm, g, ng};
    if (pr) {
      snprintf(p, sizeof p, "%s/base%d", logdir, s);
      if (read_all(p, &base[s]) < 0) die("cannot read %s", p);
    }
  }
  fclose(fp);
}

static void slot_name(const slotst *st, char *out, size_t cap) {
  snprintf(out, cap, "f%dg%d", st->ns, st->gen);
}

/* ---- the writer ------------------------------------------------------------ */

static int logfd = -1;
static long opno;

static void logline(const char *fmt, ...) {
  char line[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n < 0 || n >= (int)sizeof line) die("log line too long");
  if (write(logfd, line, (size_t)n) != n) die("cannot write the log");
}

/* Begin an operation: "B n op slot a b c". */
static void op_begin(const char *op, int s, long long a, long long b, long long c) {
  ++opno;
  logline("B %ld %s %d %lld %lld %lld\n", opno, op, s, a, b, c);
}

/* End it; on failure the run ends (after the kill every call fails). */
static void op_end(long long rc) {
  int e = rc < 0 ? errno : 0;
  logline("E %ld %d %d\n", opno, rc < 0 ? -1 : 0, e);
  if (rc < 0) {
    fprintf(stderr, "crash_writer: op %ld failed: %s\n", opno, strerror(e));
    exit(4);
  }
}

static uint64_t rs;
static uint64_t rnd(uint64_t n) { return n ? splitmix(&rs) % n : 0; }

typedef struct wslot {
  int fd;
  buf m; /* the content written so far */
} wslot;

static int pwrite_all(int fd, const uint8_t *p, int64_t n, int64_t off) {
  int64_t done = 0;
  while (done < n) {
    ssize_t w = pwrite(fd, p + done, (size_t)(n - done), (off_t)(off + done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    done += w;
  }
  return 0;
}

static int pread_all(int fd, uint8_t *p, int64_t n, int64_t off) {
  int64_t done = 0;
  while (done < n) {
    ssize_t r = pread(fd, p + done, (size_t)(n - done), (off_t)(off + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    done += r;
  }
  return (int)(done == n ? 0 : 1);
}

/* The remount check: DIR shows exactly the present slots, with their
 * content.  0, or 1 with a message. */
static int verify_dir(const char *dir, const slotst *st, const buf *base) {
  DIR *d = opendir(dir);
  if (!d) {
    fprintf(stderr, "remount: cannot list %s: %s\n", dir, strerror(errno));
    return 1;
  }
  int seen[NSLOT] = {0}, bad = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    int nm, g, l = 0, hit = 0;
    if (sscanf(de->d_name, "f%dg%d%n", &nm, &g, &l) == 2 && l && !de->d_name[l])
      for (int s = 0; s < NSLOT; s++)
        if (st[s].present && st[s].ns == nm && st[s].gen == g) seen[s] = hit = 1;
    if (hit) continue;
    fprintf(stderr, "remount: unexpected entry %s in %s\n", de->d_name, dir);
    bad = 1;
  }
  closedir(d);
  buf got = {0};
  for (int s = 0; s < NSLOT; s++) {
    if (!st[s].present) continue;
    char name[64], p[4096];
    slot_name(&st[s], name, sizeof name);
    snprintf(p, sizeof p, "%s/%s", dir, name);
    if (!seen[s] || read_all(p, &got) < 0) {
      fprintf(stderr, "remount: %s missing or unreadable: %s\n", name, strerror(errno));
      bad = 1;
      continue;
    }
    struct stat sb;
    if (stat(p, &sb) < 0 || sb.st_size != got.n) {
      fprintf(stderr, "remount: %s: stat size %lld, read %lld bytes\n", name,
              (long long)sb.st_size, (long long)got.n);
      bad = 1;
    }
    if (got.n != base[s].n || (got.n && memcmp(got.b, base[s].b, (size_t)got.n))) {
      int64_t k = 0;
      while (k < got.n && k < base[s].n && got.b[k] == base[s].b[k]) k++;
      fprintf(stderr, "remount: %s: %lld bytes, expected %lld; first difference at %lld\n",
              name, (long long)got.n, (long long)base[s].n, (long long)k);
      bad = 1;
    }
  }
  free(got.b);
  return bad;
}

static void slot_path(const char *dir, const slotst *st, char *out, size_t cap) {
  char name[64];
  slot_name(st, name, sizeof name);
  snprintf(out, cap, "%s/%s", dir, name);
}

static int open_slot(const char *dir, const slotst *st, int flags) {
  char p[4096];
  slot_path(dir, st, p, sizeof p);
  return open(p, flags, 0644);
}

static int rename_slot(const char *dir, const slotst *from, const slotst *to) {
  char pa[4096], pb[4096];
  slot_path(dir, from, pa, sizeof pa);
  slot_path(dir, to, pb, sizeof pb);
  return rename(pa, pb);
}

static int cmd_run(const char *dir, const char *logdir, uint64_t seed, long maxops) {
  slotst st[NSLOT];
  buf base[NSLOT] = {{0}};
  load_state(logdir, st, base);
  if (verify_dir(dir, st, base)) return 3;
  char lp[4096];
  snprintf(lp, sizeof lp, "%s/log", logdir);
  logfd = open(lp, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
  if (logfd < 0) die("cannot open %s", lp);
  logline("R\n");
  if (maxops == 0) return 0;
  rs = seed * 0x100000001b3ull + 17;
  wslot w[NSLOT];
  for (int s = 0; s < NSLOT; s++) {
    w[s].fd = -1;
    w[s].m = base[s];
  }
  uint8_t *data = malloc((size_t)MAXW);
  buf rd = {0};
  for (long k = 0; maxops < 0 || k < maxops; k++) {
    int s = (int)rnd(NSLOT);
    wslot *ws = &w[s];
    if (!st[s].present) { /* create */
      slotst nw = {1, s, st[s].nextgen++, 0};
      op_begin("create", s, nw.gen, 0, 0);
      int fd = open_slot(dir, &nw, O_RDWR | O_CREAT | O_EXCL);
      op_end(fd);
      st[s].present = 1;
      st[s].ns = s;
      st[s].gen = nw.gen;
      ws->fd = fd;
      ws->m.n = 0;
      continue;
    }
    if (ws->fd < 0) { /* present from the last trial, or closed */
      op_begin("open", s, 0, 0, 0);
      ws->fd = open_slot(dir, &st[s], O_RDWR);
      op_end(ws->fd);
      continue;
    }
    int64_t size = ws->m.n;
    unsigned r = (unsigned)rnd(1000);
    if (r < 450) { /* write: in place, append, past the end, whole chunks */
      int64_t len = 1 + (int64_t)rnd(rnd(4) ? 20000 : (uint64_t)MAXW);
      int64_t off;
      unsigned how = (unsigned)rnd(10);
      if (how < 2) off = size;                               /* append */
      else if (how < 3) off = size + (int64_t)rnd(200000);   /* gap */
      else if (how < 5) {                                    /* chunks */
        off = (int64_t)rnd((uint64_t)(size / 65536 + 1)) * 65536;
        len = 65536;
      } else off = (int64_t)rnd((uint64_t)size + 1);
      if (off + len > MAXSZ) off = (int64_t)rnd((uint64_t)(MAXSZ - len));
      uint64_t ds = splitmix(&rs);
      gen_data(ds, data, len);
      op_begin("write", s, off, len, (long long)ds);
      op_end(pwrite_all(ws->fd, data, len, off));
      if (off + len > ws->m.n) buf_resize(&ws->m, off + len);
      memcpy(ws->m.b + off, data, (size_t)len);
    } else if (r < 530) { /* truncate */
      int64_t ns;
      unsigned how = (unsigned)rnd(10);
      if (how == 0) ns = 0;
      else if (how < 6) ns = (int64_t)rnd((uint64_t)size + 1);
      else ns = size + (int64_t)rnd(300000);
      if (ns > MAXSZ) ns = MAXSZ;
      op_begin("trunc", s, ns, 0, 0);
      op_end(ftruncate(ws->fd, (off_t)ns));
      buf_resize(&ws->m, ns);
    } else if (r < 660) {
      op_begin("fsync", s, 0, 0, 0);
      op_end(fsync(ws->fd));
    } else if (r < 710) {
      op_begin("fdsync", s, 0, 0, 0);
      op_end(fdatasync(ws->fd));
    } else if (r < 770) { /* close (commits), reopened by a later op */
      op_begin("close", s, 0, 0, 0);
      int fd = ws->fd;
      ws->fd = -1;
      op_end(close(fd));
    } else if (r < 790) { /* a time set (on a frame: its data and the time in one commit) */
      struct timespec ts[2] = {{0, UTIME_OMIT}, {(time_t)(1000000000 + rnd(800000000)), (long)rnd(1000000000)}};
      op_begin("utime", s, (int64_t)ts[1].tv_sec, 0, 0);
      op_end(futimens(ws->fd, ts));
    } else if (r < 880) { /* read back through the mount */
      int64_t off = (int64_t)rnd((uint64_t)size + 1);
      int64_t len = (int64_t)rnd(200000);
      if (off + len > size) len = size - off;
      buf_resize(&rd, len + 1);
      op_begin("read", s, off, len, 0);
      int rc = pread_all(ws->fd, rd.b, len, off);
      if (rc == 0 && len && memcmp(rd.b, ws->m.b + off, (size_t)len)) {
        int64_t j = 0;
        while (rd.b[j] == ws->m.b[off + j]) j++;
        logline("M %ld %lld\n", opno, (long long)(off + j));
        fprintf(stderr, "crash_writer: op %ld: read of f%dg%d at %lld+%lld differs at %lld\n",
                opno, st[s].ns, st[s].gen, (long long)off, (long long)len, (long long)(off + j));
        rc = 1;
      } else if (rc == 1) {
        logline("M %ld %lld\n", opno, -1LL);
        fprintf(stderr, "crash_writer: op %ld: short read of f%dg%d at %lld+%lld\n", opno,
                st[s].ns, st[s].gen, (long long)off, (long long)len);
      }
      if (rc == 1) exit(5);
      op_end(rc);
    } else if (r < 950) { /* rename to a new name */
      slotst nw = {1, s, st[s].nextgen++, 0};
      op_begin("rename", s, nw.gen, 0, 0);
      op_end(rename_slot(dir, &st[s], &nw));
      st[s].ns = s;
      st[s].gen = nw.gen;
    } else if (r < 975) { /* rename over another slot's file, left open */
      int t = (s + 1 + (int)rnd(NSLOT - 1)) % NSLOT;
      if (!st[t].present) continue;
      op_begin("replace", s, t, 0, 0);
      op_end(rename_slot(dir, &st[s], &st[t]));
      st[s].ns = st[t].ns;
      st[s].gen = st[t].gen;
      /* The slot names are now s's; t's file lives on as an orphan. */
      st[t].present = 0;
      int ofd = w[t].fd;
      w[t].fd = -1;
      if (ofd >= 0) {
        uint64_t ds = splitmix(&rs);
        gen_data(ds, data, 4096);
        op_begin("orphan", t, 0, 4096, (long long)ds);
        op_end(pwrite_all(ofd, data, 4096, 0));
        op_begin("oclose", t, 0, 0, 0);
        op_end(close(ofd));
      }
    } else { /* unlink while open, write the orphan, close it */
      op_begin("unlink", s, 0, 0, 0);
      char p[4096];
      slot_path(dir, &st[s], p, sizeof p);
      op_end(unlink(p));
      st[s].present = 0;
      uint64_t ds = splitmix(&rs);
      gen_data(ds, data, 4096);
      op_begin("orphan", s, 0, 4096, (long long)ds);
      op_end(pwrite_all(ws->fd, data, 4096, 0));
      op_begin("oclose", s, 0, 0, 0);
      int fd = ws->fd;
      ws->fd = -1;
      op_end(close(fd));
    }
  }
  logline("D\n");
  return 0;
}

/* ---- the checker ----------------------------------------------------------- */

typedef struct lop {
  long n;
  char op[16];
  int s;
  long long a, b, c;
  int done; /* 0: under way at the kill, 1: returned 0, 2: returned an error */
} lop;

static lop *ops;
static long nops;

static void parse_log(const char *logdir) {
  char p[4096], line[512];
  snprintf(p, sizeof p, "%s/log", logdir);
  FILE *fp = fopen(p, "r");
  if (!fp) die("cannot read %s", p);
  long cap = 0;
  int mism = 0;
  while (fgets(line, sizeof line, fp)) {
    if (!strchr(line, '\n')) break; /* a torn last line */
    lop o;
    long n;
    long long rc;
    int e;
    if (line[0] == 'B' &&
        sscanf(line, "B %ld %15s %d %lld %lld %lld", &o.n, o.op, &o.s, &o.a, &o.b, &o.c) == 6) {
      if (o.s < 0 || o.s >= NSLOT) die("log: bad slot");
      o.done = 0;
      if (nops == cap) {
        cap = cap ? 2 * cap : 1024;
        ops = realloc(ops, (size_t)cap * sizeof *ops);
      }
      ops[nops++] = o;
    } else if (line[0] == 'E' && sscanf(line, "E %ld %lld %d", &n, &rc, &e) == 3) {
      if (!nops || ops[nops - 1].n != n) die("log: E %ld without its B", n);
      ops[nops - 1].done = rc == 0 ? 1 : 2;
    } else if (line[0] == 'M') {
      printf("FAIL read through the mount returned other bytes: %s", line);
      mism = 1;
    }
  }
  fclose(fp);
  if (mism) exit(1);
  for (long k = 0; k + 1 < nops; k++)
    if (ops[k].done != 1) die("log: op %ld failed but the run went on", ops[k].n);
}

/* One source entry as found after the crash. */
typedef struct found {
  int s, gen;
  buf content;
  int ok; /* content read */
} found;

static int is_ns_op(const lop *o) {
  return !strcmp(o->op, "create") || !strcmp(o->op, "rename") ||
         !strcmp(o->op, "replace") || !strcmp(o->op, "unlink");
}

static int is_content_op(const lop *o) {
  return !strcmp(o->op, "write") || !strcmp(o->op, "trunc");
}

static int is_ack_op(const lop *o) {
  return !strcmp(o->op, "fsync") || !strcmp(o->op, "fdsync") || !strcmp(o->op, "close");
}

/* Names after ops [0, upto): present/ns/gen per slot. */
static void namespace_after(const slotst *init, long upto, slotst *out) {
  memcpy(out, init, NSLOT * sizeof *out);
  for (long k = 0; k < upto; k++) {
    const lop *o = &ops[k];
    slotst *t = &out[o->s];
    if (!strcmp(o->op, "create") || !strcmp(o->op, "rename")) {
      t->present = 1;
      t->ns = o->s;
      t->gen = (int)o->a;
      if (t->nextgen <= t->gen) t->nextgen = t->gen + 1;
    } else if (!strcmp(o->op, "replace")) {
      t->ns = out[o->a].ns;
      t->gen = out[o->a].gen;
      out[o->a].present = 0;
    } else if (!strcmp(o->op, "unlink")) {
      t->present = 0;
    }
  }
}

/* Does the set of names of ns equal the entries found?  slot_of[k] gets
 * the slot shown as entry k. */
static int same_names(const slotst *ns, const found *f, int nf, int *slot_of) {
  int cnt = 0;
  for (int k = 0; k < nf; k++) slot_of[k] = -1;
  for (int s = 0; s < NSLOT; s++) {
    if (!ns[s].present) continue;
    cnt++;
    int hit = 0;
    for (int k = 0; k < nf; k++)
      if (f[k].s == ns[s].ns && f[k].gen == ns[s].gen) {
        hit = 1;
        slot_of[k] = s;
      }
    if (!hit) return 0;
  }
  return cnt == nf;
}

static int fails;
static void failf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("FAIL ");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  fails++;
}

static int cat_frame(const char *b2f, const char *srcdir, const char *name, buf *out) {
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "'%s' cat '%s/%s.b2frame'", b2f, srcdir, name);
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  out->n = 0;
  for (;;) {
    buf_resize(out, out->n + 65536);
    size_t r = fread(out->b + out->n - 65536, 1, 65536, p);
    out->n -= 65536 - (int64_t)r;
    if (r == 0) break;
    if (out->n > 64 * MAXSZ) break;
  }
  int st = pclose(p);
  return st == 0 ? 0 : -1;
}

/* Chunk c of a state of n bytes: [c*cs, min((c+1)*cs, n)). */
static int64_t chunk_bytes(int64_t n, int64_t c, int64_t cs) {
  int64_t lo = c * cs;
  if (lo >= n) return 0;
  return n - lo < cs ? n - lo : cs;
}

/* Compare the content `act` found for slot s with its states.  The slot's
 * file starts at op `inc0` (its creation; -1: the trial's start, content
 * `init`); its states are that start and the result of each content op of
 * s in [inc0+1, upto).  The window: from the state current at op `ack`
 * (just after the last acknowledged commit) on. */
static void check_content(int s, const buf *init, long inc0, long ack, long upto,
                          const buf *act, int64_t cs, const char *name, char *summary,
                          size_t scap) {
  buf m = {0};
  if (inc0 < 0) buf_set(&m, init->b, init->n);
  long first = inc0 + 1;
  int a = 0; /* index of the state current at op `ack` */
  for (long j = first; j < ack; j++)
    if (ops[j].s == s && is_content_op(&ops[j])) a++;
  uint8_t *data = malloc((size_t)MAXW);
  int64_t maxch = MAXSZ / cs + 2;
  int64_t nch = (act->n + cs - 1) / cs;
  if (nch > maxch) nch = maxch;
  char *chunk_ok = calloc((size_t)maxch + 1, 1);
  int size_ok = 0, k = 0, match = -1, older = -1, split = -1;
  for (long j = first - 1; j < upto; j++) {
    if (j >= first) { /* state k: after the k-th content op */
      const lop *o = &ops[j];
      if (o->s != s || !is_content_op(o)) continue;
      if (!strcmp(o->op, "write")) {
        gen_data((uint64_t)o->c, data, o->b);
        /* split_state: the state before it plus the part of its first
         * page, when the kernel sent that part alone (see the header) */
        int64_t piece = KPAGE - o->a % KPAGE;
        if (o->a % KPAGE && o->b > piece && k >= a) {
          buf t = {0};
          buf_set(&t, m.b, m.n);
          if (o->a + piece > t.n) buf_resize(&t, o->a + piece);
          memcpy(t.b + o->a, data, (size_t)piece);
          if (t.n == act->n && !memcmp(t.b, act->b, (size_t)t.n)) split = k;
          free(t.b);
        }
        if (o->a + o->b > m.n) buf_resize(&m, o->a + o->b);
        memcpy(m.b + o->a, data, (size_t)o->b);
      } else {
        buf_resize(&m, o->a);
      }
      k++;
    }
    int inwin = k >= a;
    int eq = m.n == act->n && (m.n == 0 || !memcmp(m.b, act->b, (size_t)m.n));
    if (eq && inwin) match = k;
    if (eq && !inwin) older = k;
    if (!inwin) continue;
    if (m.n == act->n) size_ok = 1;
    for (int64_t c = 0; c < nch; c++) {
      int64_t l = chunk_bytes(act->n, c, cs);
      if (!chunk_ok[c] && chunk_bytes(m.n, c, cs) == l &&
          !memcmp(m.b + c * cs, act->b + c * cs, (size_t)l))
        chunk_ok[c] = 1;
    }
  }
  int z = k;
  if (match >= 0) {
    snprintf(summary, scap, "%s %lld bytes = state %d of [%d..%d]", name, (long long)act->n,
             match, a, z);
  } else if (split >= 0) {
    snprintf(summary, scap, "%s %lld bytes = state %d and the first page's part of the next "
             "write of [%d..%d]", name, (long long)act->n, split, a, z);
  } else {
    int64_t bad = -1;
    for (int64_t c = 0; c < nch && bad < 0; c++)
      if (!chunk_ok[c]) bad = c;
    if (older >= 0)
      failf("%s (slot %d): acknowledged data lost: it holds state %d, older than state %d "
            "of the last acknowledged commit (states up to %d)", name, s, older, a, z);
    else if (bad >= 0)
      failf("%s (slot %d): chunk %lld mixed: its %lld bytes equal that chunk in no state of "
            "[%d..%d] (frame of %lld bytes)", name, s, (long long)bad,
            (long long)chunk_bytes(act->n, bad, cs), a, z, (long long)act->n);
    else if (!size_ok)
      failf("%s (slot %d): size %lld is the size of no state of [%d..%d]", name, s,
            (long long)act->n, a, z);
    else
      failf("%s (slot %d): torn across chunks: each chunk matches some state of [%d..%d], "
            "no single state matches them all", name, s, a, z);
    snprintf(summary, scap, "%s FAILED", name);
  }
  free(chunk_ok);
  free(data);
  free(m.b);
}

static void names_of(const slotst *ns, char *out, size_t cap) {
  out[0] = '\0';
  for (int s = 0; s < NSLOT; s++)
    if (ns[s].present)
      snprintf(out + strlen(out), cap - strlen(out), " f%dg%d", ns[s].ns, ns[s].gen);
}

/* A frame a rename had set aside under a hidden name when the daemon died
 * (its restore marker beside it: source name, target name) goes back to
 * its name when that target is free: the next daemon's sweep does so (see
 * src/ns/leftover.c), as if the rename had not begun.  Done here first, the
 * same way, so the names are checked as the next mount shows them.
 * Returns how many went back. */
static int restore_set_aside(const char *srcdir) {
  static const char mark[] = ".restore.b2tmp";
  int n = 0, dfd = open(srcdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = dfd < 0 ? NULL : fdopendir(dup(dfd));
  struct dirent *de;
  while (d && (de = readdir(d))) {
    size_t l = strlen(de->d_name), k = sizeof mark - 1;
    if (strncmp(de->d_name, ".b2fs-gone-", 11) || l <= k || strcmp(de->d_name + l - k, mark))
      continue;
    char hidden[300], buf[600] = {0}, *target;
    snprintf(hidden, sizeof hidden, "%.*s.b2tmp", (int)(l - k), de->d_name);
    int fd = openat(dfd, de->d_name, O_RDONLY | O_CLOEXEC);
    ssize_t r = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
    if (fd >= 0) close(fd);
    struct stat st;
    if (r > 0 && (target = memchr(buf, 0, (size_t)r)) && ++target < buf + r &&
        fstatat(dfd, target, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT &&
        renameat(dfd, hidden, dfd, buf) == 0)
      n++;
    unlinkat(dfd, de->d_name, 0);
  }
  if (d) closedir(d);
  if (dfd >= 0) close(dfd);
  return n;
}

static int cmd_check(const char *srcdir, const char *logdir, const char *b2f, int64_t cs) {
  slotst init[NSLOT];
  buf base[NSLOT] = {{0}};
  load_state(logdir, init, base);
  parse_log(logdir);
  long certain = nops;
  if (nops && ops[nops - 1].done != 1) certain = nops - 1;
  const lop *un = certain < nops ? &ops[nops - 1] : NULL;

  /* What SRCDIR holds, once what a rename set aside is back. */
  int restored = restore_set_aside(srcdir);
  DIR *d = opendir(srcdir);
  if (!d) die("cannot list %s", srcdir);
  found f[64];
  int nf = 0, hidden = 0;
  char hnames[256] = "";
  struct dirent *de;
  while ((de = readdir(d))) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    if (de->d_name[0] == '.') {
      if (hidden++ < 3)
        snprintf(hnames + strlen(hnames), sizeof hnames - strlen(hnames), " %.60s", de->d_name);
      continue;
    }
    int nm, g, l = 0;
    if (sscanf(de->d_name, "f%dg%d.b2frame%n", &nm, &g, &l) == 2 && l && !de->d_name[l] &&
        nf < 64)
      f[nf++] = (found){nm, g, {0}, 0};
    else
      failf("unexpected entry %s", de->d_name);
  }
  closedir(d);

  /* Names: after the completed ops, or after the one under way too. */
  slotst n0[NSLOT], n1[NSLOT], *ns = NULL;
  int slot_of[64];
  namespace_after(init, certain, n0);
  namespace_after(init, nops, n1);
  int took_new = 0;
  if (same_names(n0, f, nf, slot_of)) {
    ns = n0;
  } else if (un && is_ns_op(un) && same_names(n1, f, nf, slot_of)) {
    ns = n1;
    took_new = 1;
  }
  if (!ns) {
    char w0[256], w1[256], got[512] = "";
    names_of(n0, w0, sizeof w0);
    names_of(n1, w1, sizeof w1);
    for (int k = 0; k < nf; k++)
      snprintf(got + strlen(got), sizeof got - strlen(got), " f%dg%d", f[k].s, f[k].gen);
    failf("names: expected%s%s%s; found%s (op under way: %s, %d hidden entries)", w0,
          un && is_ns_op(un) ? " or" : "", un && is_ns_op(un) ? w1 : "", got,
          un ? un->op : "none", hidden);
    return 1;
  }
  long upto = took_new ? nops : certain;
  /* Content ops: the one under way included (it may have been done). */
  long cupto = un && is_content_op(un) ? nops : upto;

  char summary[64][200];
  int nsum = 0;
  for (int k = 0; k < nf; k++) {
    int s = slot_of[k];
    char name[64];
    snprintf(name, sizeof name, "f%dg%d", f[k].s, f[k].gen);
    if (cat_frame(b2f, srcdir, name, &f[k].content) < 0) {
      failf("%s: b2f cat failed", name);
      continue;
    }
    f[k].ok = 1;
    /* The slot's file: from its last creation among the ops replayed. */
    long inc0 = -1;
    for (long j = 0; j < upto; j++)
      if (ops[j].s == s && !strcmp(ops[j].op, "create")) inc0 = j;
    /* Lower bound: the last acknowledged commit (or the creation). */
    long ack = inc0 + 1;
    for (long j = ack; j < certain; j++)
      if (ops[j].s == s && is_ack_op(&ops[j]) && ops[j].done == 1) ack = j + 1;
    check_content(s, &base[s], inc0, ack, cupto, &f[k].content, cs, name, summary[nsum],
                  sizeof summary[0]);
    nsum++;
  }
  printf("# %ld ops, last %s (%s)%s; %d hidden%s;%s", nops, nops ? ops[nops - 1].op : "-",
         un ? (un->done == 0 ? "under way" : "failed") : "completed",
         took_new ? ", names after it" : "", hidden, hnames,
         restored ? " a frame a rename set aside put back;" : "");
  for (int k = 0; k < nsum; k++) printf(" %s;", summary[k]);
  printf("\n");
  if (fails) return 1;

  /* The next trial starts from what is there. */
  char p[4096];
  snprintf(p, sizeof p, "%s/state.new", logdir);
  FILE *fp = fopen(p, "w");
  if (!fp) die("cannot write %s", p);
  for (int s = 0; s < NSLOT; s++) {
    int ng = n1[s].nextgen > ns[s].nextgen ? n1[s].nextgen : ns[s].nextgen;
    fprintf(fp, "%d %d %d %d %d\n", s, ns[s].present, ns[s].ns, ns[s].gen, ng);
  }
  fclose(fp);
  for (int k = 0; k < nf; k++) {
    snprintf(p, sizeof p, "%s/base%d.new", logdir, slot_of[k]);
    if (write_all(p, f[k].content.b, f[k].content.n) < 0) die("cannot write %s", p);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 6 && !strcmp(argv[1], "run"))
    return cmd_run(argv[2], argv[3], strtoull(argv[4], NULL, 10), strtol(argv[5], NULL, 10));
  if (argc == 6 && !strcmp(argv[1], "check"))
    return cmd_check(argv[2], argv[3], argv[4], strtoll(argv[5], NULL, 10));
  fprintf(stderr, "usage: crash_writer run DIR LOGDIR SEED MAXOPS\n"
                  "       crash_writer check SRCDIR LOGDIR B2F CHUNKSIZE\n");
  return 2;
}
