/*
 * b2_file.h - layer 6: a file-like handle over a frame.
 *
 * This is the one interface the FUSE daemon and the b2f tool use to read and
 * write frames as plain bytes.  A handle presents one *view* of a frame:
 *
 *   B2_VIEW_LOGICAL  the frame's logical content (chunks decoded, in order)
 *   B2_VIEW_CORDER   a b2nd array's items in C order
 *   B2_VIEW_NPY      the same preceded by a NumPy .npy header
 *
 * Reads go through the shared chunk cache of a b2_env when one is given
 * (whole chunks decoded once, shared by all handles), with partial decode for
 * small reads of uncached chunks (from the stored chunk, which read-only
 * handles keep in the cache, compressed) and read-ahead for sequential
 * access.  Chunks a sequential reader has finished leave the cache again
 * (drop-behind): the kernel's page cache holds what it was given.
 * Without an env (env == NULL) reads decode straight from the frame.
 *
 * A handle is safe to use from several threads at once.
 */
#ifndef B2_FILE_H
#define B2_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "b2_b2nd.h"
#include "b2_chunk.h"
#include "b2_frame.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- environment: cache, worker pool and defaults shared by handles ---- */
typedef struct b2_env b2_env;

typedef struct b2_env_opts {
  size_t cache_size;  /* bytes of chunks kept, decoded or stored (default
                         256 MiB) */
  size_t dirty_max;   /* bytes of dirty chunks held before writers wait
                         (0, the default: half of cache_size, at least
                         64 MiB, at most cache_size) */
  int nthreads;       /* worker threads for read-ahead and compression
                         (default: one per online CPU, 2 to 4) */
  int readahead;      /* chunks decoded ahead on sequential reads (0: off) */
  b2_cparams cparams; /* parameters of new frames */
  int32_t chunksize;  /* chunk size of new frames */
  int layout;         /* B2_LAYOUT_* of new frames */
  int verify;         /* check stored chunk checksums on read (default 1) */
  unsigned idle_ms;   /* a background thread compresses and commits the
                         chunks of files idle this long (0: no thread) */
} b2_env_opts;

void b2_env_opts_default(b2_env_opts *o);
int b2_env_create(const b2_env_opts *o, b2_env **out);
void b2_env_destroy(b2_env *env);
/* Memory the caller holds beside the engine for its own I/O (a daemon's
 * per-thread request and reply buffers) counts in the cache's bytes while
 * held: clean chunks make room for it, so that cache_size bounds both.
 * Uncharge the same n when it is freed.  No-op without a cache. */
void b2_env_charge(b2_env *env, size_t n);
void b2_env_uncharge(b2_env *env, size_t n);

/* ---- handles ------------------------------------------------------------ */
typedef struct b2_file b2_file;

enum b2_view { B2_VIEW_LOGICAL = 0, B2_VIEW_CORDER = 1, B2_VIEW_NPY = 2 };

/* Open flags. */
#define B2_OPEN_RDONLY 0
#define B2_OPEN_RDWR 1
/* With B2_OPEN_RDONLY: a look at the file (its size, its kind), not a read
 * of its data: the frame's files are opened with O_NOATIME where permitted
 * (b2_frame_open_probe), so the source's access time stays as it was.
 * Close such a handle once it has answered. */
#define B2_OPEN_PROBE 2

/* Open the frame at `path` with the given view.  B2_VIEW_CORDER needs a
 * valid b2nd metalayer (else B2_E_FORMAT); B2_VIEW_NPY of a frame without
 * one shows its logical content (a .npy file kept as plain bytes). */
int b2_file_open(b2_env *env, const char *path, int view, int flags,
                 b2_file **out);
/* The same for entry `name` of directory dirfd (any descriptor of it,
 * O_PATH included), whatever the length of the directory's path; a writer
 * rewrites the frame in that directory (b2_frame_open_at). */
int b2_file_open_at(b2_env *env, int dirfd, const char *name, int view, int flags,
                    b2_file **out);
int b2_file_close(b2_file *f);

/* A read-only handle over a frame already open read-only (a frame inside
 * another file or in memory: b2_frame_open_fd, b2_frame_open_mem).  The
 * handle takes the frame over, and closes it even when this fails. */
int b2_file_open_frame(b2_env *env, b2_frame *fr, int view, b2_file **out);

/* Size of the view in bytes. */
int64_t b2_file_size(const b2_file *f);
/* The size a new handle of the same view shows, once what this one wrote
 * is committed and its last writer is done: a writer's .npy view keeps
 * the header its writer wrote (its offsets hold), spelled as it was; new
 * handles show the header kept or numpy.save's, which can be of another
 * length; a new .npy file its writer stopped short of its header's size
 * keeps the bytes written. */
