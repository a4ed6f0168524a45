/*
 * frame_impl.h - internals of layer 3 (frames), shared by the .c files of src/frame.
 *
 * Parsing (header.c, legacy.c, meta.c, trailer.c, index.c) works on byte
 * buffers; I/O (io.c, sframe.c) reads them from files; frame.c puts the
 * two together at open and read.c serves chunks.  A frame opened
 * read-only is immutable, so its readers take no lock.  A writable frame
 * (wstate.c, put.c, commit.c, compact.c, wmeta.c, create.c) carries a
 * `b2_frame_w`: readers then hold its rwlock (read side) while they look
 * at the index, the geometry or the metalayers and while they read chunk
 * bytes; writers serialise on its mutex and take the write side only to
 * change those.  checksum.c keeps the per-chunk CRC-32C table (vlmetalayer
 * b2fs.crc32c) beside the index and verifies chunks as read.c loads them.
 */
#ifndef B2_FRAME_IMPL_H
#define B2_FRAME_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "b2_frame.h"
#include "common/msgpack.h"

/* ---- format constants (learned from the reference library) ------------ */
#define B2_FRAME_MAGIC "b2frame"          /* 8 bytes with its NUL */
#define B2_FRAME_NELEM 14                 /* header array, current layout */
#define B2_FRAME_NELEM_LEGACY 13          /* header array, older layout */
#define B2_FRAME_MAX_VERSION 3            /* general_flags bits 0-3 */
#define B2_FRAME_FLAG_VARLEN 0x40         /* general_flags bit 6 */
#define B2_FRAME_FLAG_VLBLOCKS 0x80       /* general_flags bit 7 */
#define B2_FRAME_TYPE_CONTIGUOUS 0
#define B2_FRAME_TYPE_SPARSE 1
#define B2_FRAME_CODEC_UDCODEC 6          /* codec in the udcodec byte */
#define B2_FRAME_TRAILER_MIN 25           /* smallest trailer */
#define B2_FRAME_TRAILER_LEN_BACK 22      /* trailer_len sits this far back */
#define B2_FRAME_MAX_META 16              /* header metalayers */
#define B2_FRAME_MAX_VLMETA 8192          /* trailer metalayers */
#define B2_FRAME_META_NAME_MAX 31
#define B2_FRAME_SPARSE_INDEX "chunks.b2frame"
/* Index entries (or chunk starts) kept in memory at most (256 MiB of
 * int64); a larger table is refused with B2_E_LIMIT rather than allocated
 * from a size field.  A special index chunk needs no table. */
#define B2_FRAME_MAX_CHUNKS ((int64_t)1 << 25)
/* Largest decompressed vlmetalayer handed out. */
#define B2_FRAME_MAX_VLMETA_BYTES ((size_t)256 << 20)
/* Special offsets in the index: bit 63 set, kind in bits 56-58. */
#define B2_FRAME_SPECIAL_BIT ((uint64_t)1 << 63)

/* One metalayer: name and where its content lies in the region (header or
 * trailer buffer) it was read from. */
typedef struct b2_frame_meta {
  char name[B2_FRAME_META_NAME_MAX + 1];
  uint32_t pos; /* content offset inside the region */
  uint32_t len; /* content bytes */
} b2_frame_meta;

/* What the header says, before anything is checked against the files. */
typedef struct b2_frame_header {
  int legacy;
  int version;
  int frame_type;       /* B2_FRAME_TYPE_* */
  int general_flags;
  int64_t header_size;
  uint64_t frame_size;
  int64_t nbytes;
  int64_t cbytes;
  int64_t typesize;
  int64_t blocksize;
  int64_t chunksize;
  int codec, codec_meta, clevel, splitmode;
  int has_vlmeta;       /* current: has_vlmetalayers; legacy: has_usermeta */
  uint8_t filters[B2_MAX_FILTERS];
  uint8_t filters_meta[B2_MAX_FILTERS];
  size_t meta_pos;      /* where the metalayers section starts */
} b2_frame_header;

/* Checksums of the stored chunks (checksum.c).  crc[i] is the CRC-32C of
 * chunk i's stored bytes (meaningless for special entries); bit i of
 * `unknown` (NULL: none) marks a chunk whose checksum is not known.  NULL
 * crc: the frame carries no usable table (read-only frames only; `why`
 * says why a vlmetalayer present was ignored).  Changed with the index,
 * under the same lock. */
