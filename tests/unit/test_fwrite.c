/*
 * test_fwrite.c - layer 3, write side: creating frames, putting chunks,
 * resizing, metalayers, commits, compaction and the conformance check, for
 * both layouts and several codecs.  Every state is checked by reopening
 * the frame from disk and comparing its decoded bytes with an in-memory
 * model.  Crash consistency: before each commit, a fresh open must show
 * the last committed state.  With -DB2_FAULT_INJECTION (see
 * tests/fault_build.sh), every I/O operation of a commit, a compaction and
 * a creation is made to fail in turn: the writer must report it, the frame
 * on disk must stay valid with the old (or, past the last sync, the new)
 * content, and a retry must succeed.
 *
 * B2FW_EXPORT=DIR keeps copies of the frames written here (with their
 * expected sha256 in DIR/manifest.tsv) for checks by other readers.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "b2_chunk.h"
#include "b2_error.h"
#include "b2_frame.h"
#include "b2_ns.h"
#include "common/fileio.h"
#include "sha256.h"
#include "t.h"

/* ---- helpers ------------------------------------------------------------- */

static char tmproot[256];

static void make_root(void) {
  const char *t = getenv("TMPDIR");
  snprintf(tmproot, sizeof tmproot, "%s/b2fw.XXXXXX", t && *t ? t : "/tmp");
  if (!mkdtemp(tmproot)) {
    perror("mkdtemp");
    exit(2);
  }
}

static void rm_rf(const char *path) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
  if (system(cmd) != 0) fprintf(stderr, "  cannot remove %s\n", path);
}

static void tpath(char *out, size_t cap, const char *name) {
  snprintf(out, cap, "%s/%s", tmproot, name);
}

/* Logical content of a frame under test. */
typedef struct model {
  uint8_t *b;
  int64_t n;
  int32_t cs;
} model;

static void model_resize(model *m, int64_t n) {
  m->b = realloc(m->b, n > 0 ? (size_t)n : 1);
  if (n > m->n) memset(m->b + m->n, 0, (size_t)(n - m->n));
  m->n = n;
}

static uint32_t rnd_state = 12345;
static uint32_t rnd(void) { return t_xorshift32(&rnd_state); }

/* Fill [off, off+n) with compressible data tagged by `v`. */
static void fill(model *m, int64_t off, int64_t n, uint32_t v) {
  for (int64_t k = 0; k < n; k++) {
    int64_t p = off + k;
    m->b[p] = (uint8_t)(((p / 7) * 31 + v * 17 + (p % 5 == 0 ? rnd() : 0)) &
                        0xff);
  }
}

static int64_t nchunks_of(const model *m) {
  return m->n / m->cs + (m->n % m->cs != 0);
}

static int32_t chunk_len(const model *m, int64_t i) {
  int64_t left = m->n - i * m->cs;
  return (int32_t)(left < m->cs ? left : m->cs);
}

/* Encode chunk i of the model and put it. */
static int put_model_chunk(b2_frame *f, const b2_cparams *cp, const model *m,
                           int64_t i) {
  int32_t n = chunk_len(m, i);
  size_t cap = b2_chunk_bound((size_t)n);
  uint8_t *c = malloc(cap);
  int rc = b2_chunk_encode(cp, m->b + i * m->cs, (size_t)n, c, cap);
  if (rc > 0) rc = b2_frame_put_chunk(f, i, c, (size_t)rc);
  free(c);
  return rc;
}

/* Compare an open frame's decoded content with the model (quietly when
 * t_quiet is set: the caller tries several models). */
static int t_quiet;
static int frame_equals(b2_frame *f, const model *m, const char *what) {
  b2_frame_info in;
  b2_frame_info_copy(f, &in);
  if (t_quiet) what = NULL;
  if (in.nbytes != m->n || in.nchunks != nchunks_of(m)) {
    if (!what) return 0;
    fprintf(stderr, "  %s: nbytes %lld nchunks %lld, expected %lld %lld\n",
            what, (long long)in.nbytes, (long long)in.nchunks,
            (long long)m->n, (long long)nchunks_of(m));
    return 0;
  }
  uint8_t *buf = malloc((size_t)m->cs);
  int ok = 1;
  for (int64_t i = 0; i < in.nchunks && ok; i++) {
    int rc = b2_frame_decode_chunk(f, i, buf, (size_t)m->cs);
    if (rc != chunk_len(m, i) ||
        memcmp(buf, m->b + i * m->cs, (size_t)chunk_len(m, i)) != 0) {
      if (what)
        fprintf(stderr, "  %s: chunk %lld differs (rc %d: %s)\n", what,
                (long long)i, rc, rc < 0 ? b2_last_detail() : "");
      ok = 0;
    }
  }
  free(buf);
  return ok;
}

/* Reopen `path` read-only from disk and compare; also the strict check. */
static int disk_equals(const char *path, const model *m, const char *what) {
  b2_frame *f;
  int rc = b2_frame_open(path, &f);
  if (rc < 0) {
    fprintf(stderr, "  %s: reopen: %s\n", what, b2_last_detail());
    return 0;
  }
  int ok = frame_equals(f, m, what);
  rc = b2_frame_check(f);
  if (rc < 0) {
    fprintf(stderr, "  %s: check: %s\n", what, b2_last_detail());
    ok = 0;
  }
  b2_frame_close(f);
  return ok;
}

static void sha_of_model(const model *m, char hex[65]) {
  t_sha256_of(m->b, (size_t)m->n, hex);
}

/* B2FW_EXPORT: copy the frame and record its expected content. */
static void export_frame(const char *path, const char *name, const model *m) {
  const char *dir = getenv("B2FW_EXPORT");
  if (!dir || !*dir) return;
  char cmd[2000];
  snprintf(cmd, sizeof cmd, "mkdir -p '%s' && rm -rf '%s/%s' && cp -r '%s' "
           "'%s/%s'", dir, dir, name, path, dir, name);
  if (system(cmd) != 0) return;
  char man[600], hex[65];
  snprintf(man, sizeof man, "%s/manifest.tsv", dir);
  FILE *fp = fopen(man, "a");
  if (!fp) return;
  sha_of_model(m, hex);
  fprintf(fp, "%s\t%lld\t%lld\t%s\n", name, (long long)m->n,
          (long long)nchunks_of(m), hex);
  fclose(fp);
}

static void params(b2_frame_params *p, int layout, int codec, int typesize,
                   int32_t cs) {
  b2_frame_params_default(p);
  p->layout = layout;
  p->cparams.codec = codec;
  p->cparams.clevel = 5;
  p->cparams.typesize = typesize;
  p->chunksize = cs;
}

static const char *lname(int layout) {
  return layout == B2_LAYOUT_SPARSE ? "sparse" : "contig";
}

static int count_chunk_files(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL)
    if (strstr(de->d_name, ".chunk")) n++;
  closedir(d);
  return n;
}

static void touch(const char *path) {
  FILE *fp = fopen(path, "w");
  if (fp) fclose(fp);
}

static long long file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

/* ---- tests ---------------------------------------------------------------- */

/* Create, append (last chunk partial), commit, reopen; EXIST on create. */
static void roundtrip(int layout) {
  char path[512];
  tpath(path, sizeof path, layout ? "rt.sparse" : "rt.b2frame");
  b2_frame_params p;
  params(&p, layout, B2_CODEC_ZSTD, 4, 4000);
  b2_frame *f;
  CHECK_EQ(b2_frame_create(path, &p, &f), 0);
  if (!f) return;
  b2_frame *g = NULL;
  CHECK_EQ(b2_frame_create(path, &p, &g), B2_E_EXIST);
  CHECK_EQ(b2_frame_open_rw(path, &g), B2_E_BUSY);
  model m = {NULL, 0, p.chunksize};
  CHECK(disk_equals(path, &m, "empty"));
  model_resize(&m, 4000 * 5 + 1234);
  fill(&m, 0, m.n, 1);
  for (int64_t i = 0; i < nchunks_of(&m); i++)
    CHECK_EQ(put_model_chunk(f, &p.cparams, &m, i), 0);
  CHECK(frame_equals(f, &m, "staged"));
  CHECK_EQ(b2_frame_dirty(f), 1);
  model empty = {NULL, 0, p.chunksize};
  CHECK(disk_equals(path, &empty, "before commit"));
  CHECK_EQ(b2_frame_commit(f), 0);
  CHECK_EQ(b2_frame_dirty(f), 0);
  CHECK(disk_equals(path, &m, "committed"));
  CHECK_EQ(b2_frame_check(f), 0);
  const b2_frame_info *in = b2_frame_get_info(f);
  CHECK_EQ(in->typesize, 4);
  CHECK_EQ(in->codec, B2_CODEC_ZSTD);
  CHECK_EQ(in->format_version, 2);
  b2_frame_close(f);
  /* Reopen for writing and append one more chunk after fixing the last. */
  CHECK_EQ(b2_frame_open_rw(path, &f), 0);
  if (f) {
    int64_t old = m.n;
    model_resize(&m, 4000 * 7);
    fill(&m, old, m.n - old, 2);
    CHECK_EQ(put_model_chunk(f, &p.cparams, &m, 6), B2_E_INVAL);
    CHECK_EQ(put_model_chunk(f, &p.cparams, &m, 5), 0);
    CHECK_EQ(put_model_chunk(f, &p.cparams, &m, 6), 0);
    CHECK_EQ(b2_frame_commit(f), 0);
    CHECK(disk_equals(path, &m, "appended"));
    export_frame(path, layout ? "roundtrip.sparse" : "roundtrip.b2frame", &m);
    b2_frame_close(f);
  }
  free(m.b);
}

static void test_roundtrip_contiguous(void) { roundtrip(B2_LAYOUT_CONTIGUOUS); }
static void test_roundtrip_sparse(void) { roundtrip(B2_LAYOUT_SPARSE); }

/* Many replaces with commits in between: dead bytes grow, compaction
 * removes them; the content stays right at every step.  Before each
 * commit a fresh open must show the previous commit. */
static void replaces(int layout) {
  char path[512];
  tpath(path, sizeof path, layout ? "rep.sparse" : "rep.b2frame");
  b2_frame_params p;
  params(&p, layout, B2_CODEC_LZ4, 8, 8192);
  b2_frame *f;
  CHECK_EQ(b2_frame_create(path, &p, &f), 0);
  if (!f) return;
  model m = {NULL, 0, p.chunksize};
  model_resize(&m, 8192 * 12 + 800);
  fill(&m, 0, m.n, 3);
  for (int64_t i = 0; i < nchunks_of(&m); i++)
    put_model_chunk(f, &p.cparams, &m, i);
  CHECK_EQ(b2_frame_commit(f), 0);
  model committed = {malloc((size_t)m.n), m.n, m.cs};
  memcpy(committed.b, m.b, (size_t)m.n);
  int bad = 0;
  for (int round = 0; round < 12; round++) {
    for (int k = 0; k < 3; k++) {
      int64_t i = rnd() % nchunks_of(&m);
      fill(&m, i * m.cs, chunk_len(&m, i), 100 + (uint32_t)round);
      CHECK_EQ(put_model_chunk(f, &p.cparams, &m, i), 0);
      if (!disk_equals(path, &committed, "crash view")) bad++;
    }
    CHECK(frame_equals(f, &m, "staged"));
    CHECK_EQ(b2_frame_commit(f), 0);
    memcpy(committed.b, m.b, (size_t)m.n);
    if (!disk_equals(path, &m, "after commit")) bad++;
  }
  CHECK_EQ(bad, 0);
  int64_t stored;
  int64_t dead = b2_frame_dead_bytes(f, &stored);
  if (layout == B2_LAYOUT_CONTIGUOUS) {
    CHECK(dead > 0);
    long long before = file_size(path);
    b2_frame_info fi;
    CHECK_EQ(b2_frame_info_copy(f, &fi), 0);
    CHECK_EQ(stored, before - fi.header_size); /* dead bytes counted once */
    CHECK(dead < stored);
    export_frame(path, "replaced-dead.b2frame", &m);
    CHECK_EQ(b2_frame_compact(f), 0);
    CHECK_EQ(b2_frame_dead_bytes(f, NULL), 0);
    CHECK(file_size(path) < before);
    CHECK(frame_equals(f, &m, "compacted (same handle)"));
    CHECK(disk_equals(path, &m, "compacted"));
    export_frame(path, "replaced-compacted.b2frame", &m);
    /* The handle keeps working on the new file. */
    fill(&m, 0, m.cs, 77);
    CHECK_EQ(put_model_chunk(f, &p.cparams, &m, 0), 0);
    CHECK_EQ(b2_frame_commit(f), 0);
    CHECK(disk_equals(path, &m, "after compaction"));
  } else {
    CHECK_EQ(dead, 0); /* old chunk files go at commit */
    CHECK_EQ(count_chunk_files(path), (int)nchunks_of(&m));
    /* A leftover chunk file (an interrupted writer) is swept. */
    char junk[600];
    snprintf(junk, sizeof junk, "%s/0000FFF0.chunk", path);
    touch(junk);
    CHECK_EQ(b2_frame_compact(f), 0);
    CHECK_EQ(count_chunk_files(path), (int)nchunks_of(&m));
    CHECK(disk_equals(path, &m, "compacted"));
    export_frame(path, "replaced.sparse", &m);
  }
  b2_frame_close(f);
  /* The path variant. */
  CHECK_EQ(b2_frame_compact_path(path), 0);
  CHECK(disk_equals(path, &m, "compact_path"));
  free(m.b);
  free(committed.b);
}

