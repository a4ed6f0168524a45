/* cmd_scrub.c - `b2f scrub [-q] PATH...`: walk directory trees (symbolic
 * links are never followed) and decode every chunk of every frame found,
 * reporting EVERY damaged chunk, one line each "PATH: chunk N: reason"
 * (checksum mismatches included), frame-level damage as "PATH: reason",
 * then a summary line.  Frames are regular files that start like one
 * (b2_frame_starts_like: a file with a frame suffix that does not is the
 * plain file the mount shows), and directories holding such a regular
 * chunks.b2frame (sparse frames, not descended into); the engine's hidden
 * temporaries and `.b2lock` sidecars in a tree are not frames; a frame torn
 * by a crash inside an in-place rewrite says that its redo file will
 * finish it.  A checksum table that no longer vouches for its frame
 * (another program changed it) is a note, not damage: its chunks are
 * decoded, as any frame's.  Exit status 1 if anything is damaged or
 * unreadable, 0 otherwise, 2 on a usage error. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "b2_b2nd.h"
#include "b2_error.h"
#include "b2_frame.h"
#include "b2_ns.h"
#include "cli/cli.h"

typedef struct scrub {
  int quiet;
  long frames, frames_bad, frames_unchecked;
  long long chunks, chunks_bad, chunks_checked;
  long errors; /* directories or files that could not be read */
  uint8_t *buf;
  size_t cap;
} scrub;

static const char *const suffixes[] = {".b2frame", ".b2f", ".b2", ".b2nd"};

static int has_suffix(const char *name) {
  size_t n = strlen(name);
  for (size_t k = 0; k < sizeof suffixes / sizeof suffixes[0]; k++) {
    size_t s = strlen(suffixes[k]);
    if (n > s && strcmp(name + n - s, suffixes[k]) == 0) return 1;
  }
  return 0;
}

/* Does the regular file at path start like a frame (b2_frame_starts_like:
 * a file with a frame suffix that does not is the plain file the mount
 * shows, not a damaged frame)? */
static int starts_like(const char *path) {
  uint8_t b[10];
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = pread(fd, b, sizeof b, 0);
  close(fd);
  return n > 0 && b2_frame_starts_like(b, (size_t)n);
}

static int is_sparse_dir(const char *path) {
  char p[PATH_MAX];
  struct stat st;
  if (snprintf(p, sizeof p, "%s/chunks.b2frame", path) >= (int)sizeof p)
    return 0;
  return lstat(p, &st) == 0 && S_ISREG(st.st_mode) && starts_like(p);
}

/* "chunk N: " at the start of a detail (the frame layer names chunks). */
static const char *strip_chunk(const char *d, int64_t i) {
  char pre[40];
  int n = snprintf(pre, sizeof pre, "chunk %lld: ", (long long)i);
  return strncmp(d, pre, (size_t)n) == 0 ? d + n : d;
}

static const char *detail(int rc) {
  const char *d = b2_last_detail();
  return d && *d ? d : b2_strerror(rc);
}

/* Whether the frame file at path has a redo file beside it: an in-place
 * rewrite (of a hard-linked frame) that a crash interrupted. */
static int redo_pending(const char *path) {
  char redo[PATH_MAX], name[NAME_MAX + 1];
  const char *base = strrchr(path, '/');
  int dl = base ? (int)(base - path) + 1 : 0;
  if (b2_frame_temp_name(path + dl, B2_FRAME_REDO_SUFFIX, name, sizeof name) < 0 ||
      snprintf(redo, sizeof redo, "%.*s%s", dl, path, name) >= (int)sizeof redo)
    return 0;
  struct stat st;
  return lstat(redo, &st) == 0 && S_ISREG(st.st_mode);
}

