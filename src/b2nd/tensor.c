/*
 * tensor.c - python-blosc2's packed tensors and arrays (pack_tensor,
 * save_tensor, save_array): the (kind, shape, dtype) triple of their
 * vlmetalayer, read into a geometry for the .npy view (see b2_b2nd.h).
 */
#include <stdlib.h>
#include <string.h>

#include "b2_b2nd.h"
#include "b2_error.h"
#include "b2nd/b2nd_int.h"
#include "common/msgpack.h"
#include "common/util.h"

#define MAX_KIND 64 /* "numpy", "torch", "tensorflow" */

static int bad(const char *what) { return b2_fail(B2_E_FORMAT, "%s: %s", B2_TENSOR_VLMETA, what); }

int b2_tensor_parse(const uint8_t *vlmeta, size_t len, int64_t nbytes, b2_b2nd *out) {
  memset(out, 0, sizeof *out);
  b2_mp_reader r;
  b2_mp_reader_init(&r, vlmeta, len);
  uint32_t n, ndim;
  const uint8_t *kind;
  uint32_t klen;
  if (b2_tensor_mp_seq(&r, &n) < 0 || n != 3) return bad("not a (kind, shape, dtype) triple");
  if (b2_mp_read_str(&r, &kind, &klen) < 0 || klen == 0 || klen > MAX_KIND)
    return bad("the kind is not a short string");
  if (b2_tensor_mp_seq(&r, &ndim) < 0) return bad("the shape is not a sequence");
  if (ndim > B2_B2ND_MAXDIM)
    return b2_fail(B2_E_LIMIT, "%s: %u dimensions (at most %d)", B2_TENSOR_VLMETA, ndim, B2_B2ND_MAXDIM);
  int64_t shape[B2_B2ND_MAXDIM];
  for (uint32_t d = 0; d < ndim; d++)
    if (b2_mp_read_int(&r, &shape[d]) < 0 || shape[d] < 0) return bad("a length is not a count");
  char *descr;
  int rc = b2_npy_descr_from_mp(&r, &descr);
  if (rc < 0) return b2_context(rc, B2_TENSOR_VLMETA);
  if (r.pos != r.len) {
    free(descr);
    return bad("bytes after the triple");
  }
  rc = b2_b2nd_from_npy(out, descr, 0, (int)ndim, shape, NULL, NULL, 1);
  free(descr);
  if (rc < 0) return b2_context(rc, B2_TENSOR_VLMETA);
  uint64_t total;
  if (b2_mul_overflow_u64((uint64_t)out->nitems, (uint64_t)out->itemsize, &total) ||
      total != (uint64_t)nbytes) {
    b2_b2nd_free(out);
    return b2_fail(B2_E_FORMAT, "%s: %lld items of %d bytes, but the frame holds %lld bytes",
                   B2_TENSOR_VLMETA, (long long)out->nitems, (int)out->itemsize, (long long)nbytes);
  }
  return 0;
}

int b2_tensor_get(const b2_frame *f, b2_b2nd *out) {
  memset(out, 0, sizeof *out);
  uint8_t *data;
  size_t len;
  int rc = b2_frame_vlmeta_get(f, B2_TENSOR_VLMETA, &data, &len);
  if (rc < 0) return rc == B2_E_NOENT ? 0 : rc; /* none, or damaged */
  b2_frame_info in; /* a copy: a writable frame's changes while we look */
  rc = b2_frame_info_copy(f, &in);
  if (rc == 0) rc = b2_tensor_parse(data, len, in.nbytes, out);
  free(data);
  return rc < 0 ? rc : 1;
}
