/*
 * b2_codec.h - layer 1: codecs and filters.
 *
 * Pure functions over memory buffers: no file I/O, no chunk headers.  The
 * chunk layer (b2_chunk.h) composes them into the Blosc block pipeline.
 *
 * Codec streams are exactly the bytes Blosc stores for one block or split:
 *   blosclz  the Blosc project's own LZ77 format (our own implementation)
 *   lz4/lz4hc a raw LZ4 block (no frame)
 *   zlib     a zlib stream with its 2-byte header
 *   zstd     a zstd frame, optionally with a dictionary
 * All functions are thread-safe; per-thread codec contexts are kept
 * internally and released by b2_codec_thread_cleanup().
 */
#ifndef B2_CODEC_H
#define B2_CODEC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Codec ids as used in frame headers and Blosc2 compcode. */
enum b2_codec_id {
  B2_CODEC_BLOSCLZ = 0,
  B2_CODEC_LZ4 = 1,
  B2_CODEC_LZ4HC = 2,
  B2_CODEC_SNAPPY = 3, /* recognised, not supported */
  B2_CODEC_ZLIB = 4,
  B2_CODEC_ZSTD = 5,
  /* python-blosc2's codecs for arrays (user-defined codec ids of the chunk
   * header, with its meta byte; the ZFP ones lossy, for floats, and only
   * when built with libzfp): read, and chosen for new arrays by name
   * ("zfp_rate", with the meta as b2_params_set takes it). */
  B2_CODEC_NDLZ = 32,     /* 2-D arrays of bytes */
  B2_CODEC_ZFP_ACC = 33,
  B2_CODEC_ZFP_PREC = 34,
  B2_CODEC_ZFP_RATE = 35
};

/* Stream format ids as stored in bits 5-7 of a chunk's flags byte.
 * lz4 and lz4hc share B2_FORMAT_LZ4. */
enum b2_format_id {
  B2_FORMAT_BLOSCLZ = 0,
  B2_FORMAT_LZ4 = 1,
  B2_FORMAT_SNAPPY = 2,
  B2_FORMAT_ZLIB = 3,
  B2_FORMAT_ZSTD = 4,
  B2_FORMAT_USER = 6 /* a codec id 32 and up, in the extended header */
};

/* Filter ids as stored in the Blosc2 filter pipeline slots. */
enum b2_filter_id {
  B2_FILTER_NONE = 0,
  B2_FILTER_SHUFFLE = 1,
  B2_FILTER_BITSHUFFLE = 2,
  B2_FILTER_DELTA = 3,
  B2_FILTER_TRUNC_PREC = 4,
  B2_FILTER_BYTEDELTA = 35,
  B2_FILTER_NDCELL = 32,   /* arrays' blocks stored cell by cell */
  B2_FILTER_NDMEAN = 33,   /* the same, each cell's items its mean (lossy) */
  B2_FILTER_INT_TRUNC = 36 /* lossy, its decode is a copy */
};
#define B2_MAX_FILTERS 6

/* Names <-> ids.  Unknown ids give NULL / a negative code. */
const char *b2_codec_name(int codec);      /* "zstd" */
int b2_codec_from_name(const char *name);  /* B2_CODEC_* or B2_E_INVAL */
int b2_codec_format(int codec);            /* B2_FORMAT_* or B2_E_UNSUPPORTED */
const char *b2_format_name(int format);
const char *b2_filter_name(int filter);    /* "shuffle" */
int b2_filter_from_name(const char *name); /* B2_FILTER_* or B2_E_INVAL */
/* The meta byte as the codec (filter) reads it, signed or not: 1 and
 * *value for those that take one (ndlz, the zfp codecs; trunc_prec,
 * int_trunc, ndcell, ndmean), 0 for the others.  Written "NAME:VALUE". */
int b2_codec_meta(int codec, int meta, int *value);
int b2_filter_meta(int filter, int meta, int *value);
/* A pipeline's B2_MAX_FILTERS slots as text: "shuffle,delta",
 * "trunc_prec:20,shuffle" (the meta of filters that take one), "filter37"
 * for ids without a name, "none" for an empty pipeline; cut at cap. */
void b2_filters_text(const uint8_t *filters, const uint8_t *meta, char *buf, size_t cap);

/* Whether `codec` (or `filter`) with its meta byte can encode the blocks
 * of a new frame of typesize-byte items: for an array, blocks of `ndim`
 * dimensions `shape` (C order) and nbytes bytes; ndim 0 for a frame that
 * is not an array.  The general-purpose codecs and the byte filters take
 * anything; ndlz, the zfp codecs, ndcell and ndmean need an array whose
 * items and blocks they encode (as the reference library's plugins do),
 * trunc_prec and int_trunc an item size and a meta that leave bits.
 * Returns 0, or B2_E_INVAL / B2_E_UNSUPPORTED with a message naming why. */
