/*
 * test_frame.c - layer 3 (frames) and the msgpack reader/writer.
 *
 * Every frame of the fixtures' manifests is opened, its chunks decoded in
 * order and the sha256 of the concatenation compared with the manifest;
 * range decodes are compared with slices of full decodes; metalayers are
 * read and parsed; every damaged file in bad/ must fail cleanly (the
 * details are printed on stderr for a human to judge).
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "b2_chunk.h"
#include "b2_error.h"
#include "b2_frame.h"
#include "common/msgpack.h"
#include "common/util.h"
#include "sha256.h"
#include "t.h"

/* ---- helpers ------------------------------------------------------------- */

typedef struct entry {
  char path[512];
  long long nbytes;
  long long nchunks;
  char sha[65];
} entry;

/* Read `manifest` (path nbytes nchunks sha256 ...); returns count. */
static int load_manifest(const char *manifest, entry **out) {
  FILE *fp = fopen(manifest, "r");
  *out = NULL;
  if (!fp) return -1;
  int n = 0, cap = 0;
  entry *v = NULL;
  char line[2048];
  while (fgets(line, sizeof line, fp)) {
    if (line[0] == '#' || line[0] == '\n') continue;
    entry e;
    if (sscanf(line, "%511s %lld %lld %64s", e.path, &e.nbytes, &e.nchunks,
               e.sha) != 4)
      continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 64;
      v = realloc(v, (size_t)cap * sizeof *v);
    }
    v[n++] = e;
  }
  fclose(fp);
  *out = v;
  return n;
}

static int exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* Decode every chunk of f in order into a sha256; returns 0 or the first
 * error. */
static int hash_frame(b2_frame *f, char hex[65], long long *total) {
  const b2_frame_info *in = b2_frame_get_info(f);
  t_sha256 s;
  t_sha256_init(&s);
  size_t cap = 0;
  uint8_t *buf = NULL;
  *total = 0;
  int rc = 0;
  for (int64_t i = 0; i < in->nchunks; i++) {
    int32_t nb = b2_frame_chunk_nbytes(f, i);
    if (nb < 0) return nb;
    if ((size_t)nb > cap) {
      cap = (size_t)nb;
      buf = realloc(buf, cap);
    }
    rc = b2_frame_decode_chunk(f, i, buf, cap);
    if (rc < 0) break;
    if (rc != nb) {
      rc = -1;
      break;
    }
    t_sha256_update(&s, buf, (size_t)nb);
    *total += nb;
  }
  free(buf);
  t_sha256_hex(&s, hex);
  return rc < 0 ? rc : 0;
}

static void check_manifest(const char *name, int (*skip)(const entry *)) {
  char mpath[1024];
  snprintf(mpath, sizeof mpath, "%s/%s", t_fixtures(), name);
  entry *v;
  int n = load_manifest(mpath, &v);
  if (n < 0) T_SKIP("no %s", mpath);
  CHECK(n > 0);
  int done = 0;
  for (int k = 0; k < n; k++) {
    if (skip && skip(&v[k])) continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", t_fixtures(), v[k].path);
    b2_frame *f;
    int rc = b2_frame_open(path, &f);
    if (rc < 0) {
      fprintf(stderr, "  %s: open failed: %s\n", v[k].path, b2_last_detail());
      CHECK_EQ(rc, 0);
      continue;
    }
    const b2_frame_info *in = b2_frame_get_info(f);
    if (in->nchunks != v[k].nchunks || in->nbytes != v[k].nbytes)
      fprintf(stderr, "  %s: nchunks %lld nbytes %lld\n", v[k].path,
              (long long)in->nchunks, (long long)in->nbytes);
    CHECK_EQ(in->nchunks, v[k].nchunks);
    CHECK_EQ(in->nbytes, v[k].nbytes);
    char hex[65];
    long long total;
    rc = hash_frame(f, hex, &total);
    if (rc < 0 || strcmp(hex, v[k].sha) != 0)
      fprintf(stderr, "  %s: rc %d (%s), sha %s\n", v[k].path, rc,
              rc < 0 ? b2_last_detail() : "", hex);
    CHECK_EQ(rc, 0);
    CHECK_EQ(total, v[k].nbytes);
    CHECK(strcmp(hex, v[k].sha) == 0);
    b2_frame_close(f);
    done++;
  }
  CHECK(done > 0);
  free(v);
}

static const char *const BIG = "cframe/zstd-6gib-sparse.b2frame";

static int skip_big(const entry *e) { return strcmp(e->path, BIG) == 0; }

/* ---- msgpack ------------------------------------------------------------- */