typedef struct b2_frame_csum {
  uint32_t *crc;
  uint8_t *unknown;
  int64_t cap;          /* entries allocated */
  atomic_int verify;    /* reads check (b2_frame_set_verify) */
  int64_t stamp;        /* the modification time (ns) the table vouches
                           for: the header file's, set by its writer */
  int foreign;          /* the header file's time is not the stamp:
                           another program wrote it since */
  int64_t stamp_at;     /* with has_at: the next commit's stamp, a time
                           set by hand (b2_frame_set_mtime), not the
                           clock's (any time: 0 and before 1970 too) */
  int has_at;
  int64_t on_disk;      /* with has_on_disk: the stamp of the table on
                           disk, true of the committed frame (loaded and
                           trusted, or sealed by this writer's last
                           commit) */
  int has_on_disk;
  struct stat seen;     /* the header file when the frame was read */
  char why[160];
} b2_frame_csum;

/* Sidecar locking with other processes (lock.c). */
typedef struct b2_frame_lk b2_frame_lk;

struct b2_frame {
  b2_frame_info info;
  char *path;
  int fd;               /* contiguous: frame file; sparse: chunks.b2frame */
  int dirfd;            /* sparse: the directory; else -1 */
  int home_dir;         /* opened at (dirfd, name): a descriptor of that
                           directory (-1: opened by path) */
  char *home_name;      /* ... and the name in it */
  int home_borrowed;    /* home_dir is the caller's, for the time of a
                           read-only open only (never closed here) */
  int noatime;          /* a probe (b2_frame_open_probe): files opened
                           with O_NOATIME where permitted */
  int64_t file_size;    /* size of the frame file when opened (a frame
                           inside another file: the bytes it may use) */
  int64_t base;         /* where the frame starts in fd (0 but for frames
                           opened inside another file, b2_frame_open_fd);
                           every offset below counts from here */
  struct stat st;       /* fstat of the frame file (sparse: chunks.b2frame)
                           when opened by path (st_valid), else unset */
  int st_valid;
  /* A small frame file (at most B2_FRAME_IMAGE_MAX bytes) is read whole by
   * one pread at open: `image` holds its bytes [base, base + file_size),
   * and reads of them (header, trailer, index, chunks) are copied from it
   * (io.c) until the chunk of a one-chunk frame has been read, when it is
   * freed.  NULL otherwise (and always for frames opened for writing).
   * img_mu guards freeing it; set up when an image is made. */
  _Atomic(uint8_t *) image;
  pthread_mutex_t img_mu;

  /* Layout of the frame file. */
  int64_t data_pos;     /* chunk offsets count from here (header_size) */
  int64_t data_end;     /* contiguous: chunks end here (the index) */
  int64_t index_pos;
  int32_t index_cbytes; /* 0 when there is no index (empty frame) */
  int64_t trailer_pos;
  uint32_t trailer_len;

  uint8_t *header;      /* header_size bytes */
  uint8_t *trailer;     /* trailer_len bytes */
  b2_frame_meta *meta;  /* info.nmeta, content in `header` */
  b2_frame_meta *vlmeta;/* info.nvlmeta, content in `trailer` */

  /* Index: raw entries (byte offsets from data_pos, sparse: chunk file
   * numbers, or special values).  `offsets` is NULL when the index chunk
   * is a special chunk: then every entry is `uniform_offset`. */
  int64_t *offsets;
  int64_t uniform_offset;
  /* Variable-length chunks: starts[i] is the logical offset of chunk i,
   * starts[nchunks] == nbytes.  NULL for fixed-size chunks. */
  int64_t *starts;

  b2_frame_csum csum;
  b2_chunk_geom geom;   /* an array's block shape (b2_frame_set_geom); ndim 0
                           when not given */

  /* The `.b2lock` sidecar when this frame takes part in locking, else
   * NULL (lock.c). */
  b2_frame_lk *lk;
  /* Writer state; NULL for a frame opened read-only. */
  struct b2_frame_w *w;
};