static void test_replaces_contiguous(void) { replaces(B2_LAYOUT_CONTIGUOUS); }
static void test_replaces_sparse(void) { replaces(B2_LAYOUT_SPARSE); }

/* Several codecs, filters and type sizes in both layouts. */
static void test_codecs(void) {
  static const struct {
    int codec, typesize, filter;
  } cases[] = {
      {B2_CODEC_BLOSCLZ, 8, B2_FILTER_SHUFFLE},
      {B2_CODEC_LZ4, 4, B2_FILTER_BITSHUFFLE},
      {B2_CODEC_LZ4HC, 2, B2_FILTER_SHUFFLE},
      {B2_CODEC_ZLIB, 1, B2_FILTER_NONE},
      {B2_CODEC_ZSTD, 8, B2_FILTER_BYTEDELTA},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    for (int layout = 0; layout < 2; layout++) {
      char name[64], path[512];
      snprintf(name, sizeof name, "codec-%s-%s%s", b2_codec_name(cases[c].codec),
               lname(layout), layout ? ".sparse" : ".b2frame");
      tpath(path, sizeof path, name);
      b2_frame_params p;
      params(&p, layout, cases[c].codec, cases[c].typesize, 3000 * 8);
      memset(p.cparams.filters, 0, sizeof p.cparams.filters);
      p.cparams.filters[B2_MAX_FILTERS - 1] = (uint8_t)cases[c].filter;
      if (cases[c].filter == B2_FILTER_BYTEDELTA) {
        p.cparams.filters[B2_MAX_FILTERS - 2] = B2_FILTER_SHUFFLE;
        p.cparams.filters_meta[B2_MAX_FILTERS - 1] = 8;
      }
      b2_frame *f;
      CHECK_EQ(b2_frame_create(path, &p, &f), 0);
      if (!f) continue;
      model m = {NULL, 0, p.chunksize};
      model_resize(&m, 24000 * 3 + 8 * 37);
      fill(&m, 0, m.n, (uint32_t)c);
      for (int64_t i = 0; i < nchunks_of(&m); i++)
        CHECK_EQ(put_model_chunk(f, &p.cparams, &m, i), 0);
      CHECK_EQ(b2_frame_commit(f), 0);
      b2_frame_close(f);
      CHECK(disk_equals(path, &m, name));
      b2_frame *r;
      if (b2_frame_open(path, &r) == 0) {
        CHECK_EQ(b2_frame_get_info(r)->codec, cases[c].codec);
        CHECK_EQ(b2_frame_get_info(r)->filters[B2_MAX_FILTERS - 1],
                 cases[c].filter);
        b2_frame_close(r);
      }
      export_frame(path, name, &m);
      free(m.b);
    }
  }
}

/* Shrinking cuts chunks (the new last must be put again), growing adds
 * zero chunks, size 0 empties the frame; the frame then grows again. */
static void resize(int layout) {
  char path[512];
  tpath(path, sizeof path, layout ? "rs.sparse" : "rs.b2frame");
  b2_frame_params p;
  params(&p, layout, B2_CODEC_ZSTD, 1, 1000);
  b2_frame *f;
  CHECK_EQ(b2_frame_create(path, &p, &f), 0);
  if (!f) return;
  model m = {NULL, 0, p.chunksize};
  model_resize(&m, 10500);
  fill(&m, 0, m.n, 9);
  for (int64_t i = 0; i < nchunks_of(&m); i++)
    put_model_chunk(f, &p.cparams, &m, i);
  CHECK_EQ(b2_frame_commit(f), 0);
  /* Shrink into the middle of chunk 4. */
  CHECK_EQ(b2_frame_resize(f, 4321), 0);
  model_resize(&m, 4321);
  CHECK_EQ(b2_frame_commit(f), B2_E_INVAL); /* chunk 4 still holds 1000 */
  CHECK_EQ(put_model_chunk(f, &p.cparams, &m, 4), 0);
  CHECK_EQ(b2_frame_commit(f), 0);
  CHECK(disk_equals(path, &m, "shrunk"));
  if (layout == B2_LAYOUT_SPARSE) CHECK_EQ(count_chunk_files(path), 5);
  /* Grow: chunk 4 must become full; chunks 5.. read as zeros. */
  CHECK_EQ(b2_frame_resize(f, 8000), 0);
  model_resize(&m, 8000);
  CHECK_EQ(b2_frame_commit(f), B2_E_INVAL);
  fill(&m, 4321, 1000 - 321, 10);
  CHECK_EQ(put_model_chunk(f, &p.cparams, &m, 4), 0);
  CHECK_EQ(b2_frame_commit(f), 0);
  CHECK(disk_equals(path, &m, "grown"));
  CHECK_EQ(b2_frame_chunk_special(f, 6), B2_SPECIAL_ZERO);
  export_frame(path, layout ? "resized.sparse" : "resized.b2frame", &m);
  /* Empty, then data again. */
  CHECK_EQ(b2_frame_resize(f, 0), 0);
  model_resize(&m, 0);
  CHECK_EQ(b2_frame_commit(f), 0);
  CHECK(disk_equals(path, &m, "emptied"));
  if (layout == B2_LAYOUT_SPARSE) CHECK_EQ(count_chunk_files(path), 0);
  model_resize(&m, 2500);
  fill(&m, 0, m.n, 11);
  for (int64_t i = 0; i < 3; i++) put_model_chunk(f, &p.cparams, &m, i);
  CHECK_EQ(b2_frame_commit(f), 0);
  CHECK(disk_equals(path, &m, "refilled"));
  b2_frame_close(f);
  free(m.b);
}

static void test_resize_contiguous(void) { resize(B2_LAYOUT_CONTIGUOUS); }
static void test_resize_sparse(void) { resize(B2_LAYOUT_SPARSE); }

/* Special entries: put_special, and encoded chunks that are special. */
static void test_specials(void) {
  for (int layout = 0; layout < 2; layout++) {
    char path[512];
    tpath(path, sizeof path, layout ? "sp.sparse" : "sp.b2frame");
    b2_frame_params p;
    params(&p, layout, B2_CODEC_BLOSCLZ, 4, 400);
    b2_frame *f;
    CHECK_EQ(b2_frame_create(path, &p, &f), 0);
    if (!f) continue;
    model m = {NULL, 0, p.chunksize};
    model_resize(&m, 2000);
    fill(&m, 0, 400, 1);
    CHECK_EQ(put_model_chunk(f, &p.cparams, &m, 0), 0);
    CHECK_EQ(b2_frame_put_special(f, 1, B2_SPECIAL_ZERO, 400), 0);
    CHECK_EQ(b2_frame_put_special(f, 2, B2_SPECIAL_UNINIT, 400), 0);
    /* An encoded all-zero chunk becomes a special entry too. */
    CHECK_EQ(put_model_chunk(f, &p.cparams, &m, 3), 0);
    CHECK_EQ(b2_frame_chunk_special(f, 3), B2_SPECIAL_ZERO);
    uint8_t sc[64];
    int n = b2_chunk_make_special(B2_SPECIAL_ZERO, 400, 4, NULL, sc, sizeof sc);
    CHECK_EQ(b2_frame_put_chunk(f, 4, sc, (size_t)n), 0);
    CHECK_EQ(b2_frame_put_special(f, 5, B2_SPECIAL_VALUE, 400), B2_E_INVAL);
    CHECK_EQ(b2_frame_commit(f), 0);
    CHECK(disk_equals(path, &m, "specials"));
    if (layout == B2_LAYOUT_SPARSE) CHECK_EQ(count_chunk_files(path), 1);
    export_frame(path, layout ? "specials.sparse" : "specials.b2frame", &m);
    b2_frame_close(f);
    free(m.b);
  }
}

/* Small frames: fresh and emptied (no index chunk), and one chunk at
 * offset 0 (an index of zeros, encoded as a special chunk). */
static void test_small_frames(void) {
  for (int layout = 0; layout < 2; layout++) {
    char path[512], name[64];
    const char *ext = layout ? "sparse" : "b2frame";
    b2_frame_params p;
    params(&p, layout, B2_CODEC_ZSTD, 8, 1024);
    b2_frame *f;
    model m = {NULL, 0, p.chunksize};
    snprintf(name, sizeof name, "empty.%s", ext);
    tpath(path, sizeof path, name);
    CHECK_EQ(b2_frame_create(path, &p, &f), 0);
    b2_frame_close(f);
    CHECK(disk_equals(path, &m, name));
    export_frame(path, name, &m);
    snprintf(name, sizeof name, "one.%s", ext);
    tpath(path, sizeof path, name);
    CHECK_EQ(b2_frame_create(path, &p, &f), 0);
    if (!f) continue;
    model_resize(&m, 1000);
    fill(&m, 0, m.n, 4);
    CHECK_EQ(put_model_chunk(f, &p.cparams, &m, 0), 0);
    CHECK_EQ(b2_frame_commit(f), 0);
    CHECK(disk_equals(path, &m, name));
    export_frame(path, name, &m);
    if (layout == B2_LAYOUT_CONTIGUOUS) {
      /* Compacted, the one chunk sits at offset 0. */
      CHECK_EQ(b2_frame_compact(f), 0);
      snprintf(name, sizeof name, "one-compacted.%s", ext);
      CHECK(disk_equals(path, &m, name));
      export_frame(path, name, &m);
    }
    CHECK_EQ(b2_frame_resize(f, 0), 0);
    CHECK_EQ(b2_frame_vlmeta_set(f, "kept", "x", 1), 0);
    CHECK_EQ(b2_frame_commit(f), 0);
    model_resize(&m, 0);
    snprintf(name, sizeof name, "emptied.%s", ext);
    CHECK(disk_equals(path, &m, name));
    export_frame(path, name, &m);
    b2_frame_close(f);
    free(m.b);
  }
}

/* An empty frame as the reference library creates it has chunksize -1:
 * the first chunk put sets it (and commit writes it). */
static void test_unset_chunksize(void) {
  for (int layout = 0; layout < 2; layout++) {
    char path[512], hp[600];
    tpath(path, sizeof path, layout ? "unset.sparse" : "unset.b2frame");
    b2_frame_params p;
    params(&p, layout, B2_CODEC_LZ4, 4, 999);
    b2_frame *f;
    CHECK_EQ(b2_frame_create(path, &p, &f), 0);
    b2_frame_close(f);
    snprintf(hp, sizeof hp, "%s%s", path, layout ? "/chunks.b2frame" : "");
    int fd = open(hp, O_WRONLY);
    CHECK(fd >= 0 && pwrite(fd, "\xff\xff\xff\xff", 4, 58) == 4);
    if (fd >= 0) close(fd);
    CHECK_EQ(b2_frame_open_rw(path, &f), 0);
    if (!f) continue;
    CHECK_EQ(b2_frame_get_info(f)->chunksize, -1);
    CHECK_EQ(b2_frame_resize(f, 10), B2_E_INVAL);
    model m = {NULL, 0, 1200};
    model_resize(&m, 3000);
    fill(&m, 0, m.n, 2);
    for (int64_t i = 0; i < 3; i++)
      CHECK_EQ(put_model_chunk(f, &p.cparams, &m, i), 0);
    CHECK_EQ(b2_frame_get_info(f)->chunksize, 1200);
    CHECK_EQ(b2_frame_commit(f), 0);
    b2_frame_close(f);
    CHECK(disk_equals(path, &m, "chunksize set by the first chunk"));
    export_frame(path, layout ? "unset.sparse" : "unset.b2frame", &m);
    free(m.b);
  }
}

