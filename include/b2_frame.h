/*
 * b2_frame.h - layer 3: frames (containers of chunks).
 *
 * A frame is either contiguous (one file: header, chunks, index chunk,
 * trailer) or sparse (a directory holding `chunks.b2frame`, whose chunks
 * section holds only the index, and one `%08X.chunk` file per chunk).  Both
 * the current layout (14-element header, vlmetalayers in the trailer) and
 * the older one (13-element header, usermeta chunk) are read.
 *
 * Every read function below may be called from several threads at once.
 * A frame opened read-only is immutable.  A frame opened for writing
 * (b2_frame_create, b2_frame_open_rw) may also be changed by writing calls
 * from other threads meanwhile: readers then see the staged state (what
 * has been put, even before it is committed).  Chunks are identified by
 * their logical index 0..nchunks-1 (index order, not file order).
 *
 * Index entries that are special values (zeros, NaN, uninitialised) read
 * as the equivalent special chunk; uninitialised chunks read as zeros.
 * Frames of variable-length chunks (chunksize 0) take each chunk's size
 * from its own header at open; a special entry there has no size and is
 * refused.  In the older layout the trailer's usermeta chunk (when not
 * empty) is offered as the variable-length metalayer "usermeta".
 */
#ifndef B2_FRAME_H
#define B2_FRAME_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "b2_chunk.h"
#include "b2_codec.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct b2_frame b2_frame;

enum b2_layout { B2_LAYOUT_CONTIGUOUS = 0, B2_LAYOUT_SPARSE = 1 };

typedef struct b2_frame_info {
  int layout;           /* B2_LAYOUT_* */
  int legacy;           /* 1 for the older 13-element header layout */
  int format_version;   /* general_flags bits 0-3 */
  int varlen_chunks;    /* chunks of variable length (chunksize 0) */
  int vlblocks;         /* general_flags bit 7 */
  int64_t nbytes;       /* logical (uncompressed) size */
  int64_t cbytes;       /* compressed size field from the header */
  int64_t frame_size;   /* frame_size field (contiguous: bytes used) */
  int32_t header_size;
  int64_t nchunks;
  int32_t chunksize;    /* 0 for variable-length chunks; -1 not set yet
                           (an empty frame; the first chunk put sets it) */
  int32_t blocksize;
  int32_t typesize;
  int codec;            /* B2_CODEC_* default of the frame */
  int codec_meta;       /* its parameter (the ZFP codecs), 0 if none */
  int clevel;
  int splitmode;        /* B2_SPLIT_* (0 when not recorded) */
  uint8_t filters[B2_MAX_FILTERS];
  uint8_t filters_meta[B2_MAX_FILTERS];
  int nmeta;            /* fixed-length metalayers in the header */
  int nvlmeta;          /* variable-length metalayers in the trailer */
} b2_frame_info;

/* Open the frame at `path` (a file, or a sparse-frame directory) read-only.
 * Validates header, trailer and index against the real file sizes; on
 * error returns a negative code with a detail naming what is wrong. */
int b2_frame_open(const char *path, b2_frame **out);
/* The same for entry `name` of directory dirfd (any descriptor of it,
 * O_PATH included; AT_FDCWD for the working directory), whatever the
 * length of the directory's path; dirfd is used during the call only (the
 * frame file and its .b2lock sidecar are opened there).  A frame opened
 * for writing at a directory (b2_frame_open_rw_at, b2_frame_create_at)
 * keeps a descriptor of it: a writer rewrites it there (compaction, redo
 * files) even after that directory was moved. */
int b2_frame_open_at(int dirfd, const char *name, b2_frame **out);
/* A new descriptor of the directory a frame was opened at for writing by
 * an "at" call, and in *name the name there; -1 for a frame opened by path
 * or read-only. */
int b2_frame_home(const b2_frame *f, const char **name);
/* The frame opened by an "at" call now is entry `name` of directory dirfd
 * (any descriptor of it): it was renamed there, and its writer rewrites,
 * recreates and redoes it there from now on (a sparse frame's own
 * directory descriptor follows it anyway).  The caller keeps the frame to
 * itself meanwhile.  0, B2_E_INVAL for a frame opened by path, or the code
 * of the failed open of the directory (nothing changed then). */