int64_t b2_file_reopen_size(const b2_file *f);

/* Read up to n bytes at off; returns bytes read (short only at the end). */
ssize_t b2_file_pread(b2_file *f, void *buf, size_t n, int64_t off);

/* The same read without the copy when it can be avoided: when the bytes
 * lie within one chunk whose decoded form is in the env's cache (or is
 * loaded there because the reader is sequential), p->data points at them
 * inside the cache and the entry stays pinned; otherwise they are read
 * into buf (which must hold n bytes) and p->data == buf.  Returns what
 * b2_file_pread returns.  Call b2_file_unpin(p) when done with p->data,
 * whatever the result; the pin holds the cache entry, not the handle, so it
 * may be released after the handle is closed.  For servers that send from
 * memory (FUSE replies). */
struct b2_cache_entry;
struct b2_cache;
typedef struct b2_file_pin {
  const void *data;             /* the bytes read */
  struct b2_cache_entry *entry; /* internal: the pinned entry, or NULL */
  struct b2_cache *cache;       /* internal: the cache holding it */
} b2_file_pin;
ssize_t b2_file_pread_pin(b2_file *f, void *buf, size_t n, int64_t off, b2_file_pin *p);
void b2_file_unpin(b2_file_pin *p);

/* lseek's SEEK_DATA (hole 0) and SEEK_HOLE (hole 1) in the view: the first
 * offset at or after off that holds data, or where a hole begins.  Holes
 * are the bytes of chunks stored as zeros (zero or uninitialised special
 * index entries, as python-blosc2's zeros and empty arrays have) and the
 * end of the file; a handle open for writing, an .npy header and what a
 * walk of a million runs does not reach count as data.  B2_E_RANGE (ENXIO)
 * when off is at or past the end, or, for data, when only holes follow. */
int64_t b2_file_seek_hole(b2_file *f, int64_t off, int hole);

/* Decode the chunks holding the first nbytes bytes of the view into the
 * env's cache, unless they are there already, in the calling thread: for
 * a server that expects the file to be read next (the next files of a
 * directory read in order).  A reader of those chunks meanwhile waits for
 * this decode instead of repeating it; a handle read from before is left
 * as it is (its reader came first).  Only the logical view and arrays
 * stored in C order (b2_b2nd_is_linear); others, writable handles and
 * handles without a cache: nothing to do.  Returns the number of chunks
 * decoded (0: none needed), or a negative code. */
int b2_file_warm(b2_file *f, int64_t nbytes);

/* Whether the chunks holding the view's first nbytes bytes are all decoded
 * in the env's cache (1), so that reading them costs copies only; else 0.
 * Chunks that b2_file_warm is decoding (or has queued) are waited for,
 * decoded here if the warming thread has not begun them; no other chunk
 * is decoded.  A hint: entries may be evicted at once.  Read-only handles
 * of the logical view and of arrays stored in C order only. */
int b2_file_resident(b2_file *f, int64_t nbytes);

/* Frame and array under the handle (array NULL unless a b2nd view). */
b2_frame *b2_file_frame(const b2_file *f);
struct stat;
/* The status of the file the handle's frame is in now (b2_frame_file_now;
 * a recreation, b2_file_recreations, gives it a new frame): any thread. */
int b2_file_frame_now(b2_file *f, struct stat *st);
const b2_b2nd *b2_file_array(const b2_file *f);

/* ---- writing -------------------------------------------------------------
 * Any view of a frame opened B2_OPEN_RDWR (or created) can be written.
 * Through a b2nd array's views (C order, .npy) a write inside the items
 * updates the items it covers; a write to the .npy header must leave it
 * unchanged (else B2_E_INVAL); a size change must add or remove whole rows
 * of the first axis (the array's shape, in its metalayer, changes with the
 * next commit; else B2_E_INVAL), except that truncating a .npy view to 0
 * starts it afresh as a new .npy file (below).  Written bytes land in the env's
 * cache as dirty decoded chunks.  A chunk is compressed (with the frame's
 * own codec and parameters) when it is complete, when the cache needs room,
 * when it has been idle for idle_ms, and on flush; b2_file_flush then
 * commits the frame, after which the file on disk holds everything written
 * before the call.  Until a commit the file on disk keeps its last committed
 * content.  Writing needs an env with a cache. */

/* Create a new frame at `path` with parameters `p` (NULL: the env's
 * defaults) and open it for writing.  B2_E_EXIST if path exists. */
int b2_file_create(b2_env *env, const char *path, const b2_frame_params *p,
                   b2_file **out);
/* The parameters new frames get from env (p NULL above; the defaults
 * without an env). */
