/* test_chunk.c - layer 2 (one Blosc chunk): decode of the reference's lone
 * chunks and of every chunk of the fixture frames (checked by sha256),
 * partial decodes against slices of full decodes, damaged chunks, and
 * encode -> decode round trips over codecs, filters, typesizes, levels,
 * split modes and data shapes. */
#include "b2_chunk.h"
#include "b2_codec.h"
#include "b2_error.h"
#include "sha256.h"
#include "spans_read.h"
#include "t.h"

#include <pthread.h>
#include <stdint.h>

/* ---- helpers ------------------------------------------------------------ */

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void) { return t_xorshift64(&rng_state); }

static uint32_t be32(const uint8_t *p) {
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
         ((uint32_t)p[2] << 8) | p[3];
}
static uint64_t be64(const uint8_t *p) {
  return ((uint64_t)be32(p) << 32) | be32(p + 4);
}
static uint32_t le32(const uint8_t *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
         ((uint32_t)p[3] << 24);
}
static void put_le32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}

#define B2MIN(a, b) ((a) < (b) ? (a) : (b))

/* The range [off, off+n) read as b2_frame_read_range does (spans_read.h:
 * only the bytes b2_chunk_range_plan asks for are in the buffer).  Returns
 * 1 if decoded that way and equal to `want`, 0 if the plan says to read the
 * chunk whole or the blocks are laid out otherwise (B2_E_FORMAT), -1 on a
 * mismatch or an error. */
static int spans_lean, spans_whole, spans_fallback;
static int spans_range(const uint8_t *chunk, size_t len, size_t off, size_t n,
                       const uint8_t *want) {
  if (len < 16) return 0;
  size_t cb = le32(chunk + 12);
  if (cb > len || cb < 16) return -1;
  uint8_t *out = malloc(n + 1);
  out[n] = 0xA5;
  int rc = 0, res = -1;
  switch (spans_read(chunk, cb, off, n, out, &rc)) {
  case SPANS_WHOLE:
    res = 0;
    spans_whole++;
    break;
  case SPANS_DECODED:
    if (rc == B2_E_FORMAT) {
      res = 0; /* laid out otherwise: its reader reads it whole */
      spans_fallback++;
    } else if (rc == (int)n && memcmp(out, want, n) == 0 && out[n] == 0xA5) {
      res = 1;
      spans_lean++;
    }
    break;
  default:
    break;
  }
  free(out);
  return res;
}

/* Range decodes at awkward offsets must equal slices of the full decode.
 * Returns the number of mismatches. */
static int check_ranges(const uint8_t *chunk, size_t len, const uint8_t *full,
                        size_t nbytes, int32_t blocksize, int extra) {
  int bad = 0;
  if (nbytes == 0) return 0;
  size_t bs = blocksize > 0 ? (size_t)blocksize : nbytes;
  size_t cand[][2] = {
      {0, 1}, {0, nbytes}, {nbytes - 1, 1}, {1, nbytes - 1},
      {nbytes / 3, nbytes / 3}, {bs > 3 ? bs - 3 : 0, 7},
      {bs, bs}, {bs + 1, 2 * bs}, {nbytes / 2 + 7, 4096}, {4093, 4099},
  };
  uint8_t *out = malloc(nbytes + 1);
  for (size_t k = 0; k < sizeof cand / sizeof cand[0] + (size_t)extra; k++) {
    size_t off, n;
    if (k < sizeof cand / sizeof cand[0]) {
      off = cand[k][0];
      n = cand[k][1];
    } else {
      off = rnd() % nbytes;
      n = 1 + rnd() % (rnd() % 2 ? 9000 : nbytes);
    }
    if (off >= nbytes) off = nbytes - 1;
    if (n > nbytes - off) n = nbytes - off;
    /* big chunks: only short ranges (each costs whole-block decodes) */
    if (nbytes > (1u << 20) && n > 2 * bs + 9000) continue;
    memset(out, 0xA5, n + 1);
    int rc = b2_chunk_decode_range(chunk, len, off, n, out, NULL);
    if (rc != (int)n || memcmp(out, full + off, n) != 0 || out[n] != 0xA5) {
      if (bad++ < 3)
        fprintf(stderr, "  range [%zu,+%zu) of %zu: rc %d (%s)\n", off, n,
                nbytes, rc, rc < 0 ? b2_last_detail() : "bytes differ");
    }
    if (spans_range(chunk, len, off, n, full + off) < 0 && bad++ < 3)
      fprintf(stderr, "  range [%zu,+%zu) of %zu read by blocks: %s\n", off, n, nbytes,
              b2_last_detail());
  }
  free(out);
  return bad;
}

/* ---- lone fixture chunks ---------------------------------------------- */

static void test_fixture_chunks(void) {
  char path[8192];
  snprintf(path, sizeof path, "%s/chunks/manifest.tsv", t_fixtures());
  FILE *m = fopen(path, "r");
  if (!m) T_SKIP("no %s", path);
  char line[8192];
  int count = 0;
  while (fgets(line, sizeof line, m)) {
    char name[512], sha[128];
    long long nb;
    if (line[0] == '#' || sscanf(line, "%511s %lld %127s", name, &nb, sha) != 3)
      continue;
    snprintf(path, sizeof path, "%s/%s", t_fixtures(), name);
    size_t len;
    uint8_t *buf = t_read_file(path, &len);
    CHECK(buf != NULL);
    if (!buf) continue;
    b2_chunk_info in;
    int rc = b2_chunk_parse(buf, len, &in);
    CHECK_EQ(rc, 0);
    CHECK_EQ(in.nbytes, nb);
    uint8_t *out = malloc((size_t)nb + 1);
    rc = b2_chunk_decode(buf, len, out, (size_t)nb);
    char hex[65] = "";
    if (rc == nb) t_sha256_of(out, (size_t)nb, hex);
    if (rc != nb || strcmp(hex, sha) != 0) {
      fprintf(stderr, "  %s: rc %d (%s) sha %s\n", name, rc,
              rc < 0 ? b2_last_detail() : "", hex);
      t_failed_ = 1;
    } else {
      CHECK_EQ(check_ranges(buf, len, out, (size_t)nb, in.blocksize, 4), 0);
    }
    count++;
    free(out);
    free(buf);
  }
  fclose(m);
  CHECK(count >= 27);
  /* 1.x chunks: ranges read block by block, none laid out otherwise */
  fprintf(stderr, "  by blocks: %d ranges, whole %d, laid out otherwise %d\n", spans_lean,
          spans_whole, spans_fallback);
  CHECK(spans_lean >= 50);
  CHECK_EQ(spans_fallback, 0);
}

/* ---- chunks of fixture frames ------------------------------------------
 * A minimal walk of a contiguous frame (the frame layer proper is another
 * module): header_size and the sizes from the fixed msgpack header, the
 * index chunk right after the chunks section, offsets relative to the
 * header end, negative offsets for special chunks. */