int b2_frame_rehome(b2_frame *f, int dirfd, const char *name);

/* Open, read-only, a contiguous frame that lies inside another file: the
 * `length` bytes at `offset` of the open regular file `fd` (a member of a
 * zip archive, read in place).  The frame keeps its own duplicate of fd.
 * Offsets in the frame count from `offset`, and nothing past
 * offset+length is read.  `name` names the frame in messages and in
 * b2_frame_path ("store.b2z:a/b.b2nd").  Such a frame cannot be written. */
int b2_frame_open_fd(int fd, int64_t offset, int64_t length, const char *name,
                     b2_frame **out);

/* Open, read-only, the frame held in data[0..len) (copied into an
 * anonymous memory file: the caller may free data at once). */
int b2_frame_open_mem(const void *data, size_t len, const char *name,
                      b2_frame **out);
void b2_frame_close(b2_frame *f);

/* The frame's properties.  For a writable frame the fields change with
 * writing calls (nbytes, nchunks, nmeta...); a thread that reads them while
 * another writes takes a consistent copy with b2_frame_info_copy. */
const b2_frame_info *b2_frame_get_info(const b2_frame *f);
int b2_frame_info_copy(const b2_frame *f, b2_frame_info *out);
const char *b2_frame_path(const b2_frame *f);

/* Keeping a parsed frame across opens (src/file/park.c).  b2_frame_detach
 * closes the file of a read-only contiguous frame opened by path with no
 * .b2lock sidecar (else B2_E_INVAL): only
 * b2_frame_close may follow, or reuse through b2_frame_open_reusing.  That
 * opens `path` as b2_frame_open does, then asks fn(ctx, st) (st: fstat of
 * the file just opened) for a detached frame parsed from that same file
 * unchanged; given one, it gets the new descriptor and is returned instead
 * of parsing the file again (fn hands it over; NULL: parse). */
struct stat;
typedef b2_frame *(*b2_frame_reuse_fn)(void *ctx, const struct stat *st);
int b2_frame_open_reusing(const char *path, b2_frame_reuse_fn fn, void *ctx,
                          b2_frame **out);
/* The same at entry `name` of directory dirfd (see b2_frame_open_at). */
int b2_frame_open_reusing_at(int dirfd, const char *name, b2_frame_reuse_fn fn, void *ctx,
                             b2_frame **out);
int b2_frame_detach(b2_frame *f);
/* A probe: open as b2_frame_open_reusing (dirfd -1, `name` a path) or
 * b2_frame_open_reusing_at (fn may be NULL), to learn what the frame holds
 * rather than to read it: its files are opened with O_NOATIME where the
 * caller may (the files' owner, or CAP_FOWNER), so reading the header,
 * index and trailer leaves the source's access time alone.  Close it (or
 * detach it) soon: its reads never count as reads of the data. */
int b2_frame_open_probe(int dirfd, const char *name, b2_frame_reuse_fn fn, void *ctx,
                        b2_frame **out);

/* The frame file's status (fstat) when it was opened by path (sparse
 * frames: chunks.b2frame's): with st_dev, st_ino, st_size, st_mtim and
 * st_ctim it identifies the bytes the frame was parsed from.  B2_E_INVAL
 * for frames opened otherwise (b2_frame_open_fd, _mem). */
int b2_frame_stat(const b2_frame *f, struct stat *st);
/* The status (fstat) of the file the frame is read and written through
 * now: a writable contiguous frame's rewrites (compaction, the commit of
 * an empty frame) give it a new file; a sparse frame's is its
 * chunks.b2frame.  Thread-safe against the frame's own rewrites. */
int b2_frame_file_now(b2_frame *f, struct stat *st);

/* Logical geometry: byte offset of chunk i in the logical content (i may
 * be nchunks: then nbytes), its decoded size, and the chunk holding
 * logical byte `offset`.  Out of range: B2_E_RANGE. */
int64_t b2_frame_chunk_start(const b2_frame *f, int64_t i);
int32_t b2_frame_chunk_nbytes(const b2_frame *f, int64_t i);
int64_t b2_frame_chunk_at(const b2_frame *f, int64_t offset);

/* Kind of chunk i without reading it: B2_SPECIAL_* from a special index
 * offset, else B2_SPECIAL_NONE (the chunk's own header may still be
 * special).  Negative code if i is out of range. */
