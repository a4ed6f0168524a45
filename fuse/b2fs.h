/*
 * b2fs.h - internals shared by the files of the b2fs FUSE daemon.
 *
 * The daemon mirrors a SOURCE directory.  Every entry it has told the
 * kernel about is a b2fs_inode holding an O_PATH descriptor of the source
 * entry; inodes are keyed by (st_dev, st_ino, kind) so that one source
 * file seen both as a frame and as plain bytes (hard links) gives two
 * inodes.  Frames are read and written through one shared b2_file per
 * inode (b2fs_handle, refcounted by the opens using it).  Every frame
 * inode holds a namespace node (b2_ns_node: directory + source name +
 * kind); while a frame is open for writing, that node owns the writable
 * b2_file and one writable handle serves every open of the inode.
 * The files call each other one way, lowest first: log, opts < inode <
 * srcops, frame < handle < whandle < attr < store, sweep < ops_* < main
 * (docs/architecture.md; scripts/fuse-deps checks it).
 */
#ifndef B2FS_H
#define B2FS_H

#define FUSE_USE_VERSION 312

#include <errno.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "b2_error.h"
#include "b2_file.h"
#include "b2_ns.h"

#ifndef B2FS_VERSION
#define B2FS_VERSION "0.1.0"
#endif

/* Largest read and write request, and the I/O size frames ask for. */
#define B2FS_IO_MAX (1u << 20)


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
  int ro;                /* -o ro (left for libfuse too): SOURCE is not
                            changed, not even to remove leftovers */
  unsigned read_ahead_kb; /* -o read_ahead_kb= (0: the kernel's default) */
  int has_read_ahead;     /* the user gave -o read_ahead_kb= */
  int warm;               /* -o warm= (entries warmed ahead; 0: off) */
  int direct_io;          /* -o direct_io: frames read past the page cache */
  unsigned compact_pct;   /* -o compact_pct= (0: never compact) */
  uint64_t compact_min;   /* -o compact_min= (bytes) */
  int show_help;
  int show_version;
} b2fs_opts;

/* Parse our options out of args (SOURCE removed, the rest left for FUSE).
 * Returns 0, or -1 after printing why. */
int b2fs_opts_parse(struct fuse_args *args, b2fs_opts *o);
void b2fs_opts_help(const char *prog);
void b2fs_opts_free(b2fs_opts *o);

/* ---- the FUSE device (dev.c) ---------------------------------------------- */
/* Read and write the session's device through dev.c (after mounting): it
 * also asks the kernel, with -o direct_io, to map those files shared.
 * 0, or libfuse's negative error. */
int b2fs_dev_install(struct fuse_session *se);
/* The kernel maps files opened with direct I/O (Linux 6.6+ offered it). */
int b2fs_dev_mmap_allowed(void);

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
  uint64_t gen;                  /* its .b2lock generation counter (0: none) */
} b2fs_sig;

typedef struct b2fs_handle {
  b2_file *file;
  b2fs_sig sig;
  int refs;                      /* users, +1 while current (inode lock) */
  int writable;                  /* opened for writing (logical view) */
  int warmed;                    /* read-only, idle since warm.c decoded
                                    its first chunks: kept outside the idle
                                    count until used (inode lock) */
  _Atomic int stored;            /* read-only: its bytes were handed to the
                                    kernel's page cache ahead of an open
                                    (b2fs_handle_store_ahead) */
  int wclosing;                  /* a b2fs_wclose of it runs (inode lock):
                                    only one closer at a time */
  _Atomic unsigned wgen;         /* read-only: the inode's wgen when it
                                    was made current (or found current
                                    since) */
  b2_ns_node *node;              /* writable: the namespace node owning
                                    file (b2_ns.h), the inode's node while
                                    current (moved under `use` and the inode
                                    lock) */
  pthread_rwlock_t use;          /* writable: held shared around each use of
                                    file, exclusively to move its home
                                    (b2fs_use) */
  uint64_t cseen;                /* writable: b2_file_committed when the
                                    compactor last looked (its thread
                                    alone) */
  int64_t cfailed;               /* writable: dead bytes when compacting
                                    it while open last failed (same) */
  pthread_mutex_t errlock;
  uint64_t logged[8];            /* hashes of the last details logged */
  unsigned nlogged;
} b2fs_handle;

