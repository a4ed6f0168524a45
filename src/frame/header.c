/*
 * header.c - parse the msgpack header of a frame (current 14-element
 * layout; the 13-element one is handed to legacy.c after the shared first
 * six elements).  Works on a buffer only; frame.c checks the sizes found
 * here against the real file.
 */
#include <string.h>

#include "b2_chunk.h"
#include "b2_error.h"
#include "common/util.h"
#include "frame/frame_impl.h"

/* Read an integer element and check it lies in [lo, hi]. */
static int int_elem(b2_mp_reader *r, const char *what, int64_t lo, int64_t hi,
                    int64_t *v) {
  int rc = b2_mp_read_int(r, v);
  if (rc < 0) return b2_context(rc, "frame header: %s", what);
  if (*v < lo || *v > hi)
    return b2_fail(B2_E_FORMAT, "frame header: %s %lld is outside [%lld, "
                   "%lld]", what, (long long)*v, (long long)lo, (long long)hi);
  return 0;
}

/* The elements shared by both layouts: magic, sizes and the flag bytes. */
static int parse_common(b2_mp_reader *r, b2_frame_header *h) {
  const uint8_t *s;
  uint32_t n;
  int rc = b2_mp_read_str(r, &s, &n);
  if (rc < 0 || n != sizeof B2_FRAME_MAGIC ||
      memcmp(s, B2_FRAME_MAGIC, sizeof B2_FRAME_MAGIC) != 0)
    return b2_fail(B2_E_FORMAT, "frame header: no \"b2frame\" magic");
  rc = int_elem(r, "header_size", 1, INT32_MAX, &h->header_size);
  if (rc < 0) return rc;
  rc = b2_mp_read_uint(r, &h->frame_size);
  if (rc < 0) return b2_context(rc, "frame header: frame_size");
  if (h->frame_size > (uint64_t)INT64_MAX)
    return b2_fail(B2_E_FORMAT, "frame header: frame_size %llu is too large",
                   (unsigned long long)h->frame_size);
  rc = b2_mp_read_str(r, &s, &n);
  if (rc < 0) return b2_context(rc, "frame header: flags");
  if (n != 4)
    return b2_fail(B2_E_FORMAT, "frame header: flags hold %u bytes, not 4",
                   (unsigned)n);
  h->general_flags = s[0];
  h->version = s[0] & 0x0f;
  h->frame_type = h->legacy ? B2_FRAME_TYPE_CONTIGUOUS : (s[1] & 0x0f);
  h->codec = s[2] & 0x0f;
  h->clevel = s[2] >> 4;
  h->splitmode = h->legacy ? 0 : (s[3] & 0x03) + 1;
  if (h->version > B2_FRAME_MAX_VERSION)
    return b2_fail(B2_E_UNSUPPORTED, "frame header: format version %d is "
                   "newer than the supported %d", h->version,
                   B2_FRAME_MAX_VERSION);
  /* Offsets width, bits 4-5: 64-bit is 1 now and was 2 in the older
   * layout; no other width was ever written. */
  int width = (s[0] >> 4) & 3;
  if (width != (h->legacy ? 2 : 1))
    return b2_fail(B2_E_UNSUPPORTED, "frame header: chunk offsets of width "
                   "code %d (only 64-bit offsets exist)", width);
  if (h->frame_type != B2_FRAME_TYPE_CONTIGUOUS &&
      h->frame_type != B2_FRAME_TYPE_SPARSE)
    return b2_fail(B2_E_UNSUPPORTED, "frame header: unknown frame type %d",
                   h->frame_type);
  rc = int_elem(r, "uncompressed size", 0, INT64_MAX, &h->nbytes);
  if (rc < 0) return rc;
  return int_elem(r, "compressed size", 0, INT64_MAX, &h->cbytes);
}

