/*
 * test_store.c - the store layer without python-blosc2: stores built here
 * as python-blosc2 lays them out (tests/t_store.sh checks the real ones).
 *
 *   .b2e  an EmbedStore frame (typesize 1, 8 KiB chunks, metalayer
 *         b2embed) whose logical bytes hold a b2nd fixture (spanning
 *         chunks), a hole left by a deleted key, and a small SChunk
 *         fixture; estore_metadata also names a C2Array reference;
 *   .b2d  embed.b2e (b2tree, empty map), a/b.b2nd, group attribute
 *         carriers __vlmeta__.b2f and a/__vlmeta__.b2f, decoys (lock
 *         sidecars, a temporary copy of a frame, a non-frame);
 *   .b2z  the same as a zip of stored members, one with a local extra
 *         field, a deflated leaf (left out) and embed.b2e last; then a
 *         deflated embed.b2e and cut archives (refused).
 * Every value must read as the fixture file itself does.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "b2_error.h"
#include "b2_file.h"
#include "b2_ns.h"
#include "b2_store.h"
#include "common/msgpack.h"
#include "common/util.h"
#include "t.h"

#define ARR "b2nd/f64-4d-small.b2nd"
#define SCH "cframe/blosclz-noshuffle-tiny.b2frame"

static char dir[256];

static char *fixpath(const char *rel) {
  static char p[1024];
  snprintf(p, sizeof p, "%s/%s", t_fixtures(), rel);
  return p;
}

static void put_file(const char *path, const void *d, size_t n) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  CHECK(fd >= 0 && write(fd, d, n) == (ssize_t)n);
  close(fd);
}

/* The whole content of a handle. */
static uint8_t *slurp(b2_file *f, size_t *n) {
  *n = (size_t)b2_file_size(f);
  uint8_t *b = malloc(*n + 1);
  CHECK(b && b2_file_pread(f, b, *n, 0) == (ssize_t)*n);
  return b;
}

/* The fixture `rel` in `view`, as b2_file reads the file itself. */
static uint8_t *fixture_view(const char *rel, int view, size_t *n) {
  b2_file *f;
  if (b2_file_open(NULL, fixpath(rel), view, B2_OPEN_RDONLY, &f) < 0) return NULL;
  uint8_t *b = slurp(f, n);
  b2_file_close(f);
  return b;
}

/* Value `key` of s in `view` equals the fixture's. */
static int same_value(b2_store *s, const char *key, const char *rel, int view) {
  int64_t i = b2_store_find(s, key);
  if (i < 0) return 0;
  b2_file *f;
  if (b2_store_open_file(s, NULL, i, view, &f) < 0) return 0;
  size_t n1, n2;
  uint8_t *a = slurp(f, &n1), *b = fixture_view(rel, view, &n2);
  b2_file_close(f);
  int ok = a && b && n1 == n2 && memcmp(a, b, n1) == 0;
  free(a);
  free(b);
  /* The raw frame is the fixture file byte for byte. */
  size_t flen;
  uint8_t *raw = t_read_file(fixpath(rel), &flen);
  uint8_t *got = malloc(flen + 1);
  ok = ok && raw && got && b2_store_raw_size(s, i) == (int64_t)flen &&
       b2_store_pread_raw(s, i, got, flen + 1, 0) == (ssize_t)flen &&
       memcmp(raw, got, flen) == 0;
  free(raw);
  free(got);
  return ok;
}

/* An EmbedStore frame at path: metalayer `flavor`, logical bytes `stream`,
 * index `idx` (msgpack). */
static int make_embed(const char *path, const char *flavor, const uint8_t *stream,
                      size_t n, const uint8_t *idx, size_t ilen) {
  static const uint8_t version[] = {0x81, 0xa7, 'v', 'e', 'r', 's', 'i', 'o', 'n', 0x01};
  b2_env *env;
  if (b2_env_create(NULL, &env) < 0) return -1;
  b2_frame_params p;
  b2_frame_params_default(&p);
  p.cparams.typesize = 1;
  p.chunksize = 8192;
  b2_frame_meta_init m = {flavor, version, sizeof version};
  p.nmeta = 1;
  p.meta = &m;
  unlink(path);
  b2_file *f;
  int rc = b2_file_create(env, path, &p, &f);
  if (rc == 0 && n) rc = b2_file_pwrite(f, stream, n, 0) == (ssize_t)n ? 0 : -1;
  if (rc == 0) rc = b2_frame_vlmeta_set(b2_file_frame(f), "estore_metadata", idx, ilen);
  if (rc == 0) rc = b2_file_close(f);
  b2_env_destroy(env);
  return rc;
}

