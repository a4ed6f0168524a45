/*
 * meta.c - metalayers: parse the `[size, {name: offset}, [bin...]]`
 * section shared by the header (fixed-length metalayers) and the trailer
 * (variable-length ones), and the public accessors.
 */
#include <stdlib.h>
#include <string.h>

#include "b2_chunk.h"
#include "b2_error.h"
#include "frame/frame_impl.h"

int b2_frame_parse_metalayers(const uint8_t *region, size_t len,
                              size_t start, int max, b2_frame_meta **out,
                              int *count) {
  *out = NULL;
  *count = 0;
  if (start > len)
    return b2_fail(B2_E_TRUNCATED, "metalayers start at %zu, past the end "
                   "(%zu)", start, len);
  b2_mp_reader r;
  b2_mp_reader_init(&r, region, len);
  r.pos = start;
  uint32_t nelem, n;
  uint64_t idx_size;
  int rc = b2_mp_read_array(&r, &nelem);
  if (!rc && nelem != 3)
    rc = b2_fail(B2_E_FORMAT, "array of %u elements, not 3", (unsigned)nelem);
  if (!rc) rc = b2_mp_read_uint(&r, &idx_size);
  if (!rc) rc = b2_mp_read_map(&r, &n);
  if (rc < 0) return rc;
  if (n > (uint32_t)max)
    return b2_fail(B2_E_FORMAT, "%u metalayers (at most %d)", (unsigned)n,
                   max);
  if (n == 0) return 0;
  /* n is bounded by max, and each entry needs bytes the loop checks. */
  b2_frame_meta *m = calloc(n, sizeof *m);
  if (!m) return b2_fail(B2_E_NOMEM, "out of memory for %u metalayers", n);
  for (uint32_t k = 0; k < n; k++) {
    const uint8_t *name;
    uint32_t nlen;
    int64_t off;
    rc = b2_mp_read_str(&r, &name, &nlen);
    if (rc < 0) {
      rc = b2_context(rc, "metalayer %u: name", (unsigned)k);
      goto fail;
    }
    const char *bad = nlen == 0 ? "is empty"
                      : nlen > B2_FRAME_META_NAME_MAX ? "is too long"
                      : memchr(name, 0, nlen) ? "holds a NUL byte" : NULL;
    if (bad) {
      rc = b2_fail(B2_E_FORMAT, "metalayer %u: name of %u bytes %s (at most "
                   "%d bytes, no NUL)", (unsigned)k, (unsigned)nlen, bad,
                   B2_FRAME_META_NAME_MAX);
      goto fail;
    }
    memcpy(m[k].name, name, nlen);
    m[k].name[nlen] = '\0';
    rc = b2_mp_read_int(&r, &off);
    if (rc < 0) {
      rc = b2_context(rc, "metalayer \"%s\": offset", m[k].name);
      goto fail;
    }
    if (off < 0 || (uint64_t)off >= len) {
      rc = b2_fail(B2_E_FORMAT, "metalayer \"%s\": offset %lld is outside "
                   "the %zu bytes that hold it", m[k].name, (long long)off,
                   len);
      goto fail;
    }
    b2_mp_reader c;
    b2_mp_reader_init(&c, region, len);
    c.pos = (size_t)off;
    const uint8_t *data;
    uint32_t dlen;
    rc = b2_mp_read_bin(&c, &data, &dlen);
    if (rc < 0) {
      rc = b2_context(rc, "metalayer \"%s\": content at %lld", m[k].name,
                      (long long)off);
      goto fail;
    }
    m[k].pos = (uint32_t)(data - region);
    m[k].len = dlen;
  }
  *out = m;
  *count = (int)n;
  return 0;
fail:
  free(m);
  return rc;
}

/* Accessors: a writable frame's metalayers change under its lock, but
 * the buffers they point into live until close (see wstate.c). */
const char *b2_frame_meta_name(const b2_frame *f, int k) {
  if (!f) return NULL;
  b2_frame_rdlock(f);
  const char *r = k >= 0 && k < f->info.nmeta ? f->meta[k].name : NULL;
  b2_frame_rdunlock(f);
  return r;
}

int b2_frame_meta_get(const b2_frame *f, const char *name,
                      const uint8_t **data, size_t *len) {
  if (!f || !name || !data || !len)
    return b2_fail(B2_E_INVAL, "frame metalayer: missing argument");
  int rc = B2_E_NOENT;
  b2_frame_rdlock(f);
  for (int k = 0; k < f->info.nmeta; k++) {
    if (strcmp(f->meta[k].name, name) == 0) {
      *data = f->header + f->meta[k].pos;
      *len = f->meta[k].len;
      rc = 0;
      break;
    }
  }
  b2_frame_rdunlock(f);
  return rc ? b2_fail(rc, "no metalayer \"%s\"", name) : 0;
}

const char *b2_frame_vlmeta_name(const b2_frame *f, int k) {
  if (!f) return NULL;
  b2_frame_rdlock(f);
  const char *r = k >= 0 && k < f->info.nvlmeta ? f->vlmeta[k].name : NULL;
  b2_frame_rdunlock(f);
  return r;
}

static int vlmeta_get(const b2_frame *f, const char *name, uint8_t **data,
                      size_t *len) {
  for (int k = 0; k < f->info.nvlmeta; k++) {
    const b2_frame_meta *m = &f->vlmeta[k];
    if (strcmp(m->name, name) != 0) continue;
    /* The content is a Blosc chunk holding the user's bytes. */
    const uint8_t *chunk = f->trailer + m->pos;
    b2_chunk_info ci;
    int rc = b2_chunk_parse(chunk, m->len, &ci);
    if (rc < 0) return b2_context(rc, "vlmetalayer \"%s\"", name);
    if ((size_t)ci.nbytes > B2_FRAME_MAX_VLMETA_BYTES)
      return b2_fail(B2_E_LIMIT, "vlmetalayer \"%s\": %d bytes exceed the "
                     "limit of %zu", name, ci.nbytes,
                     B2_FRAME_MAX_VLMETA_BYTES);
    if (!data) { /* the size only */
      *len = (size_t)ci.nbytes;
      return 0;
    }
    uint8_t *out = malloc(ci.nbytes > 0 ? (size_t)ci.nbytes : 1);
    if (!out) return b2_fail(B2_E_NOMEM, "vlmetalayer \"%s\": out of memory",
                             name);
    rc = b2_chunk_decode(chunk, m->len, out, (size_t)ci.nbytes);
    if (rc < 0) {
      free(out);
      return b2_context(rc, "vlmetalayer \"%s\"", name);
    }
    *data = out;
    *len = (size_t)rc;
    return 0;
  }
  return b2_fail(B2_E_NOENT, "no vlmetalayer \"%s\"", name);
}

int b2_frame_vlmeta_get(const b2_frame *f, const char *name, uint8_t **data,
                        size_t *len) {
  if (!f || !name || !len)
    return b2_fail(B2_E_INVAL, "frame vlmetalayer: missing argument");
  b2_frame_rdlock(f);
  int rc = vlmeta_get(f, name, data, len);
  b2_frame_rdunlock(f);
  return rc;
}
