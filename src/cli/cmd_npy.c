/* cmd_npy.c - `b2f pack` of a NumPy .npy file into a b2nd array.
 *
 * cmd_pack.c parses the shared options (codec, level, filters, --sparse,
 * --force, -j) and hands the options it does not know to b2f_npy_option;
 * when IN is a .npy file (or --npy, --chunkshape or --blockshape was
 * given) it calls b2f_pack_npy.  The .npy header is parsed, the geometry
 * chosen (or taken from --chunkshape / --blockshape), the frame created
 * with the `b2nd` metalayer, and the items streamed through
 * b2_b2nd_write: a regular file is read with pread, a pipe front to back.
 * The dtype text is stored as the .npy header gives it, and a header
 * spelled otherwise than numpy.save's is kept (b2_npy_header_keep), so
 * that `b2f cat --npy` writes back the header the file had. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "b2_b2nd.h"
#include "b2_error.h"
#include "b2_file.h"
#include "b2_frame.h"
#include "cli/cli.h"

#define HEADER_STEP 4096
#define HEADER_MAX ((size_t)B2_B2ND_MAXDTYPE + 65536)

/* Options met while cmd_pack.c parses the command line (one command per
 * process, so file-level state is enough). */
static struct {
  int npy, raw;
  int nchunk, nblock; /* -1: not given */
  int32_t chunk[B2_B2ND_MAXDIM], block[B2_B2ND_MAXDIM];
  const char *error;  /* a usage error to report */
} opt = {0, 0, -1, -1, {0}, {0}, NULL};

/* "A,B,C" -> out; the count, or -1. */
static int parse_dims(const char *s, int32_t *out) {
  int n = 0;
  if (!*s) return 0;
  for (;;) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || errno || v < 1 || v > INT32_MAX || n == B2_B2ND_MAXDIM) return -1;
    out[n++] = (int32_t)v;
    if (!*end) return n;
    if (*end != ',') return -1;
    s = end + 1;
  }
}

int b2f_npy_option(int argc, char **argv, int *i) {
  const char *a = argv[*i];
  if (!strcmp(a, "--npy")) return opt.npy = 1;
  if (!strcmp(a, "--raw")) return opt.raw = 1;
  int is_chunk = !strncmp(a, "--chunkshape", 12), is_block = !strncmp(a, "--blockshape", 12);
  if (!is_chunk && !is_block) return 0;
  const char *v = a + 12;
  if (*v == '=') v++;
  else if (*v) return 0;
  else if (*i + 1 < argc) v = argv[++*i];
  else {
    opt.error = "--chunkshape and --blockshape need a value";
    return 1;
  }
  int n = parse_dims(v, is_chunk ? opt.chunk : opt.block);
  if (n < 0) opt.error = "--chunkshape and --blockshape want positive sizes A,B,... (one per dimension)";
  if (is_chunk) opt.nchunk = n;
  else opt.nblock = n;
  return 1;
}

int b2f_npy_name(const char *path) {
  size_t n = path ? strlen(path) : 0;
  return n > 4 && !strcmp(path + n - 4, ".npy");
}

int b2f_npy_wanted(const char *in) {
  if (opt.raw) return 0;
  return opt.npy || opt.nchunk >= 0 || opt.nblock >= 0 || opt.error || b2f_npy_name(in);
}

/* ---- the input: header, then items through a source callback ------------ */

typedef struct input {
  const char *path;
  int fd;
  int seekable;
  size_t header_len;
  unsigned char *buf; /* what was read for the header (pipes: plus data) */
  size_t buf_len;
  uint64_t pos;       /* pipes: next item byte expected */
} input;