/* An empty SChunk carrying the vlmetalayer name = value (a carrier). */
static int make_carrier(const char *path, const char *name, const char *value) {
  b2_env *env;
  if (b2_env_create(NULL, &env) < 0) return -1;
  b2_file *f;
  unlink(path);
  int rc = b2_file_create(env, path, NULL, &f);
  uint8_t buf[64];
  b2_mp_writer w;
  b2_mp_writer_init(&w, buf, sizeof buf);
  b2_mp_put_str(&w, value, strlen(value));
  if (rc == 0) rc = b2_frame_vlmeta_set(b2_file_frame(f), name, buf, w.len);
  if (rc == 0) rc = b2_file_close(f);
  b2_env_destroy(env);
  return rc;
}

static void put_entry(b2_mp_writer *w, const char *key, int64_t off, int64_t len) {
  b2_mp_put_str(w, key, strlen(key));
  b2_mp_put_map(w, 2);
  b2_mp_put_str(w, "offset", 6);
  b2_mp_put_int(w, off);
  b2_mp_put_str(w, "length", 6);
  b2_mp_put_int(w, len);
}

static void count_note(void *arg, const char *line) {
  (void)line;
  ++*(int *)arg;
}

/* Position of `name` in listing l, -1 when absent. */
static int listed(const b2_ns_list *l, const char *name, unsigned char type) {
  for (size_t k = 0; k < l->n; k++)
    if (strcmp(l->e[k].shown, name) == 0) return l->e[k].type == type ? (int)k : -1;
  return -1;
}

/* The namespace layer's view of the EmbedStore at path (the keys of
 * test_embed_store): its keys as child nodes of the store's node. */
static void check_ns_keys(const char *path) {
  b2_env *env;
  b2_env_opts o;
  b2_env_opts_default(&o);
  CHECK_EQ(b2_env_create(&o, &env), 0);
  int fd = open(path, O_PATH | O_CLOEXEC);
  b2_ns_store *n = b2_ns_store_new();
  CHECK(fd >= 0 && n != NULL);
  int told = 0;
  b2_ns_store_bind(n, env, fd, 3600, count_note, &told);
  b2_ns_list l = {0};
  CHECK_EQ(b2_ns_store_list(n, NULL, &l), 0);
  CHECK(l.n == 2 && listed(&l, ".", DT_DIR) < 0 && listed(&l, "..", DT_DIR) < 0 &&
        listed(&l, "arr.npy", DT_REG) >= 0 && listed(&l, "dir", DT_DIR) >= 0);
  b2_ns_list_free(&l);
  b2_ns_key *d = NULL, *sc = NULL, *a = NULL, *x = NULL;
  b2_ns_store_file file;
  CHECK_EQ(b2_ns_store_lookup(n, NULL, "dir", &d, &file), 0);
  CHECK(d && b2_ns_key_is_group(d) && strcmp(b2_ns_key_name(d), "/dir") == 0);
  CHECK_EQ(b2_ns_store_list(n, d, &l), 0);
  CHECK(l.n == 1 && listed(&l, "sc", DT_REG) == 0);
  b2_ns_list_free(&l);
  if (d) CHECK_EQ(b2_ns_store_lookup(n, d, "sc", &sc, &file), 0);
  CHECK_EQ(b2_ns_store_lookup(n, NULL, "arr.npy", &a, &file), 0);
  CHECK_EQ(b2_ns_store_lookup(n, NULL, "remote", &x, &file), B2_E_NOENT);
  if (a) CHECK_EQ(b2_ns_store_lookup(n, a, "y", &x, &file), B2_E_NOTDIR);
  CHECK(x == NULL);
  int64_t size = -1, raw = -1;
  if (d) CHECK_EQ(b2_ns_key_size(d, &size, &raw), B2_E_ISDIR);
  size_t wn = 0, sn = 0;
  uint8_t *want = fixture_view(ARR, B2_VIEW_NPY, &wn), *swant = fixture_view(SCH, B2_VIEW_LOGICAL, &sn);
  size_t flen = 0;
  uint8_t *fraw = t_read_file(fixpath(ARR), &flen);
  if (a) {
    CHECK_EQ(b2_ns_key_size(a, &size, &raw), 0);
    CHECK(size == (int64_t)wn && raw == (int64_t)flen);
    b2_ns_value *v = NULL;
    uint8_t *got = malloc(wn + 16);
    CHECK_EQ(b2_ns_key_open(a, &v), 0);
    if (v && got) {
      CHECK_EQ(b2_ns_value_pread(a, v, got, wn + 16, 0), (ssize_t)wn); /* short at the end only */
      CHECK(want && memcmp(got, want, wn) == 0);
      CHECK_EQ(b2_ns_value_pread(a, v, got, 16, (int64_t)wn), 0);
    }
    b2_ns_value_close(v);
    free(got);
  }
  if (sc) {
    CHECK_EQ(b2_ns_key_size(sc, &size, &raw), 0);
    CHECK(size == (int64_t)sn);
  }
  /* the root group's attributes: none in an EmbedStore; a value's frame */
  char list[256];
  CHECK_EQ(b2_ns_key_xattr(n, NULL, "user.b2.nothing", list, sizeof list), B2_E_NOENT);
  CHECK_EQ(told, 0); /* nothing failed */
  b2_ns_key_free(a);
  b2_ns_key_free(sc);
  b2_ns_key_free(d);
  b2_ns_store_free(n);
  free(want);
  free(swant);
  free(fraw);
  if (fd >= 0) close(fd);
  b2_env_destroy(env);
}

