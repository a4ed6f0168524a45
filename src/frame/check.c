/*
 * check.c - strict conformance check of an open frame (`b2f verify`):
 * what opening already validated (header, trailer, index sizes), plus
 * every chunk read and parsed whole, its sizes and type size checked
 * against the frame, its place between the header and the index chunk,
 * and the conditions the reference library puts on stored chunks.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "b2_chunk.h"
#include "b2_error.h"
#include "frame/frame_impl.h"

static int check_layout(const b2_frame *f) {
  const b2_frame_info *in = &f->info;
  if (in->layout != B2_LAYOUT_CONTIGUOUS) return 0;
  struct stat st;
  if (fstat(f->fd, &st) != 0)
    return b2_fail(B2_E_IO, "cannot stat the frame file");
  int64_t fsize = f->w ? f->w->c_frame_size : in->frame_size;
  /* A frame inside another file may use only its own bytes. */
  if (f->base > 0) st.st_size = (off_t)f->file_size;
  if (fsize > (int64_t)st.st_size)
    return b2_fail(B2_E_TRUNCATED, "frame_size %lld exceeds the file's %lld "
                   "bytes", (long long)fsize, (long long)st.st_size);
  if (in->nbytes > 0 && !f->w &&
      f->index_pos + f->index_cbytes > f->trailer_pos)
    return b2_fail(B2_E_FORMAT, "index chunk [%lld, +%d) overlaps the "
                   "trailer at %lld", (long long)f->index_pos,
                   f->index_cbytes, (long long)f->trailer_pos);
  return 0;
}

/* Chunk i: read whole (its header checked against the frame's geometry
 * and the bytes available), parsed, and compared with the frame. */
static int check_chunk(const b2_frame *f, int64_t i, b2_chunkbuf *b) {
  int64_t e = b2_frame_entry(f, i);
  if (b2_frame_entry_kind(e) != B2_SPECIAL_NONE) return 0;
  size_t len;
  int rc = b2_frame_load_chunk(f, i, b, &len, NULL);
  if (rc < 0) return rc;
  b2_chunk_info ci;
  rc = b2_chunk_parse(b->p, len, &ci);
  if (rc < 0) return b2_context(rc, "chunk %lld", (long long)i);
  const b2_frame_info *in = &f->info;
  if (!in->legacy && len < B2_CHUNK_HEADER_EXT)
    return b2_fail(B2_E_FORMAT, "chunk %lld: %zu bytes (the reference "
                   "library reads 32-byte headers)", (long long)i, len);
  if (in->typesize <= 255 && ci.typesize != in->typesize &&
      ci.special == B2_SPECIAL_NONE && !ci.memcpyed)
    return b2_fail(B2_E_FORMAT, "chunk %lld: typesize %d, the frame's is %d",
                   (long long)i, ci.typesize, in->typesize);
  if (in->layout == B2_LAYOUT_CONTIGUOUS && !f->w &&
      e + (int64_t)len > f->index_pos - f->data_pos)
    return b2_fail(B2_E_FORMAT, "chunk %lld: [%lld, +%zu) reaches past the "
                   "index chunk at %lld", (long long)i, (long long)e, len,
                   (long long)(f->index_pos - f->data_pos));
  if (in->layout == B2_LAYOUT_SPARSE && !f->w &&
      e > in->cbytes - B2_CHUNK_HEADER_EXT)
    return b2_fail(B2_E_FORMAT, "chunk %lld: file number %lld exceeds "
                   "cbytes - 32 = %lld (the reference library refuses it)",
                   (long long)i, (long long)e,
                   (long long)(in->cbytes - B2_CHUNK_HEADER_EXT));
  return 0;
}

static int check_vlmeta(const b2_frame *f) {
  for (int k = 0; k < f->info.nvlmeta; k++) {
    const b2_frame_meta *m = &f->vlmeta[k];
    b2_chunk_info ci;
    int rc = b2_chunk_parse(f->trailer + m->pos, m->len, &ci);
    if (rc < 0) return b2_context(rc, "vlmetalayer \"%s\"", m->name);
    if ((uint32_t)ci.cbytes != m->len)
      return b2_fail(B2_E_FORMAT, "vlmetalayer \"%s\": chunk of %d bytes in "
                     "%u", m->name, ci.cbytes, m->len);
  }
  return 0;
}

int b2_frame_check(b2_frame *f) {
  if (!f) return b2_fail(B2_E_INVAL, "no frame");
  if (f->w) pthread_mutex_lock(&f->w->wmu);
  b2_frame_rdlock(f);
  int rc = check_layout(f);
  b2_chunkbuf b = {.p = NULL};
  for (int64_t i = 0; i < f->info.nchunks && !rc; i++)
    rc = check_chunk(f, i, &b);
  free(b.p);
  if (!rc) rc = check_vlmeta(f);
  b2_frame_rdunlock(f);
  if (f->w) pthread_mutex_unlock(&f->w->wmu);
  return rc;
}
