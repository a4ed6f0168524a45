/*
 * opts.c - b2fs command-line options: SOURCE and our -o options are taken
 * out of the argument list; everything else stays for libfuse (mountpoint,
 * -f, -d, -s, --help, --version and the standard -o options).
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "b2fs.h"

enum {
  KEY_CACHE,
  KEY_DIRTY,
  KEY_PARAM,
  KEY_READAHEAD,
  KEY_NTHREADS,
  KEY_VERIFY,
  KEY_TIMEOUT,
  KEY_IDLE,
  KEY_NO_DP,
  KEY_FSNAME,
  KEY_MAX_READ,
  KEY_RO,
  KEY_RW,
  KEY_IDLE_FLUSH,
  KEY_COMPACT_PCT,
  KEY_COMPACT_MIN,
  KEY_READ_AHEAD_KB,
  KEY_LOCKING,
  KEY_WARM,
  KEY_DIRECT_IO,
};

static const struct fuse_opt spec[] = {
    FUSE_OPT_KEY("cache_size=", KEY_CACHE),
    FUSE_OPT_KEY("readahead=", KEY_READAHEAD),
    FUSE_OPT_KEY("read_ahead_kb=", KEY_READ_AHEAD_KB),
    FUSE_OPT_KEY("nthreads=", KEY_NTHREADS),
    FUSE_OPT_KEY("verify=", KEY_VERIFY),
    FUSE_OPT_KEY("locking=", KEY_LOCKING),
    FUSE_OPT_KEY("timeout=", KEY_TIMEOUT),
    FUSE_OPT_KEY("idle_frames=", KEY_IDLE),
    FUSE_OPT_KEY("warm=", KEY_WARM),
    FUSE_OPT_KEY("direct_io", KEY_DIRECT_IO),
    FUSE_OPT_KEY("no_default_permissions", KEY_NO_DP),
    /* writing */
    FUSE_OPT_KEY("codec=", KEY_PARAM),
    FUSE_OPT_KEY("clevel=", KEY_PARAM),
    FUSE_OPT_KEY("filters=", KEY_PARAM),
    FUSE_OPT_KEY("typesize=", KEY_PARAM),
    FUSE_OPT_KEY("chunksize=", KEY_PARAM),
    FUSE_OPT_KEY("blocksize=", KEY_PARAM),
    FUSE_OPT_KEY("layout=", KEY_PARAM),
    FUSE_OPT_KEY("dirty_max=", KEY_DIRTY),
    FUSE_OPT_KEY("idle_flush=", KEY_IDLE_FLUSH),
    FUSE_OPT_KEY("compact_pct=", KEY_COMPACT_PCT),
    FUSE_OPT_KEY("compact_min=", KEY_COMPACT_MIN),
    /* noticed, then left for libfuse */
    FUSE_OPT_KEY("fsname=", KEY_FSNAME),
    FUSE_OPT_KEY("max_read=", KEY_MAX_READ),
    FUSE_OPT_KEY("ro", KEY_RO),
    FUSE_OPT_KEY("rw", KEY_RW),
    FUSE_OPT_END,
};

static int parse_size(const char *s, size_t *out) {
  uint64_t v;
  if (b2_parse_size(s, &v) < 0 || v > SIZE_MAX) return -1;
  *out = (size_t)v;
  return 0;
}

static int parse_int(const char *s, int lo, int hi, int *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (end == s || *end || errno || v < lo || v > hi) return -1;
  *out = (int)v;
  return 0;
}

typedef struct parse_state {
  b2fs_opts *o;
  b2_frame_params fp; /* parameters of new frames */
  int nonopts;
  int readahead_set;
} parse_state;

