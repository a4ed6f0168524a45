/*
 * commit.c - make a writable frame's staged state durable and visible.
 *
 * Contiguous: the index chunk and the trailer are appended past everything
 * written so far, synced, and only then are the header's size fields (or,
 * for same-size metalayer changes, the whole header when it fits in one
 * sector) rewritten in one write and synced.  Until that write lands the
 * old header describes the old frame, whose bytes nothing overwrites.
 * Sparse: new chunk files are synced, chunks.b2frame is written to a
 * temporary file, synced, renamed into place, the directory synced, and
 * the chunk files no index references any more are deleted.
 *
 * After a failed commit, the next one first reads back every chunk staged
 * since the last commit, checks it against its checksum and writes it
 * again: Linux may mark pages whose write-back failed as clean, so a
 * second sync could succeed without those bytes ever reaching the disk.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "b2_chunk.h"
#include "b2_error.h"
#include "common/fileio.h"
#include "common/util.h"
#include "frame/frame_impl.h"

#define SPARSE_TMP B2_FRAME_SPARSE_INDEX ".tmp"

/* The staged header with the size fields of the frame being written. */
static int sized_header(const b2_frame *f, int64_t frame_size, int64_t cbytes,
                        uint8_t **out) {
  size_t hl = (size_t)f->info.header_size;
  uint8_t *h = malloc(hl);
  if (!h) return b2_fail(B2_E_NOMEM, "out of memory for the header");
  memcpy(h, f->header, hl);
  b2_frame_patch_sizes(h, frame_size, f->info.nbytes, cbytes,
                       f->info.chunksize, f->info.nvlmeta > 0);
  *out = h;
  return 0;
}

/* Index chunk (none for an empty frame) followed by the trailer. */
static int index_and_trailer(const b2_frame *f, uint8_t **out, size_t *ilen,
                             size_t *total) {
  uint8_t *idx = NULL;
  *ilen = 0;
  if (f->info.nchunks > 0) {
    int rc = b2_frame_build_index(f->offsets, f->info.nchunks, &idx, ilen);
    if (rc < 0) return rc;
  }
  size_t tl = f->trailer_len;
  uint8_t *buf = malloc(*ilen + tl);
  if (!buf) {
    free(idx);
    return b2_fail(B2_E_NOMEM, "out of memory for the index");
  }
  if (*ilen) memcpy(buf, idx, *ilen);
  memcpy(buf + *ilen, f->trailer, tl);
  free(idx);
  *out = buf;
  *total = *ilen + tl;
  return 0;
}

/* After a successful commit: the header as committed, nothing staged. */
void b2_frame_w_committed(b2_frame *f, uint8_t *header, int64_t frame_size) {
  b2_frame_w *w = f->w;
  free(w->c_header);
  w->c_header = header;
  w->c_header_len = (size_t)f->info.header_size;
  w->c_frame_size = frame_size;
  w->dirty = w->header_dirty = w->header_resized = w->sync_failed = 0;
  w->nfix = w->fix_all = 0;
}

static int commit_contiguous(b2_frame *f) {
  b2_frame_w *w = f->w;
  uint8_t *buf, *h = NULL;
  size_t ilen, total;
  int rc = index_and_trailer(f, &buf, &ilen, &total);
  if (rc < 0) return rc;
  int64_t pos = w->append_pos;
  int64_t fsize = pos + (int64_t)total;
  rc = b2_io_pwrite(f->fd, buf, total, pos);
  b2_frame_csum_hold(f); /* the committed frame is unchanged until the header */
  free(buf);
  /* Whatever happened, these bytes are never reused: a header written by
   * an attempt that seemed to fail may point at them. */
  pthread_rwlock_wrlock(&w->lock);
  w->append_pos = fsize;
  f->data_end = fsize;
  pthread_rwlock_unlock(&w->lock);
  if (!rc) rc = b2_io_fdatasync(f->fd);
  if (!rc) rc = sized_header(f, fsize, pos - f->data_pos, &h);
  if (rc < 0) return b2_context(rc, "commit: index and trailer");

  /* One write of the fixed part, or of the whole header when metalayers
   * of the same size changed (it then fits in one sector). */
  size_t hl = w->header_dirty ? (size_t)f->info.header_size : B2_FH_FIXED;
  rc = b2_io_pwrite(f->fd, h, hl, 0);
  if (rc < 0) {
    /* Best effort: put the old bytes back over a partial write. */
    int keep = rc;
    (void)b2_io_pwrite(f->fd, w->c_header, hl, 0);
    free(h);
    return b2_context(keep, "commit: header");
  }
  b2_frame_csum_seal_fd(f, f->fd); /* at once: a crash from here keeps the table good */
  rc = b2_io_fdatasync(f->fd);
  /* The new header may be on disk even if the sync failed: adopt it in
   * memory either way (the old frame's bytes stay intact too). */
  pthread_rwlock_wrlock(&w->lock);
  memcpy(f->header, h, B2_FH_FIXED);
  f->info.frame_size = fsize;
  f->info.cbytes = pos - f->data_pos;
  f->index_pos = pos;
  f->index_cbytes = (int32_t)ilen;
  f->trailer_pos = pos + (int64_t)ilen;
  pthread_rwlock_unlock(&w->lock);
  if (rc < 0) {
    free(h);
    return b2_context(rc, "commit: header");
  }
  b2_frame_w_committed(f, h, fsize);
  return 0;
}