typedef struct b2fs_inode {
  _Atomic int fd;                /* O_PATH descriptor of the source entry
                                    (replaced when the frame is rewritten) */
  dev_t dev;                     /* dev, ino: written under the table lock
                                    (b2fs_inode_ident reads them) */
  ino_t ino;
  _Atomic(ino_t) shown;          /* st_ino shown: the source's when the
                                    inode was made, kept when a rewrite
                                    binds it to another file (compaction:
                                    sqlite takes a changed number for a
                                    moved database) until the last close
                                    (b2fs_inode_unpin).  That file stays
                                    open meanwhile, so no other file gets
                                    the number (b2fs_inode_rebind) */
  int pin_fd, has_pin, pinned;   /* with has_pin, a descriptor naming
                                    that file while pinned, else the
                                    current one (kept for the next pin;
                                    table lock) */
  int kind;                      /* B2_NS_* (PLAIN: passed through) */
  _Atomic int sparse;            /* a frame directory shown as a file */
  _Atomic int in_store;          /* a value of a .b2d, in a file of its own */
  uint64_t nlookup;              /* under the table lock */
  struct b2fs_inode *next;       /* hash chain */
  int *old_fds;                  /* descriptors replaced, closed with the
                                    inode (table lock) */
  int nold;
  char *doomed;                  /* hidden name of a frame removed while
                                    open, deleted with the inode (nslock) */
  int doomed_dir;                /* O_PATH descriptor of its directory */
  _Atomic int hidlink;           /* doomed is a link not shown in st_nlink
                                    (a removed file's only one: 0) */
  int hidlinked;                 /* doomed is one more link of a linked
                                    file (nslock) */
  _Atomic int gone;              /* removed or replaced through the mount */
  _Atomic int stale;             /* renamed through the mount, and what the
                                    new name holds is another file (a .npy
                                    made an array): ESTALE, so that the
                                    kernel looks the name up again */
  _Atomic int swept;             /* directory: its leftovers were removed */
  int outside;                   /* not in the table (a store's member) */

  pthread_mutex_t wlock;         /* opening and closing writable handles */
  pthread_mutex_t nslock;        /* renames and removals of the entry vs.
                                    compaction and recreation */
  _Atomic int rw;                /* cur is a writable handle */
  _Atomic unsigned wgen;         /* writable handles made current so far:
                                    a read-only handle made before the last
                                    one may hold an older version */

  pthread_mutex_t lock;          /* guards the fields below */
  b2fs_handle *cur;              /* handle of the frame's current version */
  int attr_valid;                /* lsize/blocks computed for attr_sig */
  b2fs_sig attr_sig;
  int64_t lsize;                 /* size of the view, 0 if unreadable */
  blkcnt_t blocks;               /* disk use of a sparse frame */
  _Atomic int storing;           /* b2fs_handle_store_ahead at work */
  int kopen;                     /* frames: files the kernel has open of
                                    it (b2fs_frame_kopen), its reads the
                                    only ones that may lock its pages */
  _Atomic int rel_due;           /* the last close of a writer whose view
                                    changes size at its release (a .npy
                                    header spelled otherwise): opens and
                                    stats wait for that release */
  int open_valid;                /* open_sig holds the last open's sig */
  b2fs_sig open_sig;
  struct timespec wtime;         /* last change through the mount while
                                    writable (0: none) */
  char *closing;                 /* a writable handle being closed
                                    (compacted): its source name in the
                                    directory (cdev, cino); lookups of it
                                    wait */
  dev_t cdev;
  ino_t cino;
  _Atomic(struct b2fs_snode *) sn; /* kind STORE: the store's state (its own
                                    inode) or the member's key (store.c) */
  b2_ns_node *node;              /* frames: the namespace node (b2_ns.h):
                                    the directory and source name it was
                                    last found under (lookup, create, rename
                                    through the mount), opened for writing
                                    while the inode has a writable handle
                                    (then that handle's node); lock */
  struct b2fs_place *places;     /* frames with hard links: the other
                                    directories and names they were found
                                    under, tried when the node's name no
                                    longer holds the file (lock) */
  int nplaces;
  _Atomic(b2_ns_dir *) nsdir;    /* directories: the nodes' directory,
                                    made at its first frame's lookup */
  struct b2fs_warm_dir *warm;    /* directories: their last listing, for
                                    warm.c (lock) */
  fuse_ino_t kparent;            /* the directory and name the kernel last */
  char *kname;                   /* looked it up by (shed.c; lock) */
  _Atomic uint64_t kused;        /* when (shed.c's clock; 0: never, or
                                    told since) */
  _Atomic int64_t ktold;         /* when told to drop it (ms) */
  int nolock_valid;              /* frames: no .b2lock sidecar was found */
  b2fs_sig nolock_sig;           /* while the source had this signature
                                    (frame.c: its own lock) */
} b2fs_inode;

typedef struct b2fs {
  b2fs_opts opts;
  b2_env *env;
  b2fs_inode root;
  pthread_mutex_t table_lock;
  b2fs_inode **buckets;
  size_t nbuckets;
  _Atomic size_t count; /* inodes in the table (changed under the lock) */
  struct fuse_session *se;       /* once mounted (main.c): for notifications */
} b2fs;

extern b2fs b2fs_g;

/* What the table calls in the files above it (set once by main.c): the
 * order of the daemon's files stays one way (docs/architecture.md). */
typedef struct b2fs_hooks {
  /* An inode is freed: let go of its store state and frame handle. */
  void (*release)(b2fs_inode *in);
  /* Attributes of a kind STORE inode (store.c). */
  int (*store_stat)(b2fs_inode *in, struct stat *st);
} b2fs_hooks;
extern b2fs_hooks b2fs_hook;

