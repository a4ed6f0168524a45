/*
 * index.c - the index chunk: a Blosc chunk of little-endian int64 entries
 * (byte offsets from the end of the header, chunk file numbers in sparse
 * frames, or special values).  Loaded and fully validated at open; for
 * variable-length chunks the table of logical starts is built here too.
 */
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

#include "b2_chunk.h"
#include "b2_error.h"
#include "common/util.h"
#include "frame/frame_impl.h"

/* Check one entry: a known special kind, or a place a chunk can be. */
static int check_entry(const b2_frame *f, int64_t i, int64_t e) {
  int kind = b2_frame_entry_kind(e);
  if (kind < 0)
    return b2_fail(B2_E_FORMAT, "index entry %lld: special value 0x%016llx "
                   "has no known kind", (long long)i, (unsigned long long)e);
  if (kind != B2_SPECIAL_NONE) {
    if (f->info.varlen_chunks)
      return b2_fail(B2_E_FORMAT, "index entry %lld: special chunk in a "
                     "frame of variable-length chunks (its size is unknown)",
                     (long long)i);
    return 0;
  }
  if (f->info.layout == B2_LAYOUT_SPARSE) {
    if (e > (int64_t)UINT32_MAX)
      return b2_fail(B2_E_FORMAT, "index entry %lld: chunk file number %lld "
                     "is out of range", (long long)i, (long long)e);
    return 0;
  }
  int64_t room = f->data_end - f->data_pos; /* bytes of the chunks section */
  if (e > room - B2_CHUNK_HEADER_MIN)
    return b2_fail(B2_E_FORMAT, "index entry %lld: offset %lld is past the "
                   "chunks section (%lld bytes)", (long long)i, (long long)e,
                   (long long)room);
  return 0;
}

/* Entries of a special index chunk: all equal. */
static int uniform_entry(const uint8_t *chunk, size_t len,
                         const b2_chunk_info *ci, int64_t *e) {
  if (ci->special == B2_SPECIAL_ZERO) {
    *e = 0;
    return 0;
  }
  if (ci->special != B2_SPECIAL_VALUE || ci->typesize != 8)
    return b2_fail(B2_E_FORMAT, "index chunk: special chunk of kind %d "
                   "(typesize %d) cannot hold offsets", ci->special,
                   ci->typesize);
  uint8_t v[8];
  int rc = b2_chunk_decode_range(chunk, len, 0, sizeof v, v, NULL);
  if (rc < 0) return b2_context(rc, "index chunk");
  *e = (int64_t)b2_le64(v);
  return 0;
}

int b2_frame_stored_nbytes(const b2_frame *f, int64_t i, int32_t *nbytes) {
  int64_t e = b2_frame_entry(f, i);
  int fd = f->fd;
  int64_t pos = f->base + f->data_pos + e, limit = f->base + f->data_end;
  if (f->info.layout == B2_LAYOUT_SPARSE) {
    struct stat st;
    int rc = b2_sframe_open_chunk(f, e, &fd, &st);
    if (rc < 0) return rc;
    pos = 0;
    limit = (int64_t)st.st_size;
  }
  int rc = 0;
  uint8_t hdr[B2_CHUNK_HEADER_MIN];
  int32_t cb, bs;
  if (limit - pos < B2_CHUNK_HEADER_MIN)
    rc = b2_fail(B2_E_TRUNCATED, "only %lld bytes at offset %lld, less than "
                 "a chunk header", (long long)(limit - pos), (long long)pos);
  if (!rc) rc = b2_frame_fpread(f, fd, hdr, sizeof hdr, pos, 0);
  if (!rc) rc = b2_chunk_sizes(hdr, sizeof hdr, nbytes, &cb, &bs);
  if (!rc && (cb < B2_CHUNK_HEADER_MIN || cb > limit - pos))
    rc = b2_fail(B2_E_FORMAT, "cbytes %d at offset %lld overruns the %lld "
                 "bytes available", cb, (long long)pos,
                 (long long)(limit - pos));
  if (!rc && *nbytes < 0)
    rc = b2_fail(B2_E_FORMAT, "negative nbytes %d", *nbytes);
  if (fd != f->fd) close(fd);
  return rc;
}

/* Chunk sizes already read, by index entry (direct-mapped): an index whose
 * entries repeat (a special index chunk gives every chunk the same one; a
 * crafted one may cycle through a few) costs one header read per distinct
 * chunk, not one per chunk it claims (up to B2_FRAME_MAX_CHUNKS, each a
 * chunk file opened in a sparse frame: minutes). */
#define SIZE_MEMO 4096
typedef struct size_memo {
  int64_t entry;
  int32_t nbytes;
  int used;
} size_memo;

