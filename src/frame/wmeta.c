/*
 * wmeta.c - stage metalayer changes in a writable frame: fixed-length
 * metalayers live in the header (a rebuilt header is staged; commit writes
 * it in place when its length is unchanged, else rewrites the frame), and
 * variable-length ones in the trailer (a rebuilt trailer is staged; every
 * commit writes a new trailer anyway).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "b2_error.h"
#include "common/msgpack.h"
#include "frame/frame_impl.h"

/* Largest fixed-length metalayer accepted (the header is read whole). */
#define META_MAX_BYTES ((size_t)16 << 20)

static int check_name(const char *name) {
  size_t n = name ? strlen(name) : 0;
  if (n == 0 || n > B2_FRAME_META_NAME_MAX)
    return b2_fail(B2_E_INVAL, "metalayer name of %zu bytes (1 to %d)", n,
                   B2_FRAME_META_NAME_MAX);
  return 0;
}

/* Index of `name` in blobs, or -1. */
static int find(const b2_blob *b, int n, const char *name) {
  for (int k = 0; k < n; k++)
    if (strcmp(b[k].name, name) == 0) return k;
  return -1;
}

int b2_frame_meta_set(b2_frame *f, const char *name, const void *data,
                      size_t len) {
  int rc = check_name(name);
  if (rc < 0) return rc;
  if (len > META_MAX_BYTES || (len && !data))
    return b2_fail(B2_E_INVAL, "metalayer \"%s\": %zu bytes", name, len);
  rc = b2_frame_w_begin(f);
  if (rc < 0) return rc;
  b2_blob b[B2_FRAME_MAX_META + 1];
  int n = b2_frame_meta_blobs(f, 0, b, B2_FRAME_MAX_META);
  int k = n < 0 ? -1 : find(b, n, name);
  if (n >= 0 && k < 0) {
    if (n == B2_FRAME_MAX_META)
      n = b2_fail(B2_E_LIMIT, "metalayer \"%s\": the frame has %d already",
                  name, B2_FRAME_MAX_META);
    else
      k = n++;
  }
  uint8_t *h = NULL;
  size_t hl;
  if (n >= 0) {
    b[k].name = name;
    b[k].data = data;
    b[k].len = (uint32_t)len;
    rc = b2_frame_build_header(f->header, b, n, &h, &hl);
  } else {
    rc = n;
  }
  if (!rc) {
    b2_frame_w *w = f->w;
    pthread_rwlock_wrlock(&w->lock);
    rc = b2_frame_w_set_header(f, h, hl);
    pthread_rwlock_unlock(&w->lock);
    if (!rc) {
      w->dirty = w->header_dirty = 1;
      w->header_resized = hl != w->c_header_len;
    }
  }
  b2_frame_w_end(f);
  return rc;
}

/* Stage a trailer with the blobs b[0..n). */
static int stage_trailer(b2_frame *f, const b2_blob *b, int n) {
  uint8_t *t;
  size_t tl;
  int rc = b2_frame_build_trailer(b, n, &t, &tl);
  if (rc < 0) return rc;
  b2_frame_w *w = f->w;
  pthread_rwlock_wrlock(&w->lock);
  rc = b2_frame_w_set_trailer(f, t, tl);
  pthread_rwlock_unlock(&w->lock);
  if (!rc) w->dirty = 1;
  return rc;
}

int b2_frame_w_vlmeta_put(b2_frame *f, const char *name, const uint8_t *chunk,
                          size_t clen) {
  if (clen > UINT32_MAX)
    return b2_fail(B2_E_LIMIT, "vlmetalayer \"%s\": %zu bytes", name, clen);
  b2_blob b[B2_FRAME_MAX_VLMETA_WRITE + 1];
  int n = b2_frame_meta_blobs(f, 1, b, B2_FRAME_MAX_VLMETA_WRITE);
  int k = n < 0 ? -1 : find(b, n, name);
  if (n >= 0 && k < 0) {
    if (n == B2_FRAME_MAX_VLMETA_WRITE)
      n = b2_fail(B2_E_LIMIT, "vlmetalayer \"%s\": the frame has %d already",
                  name, B2_FRAME_MAX_VLMETA_WRITE);
    else
      k = n++;
  }
  if (n < 0) return n;
  b[k].name = name;
  b[k].data = chunk;
  b[k].len = (uint32_t)clen;
  return stage_trailer(f, b, n);
}

int b2_frame_vlmeta_set(b2_frame *f, const char *name, const void *data,
                        size_t len) {
  int rc = check_name(name);
  if (rc < 0) return rc;
  if (len && !data)
    return b2_fail(B2_E_INVAL, "vlmetalayer \"%s\": no data", name);
  uint8_t *chunk;
  size_t clen;
  rc = b2_frame_build_vlchunk(data, len, &chunk, &clen);
  if (rc < 0) return rc;
  rc = b2_frame_w_begin(f);
  if (rc < 0) {
    free(chunk);
    return rc;
  }
  rc = b2_frame_w_vlmeta_put(f, name, chunk, clen);
  b2_frame_w_end(f);
  free(chunk);
  return rc;
}

