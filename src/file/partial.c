/*
 * partial.c - small random reads of chunks that are not cached decoded.
 *
 * Such a read decodes only the blocks it covers.  Read-only handles keep
 * the chunk as stored (compressed, its checksum checked once when read
 * from the frame) in the env's cache under (f->cid, i), so that later
 * reads of the chunk neither read the frame file again nor re-check the
 * checksum; a stored chunk takes a fraction of the memory of a decoded
 * one.  Handles that can be written read from the frame each time.
 *
 * A chunk stored as one block is the exception: decoding "only the
 * blocks covering the read" decodes it whole anyway, so the result goes to
 * the decoded cache under (f->id, i), replacing the stored entry, and later
 * reads of the chunk are served from there (frames written with blocksize
 * = chunksize, where every small read would otherwise decode the whole
 * chunk again).
 *
 * A chunk read often goes the same way: once small reads have decoded as
 * many blocks from its stored entry as the chunk holds (what decoding it
 * whole costs), it is decoded whole into the cache, if that fits without
 * evicting anything.  Reads of a file the cache can hold decoded then
 * end up served from the cache; in a cache that is full they keep to the
 * stored chunks, which take a fraction of the memory.
 *
 * b2_file_read_blocks never does: band.c reads each block once, for the
 * band that needs it, and a chunk decoded whole would be decoded twice.
 *
 * (Keeping decoded blocks as well was tried twice.  With cache_buf.c,
 * fio through the mount: +2% to +23% random 4 KiB reads per second on
 * text and the zstd signal, but -19% on the lz4 signal (blocks pushed its
 * stored chunks out of the cache), as one 4 KiB FUSE round trip alone
 * costs about 58 us there (a plain file under the same mount: 17k
 * reads/s).  And the process grew to 300-460 MiB with the 256 MiB cache
 * (MALLOC_ARENA_MAX=1 did not change that).  Not kept.)
 */
#include <stdlib.h>
#include <string.h>

#include "b2_error.h"
#include "common/util.h"
#include "file/file_impl.h"

/* Stored chunk, checked (header, checksum) by the frame layer. */
static int load_stored(void *arg, uint64_t file, int64_t chunk, uint8_t **data, size_t *len) {
  b2_file *f = arg;
  (void)file;
  atomic_store(&f->cached, 1);
  /* read straight into the cache's own kind of buffer */
  return b2_frame_read_chunk_into(f->frame, chunk, b2_cache_buf_alloc, b2_cache_buf_free, data, len);
}

static int partial(b2_file *f, int64_t i, size_t off, size_t len, void *dst, int promote) {
  b2_cache *c = f->env ? f->env->cache : NULL;
  if (!f->cid || !c) {
    int rc = b2_frame_decode_range(f->frame, i, off, len, dst);
    return rc < 0 ? rc : 0;
  }
  b2_cache_entry *se;
  int rc;
  if (b2_cache_peek(c, f->cid, i, &se) < 0) {
    /* Not kept as stored.  When the cache has no room for it, keeping it
     * would only push out another chunk (a file larger than the cache,
     * read at random): read just the blocks this read decodes, unless a
     * checksum over the whole chunk is to be verified. */
    int32_t nb = b2_frame_chunk_nbytes(f->frame, i);
    if (nb >= 0 && !b2_cache_has_room(c, (size_t)nb) && !b2_frame_chunk_has_csum(f->frame, i)) {
      rc = b2_frame_read_range(f->frame, i, off, len, dst);
      return rc < 0 ? rc : 0;
    }
    rc = b2_cache_get(c, f->cid, i, load_stored, f, &se);
    if (rc < 0) return rc;
  }
  b2_chunk_info ci;
  if (promote && b2_chunk_parse(b2_cache_data(se), b2_cache_len(se), &ci) == 0 &&
      ci.special == B2_SPECIAL_NONE && !ci.memcpyed &&
      (ci.nblocks == 1 ||
       (b2_cache_use(se) > (unsigned)ci.nblocks && b2_cache_has_room(c, (size_t)ci.nbytes)))) {
    b2_cache_entry *e; /* decoded from the stored entry while it is pinned */
    rc = b2_file_cache_get(f, i, b2_file_load_chunk, &e);
    b2_cache_release(c, se);
    if (rc < 0) return rc;
    b2_cache_invalidate(c, f->cid, i); /* clean: the decoded entry replaces it */
    if (b2_cache_len(e) >= off + len)
      memcpy(dst, b2_cache_data(e) + off, len);
    else
      rc = b2_fail(B2_E_FORMAT, "chunk %lld decodes to %zu bytes, short of %zu", (long long)i,
                   b2_cache_len(e), off + len);
    b2_cache_release(c, e);
    return rc < 0 ? rc : 0;
  }
  rc = b2_chunk_decode_range(b2_cache_data(se), b2_cache_len(se), off, len, dst,
                             b2_frame_geom(f->frame));
  b2_cache_release(c, se);
  if (rc >= 0 && (size_t)rc != len)
    rc = b2_fail(B2_E_FORMAT, "range decode gave %d bytes, expected %zu", rc, len);
  return rc < 0 ? b2_context(rc, "chunk %lld", (long long)i) : 0;
}

int b2_file_read_partial(b2_file *f, int64_t i, size_t off, size_t len, void *dst) {
  return partial(f, i, off, len, dst, 1);
}

int b2_file_read_blocks(b2_file *f, int64_t i, size_t off, size_t len, void *dst) {
  return partial(f, i, off, len, dst, 0);
}