/* Metalayers at creation, in-place and resizing updates, vlmetalayers. */
static void metas(int layout) {
  char path[512];
  tpath(path, sizeof path, layout ? "meta.sparse" : "meta.b2frame");
  b2_frame_params p;
  params(&p, layout, B2_CODEC_ZSTD, 8, 800);
  b2_frame_meta_init mi[2] = {{"alpha", "\x01\x02\x03\x04", 4},
                              {"beta", "bbbbbbbb", 8}};
  p.nmeta = 2;
  p.meta = mi;
  b2_frame *f;
  CHECK_EQ(b2_frame_create(path, &p, &f), 0);
  if (!f) return;
  model m = {NULL, 0, p.chunksize};
  model_resize(&m, 3000);
  fill(&m, 0, m.n, 5);
  for (int64_t i = 0; i < nchunks_of(&m); i++)
    put_model_chunk(f, &p.cparams, &m, i);
  CHECK_EQ(b2_frame_vlmeta_set(f, "note", "hello", 5), 0);
  char big[5000];
  for (size_t k = 0; k < sizeof big; k++) big[k] = (char)('a' + k % 7);
  CHECK_EQ(b2_frame_vlmeta_set(f, "big", big, sizeof big), 0);
  CHECK_EQ(b2_frame_commit(f), 0);
  long long sz1 = layout ? 0 : file_size(path);
  /* Same size in place. */
  CHECK_EQ(b2_frame_meta_set(f, "alpha", "\x09\x08\x07\x06", 4), 0);
  CHECK_EQ(b2_frame_vlmeta_set(f, "note", "bye", 3), 0);
  CHECK_EQ(b2_frame_vlmeta_del(f, "missing"), B2_E_NOENT);
  const uint8_t *d;
  size_t len;
  CHECK_EQ(b2_frame_meta_get(f, "alpha", &d, &len), 0);
  CHECK(len == 4 && memcmp(d, "\x09\x08\x07\x06", 4) == 0);
  CHECK_EQ(b2_frame_commit(f), 0);
  if (!layout) CHECK(file_size(path) > sz1); /* appended, not rewritten */
  b2_frame_close(f);
  b2_frame *r;
  CHECK_EQ(b2_frame_open(path, &r), 0);
  if (r) {
    CHECK_EQ(b2_frame_meta_get(r, "alpha", &d, &len), 0);
    CHECK(len == 4 && memcmp(d, "\x09\x08\x07\x06", 4) == 0);
    CHECK_EQ(b2_frame_meta_get(r, "beta", &d, &len), 0);
    CHECK(len == 8 && memcmp(d, "bbbbbbbb", 8) == 0);
    uint8_t *v;
    CHECK_EQ(b2_frame_vlmeta_get(r, "note", &v, &len), 0);
    if (v) CHECK(len == 3 && memcmp(v, "bye", 3) == 0);
    free(v);
    CHECK_EQ(b2_frame_vlmeta_get(r, "big", &v, &len), 0);
    if (v) CHECK(len == sizeof big && memcmp(v, big, sizeof big) == 0);
    free(v);
    len = 0; /* the size alone */
    CHECK_EQ(b2_frame_vlmeta_get(r, "big", NULL, &len), 0);
    CHECK_EQ(len, sizeof big);
    CHECK(frame_equals(r, &m, "meta frame"));
    b2_frame_close(r);
  }
  /* Another size, a new metalayer, a deleted vlmetalayer: the frame is
   * rewritten (contiguous) and reads the same. */
  CHECK_EQ(b2_frame_open_rw(path, &f), 0);
  if (!f) return;
  CHECK_EQ(b2_frame_meta_set(f, "beta", "longer content", 14), 0);
  CHECK_EQ(b2_frame_meta_set(f, "gamma", "g", 1), 0);
  CHECK_EQ(b2_frame_vlmeta_del(f, "note"), 0);
  CHECK(disk_equals(path, &m, "before meta commit"));
  CHECK_EQ(b2_frame_commit(f), 0);
  CHECK(disk_equals(path, &m, "meta resized"));
  CHECK_EQ(b2_frame_get_info(f)->nmeta, 3);
  /* "big" and the checksums (B2_FRAME_CSUM_VLMETA). */
  CHECK_EQ(b2_frame_get_info(f)->nvlmeta, 2);
  /* Puts after the rewrite land in the new file. */
  fill(&m, 800, 800, 6);
  CHECK_EQ(put_model_chunk(f, &p.cparams, &m, 1), 0);
  CHECK_EQ(b2_frame_commit(f), 0);
  b2_frame_close(f);
  CHECK(disk_equals(path, &m, "after meta rewrite"));
  CHECK_EQ(b2_frame_open(path, &r), 0);
  if (r) {
    CHECK_EQ(b2_frame_meta_get(r, "beta", &d, &len), 0);
    CHECK(len == 14 && memcmp(d, "longer content", 14) == 0);
    CHECK_EQ(b2_frame_meta_get(r, "gamma", &d, &len), 0);
    uint8_t *v = NULL;
    CHECK_EQ(b2_frame_vlmeta_get(r, "note", &v, &len), B2_E_NOENT);
    CHECK_EQ(b2_frame_vlmeta_get(r, "big", &v, &len), 0);
    free(v);
    b2_frame_close(r);
  }
  export_frame(path, layout ? "metas.sparse" : "metas.b2frame", &m);
  free(m.b);
}

static void test_metas_contiguous(void) { metas(B2_LAYOUT_CONTIGUOUS); }
static void test_metas_sparse(void) { metas(B2_LAYOUT_SPARSE); }

/* Refusals: read-only handles, unsupported frames, bad puts. */
static void test_refusals(void) {
  char path[512];
  tpath(path, sizeof path, "ref.b2frame");
  b2_frame_params p;
  params(&p, B2_LAYOUT_CONTIGUOUS, B2_CODEC_ZSTD, 4, 1000);
  b2_frame *f;
  CHECK_EQ(b2_frame_create(path, &p, &f), 0);
  if (!f) return;
  model m = {NULL, 0, p.chunksize};
  model_resize(&m, 2500);
  fill(&m, 0, m.n, 1);
  /* Chunk 1 of 800 bytes is not last: refused; so is a gap. */
  CHECK_EQ(put_model_chunk(f, &p.cparams, &m, 1), B2_E_RANGE);
  m.n = 800;
  CHECK_EQ(put_model_chunk(f, &p.cparams, &m, 0), 0);
  m.n = 2500;
  CHECK_EQ(put_model_chunk(f, &p.cparams, &m, 1), B2_E_INVAL);
  uint8_t junk[40] = {0};
  CHECK(b2_frame_put_chunk(f, 1, junk, sizeof junk) < 0);
  CHECK_EQ(b2_frame_put_chunk(f, 0, junk, 8), B2_E_INVAL);
  b2_frame_close(f); /* uncommitted: discarded */
  model e = {NULL, 0, 1000};
  CHECK(disk_equals(path, &e, "discarded"));
  b2_frame *r;
  CHECK_EQ(b2_frame_open(path, &r), 0);
  if (r) {
    CHECK_EQ(b2_frame_writable(r), 0);
    CHECK_EQ(b2_frame_put_special(r, 0, B2_SPECIAL_ZERO, 1000), B2_E_ROFS);
    CHECK_EQ(b2_frame_commit(r), B2_E_ROFS);
    CHECK_EQ(b2_frame_resize(r, 0), B2_E_ROFS);
    b2_frame_close(r);
  }
  free(m.b);
  /* Fixtures the writer cannot keep valid. */
  const char *fx = t_fixtures();
  static const char *const ro[] = {
      "legacy/legacy-blosclz-shuffle-i32.b2frame",
      "reference/varchunks-lz4-3.0.0.b2frame",
      "reference/vlblocks-lz4-fixed-3.0.0.b2frame"};
  for (size_t k = 0; k < sizeof ro / sizeof ro[0]; k++) {
    char src[512], dst[512], cmd[2000];
    snprintf(src, sizeof src, "%s/%s", fx, ro[k]);
    if (access(src, R_OK) != 0) {
      fprintf(stderr, "  skipped %s (no fixtures)\n", ro[k]);
      continue;
    }
    snprintf(dst, sizeof dst, "%s/ro%zu.b2frame", tmproot, k);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", src, dst);
    if (system(cmd) != 0) continue;
    b2_frame *w = NULL;
    CHECK_EQ(b2_frame_open_rw(dst, &w), B2_E_UNSUPPORTED);
    CHECK(w == NULL);
  }
}

/* Frames written by the reference library, changed here: replaced and
 * appended chunks, vlmetalayers, compaction.  Content checked against the
 * fixtures' data plus our changes. */
static void modify_fixture(const char *rel, const char *outname) {
  char src[512], dst[512], cmd[2000];
  snprintf(src, sizeof src, "%s/%s", t_fixtures(), rel);
  if (access(src, R_OK) != 0) {
    fprintf(stderr, "  skipped %s (no fixtures)\n", rel);
    t_skipped_ = 1;
    return;
  }
  snprintf(dst, sizeof dst, "%s/%s", tmproot, outname);
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", dst, src, dst);
  if (system(cmd) != 0) return;
  b2_frame *f;
  int rc = b2_frame_open_rw(dst, &f);
  CHECK_EQ(rc, 0);
  if (rc < 0) {
    fprintf(stderr, "  %s: %s\n", rel, b2_last_detail());
    return;
  }
  b2_frame_info in;
  b2_frame_info_copy(f, &in);
  model m = {NULL, 0, in.chunksize};
  model_resize(&m, in.nbytes);
  for (int64_t i = 0; i < in.nchunks; i++)
    b2_frame_decode_chunk(f, i, m.b + i * m.cs, (size_t)chunk_len(&m, i));
  b2_cparams cp;
  b2_cparams_default(&cp);
  cp.codec = in.codec <= B2_CODEC_ZSTD && in.codec != B2_CODEC_SNAPPY
                 ? in.codec : B2_CODEC_ZSTD;
  cp.typesize = in.typesize <= 255 ? in.typesize : 1;
  /* Replace the first chunk and the last, append two chunks (after making
   * the last one full). */
  fill(&m, 0, chunk_len(&m, 0), 50);
  CHECK_EQ(put_model_chunk(f, &cp, &m, 0), 0);
  int64_t old = m.n;
  model_resize(&m, (nchunks_of(&m) + 2) * (int64_t)m.cs - 3 * cp.typesize);
  fill(&m, old, m.n - old, 51);
  for (int64_t i = in.nchunks - 1; i < nchunks_of(&m); i++)
    CHECK_EQ(put_model_chunk(f, &cp, &m, i), 0);
  CHECK_EQ(b2_frame_vlmeta_set(f, "b2fs", "{\"edited\": true}", 16), 0);
  CHECK_EQ(b2_frame_commit(f), 0);
  CHECK(disk_equals(dst, &m, rel));
  char name[300];
  snprintf(name, sizeof name, "mod-%s", outname);
  export_frame(dst, name, &m);
  if (in.layout == B2_LAYOUT_CONTIGUOUS) {
    CHECK(b2_frame_dead_bytes(f, NULL) > 0);
    CHECK_EQ(b2_frame_compact(f), 0);
    CHECK(disk_equals(dst, &m, rel));
    snprintf(name, sizeof name, "modc-%s", outname);
    export_frame(dst, name, &m);
  }
  b2_frame_close(f);
  free(m.b);
}

static void test_modify_reference_frames(void) {
  modify_fixture("cframe/zstd-shuffle-f64.b2frame", "ref-zstd.b2frame");
  modify_fixture("cframe/lz4-edited-i32.b2frame", "ref-lz4-edited.b2frame");
  modify_fixture("cframe/zstd-metalayers.b2frame", "ref-metalayers.b2frame");
  modify_fixture("cframe/zstd-special-chunks-f64.b2frame",
                 "ref-special.b2frame");
  modify_fixture("sframe/zstd-shuffle-f64.b2frame", "ref-zstd.sparse");
  modify_fixture("sframe/lz4-edited-i32.b2frame", "ref-lz4-edited.sparse");
  modify_fixture("b2nd/f32-2d-uneven.b2nd", "ref-b2nd.b2nd");
  modify_fixture("b2nd/sframe-f32-2d.b2nd", "ref-b2nd-sparse.b2nd");
}