static void test_msgpack_roundtrip(void) {
  b2_mp_writer w;
  b2_mp_writer_init(&w, NULL, 0);
  const int64_t ints[] = {0, 1, 127, 128, 255, 256, 65535, 65536,
                          4294967295LL, 4294967296LL, INT64_MAX, -1, -32,
                          -33, -128, -129, -32768, -32769, INT32_MIN,
                          (int64_t)INT32_MIN - 1, INT64_MIN};
  const size_t nints = sizeof ints / sizeof ints[0];
  b2_mp_put_array(&w, (uint32_t)(nints + 12));
  for (size_t k = 0; k < nints; k++) b2_mp_put_int(&w, ints[k]);
  b2_mp_put_uint(&w, UINT64_MAX);
  b2_mp_put_nil(&w);
  b2_mp_put_bool(&w, 1);
  b2_mp_put_float64(&w, 1.5);
  b2_mp_put_str(&w, "b2frame", 8);
  char big[300];
  memset(big, 'x', sizeof big);
  b2_mp_put_str(&w, big, sizeof big);
  b2_mp_put_bin(&w, big, 40);
  b2_mp_put_bin32(&w, big, 3);
  b2_mp_put_ext(&w, 6, big, 16);
  b2_mp_put_map16(&w, 1);
  b2_mp_put_str(&w, "k", 1);
  b2_mp_put_i32(&w, -7);
  b2_mp_put_u64(&w, 5);
  b2_mp_put_array16(&w, 0);
  CHECK_EQ(w.err, 0);

  b2_mp_reader r;
  b2_mp_reader_init(&r, w.buf, w.len);
  uint32_t n;
  CHECK_EQ(b2_mp_read_array(&r, &n), 0);
  CHECK_EQ(n, nints + 12);
  for (size_t k = 0; k < nints; k++) {
    int64_t v = 0;
    CHECK_EQ(b2_mp_read_int(&r, &v), 0);
    CHECK(v == ints[k]);
  }
  uint64_t u;
  int64_t iv;
  CHECK_EQ(b2_mp_read_int(&r, &iv), B2_E_FORMAT); /* > INT64_MAX */
  CHECK_EQ(b2_mp_read_uint(&r, &u), 0);
  CHECK(u == UINT64_MAX);
  b2_mp_item it;
  CHECK_EQ(b2_mp_next(&r, &it), 0);
  CHECK_EQ(it.kind, B2_MP_NIL);
  int b = 0;
  CHECK_EQ(b2_mp_read_bool(&r, &b), 0);
  CHECK_EQ(b, 1);
  CHECK_EQ(b2_mp_next(&r, &it), 0);
  CHECK(it.kind == B2_MP_FLOAT && it.f == 1.5);
  const uint8_t *s;
  CHECK_EQ(b2_mp_read_str(&r, &s, &n), 0);
  CHECK(n == 8 && memcmp(s, "b2frame", 8) == 0);
  CHECK_EQ(b2_mp_read_str(&r, &s, &n), 0);
  CHECK_EQ(n, 300);
  CHECK_EQ(b2_mp_read_bin(&r, &s, &n), 0);
  CHECK_EQ(n, 40);
  CHECK_EQ(b2_mp_next(&r, &it), 0);
  CHECK(it.kind == B2_MP_BIN && it.marker == 0xc6 && it.len == 3);
  int8_t et;
  CHECK_EQ(b2_mp_read_ext(&r, &et, &s, &n), 0);
  CHECK(et == 6 && n == 16);
  size_t at = r.pos;
  CHECK_EQ(b2_mp_skip(&r), 0); /* the map, nested items included */
  CHECK_EQ(r.pos - at, 3 + 2 + 5);
  CHECK_EQ(b2_mp_read_uint(&r, &u), 0);
  CHECK(u == 5);
  CHECK_EQ(b2_mp_read_array(&r, &n), 0);
  CHECK_EQ(n, 0);
  CHECK_EQ(r.pos, w.len);
  CHECK_EQ(b2_mp_next(&r, &it), B2_E_TRUNCATED);

  /* Every truncation of the buffer reads without overrunning it. */
  for (size_t cut = 0; cut < w.len; cut++) {
    uint8_t *copy = malloc(cut ? cut : 1);
    memcpy(copy, w.buf, cut);
    b2_mp_reader_init(&r, copy, cut);
    CHECK(b2_mp_skip(&r) < 0);
    free(copy);
  }
  b2_mp_writer_free(&w);

  /* A fixed buffer reports a full buffer and keeps the error. */
  uint8_t small[4];
  b2_mp_writer_init(&w, small, sizeof small);
  CHECK_EQ(b2_mp_put_i32(&w, 1), B2_E_NOSPC);
  CHECK_EQ(b2_mp_put_nil(&w), B2_E_NOSPC);

  /* Huge declared sizes and counts fail without reading past the end. */
  const uint8_t lies[][6] = {{0xdb, 0xff, 0xff, 0xff, 0xff, 0},
                             {0xdd, 0xff, 0xff, 0xff, 0xff, 0},
                             {0xc9, 0x7f, 0xff, 0xff, 0xff, 1},
                             {0xc1, 0, 0, 0, 0, 0}};
  for (size_t k = 0; k < 4; k++) {
    b2_mp_reader_init(&r, lies[k], sizeof lies[k]);
    CHECK(b2_mp_skip(&r) < 0);
    CHECK_EQ(r.pos, 0);
  }
}

/* ---- fixtures ------------------------------------------------------------ */

static void test_manifest_frames(void) { check_manifest("manifest.tsv", skip_big); }

static void test_legacy_frames(void) {
  check_manifest("legacy/manifest.tsv", NULL);
  char path[1024];
  snprintf(path, sizeof path, "%s/legacy/legacy-zstd-shuffle-odd.b2frame",
           t_fixtures());
  b2_frame *f;
  if (b2_frame_open(path, &f) < 0) return;
  const b2_frame_info *in = b2_frame_get_info(f);
  CHECK_EQ(in->legacy, 1);
  CHECK_EQ(in->codec, B2_CODEC_ZSTD);
  CHECK_EQ(in->chunksize, 300000);
  CHECK_EQ(in->filters[0], B2_FILTER_SHUFFLE);
  /* The metalayer "legacy" holds [1, 2, 3]; the usermeta chunk "hello". */
  const uint8_t *d;
  size_t len;
  CHECK_EQ(b2_frame_meta_get(f, "legacy", &d, &len), 0);
  CHECK(len == 4 && memcmp(d, "\x93\x01\x02\x03", 4) == 0);
  uint8_t *um;
  CHECK_EQ(in->nvlmeta, 1);
  CHECK_EQ(b2_frame_vlmeta_get(f, "usermeta", &um, &len), 0);
  if (len == 6) CHECK_MEM(um, "\xa5hello", 6);
  CHECK_EQ(len, 6);
  free(um);
  b2_frame_close(f);
}

/* Stream the 6 GiB frame's decode into `openssl dgst -sha256` (SHA-NI
 * makes that ~10x faster than hashing in this ASan build). */
static void test_6gib_frame_full_sha(void) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", t_fixtures(), BIG);
  if (!exists(path)) T_SKIP("no %s", path);
  FILE *probe = popen("openssl version >/dev/null 2>&1 && echo y", "r");
  char yes[8] = "";
  if (probe) {
    if (!fgets(yes, sizeof yes, probe)) yes[0] = 0;
    pclose(probe);
  }
  if (yes[0] != 'y') T_SKIP("openssl not available to hash 6 GiB quickly");
  entry *v;
  char mpath[1024];
  snprintf(mpath, sizeof mpath, "%s/manifest.tsv", t_fixtures());
  int n = load_manifest(mpath, &v);
  const entry *e = NULL;
  for (int k = 0; k < n; k++)
    if (strcmp(v[k].path, BIG) == 0) e = &v[k];
  CHECK(e != NULL);
  if (!e) return;
  b2_frame *f;
  int rc = b2_frame_open(path, &f);
  CHECK_EQ(rc, 0);
  if (rc < 0) {
    fprintf(stderr, "  %s\n", b2_last_detail());
    free(v);
    return;
  }
  const b2_frame_info *in = b2_frame_get_info(f);
  CHECK_EQ(in->nchunks, e->nchunks);
  CHECK_EQ(in->nbytes, e->nbytes);
  CHECK(in->nbytes > ((int64_t)4 << 30));
  char tmp[] = "/tmp/test_frame_sha.XXXXXX";
  int tfd = mkstemp(tmp);
  CHECK(tfd >= 0);
  char cmd[1100];
  snprintf(cmd, sizeof cmd, "openssl dgst -sha256 -r > %s", tmp);
  FILE *p = popen(cmd, "w");
  CHECK(p != NULL);
  uint8_t *buf = malloc((size_t)in->chunksize);
  long long total = 0;
  for (int64_t i = 0; p && i < in->nchunks; i++) {
    int32_t nb = b2_frame_chunk_nbytes(f, i);
    rc = b2_frame_decode_chunk(f, i, buf, (size_t)in->chunksize);
    if (rc != nb) {
      fprintf(stderr, "  chunk %lld: %d %s\n", (long long)i, rc,
              b2_last_detail());
      CHECK_EQ(rc, nb);
      break;
    }
    CHECK_EQ(fwrite(buf, 1, (size_t)nb, p), nb);
    total += nb;
  }
  if (p) pclose(p);
  CHECK_EQ(total, e->nbytes);
  char hex[65] = "";
  FILE *r = fopen(tmp, "r");
  if (r) {
    if (fscanf(r, "%64s", hex) != 1) hex[0] = 0;
    fclose(r);
  }
  unlink(tmp);
  if (tfd >= 0) close(tfd);
  if (strcmp(hex, e->sha) != 0) fprintf(stderr, "  sha %s\n", hex);
  CHECK(strcmp(hex, e->sha) == 0);
  /* Geometry past 4 GiB: the chunk holding a byte beyond 2^32. */
  int64_t off = ((int64_t)5 << 30) + 12345;
  int64_t c = b2_frame_chunk_at(f, off);
  CHECK(c >= 0 && b2_frame_chunk_start(f, c) <= off &&
        off < b2_frame_chunk_start(f, c) + b2_frame_chunk_nbytes(f, c));
  CHECK_EQ(b2_frame_chunk_start(f, in->nchunks), in->nbytes);
  free(buf);
  free(v);
  b2_frame_close(f);
}

