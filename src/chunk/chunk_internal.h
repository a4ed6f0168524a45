/* chunk_internal.h - declarations shared by the files of the chunk layer
 * (not public): header byte offsets and flag bits, the per-thread scratch
 * buffers, the filter pipeline steps and the automatic tuning rules. */
#ifndef B2_CHUNK_INTERNAL_H
#define B2_CHUNK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "b2_chunk.h"

/* Byte offsets of the header fields. */
#define B2H_VERSION 0
#define B2H_VERSIONLZ 1
#define B2H_FLAGS 2
#define B2H_TYPESIZE 3
#define B2H_NBYTES 4
#define B2H_BLOCKSIZE 8
#define B2H_CBYTES 12
#define B2H_FILTERS 16   /* 6 filter ids */
#define B2H_UDCODEC 22   /* codec id (Blosc2 writers) */
#define B2H_CODEC_META 23
#define B2H_FMETA 24     /* 6 filter meta bytes */
#define B2H_FLAGS2 30    /* bit 0: variable-length blocks */
#define B2H_B2FLAGS 31

/* Bits of the flags byte. */
#define B2F_SHUFFLE 0x01
#define B2F_MEMCPYED 0x02
#define B2F_BITSHUFFLE 0x04
#define B2F_DELTA 0x08
#define B2F_NOSPLIT 0x10

/* Bits of the blosc2_flags byte. */
#define B2F2_DICT 0x01
#define B2F2_BIGENDIAN 0x02
#define B2F2_LAZY 0x08
#define B2F2_INSTR 0x80

/* Chunk format versions (byte 0). */
#define B2_VERSION_BLOSC1 2   /* last Blosc 1.x format */
#define B2_VERSION_ALPHA 3    /* Blosc2 alpha: filter slot 5 unreliable */
#define B2_VERSION_STABLE 5   /* what the reference writes today */
#define B2_VERSION_VLBLOCKS 6 /* variable-length blocks */

#define B2_MAX_BLOCKSIZE B2_CHUNK_MAXBLOCK
#define B2_MAX_DICTSIZE (32 * 1024)
#define B2_MIN_BUFFERSIZE 32  /* smaller inputs are stored memcpy'd */

/* ---- per-thread scratch (scratch.c) ------------------------------------
 * Growable buffers owned by the calling thread, released at thread exit
 * or by b2_chunk_thread_cleanup().  A slot's contents survive until the
 * next b2_chunk_scratch() call for the same slot on the same thread. */
enum {
  B2_SCR_PIPE_A = 0, /* filter pipeline ping */
  B2_SCR_PIPE_B,     /* filter pipeline pong */
  B2_SCR_BLOCK,      /* a block decoded for a partial copy */
  B2_SCR_REF,        /* block 0, the delta reference */
  B2_SCR_ENC,        /* encoder: whole-chunk filter output */
  B2_SCR_COUNT
};
uint8_t *b2_chunk_scratch(int slot, size_t n);

/* b2_chunk_parse of a chunk of which only the first `have` bytes are
 * read yet (the header says how long it is): B2_E_TRUNCATED when parsing
 * needs more (special and variable-length chunks are parsed whole).
 * (header.c) */
int b2_chunk_parse_head(const void *chunk, size_t have, b2_chunk_info *in);

/* ---- parallel decode (decode.c) ----------------------------------------
 * b2_chunk_decode_par shares chunks of at least b2_chunk_par_min decoded
 * bytes (128 KiB; tests lower it before starting threads); the blocks pool
 * workers decoded for it since start (a statistic for the tests: shows the
 * work was shared). */
extern int32_t b2_chunk_par_min;
extern long b2_chunk_par_prepare_us; /* how long b2_chunk_par_prepare's worker polls */
extern _Atomic long b2_chunk_par_helped;

/* ---- filter steps (filters.c) ------------------------------------------
 * One filter of a pipeline slot applied to a whole block.  `fid`/`meta`
 * are the slot's id and meta byte, `version` the chunk's format version.
 * Decode: src and dst distinct, except delta which works in place on dst
 * (src ignored) against `ref` (block 0 decoded, or NULL for block 0). */
int b2_filter_supported(int fid); /* decoded and encoded, as the slot's id */
int b2_filter_is_decode_noop(int fid);
int b2_filter_backward(int fid, int meta, int typesize, int version,
                       size_t offset, size_t bsize, const uint8_t *ref,
                       const uint8_t *src, uint8_t *dst, const b2_chunk_geom *geom);
/* Bytes [lo, hi) of un-shuffling a whole block of `bsize` bytes into
 * dst[0, hi - lo): a cheap gather when only a small window is wanted. */
void b2_unshuffle_window(size_t typesize, size_t bsize, const uint8_t *src,
                         size_t lo, size_t hi, uint8_t *dst);
/* Encode: src and dst distinct; delta uses `ref` (the current pipeline
 * input of block 0, or the raw chunk start for later blocks). */
int b2_filter_forward(int fid, int meta, int typesize, size_t offset,
                      size_t bsize, const uint8_t *ref, const uint8_t *src,
                      uint8_t *dst, const b2_chunk_geom *geom);

/* ---- tuning (tune.c) ---------------------------------------------------- */
/* Whether blocks of `blocksize` bytes are split into typesize streams for
 * these parameters (the reference's rule for each split mode). */
int b2_chunk_split_rule(const b2_cparams *p, int32_t typesize,
                        int32_t blocksize);

#endif /* B2_CHUNK_INTERNAL_H */
