/*
 * mount_ex.c - random-operation exerciser of a file under a b2fs mount,
 * for tests/t_mount_write.sh.
 *
 *   mount_ex FILE SHADOW SEED NOPS [CHUNKSIZE]
 *
 * Runs NOPS random operations on FILE (under the mount) and on SHADOW (a
 * plain file elsewhere): writes at random offsets and sizes (random,
 * repetitive and zero data, gaps past the end), reads through the writing
 * descriptor and a second read-only one, writes through a third,
 * write-only descriptor (the mount gives those direct I/O, past the page
 * cache the others use), truncates down and up, fsync and
 * fdatasync, close and reopen (sometimes with O_TRUNC), reads and writes
 * through shared mmap (with and without msync), holes punched and ranges
 * zeroed (fallocate), SEEK_DATA/SEEK_HOLE walks (every hole zeros in the
 * shadow; once more after the last close, when chunks of zeros are
 * holes), and size checks.  Every
 * read is compared byte for byte with the shadow, and the whole file every
 * 1000 operations and at the end.  Offsets favour chunk edges (CHUNKSIZE,
 * default 64K).  Prints "seed N" first; on a mismatch, the operation, the
 * first differing offset and the last operations, and exits 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_SIZE (3L << 20)
#define HIST 24

static uint64_t rng_state;
static uint64_t rnd64(void) {
  uint64_t x = rng_state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return rng_state = x;
}
static long rnd(long n) { return n > 0 ? (long)(rnd64() % (uint64_t)n) : 0; }

static const char *file_path, *shadow_path;
static int fd = -1, rfd = -1, wfd = -1, sfd = -1;
static long size, chunk = 65536, opno;
static unsigned char *buf, *buf2;
static char hist[HIST][128];

static void note(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(hist[opno % HIST], sizeof hist[0], fmt, ap);
  va_end(ap);
}

static void die(const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "mount_ex: op %ld: ", opno);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\nlast operations:\n");
  for (long i = opno - HIST + 1; i <= opno; i++)
    if (i >= 0) fprintf(stderr, "  %ld: %s\n", i, hist[i % HIST]);
  exit(1);
}

static void full_pwrite(int f, const void *p, size_t n, off_t off, const char *what) {
  size_t done = 0;
  while (done < n) {
    ssize_t w = pwrite(f, (const char *)p + done, n - done, off + (off_t)done);
    if (w < 0) die("%s: pwrite %zu at %lld: %s", what, n, (long long)off, strerror(errno));
    done += (size_t)w;
  }
}

static size_t full_pread(int f, void *p, size_t n, off_t off, const char *what) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = pread(f, (char *)p + done, n - done, off + (off_t)done);
    if (r < 0) die("%s: pread %zu at %lld: %s", what, n, (long long)off, strerror(errno));
    if (r == 0) break;
    done += (size_t)r;
  }
  return done;
}

static void compare(const unsigned char *got, size_t ngot, long off, size_t n, const char *what) {
  size_t want = off >= size ? 0 : (size_t)(size - off < (long)n ? size - off : (long)n);
  if (ngot != want) die("%s at %ld+%zu: got %zu bytes, want %zu (size %ld)", what, off, n, ngot, want, size);
  size_t s = full_pread(sfd, buf2, want, off, "shadow");
  if (s != want) die("shadow short read");
  if (memcmp(got, buf2, want) != 0) {
    size_t i = 0;
    while (got[i] == buf2[i]) i++;
    die("%s at %ld+%zu: byte %ld is %02x, want %02x", what, off, n, off + (long)i, got[i], buf2[i]);
  }
}

/* An offset, often at or next to a chunk edge. */
static long pick_off(long limit) {
  if (limit <= 0) return 0;
  switch (rnd(4)) {
  case 0: {
    long c = rnd(limit / chunk + 1) * chunk + rnd(9) - 4;
    return c < 0 ? 0 : c > limit ? limit : c;
  }
  default:
    return rnd(limit + 1);
  }
}

static size_t pick_len(void) {
  switch (rnd(10)) {
  case 0: case 1: case 2: case 3: return (size_t)(1 + rnd(100));
  case 4: case 5: case 6: return (size_t)(1 + rnd(8192));
  case 7: case 8: return (size_t)(1 + rnd(chunk * 2));
  default: return (size_t)(1 + rnd(300000));
  }
}

static void fill(unsigned char *p, size_t n) {
  switch (rnd(4)) {
  case 0: /* random */
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)rnd64();
    break;
  case 1: /* zeros */
    memset(p, 0, n);
    break;
  case 2: { /* a slowly changing float64-ish series */
    double v = (double)rnd(1000);
    for (size_t i = 0; i + 8 <= n; i += 8) {
      v += 0.25;
      memcpy(p + i, &v, 8);
    }
    for (size_t i = n & ~(size_t)7; i < n; i++) p[i] = 7;
    break;
  }
  default: { /* a short repeated pattern */
    unsigned char pat[7];
    for (int i = 0; i < 7; i++) pat[i] = (unsigned char)rnd64();
    for (size_t i = 0; i < n; i++) p[i] = pat[i % 7];
  }
  }
}