/* ---- the fixed part of a current-layout header --------------------------
 * The reference writes the 14 elements with fixed-width encodings, so each
 * field sits at a known byte; a writer patches them in place.  Values are
 * big-endian after their marker byte. */
#define B2_FH_HEADER_SIZE 11 /* int32 (0xd2 at 10) */
#define B2_FH_FRAME_SIZE 16  /* uint64 (0xcf at 15) */
#define B2_FH_FLAGS 25       /* general flags (str4 0xa4 at 24) */
#define B2_FH_TYPE 26        /* frame type */
#define B2_FH_CODECS 27      /* codec | clevel << 4 */
#define B2_FH_OTHER 28       /* splitmode - 1 */
#define B2_FH_NBYTES 30      /* int64 (0xd3 at 29) */
#define B2_FH_CBYTES 39      /* int64 (0xd3 at 38) */
#define B2_FH_TYPESIZE 48    /* int32 (0xd2 at 47) */
#define B2_FH_BLOCKSIZE 53   /* int32 (0xd2 at 52) */
#define B2_FH_CHUNKSIZE 58   /* int32 (0xd2 at 57) */
#define B2_FH_HAS_VLMETA 68  /* 0xc2 false / 0xc3 true */
#define B2_FH_PIPELINE 70    /* fixext16 type byte: number of filters */
#define B2_FH_UDCODEC 77
#define B2_FH_FIXED 87       /* the metalayers section starts here */
/* A header no longer than this is rewritten whole by one write that stays
 * inside the first disk sector. */
#define B2_FRAME_SECTOR 512
/* Format byte written by this writer: version 2, 64-bit offsets. */
#define B2_FRAME_GENERAL_FLAGS 0x12
#define B2_FRAME_TRAILER_VERSION 1
/* Largest number of vlmetalayers the reference library writes back. */
#define B2_FRAME_MAX_VLMETA_WRITE 16

/* ---- writer state --------------------------------------------------------
 * The in-memory frame (f->offsets, f->info, f->header and f->meta, f->trailer
 * and f->vlmeta) is the *staged* state: what readers of this b2_frame see.
 * The files hold the last committed state until b2_frame_commit. */
typedef struct b2_frame_w {
  pthread_rwlock_t lock;   /* index, geometry, metalayers, descriptors */
  pthread_mutex_t wmu;     /* one writing call at a time */
  int64_t cap;             /* entries allocated in f->offsets and csize */
  int32_t *csize;          /* stored bytes of chunk i (0: special entry) */
  int dirty;               /* something staged since the last commit */
  int header_dirty;        /* metalayers changed since the last commit */
  int header_resized;      /* ... and the header's length changed */
  char *rpath;             /* contiguous: the frame file's real path */
  uint8_t *c_header;       /* header bytes as committed */
  size_t c_header_len;
  int64_t c_frame_size;    /* frame_size as committed */
  /* A sync failed since the last commit: the kernel may have dropped the
   * bytes it could not write while marking them clean, so a later sync
   * would not write them.  The next commit writes every chunk staged
   * since the last commit again first (commit.c, restage). */
  int sync_failed;
  /* Contiguous: the end of the bytes written so far (committed frame,
   * staged chunks, index and trailer of failed commits); new bytes go
   * here and nothing below it is ever overwritten. */
  int64_t append_pos;
  /* Sparse: per chunk file number n < ncap, whether the committed index
   * (or one that may have been committed) references it (cbit bit 0; bit 1
   * marks files synced during a commit), how many staged entries do, and
   * its size. */
  int64_t ncap;
  uint8_t *cbit;
  uint32_t *sref;
  int32_t *nsize;
  int64_t next_free;       /* no free number below this */
  /* Chunks whose expected size changed (resize): commit checks that they
   * were put again.  fix_all: too many to list, check every chunk. */
  int64_t fix[8];
  int nfix, fix_all;
  /* Buffers replaced while readers may still hold pointers into them
   * (metalayer contents), freed at close. */
  void **retired;
  int nretired, retired_cap;
} b2_frame_w;

/* Read side of the writer lock (no-ops for read-only frames). */
static inline void b2_frame_rdlock(const b2_frame *f) {
  if (f->w) pthread_rwlock_rdlock(&f->w->lock);
}
static inline void b2_frame_rdunlock(const b2_frame *f) {
  if (f->w) pthread_rwlock_unlock(&f->w->lock);
}