int b2_frame_chunk_special(const b2_frame *f, int64_t i);

/* Stored size of chunk i in bytes (0 for special offsets), or < 0. */
int64_t b2_frame_chunk_cbytes(const b2_frame *f, int64_t i);

/* Read the stored bytes of chunk i into a malloc'd buffer (*chunk, *len;
 * the caller frees).  A special index offset yields an equivalent special
 * chunk.  The chunk header is validated before the body is read. */
int b2_frame_read_chunk(b2_frame *f, int64_t i, uint8_t **chunk, size_t *len);

/* b2_frame_read_chunk into a buffer from alloc(n) (NULL alloc: malloc),
 * handed to give_back(p) if the read fails: a caller that keeps chunks
 * in memory of its own kind (the cache's buffers) gets the chunk read
 * straight there, without a copy. */
int b2_frame_read_chunk_into(b2_frame *f, int64_t i, uint8_t *(*alloc)(size_t n),
                             void (*give_back)(uint8_t *p), uint8_t **chunk, size_t *len);

/* Decode chunk i entirely into dst (dstcap >= its nbytes); returns nbytes.
 * Decode bytes [offset, offset+n) of chunk i, decoding only the blocks
 * that cover them; returns n. */
int b2_frame_decode_chunk(b2_frame *f, int64_t i, void *dst, size_t dstcap);
int b2_frame_decode_range(b2_frame *f, int64_t i, size_t offset, size_t n,
                          void *dst);

/* b2_frame_decode_range reading from the file only what it decodes: the
 * chunk's header and block starts, then the blocks that cover the range
 * (b2_chunk_range_plan), a few KiB instead of the whole chunk for a small
 * read.  Chunks whose checksum is verified (b2_frame_chunk_has_csum),
 * special, dictionary and variable-length chunks, ranges over more than
 * B2_CHUNK_SPANS blocks, and chunks whose blocks are not stored one after
 * another are read whole.  Same result and errors.  Returns n. */
int b2_frame_read_range(b2_frame *f, int64_t i, size_t offset, size_t n, void *dst);

/* 1 if reading chunk i verifies a stored checksum (over the whole chunk),
 * else 0. */
int b2_frame_chunk_has_csum(const b2_frame *f, int64_t i);

/* b2_frame_decode_chunk with the blocks shared among the idle workers of
 * `pool` (b2_chunk_decode_par); NULL: the calling thread alone. */
int b2_frame_decode_chunk_par(b2_frame *f, int64_t i, void *dst,
                              size_t dstcap, struct b2_pool *pool);

/* Fixed-length metalayers (header): names by position and content by
 * name (pointer valid while the frame is open; for a writable frame, a
 * content replaced by b2_frame_meta_set stays readable until close). */
const char *b2_frame_meta_name(const b2_frame *f, int k);
int b2_frame_meta_get(const b2_frame *f, const char *name,
                      const uint8_t **data, size_t *len);

/* Variable-length metalayers (trailer): names by position; content is
 * decompressed into a malloc'd buffer the caller frees (data NULL: only
 * *len, the size its chunk header gives, nothing decoded). */
const char *b2_frame_vlmeta_name(const b2_frame *f, int k);
int b2_frame_vlmeta_get(const b2_frame *f, const char *name, uint8_t **data,
                        size_t *len);

/* What a frame holds, told from its fixed metalayers as python-blosc2
 * tells its objects apart.  Only SCHUNK (no marker: raw bytes) and
 * NDARRAY (`b2nd` or `caterva`) are data whose decompressed bytes mean
 * something; the others are objects whose chunks are not their data
 * (lazy expressions decompress to zeros, ObjectArray and BatchArray chunks
 * are msgpack items or variable-length blocks, a Proxy's cache holds only
 * fetched chunks, EmbedStore and the embed.b2e of DictStore/TreeStore hold
 * other frames).  Markers: `b2o` (its "kind": lazyexpr, lazyudf, c2array;
 * B2OBJECT for another), `LazyArray`, `vlarray`, `batcharray`,
 * `listarray`, `proxy-source`, `b2embed`, `b2dict`, `b2tree`. */