static void open_files(int trunc) {
  fd = open(file_path, O_RDWR | O_CREAT | (trunc ? O_TRUNC : 0), 0644);
  if (fd < 0) die("open %s: %s", file_path, strerror(errno));
  if (trunc) {
    if (ftruncate(sfd, 0) < 0) die("shadow truncate");
    size = 0;
  }
}

static void check_size(const char *what) {
  struct stat st;
  if (fstat(fd, &st) < 0) die("fstat: %s", strerror(errno));
  if (st.st_size != size) die("%s: size %lld, want %ld", what, (long long)st.st_size, size);
}

static void check_all(const char *what) {
  check_size(what);
  size_t n = full_pread(fd, buf, (size_t)size, 0, what);
  compare(buf, n, 0, (size_t)size, what);
}

static void op_write(int wonly) {
  long off = pick_off(size + (rnd(8) == 0 ? 3 * chunk : 0));
  size_t n = pick_len();
  if (off + (long)n > MAX_SIZE) n = (size_t)(off < MAX_SIZE ? MAX_SIZE - off : 1);
  fill(buf, n);
  note("write%s %zu at %ld (size %ld)", wonly ? " (write-only fd)" : "", n, off, size);
  full_pwrite(wonly ? wfd : fd, buf, n, off, "write");
  full_pwrite(sfd, buf, n, off, "shadow write");
  if (off + (long)n > size) size = off + (long)n;
}

static void op_read(int which) {
  long off = pick_off(size + 100);
  size_t n = pick_len();
  int f = which ? rfd : fd;
  note("read%s %zu at %ld (size %ld)", which ? " (ro fd)" : "", n, off, size);
  size_t got = full_pread(f, buf, n, off, "read");
  compare(buf, got, off, n, which ? "read (ro fd)" : "read");
}

static void op_truncate(void) {
  long to = rnd(3) == 0 ? pick_off(MAX_SIZE) : pick_off(size);
  note("truncate %ld -> %ld", size, to);
  if (ftruncate(fd, to) < 0) die("ftruncate %ld: %s", to, strerror(errno));
  if (ftruncate(sfd, to) < 0) die("shadow ftruncate");
  size = to;
}

static void op_sync(void) {
  int data = (int)rnd(2);
  note("%s", data ? "fdatasync" : "fsync");
  if ((data ? fdatasync(fd) : fsync(fd)) < 0) die("fsync: %s", strerror(errno));
}

static void op_reopen(void) {
  int trunc = rnd(10) == 0;
  note("close and reopen%s", trunc ? " with O_TRUNC" : "");
  if (close(fd) < 0) die("close: %s", strerror(errno));
  if (rnd(2)) {
    if (close(rfd) < 0) die("close ro: %s", strerror(errno));
    rfd = open(file_path, O_RDONLY);
    if (rfd < 0) die("reopen ro: %s", strerror(errno));
  }
  if (rnd(2)) {
    if (close(wfd) < 0) die("close wo: %s", strerror(errno));
    wfd = open(file_path, O_WRONLY);
    if (wfd < 0) die("reopen wo: %s", strerror(errno));
  }
  open_files(trunc);
}

static void op_mmap(int write) {
  if (size == 0) return;
  unsigned char *m = mmap(NULL, (size_t)size, write ? PROT_READ | PROT_WRITE : PROT_READ,
                          MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) die("mmap %ld: %s", size, strerror(errno));
  long off = pick_off(size - 1);
  size_t n = pick_len();
  if (off + (long)n > size) n = (size_t)(size - off);
  if (write) {
    int sync = (int)rnd(2);
    note("mmap write %zu at %ld%s (size %ld)", n, off, sync ? " + msync" : "", size);
    fill(buf, n);
    memcpy(m + off, buf, n);
    full_pwrite(sfd, buf, n, off, "shadow write");
    if (sync && msync(m, (size_t)size, MS_SYNC) < 0) die("msync: %s", strerror(errno));
  } else {
    note("mmap read %zu at %ld (size %ld)", n, off, size);
    compare(m + off, n, off, n, "mmap read");
  }
  if (munmap(m, (size_t)size) < 0) die("munmap: %s", strerror(errno));
}

/* fallocate: a hole punched or a range zeroed (the shadow gets zeros);
 * ZERO_RANGE without KEEP_SIZE may grow the file. */