struct walk_stats {
  int chunks, specials, ranges_bad;
};

static int walk_frame(const char *path, const char *want_sha, int64_t want_nb,
                      struct walk_stats *st) {
  size_t len;
  uint8_t *f = t_read_file(path, &len);
  if (!f) return -1;
  int ok = -1;
  if (len < 0x3E || (f[0] & 0xf0) != 0x90 || memcmp(f + 2, "b2frame", 7)) {
    free(f);
    return -2; /* not this layout */
  }
  uint64_t hsize = be32(f + 0x0B);
  uint64_t nbytes = be64(f + 0x1E);
  uint64_t csize = be64(f + 0x27);
  uint32_t typesize = be32(f + 0x30);
  uint32_t chunksize = be32(f + 0x3A);
  uint8_t *index = NULL, *out = NULL;
  t_sha256 sh;
  t_sha256_init(&sh);
  if (hsize + csize > len) goto done;
  if (nbytes == 0) { /* an empty frame has no index chunk */
    ok = want_nb == 0 ? 0 : -1;
    goto done;
  }
  b2_chunk_info ii;
  const uint8_t *ic = f + hsize + csize;
  if (b2_chunk_parse(ic, len - hsize - csize, &ii) < 0) goto done;
  index = malloc((size_t)ii.nbytes + 8);
  if (b2_chunk_decode(ic, len - hsize - csize, index, (size_t)ii.nbytes) !=
      ii.nbytes)
    goto done;
  int64_t nchunks = ii.nbytes / 8;
  uint64_t done_bytes = 0;
  for (int64_t i = 0; i < nchunks; i++) {
    int64_t off = (int64_t)((uint64_t)le32(index + 8 * i) |
                            ((uint64_t)le32(index + 8 * i + 4) << 32));
    uint64_t left = nbytes - done_bytes;
    size_t want = (size_t)(chunksize && chunksize < left ? chunksize : left);
    if (off < 0) {
      int kind = (int)(((uint64_t)off >> 56) & 0x7f);
      out = realloc(out, want + 1);
      if (kind == 2 && typesize == 4) {
        uint32_t v = 0x7fc00000u; /* the quiet NaN the reference writes */
        for (size_t k = 0; k + 4 <= want; k += 4) memcpy(out + k, &v, 4);
      } else if (kind == 2 && typesize == 8) {
        uint64_t v = 0x7ff8000000000000ull;
        for (size_t k = 0; k + 8 <= want; k += 8) memcpy(out + k, &v, 8);
      } else {
        memset(out, 0, want);
      }
      t_sha256_update(&sh, out, want);
      done_bytes += want;
      st->specials++;
      continue;
    }
    if ((uint64_t)off >= len - hsize) goto done;
    const uint8_t *c = f + hsize + off;
    size_t avail = len - hsize - (size_t)off;
    b2_chunk_info in;
    if (b2_chunk_parse(c, avail, &in) < 0) {
      fprintf(stderr, "  %s chunk %lld: %s\n", path, (long long)i,
              b2_last_detail());
      goto done;
    }
    out = realloc(out, (size_t)in.nbytes + 1);
    int rc = b2_chunk_decode(c, avail, out, (size_t)in.nbytes);
    if (rc != in.nbytes) {
      fprintf(stderr, "  %s chunk %lld: rc %d %s\n", path, (long long)i, rc,
              b2_last_detail());
      goto done;
    }
    st->ranges_bad += check_ranges(c, avail, out, (size_t)in.nbytes,
                                   in.blocksize, 2);
    t_sha256_update(&sh, out, (size_t)in.nbytes);
    done_bytes += (uint64_t)in.nbytes;
    st->chunks++;
  }
  char hex[65];
  t_sha256_hex(&sh, hex);
  ok = (strcmp(hex, want_sha) == 0 && (int64_t)done_bytes == want_nb) ? 0 : -1;
  if (ok < 0)
    fprintf(stderr, "  %s: sha %s, %llu bytes\n", path, hex,
            (unsigned long long)done_bytes);
done:
  free(out);
  free(index);
  free(f);
  return ok;
}

static void test_fixture_frames(void) {
  char path[8192];
  snprintf(path, sizeof path, "%s/manifest.tsv", t_fixtures());
  FILE *m = fopen(path, "r");
  if (!m) T_SKIP("no %s", path);
  char line[8192];
  struct walk_stats st = {0, 0, 0};
  int frames = 0;
  while (fgets(line, sizeof line, m)) {
    char name[512], sha[128];
    long long nb, nc;
    if (line[0] == '#' ||
        sscanf(line, "%511s %lld %lld %127s", name, &nb, &nc, sha) != 4)
      continue;
    if (strncmp(name, "sframe/", 7) == 0 || strstr(name, "6gib") ||
        strstr(name, "sframe-"))
      continue;
    snprintf(path, sizeof path, "%s/%s", t_fixtures(), name);
    int rc = walk_frame(path, sha, nb, &st);
    if (rc == -2) continue;
    if (rc != 0) {
      fprintf(stderr, "  frame %s failed\n", name);
      t_failed_ = 1;
    }
    frames++;
  }
  fclose(m);
  fprintf(stderr, "  %d frames, %d chunks, %d special offsets\n", frames,
          st.chunks, st.specials);
  CHECK(frames >= 50);
  CHECK(st.chunks >= 200);
  CHECK_EQ(st.ranges_bad, 0);
  fprintf(stderr, "  by blocks: %d ranges, whole %d, laid out otherwise %d\n", spans_lean,
          spans_whole, spans_fallback);
  CHECK(spans_lean >= 500);
  CHECK_EQ(spans_fallback, 0);
}


/* ---- ranges read block by block: layouts ------------------------------ */

/* Blocks stored in reverse order (as a multi-threaded writer may store
 * them) are still read block by block; a block start that points into
 * another block's bytes makes the read by blocks fail with B2_E_FORMAT
 * (its reader then reads the chunk whole), never read past its plan. */