/* Decoded size of chunk i (0 <= i < nchunks), without locking. */
int32_t b2_frame_nbytes_of(const b2_frame *f, int64_t i);

/* ---- parsing (buffers only) -------------------------------------------- */

/* Parse the fixed part of a header (current or legacy layout) from the
 * first `len` bytes of the frame file. */
int b2_frame_parse_header(const uint8_t *buf, size_t len,
                          b2_frame_header *h);
/* The 13-element layout's fields after the magic, sizes and flags. */
int b2_frame_parse_legacy_tail(b2_mp_reader *r, b2_frame_header *h);

/* Parse a metalayers section `93 <size> map{name: offset} [bin...]` that
 * starts at `start` in region[0..len); offsets are relative to region.
 * Allocates *out (count <= max). */
int b2_frame_parse_metalayers(const uint8_t *region, size_t len,
                              size_t start, int max, b2_frame_meta **out,
                              int *count);

/* Parse a trailer buffer: vlmetalayers (current) or the usermeta chunk
 * (legacy, reported as one vlmetalayer "usermeta" when not empty). */
int b2_frame_parse_trailer(const uint8_t *trailer, size_t len, int legacy,
                           b2_frame_meta **out, int *count);
int b2_frame_parse_legacy_trailer(const uint8_t *trailer, size_t len,
                                  b2_frame_meta **out, int *count);

/* Where the trailer starts, from the last bytes of the frame: `tail` holds
 * the B2_FRAME_TRAILER_MIN bytes that end at frame_size. */
int b2_frame_trailer_len(const uint8_t *tail, uint32_t *len);

/* ---- sidecar locking (lock.c) --------------------------------------------
 * Attach the sidecar of the frame opened from `path` when it takes part
 * (nothing otherwise); free it at close.  rd_begin takes the shared lock
 * (one flock for all threads of this frame): check 0 records the counter
 * (loading), check 1 fails with B2_E_STALE when it moved.  It returns 1
 * when it took the lock, 0 when there is nothing to lock (no sidecar, a
 * writable frame, which reads its own staged state, or a frame this
 * process is committing through another b2_frame); rd_end(f, that result)
 * releases.
 * wr_begin takes the exclusive lock for a write session (until close) and
 * bumps the counter; commit_begin bumps it again (each commit and
 * compaction); commit_end does nothing (kept for symmetry). */
#define B2_E_AGAIN_INTERNAL (B2_E_LAST - 100)
int b2_frame_lk_attach(b2_frame *f, const char *path);
void b2_frame_lk_free(b2_frame *f);
int b2_frame_lk_rd_begin(const b2_frame *f, int check);
void b2_frame_lk_rd_end(const b2_frame *f, int locked);
int b2_frame_lk_wr_begin(b2_frame *f);
int b2_frame_lk_commit_begin(b2_frame *f);
/* 1 when another program bumped the counter since f last saw it (read
 * without locking: a frame kept across opens is then parsed again). */
int b2_frame_lk_moved(const b2_frame *f);
/* Hand a writable frame's session lock to the next frame this thread
 * opens at the same sidecar (from loses it; b2_frame_remake), and drop a
 * handed lock nobody took. */
void b2_frame_lk_hand_over(b2_frame *from);
void b2_frame_lk_drop_handed(void);
static inline void b2_frame_lk_commit_end(b2_frame *f) { (void)f; }
/* Who holds an exclusive flock on the file at fd, from /proc/locks (this
 * host only): "held by pid N (comm) on this host", else "holder unknown
 * (...)".  1 when found, 0 when not. */
int b2_frame_lock_holder(int fd, char *out, size_t cap);

/* ---- I/O ----------------------------------------------------------------- */

/* The same for a read of the frame's own file (fd == f->fd; off counts
 * from the file's start, base included): served from f->image when that
 * holds the bytes.  `last`: the read brings the chunk of a one-chunk
 * frame, after which the image is no longer needed (it is freed). */
#define B2_FRAME_IMAGE_MAX ((int64_t)128 << 10)
int b2_frame_fpread(const b2_frame *f, int fd, void *buf, size_t n,
                    int64_t off, int last);
