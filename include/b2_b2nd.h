/*
 * b2_b2nd.h - layer 4: b2nd array geometry and the .npy view.
 *
 * A frame with a `b2nd` metalayer is an n-dimensional array stored chunk
 * by chunk: each chunk holds `chunkshape` items (padded at the edges),
 * split into blocks of `blockshape` items (padded likewise), each block and
 * the blocks within a chunk in C order.  This layer maps C-order byte
 * ranges of the array to byte ranges of decoded chunks, and writes the
 * NumPy .npy header that makes the array a plain file.  Its write side
 * describes a new array (shapes, metalayer) and turns C-order items into
 * encoded chunks.
 *
 * It does no I/O: reads go through a caller-supplied chunk reader, so the
 * same code serves `b2f cat` (partial decode) and the mount (chunk cache);
 * writes take items from a caller-supplied source and give chunks to a
 * caller-supplied sink (a frame, in `b2f pack`).
 */
#ifndef B2_B2ND_H
#define B2_B2ND_H

#include <stddef.h>
#include <stdint.h>

#include "b2_chunk.h"
#include "b2_frame.h"

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

/* The block geometry of the array (b2_chunk_geom), and giving it to an open
 * frame: b2_b2nd_attach reads f's b2nd metalayer, if it has one that
 * parses, and sets the frame's geometry (b2_frame_set_geom) so that its
 * ZFP chunks decode.  Returns 1 when set, 0 when f is not an array. */
void b2_b2nd_geom(const b2_b2nd *a, b2_chunk_geom *g);
int b2_b2nd_attach(b2_frame *f);

/* Check a frame's geometry against the array's: `nchunks` chunks, each of
 * `chunksize` decoded bytes (0: variable-length chunks, not checked here).
 * Returns 0 or B2_E_FORMAT naming the mismatch. */
int b2_b2nd_check(const b2_b2nd *a, int64_t nchunks, int32_t chunksize);

/* Bytes of the array's items in C order (nitems * itemsize). */
int64_t b2_b2nd_nbytes(const b2_b2nd *a);

/* Reads `len` bytes at `off` of decoded chunk `chunk` into dst.  Returns
 * >= 0, a negative B2_E_* code, or B2_B2ND_SKIP (no error code is that
 * low) to leave these bytes of the range to another reader: several
 * threads gathering one range, each its share of the requests, which
 * come in the same order every time. */
typedef int (*b2_chunk_reader)(void *ctx, int64_t chunk, size_t off,
                               size_t len, void *dst);
#define B2_B2ND_SKIP INT32_MIN

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

/* Writes `len` bytes from src as bytes [off, off+len) of decoded chunk
 * `chunk`; returns >= 0 on success. */
typedef int (*b2_chunk_writer)(void *ctx, int64_t chunk, size_t off,
                               size_t len, const void *src);

/* The inverse of b2_b2nd_read: store src as bytes [off, off+len) of the
 * array in C order, handing each run of items to `wr` as a byte range of
 * the decoded chunk that holds it (block by block, as b2_b2nd_read visits
 * them; runs of one chunk come one after another).  The range must lie
 * within the array (B2_E_RANGE otherwise); len > INT32_MAX is B2_E_INVAL.
 * Returns len or the first negative code from wr. */
int b2_b2nd_update(const b2_b2nd *a, uint64_t off, size_t len, const void *src,
                   b2_chunk_writer wr, void *ctx);

/* C-order byte span [*lo, *hi) of the array holding the items of chunk
 * `chunk` (its first and past its last item), and in *held (when not
 * NULL) the bytes of the array's items it holds (an edge chunk's padding
 * left out).  B2_E_RANGE for a chunk out of range. */
int b2_b2nd_chunk_span(const b2_b2nd *a, int64_t chunk, int64_t *lo,
                       int64_t *hi, int64_t *held);

/* 1 when chunks and blocks split only the first axis and blocks fill
 * each chunk exactly: the decoded chunks,
 * in order, then hold the items in C order (byte x of the array is byte x
 * of the chunks), else 0. */