void b2_file_env_params(const b2_env *env, b2_frame_params *p);
/* The same at entry `name` of directory dirfd (see b2_file_open_at). */
int b2_file_create_at(b2_env *env, int dirfd, const char *name, const b2_frame_params *p,
                      b2_file **out);

/* Create a new .npy file at `path`: an empty plain frame (parameters p, or
 * the env's defaults) whose bytes are held until the .npy header is
 * complete; then the frame is created anew as a b2nd array with the
 * header's shape and dtype, and later bytes go to its items.  A header
 * that cannot be an array (Fortran order, object dtype, damaged, too many
 * dimensions, incomplete at a flush) leaves a plain frame of the bytes
 * written, with a note saying why (b2_file_take_note).  Until the array
 * exists, b2_file_set_param also takes "chunkshape" and "blockshape"
 * ("A,B,..", one size per dimension) for it. */
int b2_file_create_npy(b2_env *env, const char *path,
                       const b2_frame_params *p, b2_file **out);
int b2_file_create_npy_at(b2_env *env, int dirfd, const char *name,
                          const b2_frame_params *p, b2_file **out);
/* 1 when f, a new .npy file (b2_file_create_npy), was stored as a plain
 * frame of its bytes (its header is no array) and holds some: the
 * namespace then gives it the name a plain NAME.npy has.  Ask after a
 * flush, before closing. */
int b2_file_npy_fell_back(const b2_file *f);

/* How many times the frame was created anew at its path (a new .npy file
 * getting its array or plain frame, b2_file_set_param): a new file or
 * directory there, which whoever tracks the entry must follow. */
uint64_t b2_file_recreations(b2_file *f);

/* The note a new .npy file left (copied into buf, then cleared): 1 if
 * there was one, else 0.  For one log line. */
int b2_file_take_note(b2_file *f, char *buf, size_t cap);

/* Write n bytes at off (growing the file if needed; a gap reads as zeros
 * and is stored as special zero chunks).  Returns n or a negative code. */
ssize_t b2_file_pwrite(b2_file *f, const void *buf, size_t n, int64_t off);

/* Set the size (shrink or grow; growth reads as zeros). */
int b2_file_truncate(b2_file *f, int64_t size);

/* Compress every dirty chunk and commit the frame (close(2) of one
 * descriptor, attribute changes).  0 or the first error (B2_E_NOSPC,
 * ...); after an error the data stays in memory and a later flush
 * retries.  An array's .npy view whose size ends inside a row (an
 * appender between its writes) is left uncommitted: its writer goes on. */
int b2_file_flush(b2_file *f);
/* b2_file_flush for fsync and fdatasync: all that was written becomes
 * durable, so an array whose size ends inside a row is kept as the plain
 * frame of its bytes first. */
int b2_file_sync(b2_file *f);
/* The last close of a writer: b2_file_sync, and a new .npy file whose
 * writer stopped short of the size its header gives (killed, out of
 * space) is made anew as a plain frame of the bytes written, as any file
 * system keeps them, rather than an array padded with zeros that numpy
 * and python-blosc2 would take for complete (b2_file_take_note says so).
 * A header alone stays an array of zeros (numpy's open_memmap writes it,
 * closes, then writes the items through a mapping of its own). */
int b2_file_finish(b2_file *f);
/* 1 when b2_file_finish would keep a .npy file as the plain frame of its
 * bytes (no array in its header, cut short of it, or its size inside a
 * row): the namespace gives it a plain frame's name then. */
int b2_file_npy_kept_as_bytes(const b2_file *f);
/* Would a new .npy file of the bytes f shows be an array they fill
 * exactly (b2_b2nd_of_npy, with the env's parameters): 1, else 0. */
int b2_file_npy_is_array(b2_file *f);

/* Flush, giving the frame modification time t in the same commit, its
 * checksum table saying it is true at t (b2_frame_set_mtime): what a
 * time set through the mount does.  B2_E_ROFS on a read-only handle. */
int b2_file_set_mtime(b2_file *f, const struct timespec *t);

/* The time of the last change written or truncated through f: what the
 * next commit gives the frame as its modification time (an idle commit,
 * a close or an fsync move no time a stat shows).  Just below the coarse
 * clock at the change.  0 when nothing changed through f, else 1. */
int b2_file_changed_at(b2_file *f, struct timespec *t);

/* 1 if the handle can be written. */
int b2_file_writable(const b2_file *f);

/* Change a creation parameter of a frame that holds no data yet ("codec",
 * "clevel", "filters", "typesize", "chunksize", "blocksize", "layout";
 * "chunkshape", "blockshape" for a new .npy file): the empty frame is
 * created anew with it.  A value that is no such parameter's gives
 * B2_E_INVAL; a good one once data exists B2_E_BUSY (the value's form is
 * checked first, whatever the frame: a copy of another frame's
 * parameters, set after its data, can be told from a mistake). */
