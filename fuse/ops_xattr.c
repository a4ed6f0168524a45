/*
 * ops_xattr.c - extended attributes.  A frame answers only its own
 * "user.b2.*" attributes (b2_file_xattr_list/get); other names get ENODATA
 * without opening the frame (ls asks every file for security.* ones).
 * Setting user.b2.codec, clevel, filters, typesize, chunksize, blocksize or
 * layout before a frame's first write recreates it with that parameter
 * (b2_file_set_param; the inode is rebound to the new file); the
 * user.b2.vlmeta.NAME attributes (each one msgpack object, as python-blosc2
 * reads them: else EINVAL) can be set and removed at any time (each
 * change is committed at once, the frame keeping its modification time),
 * but for the engine's chunk checksums
 * (b2fs.crc32c: setting or removing them changes nothing).
 * Once data is written, a parameter set to a good value succeeds and
 * changes nothing (copies set their source's after the data: cp -a,
 * rsync -X, also between two mounts or back from a plain backup), and so
 * does setting an attribute that follows from the data (sizes, kind,
 * shape, dtype, the metalayer marking the kind: b2_file_xattr_derived).
 * user.b2.meta.NAME sets a fixed-length metalayer (python-blosc2's
 * `meta`; one msgpack object, as for vlmeta) at any time, but for those
 * that mark the kind; removing any describing attribute, a fixed
 * metalayer included, changes nothing and succeeds (rsync -X removes what
 * its source lacks; fixed metalayers cannot be removed).
 * Other user.* attributes of a frame are the user's own: kept on its
 * source entry (the frame file, a sparse frame's directory) and carried
 * over when a rewrite replaces that file (b2fs_copy_attrs).
 * Plain files and directories show and take their source attributes;
 * symlinks none.  Frames shown raw (python-blosc2 objects that are not
 * data) add user.b2.kind.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "b2fs.h"

#define FRAME_XATTR_PREFIX "user.b2."

/* Reply to a listxattr/getxattr of `n` bytes (or error) in buf. */
static void reply_sized(fuse_req_t req, size_t size, ssize_t n, const char *buf) {
  if (n < 0)
    fuse_reply_err(req, (int)-n);
  else if (size == 0)
    fuse_reply_xattr(req, (size_t)n);
  else
    fuse_reply_buf(req, buf, (size_t)n);
}

/* Errno for an engine code from the xattr calls. */
static int xattr_errno(ssize_t rc) {
  if (rc == B2_E_RANGE) return ERANGE;
  if (rc == B2_E_NOENT) return ENODATA;
  return b2fs_errno((int)rc);
}