int b2_frame_vlmeta_check(const void *data, size_t len) {
  b2_mp_reader r;
  b2_mp_reader_init(&r, data, len);
  int rc = len ? b2_mp_skip(&r) : B2_E_TRUNCATED;
  if (rc < 0)
    return b2_fail(B2_E_INVAL, "a vlmetalayer's content must be one msgpack object (%s)",
                   len ? "these bytes are not one" : "it is empty");
  if (r.pos != len)
    return b2_fail(B2_E_INVAL,
                   "a vlmetalayer's content must be one msgpack object (%zu bytes follow it)",
                   len - r.pos);
  return 0;
}

int b2_frame_vlmeta_del(b2_frame *f, const char *name) {
  int rc = check_name(name);
  if (rc < 0) return rc;
  rc = b2_frame_w_begin(f);
  if (rc < 0) return rc;
  b2_blob b[B2_FRAME_MAX_VLMETA_WRITE];
  int n = b2_frame_meta_blobs(f, 1, b, B2_FRAME_MAX_VLMETA_WRITE);
  int k = n < 0 ? -1 : find(b, n, name);
  if (n < 0) {
    rc = n;
  } else if (k < 0) {
    rc = b2_fail(B2_E_NOENT, "no vlmetalayer \"%s\"", name);
  } else {
    memmove(b + k, b + k + 1, (size_t)(n - k - 1) * sizeof *b);
    rc = stage_trailer(f, b, n - 1);
  }
  b2_frame_w_end(f);
  return rc;
}

/* ---- the user's metalayers, carried to another frame -------------------- */

struct b2_frame_user_meta {
  int n;
  struct umeta {
    char *name;
    int fixed;
    uint8_t *data;
    size_t len;
  } e[2 * B2_FRAME_MAX_META];
};

void b2_frame_user_meta_free(b2_frame_user_meta *m) {
  if (!m) return;
  for (int k = 0; k < m->n; k++) {
    free(m->e[k].name);
    free(m->e[k].data);
  }
  free(m);
}

/* Append (name, data) to m; data is malloc'd and taken over (freed on
 * failure too). */
static int keep(b2_frame_user_meta *m, const char *name, int fixed, uint8_t *data, size_t len) {
  char *nm = m->n < 2 * B2_FRAME_MAX_META ? strdup(name) : NULL;
  if (!nm) {
    free(data);
    return m->n < 2 * B2_FRAME_MAX_META ? b2_fail(B2_E_NOMEM, "no memory for metalayer %s", name)
                                        : b2_fail(B2_E_LIMIT, "too many metalayers");
  }
  m->e[m->n++] = (struct umeta){nm, fixed, data, len};
  return 0;
}

int b2_frame_user_meta_take(const b2_frame *f, b2_frame_user_meta **out) {
  *out = NULL;
  b2_frame_user_meta *m = calloc(1, sizeof *m);
  if (!m) return b2_fail(B2_E_NOMEM, "no memory for metalayers");
  const char *name;
  int rc = 0;
  for (int k = 0; rc == 0 && (name = b2_frame_meta_name(f, k)) != NULL; k++) {
    const uint8_t *data;
    size_t len;
    if (b2_frame_kind_marker(name)) continue;
    rc = b2_frame_meta_get(f, name, &data, &len);
    uint8_t *copy = rc == 0 ? malloc(len ? len : 1) : NULL;
    if (rc == 0 && !copy) rc = b2_fail(B2_E_NOMEM, "no memory for metalayer %s", name);
    if (copy) {
      if (len) memcpy(copy, data, len);
      rc = keep(m, name, 1, copy, len);
    }
  }
  for (int k = 0; rc == 0 && (name = b2_frame_vlmeta_name(f, k)) != NULL; k++) {
    if (strncmp(name, "b2fs.", 5) == 0) continue;
    uint8_t *data = NULL;
    size_t len = 0;
    rc = b2_frame_vlmeta_get(f, name, &data, &len); /* decoded into its own buffer */
    if (rc == 0) rc = keep(m, name, 0, data, len);
  }
  if (rc < 0) {
    b2_frame_user_meta_free(m);
    return rc;
  }
  *out = m;
  return 0;
}

int b2_frame_user_meta_put(b2_frame *f, const b2_frame_user_meta *m) {
  int rc = 0;
  for (int k = 0; m && rc == 0 && k < m->n; k++) {
    const struct umeta *u = &m->e[k];
    const void *data = u->data ? (const void *)u->data : ""; /* an empty one */
    rc = u->fixed ? b2_frame_meta_set(f, u->name, data, u->len)
                  : b2_frame_vlmeta_set(f, u->name, data, u->len);
  }
  return rc;
}
