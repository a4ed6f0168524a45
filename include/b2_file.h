/*
 * b2_file.h - layer 6: a file-like handle over a frame.
 *
 * This is the one interface the FUSE daemon and the b2f tool use to read and
 * write frames as plain bytes.  A handle presents one *view* of a frame:
 *
 *   B2_VIEW_LOGICAL  the frame's logical content (chunks decoded, in order)
 *   B2_VIEW_CORDER   a b2nd array's items in C order
 *   B2_VIEW_NPY      the same preceded by a NumPy .npy header
 *
 * Reads go through the shared chunk cache of a b2_env when one is given
 * (whole chunks decoded once, shared by all handles), with partial decode for
 * small reads of uncached chunks and read-ahead for sequential access.
 * Without an env (env == NULL) reads decode straight from the frame.
 *
 * A handle is safe to use from several threads at once.
 */
#ifndef B2_FILE_H
#define B2_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "b2_b2nd.h"
#include "b2_chunk.h"
#include "b2_frame.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- environment: cache, worker pool and defaults shared by handles ---- */
typedef struct b2_env b2_env;

typedef struct b2_env_opts {
  size_t cache_size;  /* bytes of decoded chunks kept (default 256 MiB) */
  size_t dirty_max;   /* bytes of dirty chunks held before writers wait */
  int nthreads;       /* worker threads for read-ahead and compression */
  int readahead;      /* chunks decoded ahead on sequential reads (0: off) */
  b2_cparams cparams; /* parameters of new frames */
  int32_t chunksize;  /* chunk size of new frames */
  int layout;         /* B2_LAYOUT_* of new frames */
} b2_env_opts;

void b2_env_opts_default(b2_env_opts *o);
int b2_env_create(const b2_env_opts *o, b2_env **out);
void b2_env_destroy(b2_env *env);

/* ---- handles ------------------------------------------------------------ */
typedef struct b2_file b2_file;

enum b2_view { B2_VIEW_LOGICAL = 0, B2_VIEW_CORDER = 1, B2_VIEW_NPY = 2 };

/* Open flags. */
#define B2_OPEN_RDONLY 0
#define B2_OPEN_RDWR 1

/* Open the frame at `path` with the given view.  B2_VIEW_CORDER and
 * B2_VIEW_NPY need a valid b2nd metalayer (else B2_E_FORMAT). */
int b2_file_open(b2_env *env, const char *path, int view, int flags,
                 b2_file **out);
int b2_file_close(b2_file *f);

/* Size of the view in bytes. */
int64_t b2_file_size(const b2_file *f);

/* Read up to n bytes at off; returns bytes read (short only at the end). */
ssize_t b2_file_pread(b2_file *f, void *buf, size_t n, int64_t off);

/* Frame and array under the handle (array NULL unless a b2nd view). */
b2_frame *b2_file_frame(const b2_file *f);
const b2_b2nd *b2_file_array(const b2_file *f);

/* ---- extended attributes (src/file/xattr.c, owned by the FUSE helper) ----
 * A frame's properties as "user.b2.*" attributes with text values:
 *   user.b2.codec clevel filters typesize chunksize blocksize nchunks cbytes
 *   nbytes cratio, and for a frame with a b2nd metalayer also shape,
 *   chunkshape, blockshape (as "AxBxC") and dtype;
 *   user.b2.meta.NAME    raw bytes of each fixed-length metalayer;
 *   user.b2.vlmeta.NAME  decompressed bytes of each variable-length one.
 * Both calls follow listxattr/getxattr: with cap 0 they return the size
 * needed and write nothing; B2_E_RANGE when cap is too small. */

/* Names, each NUL-terminated, into buf.  Returns the total length. */
ssize_t b2_file_xattr_list(b2_file *f, char *buf, size_t cap);

/* Value of `name` (no NUL added).  Returns its length, or B2_E_NOENT for a
 * name the frame does not have. */
ssize_t b2_file_xattr_get(b2_file *f, const char *name, void *buf, size_t cap);
/* ---- end of extended attributes ---- */

#ifdef __cplusplus
}
#endif
#endif /* B2_FILE_H */