static int proc(void *data, const char *arg, int key, struct fuse_args *outargs) {
  parse_state *ps = data;
  b2fs_opts *o = ps->o;
  const char *val = strchr(arg, '=');
  val = val ? val + 1 : "";
  (void)outargs;
  switch (key) {
  case FUSE_OPT_KEY_NONOPT:
    if (ps->nonopts++ == 0 && !o->source) {
      o->source = strdup(arg);
      return o->source ? 0 : -1;
    }
    if (ps->nonopts == 2) return 1; /* the mountpoint, for libfuse */
    fprintf(stderr, "b2fs: unexpected argument '%s'\n", arg);
    return -1;
  case KEY_CACHE:
    if (parse_size(val, &o->env.cache_size) < 0) {
      fprintf(stderr, "b2fs: bad cache_size '%s' (want e.g. 256M)\n", val);
      return -1;
    }
    return 0;
  case KEY_DIRTY:
    if (parse_size(val, &o->env.dirty_max) < 0) {
      fprintf(stderr, "b2fs: bad dirty_max '%s' (want e.g. 64M)\n", val);
      return -1;
    }
    return 0;
  case KEY_PARAM: {
    char name[16];
    size_t nlen = (size_t)(val - 1 - arg);
    snprintf(name, sizeof name, "%.*s", (int)nlen, arg);
    if (b2_params_set(&ps->fp, name, val) < 0) {
      fprintf(stderr, "b2fs: %s\n", b2_last_detail());
      return -1;
    }
    return 0;
  }
  case KEY_READAHEAD:
    ps->readahead_set = 1;
    if (parse_int(val, 0, 1024, &o->env.readahead) < 0) {
      fprintf(stderr, "b2fs: bad readahead '%s' (chunks, 0-1024)\n", val);
      return -1;
    }
    return 0;
  case KEY_READ_AHEAD_KB: {
    int kb;
    if (parse_int(val, 0, 1 << 20, &kb) < 0) {
      fprintf(stderr, "b2fs: bad read_ahead_kb '%s' (KiB, 0-1048576)\n", val);
      return -1;
    }
    o->read_ahead_kb = (unsigned)kb;
    o->has_read_ahead = 1;
    return 0;
  }
  case KEY_NTHREADS:
    if (parse_int(val, 1, 256, &o->env.nthreads) < 0) {
      fprintf(stderr, "b2fs: bad nthreads '%s' (1-256)\n", val);
      return -1;
    }
    return 0;
  case KEY_VERIFY:
    if (!strcmp(val, "on") || !strcmp(val, "1") || !strcmp(val, "yes"))
      o->env.verify = 1;
    else if (!strcmp(val, "off") || !strcmp(val, "0") || !strcmp(val, "no"))
      o->env.verify = 0;
    else {
      fprintf(stderr, "b2fs: bad verify '%s' (on or off)\n", val);
      return -1;
    }
    return 0;
  case KEY_LOCKING: /* the .b2lock sidecars of the reference library */
    if (!strcmp(val, "auto"))
      b2_frame_set_locking(B2_LOCKING_AUTO);
    else if (!strcmp(val, "on"))
      b2_frame_set_locking(B2_LOCKING_ON);
    else if (!strcmp(val, "off"))
      b2_frame_set_locking(B2_LOCKING_OFF);
    else {
      fprintf(stderr, "b2fs: bad locking '%s' (auto, on or off)\n", val);
      return -1;
    }
    return 0;
  case KEY_TIMEOUT: {
    char *end;
    errno = 0;
    double t = strtod(val, &end);
    if (end == val || *end || errno || !(t >= 0) || t > 86400) {
      fprintf(stderr, "b2fs: bad timeout '%s' (seconds)\n", val);
      return -1;
    }
    o->timeout = t;
    return 0;
  }
  case KEY_IDLE:
    if (parse_int(val, 0, 1 << 20, &o->idle_frames) < 0) {
      fprintf(stderr, "b2fs: bad idle_frames '%s' (0-1048576)\n", val);
      return -1;
    }
    return 0;
  case KEY_IDLE_FLUSH: {
    int ms;
    if (parse_int(val, 0, 3600 * 1000, &ms) < 0) {
      fprintf(stderr, "b2fs: bad idle_flush '%s' (milliseconds, 0 for never)\n", val);
      return -1;
    }
    o->env.idle_ms = (unsigned)ms;
    return 0;
  }
  case KEY_COMPACT_PCT: {
    int pct;
    if (parse_int(val, 0, 100, &pct) < 0) {
      fprintf(stderr, "b2fs: bad compact_pct '%s' (0-100, 0 for never)\n", val);
      return -1;
    }
    o->compact_pct = (unsigned)pct;
    return 0;
  }
  case KEY_WARM:
    if (parse_int(val, 0, 32, &o->warm) < 0) {
      fprintf(stderr, "b2fs: bad warm '%s' (0-32, 0 for none)\n", val);
      return -1;
    }
    return 0;
  case KEY_DIRECT_IO:
    o->direct_io = 1;
    return 0;
  case KEY_COMPACT_MIN:
    if (b2_parse_size(val, &o->compact_min) < 0) {
      fprintf(stderr, "b2fs: bad compact_min '%s' (want e.g. 16M)\n", val);
      return -1;
    }
    return 0;
  case KEY_NO_DP:
    o->no_default_perms = 1;
    return 0;
  case KEY_FSNAME:
    o->has_fsname = 1;
    return 1;
  case KEY_MAX_READ:
    o->has_max_read = 1;
    return 1;
  case KEY_RO:
  case KEY_RW:
    o->ro = key == KEY_RO;
    return 1;
  default:
    return 1; /* everything else goes to libfuse */
  }
}