/* Range decodes at odd offsets equal slices of full decodes. */
static void test_range_decodes(void) {
  static const char *const frames[] = {
      "cframe/zstd-shuffle-f64.b2frame", "cframe/lz4-shuffle-typesize3.b2frame",
      "cframe/zstd-delta-shuffle-i32.b2frame",
      "cframe/zstd-special-chunks-f64.b2frame",
      "cframe/lz4-edited-i32.b2frame", "sframe/lz4-edited-i32.b2frame",
      "reference/varchunks-lz4-3.0.0.b2frame", "legacy/legacy-zstd-shuffle-odd.b2frame",
      "cframe/f32-nan-run.b2frame"};
  int done = 0;
  uint32_t seed = 12345;
  for (size_t k = 0; k < sizeof frames / sizeof frames[0]; k++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", t_fixtures(), frames[k]);
    b2_frame *f;
    if (!exists(path)) continue;
    int rc = b2_frame_open(path, &f);
    CHECK_EQ(rc, 0);
    if (rc < 0) continue;
    const b2_frame_info *in = b2_frame_get_info(f);
    for (int64_t i = 0; i < in->nchunks; i++) {
      int32_t nb = b2_frame_chunk_nbytes(f, i);
      uint8_t *full = malloc((size_t)nb + 1);
      uint8_t *part = malloc((size_t)nb + 1);
      CHECK_EQ(b2_frame_decode_chunk(f, i, full, (size_t)nb), nb);
      for (int t = 0; t < 6; t++) {
        seed = seed * 1103515245u + 12345u;
        size_t off = nb ? (seed >> 8) % (size_t)nb : 0;
        seed = seed * 1103515245u + 12345u;
        size_t n = nb ? (seed >> 8) % ((size_t)nb - off + 1) : 0;
        if (t == 0) off = 1, n = nb > 2 ? (size_t)nb - 2 : 0;
        if (t == 1) off = (size_t)nb > 7 ? (size_t)nb - 7 : 0,
            n = (size_t)nb - off;
        rc = b2_frame_decode_range(f, i, off, n, part);
        if (rc != (int)n)
          fprintf(stderr, "  %s chunk %lld [%zu,+%zu): %d %s\n", frames[k],
                  (long long)i, off, n, rc, b2_last_detail());
        CHECK_EQ(rc, n);
        CHECK_MEM(part, full + off, n);
        /* The same read fetching only the blocks it decodes; and short
         * reads, which fetch one or two blocks. */
        size_t m = n > 5000 ? 4096 + (seed >> 20) % 900 : n;
        CHECK_EQ(b2_frame_read_range(f, i, off, n, part), n);
        CHECK_MEM(part, full + off, n);
        memset(part, 0xA5, (size_t)nb + 1);
        CHECK_EQ(b2_frame_read_range(f, i, off, m, part), m);
        CHECK_MEM(part, full + off, m);
        CHECK_EQ(part[m], 0xA5);
      }
      /* Past the end: a range error, nothing written. */
      CHECK_EQ(b2_frame_decode_range(f, i, (size_t)nb, 1, part), B2_E_RANGE);
      CHECK_EQ(b2_frame_read_range(f, i, (size_t)nb, 1, part), B2_E_RANGE);
      CHECK_EQ(b2_frame_chunk_has_csum(f, i), 0); /* the reference writes none */
      free(full);
      free(part);
    }
    b2_frame_close(f);
    done++;
  }
  if (!done) T_SKIP("no fixtures");
}

/* Chunk geometry and the chunk-level accessors agree with each other. */
static void test_geometry_and_read_chunk(void) {
  static const char *const frames[] = {
      "cframe/zlib-shuffle-odd-tail.b2frame",
      "reference/varchunks-lz4-3.0.0.b2frame",
      "cframe/zstd-special-chunks-f64.b2frame",
      "cframe/lz4-fill-special-zeros-nan.b2frame",
      "sframe/lz4-edited-i32.b2frame", "b2nd/empty-0x10.b2nd"};
  int done = 0;
  for (size_t k = 0; k < sizeof frames / sizeof frames[0]; k++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", t_fixtures(), frames[k]);
    if (!exists(path)) continue;
    b2_frame *f;
    int rc = b2_frame_open(path, &f);
    CHECK_EQ(rc, 0);
    if (rc < 0) continue;
    const b2_frame_info *in = b2_frame_get_info(f);
    int64_t sum = 0;
    for (int64_t i = 0; i < in->nchunks; i++) {
      int32_t nb = b2_frame_chunk_nbytes(f, i);
      CHECK_EQ(b2_frame_chunk_start(f, i), sum);
      if (nb > 0) {
        CHECK_EQ(b2_frame_chunk_at(f, sum), i);
        CHECK_EQ(b2_frame_chunk_at(f, sum + nb - 1), i);
      }
      sum += nb;
      /* read_chunk gives a chunk that decodes like decode_chunk. */
      uint8_t *c;
      size_t clen;
      rc = b2_frame_read_chunk(f, i, &c, &clen);
      CHECK_EQ(rc, 0);
      int sp = b2_frame_chunk_special(f, i);
      int64_t cb = b2_frame_chunk_cbytes(f, i);
      if (sp == B2_SPECIAL_NONE) CHECK_EQ(cb, (int64_t)clen);
      else CHECK_EQ(cb, 0);
      if (rc == 0) {
        uint8_t *a = malloc((size_t)nb + 1), *b = malloc((size_t)nb + 1);
        CHECK_EQ(b2_chunk_decode(c, clen, a, (size_t)nb), nb);
        CHECK_EQ(b2_frame_decode_chunk(f, i, b, (size_t)nb), nb);
        CHECK_MEM(a, b, (size_t)nb);
        free(a);
        free(b);
        free(c);
      }
    }
    CHECK_EQ(sum, in->nbytes);
    CHECK_EQ(b2_frame_chunk_start(f, in->nchunks), in->nbytes);
    CHECK_EQ(b2_frame_chunk_nbytes(f, in->nchunks), B2_E_RANGE);
    CHECK_EQ(b2_frame_chunk_nbytes(f, -1), B2_E_RANGE);
    CHECK_EQ(b2_frame_chunk_at(f, in->nbytes), B2_E_RANGE);
    CHECK_EQ(b2_frame_chunk_special(f, in->nchunks), B2_E_RANGE);
    uint8_t one;
    CHECK_EQ(b2_frame_decode_chunk(f, in->nchunks, &one, 1), B2_E_RANGE);
    b2_frame_close(f);
    done++;
  }
  if (!done) T_SKIP("no fixtures");
}

