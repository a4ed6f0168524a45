/* cmd_pack.c - `b2f pack` (plain bytes into a frame), `b2f unpack` (a
 * frame's content into a plain file) and `b2f compact` (reclaim dead
 * space).  `-` names stdin or stdout. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "b2_error.h"
#include "b2_file.h"
#include "cli/cli.h"

#define IO_BUFSIZE (4u << 20)

/* ---- progress bar (only on a terminal) ------------------------------------ */
typedef struct {
  int on;
  int64_t total; /* 0 when unknown */
  double t0, last;
} progress;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void progress_start(progress *p, int64_t total) {
  p->on = isatty(STDERR_FILENO);
  p->total = total;
  p->t0 = p->last = now_s();
}

static void progress_show(progress *p, int64_t done, int final) {
  if (!p->on) return;
  double t = now_s();
  if (!final && t - p->last < 0.2) return;
  p->last = t;
  double mb = (double)done / 1048576.0, rate = mb / (t - p->t0 > 1e-6 ? t - p->t0 : 1e-6);
  if (p->total > 0) {
    int pct = (int)(100.0 * (double)done / (double)p->total);
    int bars = pct / 4;
    fprintf(stderr, "\r[%.*s%*s] %3d%% %8.1f MiB %7.1f MiB/s", bars,
            "#########################", 25 - bars, "", pct, mb, rate);
  } else {
    fprintf(stderr, "\r%8.1f MiB %7.1f MiB/s", mb, rate);
  }
  if (final) fputc('\n', stderr);
}

/* Read up to n bytes (short only at end of input). */
static ssize_t read_full(int fd, void *buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, (char *)buf + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    got += (size_t)r;
  }
  return (ssize_t)got;
}

/* Copy a finished temporary frame file to stdout. */
static int copy_to_stdout(const char *path) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) return -1;
  char *buf = malloc(IO_BUFSIZE);
  ssize_t r = 0;
  while (buf && (r = read_full(fd, buf, IO_BUFSIZE)) > 0)
    if (b2f_write_all(STDOUT_FILENO, buf, (size_t)r) < 0) {
      r = -1;
      break;
    }
  free(buf);
  close(fd);
  return buf && r == 0 ? 0 : -1;
}

static const char *pack_usage =
    "usage: b2f pack [-c CODEC] [-l CLEVEL] [-f FILTERS] [-t TYPESIZE] [--chunksize N]\n"
    "                [--blocksize N] [--sparse] [-j THREADS] [--force] IN OUT\n"
    "  CODEC blosclz|lz4|lz4hc|zlib|zstd (zstd), CLEVEL 0-9 (1), FILTERS a comma list of\n"
    "  shuffle,bitshuffle,delta,bytedelta,trunc_prec:BITS,int_trunc:BITS or none (shuffle),\n"
    "  TYPESIZE (8), chunksize (1M).  IN or OUT may be '-' (stdin, stdout).\n"
    "  IN ending in .npy (or --npy) is packed as a b2nd array (OUT.b2nd; the mount shows\n"
    "  it as a .npy file): --chunkshape A,B,.. --blockshape A,B,.. (chosen automatically\n"
    "  otherwise); --raw packs a .npy file as plain bytes instead.  Arrays also take\n"
    "  the codecs ndlz:CELL, zfp_acc:EXP, zfp_prec:BITS, zfp_rate:PCT and the filters\n"
    "  ndcell:CELL, ndmean:CELL (python-blosc2's codec_meta and filters_meta).\n";

int b2f_clear_output(const char *out, int force) {
  struct stat st;
  if (lstat(out, &st) < 0) return 0;
  if (!force) {
    fprintf(stderr, "b2f pack: %s exists (--force replaces a frame file)\n", out);
    return -1;
  }
  b2_frame *old;
  if (!S_ISREG(st.st_mode) || b2_frame_open(out, &old) < 0) {
    fprintf(stderr, "b2f pack: %s: not replaced: only a contiguous frame file is\n", out);
    return -1;
  }
  b2_frame_close(old);
  if (unlink(out) == 0) return 0;
  fprintf(stderr, "b2f pack: %s: cannot remove it: %s\n", out, strerror(errno));
  return -1;
}

