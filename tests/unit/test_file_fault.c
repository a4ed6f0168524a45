/*
 * test_file_fault.c - failing disks and power loss under the file layer
 * (b2_file_pwrite / truncate / flush / close through the shared cache).
 * Built in the fault flavour only (make build/fault/tests/test_file_fault:
 * -DB2_FAULT_INJECTION arms the hooks of src/common/fileio.c); the
 * frame-level commit, compaction and creation faults are test_fwrite's.
 *
 * The change S0 -> S1 is a sequence of writes (partial chunks, whole
 * chunks, zeros, past the end), a shrink and a flush, on a cache small
 * enough that dirty chunks are staged to disk during the writes, so I/O
 * happens inside pwrite as well as inside flush.
 *
 * Faults: a dry run counts the calls of each operation; then every call
 * fails in turn (EIO, ENOSPC, and for pwrite a short write) and:
 *   - the failure reaches the caller (pwrite, truncate, flush or close), or
 *     the engine redid the failed work itself (staging retried);
 *   - right after the failing call, a fresh open finds a valid frame
 *     holding S0, or S1 when the failure came after the commit point;
 *   - the caller retries the call once the fault is gone (the fault fires
 *     once) and the final flush leaves exactly S1 on disk, read back both
 *     by a fresh frame open and by a new file handle;
 *   - a failing close loses the unflushed data but reports it and leaves
 *     S0 or S1; reopening and redoing the change gives S1.
 * Creation: b2_file_create under every fault leaves nothing or a valid
 * empty frame under the name (no empty sparse directory).
 *
 * Parked chunks: an array in tiles written in C order through a small
 * cache, a pwrite failing in turn: the array is exact after retries.
 *
 * Power loss: every write, sync, create, rename, unlink and truncate the
 * engine issues while S0 -> S1 (flush), S1 -> S2 (flush) and a compaction
 * run is recorded; each prefix of the events is replayed onto a copy of
 * S0 (in order; with the writes no later sync covers dropped; with a
 * random subset of them kept; with the directory operations after the last
 * directory sync also cut at a random point) and the frame must then be
 * valid and hold S_i or S_i+1, where i counts the flushes that had
 * returned before the cut.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "b2_error.h"
#include "b2_file.h"
#include "b2_frame.h"
#include "common/fileio.h"
#ifdef B2_FAULT_INJECTION
#include "t.h"

#define CS 8192 /* chunk size: the change touches ~10 chunks */

static char root[256];

/* Copy a file or a tree of directories and files to `to` (replaced). */
static int copy_rec(const char *from, const char *to) {
  struct stat st;
  if (lstat(from, &st) < 0) return -1;
  if (S_ISDIR(st.st_mode)) {
    if (mkdir(to, st.st_mode & 07777) < 0) return -1;
    DIR *d = opendir(from);
    if (!d) return -1;
    struct dirent *de;
    int rc = 0;
    while (!rc && (de = readdir(d))) {
      if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
      char a[1024], b[1024];
      snprintf(a, sizeof a, "%s/%s", from, de->d_name);
      snprintf(b, sizeof b, "%s/%s", to, de->d_name);
      rc = copy_rec(a, b);
    }
    closedir(d);
    return rc;
  }
  int in = open(from, O_RDONLY);
  int out = in < 0 ? -1 : open(to, O_WRONLY | O_CREAT | O_EXCL, st.st_mode & 07777);
  int rc = in < 0 || out < 0 ? -1 : 0;
  char buf[65536];
  ssize_t n;
  while (!rc && (n = read(in, buf, sizeof buf)) != 0)
    if (n < 0 || write(out, buf, (size_t)n) != n) rc = -1;
  if (in >= 0) close(in);
  if (out >= 0) close(out);
  return rc;
}

/* Remove a file or a tree (nothing there is fine). */
static void rm_rec(const char *path) {
  struct stat st;
  if (lstat(path, &st) < 0) return;
  if (S_ISDIR(st.st_mode)) {
    DIR *d = opendir(path);
    struct dirent *de;
    while (d && (de = readdir(d))) {
      if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
      char a[1024];
      snprintf(a, sizeof a, "%s/%s", path, de->d_name);
      rm_rec(a);
    }
    if (d) closedir(d);
    rmdir(path);
  } else {
    unlink(path);
  }
}

static int copy_tree(const char *from, const char *to) {
  rm_rec(to);
  return copy_rec(from, to);
}

/* ---- content models -------------------------------------------------------- */

typedef struct model {
  uint8_t *b;
  int64_t n;
} model;

static void model_resize(model *m, int64_t n) {
  m->b = realloc(m->b, n > 0 ? (size_t)n : 1);
  if (n > m->n) memset(m->b + m->n, 0, (size_t)(n - m->n));
  m->n = n;
}

static void model_copy(model *dst, const model *src) {
  model_resize(dst, src->n);
  if (src->n) memcpy(dst->b, src->b, (size_t)src->n);
}

/* Bytes tagged by `tag`: runs and noise (some chunks compress, some not). */
static void pattern(uint8_t *p, int64_t off, int64_t n, uint32_t tag) {
  uint32_t x = tag * 2654435761u + 1;
  for (int64_t k = 0; k < n; k++) {
    int64_t q = off + k;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    p[k] = (uint8_t)((tag & 1) ? x : (q / 64) * 7 + tag);
  }
}

/* Which of the models the frame at `path` holds (0..n-1), -1 for none,
 * -2 when it does not open or fails its check. */
