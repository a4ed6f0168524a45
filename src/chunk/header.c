/* header.c - parse and validate a chunk header (Blosc 1.x 16-byte header
 * or Blosc2 32-byte extended header) against the bytes available, and
 * work out the chunk's layout: special kind, memcpy'd or blocks, number
 * of blocks, split streams, dictionary, variable-length blocks. */
#include "b2_chunk.h"
#include "b2_error.h"
#include "chunk/chunk_internal.h"
#include "common/util.h"

#include <string.h>

int b2_chunk_sizes(const void *chunk, size_t avail, int32_t *nbytes,
                   int32_t *cbytes, int32_t *blocksize) {
  if (!chunk || avail < B2_CHUNK_HEADER_MIN)
    return b2_fail(B2_E_TRUNCATED, "chunk header: %zu bytes, need %d",
                   chunk ? avail : 0, B2_CHUNK_HEADER_MIN);
  const uint8_t *c = chunk;
  if (nbytes) *nbytes = (int32_t)b2_le32(c + B2H_NBYTES);
  if (blocksize) *blocksize = (int32_t)b2_le32(c + B2H_BLOCKSIZE);
  if (cbytes) *cbytes = (int32_t)b2_le32(c + B2H_CBYTES);
  return 0;
}

/* Codec id for the stream format in the flags byte; -1 when unsupported. */
static int format_codec(int format, int extended, const uint8_t *c) {
  switch (format) {
  case B2_FORMAT_BLOSCLZ: return B2_CODEC_BLOSCLZ;
  case B2_FORMAT_LZ4:
    return extended && c[B2H_UDCODEC] == B2_CODEC_LZ4HC ? B2_CODEC_LZ4HC
                                                        : B2_CODEC_LZ4;
  case B2_FORMAT_ZLIB: return B2_CODEC_ZLIB;
  case B2_FORMAT_ZSTD: return B2_CODEC_ZSTD;
  case B2_FORMAT_USER: /* the codec id is in the extended header */
    return extended && b2_codec_format(c[B2H_UDCODEC]) == B2_FORMAT_USER ? c[B2H_UDCODEC] : -1;
  default: return -1;
  }
}

static int parse_special(const uint8_t *c, b2_chunk_info *in) {
  int32_t nb = in->nbytes;
  switch (in->special) {
  case B2_SPECIAL_VALUE: {
    int32_t vsize = in->cbytes - B2_CHUNK_HEADER_EXT;
    if (vsize <= 0)
      return b2_fail(B2_E_FORMAT, "chunk header: repeated-value chunk "
                                  "without a value (cbytes %d)", in->cbytes);
    if (vsize > nb || nb % vsize != 0)
      return b2_fail(B2_E_FORMAT, "chunk header: nbytes %d is not a "
                     "multiple of the repeated value's size %d", nb, vsize);
    break;
  }
  case B2_SPECIAL_NAN:
    if (in->typesize != 4 && in->typesize != 8)
      return b2_fail(B2_E_UNSUPPORTED,
                     "chunk header: NaN chunk with typesize %d", in->typesize);
    if (nb % in->typesize != 0)
      return b2_fail(B2_E_FORMAT, "chunk header: nbytes %d is not a multiple "
                     "of typesize %d", nb, in->typesize);
    break;
  default:
    break;
  }
  (void)c;
  int32_t bs = in->blocksize;
  if (bs <= 0 || bs > nb) bs = nb;
  in->blocksize = bs;
  in->nblocks = bs > 0 ? nb / bs + (nb % bs != 0) : 0;
  in->leftover = bs > 0 ? nb % bs : 0;
  return 0;
}

/* Variable-length blocks: the blocksize field holds nblocks; each block
 * starts with its int32 uncompressed size. Validate every block span. */
static int parse_vlblocks(const uint8_t *c, b2_chunk_info *in,
                          int64_t data_start) {
  int32_t n = in->nblocks;
  int64_t total = 0;
  int32_t maxbs = 0;
  const uint8_t *bst = c + in->header_len;
  for (int32_t i = 0; i < n; i++) {
    int64_t start = (int32_t)b2_le32(bst + 4 * (size_t)i);
    int64_t next = i + 1 < n ? (int32_t)b2_le32(bst + 4 * (size_t)(i + 1))
                             : in->cbytes;
    if (start < data_start || next > in->cbytes || next - start <= 4)
      return b2_fail(B2_E_FORMAT, "vlblock %d: bad span [%lld, %lld) in "
                     "chunk of %d bytes", i, (long long)start,
                     (long long)next, in->cbytes);
    int32_t bsz = (int32_t)b2_le32(c + start);
    if (bsz <= 0 || total + bsz > in->nbytes)
      return b2_fail(B2_E_FORMAT, "vlblock %d: bad size %d (nbytes %d)", i,
                     bsz, in->nbytes);
    total += bsz;
    if (bsz > maxbs) maxbs = bsz;
  }
  if (total != in->nbytes)
    return b2_fail(B2_E_FORMAT, "vlblocks: block sizes add up to %lld, "
                   "nbytes is %d", (long long)total, in->nbytes);
  in->blocksize = maxbs;
  in->leftover = 0;
  return 0;
}