/* Special chunks: the fixture names say which kinds the index holds. */
static void test_special_entries(void) {
  char path[1024];
  snprintf(path, sizeof path, "%s/cframe/f32-nan-run.b2frame", t_fixtures());
  if (!exists(path)) T_SKIP("no fixtures");
  b2_frame *f;
  CHECK_EQ(b2_frame_open(path, &f), 0);
  if (!f) return;
  const b2_frame_info *in = b2_frame_get_info(f);
  CHECK_EQ(in->nchunks, 8);
  for (int64_t i = 0; i < in->nchunks; i++) {
    CHECK_EQ(b2_frame_chunk_special(f, i), B2_SPECIAL_NAN);
    float v[4];
    CHECK_EQ(b2_frame_decode_range(f, i, 4, sizeof v, v), (int)sizeof v);
    for (int k = 0; k < 4; k++) CHECK(v[k] != v[k]); /* NaN */
  }
  b2_frame_close(f);
}

static void test_metalayers(void) {
  char path[1024];
  snprintf(path, sizeof path, "%s/cframe/zstd-metalayers.b2frame",
           t_fixtures());
  if (!exists(path)) T_SKIP("no fixtures");
  b2_frame *f;
  int rc = b2_frame_open(path, &f);
  CHECK_EQ(rc, 0);
  if (rc < 0) return;
  const b2_frame_info *in = b2_frame_get_info(f);
  CHECK_EQ(in->nmeta, 2);
  CHECK_EQ(in->nvlmeta, 2);
  CHECK(b2_frame_meta_name(f, 0) && !strcmp(b2_frame_meta_name(f, 0), "units"));
  CHECK(b2_frame_meta_name(f, 1) && !strcmp(b2_frame_meta_name(f, 1), "calib"));
  CHECK(b2_frame_meta_name(f, 2) == NULL);
  CHECK(b2_frame_vlmeta_name(f, 0) &&
        !strcmp(b2_frame_vlmeta_name(f, 0), "author"));
  CHECK(b2_frame_vlmeta_name(f, 1) &&
        !strcmp(b2_frame_vlmeta_name(f, 1), "attrs"));
  const uint8_t *d;
  size_t len;
  b2_mp_reader r;
  /* units: the msgpack str "kelvins"; calib: [1, 2, 1.5]. */
  CHECK_EQ(b2_frame_meta_get(f, "units", &d, &len), 0);
  const uint8_t *s;
  uint32_t n;
  b2_mp_reader_init(&r, d, len);
  CHECK_EQ(b2_mp_read_str(&r, &s, &n), 0);
  CHECK(n == 7 && memcmp(s, "kelvins", 7) == 0);
  CHECK_EQ(r.pos, len);
  CHECK_EQ(b2_frame_meta_get(f, "calib", &d, &len), 0);
  b2_mp_reader_init(&r, d, len);
  CHECK_EQ(b2_mp_read_array(&r, &n), 0);
  CHECK_EQ(n, 3);
  CHECK_EQ(b2_mp_skip(&r), 0);
  CHECK_EQ(b2_mp_skip(&r), 0);
  b2_mp_item it;
  CHECK_EQ(b2_mp_next(&r, &it), 0);
  CHECK(it.kind == B2_MP_FLOAT && it.f == 1.5);
  CHECK_EQ(b2_frame_meta_get(f, "nope", &d, &len), B2_E_NOENT);
  /* vlmetalayers are compressed chunks holding msgpack. */
  uint8_t *vd;
  CHECK_EQ(b2_frame_vlmeta_get(f, "author", &vd, &len), 0);
  b2_mp_reader_init(&r, vd, len);
  CHECK_EQ(b2_mp_read_str(&r, &s, &n), 0);
  CHECK(n == 14 && memcmp(s, "Ada Lovelace 1", 14) == 0);
  CHECK_EQ(r.pos, len);
  free(vd);
  CHECK_EQ(b2_frame_vlmeta_get(f, "attrs", &vd, &len), 0);
  b2_mp_reader_init(&r, vd, len);
  CHECK_EQ(b2_mp_read_str(&r, &s, &n), 0);
  CHECK(n > 0 && s[0] == '{');
  free(vd);
  CHECK_EQ(b2_frame_vlmeta_get(f, "nope", &vd, &len), B2_E_NOENT);
  b2_frame_close(f);

  /* Every b2nd array carries a "b2nd" metalayer that is one msgpack
   * array; vlmetalayers (if any) decompress. */
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/b2nd", t_fixtures());
  DIR *dp = opendir(dir);
  CHECK(dp != NULL);
  struct dirent *de;
  int arrays = 0;
  while (dp && (de = readdir(dp)) != NULL) {
    if (de->d_name[0] == '.') continue;
    if (snprintf(path, sizeof path, "%s/%s", dir, de->d_name) >=
        (int)sizeof path)
      continue;
    rc = b2_frame_open(path, &f);
    CHECK_EQ(rc, 0);
    if (rc < 0) {
      fprintf(stderr, "  %s: %s\n", de->d_name, b2_last_detail());
      continue;
    }
    CHECK_EQ(b2_frame_meta_get(f, "b2nd", &d, &len), 0);
    b2_mp_reader_init(&r, d, len);
    CHECK_EQ(b2_mp_read_array(&r, &n), 0);
    CHECK(n >= 7);
    b2_mp_reader_init(&r, d, len);
    CHECK_EQ(b2_mp_skip(&r), 0);
    CHECK_EQ(r.pos, len);
    for (int k = 0; k < b2_frame_get_info(f)->nvlmeta; k++) {
      CHECK_EQ(b2_frame_vlmeta_get(f, b2_frame_vlmeta_name(f, k), &vd, &len),
               0);
      if (len) free(vd);
      else free(vd);
    }
    b2_frame_close(f);
    arrays++;
  }
  if (dp) closedir(dp);
  CHECK(arrays >= 9);
}