static int disk_is(const char *path, const model *const *ms, int n) {
  b2_frame *f;
  if (b2_frame_open(path, &f) < 0) return -2;
  int which = -1;
  if (b2_frame_check(f) < 0) {
    which = -2;
  } else {
    b2_frame_info in;
    b2_frame_info_copy(f, &in);
    uint8_t *buf = malloc(CS);
    uint8_t *all = malloc(in.nbytes > 0 ? (size_t)in.nbytes : 1);
    int ok = in.nbytes >= 0 && buf && all;
    for (int64_t i = 0; ok && i < in.nchunks; i++) {
      int rc = b2_frame_decode_chunk(f, i, buf, CS);
      int64_t want = in.nbytes - i * CS < CS ? in.nbytes - i * CS : CS;
      if (rc != want) {
        ok = 0;
        which = -2;
      } else {
        memcpy(all + i * CS, buf, (size_t)rc);
      }
    }
    for (int k = 0; ok && k < n && which < 0; k++)
      if (ms[k]->n == in.nbytes && (!in.nbytes || !memcmp(ms[k]->b, all, (size_t)in.nbytes)))
        which = k;
    free(buf);
    free(all);
  }
  b2_frame_close(f);
  return which;
}

/* Read the whole file through a new handle and compare. */
static int handle_reads(b2_env *env, const char *path, const model *m) {
  b2_file *f;
  if (b2_file_open(env, path, B2_VIEW_LOGICAL, B2_OPEN_RDONLY, &f) < 0) return 0;
  uint8_t *buf = malloc((size_t)m->n + 1);
  ssize_t r = b2_file_pread(f, buf, (size_t)m->n + 1, 0);
  int ok = b2_file_size(f) == m->n && r == m->n && !memcmp(buf, m->b, (size_t)m->n);
  free(buf);
  b2_file_close(f);
  return ok;
}

/* ---- the file under test ------------------------------------------------- */

static void params(b2_frame_params *p, int layout, int codec) {
  b2_frame_params_default(p);
  p->layout = layout;
  p->chunksize = CS;
  p->cparams.codec = codec;
  p->cparams.clevel = 5;
  p->cparams.typesize = 4;
}

/* A small cache (4 chunks, 2 of them dirty) and no pool: deterministic
 * I/O order, staging during writes. */
static b2_env *make_env(void) {
  b2_env_opts o;
  b2_env_opts_default(&o);
  o.cache_size = 4 * CS;
  o.dirty_max = 2 * CS;
  o.nthreads = 0;
  o.readahead = 0;
  o.idle_ms = 0;
  b2_env *env = NULL;
  if (b2_env_create(&o, &env) < 0) return NULL;
  return env;
}

/* S0: a new frame of 9 chunks and a bit, flushed and closed. */
static int make_s0(const char *path, int layout, int codec, model *m) {
  rm_rec(path);
  b2_env *env = make_env();
  b2_frame_params p;
  params(&p, layout, codec);
  b2_file *f;
  int rc = b2_file_create(env, path, &p, &f);
  if (rc < 0) {
    b2_env_destroy(env);
    return rc;
  }
  model_resize(m, 9 * CS + 3000);
  pattern(m->b, 0, m->n, 3);
  for (int64_t off = 0; off < m->n && rc >= 0; off += 5000) {
    int64_t n = m->n - off < 5000 ? m->n - off : 5000;
    rc = (int)b2_file_pwrite(f, m->b + off, (size_t)n, off);
  }
  if (rc >= 0) rc = b2_file_flush(f);
  int rc2 = b2_file_close(f);
  b2_env_destroy(env);
  return rc < 0 ? rc : rc2;
}

/* What a failing call saw. */
typedef struct run_log {
  int failed;   /* calls that returned an error */
  int errors;   /* retries that failed too */
  int badview;  /* a crash view that was neither S0 nor S1 */
  int flush_failed; /* the final flush (or close) failed */
  const char *path;
  const model *s0, *s1;
  char first[96]; /* the first failing call */
} run_log;

/* After a failing call: the disk holds S0 or S1 (valid), then retry. */
static void failed_call(run_log *L, const char *what) {
  if (!L->failed++) snprintf(L->first, sizeof L->first, "%s: %s", what, b2_last_detail());
  if (L->path) {
    const model *ms[2] = {L->s0, L->s1};
    int w = disk_is(L->path, ms, 2);
    if (w < 0) {
      L->badview++;
      fprintf(stderr, "  after failing %s the frame is %s\n", what,
              w == -2 ? "invalid" : "neither S0 nor S1");
    }
  }
}

/* A lasting fault (a full disk, a dead sector): once it fired, every
 * later call of the operation fails too, until sticky_op is reset. */
static int sticky_op = -1, sticky_err, sticky_hit;
static void sticky_rearm(void) {
  if (sticky_op < 0 || !b2_io_fault_fired()) return;
  sticky_hit = 1;
  b2_io_fault_set(sticky_op, 1, sticky_err);
}

/* Run a call; on failure note it and (unless the fault lasts) retry once. */
#define DO(L, call, what)                          \
  do {                                             \
    if ((call) < 0) {                              \
      failed_call(L, what);                        \
      if (sticky_op < 0 && (call) < 0) (L)->errors++; \
    }                                              \
    sticky_rearm();                                \
  } while (0)

/* S0 -> S1 on an open handle (every call retried once); `m` becomes S1.
 * `last` 0: end with flush; 1: end with close (f is gone after). */