static void test_embed_store(void) {
  size_t alen, slen;
  uint8_t *arr = t_read_file(fixpath(ARR), &alen), *sch = t_read_file(fixpath(SCH), &slen);
  if (!arr || !sch) T_SKIP("no fixtures");
  const size_t hole = 100;
  size_t n = alen + hole + slen;
  uint8_t *stream = malloc(n);
  memcpy(stream, arr, alen);
  memset(stream + alen, 0x77, hole); /* a deleted value's bytes */
  memcpy(stream + alen + hole, sch, slen);
  b2_mp_writer w;
  b2_mp_writer_init(&w, NULL, 0);
  b2_mp_put_map(&w, 2);
  b2_mp_put_str(&w, "embed_map", 9);
  b2_mp_put_map(&w, 3);
  put_entry(&w, "/arr", 0, (int64_t)alen);
  put_entry(&w, "/dir/sc", (int64_t)(alen + hole), (int64_t)slen);
  b2_mp_put_str(&w, "/remote", 7);
  b2_mp_put_map(&w, 2);
  b2_mp_put_str(&w, "urlbase", 7);
  b2_mp_put_str(&w, "https://example.org/", 20);
  b2_mp_put_str(&w, "path", 4);
  b2_mp_put_str(&w, "x/y.b2nd", 8);
  b2_mp_put_str(&w, "current_offset", 14);
  b2_mp_put_int(&w, (int64_t)n);
  CHECK_EQ(w.err, 0);
  char path[512];
  snprintf(path, sizeof path, "%s/x.b2e", dir);
  CHECK_EQ(make_embed(path, "b2embed", stream, n, w.buf, w.len), 0);
  CHECK_EQ(b2_store_detect(AT_FDCWD, path), B2_STORE_EMBED);

  b2_store *s;
  CHECK_EQ(b2_store_open(NULL, path, &s), 0);
  if (s) {
    CHECK_EQ(b2_store_stale(s), 0);
    CHECK_EQ(b2_store_flavor(s), B2_STORE_FLAVOR_EMBED);
    int64_t idx[8];
    CHECK_EQ(b2_store_keys(s, idx, 8), 3);
    CHECK(strcmp(b2_store_entry_at(s, idx[0])->key, "/arr") == 0);
    CHECK(strcmp(b2_store_entry_at(s, idx[1])->key, "/dir/sc") == 0);
    CHECK(strcmp(b2_store_entry_at(s, idx[2])->key, "/remote") == 0);
    CHECK_EQ(b2_store_entry_at(s, idx[2])->kind, B2_STORE_REMOTE);
    CHECK(b2_store_entry_at(s, idx[2])->shown == NULL);
    CHECK(same_value(s, "/arr", ARR, B2_VIEW_NPY));
    CHECK(same_value(s, "/arr", ARR, B2_VIEW_LOGICAL));
    CHECK(same_value(s, "/dir/sc", SCH, B2_VIEW_LOGICAL));
    /* The directory view: arr.npy and dir/ at the root, sc inside. */
    int64_t a = b2_store_child(s, 0, "arr.npy"), d = b2_store_child(s, 0, "dir");
    CHECK(a >= 0 && d >= 0 && b2_store_child(s, d, "sc") >= 0);
    CHECK_EQ(b2_store_entry_at(s, 0)->nchildren, 2);
    CHECK_EQ(b2_store_child(s, 0, "remote"), B2_E_NOENT);
    CHECK_EQ(b2_store_find_group(s, "/dir"), d);
    CHECK_EQ(b2_store_find_group(s, "/"), 0);
    CHECK_EQ(b2_store_find_group(s, "/arr"), B2_E_NOENT);
    CHECK_EQ(b2_store_find(s, "/dir"), d);
    check_ns_keys(path);
    /* Replaced by another file of the same name: stale, the old tree
     * still served. */
    char tmp2[600];
    snprintf(tmp2, sizeof tmp2, "%s.new", path);
    put_file(tmp2, "", 0);
    CHECK_EQ(rename(tmp2, path), 0);
    CHECK_EQ(b2_store_stale(s), 1);
    CHECK(same_value(s, "/dir/sc", SCH, B2_VIEW_LOGICAL));
    b2_store_close(s);
  }

  /* Broken indexes fail the store. */
  static const uint8_t past[] = {0x81, 0xa9, 'e', 'm', 'b', 'e', 'd', '_', 'm', 'a', 'p', 0x81,
                                 0xa2, '/', 'a', 0x82, 0xa6, 'o', 'f', 'f', 's', 'e', 't',
                                 0xcd, 0x7f, 0xff, 0xa6, 'l', 'e', 'n', 'g', 't', 'h', 0x01};
  CHECK_EQ(make_embed(path, "b2embed", stream, n, past, sizeof past), 0);
  s = NULL;
  CHECK_EQ(b2_store_open(NULL, path, &s), B2_E_FORMAT);
  CHECK(s == NULL);
  CHECK(strstr(b2_last_detail(), "past the") != NULL);
  CHECK_EQ(make_embed(path, "b2embed", stream, n, past, 20), 0); /* cut short */
  CHECK(b2_store_open(NULL, path, &s) < 0);
  free(w.buf);
  free(stream);
  free(arr);
  free(sch);
}

