/*
 * meta_write.c - describe a new b2nd array and encode its `b2nd` metalayer.
 *
 * b2_b2nd_make fills a geometry from caller-supplied parts with the same
 * checks the metalayer parser applies, so a geometry that is written can
 * always be read back.  b2_b2nd_meta_encode writes the metalayer with the
 * reference library's fixed encodings (not msgpack's shortest forms):
 * version and ndim as positive fixints, each shape list as a fixarray
 * marker 0x90 + ndim (which the reference also writes for ndim 16), the
 * shape as int64 (0xd3), chunk and block shapes as int32 (0xd2), the dtype
 * format as a fixint and the dtype as str32 (0xdb), all big-endian.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "b2_b2nd.h"
#include "b2_error.h"
#include "b2nd/b2nd_int.h"
#include "common/msgpack.h"
#include "common/util.h"

#define B2ND_META_VERSION 0

int b2_b2nd_make(b2_b2nd *out, int ndim, const int64_t *shape, const int32_t *chunkshape,
                 const int32_t *blockshape, int32_t itemsize, const char *dtype) {
  if (!out) return b2_fail(B2_E_INVAL, "b2nd: no output");
  memset(out, 0, sizeof *out);
  if (ndim < 0 || ndim > B2_B2ND_MAXDIM)
    return b2_fail(B2_E_INVAL, "b2nd: ndim %d is out of range 0..%d", ndim, B2_B2ND_MAXDIM);
  if (ndim > 0 && (!shape || !chunkshape || !blockshape))
    return b2_fail(B2_E_INVAL, "b2nd: missing shapes");
  if (itemsize <= 0) return b2_fail(B2_E_INVAL, "b2nd: item size %d must be > 0", itemsize);
  out->ndim = ndim;
  out->itemsize = itemsize;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0 || chunkshape[i] < 0 || blockshape[i] < 0)
      return b2_fail(B2_E_INVAL, "b2nd: negative size in dimension %d", i);
    out->shape[i] = shape[i];
    out->chunkshape[i] = chunkshape[i];
    out->blockshape[i] = blockshape[i];
  }
  int rc = b2_b2nd_derive(out);
  if (rc < 0) return rc;
  char dflt[24];
  if (!dtype) {
    snprintf(dflt, sizeof dflt, itemsize == 1 ? "|u1" : "|V%d", itemsize);
    dtype = dflt;
  }
  size_t n = strlen(dtype);
  if (n > B2_B2ND_MAXDTYPE) return b2_fail(B2_E_LIMIT, "b2nd: dtype of %zu bytes is too long", n);
  return b2_b2nd_set_dtype(out, (const uint8_t *)dtype, n);
}

static void put_dims_header(b2_mp_writer *w, int ndim) {
  uint8_t m = (uint8_t)(0x90 + ndim);
  b2_mp_put_raw(w, &m, 1);
}

int b2_b2nd_meta_encode(const b2_b2nd *a, uint8_t **out, size_t *len) {
  if (!a || !out || !len) return b2_fail(B2_E_INVAL, "b2nd meta: bad arguments");
  *out = NULL;
  *len = 0;
  if (a->ndim < 0 || a->ndim > B2_B2ND_MAXDIM || a->dtype_format < 0 || a->dtype_format > 127)
    return b2_fail(B2_E_INVAL, "b2nd meta: ndim %d / dtype format %d out of range", a->ndim,
                   a->dtype_format);
  const char *dt = a->dtype ? a->dtype : "";
  size_t dl = strlen(dt);
  if (dl > B2_B2ND_MAXDTYPE) return b2_fail(B2_E_LIMIT, "b2nd meta: dtype is too long");
  b2_mp_writer w;
  b2_mp_writer_init(&w, NULL, 0);
  b2_mp_put_array(&w, 7);
  b2_mp_put_int(&w, B2ND_META_VERSION);
  b2_mp_put_int(&w, a->ndim);
  put_dims_header(&w, a->ndim);
  for (int i = 0; i < a->ndim; i++) b2_mp_put_i64(&w, a->shape[i]);
  put_dims_header(&w, a->ndim);
  for (int i = 0; i < a->ndim; i++) b2_mp_put_i32(&w, a->chunkshape[i]);
  put_dims_header(&w, a->ndim);
  for (int i = 0; i < a->ndim; i++) b2_mp_put_i32(&w, a->blockshape[i]);
  b2_mp_put_int(&w, a->dtype_format);
  uint8_t s32[5] = {0xdb};
  b2_put_be32(s32 + 1, (uint32_t)dl);
  b2_mp_put_raw(&w, s32, sizeof s32);
  int rc = b2_mp_put_raw(&w, dt, dl);
  if (rc < 0) {
    b2_mp_writer_free(&w);
    return b2_context(rc, "b2nd meta");
  }
  *out = w.buf;
  *len = w.len;
  return 0;
}
