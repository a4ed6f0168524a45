/*
 * b2_b2nd.h - layer 4: b2nd array geometry and the .npy view.
 *
 * A frame with a `b2nd` metalayer is an n-dimensional array stored chunk
 * by chunk: each chunk holds `chunkshape` items (padded at the edges),
 * split into blocks of `blockshape` items (padded likewise), each block and
 * the blocks within a chunk in C order.  This layer maps C-order byte
 * ranges of the array to byte ranges of decoded chunks, and writes the
 * NumPy .npy header that makes the array a plain file.
 *
 * It does no I/O: reads go through a caller-supplied chunk reader, so the
 * same code serves `b2f cat` (partial decode) and the mount (chunk cache).
 */
#ifndef B2_B2ND_H
#define B2_B2ND_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define B2_B2ND_MAXDIM 16
#define B2_B2ND_MAXDTYPE (1 << 20) /* longest dtype string accepted */

typedef struct b2_b2nd {
  int ndim;
  int64_t shape[B2_B2ND_MAXDIM];
  int32_t chunkshape[B2_B2ND_MAXDIM];
  int32_t blockshape[B2_B2ND_MAXDIM];
  int dtype_format;   /* 0: NumPy */
  char *dtype;        /* NumPy dtype string, NUL-terminated (owned) */
  int32_t itemsize;   /* bytes per item (the frame's typesize) */
  int64_t nitems;     /* product of shape */
  int64_t nchunks;    /* chunks the geometry implies */
  int64_t chunk_nbytes; /* decoded bytes of one (padded) chunk */
  int32_t block_nbytes; /* decoded bytes of one (padded) block */
} b2_b2nd;

/* Parse a b2nd metalayer; `itemsize` comes from the frame's typesize.
 * Validates ndim, non-negative shape, positive chunk/block shapes, block
 * within chunk, and that no size overflows (a chunk and a block must fit in
 * int32).  A dimension of length 0 may have chunk and block shape 0, as the
 * reference library writes for empty arrays.  A metalayer without the dtype
 * entries (older writers) gets "|u1" for itemsize 1, else "|V<itemsize>".
 * b2_b2nd_free releases it (safe on a zeroed or failed-parse struct). */
int b2_b2nd_parse(const uint8_t *meta, size_t len, int32_t itemsize,
                  b2_b2nd *out);
void b2_b2nd_free(b2_b2nd *a);

/* Check a frame's geometry against the array's: `nchunks` chunks, each of
 * `chunksize` decoded bytes (0: variable-length chunks, not checked here).
 * Returns 0 or B2_E_FORMAT naming the mismatch. */
int b2_b2nd_check(const b2_b2nd *a, int64_t nchunks, int32_t chunksize);

/* Bytes of the array's items in C order (nitems * itemsize). */
int64_t b2_b2nd_nbytes(const b2_b2nd *a);

/* Reads `len` bytes at `off` of decoded chunk `chunk` into dst. */
typedef int (*b2_chunk_reader)(void *ctx, int64_t chunk, size_t off,
                               size_t len, void *dst);

/* Fill dst with bytes [off, off+len) of the array in C order.  Requests
 * each needed block from `rd` at most once per call, and no block the range
 * does not touch; a request covers only the part of its block that spans
 * the needed items (never crossing the block's end), and goes straight into
 * dst when those bytes are contiguous there.  The reader returns >= 0 on
 * success.  Returns the bytes filled: len, fewer if the range passes the end
 * of the array (0 at or past it), or a negative code; len > INT32_MAX is
 * B2_E_INVAL.  Thread-safe (scratch space is per thread). */
int b2_b2nd_read(const b2_b2nd *a, uint64_t off, size_t len, void *dst,
                 b2_chunk_reader rd, void *ctx);

/* The .npy header (format 1.0, or 2.0 if needed; padded as NumPy pads it
 * so that header length is a multiple of 64).  Returns its length, or the
 * needed length if `cap` is too small (nothing written then).  descr is the
 * metalayer's dtype, except "|V<itemsize>" when that is not a NumPy dtype
 * or names another item size (the reference library's default "|u1" on
 * wider items).  3.0 is used when field names need UTF-8. */
int b2_npy_header(const b2_b2nd *a, char *buf, size_t cap);

/* Parse a .npy header: its length, dtype descr (copied into descr, NUL
 * terminated, UTF-8; a structured descr as its list text), fortran order
 * and shape (at most B2_B2ND_MAXDIM dimensions, product within int64).
 * Untrusted input: B2_E_TRUNCATED if `len` ends inside the header,
 * B2_E_LIMIT if descr does not fit descr_cap. */
int b2_npy_parse(const void *buf, size_t len, size_t *header_len,
                 char *descr, size_t descr_cap, int *fortran, int *ndim,
                 int64_t shape[B2_B2ND_MAXDIM]);

#ifdef __cplusplus
}
#endif
#endif /* B2_B2ND_H */
