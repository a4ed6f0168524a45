/*
 * shapes.c - default chunk and block shapes for a new b2nd array.
 *
 * The rule follows the array's trailing dimensions, as python-blosc2's
 * defaults do, so that a block (and a chunk) is a run of whole C-order
 * rows whenever it can be: starting from the last dimension, a partition
 * takes whole dimensions while the product stays within its target item
 * count, then the remaining factor of the first dimension that does not
 * fit (rounded down to a divisor of that dimension's length when one lies
 * within a factor of two, so edge pieces are not ragged), then 1 for the
 * leading dimensions; blocks are then widened to a least side where a
 * codec asks for one (ZFP's 4).  Blocks are partitioned first, inside the chunk shape
 * when one is given; chunks are then partitioned over the grid of blocks,
 * so every chunk is a whole number of blocks along each dimension (except
 * where it ends with the array).
 */
#include <string.h>

#include "b2_b2nd.h"
#include "b2_error.h"
#include "common/util.h"

/* Largest divisor of n in (k/2, k], or k when there is none. */
static int64_t near_divisor(int64_t n, int64_t k) {
  for (int64_t c = k; c > k / 2; c--)
    if (n % c == 0) return c;
  return k;
}

/* Partition: out[d] in 1..lim[d] with product <= max(target, 1), trailing
 * dimensions first (see the file comment). */
static void partition(int ndim, const int64_t *lim, int64_t target, int64_t *out) {
  int64_t rem = target < 1 ? 1 : target;
  for (int d = ndim - 1; d >= 0; d--) {
    if (rem <= 1 || lim[d] <= 1) {
      out[d] = 1;
    } else if (lim[d] <= rem) {
      out[d] = lim[d];
      rem /= lim[d];
    } else {
      out[d] = near_divisor(lim[d], rem);
      rem /= out[d];
    }
  }
}

/* 1 when every entry is 0 (to be chosen), 0 when none is (given), else a
 * negative code. */
static int to_choose(int ndim, const int64_t *shape, const int32_t *s, const char *what) {
  int zeros = 0, empty_dims = 0;
  for (int d = 0; d < ndim; d++) {
    if (s[d] < 0) return b2_fail(B2_E_INVAL, "%s[%d] is negative", what, d);
    zeros += s[d] == 0;
    empty_dims += s[d] == 0 && shape[d] == 0;
  }
  if (zeros == ndim) return 1;
  if (zeros > empty_dims)
    return b2_fail(B2_E_INVAL, "%s: give every dimension or none", what);
  return 0;
}

int b2_b2nd_choose_shapes(int ndim, const int64_t *shape, int32_t itemsize, int32_t min_side,
                          int32_t *chunkshape, int32_t *blockshape) {
  if (ndim < 0 || ndim > B2_B2ND_MAXDIM || itemsize <= 0)
    return b2_fail(B2_E_INVAL, "b2nd shapes: ndim %d / item size %d out of range", ndim, itemsize);
  if (ndim == 0) return 0;
  int empty = 0;
  for (int d = 0; d < ndim; d++) {
    if (shape[d] < 0) return b2_fail(B2_E_INVAL, "b2nd shapes: shape[%d] is negative", d);
    empty |= shape[d] == 0;
  }
  int pick_c = to_choose(ndim, shape, chunkshape, "chunkshape");
  if (pick_c < 0) return pick_c;
  int pick_b = to_choose(ndim, shape, blockshape, "blockshape");
  if (pick_b < 0) return pick_b;
  if (empty) { /* nothing to store: any valid shape does */
    for (int d = 0; d < ndim; d++) {
      if (pick_c) chunkshape[d] = 1;
      if (pick_b) blockshape[d] = chunkshape[d] == 0 ? 0 : 1;
    }
    return 0;
  }
  int64_t lim[B2_B2ND_MAXDIM], part[B2_B2ND_MAXDIM];
  if (pick_b) {
    for (int d = 0; d < ndim; d++)
      lim[d] = pick_c ? shape[d] : B2_MIN(shape[d], (int64_t)chunkshape[d]);
    partition(ndim, lim, B2_B2ND_BLOCK_TARGET / itemsize, part);
    for (int d = 0; d < ndim; d++) /* widened to min_side where the array allows */
      blockshape[d] = (int32_t)B2_MAX(part[d], B2_MIN(lim[d], (int64_t)min_side));
  }
  if (pick_c) {
    int64_t block_bytes = itemsize;
    for (int d = 0; d < ndim; d++) {
      if (blockshape[d] <= 0)
        return b2_fail(B2_E_INVAL, "b2nd shapes: blockshape[%d] must be > 0", d);
      block_bytes = B2_MIN(block_bytes * blockshape[d], (int64_t)1 << 40);
      lim[d] = (shape[d] + blockshape[d] - 1) / blockshape[d];
    }
    partition(ndim, lim, B2_B2ND_CHUNK_TARGET / block_bytes, part);
    for (int d = 0; d < ndim; d++) {
      int64_t c = part[d] * blockshape[d];
      c = B2_MIN(c, B2_MAX(shape[d], (int64_t)blockshape[d]));
      chunkshape[d] = (int32_t)B2_MIN(c, (int64_t)INT32_MAX);
    }
  }
  return 0;
}