static int read_some(int fd, void *dst, size_t n, size_t *got) {
  *got = 0;
  while (*got < n) {
    ssize_t r = read(fd, (char *)dst + *got, n - *got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return b2_fail(B2_E_IO, "read: %s", strerror(errno));
    if (r == 0) break;
    *got += (size_t)r;
  }
  return 0;
}

/* Append up to n bytes of the input to in->buf (a file: from its start). */
static int read_more(input *in, size_t n, size_t *got) {
  if (!in->seekable) return read_some(in->fd, in->buf + in->buf_len, n, got);
  ssize_t r;
  do r = pread(in->fd, in->buf + in->buf_len, n, (off_t)in->buf_len);
  while (r < 0 && errno == EINTR);
  if (r < 0) return b2_fail(B2_E_IO, "read: %s", strerror(errno));
  *got = (size_t)r;
  return 0;
}

/* Read and parse the header, growing the prefix read until it fits. */
static int read_header(input *in, char *descr, int *fortran, int *ndim, int64_t *shape) {
  for (;;) {
    size_t cap = in->buf_len + HEADER_STEP, got = 0;
    unsigned char *nb = realloc(in->buf, cap);
    if (!nb) return b2_fail(B2_E_NOMEM, "no memory for the .npy header");
    in->buf = nb;
    int rc = read_more(in, HEADER_STEP, &got);
    if (rc < 0) return rc;
    in->buf_len += got;
    rc = b2_npy_parse(in->buf, in->buf_len, &in->header_len, descr, B2_B2ND_MAXDTYPE + 1,
                      fortran, ndim, shape);
    if (rc == 0) return 0;
    if (rc != B2_E_TRUNCATED || got < HEADER_STEP || in->buf_len >= HEADER_MAX)
      return b2_context(rc, "not a .npy file");
  }
}

static int source(void *ctx, uint64_t off, size_t len, void *dst) {
  input *in = ctx;
  if (in->seekable) {
    size_t done = 0;
    while (done < len) {
      ssize_t r = pread(in->fd, (char *)dst + done, len - done,
                        (off_t)(in->header_len + off + done));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return b2_fail(B2_E_IO, "read: %s", strerror(errno));
      if (r == 0) return b2_fail(B2_E_TRUNCATED, "the file ends inside the array's items");
      done += (size_t)r;
    }
    return 0;
  }
  if (off != in->pos) return b2_fail(B2_E_INVAL, "a pipe cannot be read out of order");
  size_t done = 0;
  if (in->header_len + off < in->buf_len) { /* items read with the header */
    size_t have = in->buf_len - (size_t)(in->header_len + off);
    done = have < len ? have : len;
    memcpy(dst, in->buf + in->header_len + off, done);
  }
  size_t got = 0;
  int rc = done < len ? read_some(in->fd, (char *)dst + done, len - done, &got) : 0;
  if (rc < 0) return rc;
  if (done + got < len) return b2_fail(B2_E_TRUNCATED, "the input ends inside the array's items");
  in->pos += len;
  return 0;
}

/* Bytes that follow the items (there should be none). */
static int check_end(input *in, uint64_t nbytes) {
  if (in->seekable) {
    struct stat st;
    if (fstat(in->fd, &st) < 0) return b2_fail(B2_E_IO, "stat: %s", strerror(errno));
    uint64_t want = in->header_len + nbytes;
    if ((uint64_t)st.st_size < want)
      return b2_fail(B2_E_TRUNCATED, "the file holds %lld bytes, its header announces %llu",
                     (long long)st.st_size, (unsigned long long)want);
    if ((uint64_t)st.st_size > want)
      return b2_fail(B2_E_FORMAT, "%llu bytes follow the array's items",
                     (unsigned long long)((uint64_t)st.st_size - want));
    return 0;
  }
  char c;
  size_t got = 0;
  int rc = in->header_len + nbytes < in->buf_len ? 0 : read_some(in->fd, &c, 1, &got);
  if (rc < 0) return rc;
  if (got || in->header_len + nbytes < in->buf_len)
    return b2_fail(B2_E_FORMAT, "bytes follow the array's items");
  return 0;
}

/* ---- the output ------------------------------------------------------------ */

static int sink(void *ctx, int64_t chunk, const void *data, size_t len) {
  return b2_frame_put_chunk(ctx, chunk, data, len);
}

/* Remove an output we created and could not finish. */
static void remove_output(const char *out) {
  struct stat st;
  if (lstat(out, &st) < 0) return;
  if (!S_ISDIR(st.st_mode)) {
    unlink(out);
    return;
  }
  DIR *d = opendir(out); /* a sparse frame made by this run: its files only */
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (e->d_name[0] != '.') unlinkat(dirfd(d), e->d_name, 0);
  if (d) closedir(d);
  rmdir(out);
}

static int pack(input *in, const char *out, const b2_frame_params *p, int threads) {
  char *descr = malloc(B2_B2ND_MAXDTYPE + 1);
  if (!descr) return b2_fail(B2_E_NOMEM, "no memory for the dtype");
  int fortran = 0, ndim = 0;
  int64_t shape[B2_B2ND_MAXDIM];
  b2_b2nd a;
  memset(&a, 0, sizeof a);
  uint8_t *meta = NULL;
  int rc = read_header(in, descr, &fortran, &ndim, shape);
  if (rc == 0 && ((opt.nchunk >= 0 && opt.nchunk != ndim) || (opt.nblock >= 0 && opt.nblock != ndim)))
    rc = b2_fail(B2_E_INVAL, "the array has %d dimensions: give that many chunk/block sizes", ndim);
  if (rc == 0)
    rc = b2_b2nd_from_npy(&a, descr, fortran, ndim, shape, opt.nchunk > 0 ? opt.chunk : NULL,
                          opt.nblock > 0 ? opt.block : NULL, b2_cparams_min_side(&p->cparams));
  free(descr);
  if (rc == 0 && !in->seekable && in->buf_len > in->header_len &&
      in->buf_len - in->header_len > (uint64_t)b2_b2nd_nbytes(&a))
    rc = b2_fail(B2_E_FORMAT, "bytes follow the array's items");
  if (rc == 0 && in->seekable) rc = check_end(in, (uint64_t)b2_b2nd_nbytes(&a));
  b2_frame_params fp = *p;
  b2_frame_meta_init mi;
  if (rc == 0) rc = b2_b2nd_frame_params(&a, &fp, &mi, &meta);
  if (rc < 0) {
    b2_b2nd_free(&a);
    return b2_context(rc, "%s", in->path);
  }

  b2_frame *f = NULL;
  rc = b2_frame_create(out, &fp, &f);
  free(meta);
  if (rc < 0) {
    b2_b2nd_free(&a);
    return b2_context(rc, "%s", out);
  }
  b2_b2nd_write_opts wo;
  b2_b2nd_write_opts_default(&wo);
  wo.cparams = p->cparams;
  wo.nthreads = threads;
  wo.sequential = !in->seekable;
  /* A header spelled otherwise than numpy.save's: `b2f cat --npy` and the
   * mount give it back. */
  if (b2_npy_header_keep(f, &a, in->buf, (size_t)in->header_len) < 0)
    fprintf(stderr, "b2f: %s: %s (numpy.save's header is shown instead)\n", in->path,
            b2_last_detail());
  rc = b2_b2nd_write(&a, &wo, source, in, sink, f);
  if (rc < 0 && rc != B2_E_IO && rc != B2_E_TRUNCATED) rc = b2_context(rc, "%s", out);
  else if (rc < 0) rc = b2_context(rc, "%s", in->path);
  if (rc == 0 && !in->seekable && (rc = check_end(in, (uint64_t)b2_b2nd_nbytes(&a))) < 0)
    rc = b2_context(rc, "%s", in->path);
  if (rc == 0 && (rc = b2_frame_commit(f)) < 0) rc = b2_context(rc, "%s", out);
  b2_frame_close(f);
  b2_b2nd_free(&a);
  if (rc < 0) remove_output(out);
  return rc;
}

int b2f_pack_npy(const char *in, const char *out, const b2_frame_params *p, int force,
                 int threads) {
  if (opt.error) return b2f_usage_error("pack", opt.error);
  if (!strcmp(out, "-"))
    return b2f_usage_error("pack", "a .npy array is packed into a file, not to stdout");
  if (b2f_clear_output(out, force) < 0) return 1;
  input src;
  memset(&src, 0, sizeof src);
  src.path = in;
  src.fd = strcmp(in, "-") ? open(in, O_RDONLY) : STDIN_FILENO;
  if (src.fd < 0) {
    fprintf(stderr, "b2f: %s: %s\n", in, strerror(errno));
    return 1;
  }
  struct stat st;
  src.seekable = fstat(src.fd, &st) == 0 && S_ISREG(st.st_mode);
  int rc = pack(&src, out, p, threads);
  free(src.buf);
  if (src.fd != STDIN_FILENO) close(src.fd);
  if (rc < 0) {
    const char *d = b2_last_detail();
    fprintf(stderr, "b2f: %s\n", d && *d ? d : b2_strerror(rc));
    return 1;
  }
  return 0;
}