static void test_spans_layouts(void) {
  enum { N = 64 << 10 };
  uint8_t *src = malloc(N), *c = malloc(b2_chunk_bound(N)), *r = malloc(b2_chunk_bound(N));
  uint8_t *full = malloc(N);
  for (size_t k = 0; k < N; k++) src[k] = (uint8_t)((k / 4) * 7 + (k >> 9));
  b2_cparams p;
  b2_cparams_default(&p);
  p.codec = B2_CODEC_LZ4;
  p.typesize = 4;
  p.blocksize = 8 << 10;
  for (int delta = 0; delta < 2; delta++) {
    if (delta) p.filters[4] = B2_FILTER_DELTA;
    int cb = b2_chunk_encode(&p, src, N, c, b2_chunk_bound(N));
    b2_chunk_info in;
    CHECK(cb > 0 && b2_chunk_parse(c, (size_t)cb, &in) == 0);
    if (cb <= 0) break;
    CHECK_EQ(in.nblocks, 8);
    CHECK_EQ(b2_chunk_decode(c, (size_t)cb, full, N), N);
    /* reversed: block b's bytes moved to the place of block 7 - b */
    int64_t start[8], end[8];
    for (int b = 0; b < 8; b++) start[b] = le32(c + 32 + 4 * b);
    for (int b = 0; b < 8; b++) end[b] = b < 7 ? start[b + 1] : cb;
    memcpy(r, c, (size_t)start[0]);
    int64_t at = start[0];
    for (int b = 7; b >= 0; b--) {
      memcpy(r + at, c + start[b], (size_t)(end[b] - start[b]));
      put_le32(r + 32 + 4 * b, (uint32_t)at);
      at += end[b] - start[b];
    }
    CHECK_EQ(at, cb);
    uint8_t *out = malloc(N);
    CHECK_EQ(b2_chunk_decode(r, (size_t)cb, out, N), N);
    CHECK_MEM(out, full, N);
    free(out);
    int lean0 = spans_lean, fb0 = spans_fallback;
    CHECK_EQ(check_ranges(r, (size_t)cb, full, N, in.blocksize, 20), 0);
    CHECK(spans_lean - lean0 >= 20);
    CHECK_EQ(spans_fallback, fb0);
    /* block 5 said to start 8 bytes into block 4: blocks 4 and 5 cannot
     * be read by blocks (block 4's plan ends where block 5 is said to
     * start), the others still are */
    memcpy(r, c, (size_t)cb);
    put_le32(r + 32 + 4 * 5, (uint32_t)(start[4] + 8));
    uint8_t four[16];
    CHECK_EQ(b2_chunk_decode_range(r, (size_t)cb, 4 * 8192 + 100, 16, four, NULL), 16);
    CHECK_MEM(four, full + 4 * 8192 + 100, 16);
    fb0 = spans_fallback;
    CHECK_EQ(spans_range(r, (size_t)cb, 4 * 8192 + 100, 16, full + 4 * 8192 + 100), 0);
    CHECK_EQ(spans_fallback, fb0 + 1);
    lean0 = spans_lean;
    CHECK_EQ(spans_range(r, (size_t)cb, 2 * 8192 + 100, 16, full + 2 * 8192 + 100), 1);
    CHECK_EQ(spans_lean, lean0 + 1);
  }
  free(src);
  free(c);
  free(r);
  free(full);
}

/* ---- encode -> decode round trips ------------------------------------- */

enum { D_SMOOTH, D_TEXT, D_ZEROS, D_RANDOM, D_RUNS, D_KINDS };

static void fill_data(uint8_t *b, size_t n, int kind) {
  static const char words[] = "the quick brown fox jumps over a lazy dog; "
                              "blosc chunks hold blocks of streams. ";
  switch (kind) {
  case D_SMOOTH:
    for (size_t i = 0; i < n; i++) {
      double t = (double)(i / 8);
      double v = 1000.0 + t * 0.37 - t * t * 1e-6;
      uint8_t e[8];
      memcpy(e, &v, 8);
      b[i] = e[i % 8];
    }
    break;
  case D_TEXT:
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)words[(i * 7 / 5) % (sizeof words - 1)];
    break;
  case D_ZEROS:
    memset(b, 0, n);
    break;
  case D_RANDOM:
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)(rnd() >> 24);
    break;
  default: /* runs of bytes, some zero, some not, some noise */
    for (size_t i = 0; i < n; i++) {
      size_t r = (i / 4096) % 4;
      b[i] = r == 0 ? 0 : r == 1 ? 0x5A : r == 2 ? (uint8_t)(i / 3) : (uint8_t)(rnd() >> 40);
    }
    break;
  }
}

static const uint8_t filter_sets[][B2_MAX_FILTERS] = {
    {0, 0, 0, 0, 0, 0},
    {0, 0, 0, 0, 0, B2_FILTER_SHUFFLE},
    {0, 0, 0, 0, 0, B2_FILTER_BITSHUFFLE},
    {0, 0, 0, 0, B2_FILTER_DELTA, B2_FILTER_SHUFFLE},
    {0, 0, 0, 0, B2_FILTER_SHUFFLE, B2_FILTER_BYTEDELTA},
    {0, 0, 0, 0, B2_FILTER_TRUNC_PREC, B2_FILTER_SHUFFLE},
    {B2_FILTER_DELTA, 0, 0, 0, 0, B2_FILTER_BITSHUFFLE},
    {B2_FILTER_SHUFFLE, B2_FILTER_DELTA, 0, 0, 0, 0},
};
#define NSETS ((int)(sizeof filter_sets / sizeof filter_sets[0]))

/* Expected decode of `src` under filter set `fs` (trunc_prec is lossy). */
static void expected_of(const uint8_t *src, size_t n, int fs, int typesize,
                        int meta, uint8_t *exp) {
  int has_tp = 0;
  for (int i = 0; i < B2_MAX_FILTERS; i++)
    if (filter_sets[fs][i] == B2_FILTER_TRUNC_PREC) has_tp = 1;
  if (has_tp)
    CHECK_EQ(b2_truncprec(meta, (size_t)typesize, n, src, exp), 0);
  else if (n)
    memcpy(exp, src, n);
}

/* Encode, check the chunk's shape, decode, compare. Returns cbytes. */
static int roundtrip(const b2_cparams *p, const uint8_t *src, size_t n,
                     const uint8_t *exp, int ranges) {
  size_t cap = b2_chunk_bound(n);
  uint8_t *c = malloc(cap);
  uint8_t *out = malloc(n + 1);
  int cb = b2_chunk_encode(p, src, n, c, cap);
  if (cb < 0) {
    fprintf(stderr, "  encode codec %d clevel %d ts %d n %zu: %s\n", p->codec,
            p->clevel, p->typesize, n, b2_last_detail());
    t_failed_ = 1;
    goto out;
  }
  CHECK((size_t)cb <= cap);
  b2_chunk_info in;
  CHECK_EQ(b2_chunk_parse(c, (size_t)cb, &in), 0);
  CHECK_EQ(in.cbytes, cb);
  CHECK_EQ(in.nbytes, (int64_t)n);
  CHECK_EQ(in.header_len, 32);
  CHECK_EQ(in.version, 5);
  if (in.memcpyed) exp = src; /* a plain copy skips the (lossy) filters */
  out[n] = 0x77;
  int rc = b2_chunk_decode(c, (size_t)cb, out, n);
  if (rc != (int)n || (n && memcmp(out, exp, n) != 0) || out[n] != 0x77) {
    fprintf(stderr, "  roundtrip codec %d clevel %d ts %d split %d n %zu "
            "filters %d%d%d%d%d%d: rc %d %s\n", p->codec, p->clevel,
            p->typesize, p->splitmode, n, p->filters[0], p->filters[1],
            p->filters[2], p->filters[3], p->filters[4], p->filters[5], rc,
            rc < 0 ? b2_last_detail() : "bytes differ");
    t_failed_ = 1;
  } else if (ranges) {
    CHECK_EQ(check_ranges(c, (size_t)cb, exp, n, in.blocksize, ranges), 0);
  }
out:
  free(c);
  free(out);
  return cb;
}

