/*
 * meta.c - the `b2nd` metalayer: parse and validate an array's geometry.
 *
 * The metalayer is a msgpack array (version, ndim, shape, chunkshape,
 * blockshape, dtype format, dtype string).  Everything in it is untrusted:
 * each read is bounds-checked, each count compared with ndim, and every
 * derived size (items, chunks, padded chunk and block bytes) computed with
 * overflow checks before the geometry is handed out.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "b2_b2nd.h"
#include "b2_error.h"
#include "b2nd/b2nd_int.h"
#include "common/msgpack.h"
#include "common/util.h"

/* ---- metalayer fields (through the shared msgpack reader) ---------------- */

static int get_int(b2_mp_reader *r, const char *what, int64_t *v) {
  int rc = b2_mp_read_int(r, v);
  return rc < 0 ? b2_context(rc, "b2nd: %s", what) : 0;
}

/* An array header holding exactly `ndim` entries.  The reference library
 * writes the marker as 0x90 + ndim even for ndim 16 (giving 0xa0, a fixstr
 * byte), so that byte is taken as an array of 16 as well. */
static int get_dims_header(b2_mp_reader *r, const char *what, int ndim) {
  if (ndim == 16 && r->pos < r->len && r->buf[r->pos] == 0xa0) {
    r->pos++;
    return 0;
  }
  uint32_t n;
  int rc = b2_mp_read_array(r, &n);
  if (rc < 0) return b2_context(rc, "b2nd: %s", what);
  if (n != (uint32_t)ndim)
    return b2_fail(B2_E_FORMAT, "b2nd: %s has %u entries, ndim is %d", what, n, ndim);
  return 0;
}

/* ---- geometry ---------------------------------------------------------- */

static int get_shape(b2_mp_reader *c, b2_b2nd *a) {
  int rc = get_dims_header(c, "shape", a->ndim);
  for (int i = 0; rc == 0 && i < a->ndim; i++) {
    char what[32];
    snprintf(what, sizeof what, "shape[%d]", i);
    int64_t v;
    if ((rc = get_int(c, what, &v)) < 0) break;
    if (v < 0) return b2_fail(B2_E_FORMAT, "b2nd: shape[%d] is negative (%lld)", i, (long long)v);
    a->shape[i] = v;
  }
  return rc;
}

static int get_shape32(b2_mp_reader *c, const char *name, int ndim, int32_t *out) {
  int rc = get_dims_header(c, name, ndim);
  for (int i = 0; rc == 0 && i < ndim; i++) {
    char what[32];
    snprintf(what, sizeof what, "%s[%d]", name, i);
    int64_t v;
    if ((rc = get_int(c, what, &v)) < 0) break;
    if (v < 0 || v > INT32_MAX)
      return b2_fail(B2_E_FORMAT, "b2nd: %s is out of range (%lld)", what, (long long)v);
    out[i] = (int32_t)v;
  }
  return rc;
}