/* Readers of the same handle while a writer replaces chunks and commits:
 * every chunk read is whole (all bytes of one version). */
typedef struct mt_arg {
  b2_frame *f;
  int stop;
  int bad;
  long reads;
} mt_arg;

#define MT_CS 4096
#define MT_N 16

static void mt_chunk(uint8_t *b, int64_t i, uint32_t v) {
  for (int k = 0; k < MT_CS; k++) b[k] = (uint8_t)(i * 7 + v);
  b[0] = (uint8_t)v;
}

static void *mt_reader(void *p) {
  mt_arg *a = p;
  uint8_t buf[MT_CS];
  uint32_t r = 99;
  while (!__atomic_load_n(&a->stop, __ATOMIC_ACQUIRE)) {
    r = r * 1103515245u + 12345u;
    int64_t i = (int64_t)((r >> 8) % MT_N);
    int rc = b2_frame_decode_chunk(a->f, i, buf, sizeof buf);
    uint8_t want[MT_CS];
    mt_chunk(want, i, buf[0]);
    if (rc != MT_CS || memcmp(buf, want, MT_CS) != 0) a->bad++;
    a->reads++;
  }
  return NULL;
}

static void test_concurrent_readers(void) {
  for (int layout = 0; layout < 2; layout++) {
    char path[512];
    tpath(path, sizeof path, layout ? "mt.sparse" : "mt.b2frame");
    b2_frame_params p;
    params(&p, layout, B2_CODEC_LZ4, 1, MT_CS);
    b2_frame *f;
    CHECK_EQ(b2_frame_create(path, &p, &f), 0);
    if (!f) continue;
    uint8_t raw[MT_CS], enc[MT_CS + 64];
    for (int64_t i = 0; i < MT_N; i++) {
      mt_chunk(raw, i, 0);
      int n = b2_chunk_encode(&p.cparams, raw, MT_CS, enc, sizeof enc);
      b2_frame_put_chunk(f, i, enc, (size_t)n);
    }
    CHECK_EQ(b2_frame_commit(f), 0);
    mt_arg a[3];
    pthread_t th[3];
    for (int t = 0; t < 3; t++) {
      a[t] = (mt_arg){f, 0, 0, 0};
      pthread_create(&th[t], NULL, mt_reader, &a[t]);
    }
    for (int round = 1; round <= 60; round++) {
      int64_t i = (int64_t)(rnd() % MT_N);
      mt_chunk(raw, i, (uint32_t)round);
      int n = b2_chunk_encode(&p.cparams, raw, MT_CS, enc, sizeof enc);
      CHECK_EQ(b2_frame_put_chunk(f, i, enc, (size_t)n), 0);
      if (round % 5 == 0) CHECK_EQ(b2_frame_commit(f), 0);
      if (round % 20 == 0) CHECK_EQ(b2_frame_compact(f), 0);
    }
    long reads = 0;
    for (int t = 0; t < 3; t++) {
      __atomic_store_n(&a[t].stop, 1, __ATOMIC_RELEASE);
      pthread_join(th[t], NULL);
      CHECK_EQ(a[t].bad, 0);
      reads += a[t].reads;
    }
    CHECK(reads > 0);
    b2_frame_close(f);
  }
}

/* ---- fault injection ------------------------------------------------------ */
#ifdef B2_FAULT_INJECTION

#define FI_CS 1000

/* The state S0 every fault scenario starts from: a fresh frame at path. */
static int fi_base(const char *path, int layout, model *m) {
  rm_rf(path);
  b2_frame_params p;
  params(&p, layout, B2_CODEC_ZSTD, 2, FI_CS);
  b2_frame_meta_init mi = {"fixed", "12345678", 8};
  p.nmeta = 1;
  p.meta = &mi;
  b2_frame *f;
  int rc = b2_frame_create(path, &p, &f);
  if (rc < 0) return rc;
  m->cs = FI_CS;
  model_resize(m, 5 * FI_CS + 300);
  fill(m, 0, m->n, 1);
  for (int64_t i = 0; i < nchunks_of(m) && !rc; i++)
    rc = put_model_chunk(f, &p.cparams, m, i);
  if (!rc) rc = b2_frame_vlmeta_set(f, "v", "base", 4);
  if (!rc) rc = b2_frame_commit(f);
  b2_frame_close(f);
  return rc;
}

/* The change S0 -> S1: each call retried once when it fails (the fault
 * fires once).  Returns the number of calls that failed. */
static int fi_step(b2_frame *f, model *m, int *errors) {
  b2_cparams cp;
  b2_cparams_default(&cp);
  cp.typesize = 2;
  int failed = 0;
#define FI_DO(call)                  \
  do {                               \
    int rc_ = (call);                \
    if (rc_ < 0) {                   \
      failed++;                      \
      rc_ = (call);                  \
      if (rc_ < 0) (*errors)++;      \
    }                                \
  } while (0)
  fill(m, 2 * FI_CS, FI_CS, 7);
  FI_DO(put_model_chunk(f, &cp, m, 2));
  FI_DO(b2_frame_put_special(f, 3, B2_SPECIAL_ZERO, FI_CS));
  memset(m->b + 3 * FI_CS, 0, FI_CS);
  int64_t old = m->n;
  model_resize(m, 7 * FI_CS + 10);
  fill(m, old, m->n - old, 8);
  for (int64_t i = 5; i < 8; i++) FI_DO(put_model_chunk(f, &cp, m, i));
  FI_DO(b2_frame_vlmeta_set(f, "v", "step one", 8));
  FI_DO(b2_frame_meta_set(f, "fixed", "87654321", 8));
  FI_DO(b2_frame_commit(f));
#undef FI_DO
  return failed;
}

/* Which of the two models the frame on disk equals (0, 1) or -1. */
static int fi_which(const char *path, const model *m0, const model *m1) {
  b2_frame *r;
  if (b2_frame_open(path, &r) < 0) {
    fprintf(stderr, "  reopen: %s\n", b2_last_detail());
    return -1;
  }
  int which = -1;
  if (b2_frame_check(r) < 0) {
    fprintf(stderr, "  check: %s\n", b2_last_detail());
  } else {
    t_quiet = 1;
    if (frame_equals(r, m0, "S0")) which = 0;
    else if (frame_equals(r, m1, "S1")) which = 1;
    t_quiet = 0;
    if (which < 0) fprintf(stderr, "  the frame holds neither state\n");
  }
  b2_frame_close(r);
  return which;
}

static const char *const op_name[B2_IO_NOPS] = {
    "open", "pwrite", "fsync", "fdatasync", "rename",
    "link", "unlink", "ftruncate", "mkdir"};

static void fi_commit_faults(int layout) {
  char path[512];
  tpath(path, sizeof path, layout ? "fi.sparse" : "fi.b2frame");
  model m0 = {NULL, 0, FI_CS}, m1 = {NULL, 0, FI_CS};
  /* Dry run: how many calls of each op the step makes; and S1. */
  CHECK_EQ(fi_base(path, layout, &m0), 0);
  b2_frame *f;
  CHECK_EQ(b2_frame_open_rw(path, &f), 0);
  if (!f) return;
  model_resize(&m1, m0.n);
  memcpy(m1.b, m0.b, (size_t)m0.n);
  uint32_t seed = rnd_state;
  b2_io_fault_set(0, 0, 0);
  int errors = 0;
  CHECK_EQ(fi_step(f, &m1, &errors), 0);
  long count[B2_IO_NOPS];
  for (int op = 0; op < B2_IO_NOPS; op++) count[op] = b2_io_count(op);
  b2_frame_close(f);
  CHECK_EQ(fi_which(path, &m0, &m1), 1);
  int runs = 0, fired = 0, unreported = 0, invalid = 0, newer = 0;
  static const int errs[] = {EIO, ENOSPC, B2_IO_SHORT};
  for (int op = 0; op < B2_IO_NOPS; op++) {
    for (long nth = 1; nth <= count[op]; nth++) {
      for (size_t e = 0; e < 3; e++) {
        if (errs[e] == B2_IO_SHORT && op != B2_IO_PWRITE) continue;
        if (errs[e] == ENOSPC && op != B2_IO_PWRITE && op != B2_IO_OPEN)
          continue;
        model a = {NULL, 0, FI_CS}, b = {NULL, 0, FI_CS};
        rnd_state = 777;
        b2_io_fault_set(0, 0, 0);
        if (fi_base(path, layout, &a) < 0) {
          invalid++;
          continue;
        }
        model_resize(&b, a.n);
        memcpy(b.b, a.b, (size_t)a.n);
        rnd_state = seed;
        if (b2_frame_open_rw(path, &f) < 0) {
          invalid++;
          free(a.b);
          free(b.b);
          continue;
        }
        b2_io_fault_set(op, nth, errs[e]);
        errors = 0;
        int failed = fi_step(f, &b, &errors);
        int hit = b2_io_fault_fired();
        b2_io_fault_set(0, 0, 0);
        runs++;
        fired += hit;
        /* A fault that fired in a call the writer did not report is only
         * allowed for cleanup (unlink of dead files). */
        if (hit && !failed && op != B2_IO_UNLINK) {
          unreported++;
          fprintf(stderr, "  %s %s #%ld (%d): not reported\n", lname(layout),
                  op_name[op], nth, errs[e]);
        }
        CHECK_EQ(errors, 0); /* the retry succeeded */
        /* Between the failure and the retry, the disk held S0 or S1; after
         * the retry, S1. */
        int w = fi_which(path, &a, &b);
        if (w != 1) {
          invalid++;
          fprintf(stderr, "  %s %s #%ld (%d): after retry disk is %d\n",
                  lname(layout), op_name[op], nth, errs[e], w);
        }
        b2_frame_close(f);
        free(a.b);
        free(b.b);
      }
    }
  }
  (void)newer;
  fprintf(stderr, "  %s: %d fault runs, %d fired\n", lname(layout), runs,
          fired);
  CHECK(runs > 10);
  CHECK_EQ(unreported, 0);
  CHECK_EQ(invalid, 0);
  free(m0.b);
  free(m1.b);
}

/* The failing commit itself: after it fails, and before any retry, a
 * fresh open shows S0 or (past the last sync) S1, and never anything
 * else. */
static void fi_crash_view(int layout) {
  char path[512];
  tpath(path, sizeof path, layout ? "fic.sparse" : "fic.b2frame");
  model m0 = {NULL, 0, FI_CS};
  rnd_state = 777;
  if (fi_base(path, layout, &m0) < 0) {
    CHECK(0);
    return;
  }
  b2_frame *f;
  b2_cparams cp;
  b2_cparams_default(&cp);
  cp.typesize = 2;
  model m1 = {NULL, 0, FI_CS};
  /* Count a commit's calls. */
  CHECK_EQ(b2_frame_open_rw(path, &f), 0);
  if (!f) return;
  model_resize(&m1, m0.n + FI_CS - 300);
  memcpy(m1.b, m0.b, (size_t)m0.n);
  fill(&m1, 0, FI_CS, 3);
  fill(&m1, m0.n, FI_CS - 300, 4);
  put_model_chunk(f, &cp, &m1, 0);
  put_model_chunk(f, &cp, &m1, 5);
  b2_frame_vlmeta_set(f, "v", "other", 5);
  b2_io_fault_set(0, 0, 0);
  CHECK_EQ(b2_frame_commit(f), 0);
  long count[B2_IO_NOPS];
  for (int op = 0; op < B2_IO_NOPS; op++) count[op] = b2_io_count(op);
  b2_frame_close(f);
  int bad = 0, newer = 0, runs = 0;
  for (int op = 0; op < B2_IO_NOPS; op++) {
    for (long nth = 1; nth <= count[op]; nth++) {
      model a = {NULL, 0, FI_CS};
      rnd_state = 777;
      fi_base(path, layout, &a);
      free(a.b);
      if (b2_frame_open_rw(path, &f) < 0) {
        bad++;
        continue;
      }
      put_model_chunk(f, &cp, &m1, 0);
      put_model_chunk(f, &cp, &m1, 5);
      b2_frame_vlmeta_set(f, "v", "other", 5);
      b2_io_fault_set(op, nth, op == B2_IO_PWRITE ? B2_IO_SHORT : EIO);
      int rc = b2_frame_commit(f);
      int hit = b2_io_fault_fired();
      b2_io_fault_set(0, 0, 0);
      runs++;
      if (hit && rc == 0 && op != B2_IO_UNLINK) bad++;
      int w = fi_which(path, &m0, &m1);
      if (w < 0 || (w == 1 && rc < 0 && 0)) bad++;
      if (w == 1 && rc < 0) newer++;
      if (w < 0)
        fprintf(stderr, "  %s %s #%ld: disk holds neither state\n",
                lname(layout), op_name[op], nth);
      b2_frame_close(f);
    }
  }
  fprintf(stderr, "  %s: %d failing commits, %d left the new state\n",
          lname(layout), runs, newer);
  CHECK(runs > 3);
  CHECK_EQ(bad, 0);
  free(m0.b);
  free(m1.b);
}

