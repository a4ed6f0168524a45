/*
 * legacy.c - the older frame layout (13-element header, usermeta chunk in
 * the trailer) written by 2.0.0-beta releases of the reference library.
 * Only the parts that differ from the current layout live here.
 */
#include <stdlib.h>
#include <string.h>

#include "b2_error.h"
#include "frame/frame_impl.h"

#define LEGACY_FILTER_SLOTS 8

static int int_field(b2_mp_reader *r, const char *what, int64_t lo,
                     int64_t hi, int64_t *v) {
  int rc = b2_mp_read_int(r, v);
  if (rc < 0) return b2_context(rc, "frame header (older layout): %s", what);
  if (*v < lo || *v > hi)
    return b2_fail(B2_E_FORMAT, "frame header (older layout): %s %lld is "
                   "outside [%lld, %lld]", what, (long long)*v,
                   (long long)lo, (long long)hi);
  return 0;
}

/* Elements 6-11: typesize, chunksize, threads, has_usermeta, filters.
 * There is no blocksize; the filter pipeline has 8 slots (codes then
 * metas) and its ext type is the number of filters. */
int b2_frame_parse_legacy_tail(b2_mp_reader *r, b2_frame_header *h) {
  int64_t v;
  int rc = int_field(r, "typesize", 1, INT32_MAX, &h->typesize);
  if (!rc) rc = int_field(r, "chunksize", 0, INT32_MAX, &h->chunksize);
  if (!rc) rc = int_field(r, "compression threads", INT16_MIN, INT16_MAX, &v);
  if (!rc) rc = int_field(r, "decompression threads", INT16_MIN, INT16_MAX, &v);
  if (rc < 0) return rc;
  h->blocksize = 0;
  rc = b2_mp_read_bool(r, &h->has_vlmeta);
  if (rc < 0) return b2_context(rc, "frame header (older layout): has_usermeta");
  int8_t nfilters;
  const uint8_t *d;
  uint32_t n;
  rc = b2_mp_read_ext(r, &nfilters, &d, &n);
  if (rc < 0) return b2_context(rc, "frame header (older layout): filters");
  if (n != 2 * LEGACY_FILTER_SLOTS)
    return b2_fail(B2_E_FORMAT, "frame header (older layout): filter "
                   "pipeline holds %u bytes, not %d", (unsigned)n,
                   2 * LEGACY_FILTER_SLOTS);
  if (nfilters < 0 || nfilters > LEGACY_FILTER_SLOTS)
    return b2_fail(B2_E_FORMAT, "frame header (older layout): %d filters "
                   "(at most %d)", nfilters, LEGACY_FILTER_SLOTS);
  for (int k = 0; k < nfilters; k++) {
    if (k >= B2_MAX_FILTERS) {
      if (d[k] != 0)
        return b2_fail(B2_E_UNSUPPORTED, "frame header (older layout): "
                       "filter in slot %d (only %d slots are supported)", k,
                       B2_MAX_FILTERS);
      continue;
    }
    h->filters[k] = d[k];
    h->filters_meta[k] = d[LEGACY_FILTER_SLOTS + k];
  }
  return 0;
}

/* Trailer of the older layout: [version, bin32 usermeta chunk, uint32
 * trailer_len, fixext16 fingerprint].  A non-empty usermeta chunk becomes
 * one variable-length metalayer named "usermeta". */
int b2_frame_parse_legacy_trailer(const uint8_t *t, size_t len,
                                  b2_frame_meta **out, int *count) {
  b2_mp_reader r;
  b2_mp_reader_init(&r, t, len);
  uint32_t nelem;
  int64_t version;
  const uint8_t *um;
  uint32_t umlen;
  int rc = b2_mp_read_array(&r, &nelem);
  if (!rc) rc = b2_mp_read_int(&r, &version);
  if (!rc) rc = b2_mp_read_bin(&r, &um, &umlen);
  if (rc < 0) return b2_context(rc, "trailer (older layout)");
  *out = NULL;
  *count = 0;
  if (umlen == 0) return 0;
  b2_frame_meta *m = calloc(1, sizeof *m);
  if (!m) return b2_fail(B2_E_NOMEM, "trailer: out of memory");
  strcpy(m->name, "usermeta");
  m->pos = (uint32_t)(um - t);
  m->len = umlen;
  *out = m;
  *count = 1;
  return 0;
}
