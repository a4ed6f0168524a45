/* io.c - positioned reads of a frame's file (b2_io_pread: pread only, so
 * reads from several threads never disturb one another), and the image of
 * a small frame: the whole file read at once at open, so that opening it
 * and reading its chunk take one read of the file instead of eight. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/fileio.h"
#include "frame/frame_impl.h"

void b2_frame_image_load(b2_frame *f) {
  if (f->file_size <= 0 || f->file_size > B2_FRAME_IMAGE_MAX || f->fd < 0) return;
  uint8_t *img = malloc((size_t)f->file_size);
  if (!img) return;
  if (b2_io_pread(f->fd, img, (size_t)f->file_size, f->base) < 0) {
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

/* Whether a read of fd may be served from f's image. */
static int imaged(const b2_frame *f, int fd) {
  return f && fd == f->fd && atomic_load(&f->image);
}

int b2_frame_fpread_par(const b2_frame *f, int fd, void *buf, size_t n, int64_t off,
                        int last, struct b2_pool *pool) {
  if (pool && !imaged(f, fd))
    return b2_io_pread_par(fd, buf, n, off, pool, B2_FRAME_PAR_LINGER_US);
  return b2_frame_fpread(f, fd, buf, n, off, last);
}

int b2_frame_fpread(const b2_frame *f, int fd, void *buf, size_t n,
                    int64_t off, int last) {
  if (imaged(f, fd)) {
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
  return b2_io_pread(fd, buf, n, off);
}