int b2_b2nd_is_linear(const b2_b2nd *a);

/* Bands: the C-order view of an array cut into runs of whole rows (a row:
 * the items sharing one first coordinate, row_nbytes bytes), each inside
 * one cell of the first axis (the rows one block position of one chunk
 * spans), so that reading the bands in order needs each block's rows for
 * one band only.  The band holding `row`: [*r0, *r1).  Cells are grouped,
 * within their chunk, up to `target` bytes a band; a cell larger than
 * `max` is cut into bands of as many rows as fit in `max` (its blocks are
 * then decoded once per such band).  Returns 1, or 0 when the array has
 * no band (0 dimensions, no items, or a row larger than `max`). */
int64_t b2_b2nd_row_nbytes(const b2_b2nd *a);
int b2_b2nd_band(const b2_b2nd *a, int64_t row, int64_t target, int64_t max,
                 int64_t *r0, int64_t *r1);

/* A test of chunk `chunk`: 1 or 0, or a negative code. */
typedef int (*b2_chunk_test)(void *ctx, int64_t chunk);

/* SEEK_DATA and SEEK_HOLE in the C-order bytes of the array: the first
 * byte offset at or after `off` whose item lies in a chunk for which
 * hole(ctx, chunk) gives `want` (1: in a hole, 0: data), `off` itself
 * when its own item does; the array's byte count when none does (or when
 * off is at or past it).  The walk goes by runs of items (one chunk's
 * share of a row) and looks at `budget` of them at most: then *cut is set
 * and the start of the run where it stopped is returned.  A negative code
 * from hole is returned as it is. */
int64_t b2_b2nd_seek(const b2_b2nd *a, int64_t off, int want, b2_chunk_test hole, void *ctx,
                     int64_t budget, int *cut);

/* Zero the items of decoded chunk `chunk` (at buf, a->chunk_nbytes bytes)
 * whose first coordinate is >= from: the padding an array whose first
 * axis grows from `from` rows must read as zeros.  ndim >= 1. */
int b2_b2nd_zero_rows(const b2_b2nd *a, int64_t chunk, int64_t from,
                      void *buf);

/* Every .npy file starts with these B2_NPY_MAGIC_LEN bytes. */
#define B2_NPY_MAGIC "\x93NUMPY"
#define B2_NPY_MAGIC_LEN 6

/* The .npy header (format 1.0, or 2.0 if needed; padded as NumPy pads it
 * so that header length is a multiple of 64).  Returns its length, or the
 * needed length if `cap` is too small (nothing written then).  descr is
 * b2_dtype_to_npy of the metalayer's dtype (what numpy.save writes for the
 * dtype python-blosc2 rebuilds), also when it names another item size (the
 * reference library's default "|u1" on wider items); "|V<itemsize>" when
 * the text is no dtype NumPy rebuilds.  3.0 is used when field names need
 * UTF-8. */
int b2_npy_header(const b2_b2nd *a, char *buf, size_t cap);
/* The same header padded with spaces to exactly `len` bytes (a header of
 * the length another one had: a resize keeps a .npy view's offsets):
 * returns len, or B2_E_LIMIT when its text does not fit. */
int b2_npy_header_sized(const b2_b2nd *a, char *buf, size_t len);

/* Parse a .npy header: its length, dtype descr (copied into descr, NUL
 * terminated, UTF-8; a structured descr as its list text), fortran order
 * and shape (at most B2_B2ND_MAXDIM dimensions, product within int64).
 * Untrusted input: B2_E_TRUNCATED if `len` ends inside the header,
 * B2_E_LIMIT if descr does not fit descr_cap. */
int b2_npy_parse(const void *buf, size_t len, size_t *header_len,
                 char *descr, size_t descr_cap, int *fortran, int *ndim,
                 int64_t shape[B2_B2ND_MAXDIM]);