/* Compaction faults: the content never changes, the frame stays valid. */
static void fi_compact_faults(int layout) {
  char path[512];
  tpath(path, sizeof path, layout ? "fik.sparse" : "fik.b2frame");
  model m0 = {NULL, 0, FI_CS};
  rnd_state = 777;
  if (fi_base(path, layout, &m0) < 0) return;
  b2_frame *f;
  char junk[600];
  snprintf(junk, sizeof junk, "%s/000000F0.chunk", path);
  if (b2_frame_open_rw(path, &f) < 0) return;
  /* (after the open: a writer's open drops unused chunk files itself) */
  if (layout == B2_LAYOUT_SPARSE) touch(junk);
  b2_io_fault_set(0, 0, 0);
  CHECK_EQ(b2_frame_compact(f), 0);
  long count[B2_IO_NOPS];
  for (int op = 0; op < B2_IO_NOPS; op++) count[op] = b2_io_count(op);
  b2_frame_close(f);
  int bad = 0, runs = 0;
  for (int op = 0; op < B2_IO_NOPS; op++) {
    for (long nth = 1; nth <= count[op]; nth++) {
      model a = {NULL, 0, FI_CS};
      rnd_state = 777;
      fi_base(path, layout, &a);
      if (b2_frame_open_rw(path, &f) < 0) {
        bad++;
        free(a.b);
        continue;
      }
      if (layout == B2_LAYOUT_SPARSE) touch(junk);
      b2_io_fault_set(op, nth, op == B2_IO_PWRITE ? B2_IO_SHORT : EIO);
      int rc = b2_frame_compact(f);
      int hit = b2_io_fault_fired();
      b2_io_fault_set(0, 0, 0);
      runs++;
      if (hit && rc == 0 && op != B2_IO_UNLINK) bad++;
      if (!disk_equals(path, &a, "after failed compaction")) bad++;
      /* The handle still works, and a retry succeeds. */
      if (!frame_equals(f, &a, "handle")) bad++;
      if (b2_frame_compact(f) < 0 || !disk_equals(path, &a, "retry")) bad++;
      b2_frame_close(f);
      free(a.b);
    }
  }
  /* Contiguous: a whole rewrite; sparse: only the sweep of the junk. */
  CHECK(runs >= (layout == B2_LAYOUT_SPARSE ? 1 : 4));
  CHECK_EQ(bad, 0);
  free(m0.b);
}

/* Creation faults: the path is absent or a valid empty frame. */
static void fi_create_faults(int layout) {
  char path[512];
  tpath(path, sizeof path, layout ? "fin.sparse" : "fin.b2frame");
  b2_frame_params p;
  params(&p, layout, B2_CODEC_ZSTD, 2, FI_CS);
  rm_rf(path);
  b2_io_fault_set(0, 0, 0);
  b2_frame *f;
  CHECK_EQ(b2_frame_create(path, &p, &f), 0);
  b2_frame_close(f);
  long count[B2_IO_NOPS];
  for (int op = 0; op < B2_IO_NOPS; op++) count[op] = b2_io_count(op);
  int bad = 0;
  model e = {NULL, 0, FI_CS};
  for (int op = 0; op < B2_IO_NOPS; op++) {
    for (long nth = 1; nth <= count[op]; nth++) {
      rm_rf(path);
      b2_io_fault_set(op, nth, op == B2_IO_PWRITE ? B2_IO_SHORT : EIO);
      f = NULL;
      int rc = b2_frame_create(path, &p, &f);
      int hit = b2_io_fault_fired();
      b2_io_fault_set(0, 0, 0);
      b2_frame_close(f);
      if (hit && rc == 0 && op != B2_IO_UNLINK) bad++;
      struct stat st;
      if (stat(path, &st) == 0) {
        /* A sparse directory may stay empty after a failed mkdir+write;
         * anything with an index must be a valid empty frame. */
        char idx[600];
        snprintf(idx, sizeof idx, "%s/chunks.b2frame", path);
        if ((!layout || stat(idx, &st) == 0) && !disk_equals(path, &e, "create"))
          bad++;
      }
    }
  }
  CHECK_EQ(bad, 0);
}

/* ---- power loss: replay recorded I/O up to each point ------------------
 * Every write, sync, create, rename and unlink of a commit (and of a
 * compaction after it) is recorded with absolute paths; the frame as it
 * was before is copied aside.  For each crash point k, the copy gets the
 * first k operations applied, either all of them ("in order") or without
 * the writes no later sync made durable ("unsynced lost"), and must then
 * open as a valid frame holding the old or the new content. */
typedef struct pl_ev {
  int op, flags, failed;
  char path[512], path2[512];
  int64_t off;
  uint8_t *data;
  size_t len;
} pl_ev;

static pl_ev *pl_evs;
static int pl_n, pl_cap;

static void fd_path(int fd, const char *name, char *out, size_t cap) {
  if (fd == AT_FDCWD || fd < 0) {
    snprintf(out, cap, "%s", name ? name : "");
    return;
  }
  char link[64], dir[512];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, dir, sizeof dir - 1);
  dir[n > 0 ? n : 0] = '\0';
  if (name) snprintf(out, cap, "%s/%s", dir, name);
  else snprintf(out, cap, "%s", dir);
}

static void pl_record(void *ctx, const b2_io_event *ev) {
  (void)ctx;
  if (ev->op == B2_IO_OPEN && !(ev->flags & O_CREAT)) return;
  if (pl_n == pl_cap) {
    pl_cap = pl_cap ? 2 * pl_cap : 64;
    pl_evs = realloc(pl_evs, (size_t)pl_cap * sizeof *pl_evs);
  }
  pl_ev *e = &pl_evs[pl_n++];
  memset(e, 0, sizeof *e);
  e->op = ev->op;
  e->flags = ev->flags;
  e->failed = ev->failed;
  e->off = ev->off;
  switch (ev->op) {
    case B2_IO_OPEN: case B2_IO_UNLINK: case B2_IO_MKDIR:
      fd_path(ev->dirfd, ev->name, e->path, sizeof e->path);
      break;
    case B2_IO_RENAME: case B2_IO_LINK:
      fd_path(ev->dirfd, ev->name, e->path, sizeof e->path);
      fd_path(ev->dirfd2, ev->name2, e->path2, sizeof e->path2);
      break;
    default:
      fd_path(ev->fd, NULL, e->path, sizeof e->path);
      break;
  }
  if (ev->op == B2_IO_PWRITE) {
    e->data = malloc(ev->len ? ev->len : 1);
    memcpy(e->data, ev->data, ev->len);
    e->len = ev->len;
  }
}

static void pl_clear(void) {
  for (int k = 0; k < pl_n; k++) free(pl_evs[k].data);
  pl_n = 0;
}

/* `path` under `from` moved under `to`. */
static void pl_map(const char *path, const char *from, const char *to,
                   char *out, size_t cap) {
  size_t fl = strlen(from);
  if (strncmp(path, from, fl) == 0) snprintf(out, cap, "%s%s", to, path + fl);
  else snprintf(out, cap, "%s", path);
}

/* Whether write j reached the disk by event k: the first sync of its file
 * after it, before k, succeeded.  A failed sync loses the file's unsynced
 * writes for good (Linux may mark the pages clean), whatever syncs later. */
static int pl_synced(int j, int k) {
  for (int s2 = j + 1; s2 < k; s2++) {
    const pl_ev *s = &pl_evs[s2];
    if ((s->op == B2_IO_FSYNC || s->op == B2_IO_FDATASYNC) &&
        strcmp(s->path, pl_evs[j].path) == 0)
      return !s->failed;
  }
  return 0;
}

/* Apply events [0, k) to the tree under `to`; with `lost`, skip writes that
 * did not reach the disk by then (pl_synced). */
static int pl_apply(int k, int lost, const char *from, const char *to) {
  for (int j = 0; j < k; j++) {
    const pl_ev *e = &pl_evs[j];
    char a[1100], b[1100];
    pl_map(e->path, from, to, a, sizeof a);
    pl_map(e->path2, from, to, b, sizeof b);
    int fd;
    switch (e->op) {
      case B2_IO_OPEN:
        fd = open(a, O_WRONLY | O_CREAT | (e->flags & O_TRUNC), 0644);
        if (fd < 0) return -1;
        close(fd);
        break;
      case B2_IO_PWRITE: {
        if (lost && !pl_synced(j, k)) break;
        fd = open(a, O_WRONLY);
        if (fd < 0 || pwrite(fd, e->data, e->len, (off_t)e->off) !=
                          (ssize_t)e->len) {
          if (fd >= 0) close(fd);
          return -1;
        }
        close(fd);
        break;
      }
      case B2_IO_FTRUNCATE:
        if (truncate(a, (off_t)e->off) != 0) return -1;
        break;
      case B2_IO_RENAME:
        if (rename(a, b) != 0) return -1;
        break;
      case B2_IO_LINK:
        if (link(a, b) != 0) return -1;
        break;
      case B2_IO_UNLINK:
        if (unlink(a) != 0 && errno != ENOENT) return -1;
        break;
      case B2_IO_MKDIR:
        if (mkdir(a, 0755) != 0) return -1;
        break;
      default:
        break;
    }
  }
  return 0;
}

/* fault_op >= 0: the first such sync of the commit fails (EIO) and the
 * commit is retried. */
static void power_loss(int layout, int resize_header, int fault_op) {
  char dir[512], base[512], rep[512], path[600], rpath[1200];
  snprintf(dir, sizeof dir, "%s/pl", tmproot);
  snprintf(base, sizeof base, "%s/plbase", tmproot);
  snprintf(rep, sizeof rep, "%s/plrep", tmproot);
  rm_rf(dir);
  mkdir(dir, 0755);
  snprintf(path, sizeof path, "%s/f.%s", dir, layout ? "sparse" : "b2frame");
  model m0 = {NULL, 0, FI_CS}, m1 = {NULL, 0, FI_CS};
  rnd_state = 777;
  b2_io_fault_set(0, 0, 0);
  if (fi_base(path, layout, &m0) < 0) {
    CHECK(0);
    return;
  }
  char cmd[2000];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -a '%s' '%s'", base, dir, base);
  if (system(cmd) != 0) return;
  b2_frame *f;
  CHECK_EQ(b2_frame_open_rw(path, &f), 0);
  if (!f) return;
  model_resize(&m1, m0.n);
  memcpy(m1.b, m0.b, (size_t)m0.n);
  pl_clear();
  b2_io_record(pl_record, NULL);
  int errors = 0;
  if (resize_header) {
    b2_cparams cp;
    b2_cparams_default(&cp);
    cp.typesize = 2;
    fill(&m1, 0, FI_CS, 21);
    CHECK_EQ(put_model_chunk(f, &cp, &m1, 0), 0);
    CHECK_EQ(b2_frame_meta_set(f, "another", "a longer header", 15), 0);
    CHECK_EQ(b2_frame_commit(f), 0);
  } else if (fault_op >= 0) {
    b2_io_fault_set(fault_op, 1, EIO);
    CHECK_EQ(fi_step(f, &m1, &errors), 1); /* the commit, once */
    CHECK_EQ(errors, 0);
    CHECK(b2_io_fault_fired());
    b2_io_fault_set(0, 0, 0);
  } else {
    CHECK_EQ(fi_step(f, &m1, &errors), 0);
    CHECK_EQ(b2_frame_compact(f), 0);
  }
  b2_io_record(NULL, NULL);
  b2_frame_close(f);
  int bad = 0, newer = 0, first_new = -1;
  for (int lost = 0; lost < 2; lost++) {
    for (int k = 0; k <= pl_n; k++) {
      snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -a '%s' '%s'", rep, base,
               rep);
      if (system(cmd) != 0) return;
      if (pl_apply(k, lost, dir, rep) < 0) {
        fprintf(stderr, "  replay of %d events failed\n", k);
        bad++;
        continue;
      }
      pl_map(path, dir, rep, rpath, sizeof rpath);
      int w = fi_which(rpath, &m0, &m1);
      if (w < 0) {
        bad++;
        fprintf(stderr, "  %s%s: crash after %d of %d events (%s): neither "
                "state\n", lname(layout), resize_header ? " (rewrite)" : "",
                k, pl_n, lost ? "unsynced lost" : "in order");
      }
      if (w == 1) {
        newer++;
        if (!lost && first_new < 0) first_new = k;
      }
      if (!lost && w == 0 && first_new >= 0) bad++; /* back to old */
    }
  }
  fprintf(stderr, "  %s%s: %d events replayed at every point, new state "
          "from event %d\n", lname(layout),
          resize_header ? " (rewrite)" : fault_op >= 0 ? " (failed sync)" : "",
          pl_n, first_new);
  CHECK(pl_n > 3);
  CHECK(newer > 0);
  CHECK_EQ(bad, 0);
  pl_clear();
  free(m0.b);
  free(m1.b);
}

