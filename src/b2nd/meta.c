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
#include "common/util.h"

/* ---- a bounds-checked msgpack cursor (just what the metalayer uses) ---- */

typedef struct cursor {
  const uint8_t *p;
  size_t left;
} cursor;

static int need(cursor *c, size_t n, const char *what) {
  if (c->left < n)
    return b2_fail(B2_E_TRUNCATED, "b2nd: metalayer ends inside %s", what);
  return 0;
}

static void skip(cursor *c, size_t n) {
  c->p += n;
  c->left -= n;
}

/* Any msgpack integer encoding; values above INT64_MAX are refused. */
static int get_int(cursor *c, const char *what, int64_t *v) {
  int rc = need(c, 1, what);
  if (rc < 0) return rc;
  uint8_t m = c->p[0];
  size_t w;
  int sign;
  if (m <= 0x7f) { *v = m; skip(c, 1); return 0; }
  if (m >= 0xe0) { *v = (int64_t)m - 256; skip(c, 1); return 0; }
  switch (m) {
    case 0xcc: w = 1; sign = 0; break;
    case 0xcd: w = 2; sign = 0; break;
    case 0xce: w = 4; sign = 0; break;
    case 0xcf: w = 8; sign = 0; break;
    case 0xd0: w = 1; sign = 1; break;
    case 0xd1: w = 2; sign = 1; break;
    case 0xd2: w = 4; sign = 1; break;
    case 0xd3: w = 8; sign = 1; break;
    default:
      return b2_fail(B2_E_FORMAT, "b2nd: %s is not an integer (msgpack 0x%02x)",
                     what, m);
  }
  if ((rc = need(c, 1 + w, what)) < 0) return rc;
  const uint8_t *b = c->p + 1;
  uint64_t u = w == 1 ? b[0] : w == 2 ? b2_be16(b) : w == 4 ? b2_be32(b) : b2_be64(b);
  skip(c, 1 + w);
  if (sign) {
    /* sign-extend from w bytes */
    if (w < 8 && (u >> (8 * w - 1)) & 1) u |= ~(uint64_t)0 << (8 * w);
    *v = (int64_t)u;
    return 0;
  }
  if (u > (uint64_t)INT64_MAX)
    return b2_fail(B2_E_FORMAT, "b2nd: %s %llu is out of range", what,
                   (unsigned long long)u);
  *v = (int64_t)u;
  return 0;
}

/* An array header holding exactly `ndim` entries.  The reference library
 * writes the marker as 0x90 + ndim even for ndim 16 (giving 0xa0), so that
 * byte is taken as an array of 16 as well. */
static int get_dims_header(cursor *c, const char *what, int ndim) {
  int rc = need(c, 1, what);
  if (rc < 0) return rc;
  uint8_t m = c->p[0];
  int64_t n = -1;
  size_t w = 1;
  if (m >= 0x90 && m <= 0x9f) {
    n = m & 0x0f;
  } else if (m == 0xdc || m == 0xdd) {
    w = m == 0xdc ? 3 : 5;
    if ((rc = need(c, w, what)) < 0) return rc;
    n = m == 0xdc ? b2_be16(c->p + 1) : b2_be32(c->p + 1);
  } else if (ndim == 16 && m == 0xa0) {
    n = 16;
  } else {
    return b2_fail(B2_E_FORMAT, "b2nd: %s is not an array (msgpack 0x%02x)",
                   what, m);
  }
  if (n != ndim)
    return b2_fail(B2_E_FORMAT, "b2nd: %s has %lld entries, ndim is %d", what,
                   (long long)n, ndim);
  skip(c, w);
  return 0;
}

/* A msgpack string; returns its bytes in place. */
static int get_str(cursor *c, const char *what, const uint8_t **s, size_t *n) {
  int rc = need(c, 1, what);
  if (rc < 0) return rc;
  uint8_t m = c->p[0];
  size_t w;
  uint64_t len;
  if (m >= 0xa0 && m <= 0xbf) {
    w = 1;
    len = m & 0x1f;
  } else if (m == 0xd9 || m == 0xda || m == 0xdb) {
    w = m == 0xd9 ? 2 : m == 0xda ? 3 : 5;
    if ((rc = need(c, w, what)) < 0) return rc;
    len = m == 0xd9 ? c->p[1] : m == 0xda ? b2_be16(c->p + 1) : b2_be32(c->p + 1);
  } else {
    return b2_fail(B2_E_FORMAT, "b2nd: %s is not a string (msgpack 0x%02x)",
                   what, m);
  }
  if (len > B2_B2ND_MAXDTYPE)
    return b2_fail(B2_E_LIMIT, "b2nd: %s of %llu bytes is too long", what,
                   (unsigned long long)len);
  skip(c, w);
  if ((rc = need(c, (size_t)len, what)) < 0) return rc;
  *s = c->p;
  *n = (size_t)len;
  skip(c, (size_t)len);
  return 0;
}

/* ---- geometry ---------------------------------------------------------- */

static int get_shape(cursor *c, b2_b2nd *a) {
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

static int get_shape32(cursor *c, const char *name, int ndim, int32_t *out) {
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
static int derive(b2_b2nd *a) {
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

static int set_dtype(b2_b2nd *a, const uint8_t *s, size_t n) {
  if (memchr(s, 0, n))
    return b2_fail(B2_E_FORMAT, "b2nd: dtype string contains a NUL byte");
  a->dtype = malloc(n + 1);
  if (!a->dtype) return b2_fail(B2_E_NOMEM, "b2nd: no memory for the dtype");
  memcpy(a->dtype, s, n);
  a->dtype[n] = 0;
  return 0;
}

static int parse(const uint8_t *meta, size_t len, b2_b2nd *a) {
  cursor c = {meta, len};
  int rc = need(&c, 1, "the header");
  if (rc < 0) return rc;
  uint8_t m = c.p[0];
  if (m != 0x97 && m != 0x95)
    return b2_fail(B2_E_FORMAT, "b2nd: metalayer is not an array of 7 (msgpack 0x%02x)", m);
  int has_dtype = m == 0x97;
  skip(&c, 1);
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
  if ((rc = derive(a)) < 0) return rc;
  if (has_dtype) {
    if ((rc = get_int(&c, "dtype format", &v)) < 0) return rc;
    if (v < 0 || v > 127)
      return b2_fail(B2_E_FORMAT, "b2nd: dtype format %lld is out of range", (long long)v);
    a->dtype_format = (int)v;
    const uint8_t *s = NULL;
    size_t n = 0;
    if ((rc = get_str(&c, "dtype", &s, &n)) < 0) return rc;
    return set_dtype(a, s, n);
  }
  char dflt[24];
  if (a->itemsize == 1)
    snprintf(dflt, sizeof dflt, "|u1");
  else
    snprintf(dflt, sizeof dflt, "|V%d", a->itemsize);
  return set_dtype(a, (const uint8_t *)dflt, strlen(dflt));
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