int b2f_pack(int argc, char **argv) {
  b2_frame_params p;
  b2_frame_params_default(&p);
  int force = 0, threads = 2;
  const char *in = NULL, *out = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *key = NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(pack_usage, stdout);
      return 0;
    } else if (!strcmp(a, "-c") || !strcmp(a, "--codec")) key = "codec";
    else if (!strcmp(a, "-l") || !strcmp(a, "--clevel")) key = "clevel";
    else if (!strcmp(a, "-f") || !strcmp(a, "--filters")) key = "filters";
    else if (!strcmp(a, "-t") || !strcmp(a, "--typesize")) key = "typesize";
    else if (!strcmp(a, "--chunksize")) key = "chunksize";
    else if (!strcmp(a, "--blocksize")) key = "blocksize";
    else if (!strcmp(a, "--sparse")) p.layout = B2_LAYOUT_SPARSE;
    else if (!strcmp(a, "--force")) force = 1;
    else if (!strncmp(a, "-j", 2)) {
      const char *v = a[2] ? a + 2 : (++i < argc ? argv[i] : "");
      if ((threads = atoi(v)) < 1 || threads > 64)
        return b2f_usage_error("pack", "-j wants a thread count from 1 to 64");
    } else if (b2f_npy_option(argc, argv, &i)) { /* cmd_npy.c's options */
    } else if (a[0] == '-' && a[1]) {
      return b2f_usage_error("pack", "unknown option");
    } else if (!in) in = a;
    else if (!out) out = a;
    else return b2f_usage_error("pack", "IN and OUT only");
    if (key) {
      if (++i >= argc) return b2f_usage_error("pack", "option needs a value");
      if (b2_params_set(&p, key, argv[i]) < 0) {
        fprintf(stderr, "b2f pack: %s\n", b2_last_detail());
        return 2;
      }
    }
  }
  if (!in || !out) return b2f_usage_error("pack", "needs IN and OUT");
  if (b2f_npy_wanted(in)) return b2f_pack_npy(in, out, &p, force, threads);
  if (b2_cparams_check(&p.cparams) < 0) { /* a frame of bytes: no array's blocks */
    fprintf(stderr, "b2f pack: %s\n", b2_last_detail());
    return 2;
  }
  if (!strcmp(out, "-") && p.layout == B2_LAYOUT_SPARSE)
    return b2f_usage_error("pack", "a sparse frame is a directory: it cannot go to stdout");

  int infd = strcmp(in, "-") ? open(in, O_RDONLY) : STDIN_FILENO;
  if (infd < 0) {
    fprintf(stderr, "b2f: %s: %s\n", in, strerror(errno));
    return 1;
  }
  struct stat st;
  int64_t total = fstat(infd, &st) == 0 && S_ISREG(st.st_mode) ? (int64_t)st.st_size : 0;

  /* Stdout gets a finished frame: build it in a temporary file first. */
  char tmp[] = "/tmp/b2f-pack-XXXXXX";
  const char *target = out;
  if (!strcmp(out, "-")) {
    int t = mkstemp(tmp);
    if (t < 0) {
      perror("b2f pack: temporary file");
      return 1;
    }
    close(t);
    unlink(tmp);
    target = tmp;
  } else if (b2f_clear_output(out, force) < 0) {
    if (infd != STDIN_FILENO) close(infd);
    return 1;
  }

  b2_env_opts eo;
  b2_env_opts_default(&eo);
  eo.nthreads = threads;
  eo.readahead = 0;
  b2_env *env;
  b2_file *f = NULL;
  int rc = b2_env_create(&eo, &env);
  if (rc == 0) rc = b2_file_create(env, target, &p, &f);
  if (rc < 0) {
    b2f_report(out, rc);
    if (infd != STDIN_FILENO) close(infd);
    b2_env_destroy(env);
    return 1;
  }
  char *buf = malloc(IO_BUFSIZE);
  progress pr;
  progress_start(&pr, total);
  int64_t off = 0;
  int status = 0;
  ssize_t r = 0;
  while (buf && (r = read_full(infd, buf, IO_BUFSIZE)) > 0) {
    ssize_t w = b2_file_pwrite(f, buf, (size_t)r, off);
    if (w < 0) {
      status = b2f_report(out, (int)w);
      break;
    }
    off += r;
    progress_show(&pr, off, 0);
  }
  if (!buf || r < 0) {
    fprintf(stderr, "b2f: %s: %s\n", in, buf ? strerror(errno) : "out of memory");
    status = 1;
  }
  rc = b2_file_close(f);
  if (rc < 0 && !status) status = b2f_report(out, rc);
  progress_show(&pr, off, 1);
  free(buf);
  b2_env_destroy(env);
  if (infd != STDIN_FILENO) close(infd);
  if (target == tmp) {
    if (!status && copy_to_stdout(tmp) < 0) {
      perror("b2f pack: stdout");
      status = 1;
    }
    unlink(tmp);
  } else if (status) {
    unlink(target); /* no half-written frame left behind */
  }
  return status;
}

