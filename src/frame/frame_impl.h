/*
 * frame_impl.h - internals of layer 3 (frames), shared by the .c files of src/frame.
 *
 * Parsing (header.c, legacy.c, meta.c, trailer.c, index.c) works on byte
 * buffers; I/O (io.c, sframe.c) reads them from files; frame.c puts the
 * two together at open and read.c serves chunks.  An open frame is
 * immutable, so readers need no lock; a future writer extends `struct
 * b2_frame` (see the note at its end) and must serialise itself.
 */
#ifndef B2_FRAME_IMPL_H
#define B2_FRAME_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "b2_frame.h"
#include "common/msgpack.h"

/* ---- format constants (learned from the reference library) ------------ */
#define B2_FRAME_MAGIC "b2frame"          /* 8 bytes with its NUL */
#define B2_FRAME_NELEM 14                 /* header array, current layout */
#define B2_FRAME_NELEM_LEGACY 13          /* header array, older layout */
#define B2_FRAME_MAX_VERSION 3            /* general_flags bits 0-3 */
#define B2_FRAME_FLAG_VARLEN 0x40         /* general_flags bit 6 */
#define B2_FRAME_FLAG_VLBLOCKS 0x80       /* general_flags bit 7 */
#define B2_FRAME_TYPE_CONTIGUOUS 0
#define B2_FRAME_TYPE_SPARSE 1
#define B2_FRAME_CODEC_UDCODEC 6          /* codec in the udcodec byte */
#define B2_FRAME_TRAILER_MIN 25           /* smallest trailer */
#define B2_FRAME_TRAILER_LEN_BACK 22      /* trailer_len sits this far back */
#define B2_FRAME_MAX_META 16              /* header metalayers */
#define B2_FRAME_MAX_VLMETA 8192          /* trailer metalayers */
#define B2_FRAME_META_NAME_MAX 31
#define B2_FRAME_SPARSE_INDEX "chunks.b2frame"
/* Index entries (or chunk starts) kept in memory at most (256 MiB of
 * int64); a larger table is refused with B2_E_LIMIT rather than allocated
 * from a size field.  A special index chunk needs no table. */
#define B2_FRAME_MAX_CHUNKS ((int64_t)1 << 25)
/* Largest decompressed vlmetalayer handed out. */
#define B2_FRAME_MAX_VLMETA_BYTES ((size_t)256 << 20)
/* Special offsets in the index: bit 63 set, kind in bits 56-58. */
#define B2_FRAME_SPECIAL_BIT ((uint64_t)1 << 63)

/* One metalayer: name and where its content lies in the region (header or
 * trailer buffer) it was read from. */
typedef struct b2_frame_meta {
  char name[B2_FRAME_META_NAME_MAX + 1];
  uint32_t pos; /* content offset inside the region */
  uint32_t len; /* content bytes */
} b2_frame_meta;

/* What the header says, before anything is checked against the files. */
typedef struct b2_frame_header {
  int legacy;
  int version;
  int frame_type;       /* B2_FRAME_TYPE_* */
  int general_flags;
  int64_t header_size;
  uint64_t frame_size;
  int64_t nbytes;
  int64_t cbytes;
  int64_t typesize;
  int64_t blocksize;
  int64_t chunksize;
  int codec, clevel, splitmode;
  int has_vlmeta;       /* current: has_vlmetalayers; legacy: has_usermeta */
  uint8_t filters[B2_MAX_FILTERS];
  uint8_t filters_meta[B2_MAX_FILTERS];
  size_t meta_pos;      /* where the metalayers section starts */
} b2_frame_header;

struct b2_frame {
  b2_frame_info info;
  char *path;
  int fd;               /* contiguous: frame file; sparse: chunks.b2frame */
  int dirfd;            /* sparse: the directory; else -1 */
  int64_t file_size;    /* size of the frame file when opened */

  /* Layout of the frame file. */
  int64_t data_pos;     /* chunk offsets count from here (header_size) */
  int64_t data_end;     /* contiguous: chunks end here (the index) */
  int64_t index_pos;
  int32_t index_cbytes; /* 0 when there is no index (empty frame) */
  int64_t trailer_pos;
  uint32_t trailer_len;