static void change(b2_file *f, model *m, run_log *L, int last) {
  /* A partial chunk in the middle. */
  pattern(m->b + 2 * CS + 100, 2 * CS + 100, 3000, 11);
  DO(L, b2_file_pwrite(f, m->b + 2 * CS + 100, 3000, 2 * CS + 100), "pwrite partial");
  /* Two whole chunks. */
  pattern(m->b + 4 * CS, 4 * CS, 2 * CS, 12);
  DO(L, b2_file_pwrite(f, m->b + 4 * CS, 2 * CS, 4 * CS), "pwrite whole");
  /* Shrink into chunk 7. */
  model_resize(m, 7 * CS + 500);
  DO(L, b2_file_truncate(f, 7 * CS + 500), "truncate");
  /* Past the end: a gap of zeros, then data. */
  model_resize(m, 10 * CS + 700);
  pattern(m->b + 9 * CS, 9 * CS, CS + 700, 13);
  DO(L, b2_file_pwrite(f, m->b + 9 * CS, CS + 700, 9 * CS), "pwrite past the end");
  /* A chunk of zeros (a special chunk), then a few bytes in chunk 1. */
  memset(m->b, 0, CS);
  DO(L, b2_file_pwrite(f, m->b, CS, 0), "pwrite zeros");
  pattern(m->b + CS + 10, CS + 10, 20, 14);
  DO(L, b2_file_pwrite(f, m->b + CS + 10, 20, CS + 10), "pwrite small");
  if (last == 0) {
    if (b2_file_flush(f) < 0) {
      failed_call(L, "flush");
      L->flush_failed = 1;
      if (sticky_op < 0 && b2_file_flush(f) < 0) L->errors++;
    }
  } else if (b2_file_close(f) < 0) {
    failed_call(L, "close");
    L->flush_failed = 1;
  }
}

static const char *const op_name[B2_IO_NOPS] = {
    "open", "pwrite", "fsync", "fdatasync", "rename",
    "link", "unlink", "ftruncate", "mkdir"};

static const char *err_name(int e) {
  return e == EIO ? "EIO" : e == ENOSPC ? "ENOSPC" : "SHORT";
}

/* Every call of every operation during the change fails in turn. */
static void sweep(int layout, int codec, int last) {
  char path[512], saved[512];
  const char *ext = layout ? "sparse" : "b2frame";
  snprintf(path, sizeof path, "%s/ff.%s", root, ext);
  snprintf(saved, sizeof saved, "%s/ff-s0.%s", root, ext);
  model s0 = {0}, s1 = {0};
  b2_io_fault_set(0, 0, 0);
  CHECK_EQ(make_s0(path, layout, codec, &s0), 0);
  CHECK_EQ(copy_tree(path, saved), 0);
  /* Dry run: S1 and the calls of each operation. */
  b2_env *env = make_env();
  b2_file *f;
  CHECK_EQ(b2_file_open(env, path, B2_VIEW_LOGICAL, B2_OPEN_RDWR, &f), 0);
  if (!f) return;
  model_copy(&s1, &s0);
  run_log L = {0};
  b2_io_fault_set(0, 0, 0);
  change(f, &s1, &L, last);
  long count[B2_IO_NOPS];
  for (int op = 0; op < B2_IO_NOPS; op++) count[op] = b2_io_count(op);
  if (last == 0) CHECK_EQ(b2_file_close(f), 0);
  b2_env_destroy(env);
  CHECK_EQ(L.failed, 0);
  const model *ms[2] = {&s0, &s1};
  CHECK_EQ(disk_is(path, ms, 2), 1);

  int runs = 0, fired = 0, absorbed = 0, bad = 0, absorbed_by[B2_IO_NOPS] = {0};
  static const int errs[3] = {EIO, ENOSPC, B2_IO_SHORT};
  for (int op = 0; op < B2_IO_NOPS; op++) {
    for (long nth = 1; nth <= count[op]; nth++) {
      for (int e = 0; e < 3; e++) {
        if (errs[e] == B2_IO_SHORT && op != B2_IO_PWRITE) continue;
        if (last && errs[e] != EIO) continue; /* close: EIO is enough */
        b2_io_fault_set(0, 0, 0);
        if (copy_tree(saved, path) < 0) {
          bad++;
          continue;
        }
        env = make_env();
        if (b2_file_open(env, path, B2_VIEW_LOGICAL, B2_OPEN_RDWR, &f) < 0) {
          bad++;
          b2_env_destroy(env);
          continue;
        }
        model m = {0};
        model_copy(&m, &s0);
        run_log R = {0, 0, 0, 0, path, &s0, &s1, ""};
        b2_io_fault_set(op, nth, errs[e]);
        change(f, &m, &R, last);
        int hit = b2_io_fault_fired();
        b2_io_fault_set(0, 0, 0);
        runs++;
        fired += hit;
        char tag[96];
        snprintf(tag, sizeof tag, "%s %s #%ld %s%s", layout ? "sparse" : "contig",
                 op_name[op], nth, err_name(errs[e]), last ? " (close)" : "");
        int w;
        if (last == 0) {
          /* The retries succeeded and S1 is on disk, for frame readers
           * and for a new handle alike. */
          int ok = R.errors == 0 && R.badview == 0;
          CHECK_EQ(b2_file_close(f), 0);
          w = disk_is(path, ms, 2);
          if (w != 1 || !handle_reads(env, path, &s1)) ok = 0;
          if (!ok) {
            bad++;
            fprintf(stderr, "  %s: %d retries failed, %d bad views, disk %d (%s)\n", tag,
                    R.errors, R.badview, w, R.first);
          }
        } else {
          /* A failing close: S0 or S1, and the change can be redone. */
          w = disk_is(path, ms, 2);
          int ok = w >= 0 && R.badview == 0;
          if (w >= 0 && b2_file_open(env, path, B2_VIEW_LOGICAL, B2_OPEN_RDWR, &f) == 0) {
            model m2 = {0};
            model_copy(&m2, w ? &s1 : &s0);
            if (!handle_reads(env, path, &m2)) ok = 0;
            model_copy(&m2, &s0);
            run_log R2 = {0};
            change(f, &m2, &R2, 1);
            if (R2.failed || disk_is(path, ms, 2) != 1) ok = 0;
            free(m2.b);
          } else {
            ok = 0;
          }
          if (!ok) {
            bad++;
            fprintf(stderr, "  %s: after the failing close the disk is %d (%s)\n", tag, w,
                    R.first);
          }
        }
        /* A fault the caller never heard of: fine only if the work was
         * redone (the content check above passed) and it was not a sync
         * of data the engine then trusted.  Listed for the record. */
        if (hit && !R.failed && op != B2_IO_UNLINK) {
          absorbed++;
          absorbed_by[op]++;
          if (op == B2_IO_FSYNC || op == B2_IO_FDATASYNC) {
            bad++;
            fprintf(stderr, "  %s: a failed sync was not reported\n", tag);
          }
        }
        b2_env_destroy(env);
        free(m.b);
      }
    }
  }
  char by[200] = "";
  for (int op = 0; op < B2_IO_NOPS; op++)
    if (absorbed_by[op])
      snprintf(by + strlen(by), sizeof by - strlen(by), " %s:%d", op_name[op], absorbed_by[op]);
  fprintf(stderr, "  %s %s%s: %d fault runs, %d fired, %d not reported but redone (%s)\n",
          layout ? "sparse" : "contig", b2_codec_name(codec), last ? ", ending with close" : "",
          runs, fired, absorbed, absorbed ? by + 1 : "none");
  CHECK(runs > 5);
  CHECK(fired > runs / 2);
  CHECK_EQ(bad, 0);
  free(s0.b);
  free(s1.b);
}