int b2_codec_check(int codec, int meta, int typesize, int ndim, const int32_t *shape,
                   size_t nbytes);
int b2_filter_check(int filter, int meta, int typesize, int ndim, const int32_t *shape,
                    size_t nbytes);
/* 1 for the filters whose output is not the items' values (shuffle,
 * bitshuffle, delta, bytedelta): none may come before a ZFP codec. */
int b2_filter_moves_bytes(int filter);

/* Decompress one stream of `srclen` bytes into exactly `dstlen` bytes.
 * `dict` may be NULL.  Returns `dstlen` on success, a negative B2_E_* code
 * when the stream is damaged, truncated or decodes to another size.  Never
 * reads outside [src, src+srclen) nor writes outside [dst, dst+dstlen). */
int b2_stream_decompress(int format, const void *src, size_t srclen,
                         void *dst, size_t dstlen, const void *dict,
                         size_t dictlen);

/* The same for a prefix: decode at least the first `want` (<= dstlen) of
 * the `dstlen` bytes the stream holds, stopping early where the format
 * allows it (lz4 without a dictionary, blosclz); other formats decode
 * it all.
 * Returns the number of bytes decoded (want..dstlen) or a negative code.
 * The part of the stream not decoded is not checked. */
int b2_stream_decompress_prefix(int format, const void *src, size_t srclen,
                                void *dst, size_t dstlen, size_t want,
                                const void *dict, size_t dictlen);

/* Compress `srclen` bytes with codec `codec` at `clevel` (0-9) into at most
 * `dstcap` bytes.  Returns the compressed size, 0 when the output would not
 * fit in `dstcap` (the caller then stores the data raw), or a negative code.
 * Level 0 and empty input also give 0.  Levels map to the libraries as the
 * reference does (lz4 acceleration 10 - clevel, lz4hc level clevel, zlib
 * level clevel, zstd level 2*clevel - 1 and its maximum at 9).  blosclz may
 * also give 0 early for data that barely compresses.  `dict` is used by
 * lz4, lz4hc and zstd and ignored by the others. */
int b2_stream_compress(int codec, int clevel, const void *src, size_t srclen,
                       void *dst, size_t dstcap, const void *dict,
                       size_t dictlen);

/* ---- ZFP (codecs 33-35) --------------------------------------------------
 * One stream per block of an array, no header: the field is the block of
 * `ndim` (1 to B2_ZFP_MAXDIM) dimensions `shape` (C order, the array's b2nd
 * block shape) of floats (typesize 4) or doubles (8), in the mode of the
 * codec with the chunk's codec meta byte (zfp_acc: tolerance 10^meta;
 * zfp_prec: meta + 3 + 2 * ndim bits; zfp_rate: meta / 100 of the item's
 * bits), as the reference library's plugin stores it.
 * b2_zfp_decompress: exactly dstlen bytes (the block, shape * typesize) or
 * a negative code (a damaged stream, a shape that is not the block's).
 * b2_zfp_compress: the stream's size, 0 when it would not be smaller than
 * the block or the input is not a whole block (the caller stores it raw),
 * or a negative code.  Without libzfp both fail with B2_E_UNSUPPORTED and
 * b2_zfp_available() is 0. */
#define B2_ZFP_MAXDIM 4
#define B2_ZFP_MIN_SIDE 4 /* ZFP's cells: the reference encodes no narrower block */
int b2_codec_is_zfp(int codec);
/* Whether blocks of `shape` (nbytes in all) of typesize-byte items can be
 * encoded with `codec`: libzfp present, floats or doubles, 1 to
 * B2_ZFP_MAXDIM dimensions of at least B2_ZFP_MIN_SIDE.  0 or a negative
 * code naming what fails. */
int b2_zfp_check(int codec, int typesize, int ndim, const int32_t *shape, size_t nbytes);

/* NDLZ (codec 32, meta 4 or 8: the cell side).  Decode one stream, which
 * carries its block's 2-D shape, into exactly dstlen bytes: dstlen or a
 * negative code.  Encode a block of bytes of 2-D `shape` (ndim 2, srclen
 * its size): the stream's size, or 0 when it would not be smaller than the
 * block or fit dstcap, or the block is not such a block (stored raw). */
int b2_ndlz_decompress(int meta, const void *src, size_t srclen, void *dst, size_t dstlen);
int b2_ndlz_compress(int meta, int ndim, const int32_t *shape, const void *src, size_t srclen,
                     void *dst, size_t dstcap);
int b2_zfp_available(void);
int b2_zfp_decompress(int codec, int meta, int typesize, int ndim, const int32_t *shape,
                      const void *src, size_t srclen, void *dst, size_t dstlen);