static void test_roundtrip_matrix(void) {
  static const int codecs[] = {B2_CODEC_BLOSCLZ, B2_CODEC_LZ4, B2_CODEC_LZ4HC,
                               B2_CODEC_ZLIB, B2_CODEC_ZSTD};
  static const int tsizes[] = {1, 2, 3, 4, 8, 16};
  static const int levels[] = {0, 1, 5, 9};
  static const size_t sizes[] = {0, 1, 7, 31, 32, 33, 1000, 65549, 200003};
  const size_t maxn = 200003;
  uint8_t *src = malloc(maxn), *exp = malloc(maxn);
  int k = 0;
  for (int ci = 0; ci < 5; ci++)
    for (int ti = 0; ti < 6; ti++)
      for (int li = 0; li < 4; li++)
        for (int split = 1; split <= 4; split++, k++) {
          b2_cparams p;
          b2_cparams_default(&p);
          p.codec = codecs[ci];
          p.typesize = tsizes[ti];
          p.clevel = levels[li];
          p.splitmode = split;
          int fs = k % NSETS;
          memcpy(p.filters, filter_sets[fs], B2_MAX_FILTERS);
          int tp_ok = p.typesize == 4 || p.typesize == 8;
          for (int i = 0; i < B2_MAX_FILTERS; i++)
            if (p.filters[i] == B2_FILTER_TRUNC_PREC) {
              if (!tp_ok) p.filters[i] = 0;
              else p.filters_meta[i] = (uint8_t)(p.typesize == 4 ? 13 : 40);
            }
          size_t n = sizes[k % 9];
          int kind = (k / 9) % D_KINDS;
          fill_data(src, n, kind);
          int meta = p.typesize == 4 ? 13 : 40;
          int has_tp = 0;
          for (int i = 0; i < B2_MAX_FILTERS; i++)
            has_tp |= p.filters[i] == B2_FILTER_TRUNC_PREC;
          if (has_tp)
            CHECK_EQ(b2_truncprec(meta, (size_t)p.typesize, n, src, exp), 0);
          else if (n)
            memcpy(exp, src, n);
          roundtrip(&p, src, n, exp, k % 7 == 0 ? 3 : 0);
        }
  free(src);
  free(exp);
}

static void test_roundtrip_big(void) {
  static const size_t sizes[] = {1048576, 1000003};
  size_t maxn = 1048576;
  uint8_t *src = malloc(maxn), *exp = malloc(maxn);
  int k = 0;
  for (int si = 0; si < 2; si++)
    for (int fs = 0; fs < NSETS; fs++)
      for (int kind = 0; kind < D_KINDS; kind++, k++) {
        b2_cparams p;
        b2_cparams_default(&p);
        p.codec = k % 3 == 0 ? B2_CODEC_LZ4 : k % 3 == 1 ? B2_CODEC_ZSTD
                                                         : B2_CODEC_BLOSCLZ;
        p.clevel = 1 + k % 9;
        p.typesize = (k / 3) % 2 ? 8 : 4;
        memcpy(p.filters, filter_sets[fs], B2_MAX_FILTERS);
        for (int i = 0; i < B2_MAX_FILTERS; i++)
          if (p.filters[i] == B2_FILTER_TRUNC_PREC)
            p.filters_meta[i] = (uint8_t)(p.typesize == 4 ? 10 : 30);
        size_t n = sizes[si];
        fill_data(src, n, kind);
        expected_of(src, n, fs, p.typesize, p.typesize == 4 ? 10 : 30, exp);
        roundtrip(&p, src, n, exp, k % 5 == 0 ? 4 : 0);
      }
  free(src);
  free(exp);
}

/* Pipelines the decoder shortens: delta alone (streams decoded straight
 * into the caller's buffer, delta in place there), delta under a shuffle
 * (the shuffle writes to the caller's buffer), and byte shuffles of
 * 1-byte elements (the identity, skipped). */
static void test_inplace_pipelines(void) {
  static const struct {
    int typesize;
    uint8_t f[B2_MAX_FILTERS], meta[B2_MAX_FILTERS];
  } cases[] = {
      {8, {0, 0, 0, 0, 0, B2_FILTER_DELTA}, {0}},
      {4, {0, 0, 0, 0, B2_FILTER_DELTA, B2_FILTER_SHUFFLE}, {0}},
      {1, {0, 0, 0, 0, 0, B2_FILTER_SHUFFLE}, {0}},
      {1, {0, 0, 0, 0, B2_FILTER_DELTA, B2_FILTER_SHUFFLE}, {0}},
      {8, {0, 0, 0, 0, 0, B2_FILTER_SHUFFLE}, {0, 0, 0, 0, 0, 1}},
      {2, {0, 0, 0, 0, B2_FILTER_SHUFFLE, B2_FILTER_BYTEDELTA}, {0}},
  };
  static const int codecs[] = {B2_CODEC_LZ4, B2_CODEC_ZSTD, B2_CODEC_BLOSCLZ};
  static const size_t sizes[] = {200003, 300000};
  size_t maxn = 300000;
  uint8_t *src = malloc(maxn);
  int k = 0;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (int ci = 0; ci < 3; ci++)
      for (int si = 0; si < 2; si++, k++) {
        b2_cparams p;
        b2_cparams_default(&p);
        p.codec = codecs[ci];
        p.clevel = 1 + k % 9;
        p.typesize = cases[c].typesize;
        p.blocksize = si ? 0 : 32768; /* several blocks and a leftover */
        memcpy(p.filters, cases[c].f, B2_MAX_FILTERS);
        memcpy(p.filters_meta, cases[c].meta, B2_MAX_FILTERS);
        size_t n = sizes[si];
        fill_data(src, n, k % 2 ? D_TEXT : D_SMOOTH);
        roundtrip(&p, src, n, src, 6);
      }
  free(src);
}