/* Sparse: sync the chunk files staged since the last commit. */
static int sync_new_files(b2_frame *f) {
  b2_frame_w *w = f->w;
  int any = 0, rc = 0;
  for (int64_t i = 0; i < f->info.nchunks && !rc; i++) {
    int64_t e = f->offsets[i];
    if (e < 0 || w->cbit[e]) continue; /* bit 0: on disk index; 2: synced */
    char name[32];
    b2_sframe_name(e, name);
    int fd = b2_io_openat(f->dirfd, name, O_RDONLY, 0);
    if (fd < 0) {
      rc = b2_context(fd, "commit: chunk file");
      break;
    }
    b2_frame_csum_seal_fd(f, fd); /* the time its checksum vouches for */
    rc = b2_io_fsync(fd);
    b2_io_close(fd);
    w->cbit[e] |= 2;
    any = 1;
  }
  for (int64_t i = 0; i < f->info.nchunks; i++) {
    int64_t e = f->offsets[i];
    if (e >= 0) w->cbit[e] &= 1;
  }
  if (!rc && any) rc = b2_io_fsync(f->dirfd);
  return rc < 0 ? b2_context(rc, "commit: chunk files") : 0;
}

/* Sparse header cbytes: the stored bytes, but never less than the highest
 * chunk file number + 32 (the reference library checks numbers against
 * cbytes as if they were offsets). */
static int64_t sparse_cbytes(const b2_frame *f) {
  int64_t sum = 0, maxnum = -1;
  for (int64_t i = 0; i < f->info.nchunks; i++) {
    if (f->offsets[i] < 0) continue;
    sum += f->w->csize[i];
    if (f->offsets[i] > maxnum) maxnum = f->offsets[i];
  }
  return maxnum >= 0 ? B2_MAX(sum, maxnum + B2_CHUNK_HEADER_EXT) : sum;
}

static int commit_sparse(b2_frame *f) {
  b2_frame_w *w = f->w;
  int rc = sync_new_files(f);
  if (rc < 0) return rc;
  uint8_t *it, *h;
  size_t ilen, total, hl = (size_t)f->info.header_size;
  rc = index_and_trailer(f, &it, &ilen, &total);
  if (rc < 0) return rc;
  int64_t fsize = (int64_t)(hl + total);
  rc = sized_header(f, fsize, sparse_cbytes(f), &h);
  if (rc < 0) {
    free(it);
    return rc;
  }
  (void)b2_io_unlinkat(f->dirfd, SPARSE_TMP, 0); /* an old leftover */
  struct stat st;
  mode_t mode = fstat(f->fd, &st) == 0 ? (st.st_mode & 07777) : 0644;
  int fd = b2_io_openat(f->dirfd, SPARSE_TMP, O_RDWR | O_CREAT | O_EXCL,
                        mode);
  rc = fd < 0 ? fd : b2_io_pwrite(fd, h, hl, 0);
  if (!rc) rc = b2_io_pwrite(fd, it, total, (int64_t)hl);
  free(it);
  if (!rc) rc = b2_io_fsync(fd);
  if (!rc) b2_frame_csum_seal_fd(f, fd); /* its table's time before it is the index */
  if (!rc)
    rc = b2_io_renameat(f->dirfd, SPARSE_TMP, f->dirfd,
                        B2_FRAME_SPARSE_INDEX, 0);
  if (rc < 0) {
    if (fd >= 0) {
      b2_io_close(fd);
      (void)b2_io_unlinkat(f->dirfd, SPARSE_TMP, 0);
    }
    free(h);
    return b2_context(rc, "commit: %s", B2_FRAME_SPARSE_INDEX);
  }
  /* The new index is in place (durable once the directory is synced):
   * its chunk files now belong to an index on disk. */
  for (int64_t i = 0; i < f->info.nchunks; i++)
    if (f->offsets[i] >= 0) w->cbit[f->offsets[i]] = 1;
  rc = b2_io_fsync(f->dirfd);
  pthread_rwlock_wrlock(&w->lock);
  int old = f->fd;
  f->fd = fd;
  memcpy(f->header, h, B2_FH_FIXED);
  f->info.frame_size = fsize;
  f->info.cbytes = sparse_cbytes(f);
  f->file_size = fsize;
  f->data_pos = f->data_end = f->index_pos = (int64_t)hl;
  f->index_cbytes = (int32_t)ilen;
  f->trailer_pos = (int64_t)(hl + ilen);
  pthread_rwlock_unlock(&w->lock);
  b2_io_close(old);
  if (rc < 0) {
    free(h);
    return b2_context(rc, "commit: directory");
  }
  /* Only now may files of the previous index go. */
  for (int64_t n = 0; n < w->ncap; n++) {
    if (w->cbit[n] && !w->sref[n]) {
      char name[32];
      b2_sframe_name(n, name);
      (void)b2_io_unlinkat(f->dirfd, name, 0);
      w->cbit[n] = 0;
      w->nsize[n] = 0;
      if (n < w->next_free) w->next_free = n;
    }
  }
  b2_frame_w_committed(f, h, fsize);
  return 0;
}