int b2fs_table_init(void);
/* Free every inode (store members first: b2fs_store_forget_all). */
void b2fs_table_destroy(void);
b2fs_inode *b2fs_inode_get(fuse_ino_t ino);
fuse_ino_t b2fs_inode_id(b2fs_inode *in);
/* One more lookup of an inode that may be going away: 0 if it already
 * reached zero (then leave it alone), 1 if pinned (forget it after). */
int b2fs_inode_pin(b2fs_inode *in);
/* Find or add the inode for an O_PATH fd (taken over: closed if an inode
 * already exists), counting one lookup.  NULL when out of memory. */
b2fs_inode *b2fs_inode_ref(int fd, const struct stat *st, int kind, int sparse);
void b2fs_inode_forget(b2fs_inode *in, uint64_t n);
/* The known inode of a source entry, with one lookup counted (give it back
 * with b2fs_inode_forget(in, 1)); NULL when the kernel knows none. */
b2fs_inode *b2fs_inode_find(const struct stat *st, int kind);
/* 1 (after replying ESTALE) when the kernel asks for an inode whose name
 * now holds another file (`stale`): a path call then looks it up again.
 * With `opens`, only while the kernel has none of its files open (the
 * kernel tells no fstat of a descriptor from a stat by path; the
 * descriptors' file is still there). */
int b2fs_stale_reply(fuse_req_t req, b2fs_inode *in, int opens);
/* The inode's source entry was replaced (compaction, new parameters): take
 * over O_PATH fd of the new entry (the old one is closed with the inode). */
void b2fs_inode_rebind(b2fs_inode *in, int fd, const struct stat *st);
/* The device and inode numbers of the inode's source file now (a rebind
 * changes them). */
void b2fs_inode_ident(b2fs_inode *in, dev_t *dev, ino_t *ino);
/* No handle of the inode is open: show the number of its file now, and
 * let the file whose number was shown go (its descriptor made to name the
 * current file). */
void b2fs_inode_unpin(b2fs_inode *in);
/* The st_ino shown for the source entry (dev, ino) of that kind: its
 * inode's `shown` when it has one, else ino. */
ino_t b2fs_inode_shown(dev_t dev, ino_t ino, int kind);
/* Frames: the inode is entry `name` of the directory whose lstat is dst:
 * its node is put there (made at the first call; a node open for writing
 * moves only by b2fs_frame_moved).  0 or -errno. */
int b2fs_set_home(b2fs_inode *in, const struct stat *dst, const char *name);
/* A frame with more than one link was found as entry `name` of the
 * directory whose lstat is dst: remembered (a few, the latest), so that
 * b2fs_home finds the file by another name once this one is removed. */
void b2fs_note_place(b2fs_inode *in, const struct stat *dst, const char *name);
/* The directory of the node of frame inode `in` (one more reference:
 * b2_ns_dir_put it) and, in name (cap > 255), its source name as last
 * seen; with verify, only while that name still holds in's file, else
 * another name it was found under that still does (b2fs_note_place; the
 * node moves there unless open for writing).  NULL when unknown or stale
 * (then use the real path). */
b2_ns_dir *b2fs_home(b2fs_inode *in, char *name, size_t cap, int verify);
/* The namespace directory of directory inode `dir`, shared by the nodes
 * of its frames (one more reference: b2_ns_dir_put it), made at its first
 * use; NULL if that fails. */
b2_ns_dir *b2fs_dir_ns(b2fs_inode *dir);
/* The known directory inode with these numbers, SOURCE's root included,
 * pinned (give it back with b2fs_home_put); NULL when the kernel knows none. */
b2fs_inode *b2fs_dir_find(dev_t dev, ino_t ino);
/* Give back a directory inode pinned by b2fs_inode_find (NULL, root: no-op). */
void b2fs_home_put(b2fs_inode *dir);
/* Tell the kernel that `name` in directory inode `dir` no longer names
 * inode `in` (a stale one), from a thread of its own: the caller may be
 * answering a request whose system call holds the locks the notice waits
 * for (a truncate that closed the last writer).  Takes over a reference
 * of dir (b2fs_dir_find) and one lookup of in (b2fs_inode_pin). */
void b2fs_notify_gone(b2fs_inode *dir, b2fs_inode *in, const char *name);
/* At unmount, before the session goes: wait (at most 5 s) for the
 * notices still being told. */
void b2fs_notify_drain(void);
/* Make n the inode's node (lock held); the node replaced is returned, to
 * free (b2_ns_node_free) once the lock is released. */
b2_ns_node *b2fs_node_swap(b2fs_inode *in, b2_ns_node *n);
/* The inode's entry was set aside as `hidden` in dirfd (b2_ns_remove,
 * b2_ns_rename): delete it with the inode (nslock held).  The hidden link
 * is not counted in the st_nlink shown (a removed file open: 0, as
 * fstat(2) gives elsewhere).  `linked`: it was one name of a hard-linked
 * file, kept for our writer only: it goes at the writer's close while the
 * file has other names (b2fs_undoom_linked). */