int b2_file_set_param(b2_file *f, const char *key, const char *value);

/* Bytes compaction would reclaim, out of *stored (when not NULL; see
 * b2_frame_dead_bytes), and compaction itself (crash safe: a contiguous
 * frame is rewritten to a temporary file renamed over it). */
int64_t b2_file_dead_bytes(b2_file *f, int64_t *stored);
int b2_file_compact(b2_file *f);

/* How far commits have come: a number that moves when a commit stores new
 * writes (never with a compaction or a commit of nothing), and in *quiet_ms
 * (when not NULL) the milliseconds since the last write (a monotonic
 * clock), for a caller deciding when a frame kept open is worth a look
 * (b2_file_dead_bytes).  0 for read-only handles. */
uint64_t b2_file_committed(b2_file *f, int64_t *quiet_ms);

/* ---- parameters ------------------------------------------------------------
 * One parser for the textual parameters used by `b2fs -o`, `b2f pack` and
 * the user.b2.* attributes.  Keys: codec (blosclz lz4 lz4hc zlib zstd),
 * clevel (0-9), filters ("shuffle,delta", "none"), typesize (1-255),
 * chunksize and blocksize (bytes, K/M/G suffixes), layout
 * (contiguous|sparse).  B2_E_INVAL with a detail for a bad value or an
 * unknown key (chunkshape and blockshape are the array writer's own:
 * b2_file_set_param). */
int b2_params_set(b2_frame_params *p, const char *key, const char *value);

/* Parse "256M"-style sizes (K, M, G, T suffixes, powers of 1024). */
int b2_parse_size(const char *s, uint64_t *out);

/* ---- extended attributes (src/file/xattr.c, owned by the FUSE helper) ----
 * A frame's properties as "user.b2.*" attributes with text values:
 *   user.b2.codec clevel filters typesize chunksize blocksize nchunks cbytes
 *   nbytes cratio, and for a frame with a b2nd metalayer also shape,
 *   chunkshape, blockshape (as "AxBxC") and dtype;
 *   user.b2.meta.NAME    raw bytes of each fixed-length metalayer;
 *   user.b2.vlmeta.NAME  decompressed bytes of each variable-length one.
 * Both calls follow listxattr/getxattr: with cap 0 they return the size
 * needed and write nothing; B2_E_RANGE when cap is too small. */

/* A new .npy file whose header is spelled otherwise than numpy.save
 * spells it (cnpy and older numpy pad to 16 bytes; other padding, key
 * order or spacing) keeps that header in this variable-length metalayer
 * (a msgpack bin, as python-blosc2 reads every vlmetalayer), and its .npy
 * view shows it for as long as it describes the array as numpy.save's
 * header would (the same descr text, C order, the same shape; a resize
 * or a damaged value gives numpy.save's), so the file reads back as
 * written. */
#define B2_NPY_HEADER_VLMETA "b2fs.npyhdr"
/* Largest such header kept (a header numpy writes is far shorter). */
#define B2_NPY_HEADER_KEPT_MAX 65536
/* Stage in writable frame fr, of array a, the header npy (len bytes) a .npy
 * file of a was written with, when numpy.save spells a's otherwise (what
 * a new .npy file and `b2f pack` do).  1 staged, 0 not needed, or a code
 * (B2_E_LIMIT over B2_NPY_HEADER_KEPT_MAX). */
int b2_npy_header_keep(b2_frame *fr, const b2_b2nd *a, const void *npy, size_t len);

/* Largest attribute value Linux passes (XATTR_SIZE_MAX). */
#define B2_XATTR_VALUE_MAX 65536

/* Names, each NUL-terminated, into buf.  Returns the total length.
 * Variable-length metalayers larger than B2_XATTR_VALUE_MAX are left out
 * of the list (b2_file_xattr_get still returns them). */
ssize_t b2_file_xattr_list(b2_file *f, char *buf, size_t cap);

/* Value of `name` (no NUL added).  Returns its length, or B2_E_NOENT for a
 * name the frame does not have. */
ssize_t b2_file_xattr_get(b2_file *f, const char *name, void *buf, size_t cap);

/* 1 for the attributes that follow from what a frame holds and how it is
 * stored, not from a choice: nchunks, cbytes, nbytes, cratio, kind, shape,
 * dtype and the metalayer that marks its kind (user.b2.meta.b2nd, ...).
 * A copy of a frame's data brings its own; the creation parameters
 * (codec ... blockshape) are set by b2_file_set_param before the data. */
int b2_file_xattr_derived(const char *name);
/* ---- end of extended attributes ---- */

#ifdef __cplusplus
}
#endif
#endif /* B2_FILE_H */