/* The same, a large read shared with the worker of `pool` (may be NULL)
 * woken for the chunk's decode (b2_io_pread_par), which then waits
 * B2_FRAME_PAR_LINGER_US for that decode. */
#define B2_FRAME_PAR_LINGER_US 200
struct b2_pool;
int b2_frame_fpread_par(const b2_frame *f, int fd, void *buf, size_t n, int64_t off,
                        int last, struct b2_pool *pool);
/* At open: read a small frame file whole into f->image (no-op otherwise;
 * failures only mean no image). */
void b2_frame_image_load(b2_frame *f);
/* Free the image (close, and frames opened for writing). */
void b2_frame_image_drop(b2_frame *f);

/* Sparse frames: open chunk file number `num` (%08X.chunk) for reading;
 * *st gets its fstat (its size bounds the chunk). */
int b2_sframe_open_chunk(const b2_frame *f, int64_t num, int *fd, struct stat *st);
/* 1 when f is sparse and the index in its directory is no longer the one
 * f read (another program committed: the chunk files only f's index named
 * may be gone, their numbers reused). */
int b2_sframe_index_moved(const b2_frame *f);

/* ---- index and chunks ------------------------------------------------- */

/* Read and decode the index chunk, validate every entry and, for
 * variable-length chunks, build the starts table. */
int b2_frame_load_index(b2_frame *f);

/* ---- building (build.c) ------------------------------------------------ */

/* A named blob: a metalayer's content or a vlmetalayer's chunk. */
typedef struct b2_blob {
  const char *name;
  const uint8_t *data;
  uint32_t len;
} b2_blob;

/* Check that a header has the reference's fixed-width layout (so fields can
 * be patched in place).  0 or B2_E_UNSUPPORTED. */
int b2_frame_fixed_ok(const uint8_t *h, size_t len);
/* The 87-byte fixed part for new frame parameters (sizes zero). */
int b2_frame_build_fixed(const b2_frame_params *p, uint8_t fixed[B2_FH_FIXED]);
/* Header = fixed part + metalayers section; header_size patched.  *out is
 * malloc'd. */
int b2_frame_build_header(const uint8_t *fixed, const b2_blob *meta, int n,
                          uint8_t **out, size_t *len);
/* Trailer with the given vlmetalayers (contents already chunks). */
int b2_frame_build_trailer(const b2_blob *vl, int n, uint8_t **out,
                           size_t *len);
/* Index chunk of n entries, encoded as the reference does. */
int b2_frame_build_index(const int64_t *entries, int64_t n, uint8_t **out,
                         size_t *len);
/* Compress a vlmetalayer's content into a chunk (reference defaults). */
int b2_frame_build_vlchunk(const void *data, size_t len, uint8_t **out,
                           size_t *olen);
/* Patch the size fields of a header's fixed part. */
void b2_frame_patch_sizes(uint8_t *h, int64_t frame_size, int64_t nbytes,
                          int64_t cbytes, int32_t chunksize, int has_vlmeta);

/* ---- writer internals ------------------------------------------------- */

/* Set up f->w for a frame just opened read-only (checks it can be kept
 * valid, expands the index, fills chunk sizes). */
int b2_frame_w_init(b2_frame *f);
void b2_frame_w_free(b2_frame *f);
/* Keep `p` alive until close (a reader may still point into it). */
int b2_frame_w_retire(b2_frame *f, void *p);
/* Make room for n index entries. */
int b2_frame_w_reserve(b2_frame *f, int64_t n);
/* Metalayers as blobs (pointing into f->header / f->trailer). */
int b2_frame_meta_blobs(const b2_frame *f, int vl, b2_blob *out, int max);
/* Replace the staged header or trailer by `buf` (parsed into f->meta /
 * f->vlmeta); takes ownership of buf.  Caller holds the write lock. */
int b2_frame_w_set_header(b2_frame *f, uint8_t *buf, size_t len);
int b2_frame_w_set_trailer(b2_frame *f, uint8_t *buf, size_t len);
/* Sparse: name of chunk file n. */
void b2_sframe_name(int64_t num, char name[32]);
/* Write the whole staged frame into a new file and put it in place
 * (contiguous), or rewrite the index file (sparse); see compact.c. */