void b2fs_doom(b2fs_inode *in, int dirfd, const char *hidden, int linked);
/* Pin every inode holding a hidden entry (doomed) into *out (malloc'd:
 * free it, and b2fs_inode_forget(in, 1) each); their number. */
size_t b2fs_doomed_pin(b2fs_inode ***out);
/* The writer of a doomed linked file is done (nslock held): its hidden
 * link goes now if the file still has other names. */
void b2fs_undoom_linked(b2fs_inode *in);
/* Lock the nslocks of two inodes (either may be NULL or equal) in a fixed
 * order, and unlock them. */
void b2fs_nslock2(b2fs_inode *a, b2fs_inode *b);
void b2fs_nsunlock2(b2fs_inode *a, b2fs_inode *b);

/* "/proc/self/fd/N" of the inode's descriptor (buf >= 32 bytes). */
const char *b2fs_fd_path(int fd, char *buf, size_t cap);

/* ---- descriptors within the limit (shed.c) --------------------------------- */
/* The marks, from the descriptor limit and the number of frames kept open
 * after their close (at start, before any lookup). */
void b2fs_shed_init(unsigned long limit, unsigned long idle);
/* The kernel learnt inode `in` as `name` of directory `parent` (a lookup,
 * a create, a listing with attributes): recorded, with its age. */
void b2fs_shed_seen(b2fs_inode *in, fuse_ino_t parent, const char *name);
/* An inode may have been added: past the high mark, the shedding thread
 * is woken. */
void b2fs_shed_note(void);
/* Does the table hold more inodes than the high mark? */
int b2fs_shed_crowded(void);
/* Did a call fail for want of descriptors (err: an errno, or an engine
 * code), and did the kernel's forgets free some since?  Wakes the
 * shedding thread and waits (at most 0.3 s) for the table to fall below
 * the high mark: 1 when it did (try the call again); 0 for another error,
 * when the inodes hold too few descriptors to be the cause, or when they
 * did not (then the next waits within a second fail at once: the
 * caller's own system call may hold the directory the kernel must lock
 * to drop a name). */
int b2fs_shed_retry(int err);
/* Names the kernel was asked to drop so far (the log at unmount). */
uint64_t b2fs_shed_asked(void);
/* At unmount, before the table goes: stop the thread. */
void b2fs_shed_stop(void);

/* ---- frames (frame.c) and their shared handles (handle.c, whandle.c) ---- */
/* Attributes shown for an inode (frames: view size, file mode, disk use;
 * attr.c). */
int b2fs_stat(b2fs_inode *in, struct stat *st);

/* Open / release the shared frame handle; *keep_cache tells whether the
 * kernel may keep its cached pages.  Negative errno on failure.  While the
 * frame is open for writing, every open gets the writable handle. */
int b2fs_frame_open(b2fs_inode *in, b2fs_handle **h, int *keep_cache);
/* Drop one user.  The last user of a writable handle commits, compacts when
 * worthwhile and closes it: the commit's error comes back (-errno). */
int b2fs_frame_release(b2fs_inode *in, b2fs_handle *h);
/* The same for metadata only (xattrs, no page-cache decision); pass it
 * back to b2fs_frame_release. */
int b2fs_frame_peek(b2fs_inode *in, b2fs_handle **h);
/* Give back a read-only handle taken with b2fs_frame_peek to warm it
 * (warm.c): it stays the inode's current handle for the reader expected
 * next, not counted among the idle handles (which would close it when
 * there are too many). */
void b2fs_frame_release_warmed(b2fs_inode *in, b2fs_handle *h);
/* A per-thread buffer of at least n bytes (kept for the thread's life). */
void *b2fs_tls_buf(size_t n);
/* Hand a small read-only frame whose chunks are all decoded in the cache
 * to the kernel's page cache (fuse_lowlevel_notify_store), so that reading
 * it needs no request: 1 when stored (the open must then keep the page
 * cache).  Called without locks: the kernel may wait on a read that
 * another thread serves. */
int b2fs_handle_store(fuse_ino_t ino, b2fs_handle *h);
/* The same ahead of the open (warm.c), for the inode's current handle h
 * when the kernel's pages of the inode are of no other version; the open
 * then keeps them (h->stored, the inode's open_sig).  1 when stored. */
int b2fs_handle_store_ahead(b2fs_inode *in, b2fs_handle *h);
/* Wait until no such hand-over of the inode is at work: called once a new
 * handle is current (its open's reply may drop the kernel's pages, which
 * must come after pages of the old version are stored), and by every open
 * before its reply (its reads must not wait for a hand-over, nor one for
 * them: the warming thread must finish at unmount). */
void b2fs_handle_store_wait(b2fs_inode *in);
/* Count a file of the frame the kernel opens (delta 1, before the open
 * asks for a handle) or closes (-1: a failed open, a release).  Handing
 * over ahead is only for frames the kernel has no file open of, whose
 * pages no read can hold locked. */