/* Lasting faults: from the nth call on, every call of the operation
 * fails.  The final flush must then fail; the disk holds S0 or S1; once
 * the disk is healthy again, doing the change again and flushing gives S1
 * on the same handle. */
static void sweep_lasting(int layout, int codec) {
  char path[512], saved[512];
  const char *ext = layout ? "sparse" : "b2frame";
  snprintf(path, sizeof path, "%s/fl.%s", root, ext);
  snprintf(saved, sizeof saved, "%s/fl-s0.%s", root, ext);
  model s0 = {0}, s1 = {0};
  b2_io_fault_set(0, 0, 0);
  CHECK_EQ(make_s0(path, layout, codec, &s0), 0);
  CHECK_EQ(copy_tree(path, saved), 0);
  b2_env *env = make_env();
  b2_file *f;
  CHECK_EQ(b2_file_open(env, path, B2_VIEW_LOGICAL, B2_OPEN_RDWR, &f), 0);
  if (!f) return;
  model_copy(&s1, &s0);
  run_log L = {0};
  b2_io_fault_set(0, 0, 0);
  change(f, &s1, &L, 0);
  long count[B2_IO_NOPS];
  for (int op = 0; op < B2_IO_NOPS; op++) count[op] = b2_io_count(op);
  CHECK_EQ(b2_file_close(f), 0);
  b2_env_destroy(env);
  const model *ms[2] = {&s0, &s1};
  int runs = 0, bad = 0;
  for (int op = 0; op < B2_IO_NOPS; op++) {
    for (long nth = 1; nth <= count[op]; nth++) {
      for (int e = 0; e < 2; e++) {
        int err = e ? ENOSPC : EIO;
        b2_io_fault_set(0, 0, 0);
        if (copy_tree(saved, path) < 0) {
          bad++;
          continue;
        }
        env = make_env();
        if (b2_file_open(env, path, B2_VIEW_LOGICAL, B2_OPEN_RDWR, &f) < 0) {
          bad++;
          b2_env_destroy(env);
          continue;
        }
        model m = {0};
        model_copy(&m, &s0);
        run_log R = {0, 0, 0, 0, path, &s0, &s1, ""};
        sticky_op = op;
        sticky_err = err;
        sticky_hit = 0;
        b2_io_fault_set(op, nth, err);
        change(f, &m, &R, 0);
        int hit = sticky_hit || b2_io_fault_fired();
        sticky_op = -1;
        b2_io_fault_set(0, 0, 0);
        runs++;
        int w = disk_is(path, ms, 2);
        int ok = R.badview == 0 && w >= 0 && (R.flush_failed || w == 1);
        if (hit && !R.flush_failed && op != B2_IO_UNLINK) ok = 0;
        /* The disk is back: the same change again, on the same handle. */
        model m2 = {0};
        model_copy(&m2, &s0);
        run_log R2 = {0};
        change(f, &m2, &R2, 0);
        if (R2.failed || b2_file_close(f) < 0 || disk_is(path, ms, 2) != 1 ||
            !handle_reads(env, path, &s1))
          ok = 0;
        if (!ok) {
          bad++;
          fprintf(stderr, "  %s %s from #%ld %s on: flush %s, disk %d, %d bad views, "
                  "redo %d failures (%s)\n", layout ? "sparse" : "contig", op_name[op], nth,
                  err_name(err), R.flush_failed ? "failed" : "succeeded", w, R.badview,
                  R2.failed, R.first);
        }
        b2_env_destroy(env);
        free(m.b);
        free(m2.b);
      }
    }
  }
  fprintf(stderr, "  %s %s, lasting faults: %d runs\n", layout ? "sparse" : "contig",
          b2_codec_name(codec), runs);
  CHECK(runs > 10);
  CHECK_EQ(bad, 0);
  free(s0.b);
  free(s1.b);
}