int b2_frame_rewrite(b2_frame *f);
/* The directory (a new descriptor, close it) and the name in it of a
 * contiguous frame open for writing: its home for an "at" open, else
 * resolved from the path it was opened at. */
int b2_frame_w_home(b2_frame *f, const char **base);
/* Open (for writing) entry `name` of dirfd, or the path `name` when dirfd
 * is -1. */
int b2_frame_open_in(int dirfd, const char *name, b2_frame_reuse_fn fn, void *ctx,
                     b2_frame **out);
int b2_frame_open_rw_in(int dirfd, const char *name, b2_frame **out);
/* After a successful commit or rewrite: `header` (malloc'd) is the header
 * as committed, frame_size its size; nothing is staged any more. */
void b2_frame_w_committed(b2_frame *f, uint8_t *header, int64_t frame_size);
/* Writer mutex held, after a failed commit (w->sync_failed): read back,
 * check and write again every stored chunk staged since the last commit.
 * B2_E_IO naming the chunk if one no longer reads back as written. */
int b2_frame_w_restage(b2_frame *f);
/* Commit with the writer mutex held. */
int b2_frame_commit_locked(b2_frame *f);
/* Before commit: a special last chunk whose size is not a whole number of
 * items becomes an encoded chunk of zeros (the reference library refuses
 * such special chunks). */
int b2_frame_w_fix_tail(b2_frame *f);
/* Check the chunks listed in w->fix hold the size the frame expects. */
int b2_frame_w_check_fixups(b2_frame *f);
/* Start a writing call: B2_E_INVAL / B2_E_ROFS, or 0 with the writer mutex
 * held (release with b2_frame_w_end). */
int b2_frame_w_begin(b2_frame *f);
void b2_frame_w_end(b2_frame *f);
/* Special index value of `kind`. */
static inline int64_t b2_frame_special_entry(int kind) {
  return (int64_t)(B2_FRAME_SPECIAL_BIT | ((uint64_t)kind << 56));
}

/* Raw index entry of chunk i (0 <= i < nchunks). */
static inline int64_t b2_frame_entry(const b2_frame *f, int64_t i) {
  return f->offsets ? f->offsets[i] : f->uniform_offset;
}

/* Logical size of chunk i from its stored header (not a special entry). */
int b2_frame_stored_nbytes(const b2_frame *f, int64_t i, int32_t *nbytes);

/* Special kind of an index entry (B2_SPECIAL_* or NONE); -1 when the
 * special bits hold no known kind. */
int b2_frame_entry_kind(int64_t entry);

/* A growable buffer for compressed chunks: malloc'd, or, when alloc is
 * set, from alloc and handed back to release (b2_frame_read_chunk_into);
 * its bytes need not survive growing. */
typedef struct b2_chunkbuf {
  uint8_t *p;
  size_t cap;
  uint8_t *(*alloc)(size_t n);
  void (*release)(uint8_t *p);
} b2_chunkbuf;

/* Load the stored bytes of chunk i into b (special entries are
 * synthesized); *len gets the chunk size.  The chunk's header is checked
 * against the bytes left in its file and against the frame geometry.
 * `pool` (may be NULL): its worker woken for the decode reads part of a
 * large chunk (b2_frame_fpread_par). */
int b2_frame_load_chunk(const b2_frame *f, int64_t i, b2_chunkbuf *b,
                        size_t *len, struct b2_pool *pool);

/* Read the chunk stored at `pos` of `fd`, with `limit` the end of the bytes
 * it may occupy, into b; checks sizes before reading.  f (may be NULL):
 * the frame whose file fd is, for its image (`last` as in
 * b2_frame_fpread); pool as in b2_frame_load_chunk. */
int b2_frame_read_stored(const b2_frame *f, int fd, int64_t pos, int64_t limit,
                         b2_chunkbuf *b, size_t *len, int32_t *nbytes, int last,
                         struct b2_pool *pool);

/* ---- checksums (checksum.c) ------------------------------------------ */

/* At open: read the B2_FRAME_CSUM_VLMETA table (a table that does not fit
 * the frame is ignored); fails only for lack of memory. */