/* Every damaged file fails with a detail or reads without a crash. */
static void bad_one(const char *dir, const char *name) {
  char path[1024];
  if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
    return;
  b2_frame *f;
  int rc = b2_frame_open(path, &f);
  if (rc < 0) {
    fprintf(stderr, "  bad/%s: open: %s: %s\n", name, b2_strerror(rc),
            b2_last_detail());
    CHECK(rc < 0 && b2_last_detail()[0] != '\0');
    return;
  }
  const b2_frame_info *in = b2_frame_get_info(f);
  int ok = 0, failed = 0;
  uint8_t *buf = NULL;
  for (int64_t i = 0; i < in->nchunks; i++) {
    int32_t nb = b2_frame_chunk_nbytes(f, i);
    CHECK(nb >= 0);
    buf = realloc(buf, (size_t)nb + 1);
    rc = b2_frame_decode_chunk(f, i, buf, (size_t)nb);
    if (rc == nb) {
      ok++;
    } else {
      CHECK(rc < 0);
      CHECK(b2_last_detail()[0] != '\0');
      if (failed++ < 3)
        fprintf(stderr, "  bad/%s: chunk %lld: %s: %s\n", name, (long long)i,
                b2_strerror(rc), b2_last_detail());
    }
    uint8_t tiny[3];
    rc = b2_frame_decode_range(f, i, nb > 5 ? (size_t)nb - 5 : 0,
                               nb > 3 ? 3 : 0, tiny);
    CHECK(rc >= 0 || b2_last_detail()[0] != '\0');
  }
  free(buf);
  fprintf(stderr, "  bad/%s: opened; %d chunks decoded, %d failed\n", name,
          ok, failed);
  b2_frame_close(f);
}

static void test_bad_fixtures(void) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/bad", t_fixtures());
  DIR *dp = opendir(dir);
  if (!dp) T_SKIP("no %s", dir);
  struct dirent *de;
  int n = 0;
  while ((de = readdir(dp)) != NULL) {
    if (de->d_name[0] == '.') continue;
    bad_one(dir, de->d_name);
    n++;
  }
  closedir(dp);
  CHECK(n >= 30);
  /* The files that cannot be read at all must not open. */
  static const char *const refused[] = {
      "bad-magic.b2frame",          "empty.b2frame",
      "not-a-frame.b2frame",        "truncated-header.b2frame",
      "truncated-half.b2frame",     "truncated-trailer.b2frame",
      "header-size-negative.b2frame", "header-size-past-end.b2frame",
      "frame-size-huge.b2frame",    "sframe-index-truncated.b2frame"};
  for (size_t k = 0; k < sizeof refused / sizeof refused[0]; k++) {
    char path[1024];
    if (snprintf(path, sizeof path, "%s/%s", dir, refused[k]) >=
        (int)sizeof path)
      continue;
    b2_frame *f = NULL;
    int rc = b2_frame_open(path, &f);
    if (rc >= 0) fprintf(stderr, "  %s opened\n", refused[k]);
    CHECK(rc < 0);
    b2_frame_close(f);
  }
}

/* Damage good frames at random places near the header, the index and the
 * trailer (where the structure is) or truncate them, and reopen: no crash,
 * and each failure names what is wrong. */
static void damage_one(const char *rel, int trials, uint32_t seed,
                       int *opened, int *refused) {
  char src[1024];
  snprintf(src, sizeof src, "%s/%s", t_fixtures(), rel);
  size_t len;
  uint8_t *orig = t_read_file(src, &len);
  if (!orig) return;
  char tmp[] = "/tmp/test_frame_dmg.XXXXXX";
  int fd = mkstemp(tmp);
  CHECK(fd >= 0);
  close(fd);
  uint8_t *buf = malloc(len);
  size_t head = len < 200 ? len : 200, tail = len < 300 ? len : 300;
  for (int trial = 0; trial < trials; trial++) {
    memcpy(buf, orig, len);
    size_t flen = len;
    seed = seed * 1664525u + 1013904223u;
    int mode = trial % 3;
    if (mode == 0) { /* one byte in the header */
      buf[seed % head] = (uint8_t)(seed >> 8);
    } else if (mode == 1) { /* one byte in the index or trailer */
      buf[len - 1 - seed % tail] = (uint8_t)(seed >> 8);
    } else { /* truncate */
      flen = seed % len;
    }
    FILE *fp = fopen(tmp, "wb");
    fwrite(buf, 1, flen, fp);
    fclose(fp);
    b2_frame *f;
    int rc = b2_frame_open(tmp, &f);
    if (rc < 0) {
      CHECK(b2_last_detail()[0] != '\0');
      (*refused)++;
      continue;
    }
    (*opened)++;
    const b2_frame_info *in = b2_frame_get_info(f);
    for (int64_t i = 0; i < in->nchunks && i < 64; i++) {
      int32_t nb = b2_frame_chunk_nbytes(f, i);
      if (nb > (16 << 20)) continue; /* a damaged size: keep the test fast */
      uint8_t *out = malloc((size_t)nb + 1);
      rc = b2_frame_decode_chunk(f, i, out, (size_t)nb);
      CHECK(rc == nb || (rc < 0 && b2_last_detail()[0] != '\0'));
      free(out);
    }
    for (int k = 0; k < in->nvlmeta; k++) {
      uint8_t *vd;
      size_t vl;
      if (b2_frame_vlmeta_get(f, b2_frame_vlmeta_name(f, k), &vd, &vl) == 0)
        free(vd);
    }
    b2_frame_close(f);
  }
  unlink(tmp);
  free(buf);
  free(orig);
}

static void test_synthetic_damage(void) {
  static const char *const frames[] = {
      "cframe/zstd-metalayers.b2frame", "legacy/legacy-lz4-bitshuffle-i32.b2frame",
      "reference/varchunks-lz4-3.0.0.b2frame", "cframe/f32-nan-run.b2frame",
      "b2nd/f64-4d-small.b2nd"};
  int opened = 0, refused = 0;
  for (size_t k = 0; k < sizeof frames / sizeof frames[0]; k++)
    damage_one(frames[k], 240, 99 + (uint32_t)k, &opened, &refused);
  if (opened + refused == 0) T_SKIP("no fixtures");
  CHECK(opened > 0 && refused > 0);
  fprintf(stderr, "  damaged frames: %d opened, %d refused\n", opened,
          refused);
}

/* ---- hand-made damage at known places ---------------------------------- */

static void put_be64(uint8_t *p, uint64_t v) {
  for (int k = 0; k < 8; k++) p[k] = (uint8_t)(v >> (56 - 8 * k));
}
static void put_le64(uint8_t *p, uint64_t v) {
  for (int k = 0; k < 8; k++) p[k] = (uint8_t)(v >> (8 * k));
}
static void put_le32(uint8_t *p, uint32_t v) {
  for (int k = 0; k < 4; k++) p[k] = (uint8_t)(v >> (8 * k));
}

/* Write buf to a temporary file and open it; returns the open code and
 * leaves the detail of a failure in `why`. */