/* Check the shapes and derive item, chunk and byte counts. */
int b2_b2nd_derive(b2_b2nd *a) {
  uint64_t nitems = 1, nchunks = 1, chunk_items = 1, block_items = 1;
  for (int i = 0; i < a->ndim; i++) {
    int64_t s = a->shape[i];
    int32_t cs = a->chunkshape[i], bs = a->blockshape[i];
    if (cs == 0 || bs == 0) {
      /* only an empty dimension may leave its chunking unset */
      if (s != 0 || cs != bs)
        return b2_fail(B2_E_FORMAT, "b2nd: chunkshape[%d] %d / blockshape[%d] %d must be > 0",
                       i, cs, i, bs);
    } else if (bs > cs) {
      return b2_fail(B2_E_FORMAT, "b2nd: blockshape[%d] %d exceeds chunkshape[%d] %d", i,
                     bs, i, cs);
    }
    uint64_t ext = cs == 0 ? 0 : ((uint64_t)cs + (uint64_t)bs - 1) / (uint64_t)bs * (uint64_t)bs;
    uint64_t nc = s == 0 ? 0 : ((uint64_t)s - 1) / (uint64_t)cs + 1;
    if (b2_mul_overflow_u64(nitems, (uint64_t)s, &nitems) || nitems > INT64_MAX)
      return b2_fail(B2_E_FORMAT, "b2nd: shape overflows at shape[%d] %lld", i, (long long)s);
    if (b2_mul_overflow_u64(nchunks, nc, &nchunks))
      return b2_fail(B2_E_FORMAT, "b2nd: chunk count overflows at dimension %d", i);
    if (b2_mul_overflow_u64(chunk_items, ext, &chunk_items) || chunk_items > INT32_MAX)
      return b2_fail(B2_E_LIMIT, "b2nd: chunkshape is too large (more than 2^31 items)");
    if (b2_mul_overflow_u64(block_items, (uint64_t)bs, &block_items) || block_items > INT32_MAX)
      return b2_fail(B2_E_LIMIT, "b2nd: blockshape is too large (more than 2^31 items)");
  }
  uint64_t isz = (uint64_t)a->itemsize, nbytes, cbytes, bbytes;
  if (b2_mul_overflow_u64(nitems, isz, &nbytes) || nbytes > INT64_MAX)
    return b2_fail(B2_E_FORMAT, "b2nd: array size overflows (%llu items of %d bytes)",
                   (unsigned long long)nitems, a->itemsize);
  if (b2_mul_overflow_u64(chunk_items, isz, &cbytes) || cbytes > INT32_MAX)
    return b2_fail(B2_E_LIMIT, "b2nd: a chunk of %llu items of %d bytes exceeds 2 GiB",
                   (unsigned long long)chunk_items, a->itemsize);
  if (b2_mul_overflow_u64(block_items, isz, &bbytes) || bbytes > INT32_MAX)
    return b2_fail(B2_E_LIMIT, "b2nd: a block of %llu items of %d bytes exceeds 2 GiB",
                   (unsigned long long)block_items, a->itemsize);
  a->nitems = (int64_t)nitems;
  a->nchunks = (int64_t)nchunks;
  a->chunk_nbytes = (int64_t)cbytes;
  a->block_nbytes = (int32_t)bbytes;
  return 0;
}

int b2_b2nd_set_dtype(b2_b2nd *a, const uint8_t *s, size_t n) {
  if (memchr(s, 0, n))
    return b2_fail(B2_E_FORMAT, "b2nd: dtype string contains a NUL byte");
  a->dtype = malloc(n + 1);
  if (!a->dtype) return b2_fail(B2_E_NOMEM, "b2nd: no memory for the dtype");
  memcpy(a->dtype, s, n);
  a->dtype[n] = 0;
  return 0;
}

static int parse(const uint8_t *meta, size_t len, b2_b2nd *a) {
  b2_mp_reader c;
  b2_mp_reader_init(&c, meta, len);
  uint32_t items;
  int rc = b2_mp_read_array(&c, &items);
  if (rc < 0) return b2_context(rc, "b2nd: metalayer");
  if (items != 7 && items != 5)
    return b2_fail(B2_E_FORMAT, "b2nd: metalayer is an array of %u, expected 7", items);
  int64_t v;
  if ((rc = get_int(&c, "version", &v)) < 0) return rc;
  if ((rc = get_int(&c, "ndim", &v)) < 0) return rc;
  if (v < 0 || v > B2_B2ND_MAXDIM)
    return b2_fail(B2_E_FORMAT, "b2nd: ndim %lld is out of range 0..%d", (long long)v,
                   B2_B2ND_MAXDIM);
  a->ndim = (int)v;
  if ((rc = get_shape(&c, a)) < 0) return rc;
  if ((rc = get_shape32(&c, "chunkshape", a->ndim, a->chunkshape)) < 0) return rc;
  if ((rc = get_shape32(&c, "blockshape", a->ndim, a->blockshape)) < 0) return rc;
  if ((rc = b2_b2nd_derive(a)) < 0) return rc;
  if (items == 7) {
    if ((rc = get_int(&c, "dtype format", &v)) < 0) return rc;
    if (v < 0 || v > 127)
      return b2_fail(B2_E_FORMAT, "b2nd: dtype format %lld is out of range", (long long)v);
    a->dtype_format = (int)v;
    const uint8_t *s = NULL;
    uint32_t n = 0;
    if ((rc = b2_mp_read_str(&c, &s, &n)) < 0) return b2_context(rc, "b2nd: dtype");
    if (n > B2_B2ND_MAXDTYPE)
      return b2_fail(B2_E_LIMIT, "b2nd: dtype of %u bytes is too long", n);
    return b2_b2nd_set_dtype(a, s, n);
  }
  /* older writers (caterva) stop after the block shape */
  char dflt[24];
  if (a->itemsize == 1)
    snprintf(dflt, sizeof dflt, "|u1");
  else
    snprintf(dflt, sizeof dflt, "|V%d", a->itemsize);
  return b2_b2nd_set_dtype(a, (const uint8_t *)dflt, strlen(dflt));
}