static void op_punch(void) {
  if (size == 0) return;
  long off = pick_off(size - 1);
  size_t n = pick_len();
  int mode = rnd(2) ? FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
                    : FALLOC_FL_ZERO_RANGE | (rnd(2) ? FALLOC_FL_KEEP_SIZE : 0);
  if (off + (long)n > MAX_SIZE) mode |= FALLOC_FL_KEEP_SIZE;
  note("%s %zu at %ld (size %ld)", mode & FALLOC_FL_PUNCH_HOLE ? "punch hole" :
       mode & FALLOC_FL_KEEP_SIZE ? "zero range, size kept" : "zero range", n, off, size);
  if (fallocate(fd, mode, off, (off_t)n) < 0) die("fallocate: %s", strerror(errno));
  long end = off + (long)n;
  if ((mode & FALLOC_FL_KEEP_SIZE) && end > size) end = size;
  memset(buf, 0, (size_t)(end - off));
  full_pwrite(sfd, buf, (size_t)(end - off), off, "shadow zeros");
  if (end > size) size = end;
}

/* The shadow's bytes [from, to) are zeros (what a hole must read as). */
static void shadow_zeros(long from, long to, const char *what) {
  if (to <= from) return;
  size_t got = full_pread(sfd, buf2, (size_t)(to - from), from, "shadow");
  for (size_t i = 0; i < got; i++)
    if (buf2[i]) die("%s: a hole at %ld-%ld, but byte %ld is %02x", what, from, to, from + (long)i, buf2[i]);
}

/* SEEK_DATA and SEEK_HOLE over the whole file through descriptor f: data
 * and holes alternate up to the size, holes read as zeros, nothing is data
 * past the end. */
static void op_seek(int f, const char *what) {
  note("%s (size %ld)", what, size);
  long pos = 0;
  while (pos < size) {
    off_t d = lseek(f, pos, SEEK_DATA);
    if (d < 0 && errno == ENXIO) {
      shadow_zeros(pos, size, what);
      break;
    }
    if (d < pos || d >= size) die("%s: SEEK_DATA from %ld gave %lld (%s)", what, pos, (long long)d, strerror(errno));
    shadow_zeros(pos, d, what);
    off_t h = lseek(f, d, SEEK_HOLE);
    if (h <= d || h > size) die("%s: SEEK_HOLE from %lld gave %lld (%s)", what, (long long)d, (long long)h, strerror(errno));
    pos = h;
  }
  if (lseek(f, size, SEEK_DATA) >= 0 || errno != ENXIO) die("%s: SEEK_DATA at the end is not ENXIO", what);
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: mount_ex FILE SHADOW SEED NOPS [CHUNKSIZE]\n");
    return 2;
  }
  file_path = argv[1];
  shadow_path = argv[2];
  uint64_t seed = strtoull(argv[3], NULL, 0);
  long nops = strtol(argv[4], NULL, 0);
  if (argc > 5) chunk = strtol(argv[5], NULL, 0);
  if (chunk < 1) chunk = 65536;
  printf("seed %" PRIu64 "\n", seed);
  fflush(stdout);
  rng_state = seed * 0x9e3779b97f4a7c15u + 1;
  buf = malloc(MAX_SIZE + 400000);
  buf2 = malloc(MAX_SIZE + 400000);
  if (!buf || !buf2) return 2;
  sfd = open(shadow_path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (sfd < 0) die("shadow %s: %s", shadow_path, strerror(errno));
  open_files(1);
  rfd = open(file_path, O_RDONLY);
  if (rfd < 0) die("open ro: %s", strerror(errno));
  wfd = open(file_path, O_WRONLY);
  if (wfd < 0) die("open wo: %s", strerror(errno));
  for (opno = 0; opno < nops; opno++) {
    long r = rnd(1000);
    if (r < 290) op_write(0);
    else if (r < 330) op_write(1);
    else if (r < 560) op_read(0);
    else if (r < 660) op_read(1);
    else if (r < 720) op_truncate();
    else if (r < 750) op_sync();
    else if (r < 770) op_reopen();
    else if (r < 840) op_mmap(0);
    else if (r < 910) op_mmap(1);
    else if (r < 935) op_punch();
    else if (r < 950) op_seek(rfd, "seek walk (ro fd)");
    else {
      note("fstat (size %ld)", size);
      check_size("fstat");
    }
    if (opno % 1000 == 999) {
      note("compare all (size %ld)", size);
      check_all("compare all");
    }
  }
  note("final compare (size %ld)", size);
  check_all("final compare");
  if (close(fd) < 0) die("final close: %s", strerror(errno));
  if (close(rfd) < 0) die("final close ro: %s", strerror(errno));
  if (close(wfd) < 0) die("final close wo: %s", strerror(errno));
  fd = open(file_path, O_RDONLY);
  if (fd < 0) die("reopen: %s", strerror(errno));
  check_all("after close");
  op_seek(fd, "seek walk after close");
  close(fd);
  close(sfd);
  printf("done %ld operations, final size %ld\n", nops, size);
  return 0;
}
