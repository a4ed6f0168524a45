/*
 * build.c - serialise the parts of a frame a writer produces: the header's
 * fixed part and its metalayers section, the trailer with the
 * vlmetalayers, the index chunk, and vlmetalayer content chunks.  The
 * encodings follow what the reference library writes (fixed-width fields,
 * map16/array16/bin32 in metalayer sections), so its readers, which rely on
 * fixed byte positions, accept the result.  Buffers only, no I/O.
 */
#include <stdlib.h>
#include <string.h>

#include "b2_chunk.h"
#include "b2_error.h"
#include "common/util.h"
#include "frame/frame_impl.h"

/* Index chunks: int64 entries, blosclz at clevel 5 with shuffle, 16 KiB
 * blocks, never split (as the reference's appends write them). */
#define INDEX_BLOCKSIZE (16 * 1024)
#define INDEX_CLEVEL 5

/* Marker bytes expected at fixed positions of a current-layout header. */
static const struct {
  uint8_t pos, byte;
} fixed_markers[] = {
    {0, 0x9e},  {1, 0xa8},  {10, 0xd2}, {15, 0xcf}, {24, 0xa4},
    {29, 0xd3}, {38, 0xd3}, {47, 0xd2}, {52, 0xd2}, {57, 0xd2},
    {62, 0xd1}, {65, 0xd1}, {69, 0xd8}, {87, 0x93},
};

int b2_frame_fixed_ok(const uint8_t *h, size_t len) {
  if (len < B2_FH_FIXED + 1)
    return b2_fail(B2_E_UNSUPPORTED, "header of %zu bytes is shorter than "
                   "the reference's fixed layout", len);
  for (size_t k = 0; k < sizeof fixed_markers / sizeof fixed_markers[0];
       k++) {
    if (h[fixed_markers[k].pos] != fixed_markers[k].byte)
      return b2_fail(B2_E_UNSUPPORTED, "header byte %d is 0x%02x, not the "
                     "reference's 0x%02x (fields cannot be patched in place)",
                     fixed_markers[k].pos, h[fixed_markers[k].pos],
                     fixed_markers[k].byte);
  }
  if (memcmp(h + 2, B2_FRAME_MAGIC, sizeof B2_FRAME_MAGIC) != 0)
    return b2_fail(B2_E_UNSUPPORTED, "header: no magic at byte 2");
  if (h[B2_FH_HAS_VLMETA] != 0xc2 && h[B2_FH_HAS_VLMETA] != 0xc3)
    return b2_fail(B2_E_UNSUPPORTED, "header byte %d is not a boolean",
                   B2_FH_HAS_VLMETA);
  return 0;
}

int b2_frame_build_fixed(const b2_frame_params *p,
                         uint8_t fixed[B2_FH_FIXED]) {
  const b2_cparams *cp = &p->cparams;
  if (cp->codec < 0 || cp->codec > 255 || cp->clevel < 0 || cp->clevel > 9)
    return b2_fail(B2_E_INVAL, "frame parameters: codec %d clevel %d",
                   cp->codec, cp->clevel);
  if (cp->typesize < 1 || cp->blocksize < 0 || p->chunksize <= 0 ||
      p->chunksize > B2_CHUNK_MAXSIZE)
    return b2_fail(B2_E_INVAL, "frame parameters: typesize %d blocksize %d "
                   "chunksize %d", cp->typesize, cp->blocksize, p->chunksize);
  int split = cp->splitmode ? cp->splitmode : B2_SPLIT_FORWARD_COMPAT;
  if (split < B2_SPLIT_ALWAYS || split > B2_SPLIT_FORWARD_COMPAT)
    return b2_fail(B2_E_INVAL, "frame parameters: split mode %d",
                   cp->splitmode);
  b2_mp_writer w;
  b2_mp_writer_init(&w, fixed, B2_FH_FIXED);
  b2_mp_put_array(&w, B2_FRAME_NELEM);
  b2_mp_put_str(&w, B2_FRAME_MAGIC, sizeof B2_FRAME_MAGIC);
  b2_mp_put_i32(&w, 0);  /* header_size, patched later */
  b2_mp_put_u64(&w, 0);  /* frame_size */
  uint8_t flags[4] = {
      B2_FRAME_GENERAL_FLAGS,
      p->layout == B2_LAYOUT_SPARSE ? B2_FRAME_TYPE_SPARSE
                                    : B2_FRAME_TYPE_CONTIGUOUS,
      (uint8_t)((cp->codec >= B2_FRAME_CODEC_UDCODEC ? B2_FRAME_CODEC_UDCODEC
                                                     : cp->codec) |
                (cp->clevel << 4)),
      (uint8_t)(split - 1)};
  b2_mp_put_str(&w, flags, sizeof flags);
  b2_mp_put_i64(&w, 0);  /* nbytes */
  b2_mp_put_i64(&w, 0);  /* cbytes */
  b2_mp_put_i32(&w, cp->typesize);
  b2_mp_put_i32(&w, cp->blocksize);
  b2_mp_put_i32(&w, p->chunksize);
  b2_mp_put_i16(&w, 1);  /* compression threads */
  b2_mp_put_i16(&w, 1);  /* decompression threads */
  b2_mp_put_bool(&w, 0); /* has vlmetalayers */
  /* fixext16 whose type byte is the number of filter slots: filters,
   * user codec, codec meta, filters' meta, other flags (use_dict), 0. */
  uint8_t pipe[16] = {0};
  memcpy(pipe, cp->filters, B2_MAX_FILTERS);
  pipe[6] = (uint8_t)cp->codec;
  pipe[7] = (uint8_t)cp->codec_meta;
  memcpy(pipe + 8, cp->filters_meta, B2_MAX_FILTERS);
  b2_mp_put_ext(&w, B2_MAX_FILTERS, pipe, sizeof pipe);
  if (w.err || w.len != B2_FH_FIXED)
    return b2_fail(B2_E_INVAL, "frame header: fixed part of %zu bytes",
                   w.len);
  return 0;
}