/* ---- writing ------------------------------------------------------------
 * Packing an array is the inverse of b2_b2nd_read: choose (or take) chunk
 * and block shapes, describe them with b2_b2nd_make, store the metalayer
 * from b2_b2nd_meta_encode, and turn the C-order items into decoded chunks
 * (b2_b2nd_scatter), encoded and handed to a caller-supplied sink in chunk
 * order (b2_b2nd_write).  Like reading, this layer does no I/O itself. */

/* Build a geometry from its parts, validated as b2_b2nd_parse validates a
 * metalayer (ndim 0..B2_B2ND_MAXDIM; shapes, item size and sizes within
 * limits).  dtype (NumPy's text, copied; NULL: "|u1" for 1-byte items,
 * else "|V<itemsize>") has dtype format 0.  Free with b2_b2nd_free. */
int b2_b2nd_make(b2_b2nd *out, int ndim, const int64_t *shape,
                 const int32_t *chunkshape, const int32_t *blockshape,
                 int32_t itemsize, const char *dtype);

/* The `b2nd` metalayer bytes for `a`, laid out exactly as the reference
 * library writes them (fixarray 7: version 0, ndim, shape as int64,
 * chunk and block shapes as int32, dtype format, dtype as str32).  *out is
 * malloc'd (the caller frees).  Returns 0 or a negative code. */
int b2_b2nd_meta_encode(const b2_b2nd *a, uint8_t **out, size_t *len);

/* Targets of the default geometry: chunks of about 4 MiB (python-blosc2's
 * smallest chunk) and blocks of about 256 KiB (the block the chunk encoder
 * picks for 8-byte items at low levels, and what fits a decoded and a
 * compressed block in L2), never more than these, except when a single
 * item is larger.  128 KiB blocks cost 10-20% more decode time per byte
 * with zstd (more, smaller streams after shuffle). */
#define B2_B2ND_CHUNK_TARGET ((int64_t)4 << 20)
#define B2_B2ND_BLOCK_TARGET ((int64_t)256 << 10)

/* Choose chunk and block shapes for an array of `shape` and `itemsize`.
 * On input a shape whose entries are all 0 is to be chosen, any other is
 * kept as given (no 0 entries then, unless that dimension is empty):
 * blocks are chosen inside given chunks, chunks as multiples of given
 * blocks.  Both follow the trailing dimensions: a block (chunk) spans
 * whole trailing dimensions while they fit its target, then part of the
 * next one (a divisor of its length when one is near), then 1; a chosen
 * block is then at least min_side (b2_cparams_min_side) along each
 * dimension the array's length allows.  Empty arrays get 1 everywhere.  Returns 0 or B2_E_INVAL (mixed zero and
 * non-zero entries, negative values, ndim out of range). */
int b2_b2nd_choose_shapes(int ndim, const int64_t *shape, int32_t itemsize,
                          int32_t min_side, int32_t *chunkshape, int32_t *blockshape);

/* Lay out decoded chunk `chunk` (a->chunk_nbytes bytes at dst: its blocks
 * in C order, each block's items in C order, padding zeroed) from the
 * C-order items of a box of the array: box_start[d] .. box_start[d] +
 * box_shape[d] - 1 along each dimension, held densely at src.  The box
 * must hold every item of the chunk that lies in the array.  Pure memory,
 * thread-safe.  Returns 0, or B2_E_INVAL / B2_E_RANGE for a box that
 * misses part of the chunk or a chunk index out of range. */
int b2_b2nd_scatter(const b2_b2nd *a, int64_t chunk, const int64_t *box_start,
                    const int64_t *box_shape, const void *src, void *dst);

/* Reads `len` bytes at `off` of the array's items in C order into dst;
 * returns 0 or a negative code (an early end of data is B2_E_TRUNCATED). */
typedef int (*b2_b2nd_source)(void *ctx, uint64_t off, size_t len, void *dst);

/* Takes encoded chunk `chunk` (len bytes), in chunk order 0, 1, ...;
 * returns >= 0 or a negative code (which stops the write). */
typedef int (*b2_b2nd_sink)(void *ctx, int64_t chunk, const void *data,
                            size_t len);

