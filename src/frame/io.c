/* io.c - positioned reads for frames (pread only, so reads from several
 * threads never disturb one another), and the image of a small frame:
 * the whole file read at once at open, so that opening it and reading
 * its chunk take one read of the file instead of eight. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "b2_error.h"
#include "frame/frame_impl.h"

int b2_frame_pread(int fd, void *buf, size_t n, int64_t off) {
  uint8_t *p = buf;
  size_t done = 0;
  if (off < 0) return b2_fail(B2_E_RANGE, "read at negative offset %lld",
                              (long long)off);
  while (done < n) {
    ssize_t got = pread(fd, p + done, n - done, (off_t)(off + (int64_t)done));
    if (got < 0) {
      if (errno == EINTR) continue;
      return b2_fail(b2_from_errno(errno), "read of %zu bytes at %lld: %s", n,
                     (long long)off, strerror(errno));
    }
    if (got == 0)
      return b2_fail(B2_E_TRUNCATED, "file ends at %lld, inside the %zu "
                     "bytes read at %lld", (long long)(off + (int64_t)done), n,
                     (long long)off);
    done += (size_t)got;
  }
  return 0;
}

void b2_frame_image_load(b2_frame *f) {
  if (f->file_size <= 0 || f->file_size > B2_FRAME_IMAGE_MAX || f->fd < 0) return;
  uint8_t *img = malloc((size_t)f->file_size);
  if (!img) return;
  if (b2_frame_pread(f->fd, img, (size_t)f->file_size, f->base) < 0) {
    free(img); /* the reads that follow meet the problem and name it */
    return;
  }
  pthread_mutex_init(&f->img_mu, NULL);
  atomic_store(&f->image, img);
}

void b2_frame_image_drop(b2_frame *f) {
  uint8_t *img = atomic_exchange(&f->image, NULL);
  if (img) {
    free(img);
    pthread_mutex_destroy(&f->img_mu);
  }
}

int b2_frame_fpread(const b2_frame *f, int fd, void *buf, size_t n,
                    int64_t off, int last) {
  if (f && fd == f->fd && atomic_load(&f->image)) {
    b2_frame *m = (b2_frame *)f; /* the image is not part of what the
                                    frame says: freeing it changes nothing */
    int64_t rel = off - f->base;
    int done = 0;
    pthread_mutex_lock(&m->img_mu);
    uint8_t *img = atomic_load(&m->image);
    if (img && rel >= 0 && rel <= f->file_size && (int64_t)n <= f->file_size - rel) {
      memcpy(buf, img + rel, n);
      done = 1;
      if (last) {
        atomic_store(&m->image, NULL);
        free(img);
      }
    }
    pthread_mutex_unlock(&m->img_mu);
    if (done) return 0;
  }
  return b2_frame_pread(fd, buf, n, off);
}