/* The base frame at path (model m0) open for writing with chunk `chunk`
 * put anew (model m1 = m0 with that chunk filled from v; it goes at the
 * base file's end, *end); NULL on failure. */
static b2_frame *base_with_chunk(const char *path, model *m0, model *m1, int64_t chunk,
                                 uint32_t v, off_t *end) {
  b2_io_fault_set(0, 0, 0);
  CHECK_EQ(fi_base(path, B2_LAYOUT_CONTIGUOUS, m0), 0);
  struct stat st;
  CHECK_EQ(stat(path, &st), 0);
  *end = st.st_size;
  b2_frame *f = NULL;
  CHECK_EQ(b2_frame_open_rw(path, &f), 0);
  if (!f) return NULL;
  model_resize(m1, m0->n);
  memcpy(m1->b, m0->b, (size_t)m0->n);
  b2_cparams cp;
  b2_cparams_default(&cp);
  cp.typesize = 2;
  fill(m1, chunk * FI_CS, FI_CS, v);
  CHECK_EQ(put_model_chunk(f, &cp, m1, chunk), 0);
  return f;
}

/* A frame open for writing is renamed by another program and a new file
 * takes its old name: a compaction (which writes a new file and renames
 * it over the frame's path) must fail rather than replace that file, and
 * the moved frame keeps its committed content. */
static void test_moved_behind(void) {
  char path[512], moved[512];
  tpath(path, sizeof path, "behind.b2frame");
  tpath(moved, sizeof moved, "behind-moved.b2frame");
  model m0 = {NULL, 0, FI_CS}, m1 = {NULL, 0, FI_CS};
  rnd_state = 5;
  off_t end;
  b2_frame *f = base_with_chunk(path, &m0, &m1, 0, 9, &end);
  if (!f) return;
  CHECK_EQ(rename(path, moved), 0);
  static const char other[] = "another program's file\n";
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
  CHECK(fd >= 0);
  CHECK_EQ(write(fd, other, sizeof other - 1), (ssize_t)sizeof other - 1);
  close(fd);
  CHECK_EQ(b2_frame_commit(f), 0);    /* in place: follows the file */
  CHECK_EQ(b2_frame_compact(f), B2_E_BUSY);
  CHECK(strstr(b2_last_detail(), "no longer the frame being written") != NULL);
  b2_frame_close(f);
  char buf[64] = {0};
  fd = open(path, O_RDONLY);
  CHECK(fd >= 0);
  CHECK_EQ(read(fd, buf, sizeof buf), (ssize_t)sizeof other - 1);
  close(fd);
  CHECK(memcmp(buf, other, sizeof other - 1) == 0);
  CHECK_EQ(fi_which(moved, &m0, &m1), 1);
  unlink(path);
  unlink(moved);
  free(m0.b);
  free(m1.b);
}

/* A hard-linked frame keeps its file through a compaction (rewritten in
 * place, both names see the new content, no redo file left); a frame
 * opened at a directory descriptor (O_PATH) is compacted there; a redo
 * file left by a crash in the middle of the copy is finished by
 * b2_frame_redo and by the next writer's open. */
static void test_linked_in_place(void) {
  char path[512], link2[512], redo[512];
  tpath(path, sizeof path, "linked.b2frame");
  tpath(link2, sizeof link2, "linked2.b2frame");
  tpath(redo, sizeof redo, ".linked.b2frame" B2_FRAME_REDO_SUFFIX);
  model m0 = {NULL, 0, FI_CS}, m1 = {NULL, 0, FI_CS};
  rnd_state = 7;
  off_t end;
  b2_frame *f = base_with_chunk(path, &m0, &m1, 0, 11, &end);
  if (!f) return;
  CHECK_EQ(link(path, link2), 0);
  struct stat a, b;
  CHECK_EQ(stat(path, &a), 0);
  CHECK_EQ(b2_frame_compact(f), 0);
  b2_frame_close(f);
  CHECK_EQ(stat(path, &b), 0);
  CHECK_EQ(b.st_ino, a.st_ino);
  CHECK_EQ(b.st_nlink, 2);
  CHECK_EQ(fi_which(path, &m0, &m1), 1);
  CHECK_EQ(fi_which(link2, &m0, &m1), 1);
  CHECK(access(redo, F_OK) != 0);
  /* at a directory: open with an O_PATH descriptor, put, compact */
  int dfd = open(tmproot, O_PATH | O_DIRECTORY | O_CLOEXEC);
  CHECK(dfd >= 0);
  b2_frame *g = NULL;
  CHECK_EQ(b2_frame_open_rw_at(dfd, "linked.b2frame", &g), 0);
  if (g) {
    b2_cparams cp;
    b2_cparams_default(&cp);
    cp.typesize = 2;
    fill(&m1, 0, FI_CS, 12);
    CHECK_EQ(put_model_chunk(g, &cp, &m1, 0), 0);
    CHECK_EQ(b2_frame_compact(g), 0);
    b2_frame_close(g);
  }
  CHECK_EQ(fi_which(link2, &m0, &m1), 1);
  CHECK_EQ(stat(link2, &b), 0);
  CHECK_EQ(b.st_ino, a.st_ino);
  /* a crash in the copy: the frame torn, the redo file complete */
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "cp '%s' '%s'", path, redo);
  CHECK_EQ(system(cmd), 0);
  int fd = open(path, O_WRONLY);
  CHECK(fd >= 0);
  static const char junk[64] = "torn torn torn torn";
  CHECK_EQ(pwrite(fd, junk, sizeof junk, 0), (ssize_t)sizeof junk);
  close(fd);
  CHECK(fi_which(link2, &m0, &m1) < 0);
  CHECK_EQ(b2_frame_redo(dfd, "linked.b2frame"), 0);
  CHECK_EQ(fi_which(link2, &m0, &m1), 1);
  CHECK(access(redo, F_OK) != 0);
  /* the same through the next writer's open */
  CHECK_EQ(system(cmd), 0);
  fd = open(path, O_WRONLY);
  CHECK(fd >= 0);
  CHECK_EQ(pwrite(fd, junk, sizeof junk, 0), (ssize_t)sizeof junk);
  close(fd);
  b2_frame *h = NULL;
  CHECK_EQ(b2_frame_open_rw(path, &h), 0);
  b2_frame_close(h);
  CHECK_EQ(fi_which(link2, &m0, &m1), 1);
  CHECK(access(redo, F_OK) != 0);
  close(dfd);
  unlink(path);
  unlink(link2);
  free(m0.b);
  free(m1.b);
}

/* A sync fails, and the bytes of a chunk staged before it are gone from
 * the file (as when the kernel drops pages it could not write back and a
 * later read goes to the disk): the retried commit must notice and fail
 * with B2_E_IO, again at each retry, and the disk keeps the old frame. */
static void test_fault_lost_chunk(void) {
  char path[512];
  tpath(path, sizeof path, "lost.b2frame");
  model m0 = {NULL, 0, FI_CS}, m1 = {NULL, 0, FI_CS};
  rnd_state = 99;
  off_t end;
  b2_frame *f = base_with_chunk(path, &m0, &m1, 2, 5, &end);
  if (!f) return;
  b2_io_fault_set(B2_IO_FDATASYNC, 1, EIO);
  CHECK(b2_frame_commit(f) < 0);
  b2_io_fault_set(0, 0, 0);
  int fd = open(path, O_WRONLY);
  CHECK(fd >= 0);
  uint8_t zeros[64] = {0};
  CHECK_EQ(pwrite(fd, zeros, sizeof zeros, end), (ssize_t)sizeof zeros);
  close(fd);
  CHECK_EQ(b2_frame_commit(f), B2_E_IO);
  CHECK(strstr(b2_last_detail(), "chunk 2") != NULL);
  CHECK(strstr(b2_last_detail(), "lost when a sync failed") != NULL);
  CHECK_EQ(b2_frame_commit(f), B2_E_IO); /* sticky: never commits it */
  b2_frame_close(f);
  CHECK_EQ(fi_which(path, &m0, &m1), 0);
  free(m0.b);
  free(m1.b);
}

static void test_power_loss_replay(void) {
  power_loss(B2_LAYOUT_CONTIGUOUS, 0, -1);
  power_loss(B2_LAYOUT_SPARSE, 0, -1);
  power_loss(B2_LAYOUT_CONTIGUOUS, 1, -1);
  power_loss(B2_LAYOUT_SPARSE, 1, -1);
  /* A sync that fails then a retried commit: the retry must write the
   * chunks again, as the first sync may have lost them. */
  power_loss(B2_LAYOUT_CONTIGUOUS, 0, B2_IO_FDATASYNC);
  power_loss(B2_LAYOUT_SPARSE, 0, B2_IO_FSYNC);
  free(pl_evs);
  pl_evs = NULL;
  pl_cap = 0;
}

static void test_fault_commit_contiguous(void) {
  fi_commit_faults(B2_LAYOUT_CONTIGUOUS);
}
static void test_fault_commit_sparse(void) { fi_commit_faults(B2_LAYOUT_SPARSE); }
static void test_fault_crash_view(void) {
  fi_crash_view(B2_LAYOUT_CONTIGUOUS);
  fi_crash_view(B2_LAYOUT_SPARSE);
}
/* The last step of a sparse commit fails (the directory's sync, once the
 * new index has its name): that index already has the time its checksum
 * table vouches for, so readers meanwhile, and after a crash there, check
 * the frame with it. */
static void test_fault_sparse_index_time(void) {
  char path[512];
  tpath(path, sizeof path, "fst.sparse");
  long n = 0;
  for (int pass = 0; pass < 2; pass++) {
    rm_rf(path);
    b2_frame_params p;
    params(&p, B2_LAYOUT_SPARSE, B2_CODEC_LZ4, 4, FI_CS);
    b2_frame *w;
    b2_io_fault_set(0, 0, 0);
    CHECK_EQ(b2_frame_create(path, &p, &w), 0);
    if (!w) return;
    model m = {NULL, 0, FI_CS};
    model_resize(&m, 2 * FI_CS);
    fill(&m, 0, m.n, 5);
    CHECK_EQ(put_model_chunk(w, &p.cparams, &m, 0), 0);
    CHECK_EQ(put_model_chunk(w, &p.cparams, &m, 1), 0);
    b2_io_fault_set(pass ? B2_IO_FSYNC : 0, n, EIO);
    int rc = b2_frame_commit(w);
    if (!pass) n = b2_io_count(B2_IO_FSYNC); /* the last sync: the directory's */
    else CHECK(rc < 0 && b2_io_fault_fired());
    b2_io_fault_set(0, 0, 0);
    b2_frame *r;
    CHECK_EQ(b2_frame_open(path, &r), 0); /* beside the writer, as after a crash */
    b2_frame_csum_info ci;
    if (r) {
      CHECK_EQ(b2_frame_checksums(r, &ci), 0);
      CHECK_EQ(ci.state, B2_CSUM_ALL);
      CHECK(frame_equals(r, &m, "after the failed directory sync"));
      b2_frame_close(r);
    }
    b2_frame_close(w);
    free(m.b);
  }
}