int b2_zfp_compress(int codec, int meta, int typesize, int ndim, const int32_t *shape,
                    const void *src, size_t srclen, void *dst, size_t dstcap);

/* Release this thread's codec contexts (optional; for clean leak checks). */
void b2_codec_thread_cleanup(void);

/* ---- filters ------------------------------------------------------------
 * All take a whole block.  `nbytes` need not be a multiple of `typesize`;
 * trailing bytes that do not form a whole element are copied unchanged, as
 * the reference library does.  src and dst must not overlap. */

void b2_shuffle(size_t typesize, size_t nbytes, const uint8_t *src,
                uint8_t *dst);
void b2_unshuffle(size_t typesize, size_t nbytes, const uint8_t *src,
                  uint8_t *dst);

/* Bit shuffle on groups of 8 elements (trailing elements copied as the
 * reference does).  Returns 0 or a negative code. */
int b2_bitshuffle(size_t typesize, size_t nbytes, const uint8_t *src,
                  uint8_t *dst);
int b2_bitunshuffle(size_t typesize, size_t nbytes, const uint8_t *src,
                    uint8_t *dst);
/* Bit unshuffle for chunks of format version 2 (Blosc 1.x before the
 * leftover handling changed): a block whose element count is not a multiple
 * of 8 was stored unshuffled and is copied; otherwise all its whole
 * elements are unshuffled and the nbytes % typesize trailing bytes, which
 * such writers never stored meaningfully, are set to zero (what the
 * reference library returns for them). */
int b2_bitunshuffle_v2(size_t typesize, size_t nbytes, const uint8_t *src,
                       uint8_t *dst);

/* Delta against a reference block `dref` (the chunk's first block, already
 * decoded); `offset` is this block's byte offset in the chunk.  The block at
 * offset 0 is delta-coded against itself.  In place on decode. */
void b2_delta_encode(const uint8_t *dref, size_t offset, size_t nbytes,
                     size_t typesize, const uint8_t *src, uint8_t *dst);
void b2_delta_decode(const uint8_t *dref, size_t offset, size_t nbytes,
                     size_t typesize, uint8_t *buf);

/* Zero the low mantissa bits of floats (typesize 4 or 8), keeping
 * `prec_bits` bits of mantissa (a negative value removes -prec_bits bits,
 * as the reference allows).  Encode-only: decoding is a copy.  Returns 0,
 * B2_E_UNSUPPORTED for other typesizes or B2_E_INVAL when no mantissa bit
 * would be left. */
int b2_truncprec(int prec_bits, size_t typesize, size_t nbytes,
                 const uint8_t *src, uint8_t *dst);
/* int_trunc (id 36): zero the low bits of each item (typesize 1, 2, 4 or 8),
 * read as a little-endian unsigned integer; prec_bits >= 0 is the number of
 * bits kept, < 0 the number removed.  0 or a negative code. */
int b2_inttrunc(int prec_bits, size_t typesize, size_t nbytes,
                const uint8_t *src, uint8_t *dst);

/* NDCELL (filter 32, mean 0) and NDMEAN (33, mean 1) over one block of an
 * array: `ndim` (1 to B2_NDCELL_MAXDIM) dimensions `shape` (C order, the
 * block shape) of typesize-byte items, nbytes in all; cells of `meta` items
 * along each dimension (NDMEAN: meta a signed byte, cut to the block's
 * sides), stored cell after cell, each as its rows along the last
 * dimension.  Encode gathers the block into that order (NDMEAN: each
 * cell's mean over the cell, float or double items); decode puts it back.
 * src and dst distinct.  Returns 0, or a negative code for a shape that is
 * not the block's or cells the block cannot hold. */
#define B2_NDCELL_MAXDIM 8
int b2_ndcell_encode(int mean, int meta, size_t typesize, int ndim, const int32_t *shape,
                     size_t nbytes, const uint8_t *src, uint8_t *dst);
int b2_ndcell_decode(int mean, int meta, size_t typesize, int ndim, const int32_t *shape,
                     size_t nbytes, const uint8_t *src, uint8_t *dst);
/* 0 when b2_ndcell_encode can take such blocks, else its error. */
int b2_ndcell_check(int mean, int meta, size_t typesize, int ndim, const int32_t *shape,
                    size_t nbytes);

/* Byte-delta (filter id 35): per byte stream of `typesize` streams. */
void b2_bytedelta_encode(size_t typesize, size_t nbytes, const uint8_t *src,
                         uint8_t *dst);
void b2_bytedelta_decode(size_t typesize, size_t nbytes, const uint8_t *src,
                         uint8_t *dst);

/* Which SIMD implementation the filters picked at run time
 * ("avx2", "sse2" or "generic"). */
const char *b2_simd_level(void);

#ifdef __cplusplus
}
#endif
#endif /* B2_CODEC_H */