enum {
  B2_KIND_SCHUNK = 0,
  B2_KIND_NDARRAY,
  B2_KIND_LAZYEXPR,
  B2_KIND_LAZYUDF,
  B2_KIND_C2ARRAY,
  B2_KIND_B2OBJECT,
  B2_KIND_LAZYARRAY,
  B2_KIND_OBJECTARRAY,
  B2_KIND_BATCHARRAY,
  B2_KIND_LISTARRAY,
  B2_KIND_PROXY,
  B2_KIND_EMBEDSTORE,
  B2_KIND_DICTSTORE,
  B2_KIND_TREESTORE,
  /* Not a frame at all: a file that does not start like one
   * (b2_frame_starts_like); only b2_frame_kind_at says it. */
  B2_KIND_NONE,
};

/* Does a file whose first `len` bytes are buf start like a frame?  A
 * frame's first ten bytes are a msgpack array of 14 elements (13 in the
 * older layout), 0x9e (0x9d), then the string "b2frame" with its NUL,
 * 0xa8 "b2frame\0".  The file starts like a frame when bytes 0-1 are
 * 0x9e or 0x9d and 0xa8, or when bytes 2-9 are "b2frame\0": any single
 * damaged byte there still leaves it a frame (a damaged one), while text
 * never starts that way (0x9d and 0x9e are no character's first byte in
 * UTF-8), nor does an empty file.  1 or 0. */
int b2_frame_starts_like(const uint8_t *buf, size_t len);

/* The kind of an open frame (B2_KIND_*), or a negative code. */
int b2_frame_kind(const b2_frame *f);

/* The kind of the frame `name` in directory dirfd (a file, or a sparse
 * frame's directory; never following a symlink; AT_FDCWD: `name` is a
 * path, opened as b2_frame_open opens one), reading only its header:
 * for deciding how to show an entry without opening the whole frame.
 * B2_KIND_NONE when the file (a sparse frame's chunks.b2frame) does not
 * start like a frame at all (b2_frame_starts_like: text, an empty file,
 * other formats); a negative code when it starts like one but is no
 * readable frame (damaged), or cannot be read. */
int b2_frame_kind_at(int dirfd, const char *name);
/* The same, `known` (may be NULL) being the lstat of `name` just taken:
 * a regular file's needs no second one to find the kind remembered. */
int b2_frame_kind_at_st(int dirfd, const char *name, const struct stat *known);
struct stat;
/* The kind b2_frame_kind_at last read for the header file (a frame file,
 * or a sparse frame's chunks.b2frame) that `st` describes while it is
 * unchanged (device, inode, size, modification and change times), and in
 * *nbytes (may be NULL) the uncompressed size its header gave: the size of
 * the logical content.  -1 when not known that way.  No system call. */
int b2_frame_kind_seen(const struct stat *st, int64_t *nbytes);

/* 1 when fixed metalayer `meta` is one of the markers above (its
 * presence decides the kind), else 0. */
int b2_frame_kind_marker(const char *meta);

/* "schunk", "ndarray", "lazyexpr", "objectarray", ... ("unknown"). */
const char *b2_frame_kind_name(int kind);

/* 1 for the kinds whose decompressed bytes are their data (SCHUNK,
 * NDARRAY), else 0. */
int b2_frame_kind_is_data(int kind);

/* ---- sharing frames with other processes --------------------------------
 * The reference library (c-blosc2 3.2+, python-blosc2 with locking=True or
 * BLOSC_LOCKING=1) serialises access to a frame with flock on a sidecar,
 * `<file>.b2lock` (contiguous) or `<dir>/.b2lock` (sparse): shared while
 * reading header, index and chunks, exclusive while changing the frame,
 * with a generation counter (bytes 8-15, host order) bumped by every
 * exclusive locker.  Frames take part when the sidecar exists (AUTO, the
 * default; BLOSC_LOCKING set to anything but "" or "0" acts as ON), always
 * (ON: the sidecar is created) or never (OFF).  A read-only frame loads
 * under the shared lock and reads every stored chunk under it, failing
 * with B2_E_STALE once the counter has moved (the other program may have
 * rewritten the bytes in place: open the frame again).  A writable frame
 * holds the exclusive lock from b2_frame_open_rw (B2_E_BUSY at once when
 * another writer has the frame) to its close, and bumps the counter then
 * and at each commit and compaction.  Frames inside other files
 * (b2_frame_open_fd) never lock.  See src/frame/lock.c. */