static void test_fault_compact(void) {
  fi_compact_faults(B2_LAYOUT_CONTIGUOUS);
  fi_compact_faults(B2_LAYOUT_SPARSE);
}
static void test_fault_create(void) {
  fi_create_faults(B2_LAYOUT_CONTIGUOUS);
  fi_create_faults(B2_LAYOUT_SPARSE);
}
#endif

/* The kind of a frame from its metalayers (b2_frame_kind, and the header
 * probe b2_frame_kind_at), in python-blosc2's order: markers before b2nd. */
static void test_kinds(void) {
  static const struct {
    const char *m1, *v1, *m2;
    int kind;
  } cases[] = {
      {NULL, NULL, NULL, B2_KIND_SCHUNK},
      {"b2nd", "x", NULL, B2_KIND_NDARRAY},
      {"caterva", "x", NULL, B2_KIND_NDARRAY},
      /* b2o = {"kind": "lazyexpr", "version": 1}, after b2nd */
      {"b2nd", "x", "b2o", B2_KIND_LAZYEXPR},
      {"LazyArray", "\x01", "b2nd", B2_KIND_LAZYARRAY},
      {"vlarray", "x", NULL, B2_KIND_OBJECTARRAY},
      {"listarray", "x", "batcharray", B2_KIND_LISTARRAY},
      {"batcharray", "x", NULL, B2_KIND_BATCHARRAY},
      {"b2nd", "x", "proxy-source", B2_KIND_PROXY},
      {"b2embed", "x", NULL, B2_KIND_EMBEDSTORE},
      {"b2tree", "x", NULL, B2_KIND_TREESTORE},
      {"other", "x", NULL, B2_KIND_SCHUNK},
      {"vlarray", NULL, "b2nd", B2_KIND_OBJECTARRAY}, /* a header of > 512 bytes */
  };
  char big[1200];
  memset(big, 'v', sizeof big - 1);
  big[sizeof big - 1] = 0;
  static const char b2o[] = "\x82\xa4kind\xa8lazyexpr\xa7version\x01";
  for (int layout = 0; layout < 2; layout++) {
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
      char path[512], name[64];
      snprintf(name, sizeof name, "kind%zu.%s", k, layout ? "sparse" : "b2frame");
      tpath(path, sizeof path, name);
      b2_frame_params p;
      params(&p, layout, B2_CODEC_LZ4, 1, 64);
      b2_frame_meta_init mi[2];
      p.nmeta = 0;
      const char *v1 = cases[k].v1 ? cases[k].v1 : big;
      if (cases[k].m1) mi[p.nmeta++] = (b2_frame_meta_init){cases[k].m1, v1, strlen(v1)};
      if (cases[k].m2)
        mi[p.nmeta++] = !strcmp(cases[k].m2, "b2o")
                            ? (b2_frame_meta_init){"b2o", b2o, sizeof b2o - 1}
                            : (b2_frame_meta_init){cases[k].m2, "y", 1};
      p.meta = mi;
      b2_frame *f;
      CHECK_EQ(b2_frame_create(path, &p, &f), 0);
      if (!f) continue;
      CHECK_EQ(b2_frame_kind(f), cases[k].kind);
      b2_frame_close(f);
      int dfd = open(tmproot, O_RDONLY | O_DIRECTORY);
      CHECK_EQ(b2_frame_kind_at(dfd, name), cases[k].kind);
      CHECK_EQ(b2_frame_kind_at(AT_FDCWD, path), cases[k].kind);
      close(dfd);
      CHECK_EQ(b2_frame_kind_is_data(cases[k].kind),
               cases[k].kind == B2_KIND_SCHUNK || cases[k].kind == B2_KIND_NDARRAY);
    }
  }
  /* a kind remembered is forgotten when the frame changes */
  for (int layout = 0; layout < 2; layout++) {
    char cpath[512];
    tpath(cpath, sizeof cpath, layout ? "kindc.sparse" : "kindc.b2frame");
    b2_frame_params cp;
    params(&cp, layout, B2_CODEC_LZ4, 1, 64);
    b2_frame *cf;
    CHECK_EQ(b2_frame_create(cpath, &cp, &cf), 0);
    if (!cf) continue;
    CHECK_EQ(b2_frame_kind_at(AT_FDCWD, cpath), B2_KIND_SCHUNK);
    CHECK_EQ(b2_frame_kind_at(AT_FDCWD, cpath), B2_KIND_SCHUNK); /* remembered */
    CHECK_EQ(b2_frame_meta_set(cf, "vlarray", "x", 1), 0);
    CHECK_EQ(b2_frame_commit(cf), 0);
    b2_frame_close(cf);
    CHECK_EQ(b2_frame_kind_at(AT_FDCWD, cpath), B2_KIND_OBJECTARRAY);
  }
  CHECK(strcmp(b2_frame_kind_name(B2_KIND_LAZYEXPR), "lazyexpr") == 0);
  CHECK(strcmp(b2_frame_kind_name(99), "unknown") == 0);
  CHECK(strcmp(b2_frame_kind_name(B2_KIND_NONE), "none") == 0);
  CHECK(!b2_frame_kind_is_data(B2_KIND_NONE));
  /* not frames at all: B2_KIND_NONE (remembered too); starting like a
   * frame with one byte damaged there: a damaged frame (negative) */
  static const struct {
    const char *bytes;
    size_t len;
    int none;
  } sniff[] = {
      {"not a frame at all", 18, 1},
      {"", 0, 1},
      {"\x9e", 1, 1},                          /* too short to tell: not a frame */
      {"\x9e\xa8" "b2fraXe\0\xd2", 11, 0},     /* damaged magic, array intact */
      {"\x00\xa8" "b2frame\0\xd2", 11, 0},     /* damaged array, magic intact */
      {"\x9d\xa8" "b2f", 5, 0},                 /* older layout, cut short */
      {"\x9e\x00" "b2frXme\0", 10, 1},          /* two bytes damaged: no frame */
      {"\x89PNG\r\n\x1a\n\0\0", 10, 1},
  };
  char path[512];
  for (size_t k = 0; k < sizeof sniff / sizeof *sniff; k++) {
    CHECK_EQ(b2_frame_starts_like((const uint8_t *)sniff[k].bytes, sniff[k].len), !sniff[k].none);
    char name[32];
    snprintf(name, sizeof name, "kind_sniff%zu", k);
    tpath(path, sizeof path, name);
    FILE *fp = fopen(path, "wb");
    CHECK(fp && fwrite(sniff[k].bytes, 1, sniff[k].len, fp) == sniff[k].len);
    if (fp) fclose(fp);
    for (int again = 0; again < 2; again++) {
      if (sniff[k].none) CHECK_EQ(b2_frame_kind_at(AT_FDCWD, path), B2_KIND_NONE);
      else CHECK(b2_frame_kind_at(AT_FDCWD, path) < 0);
    }
  }
  tpath(path, sizeof path, "kind_missing");
  CHECK(b2_frame_kind_at(AT_FDCWD, path) < 0);
  /* a header that claims more bytes than the file holds */
  tpath(path, sizeof path, "kind1.b2frame");
  int fd = open(path, O_RDWR);
  CHECK(fd >= 0 && ftruncate(fd, 90) == 0);
  close(fd);
  CHECK(b2_frame_kind_at(AT_FDCWD, path) < 0);
}

/* The reference library's .b2lock sidecar (lock.c): the counter bumped by
 * a write session and each commit, a foreign change seen by a read-only
 * frame as B2_E_STALE, readers of a frame this process writes never
 * blocked, another process kept out while we write, OFF and AUTO. */
static uint64_t sidecar_gen(const char *lock) {
  uint8_t b[8] = {0};
  uint64_t g = 0;
  int fd = open(lock, O_RDONLY);
  if (fd >= 0 && pread(fd, b, 8, 8) == 8) memcpy(&g, b, 8);
  if (fd >= 0) close(fd);
  return g;
}

/* What another process does: take the exclusive lock, bump the counter. */
static void foreign_bump(const char *lock) {
  int fd = open(lock, O_RDWR);
  CHECK(fd >= 0 && flock(fd, LOCK_EX) == 0);
  uint64_t g = sidecar_gen(lock) + 1;
  CHECK(pwrite(fd, &g, 8, 8) == 8);
  close(fd);
}

/* Whether the frame at path, opened under `mode`, takes part in locking. */
static int locked_as(const char *path, int mode) {
  b2_frame_set_locking(mode);
  b2_frame *r;
  if (b2_frame_open(path, &r) < 0) return -1;
  int yes = b2_frame_locked(r);
  b2_frame_close(r);
  return yes;
}

static void test_locking(void) {
  for (int layout = 0; layout < 2; layout++) {
    char path[512], lock[600];
    tpath(path, sizeof path, layout ? "locked.sparse" : "locked.b2frame");
    snprintf(lock, sizeof lock, layout ? "%s/.b2lock" : "%s.b2lock", path);
    b2_frame_set_locking(B2_LOCKING_ON);
    b2_frame_params p;
    params(&p, layout, B2_CODEC_LZ4, 4, 4096);
    b2_frame *w;
    CHECK_EQ(b2_frame_create(path, &p, &w), 0);
    if (!w) continue;
    CHECK(b2_frame_locked(w));
    uint64_t g0 = sidecar_gen(lock);
    CHECK(g0 >= 1); /* bumped when the write session took the lock */
    model m = {NULL, 0, p.chunksize};
    model_resize(&m, 3 * 4096);
    fill(&m, 0, m.n, 7);
    for (int64_t i = 0; i < 3; i++) CHECK(put_model_chunk(w, &p.cparams, &m, i) >= 0);
    CHECK_EQ(b2_frame_commit(w), 0);
    CHECK_EQ(sidecar_gen(lock), g0 + 1);
    uint64_t g;
    CHECK_EQ(b2_frame_lock_gen(path, &g), 0);
    CHECK_EQ(g, g0 + 1);
    /* another process is kept out while we write */
    pid_t pid = fork();
    if (pid == 0) {
      int fd = open(lock, O_RDWR);
      _exit(fd >= 0 && flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK ? 0 : 1);
    }
    int st = -1;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* a reader in this process is not blocked by our own writer */
    b2_frame *r;
    CHECK_EQ(b2_frame_open(path, &r), 0);
    if (r) {
      CHECK(frame_equals(r, &m, "read beside our writer"));
      b2_frame_close(r);
    }
    b2_frame_close(w);
    /* a read-only frame notices a foreign change through the counter */
    CHECK_EQ(b2_frame_open(path, &r), 0);
    if (!r) continue;
    CHECK(b2_frame_locked(r));
    CHECK(frame_equals(r, &m, "locked read"));
    foreign_bump(lock);
    uint8_t buf[4096];
    CHECK_EQ(b2_frame_decode_chunk(r, 0, buf, sizeof buf), B2_E_STALE);
    b2_frame_close(r);
    CHECK_EQ(b2_frame_open(path, &r), 0); /* opened again: reads */
    if (r) {
      CHECK(frame_equals(r, &m, "reopened"));
      b2_frame_close(r);
    }
    /* OFF: no part in it; AUTO: only with a sidecar */
    CHECK_EQ(locked_as(path, B2_LOCKING_OFF), 0);
    CHECK_EQ(locked_as(path, B2_LOCKING_AUTO), 1);
    unlink(lock);
    CHECK_EQ(locked_as(path, B2_LOCKING_AUTO), 0);
    CHECK_EQ(b2_frame_lock_gen(path, &g), B2_E_NOENT);
    if (!layout) {
      /* Opened by /proc/self/fd/N once its name is gone (readlink then
       * says "PATH (deleted)"): no name leads to it, so no sidecar, and
       * none made beside it under that text. */
      int fd = open(path, O_RDONLY | O_CLOEXEC);
      char proc[64], gone[700];
      snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
      snprintf(gone, sizeof gone, "%s (deleted)" B2_FRAME_LOCK_SUFFIX, path);
      CHECK_EQ(locked_as(proc, B2_LOCKING_ON), 1); /* named: its sidecar */
      CHECK_EQ(unlink(path), 0);
      unlink(lock);
      CHECK_EQ(locked_as(proc, B2_LOCKING_ON), 0);
      CHECK(access(gone, F_OK) != 0);
      if (fd >= 0) close(fd);
    }
    free(m.b);
  }
  b2_frame_set_locking(B2_LOCKING_AUTO);
}

