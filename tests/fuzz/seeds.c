/* seeds.c - writes fuzz seeds taken from the fixtures.
 *
 *   seeds FIXTURES OUTDIR
 *
 * Walks FIXTURES (no symlinks) and writes into OUTDIR/<target>/:
 *   chunk   every lone chunk file (*.cdata, sparse *.chunk) and the stored
 *           chunks of every frame (a few per frame, special ones included)
 *   frame   every contiguous frame file and every chunks.b2frame
 *   sframe  every sparse frame packed as fuzz_sframe reads it
 *           (sframe_pack.h)
 *   b2nd    every b2nd metalayer, behind fuzz_b2nd's selector byte
 *   names   the names of each fixture directory, as fuzz_names reads them
 * and, for frame and sframe, small frames b2fs writes itself (the fixtures,
 * written by the reference library, have no checksum table): contiguous
 * and sparse, with a b2nd metalayer, a vlmetalayer and checksums.
 * Files above MAXSEED bytes are left out.  Seed names are the fixture's
 * path with '/' turned into '_', so reruns overwrite instead of adding. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "b2_b2nd.h"
#include "b2_frame.h"
#include "sframe_pack.h"

#define MAXSEED (1u << 20)
#define CHUNKS_PER_FRAME 4

static const char *outdir;
static size_t fixlen;

static void seed_name(char *out, size_t cap, const char *target,
                      const char *path, const char *tag) {
  const char *rel = path + fixlen;
  while (*rel == '/') rel++;
  int n = snprintf(out, cap, "%s/%s/", outdir, target);
  for (; *rel && n + 2 < (int)cap; rel++) out[n++] = *rel == '/' ? '_' : *rel;
  out[n] = 0;
  if (tag) snprintf(out + n, cap - (size_t)n, "%s", tag);
}

static void put(const char *target, const char *path, const char *tag,
                const void *a, size_t alen, const void *b, size_t blen) {
  if (alen + blen > MAXSEED) return;
  char name[4096];
  seed_name(name, sizeof name, target, path, tag);
  FILE *fp = fopen(name, "wb");
  if (!fp) { perror(name); return; }
  if (alen) fwrite(a, 1, alen, fp);
  if (blen) fwrite(b, 1, blen, fp);
  fclose(fp);
}

static uint8_t *slurp(const char *path, size_t *len) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return NULL;
  uint8_t *buf = malloc(MAXSEED + 1);
  size_t n = buf ? fread(buf, 1, MAXSEED + 1, fp) : 0;
  fclose(fp);
  if (!buf || n > MAXSEED) { free(buf); return NULL; }
  *len = n;
  return buf;
}

static int ends_with(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && !strcmp(s + a - b, suf);
}

/* Chunks and metalayers of a frame that opens. */
static void from_frame(const char *path) {
  b2_frame *f;
  if (b2_frame_open(path, &f) < 0) return;
  const b2_frame_info *in = b2_frame_get_info(f);
  for (int64_t i = 0; i < in->nchunks && i < CHUNKS_PER_FRAME; i++) {
    uint8_t *c;
    size_t len;
    if (b2_frame_read_chunk(f, i, &c, &len) < 0) continue;
    char tag[32];
    snprintf(tag, sizeof tag, "#%lld", (long long)i);
    put("chunk", path, tag, c, len, NULL, 0);
    free(c);
  }
  const uint8_t *m;
  size_t len;
  if (b2_frame_meta_get(f, "b2nd", &m, &len) == 0) {
    uint8_t sel = (uint8_t)(((in->typesize - 1) % 16) << 1);
    put("b2nd", path, NULL, &sel, 1, m, len);
  }
  b2_frame_close(f);
}

/* A sparse frame directory, packed for fuzz_sframe. */
static void sparse_dir(const char *path) {
  char p[4200];
  size_t len;
  snprintf(p, sizeof p, "%s/chunks.b2frame", path);
  uint8_t *idx = slurp(p, &len);
  if (!idx) return;
  size_t cap = MAXSEED, n = 0, end = 0;
  uint8_t *pack = malloc(cap);
  if (pack) n = end = b2_sframe_pack_part(pack, cap, 0, idx, len);
  free(idx);
  for (unsigned k = 0; n && k < B2_SFRAME_PACK_MAXCHUNKS; k++) {
    snprintf(p, sizeof p, "%s/%08X.chunk", path, k);
    uint8_t *c = slurp(p, &len);
    n = b2_sframe_pack_part(pack, cap, n, c, len); /* c NULL: missing file */
    if (c) end = n;
    free(c);
  }
  /* up to the last file present (also when a part did not fit) */
  if (end) put("sframe", path, NULL, pack, end, NULL, 0);
  free(pack);
}