#define B2_FRAME_LOCK_SUFFIX ".b2lock" /* beside a contiguous frame */
#define B2_FRAME_LOCK_FILE ".b2lock"   /* inside a sparse frame */
enum { B2_LOCKING_AUTO = 0, B2_LOCKING_ON, B2_LOCKING_OFF };

/* Set the mode for frames opened from now on (process-wide). */
void b2_frame_set_locking(int mode);

/* 1 if f takes part in sidecar locking. */
int b2_frame_locked(const b2_frame *f);

/* The counter in the sidecar of the frame at `path` (a file or a sparse
 * frame's directory), read without locking (a hint for change detection):
 * 0 and *gen, B2_E_NOENT when there is no sidecar. */
int b2_frame_lock_gen(const char *path, uint64_t *gen);

/* Tell the other lockers of frame `name` in directory dirfd that what it
 * stands for changed without the frame itself changing (python-blosc2's
 * stores watch their EmbedStore's counter for changes to the value files
 * beside it): take its sidecar's exclusive lock, bump the counter, let go.
 * 0 also when it has no sidecar or locking is OFF; a code when the
 * sidecar cannot be locked or written. */
int b2_frame_lock_touch(int dirfd, const char *name);

/* ---- writing ----------------------------------------------------------
 * A writable frame stages changes in memory and in new bytes on disk;
 * b2_frame_commit makes them durable and visible to other openers.  The
 * files hold, at every instant, a valid frame with either the last
 * committed content or the new one (a crash loses only what was not
 * committed):
 *   contiguous  chunks are appended past the committed end of the file;
 *               commit appends the index chunk and the trailer, syncs,
 *               then rewrites the header's size fields in one write and
 *               syncs again.  Replaced chunks leave dead bytes, which
 *               b2_frame_compact reclaims (temporary file and rename).
 *   sparse      each new chunk goes to a chunk file with an unused number
 *               (never over a file the committed index uses); commit syncs
 *               them, writes chunks.b2frame to a temporary file, syncs it,
 *               renames it into place, syncs the directory, then deletes
 *               the chunk files no longer referenced.
 * Frames are written as the reference library writes them (format version
 * 2, index chunk of int64 compressed with blosclz, empty fingerprint), so
 * the reference library opens them.  Only frames of fixed-size chunks in
 * the current layout can be opened for writing; others, and headers whose
 * fields are not at the reference's fixed places, give B2_E_UNSUPPORTED.
 * Writing calls on a read-only frame give B2_E_ROFS.  Writing calls are
 * serialised; readers of the same b2_frame run alongside. */

/* A fixed-length metalayer given at creation. */
typedef struct b2_frame_meta_init {
  const char *name;    /* 1-31 bytes */
  const void *data;
  size_t len;
} b2_frame_meta_init;

typedef struct b2_frame_params {
  int layout;          /* B2_LAYOUT_* */
  b2_cparams cparams;  /* recorded in the header (codec, clevel, filters,
                          typesize, blocksize, splitmode) */
  int32_t chunksize;   /* bytes of every chunk but the last (> 0) */
  int nmeta;           /* at most 16 */
  const b2_frame_meta_init *meta;
} b2_frame_params;

/* Contiguous, b2_cparams_default(), 1 MiB chunks, no metalayers. */
void b2_frame_params_default(b2_frame_params *p);

/* Create an empty frame at `path` (a file, or for B2_LAYOUT_SPARSE a
 * directory) and open it for writing.  B2_E_EXIST if `path` exists.  The
 * new frame is complete on disk (synced) when this returns. */
int b2_frame_create(const char *path, const b2_frame_params *p,
                    b2_frame **out);
/* The same at entry `name` of directory dirfd (see b2_frame_open_at). */
int b2_frame_create_at(int dirfd, const char *name, const b2_frame_params *p,
                       b2_frame **out);

/* Open an existing frame for reading and writing.  B2_E_UNSUPPORTED for
 * frames the writer cannot keep valid (older layout, variable-length
 * chunks or blocks, unusual header encodings), B2_E_BUSY if another
 * b2_frame holds it open for writing (an advisory lock). */