/* ---- .b2d ------------------------------------------------------------------ */

static const uint8_t empty_idx[] = {0x82, 0xa9, 'e', 'm', 'b', 'e', 'd', '_', 'm', 'a', 'p', 0x80,
                                    0xae, 'c', 'u', 'r', 'r', 'e', 'n', 't', '_', 'o', 'f', 'f',
                                    's', 'e', 't', 0x00};

static void make_dir_store(const char *root) {
  char p[600];
  mkdir(root, 0755);
  snprintf(p, sizeof p, "%s/a", root);
  mkdir(p, 0755);
  snprintf(p, sizeof p, "%s/embed.b2e", root);
  CHECK_EQ(make_embed(p, "b2tree", NULL, 0, empty_idx, sizeof empty_idx), 0);
  size_t alen;
  uint8_t *arr = t_read_file(fixpath(ARR), &alen);
  snprintf(p, sizeof p, "%s/a/b.b2nd", root);
  put_file(p, arr, alen);
  snprintf(p, sizeof p, "%s/x.b2nd.1.tmp", root); /* a whole frame, but staging */
  put_file(p, arr, alen);
  free(arr);
  snprintf(p, sizeof p, "%s/a/b.b2nd.b2lock", root);
  put_file(p, "", 0);
  snprintf(p, sizeof p, "%s/embed.b2e.b2lock", root);
  put_file(p, "", 0);
  snprintf(p, sizeof p, "%s/notes.txt", root);
  put_file(p, "hello\n", 6);
  snprintf(p, sizeof p, "%s/__vlmeta__.b2f", root);
  CHECK_EQ(make_carrier(p, "k", "root attr"), 0);
  snprintf(p, sizeof p, "%s/a/__vlmeta__.b2f", root);
  CHECK_EQ(make_carrier(p, "x", "group attr"), 0);
}