static int build_starts(b2_frame *f) {
  int64_t n = f->info.nchunks;
  f->starts = malloc(((size_t)n + 1) * sizeof *f->starts);
  size_memo *memo = calloc(SIZE_MEMO, sizeof *memo);
  if (!f->starts || !memo) {
    free(memo);
    return b2_fail(B2_E_NOMEM, "out of memory for %lld chunk starts",
                   (long long)n);
  }
  int64_t sum = 0;
  int rc = 0;
  for (int64_t i = 0; i < n && !rc; i++) {
    int64_t e = b2_frame_entry(f, i);
    size_memo *m = &memo[((uint64_t)e * 0x9E3779B97F4A7C15u) >> 52]; /* 12 bits */
    if (!m->used || m->entry != e) {
      int32_t nb;
      rc = b2_frame_stored_nbytes(f, i, &nb);
      if (rc < 0) {
        rc = b2_context(rc, "chunk %lld", (long long)i);
        break;
      }
      *m = (size_memo){.entry = e, .nbytes = nb, .used = 1};
    }
    f->starts[i] = sum;
    sum += m->nbytes; /* n <= B2_FRAME_MAX_CHUNKS, nb < 2^31: cannot overflow */
    if (sum > f->info.nbytes) /* no need to read further */
      rc = b2_fail(B2_E_FORMAT, "chunks 0 to %lld hold %lld bytes, more than the "
                   "header's %lld", (long long)i, (long long)sum,
                   (long long)f->info.nbytes);
  }
  free(memo);
  if (rc < 0) return rc;
  f->starts[n] = sum;
  if (sum != f->info.nbytes)
    return b2_fail(B2_E_FORMAT, "chunks hold %lld bytes in all, the header "
                   "says %lld", (long long)sum, (long long)f->info.nbytes);
  return 0;
}

int b2_frame_load_index(b2_frame *f) {
  b2_frame_info *in = &f->info;
  in->nchunks = 0;
  if (in->nbytes == 0) return 0; /* an empty frame stores no index */

  int64_t room = f->trailer_pos - f->data_pos;
  if (in->layout == B2_LAYOUT_CONTIGUOUS && in->cbytes > room)
    return b2_fail(B2_E_FORMAT, "compressed_size %lld puts the index chunk "
                   "past the trailer (%lld bytes after the header)",
                   (long long)in->cbytes, (long long)room);
  f->index_pos = f->data_pos +
                 (in->layout == B2_LAYOUT_CONTIGUOUS ? in->cbytes : 0);
  f->data_end = f->index_pos;

  b2_chunkbuf b = {.p = NULL};
  size_t len;
  int32_t inb;
  int rc = b2_frame_read_stored(f, f->fd, f->base + f->index_pos,
                                f->base + f->trailer_pos, &b, &len,
                                &inb, 0, NULL);
  if (rc < 0) {
    free(b.p);
    return b2_context(rc, "index chunk");
  }
  f->index_cbytes = (int32_t)len;
  b2_chunk_info ci;
  rc = b2_chunk_parse(b.p, len, &ci);
  if (rc < 0) {
    rc = b2_context(rc, "index chunk");
    goto out;
  }
  if (ci.nbytes % 8 != 0) {
    rc = b2_fail(B2_E_FORMAT, "index chunk: nbytes %d is not a multiple of 8",
                 ci.nbytes);
    goto out;
  }
  int64_t nidx = ci.nbytes / 8;
  if (in->chunksize > 0) {
    int64_t n = in->nbytes / in->chunksize + (in->nbytes % in->chunksize != 0);
    if (nidx != n) {
      /* n comes from the header: n * 8 may not fit */
      if (n <= INT64_MAX / 8)
        rc = b2_fail(B2_E_FORMAT, "index chunk: nbytes %d is not nchunks*8 = "
                     "%lld (nbytes %lld / chunksize %d)", ci.nbytes,
                     (long long)n * 8, (long long)in->nbytes, in->chunksize);
      else
        rc = b2_fail(B2_E_FORMAT, "index chunk: nbytes %d is not nchunks*8 "
                     "(nchunks %lld: nbytes %lld / chunksize %d)", ci.nbytes,
                     (long long)n, (long long)in->nbytes, in->chunksize);
      goto out;
    }
  } else if (nidx == 0) {
    rc = b2_fail(B2_E_FORMAT, "index chunk: no chunks for %lld bytes",
                 (long long)in->nbytes);
    goto out;
  }
  /* A special index chunk needs no table of entries; otherwise the tables
   * kept in memory are bounded. */
  if ((ci.special == B2_SPECIAL_NONE || in->varlen_chunks) &&
      nidx > B2_FRAME_MAX_CHUNKS) {
    rc = b2_fail(B2_E_LIMIT, "index chunk: %lld chunks exceed the limit of "
                 "%lld", (long long)nidx, (long long)B2_FRAME_MAX_CHUNKS);
    goto out;
  }
  in->nchunks = nidx;

  if (ci.special != B2_SPECIAL_NONE) {
    rc = uniform_entry(b.p, len, &ci, &f->uniform_offset);
    if (!rc) rc = check_entry(f, 0, f->uniform_offset);
  } else {
    f->offsets = malloc((size_t)ci.nbytes);
    if (!f->offsets) {
      rc = b2_fail(B2_E_NOMEM, "index chunk: out of memory for %lld entries",
                   (long long)nidx);
      goto out;
    }
    rc = b2_chunk_decode(b.p, len, f->offsets, (size_t)ci.nbytes);
    if (rc >= 0 && rc != ci.nbytes)
      rc = b2_fail(B2_E_FORMAT, "index chunk: decoded %d bytes, not %d", rc,
                   ci.nbytes);
    if (rc < 0) {
      rc = b2_context(rc, "index chunk");
      goto out;
    }
    rc = 0;
    for (int64_t i = 0; i < nidx && !rc; i++) {
      f->offsets[i] = (int64_t)b2_le64(&f->offsets[i]);
      rc = check_entry(f, i, f->offsets[i]);
    }
  }
  if (!rc && in->varlen_chunks) rc = build_starts(f);
out:
  free(b.p);
  if (rc < 0) in->nchunks = 0;
  return rc;
}