/* Elements 6-12 of the current layout. */
static int parse_current_tail(b2_mp_reader *r, b2_frame_header *h) {
  int64_t v;
  int rc = int_elem(r, "typesize", 1, INT32_MAX, &h->typesize);
  if (!rc) rc = int_elem(r, "blocksize", 0, INT32_MAX, &h->blocksize);
  /* -1: not set yet, in an empty frame the reference library created. */
  if (!rc) rc = int_elem(r, "chunksize", -1, INT32_MAX, &h->chunksize);
  if (!rc) rc = int_elem(r, "compression threads", INT16_MIN, INT16_MAX, &v);
  if (!rc) rc = int_elem(r, "decompression threads", INT16_MIN, INT16_MAX, &v);
  if (rc < 0) return rc;
  rc = b2_mp_read_bool(r, &h->has_vlmeta);
  if (rc < 0) return b2_context(rc, "frame header: has_vlmetalayers");
  int8_t nfilters;
  const uint8_t *d;
  uint32_t n;
  rc = b2_mp_read_ext(r, &nfilters, &d, &n);
  if (rc < 0) return b2_context(rc, "frame header: filter pipeline");
  if (n != 16)
    return b2_fail(B2_E_FORMAT, "frame header: filter pipeline holds %u "
                   "bytes, not 16", (unsigned)n);
  if (nfilters < 0 || nfilters > B2_MAX_FILTERS)
    return b2_fail(B2_E_FORMAT, "frame header: %d filters (at most %d)",
                   nfilters, B2_MAX_FILTERS);
  for (int k = 0; k < nfilters; k++) {
    h->filters[k] = d[k];
    h->filters_meta[k] = d[8 + k];
  }
  /* d[6]: user-defined codec id, d[7]: its meta, d[14]: use_dict flag. */
  if (h->codec == B2_FRAME_CODEC_UDCODEC) h->codec = d[6];
  h->codec_meta = d[7];
  return 0;
}

int b2_frame_starts_like(const uint8_t *buf, size_t len) {
  /* 0x9e (0x9d): fixarray of 14 (13); 0xa8: fixstr of 8, the magic's */
  if (len >= 2 && (buf[0] == 0x90 + B2_FRAME_NELEM || buf[0] == 0x90 + B2_FRAME_NELEM_LEGACY) &&
      buf[1] == 0xa8)
    return 1;
  return len >= 2 + sizeof B2_FRAME_MAGIC &&
         memcmp(buf + 2, B2_FRAME_MAGIC, sizeof B2_FRAME_MAGIC) == 0;
}

int b2_frame_parse_header(const uint8_t *buf, size_t len,
                          b2_frame_header *h) {
  memset(h, 0, sizeof *h);
  b2_mp_reader r;
  b2_mp_reader_init(&r, buf, len);
  uint32_t nelem;
  int rc = b2_mp_read_array(&r, &nelem);
  if (rc < 0)
    return b2_fail(len < 1 ? B2_E_TRUNCATED : B2_E_FORMAT,
                   "frame header: not a frame (no msgpack array at byte 0)");
  if (nelem == B2_FRAME_NELEM_LEGACY) h->legacy = 1;
  else if (nelem != B2_FRAME_NELEM)
    return b2_fail(B2_E_FORMAT, "frame header: array of %u elements (a "
                   "frame has %d, or %d in the older layout)",
                   (unsigned)nelem, B2_FRAME_NELEM, B2_FRAME_NELEM_LEGACY);
  rc = parse_common(&r, h);
  if (rc < 0) return rc;
  rc = h->legacy ? b2_frame_parse_legacy_tail(&r, h)
                 : parse_current_tail(&r, h);
  if (rc < 0) return rc;
  h->meta_pos = r.pos;
  if ((int64_t)h->meta_pos >= h->header_size)
    return b2_fail(B2_E_FORMAT, "frame header: header_size %lld leaves no "
                   "room for the metalayers (the fixed part ends at %zu)",
                   (long long)h->header_size, h->meta_pos);
  if (h->chunksize < 0 && h->nbytes != 0)
    return b2_fail(B2_E_FORMAT, "frame header: chunksize %lld for %lld "
                   "bytes", (long long)h->chunksize, (long long)h->nbytes);
  if (h->chunksize > B2_CHUNK_MAXSIZE)
    return b2_fail(B2_E_LIMIT, "frame header: chunksize %lld exceeds the "
                   "largest chunk (%d)", (long long)h->chunksize,
                   B2_CHUNK_MAXSIZE);
  return 0;
}