  uint8_t *header;      /* header_size bytes */
  uint8_t *trailer;     /* trailer_len bytes */
  b2_frame_meta *meta;  /* info.nmeta, content in `header` */
  b2_frame_meta *vlmeta;/* info.nvlmeta, content in `trailer` */

  /* Index: raw entries (byte offsets from data_pos, sparse: chunk file
   * numbers, or special values).  `offsets` is NULL when the index chunk
   * is a special chunk: then every entry is `uniform_offset`. */
  int64_t *offsets;
  int64_t uniform_offset;
  /* Variable-length chunks: starts[i] is the logical offset of chunk i,
   * starts[nchunks] == nbytes.  NULL for fixed-size chunks. */
  int64_t *starts;

  /* A writer adds its state here (open mode, lock, pending index and
   * trailer, the end of the used file); readers never touch it. */
};

/* ---- parsing (buffers only) -------------------------------------------- */

/* Parse the fixed part of a header (current or legacy layout) from the
 * first `len` bytes of the frame file. */
int b2_frame_parse_header(const uint8_t *buf, size_t len,
                          b2_frame_header *h);
/* The 13-element layout's fields after the magic, sizes and flags. */
int b2_frame_parse_legacy_tail(b2_mp_reader *r, b2_frame_header *h);

/* Parse a metalayers section `93 <size> map{name: offset} [bin...]` that
 * starts at `start` in region[0..len); offsets are relative to region.
 * Allocates *out (count <= max). */
int b2_frame_parse_metalayers(const uint8_t *region, size_t len,
                              size_t start, int max, b2_frame_meta **out,
                              int *count);

/* Parse a trailer buffer: vlmetalayers (current) or the usermeta chunk
 * (legacy, reported as one vlmetalayer "usermeta" when not empty). */
int b2_frame_parse_trailer(const uint8_t *trailer, size_t len, int legacy,
                           b2_frame_meta **out, int *count);
int b2_frame_parse_legacy_trailer(const uint8_t *trailer, size_t len,
                                  b2_frame_meta **out, int *count);

/* Where the trailer starts, from the last bytes of the frame: `tail` holds
 * the B2_FRAME_TRAILER_MIN bytes that end at frame_size. */
int b2_frame_trailer_len(const uint8_t *tail, uint32_t *len);

/* ---- I/O ----------------------------------------------------------------- */

/* pread exactly n bytes (retrying short reads and EINTR); B2_E_TRUNCATED
 * if the file ends first, B2_E_IO on an error. */
int b2_frame_pread(int fd, void *buf, size_t n, int64_t off);

/* Sparse frames: open chunk file number `num` (%08X.chunk) for reading. */
int b2_sframe_open_chunk(const b2_frame *f, int64_t num, int *fd,
                         int64_t *size);

/* ---- index and chunks ------------------------------------------------- */

/* Read and decode the index chunk, validate every entry and, for
 * variable-length chunks, build the starts table. */
int b2_frame_load_index(b2_frame *f);

/* Raw index entry of chunk i (0 <= i < nchunks). */
static inline int64_t b2_frame_entry(const b2_frame *f, int64_t i) {
  return f->offsets ? f->offsets[i] : f->uniform_offset;
}

/* Special kind of an index entry (B2_SPECIAL_* or NONE); -1 when the
 * special bits hold no known kind. */
int b2_frame_entry_kind(int64_t entry);

/* A growable buffer for compressed chunks. */
typedef struct b2_chunkbuf {
  uint8_t *p;
  size_t cap;
} b2_chunkbuf;

/* Load the stored bytes of chunk i into b (special entries are
 * synthesized); *len gets the chunk size.  The chunk's header is checked
 * against the bytes left in its file and against the frame geometry. */
int b2_frame_load_chunk(const b2_frame *f, int64_t i, b2_chunkbuf *b,
                        size_t *len);

/* Read the chunk stored at `pos` of `fd`, with `limit` the end of the bytes
 * it may occupy, into b; checks sizes before reading. */
int b2_frame_read_stored(int fd, int64_t pos, int64_t limit, b2_chunkbuf *b,
                         size_t *len, int32_t *nbytes);

#endif /* B2_FRAME_IMPL_H */