/* The view unpack writes: --npy, --c-order or --raw (the logical content)
 * as asked; else a .npy file when OUT is named so (pack's inverse), the
 * logical content otherwise. */
int b2f_unpack(int argc, char **argv) {
  const char *in = NULL, *out = NULL;
  int view = -1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--npy")) view = B2_VIEW_NPY;
    else if (!strcmp(argv[i], "--c-order")) view = B2_VIEW_CORDER;
    else if (!strcmp(argv[i], "--raw")) view = B2_VIEW_LOGICAL;
    else if (argv[i][0] == '-' && argv[i][1]) return b2f_usage_error("unpack", "unknown option");
    else if (!in) in = argv[i];
    else if (!out) out = argv[i];
    else return b2f_usage_error("unpack", "IN and OUT only");
  }
  if (!in || !out) return b2f_usage_error("unpack", "needs IN and OUT");
  if (!strcmp(in, "-")) return b2f_usage_error("unpack", "IN must be a frame on disk");
  if (view < 0) view = b2f_npy_name(out) ? B2_VIEW_NPY : B2_VIEW_LOGICAL;
  int to_file = strcmp(out, "-") != 0;
  int fd = to_file ? open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644) : STDOUT_FILENO;
  if (fd < 0) {
    fprintf(stderr, "b2f: %s: %s\n", out, strerror(errno));
    return 1;
  }
  int status = b2f_copy_content(in, view, fd, 1);
  if (to_file && close(fd) < 0 && !status) {
    fprintf(stderr, "b2f: %s: %s\n", out, strerror(errno));
    status = 1;
  }
  if (to_file && status) unlink(out); /* nothing half written left behind */
  return status;
}

int b2f_compact(int argc, char **argv) {
  int status = 0, n = 0;
  for (int i = 1; i < argc; i++) {
    if (argv[i][0] == '-' && argv[i][1]) return b2f_usage_error("compact", "unknown option");
    n++;
    b2_frame *f;
    int64_t dead = 0;
    int rc = b2_frame_open_rw(argv[i], &f);
    if (rc == 0) {
      dead = b2_frame_dead_bytes(f, NULL);
      rc = b2_frame_compact(f);
      b2_frame_close(f);
    }
    if (rc < 0) {
      status |= b2f_report(argv[i], rc);
      continue;
    }
    printf("%s: reclaimed %lld bytes\n", argv[i], (long long)(dead > 0 ? dead : 0));
  }
  if (!n) return b2f_usage_error("compact", "missing PATH");
  return status;
}
