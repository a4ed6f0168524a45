/* cmd_cat.c - `b2f cat [--c-order|--npy] PATH`: a frame's content to stdout. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "b2_b2nd.h"
#include "b2_error.h"
#include "b2_file.h"
#include "cli/cli.h"

#define CAT_BUFSIZE (4u << 20)

/* Bytes [off, end) of the content to fd, at its position. */
static int copy_range(b2f_reader rd, void *ctx, int64_t off, int64_t end, const char *name,
                      int fd) {
  char *buf = malloc(CAT_BUFSIZE);
  if (!buf) return b2f_report(name, b2_fail(B2_E_NOMEM, "no memory for the output buffer"));
  int status = 0;
  while (off < end) {
    size_t want = end - off < CAT_BUFSIZE ? (size_t)(end - off) : CAT_BUFSIZE;
    ssize_t got = rd(ctx, buf, want, off);
    if (got < 0) {
      status = b2f_report(name, (int)got);
      break;
    }
    if (got == 0) {
      status = b2f_report(name, b2_fail(B2_E_TRUNCATED, "content ends at %lld of %lld bytes",
                                        (long long)off, (long long)end));
      break;
    }
    if (b2f_write_all(fd, buf, (size_t)got) < 0) {
      perror("b2f: write");
      status = 1;
      break;
    }
    off += got;
  }
  free(buf);
  return status;
}

int b2f_copy(b2f_reader rd, void *ctx, int64_t size, const char *name, int fd) {
  return copy_range(rd, ctx, 0, size, name, fd);
}

static ssize_t file_reader(void *ctx, void *buf, size_t n, int64_t off) {
  return b2_file_pread(ctx, buf, n, off);
}

/* A frame that is no array shows its own bytes in the .npy view (a .npy
 * file written somewhere and kept as its bytes): those must then be a .npy
 * file, else --npy would write something that is not one. */
static int npy_check(b2_file *f, int view) {
  if (view != B2_VIEW_NPY || b2_file_array(f)) return 0;
  char magic[B2_NPY_MAGIC_LEN];
  ssize_t n = b2_file_size(f) >= B2_NPY_MAGIC_LEN ? b2_file_pread(f, magic, sizeof magic, 0) : 0;
  if (n < 0) return (int)n;
  if (n == B2_NPY_MAGIC_LEN && !memcmp(magic, B2_NPY_MAGIC, B2_NPY_MAGIC_LEN)) return 0;
  return b2_fail(B2_E_FORMAT, "not a b2nd array (no 'b2nd' metalayer), nor a .npy file kept as its bytes");
}

int b2f_copy_file(b2_file *f, int view, const char *name, int fd) {
  int rc = npy_check(f, view);
  if (rc < 0) return b2f_report(name, rc);
  int64_t size = b2_file_size(f);
  /* Into a regular file (not appending): the holes of the content
   * (b2_file_seek_hole: chunks stored as zeros) are skipped, left as holes
   * of the output, not written as zeros. */
  struct stat st;
  int fl = fcntl(fd, F_GETFL);
  off_t base = lseek(fd, 0, SEEK_CUR);
  if (fl < 0 || (fl & O_APPEND) || base < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
    return b2f_copy(file_reader, f, size, name, fd);
  for (int64_t off = 0; off < size;) {
    int64_t d = b2_file_seek_hole(f, off, 0);
    if (d == B2_E_RANGE) d = size; /* holes to the end */
    if (d < 0) return b2f_report(name, (int)d);
    int64_t h = d < size ? b2_file_seek_hole(f, d, 1) : size;
    if (h < 0) return b2f_report(name, (int)h);
    if (lseek(fd, base + (off_t)d, SEEK_SET) < 0) {
      perror("b2f: lseek");
      return 1;
    }
    rc = copy_range(file_reader, f, d, h, name, fd);
    if (rc) return rc;
    off = h;
  }
  if (fstat(fd, &st) < 0 || (st.st_size < base + size && ftruncate(fd, base + size) < 0)) {
    perror("b2f: ftruncate");
    return 1;
  }
  return 0;
}

/* Write the content of `path` in `view` to fd. */
int b2f_copy_content(const char *path, int view, int fd, int show_progress) {
  (void)show_progress;
  b2_env *env;
  int rc = b2f_env(&env);
  if (rc < 0) return b2f_report(path, rc);
  b2_file *f;
  rc = b2_file_open(env, path, view, B2_OPEN_RDONLY, &f);
  int status = rc < 0 ? b2f_report(path, rc) : b2f_copy_file(f, view, path, fd);
  if (rc == 0) b2_file_close(f);
  b2_env_destroy(env);
  return status;
}

int b2f_env(b2_env **env) {
  b2_env_opts eo;
  b2_env_opts_default(&eo);
  eo.cache_size = 64u << 20;
  return b2_env_create(&eo, env);
}

int b2f_cat(int argc, char **argv) {
  int view = B2_VIEW_LOGICAL, raw = 0;
  const char *path = NULL, *key = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--c-order"))
      view = B2_VIEW_CORDER;
    else if (!strcmp(argv[i], "--npy"))
      view = B2_VIEW_NPY;
    else if (!strcmp(argv[i], "--raw"))
      raw = 1;
    else if (argv[i][0] == '-' && argv[i][1])
      return b2f_usage_error("cat", "unknown option");
    else if (!path)
      path = argv[i];
    else if (!key)
      key = argv[i];
    else
      return b2f_usage_error("cat", "PATH, or STORE KEY");
  }
  if (!path) return b2f_usage_error("cat", "missing PATH");
  if (key) return b2f_cat_store(path, key, view, raw, STDOUT_FILENO);
  if (raw) return b2f_usage_error("cat", "--raw is for a value of a store");
  return b2f_copy_content(path, view, STDOUT_FILENO, 0);
}