static void check_tree(b2_store *s) {
  CHECK_EQ(b2_store_flavor(s), B2_STORE_FLAVOR_TREE);
  int64_t idx[8];
  CHECK_EQ(b2_store_keys(s, idx, 8), 2); /* /a (a group: a TreeStore) and /a/b */
  CHECK(strcmp(b2_store_entry_at(s, idx[0])->key, "/a") == 0);
  CHECK(strcmp(b2_store_entry_at(s, idx[1])->key, "/a/b") == 0);
  CHECK(same_value(s, "/a/b", ARR, B2_VIEW_NPY));
  CHECK_EQ(b2_store_entry_at(s, 0)->nchildren, 1); /* decoys not shown */
  int64_t a = b2_store_child(s, 0, "a");
  CHECK(a > 0 && b2_store_child(s, a, "b.npy") > 0);
  CHECK_EQ(b2_store_entry_at(s, a)->nchildren, 1);
  /* Group attributes from the carriers. */
  char list[256], val[64];
  ssize_t n = b2_store_xattr_list(s, 0, list, sizeof list);
  CHECK(n == (ssize_t)sizeof "user.b2.vlmeta.k" && strcmp(list, "user.b2.vlmeta.k") == 0);
  n = b2_store_xattr_get(s, 0, "user.b2.vlmeta.k", val, sizeof val);
  CHECK(n == 10 && (uint8_t)val[0] == 0xa9 && memcmp(val + 1, "root attr", 9) == 0);
  CHECK_EQ(b2_store_xattr_get(s, a, "user.b2.vlmeta.x", NULL, 0), 11);
  CHECK_EQ(b2_store_xattr_get(s, a, "user.b2.vlmeta.k", val, sizeof val), B2_E_NOENT);
  CHECK_EQ(b2_store_xattr_get(s, 0, "user.b2.vlmeta.k", val, 3), B2_E_RANGE);
}