/* May we pass attribute calls through to the source entry? */
static int plain_ok(b2fs_inode *in) {
  struct stat st;
  if (fstatat(in->fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) return 0;
  return !S_ISLNK(st.st_mode); /* a symlink's path would reach its target */
}

/* A frame shown raw because it holds a python-blosc2 object other than
 * data (b2_ns_holds_data) names its kind in user.b2.kind; NULL for others. */
#define KIND_XATTR FRAME_XATTR_PREFIX "kind"
static const char *raw_kind(b2fs_inode *in) {
  char path[64];
  int k = b2_frame_kind_at(AT_FDCWD, b2fs_fd_path(in->fd, path, sizeof path));
  return k >= 0 && k != B2_KIND_NONE && !b2_frame_kind_is_data(k) ? b2_frame_kind_name(k) : NULL;
}

/* Append the names of the user's own attributes (b2_ns_own_xattr) of the
 * source entry at descriptor fd to the n bytes of names in buf (size 0:
 * only count): the new length, or -ERANGE. */
static ssize_t add_own_at(int fd, char *buf, size_t size, ssize_t n) {
  size_t m = 0;
  char *names = b2fs_own_xattr_names(fd, &m);
  if (size && (size_t)n + m > size) n = -ERANGE;
  else if (size && m) memcpy(buf + n, names, m);
  if (n >= 0) n += (ssize_t)m;
  free(names);
  return n;
}

/* The same for frame inode `in` (its source entry). */
static ssize_t add_own(b2fs_inode *in, char *buf, size_t size, ssize_t n) {
  return plain_ok(in) ? add_own_at(in->fd, buf, size, n) : n;
}

/* An attribute call on the directory in SOURCE of a .b2d's group (the
 * user's own attributes, b2_ns_own_xattr): op 'g' getxattr into buf, 's'
 * setxattr of value, 'r' removexattr.  Bytes or 0, or -errno (ENODATA for
 * a group without a directory; EROFS for a value, a .b2z or a .b2e). */
static ssize_t store_own(b2fs_inode *in, char op, const char *name, char *buf,
                         const char *value, size_t size, int flags) {
  int fd = b2fs_store_dir(in, op == 's');
  if (fd < 0) return fd == -ENOENT ? -ENODATA : fd;
  char path[64];
  b2fs_fd_path(fd, path, sizeof path);
  ssize_t n = op == 'g'   ? getxattr(path, name, buf, size)
              : op == 's' ? setxattr(path, name, value, size, flags)
                          : removexattr(path, name);
  n = n < 0 ? -errno : n;
  close(fd);
  return n;
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  b2fs_inode *in = b2fs_inode_get(ino);
  if (b2fs_stale_reply(req, in, 1)) return;
  char *buf = size ? b2fs_tls_buf(size) : NULL;
  if (size && !buf) {
    fuse_reply_err(req, ENOMEM);
    return;
  }
  if (in->kind == B2_NS_STORE) { /* python's attributes, then the user's own */
    ssize_t n = b2fs_store_xattr(in, NULL, buf, size);
    if (n == -ENODATA) n = 0;
    int fd = n >= 0 ? b2fs_store_dir(in, 0) : -1;
    if (fd >= 0) {
      n = add_own_at(fd, buf, size, n);
      close(fd);
    }
    reply_sized(req, size, n, buf);
    return;
  }
  if (in->kind == B2_NS_PLAIN) {
    char path[64];
    if (!plain_ok(in)) {
      reply_sized(req, size, 0, buf);
      return;
    }
    ssize_t n = listxattr(b2fs_fd_path(in->fd, path, sizeof path), buf, size);
    if (n >= 0 && raw_kind(in)) {
      if (size && (size_t)n + sizeof KIND_XATTR > size) n = -ERANGE;
      else if (size) memcpy(buf + n, KIND_XATTR, sizeof KIND_XATTR);
      if (n >= 0) n += (ssize_t)sizeof KIND_XATTR;
    } else if (n < 0) {
      n = -errno;
    }
    reply_sized(req, size, n, buf);
    return;
  }
  b2fs_handle *h;
  ssize_t n = 0;
  if (b2fs_frame_peek(in, &h) == 0) { /* an unreadable frame has none */
    b2_file *f = b2fs_use(h);
    n = f ? b2_file_xattr_list(f, buf, size) : 0;
    b2fs_unuse(h);
    b2fs_frame_release(in, h);
  }
  reply_sized(req, size, n < 0 ? -xattr_errno(n) : add_own(in, buf, size, n), buf);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
                        size_t size) {
  b2fs_inode *in = b2fs_inode_get(ino);
  if (b2fs_stale_reply(req, in, 1)) return;
  char *buf = size ? b2fs_tls_buf(size) : NULL;
  if (size && !buf) {
    fuse_reply_err(req, ENOMEM);
    return;
  }
  if (in->kind == B2_NS_STORE) {
    reply_sized(req, size,
                b2_ns_own_xattr(name) ? store_own(in, 'g', name, buf, NULL, size, 0)
                : strncmp(name, FRAME_XATTR_PREFIX, strlen(FRAME_XATTR_PREFIX))
                    ? -ENODATA
                    : b2fs_store_xattr(in, name, buf, size),
                buf);
    return;
  }
  if (in->kind == B2_NS_PLAIN || b2_ns_own_xattr(name)) { /* the source entry's */
    char path[64];
    if (!plain_ok(in)) {
      fuse_reply_err(req, ENODATA);
      return;
    }
    const char *kind = strcmp(name, KIND_XATTR) == 0 ? raw_kind(in) : NULL;
    if (kind) {
      size_t kl = strlen(kind);
      if (size && kl > size) {
        fuse_reply_err(req, ERANGE);
      } else {
        if (size) memcpy(buf, kind, kl);
        reply_sized(req, size, (ssize_t)kl, buf);
      }
      return;
    }
    ssize_t n = getxattr(b2fs_fd_path(in->fd, path, sizeof path), name, buf, size);
    reply_sized(req, size, n < 0 ? -errno : n, buf);
    return;
  }
  if (strncmp(name, FRAME_XATTR_PREFIX, strlen(FRAME_XATTR_PREFIX)) != 0) {
    fuse_reply_err(req, ENODATA);
    return;
  }
  b2fs_handle *h;
  int rc = b2fs_frame_peek(in, &h);
  if (rc < 0) {
    fuse_reply_err(req, ENODATA);
    return;
  }
  b2_file *f = b2fs_use(h);
  ssize_t n = f ? b2_file_xattr_get(f, name, buf, size) : B2_E_NOENT;
  b2fs_unuse(h);
  b2fs_frame_release(in, h);
  reply_sized(req, size, n < 0 ? -xattr_errno(n) : n, buf);
}

/* ---- changing attributes ------------------------------------------------- */

#define VLMETA_PREFIX FRAME_XATTR_PREFIX "vlmeta."

static const char *const param_keys[] = {"codec",     "clevel",    "filters",    "typesize",
                                         "chunksize", "blocksize", "layout",     "chunkshape",
                                         "blockshape"};

/* The engine's chunk checksums, as a vlmetalayer attribute. */
static int is_csum_vlmeta(const char *name) {
  size_t n = strlen(VLMETA_PREFIX);
  return strncmp(name, VLMETA_PREFIX, n) == 0 && strcmp(name + n, B2_FRAME_CSUM_VLMETA) == 0;
}

/* A variable-length metalayer the user may change (the engine's chunk
 * checksums are its own). */
static int is_user_vlmeta(const char *name) {
  return strncmp(name, VLMETA_PREFIX, strlen(VLMETA_PREFIX)) == 0 &&
         name[strlen(VLMETA_PREFIX)] && !is_csum_vlmeta(name);
}

#define META_PREFIX FRAME_XATTR_PREFIX "meta."

/* A fixed-length metalayer the user may set (python-blosc2's `meta`):
 * not one that marks the frame's kind (`b2nd`, ...). */
static int is_user_meta(const char *name) {
  return strncmp(name, META_PREFIX, strlen(META_PREFIX)) == 0 && name[strlen(META_PREFIX)] &&
         !b2_file_xattr_derived(name);
}

static int is_param(const char *key) {
  for (size_t i = 0; i < sizeof param_keys / sizeof param_keys[0]; i++)
    if (!strcmp(key, param_keys[i])) return 1;
  return 0;
}

/* A new creation parameter for an empty frame (or a new .npy file): the
 * engine creates the frame anew, so the inode moves to the new file (owner,
 * mode of the old one kept: b2fs_frame_renewed). */
static int set_param(b2fs_inode *in, const char *key, const char *value, size_t size) {
  char *val = malloc(size + 1);
  if (!val) return -ENOMEM;
  memcpy(val, value, size);
  val[size] = 0;
  b2fs_handle *h;
  int rc = b2fs_frame_open_rw(in, &h, NULL);
  if (rc < 0) {
    free(val);
    return rc;
  }
  uint64_t g0 = b2fs_frame_gen(h);
  pthread_mutex_lock(&in->nslock); /* no rename meanwhile: recreated at its home */
  b2_file *f = b2fs_use(h);
  if (rc == 0 && !f) rc = -EIO;
  if (rc == 0) {
    int brc = b2_file_set_param(f, key, val);
    /* B2_E_BUSY: a good value after the data, as a copy (rsync -X, cp -a)
     * sets its source's: the frame keeps the parameters it was made with. */
    if (brc < 0 && brc != B2_E_BUSY) {
      if (brc != B2_E_INVAL) b2fs_frame_log(in, h, "set parameter", brc);
      rc = -b2fs_werrno(brc);
    }
  }
  b2fs_unuse(h);
  pthread_mutex_unlock(&in->nslock);
  /* Even after a failure: the frame may have been recreated. */
  b2fs_frame_renewed(in, h, g0);
  int rc2 = b2fs_frame_release(in, h);
  free(val);
  return rc ? rc : rc2;
}

/* Set (value != NULL) or remove a variable-length metalayer (fixed: set
 * a fixed-length one, python-blosc2's `meta`, which cannot be removed),
 * committed at once.  Through the open writer when there is one (cp -a
 * sets attributes before it closes); else .npy views get a writable
 * logical handle of their own. */
static int set_meta(b2fs_inode *in, int fixed, const char *name, const char *value, size_t size,
                    int flags) {
  b2fs_handle *h = NULL;
  b2_file *own = NULL;
  int rc = 0;
  uint64_t g0 = 0;
  if (value && b2_frame_vlmeta_check(value, size) < 0) {
    b2fs_log("%s: %s", name, b2_last_detail());
    return -EINVAL;
  }
  if (in->kind == B2_NS_LOGICAL || b2fs_frame_writing(in)) {
    rc = b2fs_frame_open_rw(in, &h, NULL);
    if (rc < 0) return rc;
    g0 = b2fs_frame_gen(h);
  } else {
    int brc = b2fs_frame_open_own(in, B2_VIEW_LOGICAL, &own);
    if (brc < 0) return brc == B2_E_UNSUPPORTED ? -EROFS : -b2fs_errno(brc);
  }
  b2_file *f = own ? own : b2fs_use(h);
  if (!f) {
    b2fs_unuse(h);
    b2fs_frame_release(in, h);
    return -EIO;
  }
  /* An attribute changes the status time only (as any file system's):
   * data written before it is committed first, with its own time (a new
   * .npy file's held header settles: the frame may be made anew), and the
   * attribute's commit keeps that time (b2_file_set_mtime), so that
   * `cp -a`, which sets times before attributes, keeps them. */
  struct stat st;
  int brc = b2_file_flush(f);
  if (h) b2fs_frame_note(f);
  if (brc == 0) brc = b2_file_frame_now(f, &st);
  b2_frame *fr = b2_file_frame(f);
  if (brc == 0 && (!value || (flags & (XATTR_CREATE | XATTR_REPLACE)))) {
    uint8_t *old = NULL;
    const uint8_t *cur;
    size_t len;
    int have = fixed ? b2_frame_meta_get(fr, name, &cur, &len) == 0
                     : b2_frame_vlmeta_get(fr, name, &old, &len) == 0;
    free(old);
    if (have && (flags & XATTR_CREATE)) rc = -EEXIST;
    if (!have && (!value || (flags & XATTR_REPLACE))) rc = -ENODATA;
  }
  if (rc == 0) {
    if (brc == 0)
      brc = fixed   ? b2_frame_meta_set(fr, name, value, size)
            : value ? b2_frame_vlmeta_set(fr, name, value, size)
                    : b2_frame_vlmeta_del(fr, name);
    if (brc == 0) brc = b2_file_set_mtime(f, &st.st_mtim);
    if (brc < 0) rc = brc == B2_E_NOENT ? -ENODATA : -b2fs_werrno(brc);
  }
  if (own) {
    int crc = b2_file_close(own);
    if (rc == 0 && crc < 0) rc = -b2fs_werrno(crc);
  } else {
    b2fs_unuse(h);
    b2fs_frame_renewed(in, h, g0);
    b2fs_frame_follow(in);
    int rc2 = b2fs_frame_release(in, h);
    if (rc == 0) rc = rc2;
  }
  return rc;
}

/* Does frame attribute `name` of `in` read as `value` already? */
static int holds_value(b2fs_inode *in, const char *name, const char *value, size_t size) {
  b2fs_handle *h;
  if (b2fs_frame_peek(in, &h) < 0) return 0;
  char *buf = malloc(size + 1);
  b2_file *f = b2fs_use(h);
  ssize_t n = f && buf ? b2_file_xattr_get(f, name, buf, size + 1) : B2_E_NOMEM;
  b2fs_unuse(h);
  b2fs_frame_release(in, h);
  int same = n == (ssize_t)size && (size == 0 || memcmp(buf, value, size) == 0);
  free(buf);
  return same;
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
                        const char *value, size_t size, int flags) {
  b2fs_inode *in = b2fs_inode_get(ino);
  if (b2fs_stale_reply(req, in, 1)) return;
  int rc;
  if (in->kind == B2_NS_STORE) { /* python's attributes are read-only */
    rc = b2_ns_own_xattr(name) ? (int)store_own(in, 's', name, NULL, value, size, flags)
         : strncmp(name, FRAME_XATTR_PREFIX, strlen(FRAME_XATTR_PREFIX)) ? -ENOTSUP
                                                                          : -EROFS;
  } else if (in->kind == B2_NS_PLAIN || b2_ns_own_xattr(name)) { /* the source entry's */
    char path[64];
    if (!plain_ok(in))
      rc = -EPERM;
    else
      rc = setxattr(b2fs_fd_path(in->fd, path, sizeof path), name, value, size, flags) < 0
               ? -errno
               : 0;
  } else if (strncmp(name, FRAME_XATTR_PREFIX, strlen(FRAME_XATTR_PREFIX)) != 0) {
    rc = -ENOTSUP;
  } else if (is_user_vlmeta(name)) {
    rc = set_meta(in, 0, name + strlen(VLMETA_PREFIX), value, size, flags);
  } else if (is_user_meta(name)) {
    rc = holds_value(in, name, value, size) ? 0
                                            : set_meta(in, 1, name + strlen(META_PREFIX), value, size, flags);
  } else if (is_csum_vlmeta(name) || b2_file_xattr_derived(name) ||
             holds_value(in, name, value, size)) {
    /* `cp -a`, `rsync -X` and `mv` between frames copy every attribute:
     * one that already holds the value, another frame's checksums (each
     * frame keeps those of its own chunks, stamped with its own time) or
     * what follows from its data (its sizes, kind, shape, dtype: the
     * copy's data gives this frame its own) change nothing. */
    rc = 0;
  } else if (is_param(name + strlen(FRAME_XATTR_PREFIX))) {
    /* A store's values are files (python-blosc2 finds no other): an
     * empty one stays contiguous (EINVAL); once written, a frame keeps
     * its parameters whatever a copy sets (as set_param's). */
    struct stat st;
    int sparse = atomic_load(&in->in_store) && !strcmp(name, FRAME_XATTR_PREFIX "layout") &&
                 !(size == 10 && !memcmp(value, "contiguous", 10));
    rc = !sparse                                 ? set_param(in, name + strlen(FRAME_XATTR_PREFIX), value, size)
         : b2fs_stat(in, &st) == 0 && st.st_size ? 0
                                                 : -EINVAL;
  } else {
    rc = -EPERM; /* computed or fixed attributes */
  }
  fuse_reply_err(req, -rc);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name) {
  b2fs_inode *in = b2fs_inode_get(ino);
  if (b2fs_stale_reply(req, in, 1)) return;
  int rc;
  if (in->kind == B2_NS_STORE) {
    rc = b2_ns_own_xattr(name) ? (int)store_own(in, 'r', name, NULL, NULL, 0, 0)
         : strncmp(name, FRAME_XATTR_PREFIX, strlen(FRAME_XATTR_PREFIX)) ? -ENODATA
                                                                          : -EROFS;
  } else if (in->kind == B2_NS_PLAIN || b2_ns_own_xattr(name)) { /* the source entry's */
    char path[64];
    if (!plain_ok(in))
      rc = -ENODATA;
    else
      rc = removexattr(b2fs_fd_path(in->fd, path, sizeof path), name) < 0 ? -errno : 0;
  } else if (is_user_vlmeta(name)) {
    rc = set_meta(in, 0, name + strlen(VLMETA_PREFIX), NULL, 0, 0);
  } else if (!strncmp(name, FRAME_XATTR_PREFIX, strlen(FRAME_XATTR_PREFIX))) {
    /* Attributes that describe the frame stay; removing one changes
     * nothing (rsync -X removes those its source lacks). */
    rc = 0;
  } else {
    rc = -ENODATA;
  }
  fuse_reply_err(req, -rc);
}

void b2fs_ops_xattr(struct fuse_lowlevel_ops *ops) {
  ops->listxattr = op_listxattr;
  ops->getxattr = op_getxattr;
  ops->setxattr = op_setxattr;
  ops->removexattr = op_removexattr;
}
