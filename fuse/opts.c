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
};

static const struct fuse_opt spec[] = {
    FUSE_OPT_KEY("cache_size=", KEY_CACHE),
    FUSE_OPT_KEY("readahead=", KEY_READAHEAD),
    FUSE_OPT_KEY("nthreads=", KEY_NTHREADS),
    FUSE_OPT_KEY("verify=", KEY_VERIFY),
    FUSE_OPT_KEY("timeout=", KEY_TIMEOUT),
    FUSE_OPT_KEY("idle_frames=", KEY_IDLE),
    FUSE_OPT_KEY("no_default_permissions", KEY_NO_DP),
    /* write-path options: checked now, used once writing lands */
    FUSE_OPT_KEY("codec=", KEY_PARAM),
    FUSE_OPT_KEY("clevel=", KEY_PARAM),
    FUSE_OPT_KEY("filters=", KEY_PARAM),
    FUSE_OPT_KEY("typesize=", KEY_PARAM),
    FUSE_OPT_KEY("chunksize=", KEY_PARAM),
    FUSE_OPT_KEY("blocksize=", KEY_PARAM),
    FUSE_OPT_KEY("layout=", KEY_PARAM),
    FUSE_OPT_KEY("dirty_max=", KEY_DIRTY),
    /* noticed, then left for libfuse */
    FUSE_OPT_KEY("fsname=", KEY_FSNAME),
    FUSE_OPT_KEY("max_read=", KEY_MAX_READ),
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
    if (parse_int(val, 0, 1024, &o->env.readahead) < 0) {
      fprintf(stderr, "b2fs: bad readahead '%s' (chunks, 0-1024)\n", val);
      return -1;
    }
    return 0;
  case KEY_NTHREADS:
    if (parse_int(val, 1, 256, &o->env.nthreads) < 0) {
      fprintf(stderr, "b2fs: bad nthreads '%s' (1-256)\n", val);
      return -1;
    }
    return 0;
  case KEY_VERIFY:
    if (!strcmp(val, "on") || !strcmp(val, "1") || !strcmp(val, "yes"))
      o->verify = 1;
    else if (!strcmp(val, "off") || !strcmp(val, "0") || !strcmp(val, "no"))
      o->verify = 0;
    else {
      fprintf(stderr, "b2fs: bad verify '%s' (on or off)\n", val);
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
  case KEY_NO_DP:
    o->no_default_perms = 1;
    return 0;
  case KEY_FSNAME:
    o->has_fsname = 1;
    return 1;
  case KEY_MAX_READ:
    o->has_max_read = 1;
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
  parse_state ps;
  memset(&ps, 0, sizeof ps);
  ps.o = o;
  ps.fp.layout = o->env.layout;
  ps.fp.cparams = o->env.cparams;
  ps.fp.chunksize = o->env.chunksize;
  if (fuse_opt_parse(args, &ps, spec, proc) == -1) return -1;
  o->env.layout = ps.fp.layout;
  o->env.cparams = ps.fp.cparams;
  o->env.chunksize = ps.fp.chunksize;
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
         "    -o nthreads=N          engine worker threads\n"
         "    -o verify=on|off       verify data while reading (default off)\n"
         "    -o timeout=SECONDS     attribute and name caching (default 1)\n"
         "    -o idle_frames=N       frames kept open while unused (default:\n"
         "                           a 16th of the descriptor limit, <= 1024)\n"
         "    -o no_default_permissions  let b2fs, not the kernel, check access\n"
         "    -o codec=,clevel=,filters=,typesize=,chunksize=,blocksize=,\n"
         "       layout=,dirty_max=  parameters of written frames (checked;\n"
         "                           writing is not available yet); several\n"
         "                           filters as filters=shuffle+delta\n\n",
         prog);
}