/* `93 cd<size> de<n> {name: d2 <offset>} dc<n> [c6 <len> <bytes>]`, with
 * offsets counted from the start of w's buffer.  The size field counts
 * from the array marker (`size_from_array`, as headers do) or from the
 * size's own marker (as trailers do). */
static int put_section(b2_mp_writer *w, const b2_blob *b, int n,
                       int size_from_array) {
  size_t start = w->len;
  b2_mp_put_array(w, 3);
  size_t size_at = w->len;
  b2_mp_put_u16(w, 0);
  b2_mp_put_map16(w, (uint16_t)n);
  size_t *off_at = n ? calloc((size_t)n, sizeof *off_at) : NULL;
  if (n && !off_at) return b2_fail(B2_E_NOMEM, "out of memory");
  for (int k = 0; k < n; k++) {
    size_t nl = strlen(b[k].name);
    if (nl == 0 || nl > B2_FRAME_META_NAME_MAX) {
      free(off_at);
      return b2_fail(B2_E_INVAL, "metalayer name \"%s\" is not 1-%d bytes",
                     b[k].name, B2_FRAME_META_NAME_MAX);
    }
    b2_mp_put_str(w, b[k].name, nl);
    off_at[k] = w->len + 1;
    b2_mp_put_i32(w, 0);
  }
  size_t map_end = w->len;
  b2_mp_put_array16(w, (uint16_t)n);
  for (int k = 0; k < n && !w->err; k++) {
    size_t at = w->len;
    b2_mp_put_bin32(w, b[k].data, b[k].len);
    if (!w->err) {
      if (at > INT32_MAX) w->err = b2_fail(B2_E_LIMIT, "section too large");
      else b2_put_be32(w->buf + off_at[k], (uint32_t)at);
    }
  }
  free(off_at);
  if (w->err) return w->err;
  size_t size = map_end - (size_from_array ? start : size_at);
  if (size > UINT16_MAX)
    return b2_fail(B2_E_LIMIT, "metalayer names take %zu bytes (at most "
                   "65535)", size);
  b2_put_be16(w->buf + size_at + 1, (uint16_t)size);
  return 0;
}

int b2_frame_build_header(const uint8_t *fixed, const b2_blob *meta, int n,
                          uint8_t **out, size_t *len) {
  *out = NULL;
  if (n < 0 || n > B2_FRAME_MAX_META)
    return b2_fail(B2_E_LIMIT, "%d metalayers (at most %d)", n,
                   B2_FRAME_MAX_META);
  b2_mp_writer w;
  b2_mp_writer_init(&w, NULL, 0);
  b2_mp_put_raw(&w, fixed, B2_FH_FIXED);
  int rc = w.err ? w.err : put_section(&w, meta, n, 1);
  if (!rc && w.len > INT32_MAX)
    rc = b2_fail(B2_E_LIMIT, "header of %zu bytes", w.len);
  if (rc < 0) {
    b2_mp_writer_free(&w);
    return rc;
  }
  b2_put_be32(w.buf + B2_FH_HEADER_SIZE, (uint32_t)w.len);
  *out = w.buf;
  *len = w.len;
  return 0;
}