static void test_faults_contiguous(void) { sweep(B2_LAYOUT_CONTIGUOUS, B2_CODEC_ZSTD, 0); }
static void test_faults_sparse(void) { sweep(B2_LAYOUT_SPARSE, B2_CODEC_LZ4, 0); }
static void test_lasting_faults_contiguous(void) {
  sweep_lasting(B2_LAYOUT_CONTIGUOUS, B2_CODEC_BLOSCLZ);
}
static void test_lasting_faults_sparse(void) { sweep_lasting(B2_LAYOUT_SPARSE, B2_CODEC_ZSTD); }
static void test_faults_close_contiguous(void) { sweep(B2_LAYOUT_CONTIGUOUS, B2_CODEC_LZ4, 1); }
static void test_faults_close_sparse(void) { sweep(B2_LAYOUT_SPARSE, B2_CODEC_ZSTD, 1); }

/* b2_file_create under every fault: nothing, or a valid empty frame. */
static void test_faults_create(void) {
  for (int layout = 0; layout < 2; layout++) {
    char path[512];
    snprintf(path, sizeof path, "%s/new.%s", root, layout ? "sparse" : "b2frame");
    b2_frame_params p;
    params(&p, layout, B2_CODEC_ZSTD);
    rm_rec(path);
    b2_env *env = make_env();
    b2_file *f;
    b2_io_fault_set(0, 0, 0);
    CHECK_EQ(b2_file_create(env, path, &p, &f), 0);
    long count[B2_IO_NOPS];
    for (int op = 0; op < B2_IO_NOPS; op++) count[op] = b2_io_count(op);
    b2_file_close(f);
    model empty = {0};
    const model *ms[1] = {&empty};
    int bad = 0, runs = 0;
    for (int op = 0; op < B2_IO_NOPS; op++) {
      for (long nth = 1; nth <= count[op]; nth++) {
        rm_rec(path);
        f = NULL;
        b2_io_fault_set(op, nth, op == B2_IO_PWRITE ? B2_IO_SHORT : EIO);
        int rc = b2_file_create(env, path, &p, &f);
        int hit = b2_io_fault_fired();
        b2_io_fault_set(0, 0, 0);
        runs++;
        if (f) b2_file_close(f);
        struct stat st;
        int there = lstat(path, &st) == 0;
        if ((hit && rc == 0 && op != B2_IO_UNLINK) || (rc == 0 && !there) ||
            (there && disk_is(path, ms, 1) != 0)) {
          bad++;
          fprintf(stderr, "  create, %s %s #%ld: rc %d, %s\n", layout ? "sparse" : "contig",
                  op_name[op], nth, rc, there ? "an invalid frame is left" : "nothing left");
        }
        /* A retry works (leftover temporaries are cleared). */
        if (!there) {
          if (b2_file_create(env, path, &p, &f) < 0 || disk_is(path, ms, 1) != 0) bad++;
          else b2_file_close(f);
        }
      }
    }
    b2_env_destroy(env);
    CHECK(runs > 3);
    CHECK_EQ(bad, 0);
  }
}

/* ---- power loss ---------------------------------------------------------- */

enum { EV_FLUSHED = 100 }; /* a marker: a flush (or compaction) returned */

typedef struct pev {
  int op;
  char path[512], path2[512];
  int64_t off;
  uint8_t *data;
  size_t len;
  int flags;
} pev;

static pev *evs;
static int nev, capev;
static pthread_mutex_t ev_mu = PTHREAD_MUTEX_INITIALIZER;

static void fd_path(int fd, const char *name, char *out, size_t cap) {
  if (fd == AT_FDCWD || fd < 0) {
    snprintf(out, cap, "%s", name ? name : "");
    return;
  }
  char link[64], dir[512];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, dir, sizeof dir - 1);
  dir[n > 0 ? n : 0] = '\0';
  if (name) snprintf(out, cap, "%s/%s", dir, name);
  else snprintf(out, cap, "%s", dir);
}

static pev *ev_new(int op) {
  if (nev == capev) {
    capev = capev ? 2 * capev : 128;
    evs = realloc(evs, (size_t)capev * sizeof *evs);
  }
  pev *e = &evs[nev++];
  memset(e, 0, sizeof *e);
  e->op = op;
  return e;
}

static void recorder(void *ctx, const b2_io_event *ev) {
  (void)ctx;
  if (ev->op == B2_IO_OPEN && !(ev->flags & O_CREAT)) return;
  pthread_mutex_lock(&ev_mu);
  pev *e = ev_new(ev->op);
  e->off = ev->off;
  e->flags = ev->flags;
  switch (ev->op) {
    case B2_IO_OPEN: case B2_IO_UNLINK: case B2_IO_MKDIR:
      fd_path(ev->dirfd, ev->name, e->path, sizeof e->path);
      break;
    case B2_IO_RENAME: case B2_IO_LINK:
      fd_path(ev->dirfd, ev->name, e->path, sizeof e->path);
      fd_path(ev->dirfd2, ev->name2, e->path2, sizeof e->path2);
      break;
    default:
      fd_path(ev->fd, NULL, e->path, sizeof e->path);
      break;
  }
  if (ev->op == B2_IO_PWRITE) {
    e->data = malloc(ev->len ? ev->len : 1);
    memcpy(e->data, ev->data, ev->len);
    e->len = ev->len;
  }
  pthread_mutex_unlock(&ev_mu);
}