static void test_dir_store(void) {
  if (access(fixpath(ARR), R_OK) != 0) T_SKIP("no fixtures");
  char root[300];
  snprintf(root, sizeof root, "%s/t.b2d", dir);
  make_dir_store(root);
  CHECK_EQ(b2_store_detect(AT_FDCWD, root), B2_STORE_DIR);
  b2_store *s;
  CHECK_EQ(b2_store_open(NULL, root, &s), 0);
  if (s) {
    check_tree(s);
    /* Changes: none yet; a file added in a group; embed.b2e rewritten. */
    CHECK_EQ(b2_store_stale(s), 0);
    char p2[600];
    snprintf(p2, sizeof p2, "%s/a/new.b2f", root);
    put_file(p2, "x", 1);
    CHECK_EQ(b2_store_stale(s), 1);
    b2_store_close(s);
    unlink(p2);
    CHECK_EQ(b2_store_open(NULL, root, &s), 0);
    CHECK_EQ(b2_store_stale(s), 0);
    snprintf(p2, sizeof p2, "%s/embed.b2e", root);
    size_t elen;
    uint8_t *eb = t_read_file(p2, &elen);
    usleep(10000); /* a later mtime */
    put_file(p2, eb, elen);
    free(eb);
    CHECK_EQ(b2_store_stale(s), 1);
    b2_store_close(s);
  }
  /* A CTable kept as a subtree (found by its _meta's vlmeta kind, without
   * a registry): one key for python, a directory under the mount. */
  char p[600];
  snprintf(p, sizeof p, "%s/c", root);
  mkdir(p, 0755);
  snprintf(p, sizeof p, "%s/c/_meta.b2f", root);
  CHECK_EQ(make_carrier(p, "kind", "ctable"), 0);
  size_t alen;
  uint8_t *arr = t_read_file(fixpath(ARR), &alen);
  snprintf(p, sizeof p, "%s/c/v.b2nd", root);
  put_file(p, arr, alen);
  free(arr);
  CHECK_EQ(b2_store_open(NULL, root, &s), 0);
  if (s) {
    int64_t idx[8];
    CHECK_EQ(b2_store_keys(s, idx, 8), 3); /* /a, /a/b, /c */
    int64_t c = b2_store_find(s, "/c");
    CHECK(c > 0 && b2_store_entry_at(s, c)->object_root &&
          !strcmp(b2_store_entry_at(s, c)->objkind, "ctable"));
    CHECK(c > 0 && b2_store_child(s, c, "v.npy") > 0);
    b2_store_close(s);
  }
  unlink(p);
  snprintf(p, sizeof p, "%s/c/_meta.b2f", root);
  unlink(p);
  snprintf(p, sizeof p, "%s/c", root);
  rmdir(p);
  /* A leaf whose frame is damaged stays listed and fails alone. */
  snprintf(p, sizeof p, "%s/a/b.b2nd", root);
  CHECK_EQ(truncate(p, 100), 0);
  CHECK_EQ(b2_store_open(NULL, root, &s), 0);
  if (s) {
    int64_t i = b2_store_find(s, "/a/b");
    CHECK(i > 0 && b2_store_entry_at(s, i)->error != NULL);
    b2_frame *f;
    CHECK(b2_store_open_frame(s, i, &f) < 0);
    b2_store_close(s);
  }
  /* Without embed.b2e it is not a store. */
  snprintf(p, sizeof p, "%s/embed.b2e", root);
  unlink(p);
  CHECK_EQ(b2_store_detect(AT_FDCWD, root), B2_STORE_NONE);
  CHECK(b2_store_open(NULL, root, &s) < 0);
}

/* ---- .b2z ------------------------------------------------------------------ */

typedef struct zmember {
  const char *name;
  const uint8_t *data;
  size_t len;
  int method;
  size_t extra; /* bytes of local extra field */
} zmember;

static uint8_t *make_zip(const zmember *m, int n, size_t *outlen) {
  size_t cap = 1024;
  for (int i = 0; i < n; i++) cap += 2 * (46 + strlen(m[i].name)) + m[i].extra + m[i].len;
  uint8_t *z = calloc(1, cap), *p = z;
  uint32_t lho[16];
  for (int i = 0; i < n; i++) {
    size_t nl = strlen(m[i].name);
    lho[i] = (uint32_t)(p - z);
    b2_put_le32(p, 0x04034b50);
    p[4] = 20;
    p[8] = (uint8_t)m[i].method;
    b2_put_le32(p + 18, (uint32_t)m[i].len);
    b2_put_le32(p + 22, (uint32_t)(m[i].method ? m[i].len * 2 : m[i].len));
    p[26] = (uint8_t)nl;
    p[28] = (uint8_t)m[i].extra;
    memcpy(p + 30, m[i].name, nl);
    memset(p + 30 + nl, 0xee, m[i].extra);
    p += 30 + nl + m[i].extra;
    memcpy(p, m[i].data, m[i].len);
    p += m[i].len;
  }
  uint8_t *cd = p;
  for (int i = 0; i < n; i++) {
    size_t nl = strlen(m[i].name);
    b2_put_le32(p, 0x02014b50);
    p[4] = p[6] = 20;
    p[10] = (uint8_t)m[i].method;
    b2_put_le32(p + 20, (uint32_t)m[i].len);
    b2_put_le32(p + 24, (uint32_t)(m[i].method ? m[i].len * 2 : m[i].len));
    p[28] = (uint8_t)nl;
    b2_put_le32(p + 42, lho[i]);
    memcpy(p + 46, m[i].name, nl);
    p += 46 + nl;
  }
  b2_put_le32(p, 0x06054b50);
  p[8] = p[10] = (uint8_t)n;
  b2_put_le32(p + 12, (uint32_t)(p - cd));
  b2_put_le32(p + 16, (uint32_t)(cd - z));
  p += 22;
  *outlen = (size_t)(p - z);
  return z;
}