int b2_frame_csum_load(b2_frame *f);
void b2_frame_csum_free(b2_frame *f);
/* Writers: room for `cap` entries (under the write lock); at the end of
 * b2_frame_w_init, a table for every frame (unknown entries for chunks
 * without a checksum). */
int b2_frame_csum_reserve(b2_frame *f, int64_t cap);
int b2_frame_csum_w_init(b2_frame *f);
/* Chunk i now holds stored bytes of CRC-32C `crc` (under the write lock). */
void b2_frame_csum_set(b2_frame *f, int64_t i, uint32_t crc);
/* After a commit or rewrite that staged the table: set the header file's
 * modification time to the table's stamp (a later change by a program
 * that keeps no checksums moves it). */
void b2_frame_csum_seal(b2_frame *f);
/* The same for a sparse frame's chunk file open at fd, as its commit
 * syncs it. */
void b2_frame_csum_seal_fd(const b2_frame *f, int fd);
/* Sparse, writer state loaded: delete the chunk files no staged entry
 * uses (left by a writer that died before its commit, or dropped by a
 * compaction) and a leftover temporary index. */
int b2_frame_sweep_sparse(b2_frame *f);
/* After a write to a contiguous frame's file that leaves the committed
 * frame as it is (chunks staged past its end, their trim, the index and
 * trailer before the header points at them): its time back to the stamp
 * of the table on disk, so that a crash before the commit leaves a table
 * still good for the frame. */
void b2_frame_csum_hold(const b2_frame *f);
/* Writer mutex held: compute the unknown checksums (reading those
 * chunks) when they cover at most `budget` stored bytes (< 0: always). */
int b2_frame_csum_fill(b2_frame *f, int64_t budget);
/* Writer mutex held: stage the table as a vlmetalayer (before a commit or
 * a rewrite writes the trailer). */
int b2_frame_csum_stage(b2_frame *f);
/* The next commit's stamp is the header file's time now (a rewrite of
 * the same content). */
void b2_frame_csum_keep_time(b2_frame *f);
/* b2_frame_set_mtime (writer held). */
int b2_frame_csum_restamp(b2_frame *f, const struct timespec *t);
/* b2_frame_commit_locked with the table's stamp t, and t as the header
 * file's time when something was committed (b2_frame_commit_at). */
int b2_frame_csum_commit_at(b2_frame *f, const struct timespec *t);
/* 1 when a read of chunk i verifies its stored bytes: a read path that
 * reads only part of a chunk must read it whole then (a checksum covers
 * the whole stored chunk). */
int b2_frame_csum_active(const b2_frame *f, int64_t i);
/* Verify the stored bytes p[0..len) of chunk i, read from a sparse
 * frame's chunk file whose fstat was `before` and `after` the read (NULL
 * for the frame file): 0, or B2_E_CHECKSUM with "chunk N: checksum
 * mismatch (stored 0x..., computed 0x...)" when nothing wrote the file
 * since the table was written; else (another program wrote it) 0 when the
 * file stayed as it was, B2_E_STALE when it changed (checksum.c's head). */
int b2_frame_csum_check(const b2_frame *f, int64_t i, const uint8_t *p, size_t len,
                        const struct stat *before, const struct stat *after);
/* The same whenever chunk i's checksum is known, whatever the verify
 * setting (the writer checking what it wrote). */
int b2_frame_csum_match(const b2_frame *f, int64_t i, const uint8_t *p,
                        size_t len);

/* Set vlmetalayer `name` to an already compressed content chunk, writer
 * mutex held (wmeta.c). */
int b2_frame_w_vlmeta_put(b2_frame *f, const char *name, const uint8_t *chunk,
                          size_t clen);

/* Make the engine temporary `tmp` in dirfd (a file opened read-write, or
 * with dir set a directory opened read-only) with `mode`, and hold it: its
 * descriptor under an exclusive flock, kept until the temporary has its
 * final name (b2_frame_drop_temp removes only what nobody holds).  A
 * leftover of a crash under that name is removed first; one another
 * process holds gives B2_E_BUSY.  create.c. */
int b2_frame_make_temp(int dirfd, const char *tmp, int dir, mode_t mode);

#endif /* B2_FRAME_IMPL_H */