void b2fs_frame_kopen(b2fs_inode *in, int delta);
/* The inode is going away: let go of its current handle (no user left). */
void b2fs_frame_forget(b2fs_inode *in);

/* Writable handles (whandle.c).  The writable handle (opened now unless
 * the inode has one, with the inode's view); -EROFS for frames the writer
 * cannot keep valid. */
int b2fs_frame_open_rw(b2fs_inode *in, b2fs_handle **h, int *keep_cache);
/* Make the writable node (just created) the inode's handle, with one
 * user; takes it over.  Negative errno. */
int b2fs_frame_install_rw(b2fs_inode *in, b2_ns_node *node, b2fs_handle **h);
/* A writable b2_file of the inode's frame of its own (not shared: for a
 * change made and committed at once), opened at its directory and name.
 * An engine code. */
int b2fs_frame_open_own(b2fs_inode *in, int view, b2_file **f);
/* The file of a handle for one use (a read, write, flush...): for a
 * writable handle, held against reopening until b2fs_unuse.  NULL when the
 * handle lost its file (a reopen failed): answer EIO. */
b2_file *b2fs_use(b2fs_handle *h);
void b2fs_unuse(b2fs_handle *h);
/* Reads and fsyncs through a read-only handle h go to the inode's writable
 * handle while there is one, and to its current version once a writer
 * came and went since h was made (what was written through the mount is
 * read through every descriptor, as POSIX has it): that handle with one
 * more user (release it), or NULL to use h itself. */
b2fs_handle *b2fs_frame_redirect(b2fs_inode *in, b2fs_handle *h);
/* The engine creates a frame anew at its path (a new .npy file once its
 * header is in, or at its first flush; a parameter set on an empty frame):
 * take b2fs_frame_gen(h) before a use of h that may do so, and call
 * b2fs_frame_renewed after it (b2fs_unuse done): the inode then moves to
 * the new entry, with the old one's owner and mode (its times are the new
 * content's: its checksum table vouches for them). */
uint64_t b2fs_frame_gen(b2fs_handle *h);
void b2fs_frame_renewed(b2fs_inode *in, b2fs_handle *h, uint64_t g0);
/* Log what became of a new .npy file (a plain frame, and why), once. */
void b2fs_frame_note(b2_file *f);
/* A write changed the frame (for the times shown). */
void b2fs_frame_touched(b2fs_inode *in, b2_file *f);
/* The engine rewrites a contiguous frame into a new file on some commits
 * (an empty frame, compaction): if the inode's source entry was replaced
 * that way, rebind the inode to the new file.  Call after commits. */
void b2fs_frame_follow(b2fs_inode *in);
/* A lookup found source entry `name` of directory inode `dir`: let a
 * writable inode whose file was rewritten there follow it first (so the
 * lookup finds it). */
void b2fs_frame_follow_at(b2fs_inode *dir, const char *name);
/* A frame open for writing with new writes committed since the last
 * look, and none for the idle commit's delay (1 s with idle_flush=0), is
 * compacted now when its dead bytes exceed the
 * mount's thresholds (as at its last close); the inode follows the new
 * file at once.  After a failure, only once the dead bytes doubled. */
void b2fs_frame_compact_open(b2fs_inode *in);
/* The thread that looks at every frame open for writing four times a second
 * (compactor.c). */
int b2fs_compactor_start(void);
void b2fs_compactor_stop(void);
/* Around a rename or removal through the mount of the entries of inodes a
 * and b (either may be NULL): commit their writable frames and hold off
 * their uses; once an entry has its new name, b2fs_frame_moved tells its
 * frame (the engine rewrites a frame at its directory and name); unhold
 * lets the uses go on.  hold returns NULL when no frame is concerned.
 * `err` (may be NULL) gets the first failed commit as a negative errno:
 * the caller should then not move the frames (their data is not on disk). */
void *b2fs_frame_hold(b2fs_inode *a, b2fs_inode *b, int *err);
void b2fs_frame_moved(void *held, b2fs_inode *in, int dirfd, const char *name);
void b2fs_frame_unhold(void *held);
/* Drop the references a hold took: a last release may close (and take the
 * namespace locks), so call it after b2fs_nsunlock2. */
void b2fs_frame_hold_drop(void *held);
/* Is the writable handle of frame inode `in` at entry `name` of the
 * directory (ddev, dino): does its writer rewrite the frame by that name? */
int b2fs_frame_writes_as(b2fs_inode *in, dev_t ddev, ino_t dino, const char *name);
/* Is any frame open for writing? */
int b2fs_frame_any_writable(void);
/* Is a writer of frame inode `in` open (its handle then takes every
 * change)? */
int b2fs_frame_writing(b2fs_inode *in);
/* Does a writable handle of ours work on frame `name` of directory dirfd
 * (open, committing, compacting: the engine's temporaries are in use)?
 * 1 also when that cannot be told. */
