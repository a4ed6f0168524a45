/*
 * seek.c - SEEK_DATA and SEEK_HOLE of a file's view: the holes are the
 * bytes of chunks stored as zeros (a zero or uninitialised special index
 * entry: python-blosc2's zeros and empty arrays, ranges punched through
 * the mount once committed), read from the index alone, and the end of
 * the file.  What cannot be told cheaply is data: a file open for
 * writing, an .npy header, and whatever lies past a walk's budget.
 */
#include "b2_error.h"
#include "file/file_impl.h"

/* Runs of chunks (or of an array's rows within one chunk) looked at by
 * one seek: a few milliseconds at most. */
#define SEEK_BUDGET (1 << 20)

static int zero_chunk(void *arg, int64_t i) {
  const b2_file *f = arg;
  int sp = b2_frame_chunk_special(f->frame, i);
  if (sp < 0) return sp;
  return sp == B2_SPECIAL_ZERO || sp == B2_SPECIAL_UNINIT;
}

/* The same walk over the logical bytes [off, end), chunk by chunk. */
static int64_t seek_logical(const b2_file *f, int64_t off, int64_t end, int want, int *cut) {
  int64_t i = b2_frame_chunk_at(f->frame, off), pos = off;
  if (i < 0) return i;
  for (int64_t runs = 0; pos < end; runs++, i++) {
    if (runs == SEEK_BUDGET) {
      *cut = 1;
      return pos;
    }
    int h = zero_chunk((void *)f, i);
    if (h < 0) return h;
    if (h == want) return pos;
    pos = b2_frame_chunk_start(f->frame, i + 1);
    if (pos < 0) return pos;
  }
  return end;
}

int64_t b2_file_seek_hole(b2_file *f, int64_t off, int hole) {
  int64_t size = b2_file_size(f);
  if (off < 0) return b2_fail(B2_E_INVAL, "negative offset");
  if (off >= size)
    return b2_fail(B2_E_RANGE, "offset %lld is at or past the end (%lld bytes)", (long long)off,
                   (long long)size);
  if (f->writable || f->pending) return hole ? size : off; /* data throughout */
  int64_t base = f->view == B2_VIEW_NPY ? (int64_t)f->npylen : 0;
  if (off < base) { /* the header is data */
    if (!hole) return off;
    off = base;
  }
  int cut = 0;
  int64_t r;
  if (f->view == B2_VIEW_LOGICAL || b2_file_linear(f))
    r = seek_logical(f, off - base, size - base, hole, &cut);
  else if (f->has_array)
    r = b2_b2nd_seek(&f->array, off - base, hole, zero_chunk, f, SEEK_BUDGET, &cut);
  else
    r = hole ? size - base : off - base;
  if (r < 0) return r;
  if (cut && hole) return size; /* not told: data up to the end */
  r += base;                    /* cut, data: taken as data from there */
  if (r < size) return r;
  return hole ? size : b2_fail(B2_E_RANGE, "no data at or after offset %lld", (long long)off);
}