static void test_zip_store(void) {
  if (access(fixpath(ARR), R_OK) != 0) T_SKIP("no fixtures");
  char root[300], p[600];
  snprintf(root, sizeof root, "%s/z.b2d", dir);
  make_dir_store(root);
  size_t alen, elen, c1, c2, sl;
  snprintf(p, sizeof p, "%s/embed.b2e", root);
  uint8_t *emb = t_read_file(p, &elen);
  snprintf(p, sizeof p, "%s/__vlmeta__.b2f", root);
  uint8_t *car = t_read_file(p, &c1);
  snprintf(p, sizeof p, "%s/a/__vlmeta__.b2f", root);
  uint8_t *car2 = t_read_file(p, &c2);
  uint8_t *arr = t_read_file(fixpath(ARR), &alen), *sch = t_read_file(fixpath(SCH), &sl);
  zmember m[] = {
      {"a/b.b2nd", arr, alen, 0, 9},   /* a local extra field the directory lacks */
      {"c.b2f", sch, sl, 8, 0},        /* deflated: left out */
      {"__vlmeta__.b2f", car, c1, 0, 0},
      {"a/__vlmeta__.b2f", car2, c2, 0, 4},
      {"embed.b2e", emb, elen, 0, 0},  /* last, as python-blosc2 writes it */
  };
  size_t zlen;
  uint8_t *z = make_zip(m, 5, &zlen);
  snprintf(p, sizeof p, "%s/t.b2z", dir);
  put_file(p, z, zlen);
  CHECK_EQ(b2_store_detect(AT_FDCWD, p), B2_STORE_ZIP);
  b2_store *s;
  CHECK_EQ(b2_store_open(NULL, p, &s), 0);
  if (s) {
    check_tree(s);
    CHECK_EQ(b2_store_nnotes(s), 1);
    CHECK(b2_store_nnotes(s) == 1 && strstr(b2_store_note(s, 0), "c.b2f") != NULL);
    b2_store_close(s);
  }
  /* Every cut of the archive is refused or, where the directory survives,
   * opens; nothing crashes or reads out of bounds. */
  int refused = 0;
  for (size_t cut = 0; cut < zlen; cut += 1 + cut / 16) {
    put_file(p, z, cut);
    if (b2_store_open(NULL, p, &s) < 0) refused++;
    else b2_store_close(s);
  }
  CHECK(refused > 0);
  free(z);
  /* A name twice in the directory: the last one counts, as in python's map. */
  zmember dup[] = {{"a/b.b2nd", sch, sl, 0, 0}, m[0], m[2], m[3], m[4]};
  z = make_zip(dup, 5, &zlen);
  put_file(p, z, zlen);
  CHECK_EQ(b2_store_open(NULL, p, &s), 0);
  if (s) {
    check_tree(s);
    b2_store_close(s);
  }
  free(z);
  /* A deflated embed.b2e makes the store unreadable. */
  m[4].method = 8;
  z = make_zip(m, 5, &zlen);
  put_file(p, z, zlen);
  CHECK_EQ(b2_store_open(NULL, p, &s), B2_E_FORMAT);
  CHECK(strstr(b2_last_detail(), "embed.b2e is compressed") != NULL);
  free(z);
  /* No embed.b2e at all. */
  z = make_zip(m, 4, &zlen);
  put_file(p, z, zlen);
  CHECK_EQ(b2_store_open(NULL, p, &s), B2_E_FORMAT);
  free(z);
  free(emb);
  free(car);
  free(car2);
  free(arr);
  free(sch);
}

static void test_names(void) {
  CHECK_EQ(b2_store_detect(AT_FDCWD, "/nonexistent.b2z"), B2_STORE_NONE);
  b2_store *s;
  CHECK_EQ(b2_store_open(NULL, "/etc/passwd", &s), B2_E_INVAL);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/test_store.%d", (int)getpid());
  mkdir(dir, 0755);
  T_RUN(test_embed_store);
  T_RUN(test_dir_store);
  T_RUN(test_zip_store);
  T_RUN(test_names);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "  cannot remove %s\n", dir);
  T_END();
}