int b2fs_frame_writing_at(int dirfd, const char *name);
/* The same, and a writer closing there (its compaction may be replacing
 * the file) is waited for and its inode follows its file: then the entry
 * found at that name is the one the inode has. */
int b2fs_frame_settle_at(int dirfd, const char *name);

/* Internals shared by handle.c and whandle.c (inode lock held where said). */
b2fs_handle *b2fs_handle_new(b2_file *f, const b2fs_sig *sig);
int b2fs_handle_free(b2fs_handle *h); /* closes the file: its engine code */
void b2fs_handle_take(b2fs_inode *in); /* one more user of cur (lock) */
/* Make h current with one user (lock); *old: a replaced handle to free. */
void b2fs_handle_make_cur(b2fs_inode *in, b2fs_handle *h, b2fs_handle **old);
/* The inode lets go of cur (lock); returns it if now unused. */
b2fs_handle *b2fs_handle_drop(b2fs_inode *in);
int b2fs_handle_sig(b2fs_inode *in, b2fs_sig *sig);
/* The page-cache decision of an open with signature sig (lock). */
int b2fs_handle_keep(b2fs_inode *in, const b2fs_sig *sig);
/* One user less of h (handle.c): the handle to free now (or NULL); with
 * *close_rw set, the caller closes the writable handle (b2fs_wclose).  A
 * read-only handle left current is counted idle, or with `warmed` kept
 * for its reader outside that count. */
b2fs_handle *b2fs_handle_unref(b2fs_inode *in, b2fs_handle *h, int warmed, int *close_rw);
/* Registry of inodes with a writable current handle (handle.c; called
 * under the inode lock by make_cur/drop); the registered inodes, each
 * pinned (b2fs_inode_forget(in, 1) after), NULL when there are none. */
void b2fs_wreg_add(b2fs_inode *in);
void b2fs_wreg_del(b2fs_inode *in);
b2fs_inode **b2fs_wreg_pinned(size_t *n);
/* The close of a writable handle's last user (whandle.c). */
int b2fs_wclose(b2fs_inode *in, b2fs_handle *h);
/* A flush (close(2)) of writable handle h: when it is the kernel's only
 * open of the frame and its release will change the view's size, later
 * opens and stats wait for that release (b2fs_frame_await_release), so
 * that no reader sees the size from before it once close(2) returned. */
void b2fs_frame_flushed(b2fs_inode *in, b2fs_handle *h);
/* Wait (at most 100 ms: a dup of the descriptor keeps the file open) for
 * the release b2fs_frame_flushed announced; the kernel's release of a
 * frame's open ends it (b2fs_frame_released). */
void b2fs_frame_await_release(b2fs_inode *in);
void b2fs_frame_released(b2fs_inode *in);

/* Most unused frame handles kept open for later opens. */
void b2fs_frame_set_idle_max(int n);
/* Log a failure on a handle once per distinct detail (of the last 8). */
void b2fs_frame_log(b2fs_inode *in, b2fs_handle *h, const char *what, int rc);
/* Source signature of a frame inode from the fstat of its entry. */
int b2fs_sig_of(b2fs_inode *in, const struct stat *st, b2fs_sig *sig);
int b2fs_sig_eq(const b2fs_sig *a, const b2fs_sig *b);
/* The frame inode has no .b2lock sidecar while its source has signature
 * sig: b2fs_sig_of does not look for one until the source changes. */
void b2fs_sig_nolock(b2fs_inode *in, const b2fs_sig *sig);
/* The same for a frame file (contiguous) whose lstat is st. */
void b2fs_sig_nolock_file(b2fs_inode *in, const struct stat *st);
/* Open the frame of a frame inode with its view, read-only, at its node's
 * directory and name (handle.c; inode lock held).  flags: B2_OPEN_RDONLY,
 * or B2_OPEN_PROBE to learn its size without counting as a read. */
int b2fs_open_view(b2fs_inode *in, int flags, b2_file **out);
/* Source path of an inode, for messages. */
const char *b2fs_src_path(b2fs_inode *in, char *buf, size_t cap);
/* Plain-file keep_cache decision from a fresh fstat. */
int b2fs_plain_keep_cache(b2fs_inode *in, const struct stat *st);
/* errno for an engine code from a read or an open. */
int b2fs_errno(int rc);
/* errno for an engine code from a write, flush or truncate. */
int b2fs_werrno(int rc);

/* ---- the source tree (srcops.c) ----------------------------------------- */
/* Current real path of the inode's source entry (its directory's path and
 * name, as the kernel tracks them), -ENOENT once removed. */
int b2fs_real_path(b2fs_inode *in, char *buf, size_t cap);
/* Real path of entry `name` of the directory open at dirfd. */
int b2fs_path_at(int dirfd, const char *name, char *buf, size_t cap);
/* Mode shown for a sparse frame from its directory's mode and back. */
mode_t b2fs_sparse_dir_mode(mode_t shown);
/* Give a new entry to the caller of the request (when running as root). */
void b2fs_give_owner(int dirfd, const char *name, fuse_req_t req);
/* The owner a new entry gets (b2fs_give_owner): 1 with *uid and *gid, or 0
 * with both -1 (the daemon is not root, or the caller is). */