static void marker(void) {
  pthread_mutex_lock(&ev_mu);
  ev_new(EV_FLUSHED);
  pthread_mutex_unlock(&ev_mu);
}

static int is_sync(int op) { return op == B2_IO_FSYNC || op == B2_IO_FDATASYNC; }
static int is_nsop(int op) {
  return op == B2_IO_OPEN || op == B2_IO_RENAME || op == B2_IO_LINK || op == B2_IO_UNLINK ||
         op == B2_IO_MKDIR;
}

static void map_path(const char *p, const char *from, const char *to, char *out, size_t cap) {
  size_t fl = strlen(from);
  if (!strncmp(p, from, fl)) snprintf(out, cap, "%s%s", to, p + fl);
  else snprintf(out, cap, "%s", p);
}

static uint32_t prng = 1;
static uint32_t rnd32(void) { return t_xorshift32(&prng); }

/* Is write j of a prefix of k events covered by a later sync of its file? */
static int synced_in(int j, int k) {
  for (int s = j + 1; s < k; s++)
    if (is_sync(evs[s].op) && !strcmp(evs[s].path, evs[j].path)) return 1;
  return 0;
}

/* Replay modes: which of the writes no sync covers (the "unsynced" ones)
 * reach the disk. */
enum {
  PL_ALL,       /* all of them, in order */
  PL_NONE,      /* none */
  PL_ONLY,      /* only the unsynced write number `sel` */
  PL_ALL_BUT,   /* all but that one */
  PL_NSCUT,     /* none, and the namespace operations after the last
                   directory sync only up to a random point */
  PL_NMODES
};

/* Apply events [0, k) under `to` in `mode`. */
static int replay(int k, int mode, int sel, const char *from, const char *to) {
  int nscut = k;
  if (mode == PL_NSCUT) {
    int lastdir = 0;
    for (int j = 0; j < k; j++) {
      struct stat st;
      /* A sync of a directory: every namespace change before it stays. */
      if (is_sync(evs[j].op) && stat(evs[j].path, &st) == 0 && S_ISDIR(st.st_mode)) lastdir = j;
    }
    nscut = lastdir + (int)(rnd32() % (uint32_t)(k - lastdir + 1));
  }
  int nun = 0; /* unsynced writes met so far */
  for (int j = 0; j < k; j++) {
    const pev *e = &evs[j];
    char a[1100], b[1100];
    map_path(e->path, from, to, a, sizeof a);
    map_path(e->path2, from, to, b, sizeof b);
    if (is_nsop(e->op) && j >= nscut) continue;
    int fd;
    switch (e->op) {
      case B2_IO_OPEN:
        fd = open(a, O_WRONLY | O_CREAT | (e->flags & O_TRUNC), 0644);
        if (fd >= 0) close(fd);
        break;
      case B2_IO_PWRITE: {
        if (mode != PL_ALL && !synced_in(j, k)) {
          int me = nun++;
          int keep = mode == PL_ONLY ? me == sel : mode == PL_ALL_BUT ? me != sel : 0;
          if (!keep) break;
        }
        fd = open(a, O_WRONLY);
        if (fd < 0) break; /* its creation was cut */
        if (pwrite(fd, e->data, e->len, (off_t)e->off) != (ssize_t)e->len) {
          close(fd);
          return -1;
        }
        close(fd);
        break;
      }
      case B2_IO_FTRUNCATE:
        if (truncate(a, (off_t)e->off) != 0 && errno != ENOENT) return -1;
        break;
      case B2_IO_RENAME:
        if (rename(a, b) != 0 && errno != ENOENT) return -1;
        break;
      case B2_IO_LINK:
        if (link(a, b) != 0 && errno != ENOENT) return -1;
        break;
      case B2_IO_UNLINK:
        if (e->flags & AT_REMOVEDIR) {
          if (rmdir(a) != 0 && errno != ENOENT) return -1;
        } else if (unlink(a) != 0 && errno != ENOENT) {
          return -1;
        }
        break;
      case B2_IO_MKDIR:
        if (mkdir(a, 0755) != 0 && errno != EEXIST) return -1;
        break;
      default:
        break;
    }
  }
  return 0;
}

/* Unsynced writes in a prefix of k events. */
static int unsynced(int k) {
  int n = 0;
  for (int j = 0; j < k; j++) n += evs[j].op == B2_IO_PWRITE && !synced_in(j, k);
  return n;
}

