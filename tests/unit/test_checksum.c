/*
 * test_checksum.c - per-chunk checksums: CRC-32C itself (known vectors,
 * the SSE4.2 version against the portable one), the b2fs.crc32c table a
 * writer keeps (put, replace, append, special entries, resize, compaction,
 * reference frames gaining it), detection of damaged chunks on disk
 * (B2_E_CHECKSUM naming the chunk, other chunks unaffected, verification
 * off), damaged tables ignored safely, and readers racing a writer never
 * seeing a false mismatch.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "b2_chunk.h"
#include "b2_error.h"
#include "b2_frame.h"
#include "common/crc32c.h"
#include "common/msgpack.h"
#include "t.h"

/* ---- helpers ------------------------------------------------------------- */

static char tmproot[256];

static void make_root(void) {
  const char *t = getenv("TMPDIR");
  snprintf(tmproot, sizeof tmproot, "%s/b2ck.XXXXXX", t && *t ? t : "/tmp");
  if (!mkdtemp(tmproot)) {
    perror("mkdtemp");
    exit(2);
  }
}

static int run(const char *fmt, const char *a, const char *b) {
  char cmd[1200];
  snprintf(cmd, sizeof cmd, fmt, a, b);
  return system(cmd);
}

static void tpath(char *out, size_t cap, const char *name) {
  snprintf(out, cap, "%s/%s", tmproot, name);
}

/* path[512] gets the frame STEM.b2frame or STEM.sparse of that layout,
 * hdr[600] its header file (a sparse frame's chunks.b2frame). */
static void tframe(char *path, char *hdr, int layout, const char *stem) {
  char name[64];
  snprintf(name, sizeof name, "%s.%s", stem, layout ? "sparse" : "b2frame");
  tpath(path, 512, name);
  snprintf(hdr, 600, "%s%s", path, layout ? "/chunks.b2frame" : "");
}

static uint32_t rnd_state = 2463534242u;
static uint32_t rnd(void) { return t_xorshift32(&rnd_state); }

#define CS 4096 /* chunk size of the frames written here */

/* Logical content of a frame under test. */
typedef struct model {
  uint8_t *b;
  int64_t n;
} model;

static void model_resize(model *m, int64_t n) {
  m->b = realloc(m->b, n > 0 ? (size_t)n : 1);
  if (n > m->n) memset(m->b + m->n, 0, (size_t)(n - m->n));
  m->n = n;
}

/* Chunk i of the model: compressible (v even) or random (v odd, stored
 * memcpy'd, so a flipped byte decodes silently to other bytes). */
static void fill_chunk(model *m, int64_t i, uint32_t v) {
  int64_t off = i * CS, n = m->n - off < CS ? m->n - off : CS;
  for (int64_t k = 0; k < n; k++)
    m->b[off + k] = v & 1 ? (uint8_t)rnd() : (uint8_t)((k / 16) * 3 + v + i);
}

static void params(b2_frame_params *p, int layout) {
  b2_frame_params_default(p);
  p->layout = layout;
  p->cparams.codec = B2_CODEC_LZ4;
  p->cparams.clevel = 5;
  p->cparams.typesize = 4;
  p->chunksize = CS;
}

static int put_model(b2_frame *f, const model *m, int64_t i) {
  b2_cparams p;
  b2_cparams_default(&p);
  p.codec = B2_CODEC_LZ4;
  p.clevel = 5;
  p.typesize = 4;
  int64_t off = i * CS, n = m->n - off < CS ? m->n - off : CS;
  uint8_t *enc = malloc(b2_chunk_bound(CS));
  int len = b2_chunk_encode(&p, m->b + off, (size_t)n, enc,
                            b2_chunk_bound(CS));
  int rc = len < 0 ? len : b2_frame_put_chunk(f, i, enc, (size_t)len);
  free(enc);
  return rc;
}

/* Every chunk of the frame at `path` decodes to the model (verification
 * on). */
static int reads_as(const char *path, const model *m) {
  b2_frame *f;
  int rc = b2_frame_open(path, &f);
  if (rc < 0) {
    fprintf(stderr, "  open %s: %s\n", path, b2_last_detail());
    return 0;
  }
  const b2_frame_info *in = b2_frame_get_info(f);
  int ok = in->nbytes == m->n;
  uint8_t buf[CS];
  for (int64_t i = 0; ok && i < in->nchunks; i++) {
    int32_t nb = b2_frame_chunk_nbytes(f, i);
    rc = b2_frame_decode_chunk(f, i, buf, sizeof buf);
    if (rc != nb || memcmp(buf, m->b + i * CS, (size_t)nb) != 0) {
      fprintf(stderr, "  %s: chunk %lld: %d %s\n", path, (long long)i, rc,
              rc < 0 ? b2_last_detail() : "(bytes differ)");
      ok = 0;
    }
  }
  b2_frame_close(f);
  return ok;
}

/* The table of the frame at `path` holds, for every chunk, the CRC-32C of
 * its stored bytes (0 for special entries); *unknown gets the number of
 * chunks marked unknown.  Returns 1 if so. */
