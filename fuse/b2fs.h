/*
 * b2fs.h - internals shared by the files of the b2fs FUSE daemon.
 *
 * The daemon mirrors a SOURCE directory.  Every entry it has told the
 * kernel about is a b2fs_inode holding an O_PATH descriptor of the source
 * entry; inodes are keyed by (st_dev, st_ino, kind) so that one source
 * file seen both as a frame and as plain bytes (hard links) gives two
 * inodes.  Frames are read through one shared b2_file per inode
 * (b2fs_handle, refcounted by the opens using it).
 */
#ifndef B2FS_H
#define B2FS_H

#define FUSE_USE_VERSION 312

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "b2_error.h"
#include "b2_file.h"
#include "names.h"

#ifndef B2FS_VERSION
#define B2FS_VERSION "0.1.0"
#endif

/* Name of the index file that makes a directory a sparse frame. */
#define B2FS_SPARSE_INDEX "chunks.b2frame"

/* ---- options (opts.c) ---------------------------------------------------- */
typedef struct b2fs_opts {
  char *source;          /* SOURCE as given */
  b2_env_opts env;       /* cache_size, readahead, nthreads, dirty_max and
                            the parameters of new frames */
  int verify;            /* -o verify=on|off */
  double timeout;        /* -o timeout= (seconds of attr/entry caching) */
  int idle_frames;       /* -o idle_frames= (-1: from the fd limit) */
  int no_default_perms;  /* -o no_default_permissions */
  int has_fsname;        /* the user gave -o fsname= */
  int has_max_read;      /* the user gave -o max_read= */
  int show_help;
  int show_version;
} b2fs_opts;

/* Parse our options out of args (SOURCE removed, the rest left for FUSE).
 * Returns 0, or -1 after printing why. */
int b2fs_opts_parse(struct fuse_args *args, b2fs_opts *o);
void b2fs_opts_help(const char *prog);
void b2fs_opts_free(b2fs_opts *o);

/* ---- log (log.c) --------------------------------------------------------- */
/* One line to stderr (foreground) or syslog (background). */
void b2fs_log_init(int foreground);
void b2fs_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- inodes (inode.c) ---------------------------------------------------- */
/* Signature of a frame's source: changes when the frame is rewritten. */
typedef struct b2fs_sig {
  int64_t size;
  struct timespec mtime, ctime;
  ino_t ino;                     /* of the frame file / chunks.b2frame */
  struct timespec dmtime, dctime; /* the sparse directory's own times */
} b2fs_sig;

typedef struct b2fs_handle {
  b2_file *file;
  b2fs_sig sig;
  int refs;                      /* users, +1 while current (inode lock) */
  pthread_mutex_t errlock;
  uint64_t logged[8];            /* hashes of the last details logged */
  unsigned nlogged;
} b2fs_handle;

typedef struct b2fs_inode {
  int fd;                        /* O_PATH descriptor of the source entry */
  dev_t dev;
  ino_t ino;
  int kind;                      /* B2FS_KIND_* (PLAIN: passed through) */
  int sparse;                    /* a frame directory shown as a file */
  uint64_t nlookup;              /* under the table lock */
  struct b2fs_inode *next;       /* hash chain */

  pthread_mutex_t lock;          /* guards the fields below */
  b2fs_handle *cur;              /* handle of the frame's current version */
  int attr_valid;                /* lsize/blocks computed for attr_sig */
  b2fs_sig attr_sig;
  int64_t lsize;                 /* size of the view, 0 if unreadable */
  blkcnt_t blocks;               /* disk use of a sparse frame */
  int open_valid;                /* open_sig holds the last open's sig */
  b2fs_sig open_sig;
} b2fs_inode;

typedef struct b2fs {
  b2fs_opts opts;
  b2_env *env;
  b2fs_inode root;
  pthread_mutex_t table_lock;
  b2fs_inode **buckets;
  size_t nbuckets, count;
} b2fs;

extern b2fs b2fs_g;

int b2fs_table_init(void);
void b2fs_table_destroy(void);
b2fs_inode *b2fs_inode_get(fuse_ino_t ino);
fuse_ino_t b2fs_inode_id(b2fs_inode *in);
/* Find or add the inode for an O_PATH fd (taken over: closed if an inode
 * already exists), counting one lookup.  NULL when out of memory. */
b2fs_inode *b2fs_inode_ref(int fd, const struct stat *st, int kind, int sparse);
void b2fs_inode_forget(b2fs_inode *in, uint64_t n);

/* "/proc/self/fd/N" of the inode's descriptor (buf >= 32 bytes). */
const char *b2fs_fd_path(int fd, char *buf, size_t cap);

/* ---- frames (frame.c) and their shared handles (handle.c) -------------- */
/* Is the directory entry `name` under dirfd a frame (suffix + file or dir
 * holding chunks.b2frame)?  `st` is its lstat.  1, 0. */
int b2fs_is_frame(int dirfd, const char *name, const struct stat *st);
/* Does the directory at fd hold a regular chunks.b2frame?  1, 0. */
int b2fs_holds_sparse_index(int fd);
/* Probe for names.c against a live directory (ctx: int *dirfd). */
int b2fs_probe_dir(void *ctx, const char *name);

/* Attributes shown for an inode (frames: view size, file mode, disk use). */
int b2fs_stat(b2fs_inode *in, struct stat *st);

/* Open / release the shared frame handle; *keep_cache tells whether the
 * kernel may keep its cached pages.  Negative errno on failure. */
int b2fs_frame_open(b2fs_inode *in, b2fs_handle **h, int *keep_cache);
void b2fs_frame_release(b2fs_inode *in, b2fs_handle *h);
/* The same for metadata only (xattrs, no page-cache decision); pass it
 * back to b2fs_frame_release. */
int b2fs_frame_peek(b2fs_inode *in, b2fs_handle **h);
/* The inode is going away: let go of its current handle (no user left). */
void b2fs_frame_forget(b2fs_inode *in);
/* Most unused frame handles kept open for later opens. */
void b2fs_frame_set_idle_max(int n);
/* Log a failure on a handle once per distinct detail (of the last 8). */
void b2fs_frame_log(b2fs_inode *in, b2fs_handle *h, const char *what, int rc);
/* Source signature of a frame inode from the fstat of its entry. */
int b2fs_sig_of(b2fs_inode *in, const struct stat *st, b2fs_sig *sig);
int b2fs_sig_eq(const b2fs_sig *a, const b2fs_sig *b);
/* Open the frame of a frame inode with its view (handle.c). */
int b2fs_open_view(b2fs_inode *in, b2_file **out);
/* Source path of an inode, for messages. */
const char *b2fs_src_path(b2fs_inode *in, char *buf, size_t cap);
/* Plain-file keep_cache decision from a fresh fstat. */
int b2fs_plain_keep_cache(b2fs_inode *in, const struct stat *st);
/* errno for an engine code from a read or an open. */
int b2fs_errno(int rc);

/* A per-thread buffer of at least n bytes (kept for the thread's life). */
void *b2fs_tls_buf(size_t n);

/* ---- operations ---------------------------------------------------------- */
void b2fs_ops_read(struct fuse_lowlevel_ops *ops);
void b2fs_ops_dir(struct fuse_lowlevel_ops *ops);
void b2fs_ops_xattr(struct fuse_lowlevel_ops *ops);
void b2fs_ops_write(struct fuse_lowlevel_ops *ops);

#endif /* B2FS_H */