/* Chunk shapes the reference produces for particular inputs. */
static void test_encode_shapes(void) {
  size_t n = 1 << 20;
  uint8_t *src = calloc(1, n), *c = malloc(b2_chunk_bound(n));
  uint8_t *out = malloc(n);
  b2_cparams p;
  b2_chunk_info in;
  b2_cparams_default(&p);
  p.clevel = 5;
  /* zeros -> a special zero chunk of 32 bytes */
  int cb = b2_chunk_encode(&p, src, n, c, b2_chunk_bound(n));
  CHECK_EQ(cb, 32);
  CHECK_EQ(b2_chunk_parse(c, 32, &in), 0);
  CHECK_EQ(in.special, B2_SPECIAL_ZERO);
  memset(out, 1, n);
  CHECK_EQ(b2_chunk_decode(c, 32, out, n), (int)n);
  CHECK(out[0] == 0 && out[n - 1] == 0 && memcmp(out, out + 1, n - 1) == 0);
  /* random bytes -> memcpy'd chunk: flags keep the codec and split bits */
  fill_data(src, n, D_RANDOM);
  p.filters[5] = 0;
  cb = b2_chunk_encode(&p, src, n, c, b2_chunk_bound(n));
  CHECK_EQ(cb, (int)n + 32);
  CHECK_EQ(b2_chunk_parse(c, (size_t)cb, &in), 0);
  CHECK(in.memcpyed);
  CHECK_EQ(c[2], 0x02 | 0x05 | 0x10 | (B2_FORMAT_ZSTD << 5));
  CHECK_EQ(b2_chunk_decode(c, (size_t)cb, out, n), (int)n);
  CHECK_MEM(out, src, n);
  /* clevel 0 -> memcpy'd, flags 0x07 only */
  p.clevel = 0;
  cb = b2_chunk_encode(&p, src, 1000, c, b2_chunk_bound(1000));
  CHECK_EQ(cb, 1032);
  CHECK_EQ(c[2], 0x07);
  /* a byte run: csize -v then token 1 */
  memset(src, 0x33, 4096);
  p.clevel = 5;
  p.typesize = 1;
  cb = b2_chunk_encode(&p, src, 4096, c, b2_chunk_bound(4096));
  CHECK_EQ(cb, 32 + 4 + 4 + 1);
  CHECK_EQ(le32(c + 36), (uint32_t)-0x33);
  CHECK_EQ(c[40], 1);
  CHECK_EQ(b2_chunk_decode(c, (size_t)cb, out, 4096), 4096);
  CHECK_MEM(out, src, 4096);
  /* header fields */
  CHECK_EQ(c[0], 5);
  CHECK_EQ(c[1], 1);
  CHECK_EQ(c[22], B2_CODEC_ZSTD);
  CHECK_EQ(c[31], 0);
  free(src);
  free(c);
  free(out);
}

/* Block sizes from the reference's tuning rules. */
static void test_blocksize_rules(void) {
  b2_cparams p;
  b2_cparams_default(&p);
  struct { int codec, clevel, ts, filt, split; size_t n; int32_t bs; } cases[] = {
      {B2_CODEC_ZSTD, 5, 8, B2_FILTER_SHUFFLE, 4, 4 << 20, 512 * 1024},
      {B2_CODEC_ZSTD, 9, 8, B2_FILTER_SHUFFLE, 4, 4 << 20, 1024 * 1024},
      {B2_CODEC_ZSTD, 1, 8, B2_FILTER_SHUFFLE, 4, 4 << 20, 256 * 1024},
      {B2_CODEC_LZ4, 9, 4, 0, 4, 4 << 20, 256 * 1024},
      {B2_CODEC_LZ4, 1, 4, 0, 4, 4 << 20, 16 * 1024},
      {B2_CODEC_LZ4HC, 5, 4, B2_FILTER_SHUFFLE, 4, 4 << 20, 256 * 1024},
      {B2_CODEC_BLOSCLZ, 5, 16, B2_FILTER_SHUFFLE, 4, 4 << 20, 1024 * 1024},
      {B2_CODEC_BLOSCLZ, 9, 16, B2_FILTER_SHUFFLE, 4, 64 << 20, 4 << 20},
      {B2_CODEC_BLOSCLZ, 1, 1, B2_FILTER_SHUFFLE, 4, 4 << 20, 32 * 1024},
      {B2_CODEC_BLOSCLZ, 5, 3, B2_FILTER_SHUFFLE, 2, 4 << 20, 131070},
      {B2_CODEC_ZSTD, 5, 8, B2_FILTER_SHUFFLE, 4, 1000, 1000},
      {B2_CODEC_ZSTD, 5, 8, B2_FILTER_SHUFFLE, 4, 1001, 1000},
      {B2_CODEC_ZSTD, 5, 8, B2_FILTER_SHUFFLE, 4, 5, 1},
      {B2_CODEC_ZLIB, 1, 2, 0, 4, 20000, 20000},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    p.codec = cases[i].codec;
    p.clevel = cases[i].clevel;
    p.typesize = cases[i].ts;
    memset(p.filters, 0, sizeof p.filters);
    p.filters[5] = (uint8_t)cases[i].filt;
    p.splitmode = cases[i].split;
    int32_t bs = b2_chunk_blocksize(&p, cases[i].n);
    if (bs != cases[i].bs) {
      fprintf(stderr, "  case %zu: blocksize %d, expected %d\n", i, bs,
              cases[i].bs);
      t_failed_ = 1;
    }
  }
  p.blocksize = 8000;
  p.typesize = 3;
  CHECK_EQ(b2_chunk_blocksize(&p, 1 << 20), 7998);
}

static void test_special_chunks(void) {
  uint8_t c[64], out[4096];
  b2_chunk_info in;
  double v = 2.5;
  int cb = b2_chunk_make_special(B2_SPECIAL_VALUE, 4096, 8, &v, c, sizeof c);
  CHECK_EQ(cb, 40);
  CHECK_EQ(b2_chunk_parse(c, (size_t)cb, &in), 0);
  CHECK_EQ(in.special, B2_SPECIAL_VALUE);
  CHECK_EQ(b2_chunk_decode(c, (size_t)cb, out, sizeof out), 4096);
  for (int i = 0; i < 512; i++) CHECK(memcmp(out + 8 * i, &v, 8) == 0);
  CHECK_EQ(b2_chunk_decode_range(c, (size_t)cb, 13, 100, out, NULL), 100);
  CHECK(memcmp(out, (uint8_t *)&v + 5, 3) == 0);
  cb = b2_chunk_make_special(B2_SPECIAL_NAN, 4096, 4, NULL, c, sizeof c);
  CHECK_EQ(cb, 32);
  CHECK_EQ(b2_chunk_decode(c, (size_t)cb, out, sizeof out), 4096);
  float f;
  memcpy(&f, out + 4092, 4);
  CHECK(f != f);
  cb = b2_chunk_make_special(B2_SPECIAL_UNINIT, 4000, 8, NULL, c, sizeof c);
  memset(out, 1, sizeof out);
  CHECK_EQ(b2_chunk_decode(c, (size_t)cb, out, sizeof out), 4000);
  CHECK(out[0] == 0 && out[3999] == 0 && out[4000] == 1);
  cb = b2_chunk_make_special(B2_SPECIAL_ZERO, 4001, 8, NULL, c, sizeof c);
  CHECK_EQ(cb, 32);
  CHECK_EQ(b2_chunk_decode(c, (size_t)cb, out, sizeof out), 4001);
  CHECK_EQ(b2_chunk_make_special(B2_SPECIAL_NAN, 4096, 2, NULL, c, sizeof c),
           B2_E_INVAL);
  CHECK_EQ(b2_chunk_make_special(7, 4096, 2, NULL, c, sizeof c), B2_E_INVAL);
  CHECK_EQ(b2_chunk_make_special(B2_SPECIAL_ZERO, 4096, 2, NULL, c, 16),
           B2_E_INVAL);
}