static void names_of(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  char buf[8192];
  size_t n = 0;
  struct dirent *e;
  int k = 0;
  while ((e = readdir(d)) && n + 300 < sizeof buf) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    int frame = ends_with(e->d_name, ".b2frame") || ends_with(e->d_name, ".b2nd") ||
                ends_with(e->d_name, ".b2f") || ends_with(e->d_name, ".b2");
    n += (size_t)snprintf(buf + n, sizeof buf - n, "%c%s\n", frame ? '1' : '0',
                          e->d_name);
    k++;
  }
  closedir(d);
  if (k) put("names", dir, "#dir", buf, n, NULL, 0);
}

static void walk(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  names_of(dir);
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    struct stat st;
    if (lstat(p, &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      char ip[4200];
      struct stat ist;
      snprintf(ip, sizeof ip, "%s/chunks.b2frame", p);
      if (lstat(ip, &ist) == 0) {
        sparse_dir(p);
        from_frame(p);
      }
      walk(p);
      continue;
    }
    if (!S_ISREG(st.st_mode) || (size_t)st.st_size > MAXSEED) continue;
    size_t len;
    uint8_t *buf = slurp(p, &len);
    if (!buf) continue;
    if (ends_with(p, ".cdata") || ends_with(p, ".chunk")) {
      put("chunk", p, NULL, buf, len, NULL, 0);
    } else if (!ends_with(p, ".md") && !ends_with(p, ".tsv")) {
      put("frame", p, NULL, buf, len, NULL, 0);
      from_frame(p);
    }
    free(buf);
  }
  closedir(d);
}

/* A small frame written by this library, at `path`: 3 chunks of 4 KiB
 * (two encoded, one special zero), a b2nd metalayer, a vlmetalayer and the
 * checksum table. */
static int write_frame(const char *path, int layout) {
  b2_frame_params p;
  b2_frame_params_default(&p);
  p.layout = layout;
  p.chunksize = 4096;
  p.cparams.typesize = 4;
  p.cparams.codec = layout == B2_LAYOUT_SPARSE ? B2_CODEC_LZ4 : B2_CODEC_BLOSCLZ;
  int64_t shape[1] = {3072};
  int32_t cs[1] = {1024}, bs[1] = {256};
  b2_b2nd a;
  uint8_t *meta = NULL;
  size_t mlen = 0;
  if (b2_b2nd_make(&a, 1, shape, cs, bs, 4, "<i4") < 0) return -1;
  int rc = b2_b2nd_meta_encode(&a, &meta, &mlen);
  b2_b2nd_free(&a);
  if (rc < 0) return rc;
  b2_frame_meta_init mi = {"b2nd", meta, mlen};
  p.nmeta = 1;
  p.meta = &mi;
  b2_frame *f;
  rc = b2_frame_create(path, &p, &f);
  free(meta);
  if (rc < 0) return rc;
  static int32_t src[1024];
  static uint8_t enc[8192];
  for (int64_t i = 0; i < 3 && rc >= 0; i++) {
    if (i == 1) {
      rc = b2_frame_put_special(f, i, B2_SPECIAL_ZERO, 4096);
      continue;
    }
    for (int k = 0; k < 1024; k++) src[k] = (int32_t)(k * (i + 1) + (k % 7));
    rc = b2_chunk_encode(&p.cparams, src, sizeof src, enc, sizeof enc);
    if (rc > 0) rc = b2_frame_put_chunk(f, i, enc, (size_t)rc);
  }
  if (rc >= 0) rc = b2_frame_vlmeta_set(f, "note", "written by b2fs", 15);
  if (rc >= 0) rc = b2_frame_commit(f);
  b2_frame_close(f);
  return rc < 0 ? rc : 0;
}

static void written_frames(void) {
  char dir[64], path[128];
  snprintf(dir, sizeof dir, "/tmp/b2fs-seeds.%d", (int)getpid());
  if (mkdir(dir, 0700) != 0) return;
  fixlen = strlen(dir);
  snprintf(path, sizeof path, "%s/b2fs-written.b2frame", dir);
  if (write_frame(path, B2_LAYOUT_CONTIGUOUS) == 0) {
    size_t len;
    uint8_t *buf = slurp(path, &len);
    if (buf) put("frame", path, NULL, buf, len, NULL, 0);
    free(buf);
    from_frame(path);
  }
  unlink(path);
  snprintf(path, sizeof path, "%s/b2fs-written-sparse.b2frame", dir);
  if (write_frame(path, B2_LAYOUT_SPARSE) == 0) {
    sparse_dir(path);
    from_frame(path);
  }
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "seeds: cannot remove %s\n", dir);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: seeds FIXTURES OUTDIR\n");
    return 2;
  }
  outdir = argv[2];
  fixlen = strlen(argv[1]);
  static const char *const targets[] = {"chunk", "frame", "sframe", "b2nd", "names"};
  for (size_t i = 0; i < sizeof targets / sizeof *targets; i++) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", outdir, targets[i]);
    if (mkdir(p, 0777) != 0 && errno != EEXIST) { perror(p); return 1; }
  }
  walk(argv[1]);
  written_frames();
  return 0;
}