static void power_loss(int layout, int codec) {
  char dir[512], base[512], rep[512], path[600], rpath[1200];
  snprintf(dir, sizeof dir, "%s/pl", root);
  snprintf(base, sizeof base, "%s/pl-base", root);
  snprintf(rep, sizeof rep, "%s/pl-rep", root);
  rm_rec(dir);
  mkdir(dir, 0755);
  snprintf(path, sizeof path, "%s/f.%s", dir, layout ? "sparse" : "b2frame");
  model s[3] = {{0}, {0}, {0}};
  b2_io_fault_set(0, 0, 0);
  CHECK_EQ(make_s0(path, layout, codec, &s[0]), 0);
  CHECK_EQ(copy_tree(dir, base), 0);
  b2_env *env = make_env();
  b2_file *f;
  CHECK_EQ(b2_file_open(env, path, B2_VIEW_LOGICAL, B2_OPEN_RDWR, &f), 0);
  if (!f) return;
  for (int k = 0; k < nev; k++) free(evs[k].data);
  nev = 0;
  b2_io_record(recorder, NULL);
  run_log L = {0};
  model_copy(&s[1], &s[0]);
  change(f, &s[1], &L, 0); /* ends with a flush */
  marker();
  /* S1 -> S2: grow, rewrite the first chunks, flush, compact. */
  model_copy(&s[2], &s[1]);
  model_resize(&s[2], 12 * CS + 77);
  pattern(s[2].b, 0, 2 * CS + 5, 21);
  pattern(s[2].b + 11 * CS, 11 * CS, CS + 77, 22);
  CHECK_EQ(b2_file_pwrite(f, s[2].b, 2 * CS + 5, 0), 2 * CS + 5);
  CHECK_EQ(b2_file_pwrite(f, s[2].b + 11 * CS, CS + 77, 11 * CS), CS + 77);
  CHECK_EQ(b2_file_flush(f), 0);
  marker();
  CHECK_EQ(b2_file_compact(f), 0);
  marker();
  b2_io_record(NULL, NULL);
  CHECK_EQ(b2_file_close(f), 0);
  b2_env_destroy(env);
  CHECK_EQ(L.failed, 0);
  const model *ms[3] = {&s[0], &s[1], &s[2]};
  CHECK_EQ(disk_is(path, ms, 3), 2);

  int bad = 0, checked = 0;
  int seen[3] = {0};
  prng = 12345u + (uint32_t)layout;
  for (int mode = 0; mode < PL_NMODES; mode++) {
    int last = 0; /* in order: never back to an older state */
    for (int k = 0; k <= nev; k++) {
      int acked = 0;
      for (int j = 0; j < k; j++) acked += evs[j].op == EV_FLUSHED;
      if (acked > 2) acked = 2;
      int nsel = mode == PL_ONLY || mode == PL_ALL_BUT ? unsynced(k) : 1;
      for (int sel = 0; sel < nsel; sel++) {
        if (copy_tree(base, rep) < 0 || replay(k, mode, sel, dir, rep) < 0) {
          fprintf(stderr, "  replay of %d events (mode %d) failed\n", k, mode);
          bad++;
          continue;
        }
        map_path(path, dir, rep, rpath, sizeof rpath);
        int w = disk_is(rpath, ms, 3);
        checked++;
        if (w >= 0) seen[w] = 1;
        int ok = w >= acked && w <= acked + 1;
        if (mode == PL_ALL && w < last) ok = 0;
        if (mode == PL_ALL && w > last) last = w;
        if (!ok) {
          bad++;
          fprintf(stderr, "  %s: cut after %d of %d events (mode %d, unsynced write %d): %s, "
                  "%d flushes acknowledged\n", layout ? "sparse" : "contig", k, nev, mode, sel,
                  w == -2 ? "invalid frame" : w == -1 ? "no state" : "an older state", acked);
        }
      }
    }
  }
  fprintf(stderr, "  %s %s: %d events, %d cuts checked, states seen %d%d%d\n",
          layout ? "sparse" : "contig", b2_codec_name(codec), nev, checked, seen[0], seen[1],
          seen[2]);
  CHECK(nev > 10);
  CHECK(seen[0] && seen[1] && seen[2]);
  CHECK_EQ(bad, 0);
  for (int k = 0; k < 3; k++) free(s[k].b);
}

/* An array in tiles written in C order through a cache smaller than a
 * row of its chunks, so that chunks are parked uncompressed beside the
 * frame (src/file/spill.c) and written there: every third pwrite of the
 * run fails in turn (EIO, ENOSPC, a short write).  A failed write reaches the
 * caller, who retries it once (the fault fires once), or the engine took
 * the chunk through the cache instead; the flush (retried once) then
 * leaves exactly the array written, read back by a new handle. */
static int array_run(const char *path, const uint8_t *npy, size_t n, size_t piece, int *failed) {
  b2_env_opts o;
  b2_env_opts_default(&o);
  o.cache_size = 96 << 10; /* a row of chunks: 12 x 16 KiB */
  o.dirty_max = 48 << 10;
  o.nthreads = 0;
  o.readahead = 0;
  o.idle_ms = 0;
  b2_env *env;
  if (b2_env_create(&o, &env) < 0) return -1;
  unlink(path);
  b2_file *f = NULL;
  int rc = b2_file_create_npy(env, path, NULL, &f);
  if (rc < 0) { /* the creation's own writes failed: once more */
    (*failed)++;
    f = NULL;
    unlink(path);
    rc = b2_file_create_npy(env, path, NULL, &f);
    if (rc < 0) f = NULL;
  }
  if (rc == 0 && (b2_file_set_param(f, "chunkshape", "16,256") < 0 ||
                  b2_file_set_param(f, "blockshape", "8,64") < 0))
    rc = -1;
  for (size_t off = 0; rc == 0 && off < n;) {
    size_t k = n - off < piece ? n - off : piece;
    if (b2_file_pwrite(f, npy + off, k, (int64_t)off) != (ssize_t)k) {
      (*failed)++;
      if (b2_file_pwrite(f, npy + off, k, (int64_t)off) != (ssize_t)k) rc = -1;
    }
    off += k;
  }
  if (rc == 0 && b2_file_flush(f) < 0) {
    (*failed)++;
    if (b2_file_flush(f) < 0) rc = -1;
  }
  if (f && b2_file_close(f) < 0 && rc == 0) rc = -1;
  b2_env_destroy(env);
  return rc;
}