/* ---- damaged chunks ----------------------------------------------------- */

/* Decode a (possibly damaged) chunk every way; must fail cleanly or give
 * the declared sizes.  Returns 1 when some call succeeded. */
static int try_decode(const uint8_t *c, size_t len, uint8_t *out, size_t cap) {
  int any = 0;
  b2_chunk_info in;
  if (b2_chunk_parse(c, len, &in) < 0) {
    CHECK(b2_last_detail()[0] != 0);
    CHECK(b2_chunk_decode(c, len, out, cap) < 0);
    return 0;
  }
  static unsigned calls;
  /* big chunks: a full decode only now and then (ranges below always) */
  if (in.nbytes <= (1 << 20) || calls++ % 8 == 0) {
    int rc = b2_chunk_decode(c, len, out, cap);
    if (rc >= 0) {
      CHECK_EQ(rc, in.nbytes);
      any = 1;
    } else {
      CHECK(b2_last_detail()[0] != 0);
    }
  }
  int rc;
  size_t nb = (size_t)in.nbytes;
  if (nb > 0) {
    size_t offs[3] = {0, nb / 2, nb - 1};
    for (int k = 0; k < 3; k++) {
      size_t n = B2MIN(nb - offs[k], cap < 5000 ? cap : 5000);
      rc = b2_chunk_decode_range(c, len, offs[k], n, out, NULL);
      CHECK(rc < 0 || rc == (int)n);
      any |= rc >= 0;
    }
  }
  return any;
}

/* Damage one chunk in many ways: truncation, header fields, block starts,
 * stream sizes, random flips. */
static void damage_chunk(const char *what, const uint8_t *good, size_t len,
                         int full_flips) {
  b2_chunk_info in;
  CHECK_EQ(b2_chunk_parse(good, len, &in), 0);
  size_t cap = (size_t)in.nbytes + 64;
  uint8_t *out = malloc(cap);
  uint8_t *c = malloc(len + 64);
  size_t cb = (size_t)in.cbytes;

  /* every truncation is refused */
  for (size_t l = 0; l < cb; l++) {
    memcpy(c, good, l);
    int rc = b2_chunk_parse(c, l, &in);
    if (rc != B2_E_TRUNCATED) {
      fprintf(stderr, "  %s truncated to %zu: rc %d\n", what, l, rc);
      t_failed_ = 1;
      break;
    }
    CHECK(b2_chunk_decode(c, l, out, cap) < 0);
  }
  /* header bytes: several values each */
  static const uint8_t xors[] = {0x01, 0x02, 0x10, 0x80, 0xff, 0x40};
  size_t hl = (size_t)(good[2] & 5) == 5 ? 32 : 16;
  for (size_t i = 0; i < hl; i++)
    for (size_t x = 0; x < sizeof xors; x++) {
      memcpy(c, good, len);
      c[i] ^= xors[x];
      try_decode(c, len, out, cap);
    }
  /* lying fields refused with the right code */
  struct { int off; uint32_t v; int code; } lies[] = {
      {12, (uint32_t)len + 1, B2_E_TRUNCATED}, {12, 15, B2_E_FORMAT},
      {4, 0x7fffffffu, B2_E_FORMAT}, {4, 0xffffffffu, B2_E_FORMAT},
      {8, 0, B2_E_FORMAT}, {8, (uint32_t)-5, B2_E_FORMAT},
      {8, 1, B2_E_FORMAT}, {8, 0x40000000u, B2_E_FORMAT},
  };
  for (size_t k = 0; k < sizeof lies / sizeof lies[0]; k++) {
    if (in.memcpyed && lies[k].off == 8) continue;
    if (in.vlblocks && lies[k].off == 8) continue;
    memcpy(c, good, len);
    put_le32(c + lies[k].off, lies[k].v);
    int rc = b2_chunk_parse(c, len, &in);
    if (rc != lies[k].code) {
      fprintf(stderr, "  %s: field @%d = %u: rc %d, expected %d\n", what,
              lies[k].off, lies[k].v, rc, lies[k].code);
      t_failed_ = 1;
    }
    try_decode(c, len, out, cap);
  }
  b2_chunk_parse(good, len, &in);
  /* block starts */
  if (!in.memcpyed && !in.special) {
    int64_t vals[] = {0, 1, 15, (int64_t)cb - 1, (int64_t)cb, (int64_t)cb + 7,
                      -1, 0x7fffffff, in.header_len + 4 * (int64_t)in.nblocks - 1};
    for (int32_t b = 0; b < in.nblocks && b < 4; b++)
      for (size_t k = 0; k < sizeof vals / sizeof vals[0]; k++) {
        memcpy(c, good, len);
        put_le32(c + in.header_len + 4 * b, (uint32_t)vals[k]);
        try_decode(c, len, out, cap);
        /* and a block start pointing at another block */
        memcpy(c, good, len);
        memcpy(c + in.header_len + 4 * b,
               good + in.header_len + 4 * ((b + 1) % in.nblocks), 4);
        try_decode(c, len, out, cap);
      }
    /* stream sizes at each block's start */
    int32_t svals[] = {0, 1, -1, -255, -256, (int32_t)0x80000000, 0x7fffffff,
                       in.blocksize, in.blocksize - 1, in.blocksize + 1};
    for (int32_t b = 0; b < in.nblocks && b < 3; b++) {
      uint32_t st = le32(good + in.header_len + 4 * b);
      if (st + 4 > cb) continue;
      for (size_t k = 0; k < sizeof svals / sizeof svals[0]; k++) {
        memcpy(c, good, len);
        put_le32(c + st, (uint32_t)svals[k]);
        try_decode(c, len, out, cap);
      }
    }
  }
  /* random flips anywhere */
  for (int it = 0; it < full_flips; it++) {
    memcpy(c, good, len);
    int nflip = 1 + (int)(rnd() % 4);
    for (int f = 0; f < nflip; f++) c[rnd() % cb] ^= (uint8_t)(1 + rnd() % 255);
    try_decode(c, len, out, cap);
  }
  free(out);
  free(c);
}