int b2_frame_open_rw(const char *path, b2_frame **out);
int b2_frame_open_rw_at(int dirfd, const char *name, b2_frame **out);

/* 1 if f was opened for writing. */
int b2_frame_writable(const b2_frame *f);

/* Replace chunk i (i < nchunks) or append one (i == nchunks) with an
 * encoded chunk of len bytes (its cbytes).  Every chunk holds chunksize
 * bytes except the last, which may hold fewer (putting the last chunk sets
 * nbytes; appending needs a full last chunk).  A chunk whose header says
 * zeros, NaN or uninitialised is stored as a special index entry.  The
 * bytes are written at once; the frame on disk is unchanged until commit.
 * Returns 0 or a negative code. */
int b2_frame_put_chunk(b2_frame *f, int64_t i, const void *chunk, size_t len);

/* Same for a chunk of `kind` (B2_SPECIAL_ZERO, _NAN, _UNINIT) holding
 * nbytes, stored only as a special index entry. */
int b2_frame_put_special(b2_frame *f, int64_t i, int kind, int32_t nbytes);

/* Set the logical size to nbytes.  Chunks past the end are dropped; new
 * chunks (growing) are zero special entries.  A last chunk that no longer
 * has the right size (a cut or grown partial chunk) must be put again by
 * the caller before commit (commit fails with B2_E_INVAL otherwise). */
int b2_frame_resize(b2_frame *f, int64_t nbytes);

/* Fixed-length metalayer `name`: replace its content, or add it (at most
 * 16).  The same size is updated in place at commit; a new metalayer or
 * another size makes commit rewrite the frame as compaction does. */
int b2_frame_meta_set(b2_frame *f, const char *name, const void *data,
                      size_t len);

/* Variable-length metalayers: set (add or replace; the content is stored
 * compressed as a chunk, as the reference library does) or delete (B2_E_NOENT
 * if absent).  At most 16 (the most the reference library writes). */
int b2_frame_vlmeta_set(b2_frame *f, const char *name, const void *data,
                        size_t len);
int b2_frame_vlmeta_del(b2_frame *f, const char *name);
/* The user's metalayers of a frame: the fixed ones that mark no kind
 * (python-blosc2's `meta=`) and the variable-length ones not named
 * "b2fs." (its vlmeta), copied out of `f` (b2_frame_user_meta_take), to
 * be staged on another frame that replaces it or copies it
 * (b2_frame_user_meta_put, committed with its next commit). */
typedef struct b2_frame_user_meta b2_frame_user_meta;
int b2_frame_user_meta_take(const b2_frame *f, b2_frame_user_meta **out);
int b2_frame_user_meta_put(b2_frame *f, const b2_frame_user_meta *m);
void b2_frame_user_meta_free(b2_frame_user_meta *m);
/* python-blosc2 reads the content of every vlmetalayer as one msgpack
 * object, and all of a frame's at once (`vlmeta.getall()`, `dict(vlmeta)`):
 * 0 when data is exactly one, else B2_E_INVAL saying what it is instead.
 * Content other programs set (b2fs's user.b2.vlmeta.* attributes) must
 * pass; b2_frame_vlmeta_set itself stores any bytes. */
int b2_frame_vlmeta_check(const void *data, size_t len);

/* Make everything staged durable and visible.  On failure (I/O error, no
 * space) returns the error: the files still hold the last committed frame
 * (or, when the very last sync failed, possibly the new one), and the
 * staged state stays in memory so a later commit can retry. */
int b2_frame_commit(b2_frame *f);

/* b2_frame_commit, saying the data committed is as of time t (its last
 * change, earlier than the commit): the checksum table's stamp and, when
 * anything was committed, the modification time of the header file (the
 * frame file, or a sparse frame's chunks.b2frame and its directory; with
 * a checksum table, the chunk files staged too).  Take t just below the
 * coarse clock (CLOCK_REALTIME_COARSE) at the last change: a later write
 * by another program then leaves a time above it.  NULL: b2_frame_commit. */
int b2_frame_commit_at(b2_frame *f, const struct timespec *t);

/* 1 if something is staged and not committed. */
int b2_frame_dirty(const b2_frame *f);

