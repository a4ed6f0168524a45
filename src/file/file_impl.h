/* file_impl.h - internals of the file-handle layer (src/file/). */
#ifndef B2_FILE_IMPL_H
#define B2_FILE_IMPL_H

#include <stdatomic.h>

#include "b2_file.h"

struct b2_env {
  b2_env_opts opts;
  atomic_uint_fast64_t next_id; /* cache key of the next opened frame */
};

struct b2_file {
  b2_env *env;
  b2_frame *frame;
  int view;
  int flags;
  uint64_t id;          /* key of this frame in the shared cache */
  int has_array;
  b2_b2nd array;
  char *npy;            /* .npy header (B2_VIEW_NPY) */
  size_t npylen;
  int64_t size;         /* size of the view */
};

/* Read bytes [off, off+len) of decoded chunk i (cache, partial decode or
 * whole decode, whichever is cheapest). */
int b2_file_read_chunk(b2_file *f, int64_t i, size_t off, size_t len, void *dst);

#endif
