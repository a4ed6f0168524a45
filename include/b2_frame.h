/*
 * b2_frame.h - layer 3: frames (containers of chunks).
 *
 * A frame is either contiguous (one file: header, chunks, index chunk,
 * trailer) or sparse (a directory holding `chunks.b2frame`, whose chunks
 * section holds only the index, and one `%08X.chunk` file per chunk).  Both
 * the current layout (14-element header, vlmetalayers in the trailer) and
 * the older one (13-element header, usermeta chunk) are read.
 *
 * An open frame is immutable for readers: every read function below may be
 * called from several threads at once.  Chunks are identified by their
 * logical index 0..nchunks-1 (index order, not file order).
 *
 * Index entries that are special values (zeros, NaN, uninitialised) read
 * as the equivalent special chunk; uninitialised chunks read as zeros.
 * Frames of variable-length chunks (chunksize 0) take each chunk's size
 * from its own header at open; a special entry there has no size and is
 * refused.  In the older layout the trailer's usermeta chunk (when not
 * empty) is offered as the variable-length metalayer "usermeta".
 */
#ifndef B2_FRAME_H
#define B2_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "b2_codec.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct b2_frame b2_frame;

enum b2_layout { B2_LAYOUT_CONTIGUOUS = 0, B2_LAYOUT_SPARSE = 1 };

typedef struct b2_frame_info {
  int layout;           /* B2_LAYOUT_* */
  int legacy;           /* 1 for the older 13-element header layout */
  int format_version;   /* general_flags bits 0-3 */
  int varlen_chunks;    /* chunks of variable length (chunksize 0) */
  int vlblocks;         /* general_flags bit 7 */
  int64_t nbytes;       /* logical (uncompressed) size */
  int64_t cbytes;       /* compressed size field from the header */
  int64_t frame_size;   /* frame_size field (contiguous: bytes used) */
  int32_t header_size;
  int64_t nchunks;
  int32_t chunksize;    /* 0 for variable-length chunks */
  int32_t blocksize;
  int32_t typesize;
  int codec;            /* B2_CODEC_* default of the frame */
  int clevel;
  int splitmode;        /* B2_SPLIT_* (0 when not recorded) */
  uint8_t filters[B2_MAX_FILTERS];
  uint8_t filters_meta[B2_MAX_FILTERS];
  int nmeta;            /* fixed-length metalayers in the header */
  int nvlmeta;          /* variable-length metalayers in the trailer */
} b2_frame_info;

/* Open the frame at `path` (a file, or a sparse-frame directory) read-only.
 * Validates header, trailer and index against the real file sizes; on
 * error returns a negative code with a detail naming what is wrong. */
int b2_frame_open(const char *path, b2_frame **out);
void b2_frame_close(b2_frame *f);

const b2_frame_info *b2_frame_get_info(const b2_frame *f);
const char *b2_frame_path(const b2_frame *f);

/* Logical geometry: byte offset of chunk i in the logical content (i may
 * be nchunks: then nbytes), its decoded size, and the chunk holding
 * logical byte `offset`.  Out of range: B2_E_RANGE. */
int64_t b2_frame_chunk_start(const b2_frame *f, int64_t i);
int32_t b2_frame_chunk_nbytes(const b2_frame *f, int64_t i);
int64_t b2_frame_chunk_at(const b2_frame *f, int64_t offset);

/* Kind of chunk i without reading it: B2_SPECIAL_* from a special index
 * offset, else B2_SPECIAL_NONE (the chunk's own header may still be
 * special).  Negative code if i is out of range. */
int b2_frame_chunk_special(const b2_frame *f, int64_t i);

/* Stored size of chunk i in bytes (0 for special offsets), or < 0. */
int64_t b2_frame_chunk_cbytes(const b2_frame *f, int64_t i);

/* Read the stored bytes of chunk i into a malloc'd buffer (*chunk, *len;
 * the caller frees).  A special index offset yields an equivalent special
 * chunk.  The chunk header is validated before the body is read. */
int b2_frame_read_chunk(b2_frame *f, int64_t i, uint8_t **chunk, size_t *len);

/* Decode chunk i entirely into dst (dstcap >= its nbytes); returns nbytes.
 * Decode bytes [offset, offset+n) of chunk i, decoding only the blocks
 * that cover them; returns n. */
int b2_frame_decode_chunk(b2_frame *f, int64_t i, void *dst, size_t dstcap);
int b2_frame_decode_range(b2_frame *f, int64_t i, size_t offset, size_t n,
                          void *dst);

/* Fixed-length metalayers (header): names by position and content by
 * name (pointer valid while the frame is open). */
const char *b2_frame_meta_name(const b2_frame *f, int k);
int b2_frame_meta_get(const b2_frame *f, const char *name,
                      const uint8_t **data, size_t *len);

/* Variable-length metalayers (trailer): names by position; content is
 * decompressed into a malloc'd buffer the caller frees. */
const char *b2_frame_vlmeta_name(const b2_frame *f, int k);
int b2_frame_vlmeta_get(const b2_frame *f, const char *name, uint8_t **data,
                        size_t *len);

#ifdef __cplusplus
}
#endif
#endif /* B2_FRAME_H */