/* Give the frame the modification time t (the header file's: the frame
 * file, or a sparse frame's chunks.b2frame and its directory), committing
 * what is staged in the same commit.  The checksum table is committed
 * saying it is true at t, and a sparse frame's chunk files get t too: a
 * time set by hand (touch, cp -p, rsync -t through the mount) must not
 * read as another program's change, which the table would then no longer
 * vouch for (a sparse frame given a time in the future takes a later
 * change of a chunk file by another program for damage). */
int b2_frame_set_mtime(b2_frame *f, const struct timespec *t);

/* Bytes a compaction would reclaim: contiguous, the bytes between the
 * header and the end of the written data that no staged chunk uses (old
 * chunks, old indexes and trailers); sparse, the chunk files no staged
 * entry references.  *stored (when not NULL) gets the bytes these are
 * part of: contiguous, all from the header's end to the written end;
 * sparse, all chunk files.  Negative code on error. */
int64_t b2_frame_dead_bytes(b2_frame *f, int64_t *stored);

/* Commit, then rewrite the frame without dead bytes: contiguous, into a
 * temporary file in the same directory that is synced and renamed over the
 * frame (f then reads the new file); sparse, delete unreferenced chunk
 * files (leftovers of interrupted writers included).  Crash safe.
 * A contiguous frame whose file has other hard links keeps its file: the
 * synced temporary becomes the redo file `.NAME` B2_FRAME_REDO_SUFFIX, is
 * copied over the frame in place, and removed once the frame is synced
 * (the same for commits that rewrite the file: an empty frame, a header
 * of another size). */
int b2_frame_compact(b2_frame *f);

/* Suffixes of the engine's hidden temporaries: B2_FRAME_TEMP_SUFFIX for
 * the new file or directory of a creation, rewrite or remake, and
 * B2_FRAME_REDO_SUFFIX for the redo file of a hard-linked frame rewritten
 * in place (see b2_frame_compact). */
#define B2_FRAME_TEMP_SUFFIX ".b2tmp"
#define B2_FRAME_REDO_SUFFIX ".redo.b2tmp"
/* Longest temporary name: room is left for a `.b2lock` sidecar of it (a
 * remade frame is committed under its temporary name). */
#define B2_FRAME_TEMP_NAME_MAX (NAME_MAX + 1 - (int)sizeof B2_FRAME_LOCK_SUFFIX)
/* The one place a temporary's name is derived from entry `base` (a name,
 * no directory) and `suffix` (one of the two above): "." base suffix, or,
 * when that is longer than B2_FRAME_TEMP_NAME_MAX (a base near NAME_MAX),
 * "." + base's first bytes + "~" + 16 hex digits of a hash of base +
 * suffix, exactly B2_FRAME_TEMP_NAME_MAX bytes.  The same base always
 * gives the same name.  0, or -1 when it does not fit in cap. */
int b2_frame_temp_name(const char *base, const char *suffix, char *out, size_t cap);
/* Whether `name` has the shortened form of b2_frame_temp_name for
 * `suffix` (its base cannot be read back from it: compare the names that
 * candidate bases give). */
int b2_frame_temp_hashed(const char *name, const char *suffix);
/* Finish the in-place rewrite of frame file `base` of dirfd recorded by
 * its redo file (b2_frame_temp_name(base, B2_FRAME_REDO_SUFFIX); a crash
 * interrupted the copy): copy it over the frame, sync, remove it; only
 * remove it when no file is at `base`.  0 done (or no redo file), 1 when
 * a writer holds the frame (its own rewrite is under way: leave it),
 * negative code on error.  Call before the frame is read or written
 * again. */
int b2_frame_redo(int dirfd, const char *base);
/* Make the contiguous frame *fp (open for writing) anew at its name with
 * parameters p and nbytes of logical content (zero chunks), atomically:
 * the new frame is created, sized and committed under a temporary name,
 * then renamed over the old file while *fp's write session still holds
 * the `.b2lock` sidecar, and that lock passes to the new frame (*fp, open
 * for writing).  Other processes never find the name missing or the new
 * frame half made; lockers see the old frame, then the new one once the
 * session ends.  On failure before the rename *fp is unchanged; after it,
 * *fp is NULL when the new frame could not be opened.  B2_E_UNSUPPORTED
 * for sparse frames (remove and create instead). */