/* avail: the bytes the chunk may span; have (<= avail): those that may be
 * read now.  A parse that needs bytes past `have` fails with
 * B2_E_TRUNCATED. */
static int parse(const void *chunk, size_t avail, size_t have, b2_chunk_info *in) {
  int rc;
  if (!in) return b2_fail(B2_E_INVAL, "chunk parse: no info");
  memset(in, 0, sizeof *in);
  if (!chunk || have < B2_CHUNK_HEADER_MIN)
    return b2_fail(B2_E_TRUNCATED, "chunk header: %zu bytes, need %d",
                   chunk ? have : 0, B2_CHUNK_HEADER_MIN);
  const uint8_t *c = chunk;
  in->version = c[B2H_VERSION];
  in->versionlz = c[B2H_VERSIONLZ];
  in->flags = c[B2H_FLAGS];
  in->typesize = c[B2H_TYPESIZE];
  in->nbytes = (int32_t)b2_le32(c + B2H_NBYTES);
  in->blocksize = (int32_t)b2_le32(c + B2H_BLOCKSIZE);
  in->cbytes = (int32_t)b2_le32(c + B2H_CBYTES);
  in->clevel = -1;

  if (in->version == 0 || in->version > B2_VERSION_VLBLOCKS)
    return b2_fail(B2_E_UNSUPPORTED, "chunk header: unknown format version %d",
                   in->version);
  int extended = (in->flags & (B2F_SHUFFLE | B2F_BITSHUFFLE)) ==
                 (B2F_SHUFFLE | B2F_BITSHUFFLE);
  in->header_len = extended ? B2_CHUNK_HEADER_EXT : B2_CHUNK_HEADER_MIN;
  if (have < (size_t)in->header_len)
    return b2_fail(B2_E_TRUNCATED, "chunk header: %zu bytes, need %d", have,
                   in->header_len);
  if (in->cbytes < in->header_len)
    return b2_fail(B2_E_FORMAT, "chunk header: cbytes %d < header size %d",
                   in->cbytes, in->header_len);
  if ((size_t)in->cbytes > avail)
    return b2_fail(B2_E_TRUNCATED, "chunk: cbytes %d but only %zu bytes",
                   in->cbytes, avail);
  if (in->nbytes < 0 || in->nbytes > B2_CHUNK_MAXSIZE)
    return b2_fail(B2_E_FORMAT, "chunk header: bad nbytes %d", in->nbytes);
  if (in->typesize == 0)
    return b2_fail(B2_E_FORMAT, "chunk header: typesize 0");

  int flags2 = 0;
  if (extended) {
    memcpy(in->filters, c + B2H_FILTERS, B2_MAX_FILTERS);
    memcpy(in->filters_meta, c + B2H_FMETA, B2_MAX_FILTERS);
    if (in->version == B2_VERSION_ALPHA) {
      in->filters[5] = 0;
      in->filters_meta[5] = 0;
    }
    in->blosc2_flags = c[B2H_B2FLAGS];
    in->codec_meta = c[B2H_CODEC_META];
    flags2 = c[B2H_FLAGS2];
  } else {
    if (in->flags & B2F_SHUFFLE) in->filters[5] = B2_FILTER_SHUFFLE;
    if (in->flags & B2F_BITSHUFFLE) in->filters[5] = B2_FILTER_BITSHUFFLE;
    if (in->flags & B2F_DELTA) in->filters[4] = B2_FILTER_DELTA;
  }
  in->format = in->flags >> 5;
  in->codec = format_codec(in->format, extended, c);
  in->special = (in->blosc2_flags >> 4) & 7;
  in->vlblocks = flags2 & 1;

  if (in->blosc2_flags & B2F2_LAZY)
    return b2_fail(B2_E_UNSUPPORTED, "chunk header: lazy chunk");
  if (in->blosc2_flags & B2F2_INSTR)
    return b2_fail(B2_E_UNSUPPORTED, "chunk header: instrumented codec chunk");
  if (in->special > B2_SPECIAL_UNINIT)
    return b2_fail(B2_E_FORMAT, "chunk header: unknown special kind %d",
                   in->special);
  /* Special and variable-length chunks are read whole. */
  if ((in->special || in->vlblocks) && have < (size_t)in->cbytes)
    return b2_fail(B2_E_TRUNCATED, "chunk: %zu of its %d bytes", have, in->cbytes);
  if (in->special) {
    if (in->vlblocks)
      return b2_fail(B2_E_FORMAT, "chunk header: special vlblocks chunk");
    return parse_special(c, in);
  }

  in->memcpyed = (in->flags & B2F_MEMCPYED) != 0;
  if (in->memcpyed) {
    if (in->vlblocks)
      return b2_fail(B2_E_FORMAT, "chunk header: memcpy'd vlblocks chunk");
    if ((int64_t)in->cbytes != (int64_t)in->nbytes + in->header_len)
      return b2_fail(B2_E_FORMAT, "chunk header: memcpy'd chunk with cbytes "
                     "%d for nbytes %d", in->cbytes, in->nbytes);
  } else {
    if (in->codec < 0 && in->format == B2_FORMAT_USER && extended)
      return b2_fail(B2_E_UNSUPPORTED, "chunk header: unsupported codec id %d",
                     c[B2H_UDCODEC]);
    if (in->codec < 0)
      return b2_fail(B2_E_UNSUPPORTED, "chunk header: unsupported codec "
                     "format %d", in->format);
    for (int i = 0; i < B2_MAX_FILTERS; i++)
      if (!b2_filter_supported(in->filters[i]))
        return b2_fail(B2_E_UNSUPPORTED, "chunk header: unsupported filter "
                       "id %d in slot %d", in->filters[i], i);
  }

  /* Blocks. */
  if (in->vlblocks) {
    in->nblocks = in->blocksize;
    if (in->nblocks < 0 || (in->nblocks == 0) != (in->nbytes == 0))
      return b2_fail(B2_E_FORMAT, "chunk header: %d vlblocks for nbytes %d",
                     in->nblocks, in->nbytes);
  } else if (in->nbytes == 0) {
    in->blocksize = 0;
    in->nblocks = 0;
  } else {
    if (in->blocksize <= 0 || in->blocksize > B2_MAX_BLOCKSIZE)
      return b2_fail(B2_E_FORMAT, "chunk header: bad blocksize %d",
                     in->blocksize);
    if (in->blocksize > in->nbytes) in->blocksize = in->nbytes;
    in->leftover = in->nbytes % in->blocksize;
    in->nblocks = in->nbytes / in->blocksize + (in->leftover != 0);
  }
  if (in->memcpyed) return 0;

  int64_t pos = in->header_len + 4 * (int64_t)in->nblocks;
  if (pos > in->cbytes)
    return b2_fail(B2_E_FORMAT, "chunk header: %d block starts do not fit in "
                   "cbytes %d", in->nblocks, in->cbytes);
  if (extended && (in->blosc2_flags & B2F2_DICT) && in->nblocks > 0) {
    if (pos + 4 > in->cbytes)
      return b2_fail(B2_E_FORMAT, "chunk: dictionary size past cbytes %d",
                     in->cbytes);
    if (pos + 4 > (int64_t)have)
      return b2_fail(B2_E_TRUNCATED, "chunk: dictionary size not in its first "
                     "%zu bytes", have);
    int32_t dsize = (int32_t)b2_le32(c + pos);
    if (dsize <= 0 || dsize > B2_MAX_DICTSIZE || pos + 4 + dsize > in->cbytes)
      return b2_fail(B2_E_FORMAT, "chunk: bad dictionary size %d", dsize);
    in->dict = 1;
    pos += 4 + dsize;
  }
  if (in->vlblocks) {
    rc = parse_vlblocks(c, in, pos);
    if (rc < 0) return rc;
    in->split = 0;
  } else {
    in->split = !(in->flags & B2F_NOSPLIT);
    /* Blosc 1.x split only blocks of <= 16-byte items with >= 128 items. */
    if (in->version <= B2_VERSION_BLOSC1 &&
        (in->typesize > 16 || in->blocksize / in->typesize < 128))
      in->split = 0;
  }
  return 0;
}

int b2_chunk_parse(const void *chunk, size_t avail, b2_chunk_info *in) {
  return parse(chunk, avail, avail, in);
}

int b2_chunk_parse_head(const void *chunk, size_t have, b2_chunk_info *in) {
  int32_t cb = 0;
  if (have >= B2_CHUNK_HEADER_MIN && b2_chunk_sizes(chunk, have, NULL, &cb, NULL) == 0 &&
      cb >= 0 && (size_t)cb > have)
    return parse(chunk, (size_t)cb, have, in);
  return parse(chunk, have, have, in);
}