typedef struct b2_b2nd_write_opts {
  b2_cparams cparams;  /* codec, clevel, filters, splitmode; typesize and
                          blocksize come from the geometry */
  int nthreads;        /* chunks encoded at once (1: in the caller) */
  size_t slab_max;     /* source bytes held at once (0: 256 MiB) */
  int sequential;      /* the source is read front to back only (a pipe) */
} b2_b2nd_write_opts;

/* Fill opts with b2_cparams_default(), 1 thread, default slab, random
 * access allowed. */
void b2_b2nd_write_opts_default(b2_b2nd_write_opts *o);

/* The chunk parameters for `a` (typesize the item size, or 1 above 255 as
 * the reference does; blocksize one block's bytes; geom its block shape,
 * which the ZFP codecs need). */
void b2_b2nd_cparams(const b2_b2nd *a, b2_cparams *cp);

/* Encode the whole array: read its items from `src` a slab at a time (a
 * row of chunks, or along fewer dimensions when a row exceeds slab_max:
 * then smaller boxes read by pieces, which needs random access), lay out
 * and encode every chunk, and give them to `sink` in order.  Memory stays
 * about slab_max plus two chunks per thread.  A sequential source must
 * fit a row of chunks in slab_max (B2_E_LIMIT otherwise).  Returns 0 or
 * the first error (with context naming the chunk). */
int b2_b2nd_write(const b2_b2nd *a, const b2_b2nd_write_opts *o,
                  b2_b2nd_source src, void *src_ctx, b2_b2nd_sink sink,
                  void *sink_ctx);

/* Geometry of a new array from a parsed .npy header (descr, fortran,
 * ndim, shape as b2_npy_parse gives them): chunk and block shapes are
 * taken where given (non-NULL, no zero entry) and chosen otherwise
 * (b2_b2nd_choose_shapes); the dtype is the text python-blosc2 would
 * store for it (b2_dtype_from_npy).  B2_E_UNSUPPORTED for Fortran order
 * and object dtypes, B2_E_FORMAT for a descr that is not a dtype. */
int b2_b2nd_from_npy(b2_b2nd *out, const char *descr, int fortran, int ndim,
                     const int64_t *shape, const int32_t *chunkshape,
                     const int32_t *blockshape, int32_t min_side);

/* The array a new .npy file of `size` bytes whose first `len` bytes are
 * buf would be (what writing those bytes to a new .npy file makes,
 * b2_file_create_npy): its header parsed (b2_npy_parse), its geometry
 * (b2_b2nd_from_npy; chunk and block shapes cs, bs taken when their
 * lengths ncs, nbs are the array's dimensions), storable
 * (b2_b2nd_storable), and no bytes past its items.  0 (*out to free with
 * b2_b2nd_free, *hl the header's length), B2_E_TRUNCATED when buf ends
 * inside the header, or the code that names why those bytes are no
 * array (B2_E_INVAL for bytes past the items).  A size short of the
 * items is an array still being written: the caller compares. */
int b2_b2nd_of_npy(const void *buf, size_t len, int64_t size, const int32_t *cs, int ncs,
                   const int32_t *bs, int nbs, int32_t min_side, b2_b2nd *out, size_t *hl);

/* Whether the format can store `a`'s blocks and chunks: B2_E_LIMIT,
 * naming why, for blocks over B2_CHUNK_MAXBLOCK bytes (an item may be
 * larger than that) or chunks over B2_CHUNK_MAXSIZE. */
int b2_b2nd_storable(const b2_b2nd *a);

/* Frame parameters for storing `a`: fp keeps its layout and codec
 * settings and gets the item size, block and chunk sizes and the `b2nd`
 * metalayer (described in *mi, its bytes in *meta: free them after the
 * frame is created).  Fails, naming why, when the format cannot hold its
 * blocks or chunks (b2_b2nd_storable) or fp's codec or filters cannot
 * encode the array's items or blocks (b2_cparams_check). */