int b2_frame_build_trailer(const b2_blob *vl, int n, uint8_t **out,
                           size_t *len) {
  *out = NULL;
  if (n < 0 || n > B2_FRAME_MAX_VLMETA_WRITE)
    return b2_fail(B2_E_LIMIT, "%d vlmetalayers (at most %d)", n,
                   B2_FRAME_MAX_VLMETA_WRITE);
  b2_mp_writer w;
  b2_mp_writer_init(&w, NULL, 0);
  b2_mp_put_array(&w, 4);
  b2_mp_put_uint(&w, B2_FRAME_TRAILER_VERSION);
  int rc = w.err ? w.err : put_section(&w, vl, n, 0);
  if (!rc) {
    /* trailer_len covers everything, its own field and the fingerprint
     * (fixext16 of type 0: none) included. */
    uint64_t total = (uint64_t)w.len + 5 + 18;
    if (total > UINT32_MAX) rc = b2_fail(B2_E_LIMIT, "trailer too large");
    b2_mp_put_u32(&w, (uint32_t)total);
    uint8_t fp[16] = {0};
    b2_mp_put_ext(&w, 0, fp, sizeof fp);
    if (!rc && !w.err && w.len != total)
      rc = b2_fail(B2_E_INVAL, "trailer: %zu bytes, expected %llu", w.len,
                   (unsigned long long)total);
  }
  if (!rc) rc = w.err;
  if (rc < 0) {
    b2_mp_writer_free(&w);
    return rc;
  }
  *out = w.buf;
  *len = w.len;
  return 0;
}

int b2_frame_build_index(const int64_t *entries, int64_t n, uint8_t **out,
                         size_t *len) {
  *out = NULL;
  if (n <= 0 || n > B2_FRAME_MAX_CHUNKS)
    return b2_fail(B2_E_LIMIT, "index of %lld entries", (long long)n);
  size_t nb = (size_t)n * 8;
  uint8_t *raw = malloc(nb);
  uint8_t *chunk = malloc(b2_chunk_bound(nb));
  if (!raw || !chunk) {
    free(raw);
    free(chunk);
    return b2_fail(B2_E_NOMEM, "out of memory for an index of %lld entries",
                   (long long)n);
  }
  for (int64_t i = 0; i < n; i++) b2_put_le64(raw + 8 * i, (uint64_t)entries[i]);
  b2_cparams p;
  b2_cparams_default(&p);
  p.codec = B2_CODEC_BLOSCLZ;
  p.clevel = INDEX_CLEVEL;
  p.typesize = 8;
  p.blocksize = INDEX_BLOCKSIZE;
  p.splitmode = B2_SPLIT_NEVER;
  int rc = b2_chunk_encode(&p, raw, nb, chunk, b2_chunk_bound(nb));
  free(raw);
  if (rc < 0) {
    free(chunk);
    return b2_context(rc, "index chunk");
  }
  *out = chunk;
  *len = (size_t)rc;
  return 0;
}

int b2_frame_build_vlchunk(const void *data, size_t len, uint8_t **out,
                           size_t *olen) {
  *out = NULL;
  if (len > B2_FRAME_MAX_VLMETA_BYTES)
    return b2_fail(B2_E_LIMIT, "vlmetalayer of %zu bytes (at most %zu)", len,
                   B2_FRAME_MAX_VLMETA_BYTES);
  uint8_t *chunk = malloc(b2_chunk_bound(len));
  if (!chunk) return b2_fail(B2_E_NOMEM, "out of memory");
  /* The reference's default parameters: blosclz 5, typesize 8, shuffle. */
  b2_cparams p;
  b2_cparams_default(&p);
  p.codec = B2_CODEC_BLOSCLZ;
  p.clevel = 5;
  int rc = b2_chunk_encode(&p, data, len, chunk, b2_chunk_bound(len));
  if (rc < 0) {
    free(chunk);
    return b2_context(rc, "vlmetalayer");
  }
  *out = chunk;
  *olen = (size_t)rc;
  return 0;
}

void b2_frame_patch_sizes(uint8_t *h, int64_t frame_size, int64_t nbytes,
                          int64_t cbytes, int32_t chunksize, int has_vlmeta) {
  b2_put_be64(h + B2_FH_FRAME_SIZE, (uint64_t)frame_size);
  b2_put_be32(h + B2_FH_CHUNKSIZE, (uint32_t)chunksize);
  b2_put_be64(h + B2_FH_NBYTES, (uint64_t)nbytes);
  b2_put_be64(h + B2_FH_CBYTES, (uint64_t)cbytes);
  h[B2_FH_HAS_VLMETA] = has_vlmeta ? 0xc3 : 0xc2;
}