static int open_bytes(const uint8_t *buf, size_t len, b2_frame **f,
                      char why[512]) {
  char tmp[] = "/tmp/test_frame_craft.XXXXXX";
  int fd = mkstemp(tmp);
  if (fd < 0) return -100;
  int ok = write(fd, buf, len) == (ssize_t)len;
  close(fd);
  int rc = ok ? b2_frame_open(tmp, f) : -100;
  snprintf(why, 512, "%s", rc < 0 ? b2_last_detail() : "");
  unlink(tmp); /* the open descriptor keeps the file readable */
  if (rc < 0) fprintf(stderr, "  crafted: %s\n", why);
  return rc;
}

static uint8_t *fixture(const char *rel, size_t *len) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", t_fixtures(), rel);
  return t_read_file(path, len);
}

/* A frame inside another file (b2_frame_open_fd: garbage before and after
 * it must not matter) and one in memory read as the file itself does;
 * windows that cut the frame or overrun the file fail cleanly. */
static void test_frame_at_offset(void) {
  size_t len;
  uint8_t *orig = fixture("cframe/zstd-shuffle-f64.b2frame", &len);
  if (!orig) T_SKIP("no fixtures");
  char path[1024], want[65], got[65];
  long long n1 = 0, n2 = 0;
  snprintf(path, sizeof path, "%s/cframe/zstd-shuffle-f64.b2frame", t_fixtures());
  b2_frame *f;
  CHECK_EQ(b2_frame_open(path, &f), 0);
  CHECK_EQ(hash_frame(f, want, &n1), 0);
  b2_frame_close(f);

  const size_t pre = 1234, post = 777;
  uint8_t *big = malloc(pre + len + post);
  memset(big, 0xa5, pre + len + post);
  memcpy(big + pre, orig, len);
  char tmp[] = "/tmp/test_frame_at.XXXXXX";
  int fd = mkstemp(tmp);
  CHECK(fd >= 0 && write(fd, big, pre + len + post) == (ssize_t)(pre + len + post));
  unlink(tmp);
  CHECK_EQ(b2_frame_open_fd(fd, (int64_t)pre, (int64_t)len, "zip:member", &f), 0);
  if (f) {
    CHECK_EQ(hash_frame(f, got, &n2), 0);
    CHECK(strcmp(want, got) == 0 && n1 == n2);
    CHECK_EQ(b2_frame_check(f), 0);
    CHECK(strcmp(b2_frame_path(f), "zip:member") == 0);
    b2_frame_close(f);
  }
  /* A window one byte short, shifted, or past the end of the file. */
  f = NULL;
  CHECK(b2_frame_open_fd(fd, (int64_t)pre, (int64_t)len - 1, "w", &f) < 0 && !f);
  CHECK(b2_frame_open_fd(fd, (int64_t)pre + 1, (int64_t)len, "w", &f) < 0 && !f);
  CHECK_EQ(b2_frame_open_fd(fd, (int64_t)pre, (int64_t)(len + post + 1), "w", &f),
           B2_E_TRUNCATED);
  CHECK_EQ(b2_frame_open_fd(fd, -1, 10, "w", &f), B2_E_INVAL);
  close(fd);

  CHECK_EQ(b2_frame_open_mem(orig, len, "mem", &f), 0);
  if (f) {
    CHECK_EQ(hash_frame(f, got, &n2), 0);
    CHECK(strcmp(want, got) == 0 && n1 == n2);
    b2_frame_close(f);
  }
  f = NULL;
  CHECK(b2_frame_open_mem(orig, len / 2, "mem", &f) < 0 && !f);
  free(big);
  free(orig);
}

/* Reference-written frames: header_size 97 (no metalayers), nbytes at
 * byte 30, the index chunk right before the 35-byte trailer. */