/* 64 x 3072 uint32 items as a .npy file (128-byte header), in *n bytes. */
static uint8_t *tiles_npy(size_t *n) {
  static const char hdr[] = "{'descr': '<u4', 'fortran_order': False, 'shape': (64, 3072), }";
  size_t hl = 128;
  *n = hl + 64 * 3072 * 4;
  uint8_t *npy = malloc(*n);
  memcpy(npy, "\x93NUMPY\x01\x00\x76\x00", 10);
  memset(npy + 10, ' ', hl - 10);
  memcpy(npy + 10, hdr, sizeof hdr - 1);
  npy[hl - 1] = '\n';
  for (size_t i = hl; i < *n; i += 4) {
    uint32_t v = (uint32_t)(i / 4 % 777) + 1; /* no zeros: a lost row shows */
    memcpy(npy + i, &v, 4);
  }
  return npy;
}

static void count_bytes(void *ctx, const b2_io_event *ev) {
  if (ev->op == B2_IO_PWRITE) *(size_t *)ctx += ev->len;
}

/* array_run with each `nth` call of `op` failing in turn (every `step`th
 * of them), with each of `nerr` errors: the array read back by a new
 * handle must be exact every time. */
static void array_faults(int op, long step, const int *errs, int nerr, size_t piece) {
  char path[300];
  snprintf(path, sizeof path, "%s/tiles.b2nd", root);
  size_t n;
  uint8_t *npy = tiles_npy(&n);
  b2_io_fault_set(0, 0, 0);
  int failed = 0;
  size_t written = 0;
  b2_io_record(count_bytes, &written);
  CHECK_EQ(array_run(path, npy, n, piece, &failed), 0);
  b2_io_record(NULL, NULL);
  /* Each chunk parked about once and stored once (with the compaction at
   * close): a parked chunk's entry left in the cache was parked whole
   * again at each write-back, 30 times the array here. */
  fprintf(stderr, "  %zu bytes written for an array of %zu\n", written, n);
  CHECK(written < 4 * n);
  long count = b2_io_count(op);
  CHECK(count > 2);
  CHECK_EQ(failed, 0);
  int runs = 0, bad = 0, surfaced = 0;
  for (long nth = 1; nth <= count; nth += step)
    for (int e = 0; e < nerr; e++) {
      failed = 0;
      b2_io_fault_set(op, nth, errs[e]);
      int rc = array_run(path, npy, n, piece, &failed);
      b2_io_fault_set(0, 0, 0);
      runs++;
      surfaced += failed > 0;
      b2_env *env = NULL;
      b2_file *f = NULL;
      uint8_t *got = malloc(n);
      int same = rc == 0 && b2_env_create(NULL, &env) == 0 &&
                 b2_file_open(env, path, B2_VIEW_NPY, B2_OPEN_RDONLY, &f) == 0 &&
                 b2_file_size(f) == (int64_t)n && b2_file_pread(f, got, n, 0) == (ssize_t)n &&
                 memcmp(got, npy, n) == 0;
      if (f) b2_file_close(f);
      if (env) b2_env_destroy(env);
      free(got);
      if (!same && bad++ < 5)
        fprintf(stderr, "  call #%ld of op %d fails (%d): run %d, the array differs\n", nth, op,
                errs[e], rc);
    }
  fprintf(stderr, "  %d runs, %ld calls in each; %d failures reached the writer\n", runs, count,
          surfaced);
  CHECK_EQ(bad, 0);
  free(npy);
}

static void test_faults_parked_array(void) {
  static const int errs[3] = {EIO, ENOSPC, B2_IO_SHORT};
  array_faults(B2_IO_PWRITE, 3, errs, 3, 3000); /* a third of them: time */
}

/* The same array written by writes that each cover rows of chunks whole,
 * each open failing in turn: the one of the unnamed file for parked
 * chunks (spill.c) among them, as on a file system without O_TMPFILE.  A
 * C-order write comes back to each tile once per row of its blocks, and
 * the tile, written back under the dirty limit and evicted meanwhile,
 * must come back with the rows this write gave it (it was once taken
 * afresh as zeros, since the write covers it whole). */
static void test_faults_unparked_array(void) {
  static const int errs[1] = {EIO};
  array_faults(B2_IO_OPEN, 1, errs, 1, 200000);
}

static void test_power_loss_contiguous(void) { power_loss(B2_LAYOUT_CONTIGUOUS, B2_CODEC_ZSTD); }
static void test_power_loss_sparse(void) { power_loss(B2_LAYOUT_SPARSE, B2_CODEC_LZ4); }

int main(void) {
  /* Many small commits, each with its syncs: on tmpfs when there is one
   * (the faults and the replays are simulated, real syncs add only time). */
  const char *t = getenv("TMPDIR");
  if (!t || !*t) t = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  snprintf(root, sizeof root, "%s/b2ff.XXXXXX", t);
  if (!mkdtemp(root)) {
    perror("mkdtemp");
    return 2;
  }
  T_RUN(test_faults_contiguous);
  T_RUN(test_faults_sparse);
  T_RUN(test_lasting_faults_contiguous);
  T_RUN(test_lasting_faults_sparse);
  T_RUN(test_faults_close_contiguous);
  T_RUN(test_faults_close_sparse);
  T_RUN(test_faults_create);
  T_RUN(test_faults_parked_array);
  T_RUN(test_faults_unparked_array);
  T_RUN(test_power_loss_contiguous);
  T_RUN(test_power_loss_sparse);
  for (int k = 0; k < nev; k++) free(evs[k].data);
  free(evs);
  if (!getenv("B2FF_KEEP")) rm_rec(root);
  T_END();
}

#else /* the sanitizer and release flavours build every unit test */
#include <stdio.h>
int main(void) {
  printf("skip test_file_fault: needs the fault flavour (make build/fault/tests/test_file_fault)\n");
  return 0;
}
#endif