/* Stored chunk i, staged since the last commit, read back from the file,
 * checked against the checksum taken when it was put and written again
 * in place (the same bytes, so nothing committed changes). */
static int restage_chunk(b2_frame *f, int64_t i) {
  b2_frame_w *w = f->w;
  int64_t e = f->offsets[i];
  size_t len = (size_t)w->csize[i];
  int fd = f->fd;
  int64_t at = f->data_pos + e;
  if (e < 0 || len == 0) return 0;
  if (f->info.layout == B2_LAYOUT_SPARSE) {
    if (e >= w->ncap || (w->cbit[e] & 1)) return 0; /* in a committed index */
    char name[32];
    b2_sframe_name(e, name);
    fd = b2_io_openat(f->dirfd, name, O_RDWR, 0);
    if (fd < 0) return fd;
    at = 0;
  } else if (at < w->c_frame_size) {
    return 0; /* part of the committed frame */
  }
  uint8_t *buf = malloc(len);
  int rc = buf ? b2_io_pread(fd, buf, len, at) : b2_fail(B2_E_NOMEM, "out of memory");
  if (!rc) rc = b2_frame_csum_match(f, i, buf, len);
  if (rc == B2_E_CHECKSUM)
    rc = b2_fail(B2_E_IO, "written since the last commit, it no longer reads back as written: "
                 "lost when a sync failed");
  if (!rc) rc = b2_io_pwrite(fd, buf, len, at);
  if (fd == f->fd) b2_frame_csum_hold(f); /* staged past the frame: it is unchanged */
  free(buf);
  if (fd != f->fd) b2_io_close(fd);
  return rc;
}

int b2_frame_w_restage(b2_frame *f) {
  if (!f->w->sync_failed) return 0;
  for (int64_t i = 0; i < f->info.nchunks; i++) {
    int rc = restage_chunk(f, i);
    if (rc < 0) return b2_context(rc, "after a failed commit: chunk %lld", (long long)i);
  }
  return 0;
}

static int commit_dispatch(b2_frame *f) {
  b2_frame_w *w = f->w;
  int rc = b2_frame_w_fix_tail(f);
  if (!rc) rc = b2_frame_w_check_fixups(f);
  if (!rc) rc = b2_frame_w_restage(f);
  if (!rc) rc = b2_frame_csum_stage(f);
  if (rc < 0) return b2_context(rc, "commit");
  if (f->info.layout == B2_LAYOUT_SPARSE) return commit_sparse(f);
  /* An empty frame keeps its trailer right after the header, and a header
   * of another size moves every chunk: both rewrite the file. */
  if (f->info.nbytes == 0 || w->header_resized ||
      (w->header_dirty && f->info.header_size > B2_FRAME_SECTOR))
    return b2_frame_rewrite(f);
  return commit_contiguous(f);
}

int b2_frame_commit_locked(b2_frame *f) {
  if (!f->w->dirty) return 0;
  int rc = b2_frame_lk_commit_begin(f); /* other lockers wait, then see the change */
  if (rc < 0) return rc;
  rc = commit_dispatch(f);
  /* Whichever step failed, a sync may have: rewrite before the next. */
  if (rc < 0) f->w->sync_failed = 1;
  else b2_frame_csum_seal(f); /* the time its checksums vouch for */
  b2_frame_lk_commit_end(f);
  return rc;
}

int b2_frame_set_mtime(b2_frame *f, const struct timespec *t) {
  if (!t) return b2_fail(B2_E_INVAL, "frame time: no time");
  int rc = b2_frame_w_begin(f);
  if (rc < 0) return rc;
  rc = b2_frame_csum_restamp(f, t);
  b2_frame_w_end(f);
  return rc;
}

int b2_frame_commit_at(b2_frame *f, const struct timespec *t) {
  int rc = b2_frame_w_begin(f);
  if (rc < 0) return rc;
  rc = t ? b2_frame_csum_commit_at(f, t) : b2_frame_commit_locked(f);
  b2_frame_w_end(f);
  return rc;
}

int b2_frame_commit(b2_frame *f) { return b2_frame_commit_at(f, NULL); }