static void test_crafted_frames(void) {
  size_t len;
  uint8_t *orig = fixture("cframe/zstd-shuffle-f64.b2frame", &len);
  if (!orig) T_SKIP("no fixtures");
  uint8_t *b = malloc(len + 1000);
  const size_t idx = len - 35 - 64; /* memcpy'd index: 32-byte header */
  b2_frame *f;
  char why[512];

  /* Bytes past frame_size are ignored. */
  memcpy(b, orig, len);
  memset(b + len, 0xa5, 1000);
  CHECK_EQ(open_bytes(b, len + 1000, &f, why), 0);
  if (f) {
    char hex[65];
    long long total;
    CHECK_EQ(hash_frame(f, hex, &total), 0);
    CHECK(strcmp(hex, "d613b3aa24b670e48eca6b0c49745985c4acf93e7bbf9eb46d2a"
                      "7084dfba5c13") == 0);
    b2_frame_close(f);
  }

  /* nbytes that implies 3 chunks against an index of 4 entries. */
  memcpy(b, orig, len);
  put_be64(b + 30, 3 * 262144);
  CHECK_EQ(open_bytes(b, len, &f, why), B2_E_FORMAT);
  CHECK(strstr(why, "index chunk: nbytes 32 is not nchunks*8 = 24") != NULL);

  /* Special entries: zeros read as zeros; an unknown kind is refused. */
  memcpy(b, orig, len);
  CHECK(b[idx + 2] == 0x17);
  put_le64(b + idx + 32 + 8, 0x8100000000000000ULL);
  CHECK_EQ(open_bytes(b, len, &f, why), 0);
  if (f) {
    CHECK_EQ(b2_frame_chunk_special(f, 1), B2_SPECIAL_ZERO);
    CHECK_EQ(b2_frame_chunk_cbytes(f, 1), 0);
    uint8_t *out = malloc(262144), *zero = calloc(1, 262144);
    memset(out, 1, 262144);
    CHECK_EQ(b2_frame_decode_chunk(f, 1, out, 262144), 262144);
    CHECK_MEM(out, zero, 262144);
    free(out);
    free(zero);
    b2_frame_close(f);
  }
  put_le64(b + idx + 32 + 16, 0x8300000000000000ULL);
  CHECK_EQ(open_bytes(b, len, &f, why), B2_E_FORMAT);
  CHECK(strstr(why, "index entry 2") != NULL);

  /* An offset past the chunks section. */
  memcpy(b, orig, len);
  put_le64(b + idx + 32 + 24, (uint64_t)(idx - 97 - 8));
  CHECK_EQ(open_bytes(b, len, &f, why), B2_E_FORMAT);
  CHECK(strstr(why, "index entry 3") != NULL);
  /* ...and one inside it that lands mid-chunk: the chunk fails alone. */
  memcpy(b, orig, len);
  put_le64(b + idx + 32 + 24, 1000);
  CHECK_EQ(open_bytes(b, len, &f, why), 0);
  if (f) {
    uint8_t *out = malloc(262144);
    CHECK_EQ(b2_frame_decode_chunk(f, 0, out, 262144), 262144);
    CHECK(b2_frame_decode_chunk(f, 3, out, 262144) < 0);
    fprintf(stderr, "  crafted mid-chunk offset: %s\n", b2_last_detail());
    free(out);
    b2_frame_close(f);
  }

  /* compressed_size pointing past the trailer. */
  memcpy(b, orig, len);
  put_be64(b + 39, len);
  CHECK_EQ(open_bytes(b, len, &f, why), B2_E_FORMAT);
  CHECK(strstr(why, "compressed_size") != NULL);

  /* A trailer length larger than the frame. */
  memcpy(b, orig, len);
  b[len - 22] = 0x7f;
  CHECK_EQ(open_bytes(b, len, &f, why), B2_E_FORMAT);
  CHECK(strstr(why, "trailer: length") != NULL);
  free(orig);

  /* Metalayer offset outside the header. */
  orig = fixture("cframe/zstd-metalayers.b2frame", &len);
  if (orig) {
    b = realloc(b, len);
    memcpy(b, orig, len);
    CHECK(memcmp(b + 0x5e, "\xa5units\xd2", 7) == 0);
    put_be64(b + 0x61, 0); /* "ts" of units -> NULs: name holds a NUL */
    CHECK_EQ(open_bytes(b, len, &f, why), B2_E_FORMAT);
    memcpy(b, orig, len);
    b[0x65] = 0x7f;
    CHECK_EQ(open_bytes(b, len, &f, why), B2_E_FORMAT);
    CHECK(strstr(why, "metalayer \"units\": offset") != NULL);
    free(orig);
  }

  /* Variable-length chunks: a special entry has no size. */
  orig = fixture("reference/varchunks-lz4-3.0.0.b2frame", &len);
  if (orig) {
    b = realloc(b, len);
    memcpy(b, orig, len);
    size_t vidx = len - 35 - 72;
    CHECK(b[vidx + 2] == 0x17);
    put_le64(b + vidx + 32, 0x8100000000000000ULL);
    CHECK_EQ(open_bytes(b, len, &f, why), B2_E_FORMAT);
    CHECK(strstr(why, "variable-length") != NULL);
    /* A chunk size that disagrees with the header's nbytes. */
    memcpy(b, orig, len);
    put_be64(b + 30, 4320);
    CHECK_EQ(open_bytes(b, len, &f, why), B2_E_FORMAT);
    CHECK(strstr(why, "4321") != NULL);
    free(orig);
  }

  /* 2^26 NaN chunks (2^46 bytes) through a special index chunk: no table
   * is allocated and the last chunk reads. */
  orig = fixture("cframe/f32-nan-run.b2frame", &len);
  if (orig) {
    b = realloc(b, len);
    memcpy(b, orig, len);
    put_be64(b + 30, (uint64_t)1 << 46);
    put_le32(b + 97 + 4, 1u << 29);
    CHECK_EQ(open_bytes(b, len, &f, why), 0);
    if (f) {
      const b2_frame_info *in = b2_frame_get_info(f);
      CHECK_EQ(in->nchunks, (int64_t)1 << 26);
      int64_t last = in->nchunks - 1;
      CHECK_EQ(b2_frame_chunk_at(f, ((int64_t)1 << 46) - 1), last);
      float v[3];
      CHECK_EQ(b2_frame_decode_range(f, last, 1048576 - 12, 12, v), 12);
      CHECK(v[0] != v[0] && v[2] != v[2]);
      b2_frame_close(f);
    }
    free(orig);
  }
  free(b);
}

/* A frame written from scratch with the msgpack writer: two 20-byte
 * Blosc 1.x chunks (shorter than a Blosc2 header), one metalayer and one
 * vlmetalayer; read back exactly. */
static void test_handmade_frame(void) {
  b2_mp_writer w;
  b2_mp_writer_init(&w, NULL, 0);
  b2_mp_put_array(&w, 14);
  b2_mp_put_str(&w, "b2frame", 8);
  size_t hs_at = w.len + 1;
  b2_mp_put_i32(&w, 0);
  size_t fs_at = w.len + 1;
  b2_mp_put_u64(&w, 0);
  b2_mp_put_str(&w, "\x12\x00\x50\x03", 4); /* v2, contiguous, blosclz 5 */
  b2_mp_put_i64(&w, 8);   /* nbytes */
  b2_mp_put_i64(&w, 40);  /* cbytes: two 20-byte chunks */
  b2_mp_put_i32(&w, 1);   /* typesize */
  b2_mp_put_i32(&w, 0);   /* blocksize */
  b2_mp_put_i32(&w, 4);   /* chunksize */
  b2_mp_put_i16(&w, 1);
  b2_mp_put_i16(&w, 1);
  b2_mp_put_bool(&w, 1);
  uint8_t pipe[16] = {0};
  b2_mp_put_ext(&w, 6, pipe, 16);
  b2_mp_put_array(&w, 3);
  b2_mp_put_u16(&w, 0);
  b2_mp_put_map16(&w, 1);
  b2_mp_put_str(&w, "m1", 2);
  size_t m1_at = w.len + 1;
  b2_mp_put_i32(&w, 0);
  b2_mp_put_array16(&w, 1);
  b2_put_be32(w.buf + m1_at, (uint32_t)w.len);
  b2_mp_put_bin32(&w, "\x93\x01\x02\x03", 4);
  size_t hs = w.len;
  b2_put_be32(w.buf + hs_at, (uint32_t)hs);
  /* Chunks: 16-byte 1.x headers, memcpy'd, 4 bytes each. */
  for (int c = 0; c < 2; c++) {
    uint8_t ch[20] = {2, 1, 0x02, 1};
    b2_put_le32(ch + 4, 4);
    b2_put_le32(ch + 8, 4);
    b2_put_le32(ch + 12, 20);
    memcpy(ch + 16, c ? "WXYZ" : "abcd", 4);
    b2_mp_put_raw(&w, ch, 20);
  }
  /* Index: a memcpy'd chunk of two offsets (second chunk first). */
  uint8_t offs[16];
  b2_put_le64(offs, 20);
  b2_put_le64(offs + 8, 0);
  b2_cparams cp;
  b2_cparams_default(&cp);
  cp.clevel = 0;
  cp.typesize = 8;
  uint8_t ichunk[256];
  int icb = b2_chunk_encode(&cp, offs, 16, ichunk, sizeof ichunk);
  CHECK(icb > 0);
  if (icb <= 0) {
    b2_mp_writer_free(&w);
    return;
  }
  b2_mp_put_raw(&w, ichunk, (size_t)icb);
  /* Trailer with one vlmetalayer "note" (a compressed chunk). */
  size_t tpos = w.len;
  cp.typesize = 1;
  uint8_t vchunk[256];
  int vcb = b2_chunk_encode(&cp, "\xa2hi", 3, vchunk, sizeof vchunk);
  CHECK(vcb > 0);
  b2_mp_put_array(&w, 4);
  b2_mp_put_int(&w, 1);
  b2_mp_put_array(&w, 3);
  b2_mp_put_u16(&w, 0);
  b2_mp_put_map16(&w, 1);
  b2_mp_put_str(&w, "note", 4);
  size_t note_at = w.len + 1;
  b2_mp_put_i32(&w, 0);
  b2_mp_put_array16(&w, 1);
  b2_put_be32(w.buf + note_at, (uint32_t)(w.len - tpos));
  b2_mp_put_bin32(&w, vchunk, vcb > 0 ? (uint32_t)vcb : 0);
  size_t tl_at = w.len + 1;
  b2_mp_put_u32(&w, 0);
  b2_mp_put_ext(&w, 0, pipe, 16);
  CHECK_EQ(w.err, 0);
  b2_put_be32(w.buf + tl_at, (uint32_t)(w.len - tpos));
  b2_put_be64(w.buf + fs_at, w.len);

  b2_frame *f;
  char why[512];
  CHECK_EQ(open_bytes(w.buf, w.len, &f, why), 0);
  if (f) {
    const b2_frame_info *in = b2_frame_get_info(f);
    CHECK_EQ(in->nchunks, 2);
    CHECK_EQ(in->header_size, (int64_t)hs);
    CHECK_EQ(in->codec, B2_CODEC_BLOSCLZ);
    CHECK_EQ(in->clevel, 5);
    CHECK_EQ(in->splitmode, B2_SPLIT_FORWARD_COMPAT);
    uint8_t out[8];
    CHECK_EQ(b2_frame_decode_chunk(f, 0, out, 4), 4);
    CHECK_EQ(b2_frame_decode_chunk(f, 1, out + 4, 4), 4);
    CHECK_MEM(out, "WXYZabcd", 8);
    CHECK_EQ(b2_frame_decode_range(f, 1, 1, 2, out), 2);
    CHECK_MEM(out, "bc", 2);
    size_t len;
    CHECK_EQ(b2_frame_chunk_cbytes(f, 0), 20);
    uint8_t *raw;
    CHECK_EQ(b2_frame_read_chunk(f, 1, &raw, &len), 0);
    CHECK(len == 20 && memcmp(raw + 16, "abcd", 4) == 0);
    free(raw);
    const uint8_t *d;
    CHECK_EQ(b2_frame_meta_get(f, "m1", &d, &len), 0);
    CHECK(len == 4 && memcmp(d, "\x93\x01\x02\x03", 4) == 0);
    uint8_t *vd;
    CHECK_EQ(b2_frame_vlmeta_get(f, "note", &vd, &len), 0);
    CHECK(len == 3 && memcmp(vd, "\xa2hi", 3) == 0);
    if (len) free(vd);
    b2_frame_close(f);
  }
  b2_mp_writer_free(&w);
}

