/*
 * b2_chunk.h - layer 2: one Blosc chunk (decode, partial decode, encode).
 *
 * A chunk is a self-describing compressed buffer: a 16-byte Blosc 1.x header
 * or a 32-byte Blosc2 header, then blocks.  This layer parses and validates
 * the header against the number of bytes actually available, decodes whole
 * chunks or only the blocks that cover a byte range, and encodes chunks.
 * Every size in a chunk is untrusted: all are checked before use.
 */
#ifndef B2_CHUNK_H
#define B2_CHUNK_H

#include <stddef.h>
#include <stdint.h>

#include "b2_codec.h"

#ifdef __cplusplus
extern "C" {
#endif

#define B2_CHUNK_HEADER_MIN 16 /* Blosc 1.x header */
#define B2_CHUNK_HEADER_EXT 32 /* Blosc2 extended header */
#define B2_CHUNK_MAXSIZE 0x7fffffdf /* largest nbytes a chunk can hold
                                      (INT32_MAX - 32, so cbytes fits) */
#define B2_CHUNK_MAXBLOCK 536866816 /* largest block the reference
                                       library accepts */

/* Special chunk kinds (no blocks stored). */
enum b2_special {
  B2_SPECIAL_NONE = 0,
  B2_SPECIAL_ZERO = 1,
  B2_SPECIAL_NAN = 2,
  B2_SPECIAL_VALUE = 3,  /* one repeated value of `typesize` bytes */
  B2_SPECIAL_UNINIT = 4  /* read as zeros */
};

/* Split modes as in the reference library's cparams. */
enum b2_splitmode {
  B2_SPLIT_ALWAYS = 1,
  B2_SPLIT_NEVER = 2,
  B2_SPLIT_AUTO = 3,
  B2_SPLIT_FORWARD_COMPAT = 4
};

typedef struct b2_chunk_info {
  int version;        /* header byte 0 */
  int versionlz;      /* header byte 1 */
  int flags;          /* header byte 2 (raw) */
  int typesize;       /* header byte 3 */
  int32_t nbytes;     /* decompressed size */
  int32_t blocksize;  /* size of each block (the last may be shorter);
                         vlblocks: the largest block; 0 when nbytes is 0 */
  int32_t cbytes;     /* whole chunk size, header included */
  int header_len;     /* 16 or 32 */
  int format;         /* B2_FORMAT_* of the streams */
  int codec;          /* B2_CODEC_* (lz4hc reported as lz4 if unknowable);
                         -1 for a format we cannot decode */
  int clevel;         /* -1 when the chunk does not record it */
  int codec_meta;     /* header byte 23: the ZFP codecs' parameter */
  uint8_t filters[B2_MAX_FILTERS]; /* 1.x chunks: from flags bits 0/2/3 */
  uint8_t filters_meta[B2_MAX_FILTERS];
  int blosc2_flags;   /* header byte 31 (0 for 1.x chunks) */
  int special;        /* B2_SPECIAL_* */
  int memcpyed;       /* data stored raw after the header */
  int split;          /* full blocks split into typesize streams (flags
                         bit 4; 1.x chunks also need typesize <= 16 and
                         blocksize / typesize >= 128) */
  int dict;           /* a dictionary section precedes the streams */
  int vlblocks;       /* variable-length blocks (format 3.x) */
  int32_t nblocks;
  int32_t leftover;   /* size of the last block if shorter, else 0 */
} b2_chunk_info;

/* Parse and validate the header of `chunk` given `avail` readable bytes
 * (avail may exceed cbytes).  Checks every field for consistency (cbytes
 * within avail, blocksize and nbytes sane, known codec and filters).
 * Returns 0 or a negative code with a detail naming the bad field. */
int b2_chunk_parse(const void *chunk, size_t avail, b2_chunk_info *info);

/* Only peek at the sizes (needs 16 bytes): nbytes, cbytes, blocksize, as
 * stored (for variable-length blocks the blocksize field holds nblocks).
 * Any output pointer may be NULL.  Returns 0 or B2_E_TRUNCATED. */
int b2_chunk_sizes(const void *chunk, size_t avail, int32_t *nbytes,
                   int32_t *cbytes, int32_t *blocksize);

/* Block geometry of an array (its b2nd block shape, C order), which the
 * ZFP codecs and the NDCELL and NDMEAN filters need to decode or encode a
 * block; the others ignore it.  Decoders take it as `geom`: NULL (or ndim
 * 0) when the chunk's frame is not an array, and then such a chunk fails
 * with an error saying so. */
#define B2_CHUNK_GEOM_MAXDIM 16
typedef struct b2_chunk_geom {
  int ndim;
  int32_t blockshape[B2_CHUNK_GEOM_MAXDIM];
} b2_chunk_geom;

/* Decode the whole chunk into dst (dstcap >= nbytes).  Returns nbytes. */
int b2_chunk_decode(const void *chunk, size_t len, void *dst, size_t dstcap);

/* Same as b2_chunk_decode, with the blocks shared between the calling
 * thread and the workers of `pool` (src/common/pool.h) that are idle at the
 * call: none when a job is queued there (read-ahead), the chunk is small
 * or has a single block, or pool is NULL; then it is b2_chunk_decode.
 * Same result, same errors. */
struct b2_pool;
int b2_chunk_decode_par(const void *chunk, size_t len, void *dst,
                        size_t dstcap, struct b2_pool *pool, const b2_chunk_geom *geom);

/* Called before reading a chunk of `nbytes` decoded bytes that this thread
 * will then decode with b2_chunk_decode_par: when it is large enough to be
 * shared, one sleeping worker of `pool` is woken now to wait for its
 * blocks, so that its wake-up overlaps the read instead of delaying the
 * decode (and is sent back to sleep by that decode if the chunk turns out
 * not to be shared).  1 when a worker was woken (it may also share the
 * read: b2_io_pread_par), else 0. */
int b2_chunk_par_prepare(struct b2_pool *pool, int32_t nbytes);

/* Partial decode: fill dst with bytes [offset, offset+n) of the decoded
 * chunk, decoding only the blocks that cover that range (plus the first
 * block when the delta filter needs it).  Returns n. */
int b2_chunk_decode_range(const void *chunk, size_t len, size_t offset,
                          size_t n, void *dst, const b2_chunk_geom *geom);

/* Partial decode of a chunk stored in a file, reading only the blocks it
 * decodes.  With the chunk's first `have` bytes (at least the 32-byte
 * header) in a buffer as long as the chunk, b2_chunk_range_plan says what
 * decoding bytes [offset, offset+n) needs:
 *  - *nspans > 0: the stored bytes spans[0 .. *nspans) (at most
 *    B2_CHUNK_SPANS: the blocks covering the range, and block 0 when the
 *    delta filter needs it); read them into the buffer at the same
 *    offsets, then call b2_chunk_decode_range_spans;
 *  - *nspans == 0: first read the chunk's first *head bytes (its block
 *    starts), then call again;
 *  - *nspans < 0: read the chunk whole (special, memcpy'd, dictionary or
 *    variable-length chunks, or more blocks than B2_CHUNK_SPANS).
 * Returns 0, or a negative code for a header that does not parse.
 * b2_chunk_decode_range_spans is b2_chunk_decode_range reading no stored
 * byte outside the header, block starts and spans: a chunk whose blocks
 * are not laid out one after another fails with B2_E_FORMAT, and is then
 * to be read whole. */
#define B2_CHUNK_SPANS 4
typedef struct b2_chunk_span {
  int64_t lo, hi; /* stored bytes [lo, hi) of the chunk */
} b2_chunk_span;
int b2_chunk_range_plan(const void *chunk, size_t have, size_t offset, size_t n,
                        size_t *head, b2_chunk_span *spans, int *nspans);
int b2_chunk_decode_range_spans(const void *chunk, size_t len, size_t offset, size_t n,
                                void *dst, const b2_chunk_geom *geom);

/* ---- encode ---------------------------------------------------------- */
typedef struct b2_cparams {
  int codec;      /* B2_CODEC_* */
  int clevel;     /* 0-9; 0 stores memcpy'd */
  int typesize;   /* 1-255 */
  uint8_t filters[B2_MAX_FILTERS]; /* 1.x chunks: from flags bits 0/2/3 */
  uint8_t filters_meta[B2_MAX_FILTERS];
  int32_t blocksize; /* 0: choose as the reference library does */
  int splitmode;     /* B2_SPLIT_*; 0 means FORWARD_COMPAT */
  int codec_meta;    /* the ZFP codecs' parameter (header byte 23) */
  b2_chunk_geom geom; /* the array's block shape (ZFP, NDCELL, NDMEAN) */
} b2_cparams;

/* Whether blocks encoded with `p` are lossy as wholes (the ZFP codecs, the
 * NDMEAN filter): a block's encoding depends on all its bytes, padding
 * included, and encoding decoded bytes again may change them. */
int b2_cparams_lossy_blocks(const b2_cparams *p);

/* Whether a new frame can be encoded with `p`: every codec and filter
 * takes its typesize and, for an array (geom.ndim > 0, blocksize its
 * block's bytes), its block shape (b2_codec_check, b2_filter_check).
 * 0, or a negative code naming what does not fit. */
int b2_cparams_check(const b2_cparams *p);

/* The name of the codec or filter of `p` that reads its items as IEEE
 * floats or doubles in the machine's (little-endian) order: the zfp
 * codecs, ndmean, trunc_prec; NULL when none does.  Only the typesize
 * reaches the chunk layer: an array's layer checks its dtype with this. */
const char *b2_cparams_float_only(const b2_cparams *p);

/* The least block side along each dimension the codec of `p` encodes
 * (B2_ZFP_MIN_SIDE for ZFP, else 1): what a new array's blocks are given
 * where they are chosen for it. */
int32_t b2_cparams_min_side(const b2_cparams *p);

/* Fill `p` with defaults: zstd, clevel 1, shuffle, typesize 8. */
void b2_cparams_default(b2_cparams *p);

/* Upper bound of an encoded chunk for `nbytes` of input. */
size_t b2_chunk_bound(size_t nbytes);

/* Block size the encoder will use for `nbytes` with parameters `p`. */
int32_t b2_chunk_blocksize(const b2_cparams *p, size_t nbytes);

/* Encode src into dst (dstcap >= b2_chunk_bound(n)), byte for byte as the
 * reference library lays chunks out: input of fewer than 32 bytes or
 * clevel 0 is stored memcpy'd; so is input whose encoding would exceed
 * n + 32 bytes.  Input whose every stream is zeros (after the filters)
 * gives a special zero chunk.  Returns the chunk size (cbytes). */
int b2_chunk_encode(const b2_cparams *p, const void *src, size_t n, void *dst,
                    size_t dstcap);

/* Build a special chunk of `kind` for `nbytes` logical bytes (for
 * B2_SPECIAL_VALUE, `value` holds typesize bytes).  nbytes must be a
 * multiple of typesize except for zeros; NaN needs typesize 4 or 8.  The
 * header's blocksize is what b2_cparams_default() parameters would pick
 * (no blocks are stored; a caller may overwrite bytes 8-11).
 * Returns cbytes (32, or 32 + typesize for a repeated value). */
int b2_chunk_make_special(int kind, int32_t nbytes, int typesize,
                          const void *value, void *dst, size_t dstcap);

/* Release this thread's scratch buffers (they are also released when the
 * thread exits; call this for clean leak checks or to return memory). */
void b2_chunk_thread_cleanup(void);

#ifdef __cplusplus
}
#endif
#endif /* B2_CHUNK_H */