static void test_damaged_chunks(void) {
  /* our own chunks: several codecs and filters, several blocks each */
  static const uint8_t sets[][B2_MAX_FILTERS] = {
      {0, 0, 0, 0, B2_FILTER_DELTA, B2_FILTER_SHUFFLE},
      {0, 0, 0, 0, 0, B2_FILTER_BITSHUFFLE},
      {0, 0, 0, 0, B2_FILTER_SHUFFLE, B2_FILTER_BYTEDELTA},
      {0, 0, 0, 0, 0, 0},
  };
  static const int codecs[] = {B2_CODEC_ZSTD, B2_CODEC_LZ4, B2_CODEC_BLOSCLZ,
                               B2_CODEC_ZLIB};
  size_t n = 40000;
  uint8_t *src = malloc(n), *c = malloc(b2_chunk_bound(n));
  for (int k = 0; k < 4; k++) {
    b2_cparams p;
    b2_cparams_default(&p);
    p.codec = codecs[k];
    p.clevel = 5;
    p.typesize = k == 1 ? 8 : 4;
    p.blocksize = 4096;
    p.splitmode = k % 2 ? B2_SPLIT_NEVER : B2_SPLIT_ALWAYS;
    memcpy(p.filters, sets[k], B2_MAX_FILTERS);
    fill_data(src, n, k == 3 ? D_RUNS : D_SMOOTH);
    int cb = b2_chunk_encode(&p, src, n, c, b2_chunk_bound(n));
    CHECK(cb > 32);
    if (cb <= 32) continue;
    char what[64];
    snprintf(what, sizeof what, "encoded chunk %d", k);
    damage_chunk(what, c, (size_t)cb, 300);
  }
  /* a memcpy'd chunk */
  fill_data(src, 1000, D_RANDOM);
  b2_cparams p;
  b2_cparams_default(&p);
  int cb = b2_chunk_encode(&p, src, 1000, c, b2_chunk_bound(1000));
  damage_chunk("memcpy'd chunk", c, (size_t)cb, 100);
  free(src);
  free(c);

  /* chunks written by the reference: Blosc 1.x, a dictionary, vlblocks */
  const char *files[] = {"chunks/blosc-1.14.0-zstd.cdata",
                         "chunks/blosc-1.7.0-lz4hc.cdata",
                         "cframe/zstd-dict-text.b2frame",
                         "cframe/lz4-dict-text.b2frame",
                         "reference/vlblocks-lz4-variable-3.0.0.b2frame"};
  int found = 0;
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char path[8192];
    size_t len;
    snprintf(path, sizeof path, "%s/%s", t_fixtures(), files[i]);
    uint8_t *f = t_read_file(path, &len);
    if (!f) continue;
    found++;
    size_t off = 0;
    if (strstr(files[i], ".b2frame")) off = be32(f + 0x0B); /* chunk 0 */
    b2_chunk_info in;
    CHECK_EQ(b2_chunk_parse(f + off, len - off, &in), 0);
    if (strstr(files[i], "dict")) CHECK(in.dict);
    if (strstr(files[i], "vlblocks")) CHECK(in.vlblocks);
    damage_chunk(files[i], f + off, (size_t)in.cbytes, 40);
    free(f);
  }
  if (!found) fprintf(stderr, "  (no fixtures: reference chunks skipped)\n");
}

/* Unsupported ids are reported with the id in the detail. */
static void test_unsupported_ids(void) {
  size_t n = 4096;
  uint8_t *src = malloc(n), *c = malloc(b2_chunk_bound(n));
  fill_data(src, n, D_SMOOTH);
  b2_cparams p;
  b2_cparams_default(&p);
  int cb = b2_chunk_encode(&p, src, n, c, b2_chunk_bound(n));
  CHECK(cb > 32 && !(c[2] & 2));
  b2_chunk_info in;
  c[16 + 2] = 77; /* filter slot 2 */
  CHECK_EQ(b2_chunk_parse(c, (size_t)cb, &in), B2_E_UNSUPPORTED);
  CHECK(strstr(b2_last_detail(), "77") != NULL);
  c[16 + 2] = 0;
  c[2] = (uint8_t)((c[2] & 0x1f) | (2 << 5)); /* snappy */
  CHECK_EQ(b2_chunk_parse(c, (size_t)cb, &in), B2_E_UNSUPPORTED);
  c[2] = (uint8_t)((c[2] & 0x1f) | (6 << 5)); /* user codec 40 */
  c[22] = 40;
  CHECK_EQ(b2_chunk_parse(c, (size_t)cb, &in), B2_E_UNSUPPORTED);
  CHECK(strstr(b2_last_detail(), "40") != NULL);
  c[22] = B2_CODEC_NDLZ; /* known: parses (its streams are not NDLZ's) */
  CHECK_EQ(b2_chunk_parse(c, (size_t)cb, &in), 0);
  CHECK_EQ(in.codec, B2_CODEC_NDLZ);
  CHECK(b2_chunk_decode(c, (size_t)cb, src, n) < 0);
  c[2] = (uint8_t)((c[2] & 0x1f) | (B2_FORMAT_ZSTD << 5));
  c[22] = B2_CODEC_ZSTD;
  CHECK_EQ(b2_chunk_parse(c, (size_t)cb, &in), 0);
  c[0] = 7;
  CHECK_EQ(b2_chunk_parse(c, (size_t)cb, &in), B2_E_UNSUPPORTED);
  c[0] = 5;
  c[31] = 0x08; /* lazy */
  CHECK_EQ(b2_chunk_parse(c, (size_t)cb, &in), B2_E_UNSUPPORTED);
  c[31] = 0x50; /* special kind 5 */
  CHECK_EQ(b2_chunk_parse(c, (size_t)cb, &in), B2_E_FORMAT);
  c[31] = 0;
  CHECK_EQ(b2_chunk_decode(c, (size_t)cb, src, n), (int)n);
  CHECK_EQ(b2_chunk_decode(c, (size_t)cb, src, n - 1), B2_E_INVAL);
  CHECK_EQ(b2_chunk_decode_range(c, (size_t)cb, n - 10, 11, src, NULL), B2_E_RANGE);
  CHECK_EQ(b2_chunk_decode_range(c, (size_t)cb, n + 1, 0, src, NULL), B2_E_RANGE);
  CHECK_EQ(b2_chunk_decode_range(c, (size_t)cb, n, 0, src, NULL), 0);
  free(src);
  free(c);
}

/* ---- threads -------------------------------------------------------------
 * Several threads decode ranges of shared chunks at once; each exits
 * without cleanup so the thread-exit destructors must free the scratch
 * (LeakSanitizer would report it otherwise). */
struct thr_arg {
  const uint8_t *chunk;
  size_t len, n;
  const uint8_t *expect;
  int bad;
  unsigned seed;
};

static void *thr_main(void *p) {
  struct thr_arg *a = p;
  uint8_t *out = malloc(a->n);
  for (int it = 0; it < 150; it++) {
    a->seed = a->seed * 1103515245u + 12345u;
    size_t off = (a->seed >> 3) % a->n;
    size_t len = 1 + (a->seed >> 7) % 9000;
    if (len > a->n - off) len = a->n - off;
    int rc = b2_chunk_decode_range(a->chunk, a->len, off, len, out, NULL);
    if (rc != (int)len || memcmp(out, a->expect + off, len) != 0) a->bad++;
  }
  free(out);
  return NULL;
}