int b2fs_req_owner(fuse_req_t req, uid_t *uid, gid_t *gid);
/* Owner and mode (and with times, the times) of `before` on the entry at
 * fd (a new file that replaced the one described by before), and the
 * user's own extended attributes of the file at `from` (-1: none). */
void b2fs_copy_attrs(int fd, const struct stat *before, int times, int from);
/* The names of the user's own attributes (b2_ns_own_xattr: kept on the
 * source entry) of the file at descriptor fd, as
 * listxattr gives them (malloc'd, *len bytes), or NULL (*len 0): none. */
char *b2fs_own_xattr_names(int fd, size_t *len);

/* Remove the leftovers of crashes in the directory inode `dir` (frames a
 * dead daemon was deleting, engine temporaries nobody holds), once per
 * inode: called at its first lookup or listing (sweep.c). */
void b2fs_sweep_dir(b2fs_inode *dir);

/* ---- python-blosc2 stores (store.c) -------------------------------------- */
/* Kind STORE inodes: a store (source entry NAME.b2d/.b2z/.b2e, shown as a
 * directory) and its members that are not files of their own (groups,
 * zip members, embedded values: virtual, read-only, outside the table). */
int b2fs_store_stat(b2fs_inode *in, struct stat *st);
/* The directory in SOURCE of a .b2d or one of its groups, which holds its
 * mode, owner, times and the user's own attributes (with `make`, made
 * when missing: b2_ns_store_group_dir): an O_PATH descriptor to close, or
 * -ENOENT (none), -EROFS (a value, a .b2z or .b2e, an object's group). */
int b2fs_store_dir(b2fs_inode *in, int make);
/* The namespace directory new values of group inode `in` are made in
 * (one more reference; NULL if it cannot be made): shared by them all, so
 * a value holds no descriptor of its own for it; `dirfd` is the group's
 * directory as just found (a group removed and made again under its key
 * gets a new one). */
b2_ns_dir *b2fs_store_dir_ns(b2fs_inode *in, int dirfd);
/* Mode, owner and times (to_set: FUSE_SET_ATTR_*; ts as utimensat takes
 * them) given to a .b2d or one of its groups: its directory in SOURCE,
 * made when missing (b2_ns_store_group_dir).  EROFS elsewhere (values not
 * in files of their own, .b2z, .b2e), EISDIR for a size. */
int b2fs_store_setattr(b2fs_inode *in, int to_set, const struct stat *attr,
                       const struct timespec ts[2]);
/* Entry `name` of store directory `dir` (counting one lookup); -errno. */
int b2fs_store_lookup(b2fs_inode *dir, const char *name, struct fuse_entry_param *e);
/* Where a new value `name` of a .b2d's group goes (b2_ns_store_create;
 * groups made on the way are given to the caller of req): 0 with *file
 * (close its dirfd), or -errno (EROFS for a .b2z or .b2e).  With `replace`,
 * 1 when `name` is a value in a file of its own of that kind: that file. */
int b2fs_store_create(b2fs_inode *dir, const char *name, int replace, fuse_req_t req,
                      b2_ns_store_file *file);
/* The file of value `name` of a .b2d's group (close its dirfd): 0, -EROFS
 * for a group or a value not in a file of its own, or another -errno. */
int b2fs_store_file(b2fs_inode *dir, const char *name, b2_ns_store_file *file);
/* A new group `name` of a .b2d's group dir (b2_ns_store_mkdir, given to
 * the caller of req), looked up into *e: 0 or -errno. */
int b2fs_store_mkdir(b2fs_inode *dir, const char *name, mode_t mode, fuse_req_t req,
                     struct fuse_entry_param *e);
/* Begin removing the empty group `name` of a .b2d's group dir
 * (b2_ns_store_rmdir): the descriptor of the directory holding its
 * directory, named `base` there (the caller removes it, then calls
 * b2fs_store_changed), or -errno (ENOTEMPTY, EROFS...). */
int b2fs_store_rmdir(b2fs_inode *dir, const char *name, char *base, size_t cap);
/* Move group `name` of a .b2d's group dir to `newname` in group ndir of
 * the same store (b2_ns_store_move_group; the inodes below follow): 0, 1
 * when `name` is a value (not moved: a value's rename), or -errno. */
int b2fs_store_move_group(b2fs_inode *dir, const char *name, b2fs_inode *ndir,
                          const char *newname, int noreplace);
/* Remove (newname NULL) embedded value `name` of store group dir, or
 * rename it `newname` in group ndir of the same store
 * (b2_ns_store_rekey): 0 or -errno (EROFS when not an embedded value). */
int b2fs_store_rekey(b2fs_inode *dir, const char *name, b2fs_inode *ndir, const char *newname,
                     int replace);
/* 1 when a and b are inodes of the same store (its directory, groups,
 * values), else 0. */