int b2fs_opts_parse(struct fuse_args *args, b2fs_opts *o) {
  memset(o, 0, sizeof *o);
  b2_env_opts_default(&o->env);
  o->timeout = 1.0;
  o->idle_frames = -1;
  o->env.idle_ms = 1000;
  o->compact_pct = 25;
  o->warm = 8;
  o->read_ahead_kb = 4096;
  o->compact_min = 16u << 20;
  parse_state ps;
  memset(&ps, 0, sizeof ps);
  ps.o = o;
  ps.fp.layout = o->env.layout;
  ps.fp.cparams = o->env.cparams;
  ps.fp.chunksize = o->env.chunksize;
  if (fuse_opt_parse(args, &ps, spec, proc) == -1) return -1;
  if (b2_cparams_check(&ps.fp.cparams) < 0) { /* they make plain frames too */
    fprintf(stderr, "b2fs: %s\n", b2_last_detail());
    return -1;
  }
  o->env.layout = ps.fp.layout;
  o->env.cparams = ps.fp.cparams;
  o->env.chunksize = ps.fp.chunksize;
  /* Without the page cache the kernel reads nothing ahead: the engine
   * reads further ahead itself (zstd text, 1 MiB reads: 1,040-1,370 MB/s
   * against 1,040-1,250 with 4, in interleaved runs). */
  if (o->direct_io && !ps.readahead_set) o->env.readahead = 8;
  return 0;
}

void b2fs_opts_free(b2fs_opts *o) {
  free(o->source);
  o->source = NULL;
}

void b2fs_opts_help(const char *prog) {
  printf("usage: %s SOURCE MOUNTPOINT [options]\n\n"
         "Mounts SOURCE at MOUNTPOINT, showing every Blosc2 frame as a plain file:\n"
         "NAME.b2frame, NAME.b2f and NAME.b2 as NAME (the logical content) and\n"
         "NAME.b2nd as NAME.npy.  Unmount with: fusermount3 -u MOUNTPOINT\n\n"
         "b2fs options:\n"
         "    -o cache_size=SIZE     decoded-chunk cache (default 256M; K, M, G)\n"
         "    -o readahead=N         chunks decoded ahead on sequential reads\n"
         "    -o read_ahead_kb=N     the kernel's read-ahead on this mount, in KiB\n"
         "                           (default 4096; 0: leave the kernel's 128)\n"
         "    -o nthreads=N          engine worker threads\n"
         "    -o verify=on|off       check chunk checksums on read (default on)\n"
         "    -o timeout=SECONDS     attribute and name caching (default 1)\n"
         "    -o idle_frames=N       frames kept open while unused (default:\n"
         "                           a 16th of the descriptor limit, <= 1024)\n"
         "    -o warm=N              files read in a directory's order: decode the\n"
         "                           first chunks of the next N entries ahead of the\n"
         "                           reader (default 8, at most 32; 0: off)\n"
         "    -o direct_io           frames read without the kernel's page cache:\n"
         "                           faster for large reads (128 KiB and up), slower\n"
         "                           for small ones (each one a request); shared\n"
         "                           mappings need Linux 6.6 or later\n"
         "    -o no_default_permissions  let b2fs, not the kernel, check access\n"
         "\nWriting: a new file NAME is stored as the frame NAME.b2frame, with\n"
         "    -o codec=NAME          blosclz lz4 lz4hc zlib zstd (default zstd)\n"
         "    -o clevel=N            0-9 (default 1)\n"
         "    -o filters=LIST        e.g. shuffle, bitshuffle, shuffle+delta, none\n"
         "                           (default shuffle)\n"
         "    -o typesize=N          item size for the filters (default 8)\n"
         "    -o chunksize=SIZE      (default 1M)    -o blocksize=SIZE (default auto)\n"
         "    -o layout=contiguous|sparse            (default contiguous)\n"
         "    -o dirty_max=SIZE      written data held before writers wait\n"
         "                           (half of cache_size, at least 64M)\n"
         "    -o idle_flush=MS       commit files idle this long (default 1000;\n"
         "                           0: only at fsync and close)\n"
         "    -o compact_pct=N,compact_min=SIZE  rewrite a frame (at its last\n"
         "                           close, or while open) when dead bytes exceed\n"
         "                           N%% of it and SIZE or its live bytes\n"
         "                           (defaults 25, 16M; compact_pct=0: never)\n"
         "    Before a file's first write, setfattr -n user.b2.codec -v lz4 FILE\n"
         "    (and clevel, filters, typesize, chunksize, blocksize, layout) sets\n"
         "    its own parameters; user.b2.vlmeta.NAME can be set any time.\n\n",
         prog);
}