int b2_b2nd_parse(const uint8_t *meta, size_t len, int32_t itemsize, b2_b2nd *out) {
  if (!out) return b2_fail(B2_E_INVAL, "b2nd: no output");
  memset(out, 0, sizeof *out);
  if (!meta && len) return b2_fail(B2_E_INVAL, "b2nd: no metalayer");
  if (itemsize <= 0)
    return b2_fail(B2_E_FORMAT, "b2nd: item size %d must be > 0", itemsize);
  out->itemsize = itemsize;
  int rc = parse(meta, len, out);
  if (rc < 0) b2_b2nd_free(out);
  return rc < 0 ? rc : 0;
}

void b2_b2nd_free(b2_b2nd *a) {
  if (!a) return;
  free(a->dtype);
  a->dtype = NULL;
}

int64_t b2_b2nd_nbytes(const b2_b2nd *a) { return a->nitems * (int64_t)a->itemsize; }

int b2_b2nd_check(const b2_b2nd *a, int64_t nchunks, int32_t chunksize) {
  if (nchunks != a->nchunks)
    return b2_fail(B2_E_FORMAT, "b2nd: the frame has %lld chunks, the shape needs %lld",
                   (long long)nchunks, (long long)a->nchunks);
  if (a->nchunks > 0 && chunksize != 0 && chunksize != a->chunk_nbytes)
    return b2_fail(B2_E_FORMAT, "b2nd: frame chunks hold %d bytes, the chunk shape needs %lld",
                   chunksize, (long long)a->chunk_nbytes);
  return 0;
}

_Static_assert(B2_B2ND_MAXDIM <= B2_CHUNK_GEOM_MAXDIM, "a block shape fits a chunk geometry");

void b2_b2nd_geom(const b2_b2nd *a, b2_chunk_geom *g) {
  memset(g, 0, sizeof *g);
  g->ndim = a->ndim;
  for (int i = 0; i < a->ndim; i++) g->blockshape[i] = a->blockshape[i];
}

int b2_b2nd_attach(b2_frame *f) {
  const uint8_t *meta;
  size_t len;
  /* Looked up by name first: a frame without one is no error here, and
   * the detail of the caller's last error must stay as it is. */
  const char *name = NULL;
  for (int k = 0; f && (name = b2_frame_meta_name(f, k)) && strcmp(name, "b2nd"); k++) {
  }
  if (!name || b2_frame_meta_get(f, "b2nd", &meta, &len) < 0) return 0;
  b2_b2nd a;
  memset(&a, 0, sizeof a);
  if (b2_b2nd_parse(meta, len, b2_frame_get_info(f)->typesize, &a) < 0) return 0;
  b2_chunk_geom g;
  b2_b2nd_geom(&a, &g);
  b2_b2nd_free(&a);
  b2_frame_set_geom(f, &g);
  return g.ndim > 0;
}