int b2fs_store_same(b2fs_inode *a, b2fs_inode *b);
/* The store of `dir` was changed through the mount (`files`: value files
 * made, renamed or removed only): python-blosc2 handles sharing it under
 * locking are told, and it is opened again (b2_ns_store_changed). */
void b2fs_store_changed(b2fs_inode *dir, int files);
int b2fs_store_opendir(b2fs_inode *in, uint64_t *fh);
/* A page of the listing from its key off into buf, key k at offset k + 3
 * (after "." and "..", ops_dir.c); plus: entries without attributes (the
 * kernel looks each one up). */
size_t b2fs_store_readdir(fuse_req_t req, uint64_t fh, int plus, char *buf, size_t size,
                          off_t off);
void b2fs_store_releasedir(uint64_t fh);
int b2fs_store_open(b2fs_inode *in, int flags, uint64_t *fh);
ssize_t b2fs_store_read(b2fs_inode *in, uint64_t fh, void *buf, size_t size, off_t off);
void b2fs_store_release(uint64_t fh);
/* user.b2.* attributes of a store node (name NULL: the list); -errno. */
ssize_t b2fs_store_xattr(b2fs_inode *in, const char *name, char *buf, size_t size);
/* The inode is freed: its store state goes (a member lets go of its store). */
void b2fs_store_free(b2fs_inode *in);
/* Forget every member inode (unmount: before the table goes). */
void b2fs_store_forget_all(void);

/* ---- reading ahead across files (warm.c) ------------------------------------ */
/* Start and stop the thread that warms frames (stop before the table goes). */
int b2fs_warm_start(void);
void b2fs_warm_stop(void);
/* A directory listing shared by its open directory (ops_dir.c) and its
 * inode: reference counted, freed with the last b2fs_listing_put. */
typedef struct b2fs_listing {
  _Atomic int refs;
  b2_ns_list l;
} b2fs_listing;
b2fs_listing *b2fs_listing_new(void); /* empty, one reference; NULL: no memory */
void b2fs_listing_put(b2fs_listing *x);
/* Directory inode `dir` keeps listing x (one more reference), in place of
 * the one it kept before. */
void b2fs_warm_keep(b2fs_inode *dir, b2fs_listing *x);
/* Free a directory's kept listing (the inode is going). */
void b2fs_warm_free(struct b2fs_warm_dir *w);
/* Frame inode `in` was opened for reading: when it follows the frame opened
 * before in its directory's order, warm the next ones. */
void b2fs_warm_opened(b2fs_inode *in);

/* ---- replies (attr.c) ------------------------------------------------------ */
/* Look up source entry `src` (of view `kind`) in the directory at pfd and
 * fill e (counting one lookup).  -errno; -ENOENT when absent. */
int b2fs_entry(int pfd, const char *src, int kind, struct fuse_entry_param *e);
/* The same in directory inode `dir` (its numbers known: one call less),
 * after a frame we rewrote under that name has been followed: a lookup,
 * or one entry of a listing with attributes (readdirplus). */
int b2fs_entry_in(b2fs_inode *dir, const char *src, int kind, struct fuse_entry_param *e);
/* Reply with entry e (a lookup of it counted), known to the kernel as
 * `name` in directory `parent` from now on (b2fs_shed_seen); 0, or -1
 * when the reply failed (the lookup given back). */
int b2fs_reply_entry(fuse_req_t req, fuse_ino_t parent, const char *name,
                     const struct fuse_entry_param *e);
/* The same for a create's reply (-1: nothing given back, the caller
 * undoes the open). */
int b2fs_reply_create(fuse_req_t req, fuse_ino_t parent, const char *name,
                      const struct fuse_entry_param *e, const struct fuse_file_info *fi);
/* The handle of an open's fh, and whether the open may write. */
b2fs_handle *b2fs_fh_handle(const struct fuse_file_info *fi);
int b2fs_fh_writes(const struct fuse_file_info *fi);
/* Do opens with these flags bypass the page cache (direct I/O)? */
int b2fs_write_only(int flags);

/* ---- operations ---------------------------------------------------------- */
/* After a write or truncate by the caller of req: a caller without
 * CAP_FSETID (not root) takes set-user-ID away, and set-group-ID where the
 * file is group-executable or the caller not in its group, as every local
 * file system does.  The
 * kernel leaves this to us (FUSE_CAP_HANDLE_KILLPRIV, and direct I/O
 * writes): the daemon itself writes as root, which would keep them. */
void b2fs_kill_privs(fuse_req_t req, b2fs_inode *in); /* ops_write.c */

void b2fs_ops_read(struct fuse_lowlevel_ops *ops);
void b2fs_ops_dir(struct fuse_lowlevel_ops *ops);
void b2fs_ops_xattr(struct fuse_lowlevel_ops *ops);
void b2fs_ops_write(struct fuse_lowlevel_ops *ops);
void b2fs_ops_tree(struct fuse_lowlevel_ops *ops);

#endif /* B2FS_H */