int b2_frame_remake(b2_frame **fp, const b2_frame_params *p, int64_t nbytes);
/* Remove the temporary `name` of dirfd that creating or rewriting a frame
 * left behind (`.NAME.b2tmp`: a file, or the directory of a sparse
 * creation holding nothing but its index), unless a process holds it: the
 * engine keeps an exclusive flock on each temporary from the moment it
 * makes it until it is renamed into place, so a crash's leftover is free
 * and a creation or rewrite under way (in this process or another, such as
 * a second daemon over the same SOURCE) is not.  1 removed, 0 left (held,
 * gone meanwhile, or not such a temporary), negative code on error. */
int b2_frame_drop_temp(int dirfd, const char *name);
/* Open `path` for writing, compact it, close it. */
int b2_frame_compact_path(const char *path);

/* Strict conformance check (for `b2f verify`): header, trailer and index
 * sizes consistent, frame_size within the file, chunks between the header
 * and the index chunk, every chunk header valid and in agreement with the
 * frame (typesize, nbytes == chunksize except the last), sparse chunk files
 * present.  Checks the staged state of a writable frame.  Returns 0 or the
 * first problem (a negative code with a detail). */
int b2_frame_check(b2_frame *f);

/* ---- checksums ----------------------------------------------------------
 * Frames b2fs writes carry the vlmetalayer B2_FRAME_CSUM_VLMETA: the
 * CRC-32C of every stored chunk (its bytes as stored, compressed), written
 * by the same commit as the index, so the two always agree on disk.  It is
 * an ordinary vlmetalayer to other readers (the reference library opens
 * such frames unchanged); its content is MessagePack (see
 * src/frame/checksum.c).  Reads of a chunk (b2_frame_read_chunk,
 * b2_frame_decode_chunk, b2_frame_decode_range, b2_frame_check) verify it
 * first and fail with B2_E_CHECKSUM, detail "chunk N: checksum mismatch
 * (stored 0x..., computed 0x...)".  A chunk is always read whole, so a
 * range decode verifies (and pays a CRC over) the whole stored chunk.
 * Frames written by other tools have no checksums and are read unchecked;
 * opened for writing, they gain the table at their next commit: chunks
 * put from then on have a checksum, existing ones get theirs at that
 * commit when they add up to at most 64 MiB, else at the next compaction.
 * Special index entries (zeros, NaN, uninitialised) have no stored bytes
 * and nothing to check.  A table that does not fit the frame (damaged,
 * wrong length) is ignored: reads go unchecked, and b2_frame_checksums
 * tells why. */
#define B2_FRAME_CSUM_VLMETA "b2fs.crc32c"

enum b2_csum_state {
  B2_CSUM_NONE = 0,     /* no table: nothing is verified */
  B2_CSUM_ALL = 1,      /* every stored chunk has a checksum */
  B2_CSUM_PARTIAL = 2,  /* some stored chunks have none (see above) */
  B2_CSUM_IGNORED = 3   /* a table is present but unusable (why) */
};

typedef struct b2_frame_csum_info {
  int state;            /* B2_CSUM_* */
  int verify;           /* reads verify (b2_frame_set_verify) */
  int64_t checked;      /* stored chunks with a checksum */
  int64_t unchecked;    /* stored chunks without */
  char why[160];        /* why a table present was ignored ("" if not) */
} b2_frame_csum_info;

/* Checksum state of the frame (staged state for a writable frame). */
int b2_frame_checksums(const b2_frame *f, b2_frame_csum_info *out);

/* Turn verification on reads on (the default at open) or off; any thread,
 * any time.  Writers keep the table up to date either way. */
void b2_frame_set_verify(b2_frame *f, int on);

/* The block shape its chunks need to decode and encode (the ZFP codecs
 * and the NDCELL and NDMEAN filters, b2_chunk.h): an array's, given by the layer that reads its b2nd
 * metalayer (b2_b2nd_attach), before the frame is shared between threads.
 * b2_frame_geom: NULL until given. */
void b2_frame_set_geom(b2_frame *f, const b2_chunk_geom *g);
const b2_chunk_geom *b2_frame_geom(const b2_frame *f);

#ifdef __cplusplus
}
#endif
#endif /* B2_FRAME_H */