/* Several threads decode the same frame at once and agree. */
typedef struct mt_arg {
  b2_frame *f;
  char hex[65];
  int rc;
} mt_arg;

static void *mt_worker(void *p) {
  mt_arg *a = p;
  long long total;
  a->rc = hash_frame(a->f, a->hex, &total);
  return NULL;
}

static void test_threads(void) {
  static const char *const frames[] = {"cframe/zstd-shuffle-f64.b2frame",
                                       "sframe/lz4-edited-i32.b2frame"};
  int done = 0;
  for (size_t k = 0; k < 2; k++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", t_fixtures(), frames[k]);
    if (!exists(path)) continue;
    b2_frame *f;
    CHECK_EQ(b2_frame_open(path, &f), 0);
    if (!f) continue;
    mt_arg a[4];
    pthread_t th[4];
    for (int t = 0; t < 4; t++) {
      a[t].f = f;
      pthread_create(&th[t], NULL, mt_worker, &a[t]);
    }
    for (int t = 0; t < 4; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < 4; t++) {
      CHECK_EQ(a[t].rc, 0);
      CHECK(strcmp(a[t].hex, a[0].hex) == 0);
    }
    b2_frame_close(f);
    done++;
  }
  if (!done) T_SKIP("no fixtures");
}

/* Every code has a name; the system's codes map both ways (the daemon
 * answers EMFILE, not EIO, when descriptors run out). */
static void test_error_names(void) {
  for (int c = -1; c >= B2_E_LAST; c--) CHECK(strcmp(b2_strerror(c), "unknown error") != 0);
  CHECK(!strcmp(b2_strerror(B2_E_LAST - 1), "unknown error"));
  CHECK(b2_from_errno(EMFILE) == B2_E_NOFILES && b2_from_errno(ENFILE) == B2_E_NOFILES);
  CHECK(b2_to_errno(B2_E_NOFILES) == EMFILE);
  CHECK(b2_from_errno(ENOTEMPTY) == B2_E_NOTEMPTY && b2_to_errno(B2_E_IO) == EIO);
}

static void test_open_errors(void) {
  b2_frame *f = (b2_frame *)1;
  CHECK_EQ(b2_frame_open("/nonexistent/frame.b2frame", &f), B2_E_NOENT);
  CHECK(f == NULL);
  CHECK(strstr(b2_last_detail(), "open") != NULL);
  CHECK_EQ(b2_frame_open("/tmp", &f), B2_E_NOENT); /* no chunks.b2frame */
  CHECK_EQ(b2_frame_open(NULL, &f), B2_E_INVAL);
  b2_frame_close(NULL);
  /* A FIFO neither blocks the open nor passes for a frame. */
  char fifo[] = "/tmp/test_frame_fifo.XXXXXX";
  int fd = mkstemp(fifo);
  CHECK(fd >= 0);
  if (fd >= 0) {
    close(fd);
    unlink(fifo);
    CHECK_EQ(mkfifo(fifo, 0600), 0);
    CHECK_EQ(b2_frame_open(fifo, &f), B2_E_FORMAT);
    unlink(fifo);
  }
  /* A directory without a sparse frame's index says so. */
  char dir[] = "/tmp/test_frame_dir.XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  CHECK_EQ(b2_frame_open(dir, &f), B2_E_NOENT);
  CHECK(strstr(b2_last_detail(), "a directory without chunks.b2frame") != NULL);
  rmdir(dir);
}

int main(void) {
  /* Writes to a pipe (the popen'd hasher, or a log reader) that closed
   * early must fail with EPIPE, not kill the test. */
  signal(SIGPIPE, SIG_IGN);
  T_RUN(test_msgpack_roundtrip);
  T_RUN(test_error_names);
  T_RUN(test_open_errors);
  T_RUN(test_manifest_frames);
  T_RUN(test_legacy_frames);
  T_RUN(test_range_decodes);
  T_RUN(test_geometry_and_read_chunk);
  T_RUN(test_special_entries);
  T_RUN(test_metalayers);
  T_RUN(test_bad_fixtures);
  T_RUN(test_synthetic_damage);
  T_RUN(test_crafted_frames);
  T_RUN(test_frame_at_offset);
  T_RUN(test_handmade_frame);
  T_RUN(test_threads);
  T_RUN(test_6gib_frame_full_sha);
  T_END();
}