/* ---- temporaries held until renamed --------------------------------------- */

/* A sweeper (another daemon over the same SOURCE, a first look into a
 * directory) calls b2_frame_drop_temp on the temporary of the frame being
 * created, over and over: it must never take a creation's temporary once
 * its creator holds it (it may take one in the moment before, up to 16
 * times a name here: the creator then makes another). */
typedef struct sweeper {
  atomic_int cur, stop;
  int dirfd;
} sweeper;

static void *sweep_loop(void *arg) {
  sweeper *s = arg;
  int last = -1, times = 0;
  while (!atomic_load(&s->stop)) {
    char tmp[64];
    int k = atomic_load(&s->cur);
    if (k != last) last = k, times = 0;
    if (times >= 16) continue; /* (a real sweep looks once per daemon) */
    snprintf(tmp, sizeof tmp, ".t%d.b2frame.b2tmp", k);
    if (b2_frame_drop_temp(s->dirfd, tmp) == 1) times++;
  }
  return NULL;
}

static void test_temp_held(void) {
  char dir[512], path[600];
  tpath(dir, sizeof dir, "temps");
  CHECK_EQ(mkdir(dir, 0755), 0);
  int dfd = open(dir, O_RDONLY | O_DIRECTORY);
  CHECK(dfd >= 0);
  b2_frame_params p;
  /* 1. Creations race a sweeper: every one succeeds, nothing is dropped. */
  for (int layout = 0; layout < 2; layout++) {
    int lay = layout ? B2_LAYOUT_SPARSE : B2_LAYOUT_CONTIGUOUS;
    params(&p, lay, B2_CODEC_LZ4, 4, 4000);
    sweeper s = {.dirfd = dfd};
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, sweep_loop, &s), 0);
    int fails = 0;
    for (int i = 0; i < 150; i++) {
      int k = layout * 1000 + i;
      atomic_store(&s.cur, k);
      snprintf(path, sizeof path, "%s/t%d.b2frame", dir, k);
      b2_frame *f;
      int rc = b2_frame_create(path, &p, &f);
      if (rc < 0) {
        if (fails++ < 3) fprintf(stderr, "  create %s: %s\n", path, b2_last_detail());
        continue;
      }
      b2_frame_close(f);
    }
    atomic_store(&s.stop, 1);
    pthread_join(th, NULL);
    /* (the sweeper may take a temporary in the moment before its creator
     * locks it: the creator then makes another) */
    CHECK_EQ(fails, 0);
  }
  /* 2. A temporary another process holds (here: another open file
   * description) stays, and a creation of that name is refused (busy);
   * once free it is a leftover: dropped, and the creation succeeds. */
  params(&p, B2_LAYOUT_CONTIGUOUS, B2_CODEC_LZ4, 4, 4000);
  int h = openat(dfd, ".held.b2frame.b2tmp", O_RDWR | O_CREAT | O_EXCL, 0644);
  CHECK(h >= 0 && flock(h, LOCK_EX) == 0);
  CHECK_EQ(b2_frame_drop_temp(dfd, ".held.b2frame.b2tmp"), 0);
  struct stat st;
  CHECK_EQ(fstatat(dfd, ".held.b2frame.b2tmp", &st, 0), 0);
  snprintf(path, sizeof path, "%s/held.b2frame", dir);
  b2_frame *f = NULL;
  CHECK_EQ(b2_frame_create(path, &p, &f), B2_E_BUSY);
  close(h);
  CHECK_EQ(b2_frame_create(path, &p, &f), 0);
  if (f) b2_frame_close(f);
  CHECK(fstatat(dfd, ".held.b2frame.b2tmp", &st, 0) != 0);
  /* 3. A hidden directory holding more than a creation writes is kept;
   * a creation's leftover directory goes; other names are not temporaries. */
  CHECK_EQ(mkdirat(dfd, ".d.b2frame.b2tmp", 0755), 0);
  int sub = openat(dfd, ".d.b2frame.b2tmp", O_RDONLY | O_DIRECTORY);
  CHECK(sub >= 0);
  int x = openat(sub, "chunks.b2frame", O_WRONLY | O_CREAT, 0644);
  close(x);
  x = openat(sub, "mine.txt", O_WRONLY | O_CREAT, 0644);
  close(x);
  CHECK_EQ(b2_frame_drop_temp(dfd, ".d.b2frame.b2tmp"), 0);
  CHECK_EQ(unlinkat(sub, "mine.txt", 0), 0);
  close(sub);
  CHECK_EQ(b2_frame_drop_temp(dfd, ".d.b2frame.b2tmp"), 1);
  CHECK(fstatat(dfd, ".d.b2frame.b2tmp", &st, 0) != 0);
  x = openat(dfd, "plain.b2frame", O_WRONLY | O_CREAT, 0644);
  close(x);
  CHECK_EQ(b2_frame_drop_temp(dfd, "plain.b2frame"), 0);
  CHECK_EQ(fstatat(dfd, "plain.b2frame", &st, 0), 0);
  close(dfd);
}

/* Names near NAME_MAX: the temporaries derived from them are shortened
 * (a prefix and a hash, one name per base, room left for a `.b2lock`), so
 * frames of such names are created, rewritten, remade and redone, and the
 * sweep finds the shortened leftovers: a free temporary goes, the redo
 * file of a frame still there is finished, one of a frame gone goes. */
static int never_busy(void *ctx, int dirfd, const char *name) {
  (void)ctx, (void)dirfd, (void)name;
  return 0;
}

static void test_long_names(void) {
  char a[NAME_MAX + 1], b[NAME_MAX + 1], t1[NAME_MAX + 1], t2[NAME_MAX + 1];
  CHECK_EQ(b2_frame_temp_name("x.b2frame", B2_FRAME_TEMP_SUFFIX, t1, sizeof t1), 0);
  CHECK(strcmp(t1, ".x.b2frame.b2tmp") == 0);
  CHECK(!b2_frame_temp_hashed(t1, B2_FRAME_TEMP_SUFFIX));
  memset(a, 'a', 247);
  strcpy(a + 247, ".b2frame"); /* 255 bytes */
  strcpy(b, a);
  b[200] = 'b';
  const char *sfx[] = {B2_FRAME_TEMP_SUFFIX, B2_FRAME_REDO_SUFFIX};
  for (int k = 0; k < 2; k++) {
    CHECK_EQ(b2_frame_temp_name(a, sfx[k], t1, sizeof t1), 0);
    CHECK_EQ(b2_frame_temp_name(b, sfx[k], t2, sizeof t2), 0);
    CHECK_EQ((int)strlen(t1), B2_FRAME_TEMP_NAME_MAX);
    CHECK((int)(strlen(t1) + strlen(B2_FRAME_LOCK_SUFFIX)) <= NAME_MAX);
    CHECK(strcmp(t1, t2) != 0);
    CHECK(b2_frame_temp_hashed(t1, sfx[k]) && !b2_frame_temp_hashed(t1, sfx[1 - k]));
    CHECK(b2_ns_name_hidden(t1));
  }
  CHECK_EQ(b2_frame_temp_name(a, B2_FRAME_TEMP_SUFFIX, t2, sizeof t2), 0);
  CHECK_EQ(b2_frame_temp_name(a, B2_FRAME_TEMP_SUFFIX, t1, 20), -1);
  /* a frame of that name: created, written, compacted, remade */
  char dir[512];
  tpath(dir, sizeof dir, "long");
  CHECK_EQ(mkdir(dir, 0755), 0);
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  CHECK(dfd >= 0);
  b2_frame_params p;
  params(&p, B2_LAYOUT_CONTIGUOUS, B2_CODEC_LZ4, 1, 4000);
  b2_frame *f = NULL;
  CHECK_EQ(b2_frame_create_at(dfd, a, &p, &f), 0);
  if (!f) return;
  CHECK_EQ(b2_frame_resize(f, 10000), 0);
  CHECK_EQ(b2_frame_compact(f), 0);
  CHECK_EQ(b2_frame_remake(&f, &p, 123), 0);
  CHECK(f != NULL);
  if (f) CHECK_EQ(b2_frame_get_info(f)->nbytes, 123);
  if (f) b2_frame_close(f);
  /* in place through a redo file: hard-linked, then a crash in the copy */
  CHECK_EQ(linkat(dfd, a, dfd, "l2.b2frame", 0), 0);
  CHECK_EQ(b2_frame_open_rw_at(dfd, a, &f), 0);
  if (f) CHECK_EQ(b2_frame_resize(f, 0), 0);
  if (f) CHECK_EQ(b2_frame_compact(f), 0);
  if (f) b2_frame_close(f);
  struct stat st, lt;
  CHECK_EQ(fstatat(dfd, a, &st, 0), 0);
  CHECK_EQ(fstatat(dfd, "l2.b2frame", &lt, 0), 0);
  CHECK(st.st_ino == lt.st_ino && st.st_nlink == 2);
  char redo[NAME_MAX + 1], cmd[2048];
  CHECK_EQ(b2_frame_temp_name(a, B2_FRAME_REDO_SUFFIX, redo, sizeof redo), 0);
  snprintf(cmd, sizeof cmd, "cd '%s' && cp -- '%s' '%s' && printf torn | dd of='%s' conv=notrunc status=none",
           dir, a, redo, a);
  CHECK_EQ(system(cmd), 0);
  CHECK(b2_frame_open_rw_at(dfd, "l2.b2frame", &f) < 0);
  if (f) b2_frame_close(f);
  f = NULL;
  CHECK_EQ(b2_frame_redo(dfd, a), 0);
  CHECK(fstatat(dfd, redo, &st, 0) != 0);
  CHECK_EQ(b2_frame_open_rw_at(dfd, "l2.b2frame", &f), 0);
  if (f) b2_frame_close(f);
  /* leftovers of a crash: a free temporary of a, the redo file of a frame
   * gone; one of a frame still there is finished (a torn again) */
  int x = openat(dfd, t2, O_WRONLY | O_CREAT | O_EXCL, 0644);
  close(x);
  snprintf(cmd, sizeof cmd, "cd '%s' && cp -- '%s' '%s' && printf torn | dd of='%s' conv=notrunc status=none",
           dir, a, redo, a);
  CHECK_EQ(system(cmd), 0);
  CHECK_EQ(b2_frame_temp_name(b, B2_FRAME_REDO_SUFFIX, t1, sizeof t1), 0);
  x = openat(dfd, t1, O_WRONLY | O_CREAT | O_EXCL, 0644);
  close(x);
  b2_ns_sweep_ops ops = {never_busy, NULL, NULL};
  CHECK_EQ(b2_ns_sweep(dfd, &ops), 3);
  CHECK(fstatat(dfd, t2, &st, 0) != 0 && fstatat(dfd, redo, &st, 0) != 0 &&
        fstatat(dfd, t1, &st, 0) != 0);
  CHECK_EQ(b2_frame_open_rw_at(dfd, a, &f), 0);
  if (f) b2_frame_close(f);
  close(dfd);
  rm_rf(dir);
}

int main(void) {
  make_root();
  T_RUN(test_roundtrip_contiguous);
  T_RUN(test_roundtrip_sparse);
  T_RUN(test_replaces_contiguous);
  T_RUN(test_replaces_sparse);
  T_RUN(test_codecs);
  T_RUN(test_resize_contiguous);
  T_RUN(test_resize_sparse);
  T_RUN(test_specials);
  T_RUN(test_small_frames);
  T_RUN(test_unset_chunksize);
  T_RUN(test_metas_contiguous);
  T_RUN(test_metas_sparse);
  T_RUN(test_refusals);
  T_RUN(test_modify_reference_frames);
  T_RUN(test_concurrent_readers);
  T_RUN(test_kinds);
  T_RUN(test_locking);
  T_RUN(test_temp_held);
  T_RUN(test_long_names);
#ifdef B2_FAULT_INJECTION
  T_RUN(test_fault_commit_contiguous);
  T_RUN(test_fault_commit_sparse);
  T_RUN(test_fault_crash_view);
  T_RUN(test_fault_compact);
  T_RUN(test_fault_sparse_index_time);
  T_RUN(test_fault_create);
  T_RUN(test_power_loss_replay);
  T_RUN(test_fault_lost_chunk);
  T_RUN(test_moved_behind);
  T_RUN(test_linked_in_place);
#endif
  if (!getenv("B2FW_KEEP")) rm_rf(tmproot);
  T_END();
}