int b2_b2nd_frame_params(const b2_b2nd *a, b2_frame_params *fp,
                         b2_frame_meta_init *mi, uint8_t **meta);

/* ---- tensors -------------------------------------------------------------
 * python-blosc2's pack_tensor, save_tensor, pack_array2 and save_array
 * store a NumPy array (or a PyTorch or TensorFlow tensor) as a plain
 * SChunk of its items in C order, typesize the item size, with the
 * vlmetalayer B2_TENSOR_VLMETA = msgpack (kind, shape, dtype): kind
 * "numpy", "torch" or "tensorflow", dtype its dtype.str, or dtype.descr
 * for void dtypes.  The frame's logical bytes are the array's items, so
 * its .npy view is a header for (shape, dtype) followed by them.
 *
 * b2_tensor_parse reads that vlmetalayer's content (untrusted) into a
 * geometry holding the shape and dtype (its chunk and block shapes are
 * chosen as for a new array, not the frame's: a tensor's chunks cut its
 * items anywhere) and checks that the items fill exactly `nbytes`, the
 * frame's logical size.  B2_E_FORMAT when the content is not such a
 * triple or does not match nbytes, B2_E_UNSUPPORTED for object dtypes,
 * B2_E_LIMIT beyond B2_B2ND_MAXDIM dimensions.
 * b2_tensor_get does it for an open frame: 1 and *out set for a tensor,
 * 0 for a frame without the vlmetalayer, or the parse's negative code. */
#define B2_TENSOR_VLMETA "__pack_tensor__"
int b2_tensor_parse(const uint8_t *vlmeta, size_t len, int64_t nbytes, b2_b2nd *out);
int b2_tensor_get(const b2_frame *f, b2_b2nd *out);

/* ---- dtypes --------------------------------------------------------------
 * One pair of conversions between the dtype text of a b2nd metalayer and a
 * .npy header's descr, both as NumPy itself spells them; the .npy view
 * uses the first, writing an array from a .npy file the second.
 *
 * The metalayer text is what python-blosc2 writes (and reads back with
 * numpy.dtype, or numpy.dtype(ast.literal_eval(text))): `dtype.str` for
 * every dtype but void ones ("<f8", ">i2", "|b1", "|S7", "<U5", "<M8[ns]",
 * "<c16"), `str(dtype)` for void ones ("|V8", a list literal for packed
 * structured dtypes, a dict literal with 'offsets' and 'itemsize', and
 * 'aligned': True when so, for padded or aligned ones; nested fields,
 * titles and sub-array shapes inside either).  The descr is in
 * b2_npy_parse's form: the string's content for a plain dtype ("<f8"), the
 * list's literal text for a structured one, as numpy.lib.format's
 * dtype_to_descr gives it (fields in order, padding as ('', '|Vn'), every
 * scalar as its dtype.str).
 *
 * b2_dtype_to_npy: the descr numpy.save writes for the dtype python-blosc2
 * rebuilds from `dtype`, so numpy.load gives the same field names, offsets
 * and item size.  b2_dtype_from_npy: the text python-blosc2 stores for the
 * dtype numpy.load rebuilds from `descr` (padding dropped, offsets summed).
 * Either output (malloc'd, the caller frees; NULL: not wanted) and the item
 * size (NULL: not wanted).  Returns 0, B2_E_FORMAT for text that is not a
 * dtype, B2_E_UNSUPPORTED for object dtypes ('O': not raw data) and for
 * fields that overlap or run out of order (NumPy has no descr for them),
 * B2_E_LIMIT for sizes beyond INT32_MAX or nesting beyond 32 levels. */
int b2_dtype_to_npy(const char *dtype, char **descr, int64_t *itemsize);
int b2_dtype_from_npy(const char *descr, char **dtype, int64_t *itemsize);

/* Item size of a descr as b2_npy_parse returns it (b2_dtype_from_npy's);
 * the size (> 0) or its negative code. */
int64_t b2_npy_descr_itemsize(const char *descr);

#ifdef __cplusplus
}
#endif
#endif /* B2_B2ND_H */