static void test_threads(void) {
  size_t n = 300000;
  uint8_t *src = malloc(n);
  fill_data(src, n, D_SMOOTH);
  uint8_t *c[2];
  size_t clen[2];
  for (int k = 0; k < 2; k++) {
    b2_cparams p;
    b2_cparams_default(&p);
    p.codec = k ? B2_CODEC_LZ4 : B2_CODEC_ZSTD;
    p.blocksize = 16384;
    if (k) p.filters[4] = B2_FILTER_DELTA;
    c[k] = malloc(b2_chunk_bound(n));
    int cb = b2_chunk_encode(&p, src, n, c[k], b2_chunk_bound(n));
    CHECK(cb > 32);
    clen[k] = (size_t)cb;
  }
  pthread_t th[4];
  struct thr_arg args[4];
  for (int i = 0; i < 4; i++) {
    args[i] = (struct thr_arg){c[i % 2], clen[i % 2], n, src, 0, 17u + (unsigned)i};
    CHECK_EQ(pthread_create(&th[i], NULL, thr_main, &args[i]), 0);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    CHECK_EQ(args[i].bad, 0);
  }
  free(c[0]);
  free(c[1]);
  free(src);
}

/* ZFP (codecs 33-35): a chunk of float blocks of a 3-D block shape encodes
 * and decodes with the geometry, whole, shared and by range; without it a
 * ZFP chunk fails saying why; a damaged stream fails, never reads past its
 * bytes (ASan watches the padded copy); a shape that is not the block's is
 * refused.  Lossy: decoded values are compared with a tolerance. */
static void test_zfp(void) {
  if (!b2_zfp_available()) T_SKIP("built without libzfp");
  enum { NX = 8, NY = 4, NZ = 4, NB = 3 }; /* 3 blocks of 4x4x8 floats */
  size_t n = (size_t)NB * NX * NY * NZ * sizeof(float);
  float *src = malloc(n), *out = malloc(n), *out2 = malloc(n), *again = malloc(n);
  for (size_t k = 0; k < n / sizeof(float); k++) src[k] = (float)(k % 37) * 0.25f - 3.0f;
  static const int codecs[] = {B2_CODEC_ZFP_ACC, B2_CODEC_ZFP_PREC, B2_CODEC_ZFP_RATE};
  static const int metas[] = {253 /* 10^-3 */, 20, 50};
  for (int ci = 0; ci < 3; ci++) {
    b2_cparams p;
    b2_cparams_default(&p);
    p.codec = codecs[ci];
    p.codec_meta = metas[ci];
    p.clevel = 5;
    p.typesize = 4;
    memset(p.filters, 0, sizeof p.filters);
    p.splitmode = B2_SPLIT_NEVER;
    p.blocksize = NX * NY * NZ * 4;
    p.geom.ndim = 3;
    p.geom.blockshape[0] = NZ;
    p.geom.blockshape[1] = NY;
    p.geom.blockshape[2] = NX;
    size_t cap = b2_chunk_bound(n);
    uint8_t *c = malloc(cap);
    int cb = b2_chunk_encode(&p, src, n, c, cap);
    CHECK(cb > 32);
    b2_chunk_info in;
    CHECK_EQ(b2_chunk_parse(c, (size_t)cb, &in), 0);
    CHECK_EQ(in.codec, codecs[ci]);
    CHECK_EQ(in.codec_meta, metas[ci]);
    CHECK(!in.memcpyed);
    CHECK_EQ(b2_chunk_decode_par(c, (size_t)cb, out, n, NULL, &p.geom), (int)n);
    double worst = 0;
    for (size_t k = 0; k < n / sizeof(float); k++) {
      double d = out[k] > src[k] ? out[k] - src[k] : src[k] - out[k];
      if (d > worst) worst = d;
    }
    CHECK(worst < 0.05); /* every mode here keeps the values within 0.05 */
    /* by range, a block in the middle */
    CHECK_EQ(b2_chunk_decode_range(c, (size_t)cb, 600, 700, out2, &p.geom), 700);
    CHECK_MEM(out2, (uint8_t *)out + 600, 700);
    /* without the geometry: refused, naming it */
    CHECK_EQ(b2_chunk_decode_par(c, (size_t)cb, out2, n, NULL, NULL), B2_E_FORMAT);
    CHECK(strstr(b2_last_detail(), "block shape") != NULL);
    CHECK(b2_chunk_decode(c, (size_t)cb, out2, n) < 0);
    /* a shape that is not the block's */
    b2_chunk_geom g = p.geom;
    g.blockshape[2] = NX * 2;
    CHECK(b2_chunk_decode_par(c, (size_t)cb, out2, n, NULL, &g) < 0);
    /* the decoded values encode again (a write re-encodes a chunk's other
     * blocks from their decoded values) */
    int cb2 = b2_chunk_encode(&p, out, n, c + 0, cap);
    CHECK(cb2 > 32);
    CHECK_EQ(b2_chunk_decode_par(c, (size_t)cb2, again, n, NULL, &p.geom), (int)n);
    /* damaged: each block's stream cut short or overwritten */
    uint8_t *d = malloc(cap);
    for (int k = 0; k < 40; k++) {
      memcpy(d, c, (size_t)cb2);
      size_t at = 32 + 4 * NB + (rnd() % (size_t)(cb2 - 32 - 4 * NB));
      d[at] ^= (uint8_t)(1 + rnd() % 255);
      int rc = b2_chunk_decode_par(d, (size_t)cb2, out2, n, NULL, &p.geom);
      CHECK(rc == (int)n || rc < 0); /* no format checksum: may decode */
    }
    /* each stream's size cut to a few bytes: the decoder runs into the
     * padding and says the stream is damaged */
    memcpy(d, c, (size_t)cb2);
    int32_t b1 = (int32_t)le32(d + 32 + 4);
    put_le32(d + b1, 8); /* block 1's stream: 8 bytes */
    int rc = b2_chunk_decode_par(d, (size_t)cb2, out2, n, NULL, &p.geom);
    CHECK(rc < 0);
    free(d);
    free(c);
  }
  free(src);
  free(out);
  free(out2);
  free(again);
}

int main(void) {
  T_RUN(test_fixture_chunks);
  T_RUN(test_fixture_frames);
  T_RUN(test_spans_layouts);
  T_RUN(test_blocksize_rules);
  T_RUN(test_encode_shapes);
  T_RUN(test_special_chunks);
  T_RUN(test_unsupported_ids);
  T_RUN(test_damaged_chunks);
  T_RUN(test_roundtrip_matrix);
  T_RUN(test_roundtrip_big);
  T_RUN(test_inplace_pipelines);
  T_RUN(test_threads);
  T_RUN(test_zfp);
  b2_chunk_thread_cleanup();
  b2_codec_thread_cleanup();
  T_END();
}
