/*
 * dev.c - how the daemon reads and writes the FUSE device: plain read,
 * writev and splice, given to libfuse as its custom I/O, so that one
 * word can be added to the kernel's INIT reply that libfuse 3.14 has no
 * name for.  With -o direct_io, reads of frames bypass the page cache
 * (FOPEN_DIRECT_IO); the kernel then refuses shared mappings of those
 * files unless the reply to INIT carries FUSE_DIRECT_IO_ALLOW_MMAP
 * (kernel 6.6 and later), which maps them through the page cache.
 *
 * Protocol facts used (linux/fuse.h): a request starts with a 40-byte
 * header (len u32, opcode u32, unique u64, ...), INIT's arguments follow
 * it (major, minor, max_readahead, flags, flags2: u32 each); a reply
 * starts with a 16-byte header (len u32, error i32, unique u64), and
 * INIT's reply holds flags at byte 12 and flags2 at byte 32.  flags2 is
 * read only when flags has FUSE_INIT_EXT (bit 30).
 */
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "b2fs.h"

enum {
  OP_INIT = 26,
  IN_HEADER = 40,
  INIT_EXT = 1u << 30,               /* in flags */
  DIRECT_IO_ALLOW_MMAP = 1u << 4,    /* in flags2: bit 36 of the 64 */
  INIT_OUT_FLAGS = 12,
  INIT_OUT_FLAGS2 = 32,
};

static _Atomic uint64_t init_unique; /* the INIT request's, until answered */
static _Atomic int allow_mmap;       /* the kernel offered it */

static uint32_t get32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

static ssize_t dev_read(int fd, void *buf, size_t len, void *userdata) {
  (void)userdata;
  ssize_t n = read(fd, buf, len);
  const uint8_t *p = buf;
  if (n >= IN_HEADER + 20 && get32(p + 4) == OP_INIT) {
    uint64_t unique;
    memcpy(&unique, p + 8, 8);
    uint32_t flags = get32(p + IN_HEADER + 12), flags2 = get32(p + IN_HEADER + 16);
    atomic_store(&allow_mmap, (flags & INIT_EXT) && (flags2 & DIRECT_IO_ALLOW_MMAP));
    atomic_store(&init_unique, unique);
  }
  return n;
}

static ssize_t dev_writev(int fd, struct iovec *iov, int count, void *userdata) {
  (void)userdata;
  uint64_t want = atomic_load(&init_unique);
  uint8_t out[64];
  if (want && count == 2 && iov[0].iov_len >= 16 && iov[1].iov_len >= INIT_OUT_FLAGS2 + 4 &&
      iov[1].iov_len <= sizeof out) {
    uint64_t unique;
    int32_t error;
    memcpy(&unique, (uint8_t *)iov[0].iov_base + 8, 8);
    memcpy(&error, (uint8_t *)iov[0].iov_base + 4, 4);
    if (unique == want) {
      atomic_store(&init_unique, 0);
      memcpy(out, iov[1].iov_base, iov[1].iov_len);
      if (!error && b2fs_g.opts.direct_io && atomic_load(&allow_mmap) &&
          (get32(out + INIT_OUT_FLAGS) & INIT_EXT)) {
        uint32_t flags2 = get32(out + INIT_OUT_FLAGS2) | DIRECT_IO_ALLOW_MMAP;
        memcpy(out + INIT_OUT_FLAGS2, &flags2, 4);
        struct iovec v[2] = {iov[0], {out, iov[1].iov_len}};
        return writev(fd, v, 2);
      }
    }
  }
  return writev(fd, iov, count);
}

static ssize_t dev_splice_receive(int fdin, off_t *offin, int fdout, off_t *offout,
                                  size_t len, unsigned int flags, void *userdata) {
  (void)userdata;
  return splice(fdin, offin, fdout, offout, len, flags);
}

static ssize_t dev_splice_send(int fdin, off_t *offin, int fdout, off_t *offout,
                               size_t len, unsigned int flags, void *userdata) {
  (void)userdata;
  return splice(fdin, offin, fdout, offout, len, flags);
}

int b2fs_dev_install(struct fuse_session *se) {
  static const struct fuse_custom_io io = {
      .writev = dev_writev,
      .read = dev_read,
      .splice_receive = dev_splice_receive,
      .splice_send = dev_splice_send,
  };
  return fuse_session_custom_io(se, &io, fuse_session_fd(se));
}

int b2fs_dev_mmap_allowed(void) { return atomic_load(&allow_mmap); }