static void scrub_frame(scrub *s, const char *path) {
  b2_frame *f;
  s->frames++;
  int rc = b2_frame_open(path, &f);
  if (rc < 0) {
    printf("%s: %s%s\n", path, detail(rc),
           redo_pending(path) ? " (an in-place rewrite cut short: its redo file is beside it; "
                                "a mount of the directory, or `b2f compact` of the frame, "
                                "finishes it)"
                              : "");
    s->frames_bad++;
    return;
  }
  b2_b2nd_attach(f); /* an array's ZFP chunks and cell filters need its block shape */
  const b2_frame_info *in = b2_frame_get_info(f);
  long long bad = 0;
  int frame_bad = 0;
  b2_frame_csum_info ci;
  if (b2_frame_checksums(f, &ci) == 0) {
    /* Another program changed the frame since its table was written (or
     * a writer died between a write and its table's time): no damage of
     * itself.  Its chunks are checked by decoding them, as a frame's
     * without a table. */
    if (ci.state == B2_CSUM_IGNORED && !s->quiet)
      printf("%s: note: checksum table ignored (%s); its chunks are checked by decoding them%s\n",
             path, ci.why,
             redo_pending(path) ? "; an in-place rewrite cut short: its redo file is beside it, "
                                  "a mount of the directory or `b2f compact` finishes it"
                                : "");
    if (ci.state != B2_CSUM_ALL) s->frames_unchecked++;
    s->chunks_checked += ci.checked;
  }
  for (int k = 0; k < in->nvlmeta; k++) {
    const char *name = b2_frame_vlmeta_name(f, k);
    uint8_t *data;
    size_t len;
    rc = b2_frame_vlmeta_get(f, name, &data, &len);
    if (rc < 0) {
      printf("%s: %s\n", path, detail(rc));
      frame_bad = 1;
    } else {
      free(data);
    }
  }
  for (int64_t i = 0; i < in->nchunks; i++) {
    s->chunks++;
    int32_t nb = b2_frame_chunk_nbytes(f, i);
    if (nb >= 0 && (size_t)nb > s->cap) {
      free(s->buf);
      s->cap = (size_t)nb;
      s->buf = malloc(s->cap);
      if (!s->buf) {
        s->cap = 0;
        fprintf(stderr, "b2f scrub: out of memory\n");
        exit(1);
      }
    }
    rc = nb < 0 ? nb : b2_frame_decode_chunk(f, i, s->buf, s->cap);
    if (rc < 0) {
      printf("%s: chunk %lld: %s\n", path, (long long)i,
             strip_chunk(detail(rc), i));
      bad++;
    }
  }
  b2_frame_close(f);
  s->chunks_bad += bad;
  if (bad || frame_bad) s->frames_bad++;
}

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void walk(scrub *s, const char *path);

/* One entry found under a directory (or named on the command line). */
static void visit(scrub *s, const char *path, int named) {
  struct stat st;
  /* Paths named on the command line are followed, entries of a tree not. */
  if ((named ? stat(path, &st) : lstat(path, &st)) != 0) {
    fprintf(stderr, "b2f scrub: %s: %s\n", path, strerror(errno));
    s->errors++;
    return;
  }
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  if (S_ISDIR(st.st_mode)) {
    if (is_sparse_dir(path)) scrub_frame(s, path);
    else walk(s, path);
  } else if (!named && b2_ns_name_hidden(base)) {
    /* the engine's temporaries and lock sidecars (b2_ns.h): a frame being
     * made, or a leftover the next mount sweeps, never data */
  } else if (S_ISREG(st.st_mode)) {
    /* A frame torn inside an in-place rewrite may not start like one:
     * its redo file says what it is. */
    if (named || starts_like(path) || (has_suffix(base) && redo_pending(path)))
      scrub_frame(s, path);
  } else if (named) {
    fprintf(stderr, "b2f scrub: %s: not a file or directory\n", path);
    s->errors++;
  }
  /* Symbolic links (and devices, FIFOs, sockets) in a tree are skipped. */
}

static void walk(scrub *s, const char *path) {
  DIR *d = opendir(path);
  if (!d) {
    fprintf(stderr, "b2f scrub: %s: %s\n", path, strerror(errno));
    s->errors++;
    return;
  }
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 64;
      char **nn = realloc(names, cap * sizeof *nn);
      if (!nn) break;
      names = nn;
    }
    names[n] = strdup(de->d_name);
    if (names[n]) n++;
  }
  closedir(d);
  if (n) qsort(names, n, sizeof *names, cmp_names); /* stable output */
  for (size_t k = 0; k < n; k++) {
    char p[PATH_MAX];
    int len = strcmp(path, "/") == 0
                  ? snprintf(p, sizeof p, "/%s", names[k])
                  : snprintf(p, sizeof p, "%s/%s", path, names[k]);
    if (len >= (int)sizeof p) {
      fprintf(stderr, "b2f scrub: %s/%s: path too long\n", path, names[k]);
      s->errors++;
    } else {
      visit(s, p, 0);
    }
    free(names[k]);
  }
  free(names);
}

int b2f_scrub(int argc, char **argv) {
  scrub s;
  memset(&s, 0, sizeof s);
  int npaths = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet"))
      s.quiet = 1;
    else if (argv[i][0] == '-' && argv[i][1])
      return b2f_usage_error("scrub", "unknown option");
    else
      npaths++;
  }
  if (!npaths) return b2f_usage_error("scrub", "missing DIR");
  for (int i = 1; i < argc; i++) {
    if (argv[i][0] == '-' && argv[i][1]) continue;
    size_t n = strlen(argv[i]);
    while (n > 1 && argv[i][n - 1] == '/') argv[i][--n] = '\0';
    visit(&s, argv[i], 1);
  }
  free(s.buf);
  if (!s.quiet)
    printf("scrub: %ld frames, %lld chunks (%lld with checksums), "
           "%lld damaged chunks, %ld damaged frames, %ld frames not fully "
           "checksummed%s\n",
           s.frames, s.chunks, s.chunks_checked, s.chunks_bad, s.frames_bad,
           s.frames_unchecked, s.errors ? ", unreadable entries" : "");
  fflush(stdout);
  return s.frames_bad || s.errors ? 1 : 0;
}