static int table_matches(const char *path, int64_t *unknown) {
  b2_frame *f;
  if (b2_frame_open(path, &f) < 0) return 0;
  b2_frame_set_verify(f, 0); /* compare independently */
  uint8_t *data = NULL;
  size_t len = 0;
  int ok = b2_frame_vlmeta_get(f, B2_FRAME_CSUM_VLMETA, &data, &len) == 0;
  int64_t n = b2_frame_get_info(f)->nchunks;
  b2_mp_reader r;
  b2_mp_reader_init(&r, data, len);
  uint32_t nel = 0, clen = 0;
  uint64_t ver = 0, cnt = 0, stamp = 0;
  const uint8_t *crcs = NULL;
  b2_mp_item it;
  ok = ok && b2_mp_read_array(&r, &nel) == 0 && nel == 5 &&
       b2_mp_read_uint(&r, &ver) == 0 && ver == 2 &&
       b2_mp_read_uint(&r, &cnt) == 0 && cnt == (uint64_t)n &&
       b2_mp_read_bin(&r, &crcs, &clen) == 0 && clen == 4 * (uint64_t)n &&
       b2_mp_next(&r, &it) == 0 &&
       (it.kind == B2_MP_NIL ||
        (it.kind == B2_MP_BIN && it.len == (uint64_t)(n + 7) / 8)) &&
       b2_mp_read_uint(&r, &stamp) == 0 && r.pos == len;
  /* The stamp is the time of the header file (a sparse frame's index). */
  char hfile[600];
  struct stat st;
  snprintf(hfile, sizeof hfile, "%s", path);
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
    snprintf(hfile, sizeof hfile, "%s/chunks.b2frame", path);
  ok = ok && stat(hfile, &st) == 0 &&
       stamp == (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec;
  *unknown = 0;
  for (int64_t i = 0; ok && i < n; i++) {
    uint32_t want = (uint32_t)crcs[4 * i] | (uint32_t)crcs[4 * i + 1] << 8 |
                    (uint32_t)crcs[4 * i + 2] << 16 |
                    (uint32_t)crcs[4 * i + 3] << 24;
    int unk = it.kind == B2_MP_BIN && (it.data[i / 8] >> (i % 8)) & 1;
    if (b2_frame_chunk_special(f, i) != B2_SPECIAL_NONE) {
      if (want != 0 || unk) ok = 0;
      continue;
    }
    if (unk) {
      (*unknown)++;
      continue;
    }
    uint8_t *c;
    size_t cl;
    if (b2_frame_read_chunk(f, i, &c, &cl) < 0) {
      ok = 0;
      break;
    }
    if (b2_crc32c(0, c, cl) != want) {
      fprintf(stderr, "  %s: chunk %lld: table 0x%08x, bytes 0x%08x\n", path,
              (long long)i, want, b2_crc32c(0, c, cl));
      ok = 0;
    }
    free(c);
  }
  free(data);
  b2_frame_close(f);
  return ok;
}

static int csum_state(const char *path, b2_frame_csum_info *ci) {
  b2_frame *f;
  memset(ci, 0, sizeof *ci);
  int rc = b2_frame_open(path, &f);
  if (rc < 0) return rc;
  rc = b2_frame_checksums(f, ci);
  b2_frame_close(f);
  return rc;
}

/* Where chunk i's stored bytes sit: the file holding them and the offset.
 * Found by content (contiguous: in the frame file; sparse: among the
 * chunk files). */
static int locate_chunk(const char *path, int64_t i, char *file, size_t cap,
                        long *pos) {
  b2_frame *f;
  if (b2_frame_open(path, &f) < 0) return -1;
  uint8_t *c;
  size_t cl;
  int rc = b2_frame_read_chunk(f, i, &c, &cl);
  int sparse = b2_frame_get_info(f)->layout == B2_LAYOUT_SPARSE;
  b2_frame_close(f);
  if (rc < 0) return -1;
  rc = -1;
  if (!sparse) {
    size_t n;
    uint8_t *all = t_read_file(path, &n);
    uint8_t *at = all ? memmem(all, n, c, cl) : NULL;
    if (at) {
      snprintf(file, cap, "%s", path);
      *pos = (long)(at - all);
      rc = 0;
    }
    free(all);
  } else {
    DIR *d = opendir(path);
    struct dirent *de;
    while (d && rc < 0 && (de = readdir(d)) != NULL) {
      if (!strstr(de->d_name, ".chunk")) continue;
      snprintf(file, cap, "%s/%s", path, de->d_name);
      size_t n;
      uint8_t *b = t_read_file(file, &n);
      if (b && n == cl && memcmp(b, c, cl) == 0) {
        *pos = 0;
        rc = 0;
      }
      free(b);
    }
    if (d) closedir(d);
  }
  free(c);
  return rc;
}

/* Flip one byte in the middle of chunk i's stored bytes (past its
 * header), keeping the file's times (as bit rot) or not (as a program
 * writing it). */
static int flip_chunk(const char *path, int64_t i, int keep_times);
static int damage_chunk(const char *path, int64_t i) { return flip_chunk(path, i, 1); }
static int flip_chunk(const char *path, int64_t i, int keep_times) {
  char file[600];
  long pos;
  if (locate_chunk(path, i, file, sizeof file, &pos) < 0) return -1;
  b2_frame *f;
  if (b2_frame_open(path, &f) < 0) return -1;
  int64_t cb = b2_frame_chunk_cbytes(f, i);
  b2_frame_close(f);
  int fd = open(file, O_RDWR);
  if (fd < 0) return -1;
  uint8_t x;
  struct stat st;
  long at = pos + 32 + (long)(cb - 32) / 2;
  int ok = fstat(fd, &st) == 0 && pread(fd, &x, 1, at) == 1;
  x ^= 0x5a;
  ok = ok && pwrite(fd, &x, 1, at) == 1;
  /* Bit rot leaves the file's times alone (a program writing it does not:
   * its checksums are then ignored, test_changed_elsewhere). */
  struct timespec t[2] = {st.st_atim, st.st_mtim};
  ok = ok && (!keep_times || futimens(fd, t) == 0);
  close(fd);
  return ok ? 0 : -1;
}

/* Write a frame of `n` chunks (odd ones random) and commit it. */
static int write_frame(const char *path, int layout, int64_t n, model *m) {
  b2_frame_params p;
  params(&p, layout);
  b2_frame *f;
  int rc = b2_frame_create(path, &p, &f);
  if (rc < 0) return rc;
  model_resize(m, n * CS);
  for (int64_t i = 0; i < n && !rc; i++) {
    fill_chunk(m, i, (uint32_t)i);
    rc = put_model(f, m, i);
  }
  if (!rc) rc = b2_frame_commit(f);
  b2_frame_close(f);
  return rc;
}

/* ---- CRC-32C --------------------------------------------------------------- */

static void test_crc32c_vectors(void) {
  uint8_t b[32];
  CHECK_EQ(b2_crc32c(0, "123456789", 9), 0xE3069283u);
  CHECK_EQ(b2_crc32c_generic(0, "123456789", 9), 0xE3069283u);
  CHECK_EQ(b2_crc32c(0, "", 0), 0);
  /* RFC 3720 (iSCSI) B.4 vectors. */
  memset(b, 0, sizeof b);
  CHECK_EQ(b2_crc32c(0, b, 32), 0x8A9136AAu);
  memset(b, 0xff, sizeof b);
  CHECK_EQ(b2_crc32c(0, b, 32), 0x62A8AB43u);
  for (int k = 0; k < 32; k++) b[k] = (uint8_t)k;
  CHECK_EQ(b2_crc32c(0, b, 32), 0x46DD794Eu);
  CHECK_EQ(b2_crc32c_generic(0, b, 32), 0x46DD794Eu);
  for (int k = 0; k < 32; k++) b[k] = (uint8_t)(31 - k);
  CHECK_EQ(b2_crc32c(0, b, 32), 0x113FDB5Cu);
  /* Chaining. */
  CHECK_EQ(b2_crc32c(b2_crc32c(0, "12345", 5), "6789", 4), 0xE3069283u);
  CHECK_EQ(b2_crc32c_generic(b2_crc32c_generic(0, "1", 1), "23456789", 8),
           0xE3069283u);
}

static void test_crc32c_sse42_matches_generic(void) {
  if (!b2_crc32c_sse42_ok()) T_SKIP("no SSE4.2 on this CPU");
  CHECK_EQ(b2_crc32c_sse42(0, "123456789", 9), 0xE3069283u);
  size_t cap = 200000;
  uint8_t *b = malloc(cap + 64);
  for (size_t k = 0; k < cap + 64; k++) b[k] = (uint8_t)rnd();
  /* Lengths around the lane sizes (3 x 256, 3 x 8192) and random ones,
   * at every alignment, with chained starting values. */
  static const size_t fixed[] = {0,     1,     7,     8,     9,     767,
                                 768,   769,   1535,  1536,  24575, 24576,
                                 24577, 49152, 49159, 73728, 200000};
  for (size_t t = 0; t < sizeof fixed / sizeof fixed[0]; t++)
    for (size_t a = 0; a < 9; a++) {
      uint32_t g = b2_crc32c_generic(0, b + a, fixed[t]);
      uint32_t s = b2_crc32c_sse42(0, b + a, fixed[t]);
      if (g != s) {
        fprintf(stderr, "  length %zu align %zu: 0x%08x vs 0x%08x\n",
                fixed[t], a, g, s);
        CHECK(0);
      }
    }
  for (int t = 0; t < 3000; t++) {
    size_t a = rnd() % 64, n = rnd() % (t < 2500 ? 4096 : cap);
    uint32_t seed = rnd();
    uint32_t g = b2_crc32c_generic(seed, b + a, n);
    uint32_t s = b2_crc32c_sse42(seed, b + a, n);
    if (g != s) {
      fprintf(stderr, "  length %zu align %zu seed 0x%08x differ\n", n, a,
              seed);
      CHECK(0);
      break;
    }
  }
  free(b);
}

/* ---- the table a writer keeps ------------------------------------------ */

static void check_table(const char *path, const model *m, int64_t stored,
                        const char *what) {
  b2_frame_csum_info ci;
  int64_t unknown = -1;
  if (!reads_as(path, m)) {
    fprintf(stderr, "  %s: content\n", what);
    CHECK(0);
  }
  if (!table_matches(path, &unknown)) {
    fprintf(stderr, "  %s: table\n", what);
    CHECK(0);
  }
  CHECK_EQ(unknown, 0);
  CHECK_EQ(csum_state(path, &ci), 0);
  CHECK_EQ(ci.state, B2_CSUM_ALL);
  CHECK_EQ(ci.checked, stored);
  CHECK_EQ(ci.unchecked, 0);
  CHECK_EQ(ci.verify, 1);
}

static void writer_ops(int layout) {
  char path[512];
  tpath(path, sizeof path, layout ? "ops.sparse" : "ops.b2frame");
  model m = {NULL, 0};
  CHECK_EQ(write_frame(path, layout, 6, &m), 0);
  check_table(path, &m, 6, "written");

  b2_frame *f;
  CHECK_EQ(b2_frame_open_rw(path, &f), 0);
  if (!f) return;
  /* Replace, append, a special entry. */
  fill_chunk(&m, 2, 11);
  CHECK_EQ(put_model(f, &m, 2), 0);
  model_resize(&m, 7 * CS);
  fill_chunk(&m, 6, 12);
  CHECK_EQ(put_model(f, &m, 6), 0);
  memset(m.b + 3 * CS, 0, CS);
  CHECK_EQ(b2_frame_put_special(f, 3, B2_SPECIAL_ZERO, CS), 0);
  /* Staged chunks verify too. */
  uint8_t buf[CS];
  CHECK_EQ(b2_frame_decode_chunk(f, 2, buf, sizeof buf), CS);
  CHECK_EQ(b2_frame_commit(f), 0);
  check_table(path, &m, 6, "replaced, appended, special");

  /* Shrink to a partial last chunk, then grow again. */
  CHECK_EQ(b2_frame_resize(f, 4 * CS + 1000), 0);
  model_resize(&m, 4 * CS + 1000);
  fill_chunk(&m, 4, 13);
  CHECK_EQ(put_model(f, &m, 4), 0);
  CHECK_EQ(b2_frame_commit(f), 0);
  check_table(path, &m, 4, "shrunk");
  CHECK_EQ(b2_frame_resize(f, 8 * CS), 0);
  model_resize(&m, 8 * CS);
  fill_chunk(&m, 4, 15);
  CHECK_EQ(put_model(f, &m, 4), 0);
  CHECK_EQ(b2_frame_commit(f), 0);
  check_table(path, &m, 4, "grown");
  fill_chunk(&m, 7, 17);
  CHECK_EQ(put_model(f, &m, 7), 0);

  /* Compaction (commits the staged chunk first). */
  CHECK_EQ(b2_frame_compact(f), 0);
  b2_frame_close(f);
  check_table(path, &m, 5, "compacted");
  free(m.b);
}

static void test_table_contiguous(void) { writer_ops(B2_LAYOUT_CONTIGUOUS); }
static void test_table_sparse(void) { writer_ops(B2_LAYOUT_SPARSE); }

/* ---- damage ---------------------------------------------------------------- */

/* An allocator of b2_frame_read_chunk_into's kind that counts its buffers
 * (a header before the bytes, so that a plain free() of one would fail). */
static int into_live, into_allocs;
static uint8_t *into_alloc(size_t n) {
  uint8_t *p = malloc(n + 16);
  if (!p) return NULL;
  into_live++;
  into_allocs++;
  return p + 16;
}
static void into_give_back(uint8_t *p) {
  into_live--;
  free(p - 16);
}

static void damage(int layout) {
  char path[512];
  tpath(path, sizeof path, layout ? "dmg.sparse" : "dmg.b2frame");
  model m = {NULL, 0};
  CHECK_EQ(write_frame(path, layout, 5, &m), 0);
  CHECK_EQ(damage_chunk(path, 3), 0); /* a random, memcpy'd chunk */
  b2_frame *f;
  CHECK_EQ(b2_frame_open(path, &f), 0);
  if (!f) return;
  uint8_t buf[CS];
  char want[64];
  snprintf(want, sizeof want, "chunk 3: checksum mismatch (stored 0x");
  CHECK_EQ(b2_frame_decode_chunk(f, 3, buf, sizeof buf), B2_E_CHECKSUM);
  CHECK(strncmp(b2_last_detail(), want, strlen(want)) == 0);
  CHECK_EQ(b2_frame_decode_range(f, 3, 100, 10, buf), B2_E_CHECKSUM);
  /* A checksum covers the whole chunk: a read of a few blocks reads it
   * whole to check it. */
  CHECK_EQ(b2_frame_chunk_has_csum(f, 3), 1);
  CHECK_EQ(b2_frame_read_range(f, 3, 100, 10, buf), B2_E_CHECKSUM);
  CHECK_EQ(b2_frame_read_range(f, 2, 100, 10, buf), 10);
  CHECK_MEM(buf, m.b + 2 * CS + 100, 10);
  uint8_t *c = NULL;
  size_t cl;
  CHECK_EQ(b2_frame_read_chunk(f, 3, &c, &cl), B2_E_CHECKSUM);
  CHECK(c == NULL);
  /* Into a caller's buffers: the failed read hands its buffer back; a good
   * one gives the same bytes as b2_frame_read_chunk, in the caller's kind. */
  into_live = into_allocs = 0;
  CHECK_EQ(b2_frame_read_chunk_into(f, 3, into_alloc, into_give_back, &c, &cl), B2_E_CHECKSUM);
  CHECK(c == NULL);
  CHECK(into_allocs >= 1);
  CHECK_EQ(into_live, 0);
  for (int64_t i = 0; i < 5; i += 2) {
    uint8_t *mine = NULL, *theirs = NULL;
    size_t ml = 0, tl = 0;
    CHECK_EQ(b2_frame_read_chunk_into(f, i, into_alloc, into_give_back, &mine, &ml), 0);
    CHECK_EQ(b2_frame_read_chunk(f, i, &theirs, &tl), 0);
    CHECK_EQ(into_live, 1);
    CHECK(mine && theirs && ml == tl && memcmp(mine, theirs, tl) == 0);
    CHECK_EQ(b2_chunk_decode(mine, ml, buf, sizeof buf), CS);
    CHECK_MEM(buf, m.b + i * CS, CS);
    if (mine) into_give_back(mine);
    free(theirs);
  }
  CHECK_EQ(into_live, 0);
  CHECK_EQ(b2_frame_read_chunk_into(f, 0, into_alloc, NULL, &c, &cl), B2_E_INVAL);
  CHECK_EQ(b2_frame_check(f), B2_E_CHECKSUM);
  CHECK(strncmp(b2_last_detail(), want, strlen(want)) == 0);
  for (int64_t i = 0; i < 5; i++) {
    if (i == 3) continue;
    CHECK_EQ(b2_frame_decode_chunk(f, i, buf, sizeof buf), CS);
    CHECK_MEM(buf, m.b + i * CS, CS);
  }
  /* Without verification the format alone decodes the damaged chunk to
   * other bytes, silently. */
  b2_frame_set_verify(f, 0);
  CHECK_EQ(b2_frame_chunk_has_csum(f, 3), 0);
  CHECK_EQ(b2_frame_decode_chunk(f, 3, buf, sizeof buf), CS);
  CHECK(memcmp(buf, m.b + 3 * CS, CS) != 0);
  CHECK_EQ(b2_frame_read_chunk(f, 3, &c, &cl), 0);
  free(c);
  b2_frame_csum_info ci;
  CHECK_EQ(b2_frame_checksums(f, &ci), 0);
  CHECK_EQ(ci.verify, 0);
  b2_frame_set_verify(f, 1);
  CHECK_EQ(b2_frame_decode_chunk(f, 3, buf, sizeof buf), B2_E_CHECKSUM);
  b2_frame_close(f);

  /* A writer keeps the known checksum: after a compaction (which copies
   * the damaged bytes) the chunk is still reported. */
  CHECK_EQ(b2_frame_compact_path(path), 0);
  CHECK_EQ(b2_frame_open(path, &f), 0);
  if (f) {
    CHECK_EQ(b2_frame_decode_chunk(f, 3, buf, sizeof buf), B2_E_CHECKSUM);
    CHECK_EQ(b2_frame_decode_chunk(f, 4, buf, sizeof buf), CS);
    b2_frame_close(f);
  }
  /* Putting the chunk again repairs it. */
  CHECK_EQ(b2_frame_open_rw(path, &f), 0);
  if (f) {
    CHECK_EQ(put_model(f, &m, 3), 0);
    CHECK_EQ(b2_frame_commit(f), 0);
    b2_frame_close(f);
  }
  check_table(path, &m, 5, "repaired");
  free(m.b);
}

static void test_damage_contiguous(void) { damage(B2_LAYOUT_CONTIGUOUS); }
static void test_damage_sparse(void) { damage(B2_LAYOUT_SPARSE); }

/* Another program changing a chunk (the reference library rewrites a
 * replaced chunk in place, at the same offset when it fits) keeps no
 * table: the frame's time moved, so a chunk that differs reads as that
 * program left it (sparse: the chunk file's own time), instead of failing
 * as damaged. */
static void changed_elsewhere(int layout) {
  char path[512];
  tpath(path, sizeof path, layout ? "chg.sparse" : "chg.b2frame");
  model m = {NULL, 0};
  /* Larger than the image a small frame is read into at open (so that
   * reads below go to the file). */
  CHECK_EQ(write_frame(path, layout, 80, &m), 0);
  CHECK_EQ(flip_chunk(path, 3, 0), 0);
  b2_frame_csum_info ci;
  CHECK_EQ(csum_state(path, &ci), 0);
  if (layout == B2_LAYOUT_CONTIGUOUS) {
    CHECK_EQ(ci.state, B2_CSUM_IGNORED);
    CHECK(strstr(ci.why, "changed after its checksums were written") != NULL);
  } else {
    CHECK_EQ(ci.state, B2_CSUM_ALL); /* the index file is unchanged */
  }
  b2_frame *f;
  CHECK_EQ(b2_frame_open(path, &f), 0);
  if (!f) return;
  uint8_t buf[CS];
  CHECK_EQ(b2_frame_decode_chunk(f, 3, buf, sizeof buf), CS);
  CHECK(memcmp(buf, m.b + 3 * CS, CS) != 0); /* what the other program wrote */
  CHECK_EQ(b2_frame_decode_chunk(f, 1, buf, sizeof buf), CS);
  CHECK_MEM(buf, m.b + CS, CS);
  /* Written again while open: what was read may be half of each, so the
   * read fails as stale (the caller opens the frame again) rather than
   * giving bytes nobody wrote; opened again, the file is as it stays. */
  if (layout == B2_LAYOUT_CONTIGUOUS) {
    CHECK_EQ(flip_chunk(path, 5, 0), 0);
    CHECK_EQ(b2_frame_decode_chunk(f, 5, buf, sizeof buf), B2_E_STALE);
    b2_frame_close(f);
    CHECK_EQ(b2_frame_open(path, &f), 0);
    if (!f) return;
    CHECK_EQ(b2_frame_decode_chunk(f, 5, buf, sizeof buf), CS);
    CHECK(memcmp(buf, m.b + 5 * CS, CS) != 0);
  }
  b2_frame_close(f);
  /* Damage to another chunk is still caught in the sparse frame, whose
   * other chunk files kept their times. */
  if (layout == B2_LAYOUT_SPARSE) {
    CHECK_EQ(damage_chunk(path, 1), 0);
    CHECK_EQ(b2_frame_open(path, &f), 0);
    if (f) CHECK_EQ(b2_frame_decode_chunk(f, 1, buf, sizeof buf), B2_E_CHECKSUM);
    b2_frame_close(f);
  }
  free(m.b);
}

static void test_changed_elsewhere_contiguous(void) { changed_elsewhere(B2_LAYOUT_CONTIGUOUS); }
static void test_changed_elsewhere_sparse(void) { changed_elsewhere(B2_LAYOUT_SPARSE); }

/* A time set by hand (touch, cp -p through the mount: b2_frame_set_mtime)
 * keeps the table vouching, in the past and in the future; damage is still
 * caught after it; a time set by utimensat alone reads as another
 * program's change, as before. */
static void set_mtime(int layout) {
  char path[512], hdr[600];
  tframe(path, hdr, layout, "time");
  model m = {NULL, 0};
  CHECK_EQ(write_frame(path, layout, 6, &m), 0);
  static const struct timespec when[] = {{1577836800, 123456789}, {1956528000, 5}};
  for (int k = 0; k < 2; k++) {
    b2_frame *f;
    CHECK_EQ(b2_frame_open_rw(path, &f), 0);
    if (!f) return;
    CHECK_EQ(b2_frame_set_mtime(f, &when[k]), 0);
    b2_frame_close(f);
    struct stat st;
    CHECK_EQ(stat(hdr, &st), 0);
    CHECK(st.st_mtim.tv_sec == when[k].tv_sec && st.st_mtim.tv_nsec == when[k].tv_nsec);
    b2_frame_csum_info ci;
    CHECK_EQ(csum_state(path, &ci), 0);
    CHECK_EQ(ci.state, B2_CSUM_ALL);
    CHECK_EQ(ci.checked, 6);
    CHECK(reads_as(path, &m));
  }
  /* The same time again: nothing to commit, the frame stays as it is. */
  struct stat before, after;
  CHECK_EQ(stat(hdr, &before), 0);
  b2_frame *f;
  CHECK_EQ(b2_frame_open_rw(path, &f), 0);
  if (f) CHECK_EQ(b2_frame_set_mtime(f, &when[1]), 0);
  b2_frame_close(f);
  CHECK_EQ(stat(hdr, &after), 0);
  CHECK_EQ(after.st_size, before.st_size);
  CHECK_EQ(damage_chunk(path, 2), 0); /* times kept: rot */
  CHECK_EQ(b2_frame_open(path, &f), 0);
  uint8_t buf[CS];
  if (f) CHECK_EQ(b2_frame_decode_chunk(f, 2, buf, sizeof buf), B2_E_CHECKSUM);
  b2_frame_close(f);
  /* Set by utimensat alone, the time says another program wrote the frame. */
  if (layout == B2_LAYOUT_CONTIGUOUS) {
    struct timespec ts[2] = {{0, UTIME_OMIT}, {1600000000, 0}};
    CHECK_EQ(utimensat(AT_FDCWD, hdr, ts, 0), 0);
    b2_frame_csum_info ci;
    CHECK_EQ(csum_state(path, &ci), 0);
    CHECK_EQ(ci.state, B2_CSUM_IGNORED);
  }
  free(m.b);
}

/* A commit made after the last change (an idle commit, a close) gives
 * the frame the change's time (b2_frame_commit_at): the header file's,
 * a sparse frame's directory's and new chunk files' times, the table's
 * stamp, all vouching; damage is still caught; with nothing staged no
 * time changes. */
static void commit_at(int layout) {
  char path[512], hdr[600], chunk[600];
  tframe(path, hdr, layout, "at");
  model m = {NULL, 0};
  CHECK_EQ(write_frame(path, layout, 6, &m), 0);
  struct timespec t;
  clock_gettime(CLOCK_REALTIME_COARSE, &t);
  t.tv_sec -= 2; /* the change, two seconds before its commit */
  t.tv_nsec = 123456789;
  b2_frame *f;
  CHECK_EQ(b2_frame_open_rw(path, &f), 0);
  if (!f) return;
  fill_chunk(&m, 4, 99);
  CHECK_EQ(put_model(f, &m, 4), 0);
  CHECK_EQ(b2_frame_commit_at(f, &t), 0);
  b2_frame_close(f);
  struct stat st;
  CHECK_EQ(stat(hdr, &st), 0);
  CHECK(st.st_mtim.tv_sec == t.tv_sec && st.st_mtim.tv_nsec == t.tv_nsec);
  if (layout == B2_LAYOUT_SPARSE) {
    CHECK_EQ(stat(path, &st), 0);
    CHECK(st.st_mtim.tv_sec == t.tv_sec && st.st_mtim.tv_nsec == t.tv_nsec);
    /* the chunk file put last is the highest numbered */
    DIR *d = opendir(path);
    struct dirent *e;
    chunk[0] = 0;
    while (d && (e = readdir(d)))
      if (strstr(e->d_name, ".chunk") && strcmp(e->d_name, chunk) > 0)
        snprintf(chunk, sizeof chunk, "%s", e->d_name);
    if (d) closedir(d);
    char cpath[1200];
    snprintf(cpath, sizeof cpath, "%s/%s", path, chunk);
    CHECK_EQ(stat(cpath, &st), 0);
    CHECK(st.st_mtim.tv_sec == t.tv_sec && st.st_mtim.tv_nsec == t.tv_nsec);
  }
  b2_frame_csum_info ci;
  CHECK_EQ(csum_state(path, &ci), 0);
  CHECK_EQ(ci.state, B2_CSUM_ALL);
  CHECK_EQ(ci.checked, 6);
  CHECK(reads_as(path, &m));
  /* Nothing staged: no commit, no time moved. */
  struct timespec later = {t.tv_sec + 1, 0};
  CHECK_EQ(b2_frame_open_rw(path, &f), 0);
  if (f) CHECK_EQ(b2_frame_commit_at(f, &later), 0);
  b2_frame_close(f);
  CHECK_EQ(stat(hdr, &st), 0);
  CHECK(st.st_mtim.tv_sec == t.tv_sec && st.st_mtim.tv_nsec == t.tv_nsec);
  CHECK_EQ(damage_chunk(path, 4), 0); /* times kept: rot */
  CHECK_EQ(b2_frame_open(path, &f), 0);
  uint8_t buf[CS];
  if (f) CHECK_EQ(b2_frame_decode_chunk(f, 4, buf, sizeof buf), B2_E_CHECKSUM);
  b2_frame_close(f);
  free(m.b);
}

/* A probe (b2_frame_open_probe) reads header, index and trailer without
 * counting as a read: the header file's access time stays; a plain open
 * that reads updates it (relatime: it was older than the modification
 * time).  Skipped where the file system keeps no access times. */
static time_t atime_of(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 ? st.st_atim.tv_sec : -1;
}

static void probe_atime(int layout) {
  char path[512], hdr[600];
  tframe(path, hdr, layout, "probe");
  model m = {NULL, 0};
  CHECK_EQ(write_frame(path, layout, 3, &m), 0);
  free(m.b);
  struct timespec old[2] = {{1000000000, 0}, {2000000000, 0}};
  CHECK_EQ(utimensat(AT_FDCWD, hdr, old, 0), 0);
  b2_frame *f = NULL;
  uint8_t buf[CS];
  CHECK_EQ(b2_frame_open(path, &f), 0);
  if (f) CHECK_EQ(b2_frame_decode_chunk(f, 1, buf, sizeof buf), CS);
  b2_frame_close(f);
  if (atime_of(hdr) == 1000000000) T_SKIP("the file system keeps no access times");
  for (int at = 0; at < 2; at++) { /* by path; at a directory */
    CHECK_EQ(utimensat(AT_FDCWD, hdr, old, 0), 0);
    int dfd = at ? open(tmproot, O_RDONLY | O_DIRECTORY) : -1;
    f = NULL;
    CHECK_EQ(b2_frame_open_probe(dfd, at ? strrchr(path, '/') + 1 : path, NULL, NULL, &f), 0);
    if (f) CHECK_EQ(b2_frame_get_info(f)->nchunks, 3);
    b2_frame_close(f);
    if (dfd >= 0) close(dfd);
    CHECK_EQ(atime_of(hdr), 1000000000);
  }
}

static void test_probe_atime_contiguous(void) { probe_atime(B2_LAYOUT_CONTIGUOUS); }
static void test_probe_atime_sparse(void) { probe_atime(B2_LAYOUT_SPARSE); }

static void test_commit_at_contiguous(void) { commit_at(B2_LAYOUT_CONTIGUOUS); }
static void test_commit_at_sparse(void) { commit_at(B2_LAYOUT_SPARSE); }

/* Compaction rewrites the same content: the new file keeps the time, and
 * its table vouches for that time. */
static void test_compaction_keeps_time(void) {
  char path[512];
  tpath(path, sizeof path, "keep.b2frame");
  model m = {NULL, 0};
  CHECK_EQ(write_frame(path, B2_LAYOUT_CONTIGUOUS, 6, &m), 0);
  b2_frame *f;
  CHECK_EQ(b2_frame_open_rw(path, &f), 0);
  if (!f) return;
  fill_chunk(&m, 2, 77);
  CHECK_EQ(put_model(f, &m, 2), 0); /* the old chunk 2: dead bytes */
  static const struct timespec t = {1234567890, 987654321};
  CHECK_EQ(b2_frame_set_mtime(f, &t), 0);
  b2_frame_close(f);
  struct stat before, after;
  CHECK_EQ(stat(path, &before), 0);
  CHECK_EQ(b2_frame_compact_path(path), 0);
  CHECK_EQ(stat(path, &after), 0);
  CHECK(after.st_ino != before.st_ino && after.st_size < before.st_size);
  CHECK(after.st_mtim.tv_sec == t.tv_sec && after.st_mtim.tv_nsec == t.tv_nsec);
  b2_frame_csum_info ci;
  CHECK_EQ(csum_state(path, &ci), 0);
  CHECK_EQ(ci.state, B2_CSUM_ALL);
  CHECK(reads_as(path, &m));
  free(m.b);
}

/* A writer that puts a new chunk 1 and appends chunk 4 to the frame of
 * model m at path, then dies before any commit (a child process): 0 when
 * it got that far. */
static int die_staging(const char *path, const model *m) {
  pid_t pid = fork();
  if (pid == 0) {
    b2_frame *f;
    model x = {NULL, 0};
    if (b2_frame_open_rw(path, &f) < 0) _exit(2);
    model_resize(&x, m->n + CS);
    memcpy(x.b, m->b, (size_t)m->n);
    fill_chunk(&x, 1, 99);
    fill_chunk(&x, 4, 98);
    _exit(put_model(f, &x, 1) == 0 && put_model(f, &x, 4) == 0 ? 0 : 3); /* no commit */
  }
  int st = -1;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A writer that dies before its commit (staged chunks past the frame's
 * end, the daemon killed): the file keeps the time its table vouches for,
 * so the table still checks the frame as committed; the next writer drops
 * the staged bytes and keeps it so too. */
static void test_crash_before_commit(void) {
  char path[512];
  tpath(path, sizeof path, "crashed.b2frame");
  model m = {NULL, 0};
  CHECK_EQ(write_frame(path, B2_LAYOUT_CONTIGUOUS, 4, &m), 0);
  struct stat before, after;
  CHECK_EQ(stat(path, &before), 0);
  CHECK_EQ(die_staging(path, &m), 0);
  CHECK_EQ(stat(path, &after), 0);
  CHECK(after.st_size > before.st_size); /* staged bytes past the frame */
  CHECK(after.st_mtim.tv_sec == before.st_mtim.tv_sec &&
        after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
  b2_frame_csum_info ci;
  CHECK_EQ(csum_state(path, &ci), 0);
  CHECK_EQ(ci.state, B2_CSUM_ALL);
  CHECK(reads_as(path, &m));
  b2_frame *f;
  CHECK_EQ(b2_frame_open_rw(path, &f), 0); /* trims the staged bytes */
  b2_frame_close(f);
  CHECK_EQ(stat(path, &after), 0);
  CHECK(after.st_size == before.st_size && after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
  CHECK_EQ(csum_state(path, &ci), 0);
  CHECK_EQ(ci.state, B2_CSUM_ALL);
  free(m.b);
}

/* Chunk files in a sparse frame's directory. */
static int count_chunk_files(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *de;
  while (d && (de = readdir(d)))
    if (strstr(de->d_name, ".chunk")) n++;
  if (d) closedir(d);
  return n;
}

/* The same for a sparse frame: the chunk files its writer staged stay
 * beside the committed ones, used by no index, until the next writer
 * drops them. */
static void test_crash_before_commit_sparse(void) {
  char path[512];
  tpath(path, sizeof path, "crashed.sparse");
  model m = {NULL, 0};
  CHECK_EQ(write_frame(path, B2_LAYOUT_SPARSE, 4, &m), 0);
  int before = count_chunk_files(path);
  CHECK_EQ(die_staging(path, &m), 0);
  CHECK_EQ(count_chunk_files(path), before + 2);
  CHECK(reads_as(path, &m));
  b2_frame *f;
  CHECK_EQ(b2_frame_open_rw(path, &f), 0);
  b2_frame_close(f);
  CHECK_EQ(count_chunk_files(path), before);
  CHECK(reads_as(path, &m));
  free(m.b);
}

static void test_set_mtime_contiguous(void) { set_mtime(B2_LAYOUT_CONTIGUOUS); }
static void test_set_mtime_sparse(void) { set_mtime(B2_LAYOUT_SPARSE); }

/* ---- damaged tables --------------------------------------------------------- */

/* Patch byte `k` of the (memcpy'd, 18-byte) table of a 3-chunk frame. */
static int patch_table(const char *path, int k, uint8_t v) {
  static const uint8_t head[] = {0x95, 0x02, 0x03, 0xc4, 0x0c};
  size_t n;
  uint8_t *all = t_read_file(path, &n);
  uint8_t *at = NULL;
  for (uint8_t *p = all; p && (p = memmem(p, n - (size_t)(p - all), head,
                                         sizeof head)) != NULL; p++)
    at = p;
  int rc = -1;
  struct stat st;
  if (at && stat(path, &st) == 0) { /* the time kept: the table itself is damaged */
    int fd = open(path, O_WRONLY);
    struct timespec t[2] = {st.st_atim, st.st_mtim};
    rc = fd >= 0 && pwrite(fd, &v, 1, (at - all) + k) == 1 && futimens(fd, t) == 0 ? 0 : -1;
    if (fd >= 0) close(fd);
  }
  free(all);
  return rc;
}

static void test_damaged_table_ignored(void) {
  static const struct {
    int k;
    uint8_t v;
    const char *why;
  } cases[] = {
      {2, 0x02, "a table of 2 chunks for 3 chunks"},
      {1, 0x07, "version 7"},
      {1, 0x01, "version 1"},
      {4, 0x08, "8 bytes of checksums for 3 chunks"},
      {0, 0x93, "not a checksum table"},
  };
  for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
    char path[512];
    tpath(path, sizeof path, "tab.b2frame");
    unlink(path);
    model m = {NULL, 0};
    CHECK_EQ(write_frame(path, B2_LAYOUT_CONTIGUOUS, 3, &m), 0);
    CHECK_EQ(patch_table(path, cases[t].k, cases[t].v), 0);
    CHECK_EQ(damage_chunk(path, 1), 0);
    b2_frame_csum_info ci;
    CHECK_EQ(csum_state(path, &ci), 0);
    CHECK_EQ(ci.state, B2_CSUM_IGNORED);
    CHECK_EQ(ci.unchecked, 3);
    if (!strstr(ci.why, cases[t].why)) {
      fprintf(stderr, "  case %zu: why '%s'\n", t, ci.why);
      CHECK(0);
    }
    /* Reads go unchecked: the damaged chunk decodes (wrongly). */
    b2_frame *f;
    CHECK_EQ(b2_frame_open(path, &f), 0);
    if (f) {
      uint8_t buf[CS];
      for (int64_t i = 0; i < 3; i++)
        CHECK_EQ(b2_frame_decode_chunk(f, i, buf, sizeof buf), CS);
      b2_frame_close(f);
    }
    /* A writer replaces the table. */
    CHECK_EQ(b2_frame_open_rw(path, &f), 0);
    if (f) {
      CHECK_EQ(put_model(f, &m, 1), 0);
      CHECK_EQ(b2_frame_commit(f), 0);
      b2_frame_close(f);
    }
    check_table(path, &m, 3, "table replaced");
    free(m.b);
  }
}

/* ---- reference frames --------------------------------------------------- */

static const char *const ref_frames[] = {
    "cframe/zstd-shuffle-f64.b2frame",   "cframe/lz4-edited-i32.b2frame",
    "cframe/zstd-metalayers.b2frame",    "cframe/zstd-special-chunks-f64.b2frame",
    "cframe/lz4-clevel0-memcpy.b2frame", "cframe/blosclz-bitshuffle-f64.b2frame",
    "sframe/zstd-shuffle-f64.b2frame",   "sframe/lz4-edited-i32.b2frame",
    "b2nd/f32-2d-uneven.b2nd",
};
#define NREF (sizeof ref_frames / sizeof ref_frames[0])

/* Decoded content of every chunk; NULL on error. */
static uint8_t *content_of(const char *path, int64_t *n) {
  b2_frame *f;
  if (b2_frame_open(path, &f) < 0) return NULL;
  const b2_frame_info *in = b2_frame_get_info(f);
  uint8_t *b = malloc(in->nbytes > 0 ? (size_t)in->nbytes : 1);
  int ok = b != NULL;
  for (int64_t i = 0; ok && i < in->nchunks; i++) {
    int64_t s = b2_frame_chunk_start(f, i);
    int32_t nb = b2_frame_chunk_nbytes(f, i);
    ok = b2_frame_decode_chunk(f, i, b + s, (size_t)nb) == nb;
  }
  *n = in->nbytes;
  b2_frame_close(f);
  if (!ok) {
    free(b);
    return NULL;
  }
  return b;
}

static void test_reference_frames(void) {
  char src[512], dst[512];
  snprintf(src, sizeof src, "%s/cframe", t_fixtures());
  if (access(src, R_OK) != 0) T_SKIP("no fixtures at %s", t_fixtures());
  for (size_t k = 0; k < NREF; k++) {
    snprintf(src, sizeof src, "%s/%s", t_fixtures(), ref_frames[k]);
    /* Read as they are: no table, nothing checked, every chunk fine. */
    b2_frame_csum_info ci;
    CHECK_EQ(csum_state(src, &ci), 0);
    CHECK_EQ(ci.state, B2_CSUM_NONE);
    CHECK_EQ(ci.checked, 0);
    int64_t n0, n1;
    uint8_t *c0 = content_of(src, &n0);
    CHECK(c0 != NULL);
    /* A writer adds the table (the frame is small: every checksum at
     * the first commit); the content is unchanged. */
    for (int budget0 = 0; budget0 < 2; budget0++) {
      snprintf(dst, sizeof dst, "%s/ref%zu-%d", tmproot, k, budget0);
      CHECK_EQ(run("cp -r '%s' '%s'", src, dst), 0);
      if (budget0) setenv("B2FS_CSUM_BUDGET", "0", 1);
      b2_frame *f;
      CHECK_EQ(b2_frame_open_rw(dst, &f), 0);
      int64_t stored = 0, first = -1;
      for (int64_t i = 0; f && i < b2_frame_get_info(f)->nchunks; i++)
        if (b2_frame_chunk_special(f, i) == B2_SPECIAL_NONE) {
          stored++;
          if (first < 0) first = i;
        }
      if (f && first >= 0) {
        uint8_t *c;
        size_t cl;
        CHECK_EQ(b2_frame_read_chunk(f, first, &c, &cl), 0);
        CHECK_EQ(b2_frame_put_chunk(f, first, c, cl), 0);
        free(c);
        CHECK_EQ(b2_frame_commit(f), 0);
      }
      b2_frame_close(f);
      unsetenv("B2FS_CSUM_BUDGET");
      int64_t unknown = -1;
      CHECK(table_matches(dst, &unknown));
      CHECK_EQ(csum_state(dst, &ci), 0);
      if (!budget0) {
        CHECK_EQ(ci.state, B2_CSUM_ALL);
        CHECK_EQ(ci.checked, stored);
        CHECK_EQ(unknown, 0);
      } else {
        /* Only the chunk put has a checksum; compaction adds the rest. */
        CHECK_EQ(ci.state, stored > 1 ? B2_CSUM_PARTIAL : B2_CSUM_ALL);
        CHECK_EQ(ci.checked, 1);
        CHECK_EQ(unknown, stored - 1);
        CHECK_EQ(b2_frame_compact_path(dst), 0);
        CHECK(table_matches(dst, &unknown));
        CHECK_EQ(unknown, 0);
        CHECK_EQ(csum_state(dst, &ci), 0);
        CHECK_EQ(ci.state, B2_CSUM_ALL);
        CHECK_EQ(ci.checked, stored);
      }
      uint8_t *c1 = content_of(dst, &n1);
      CHECK(c1 != NULL && c0 != NULL && n0 == n1 &&
            memcmp(c0, c1, (size_t)n0) == 0);
      free(c1);
    }
    free(c0);
  }
}

/* ---- readers racing a writer --------------------------------------------- */

typedef struct race {
  b2_frame *f;
  int stop;
  long reads, bad;
} race;

#define RN 8

static void race_chunk(uint8_t *b, int64_t i, uint32_t v) {
  for (int k = 0; k < CS; k++) b[k] = (uint8_t)(i * 13 + v + k / 64);
  b[0] = (uint8_t)v;
}

static void *race_reader(void *p) {
  race *a = p;
  uint8_t buf[CS], want[CS];
  uint32_t r = 7;
  while (!__atomic_load_n(&a->stop, __ATOMIC_ACQUIRE)) {
    r = r * 1103515245u + 12345u;
    int64_t i = (int64_t)((r >> 8) % RN);
    int rc = b2_frame_decode_chunk(a->f, i, buf, sizeof buf);
    race_chunk(want, i, buf[0]);
    if (rc != CS || memcmp(buf, want, CS) != 0) {
      if (a->bad++ == 0)
        fprintf(stderr, "  chunk %lld: %d %s\n", (long long)i, rc,
                rc < 0 ? b2_last_detail() : "");
    }
    a->reads++;
  }
  return NULL;
}

static void test_readers_during_writes(void) {
  for (int layout = 0; layout < 2; layout++) {
    char path[512];
    tpath(path, sizeof path, layout ? "race.sparse" : "race.b2frame");
    b2_frame_params p;
    params(&p, layout);
    b2_frame *f;
    CHECK_EQ(b2_frame_create(path, &p, &f), 0);
    if (!f) continue;
    uint8_t raw[CS], *enc = malloc(b2_chunk_bound(CS));
    for (int64_t i = 0; i < RN; i++) {
      race_chunk(raw, i, 0);
      int n = b2_chunk_encode(&p.cparams, raw, CS, enc, b2_chunk_bound(CS));
      CHECK_EQ(b2_frame_put_chunk(f, i, enc, (size_t)n), 0);
    }
    CHECK_EQ(b2_frame_commit(f), 0);
    race a[2] = {{f, 0, 0, 0}, {f, 0, 0, 0}};
    pthread_t th[2];
    for (int t = 0; t < 2; t++) pthread_create(&th[t], NULL, race_reader, &a[t]);
    for (int k = 1; k <= 300; k++) {
      int64_t i = (int64_t)(rnd() % RN);
      race_chunk(raw, i, (uint32_t)k);
      int n = b2_chunk_encode(&p.cparams, raw, CS, enc, b2_chunk_bound(CS));
      CHECK_EQ(b2_frame_put_chunk(f, i, enc, (size_t)n), 0);
      if (k % 25 == 0) CHECK_EQ(b2_frame_commit(f), 0);
      if (k % 100 == 0 && !layout) CHECK_EQ(b2_frame_compact(f), 0);
    }
    for (int t = 0; t < 2; t++) {
      __atomic_store_n(&a[t].stop, 1, __ATOMIC_RELEASE);
      pthread_join(th[t], NULL);
      CHECK(a[t].reads > 0);
      CHECK_EQ(a[t].bad, 0);
    }
    CHECK_EQ(b2_frame_commit(f), 0);
    b2_frame_close(f);
    free(enc);
    int64_t unknown;
    CHECK(table_matches(path, &unknown));
    CHECK_EQ(unknown, 0);
  }
}

int main(void) {
  make_root();
  T_RUN(test_crc32c_vectors);
  T_RUN(test_crc32c_sse42_matches_generic);
  T_RUN(test_table_contiguous);
  T_RUN(test_table_sparse);
  T_RUN(test_damage_contiguous);
  T_RUN(test_damage_sparse);
  T_RUN(test_changed_elsewhere_contiguous);
  T_RUN(test_changed_elsewhere_sparse);
  T_RUN(test_set_mtime_contiguous);
  T_RUN(test_set_mtime_sparse);
  T_RUN(test_commit_at_contiguous);
  T_RUN(test_commit_at_sparse);
  T_RUN(test_probe_atime_contiguous);
  T_RUN(test_probe_atime_sparse);
  T_RUN(test_compaction_keeps_time);
  T_RUN(test_crash_before_commit);
  T_RUN(test_crash_before_commit_sparse);
  T_RUN(test_damaged_table_ignored);
  T_RUN(test_reference_frames);
  T_RUN(test_readers_during_writes);
  if (!getenv("B2CK_KEEP")) run("rm -rf '%s'%s", tmproot, "");
  T_END();
}
