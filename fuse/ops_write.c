/*
 * ops_write.c - operations that would change the tree.  The mount is
 * read-only until the write path lands: each of them answers EROFS.
 */
#include <errno.h>

#include "b2fs.h"

static void rofs(fuse_req_t req) { fuse_reply_err(req, EROFS); }

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
                       int to_set, struct fuse_file_info *fi) {
  (void)ino, (void)attr, (void)to_set, (void)fi;
  rofs(req);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
                     mode_t mode, dev_t rdev) {
  (void)parent, (void)name, (void)mode, (void)rdev;
  rofs(req);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
                     mode_t mode) {
  (void)parent, (void)name, (void)mode;
  rofs(req);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name) {
  (void)parent, (void)name;
  rofs(req);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
                       const char *name) {
  (void)link, (void)parent, (void)name;
  rofs(req);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
                      fuse_ino_t newparent, const char *newname,
                      unsigned int flags) {
  (void)parent, (void)name, (void)newparent, (void)newname, (void)flags;
  rofs(req);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
                    const char *newname) {
  (void)ino, (void)newparent, (void)newname;
  rofs(req);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
                      mode_t mode, struct fuse_file_info *fi) {
  (void)parent, (void)name, (void)mode, (void)fi;
  rofs(req);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
                     size_t size, off_t off, struct fuse_file_info *fi) {
  (void)ino, (void)buf, (void)size, (void)off, (void)fi;
  rofs(req);
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
                        const char *value, size_t size, int flags) {
  (void)ino, (void)name, (void)value, (void)size, (void)flags;
  rofs(req);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name) {
  (void)ino, (void)name;
  rofs(req);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset,
                         off_t length, struct fuse_file_info *fi) {
  (void)ino, (void)mode, (void)offset, (void)length, (void)fi;
  rofs(req);
}

void b2fs_ops_write(struct fuse_lowlevel_ops *ops) {
  ops->setattr = op_setattr;
  ops->mknod = op_mknod;
  ops->mkdir = op_mkdir;
  ops->unlink = op_unlink;
  ops->rmdir = op_unlink;
  ops->symlink = op_symlink;
  ops->rename = op_rename;
  ops->link = op_link;
  ops->create = op_create;
  ops->write = op_write;
  ops->setxattr = op_setxattr;
  ops->removexattr = op_removexattr;
  ops->fallocate = op_fallocate;
}
