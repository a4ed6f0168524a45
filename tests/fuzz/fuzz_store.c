/* fuzz_store.c - libFuzzer target: python-blosc2 stores.  The first byte
 * picks what the rest is: 0 the msgpack `estore_metadata` index alone
 * (b2_embed_parse against a logical size taken from the next byte; an
 * index that parses has its first key removed and renamed by
 * b2_embed_rekey, whose output must parse again), 1 a
 * .b2e file, else a .b2z file.  A store that opens is walked whole: every
 * entry looked up by key and by shown name, every leaf opened and its first
 * bytes read in each view, raw bytes read, group attributes listed. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "b2_error.h"
#include "b2_store.h"
#include "store/store_impl.h"

static char dir[64];

static void cleanup(void) {
  char p[96];
  snprintf(p, sizeof p, "%s/s.b2e", dir);
  unlink(p);
  snprintf(p, sizeof p, "%s/s.b2z", dir);
  unlink(p);
  rmdir(dir);
}

/* The input goes to a file named like a store, in a directory of its own. */
static void setup(void) {
  if (dir[0]) return;
  snprintf(dir, sizeof dir, "/tmp/fuzz_store.%d", (int)getpid());
  mkdir(dir, 0700);
  atexit(cleanup);
}

static void walk(b2_store *s) {
  int64_t n = b2_store_count(s);
  char buf[4096];
  for (int64_t i = 0; i < n; i++) {
    const b2_store_entry *e = b2_store_entry_at(s, i);
    if (!e) abort();
    if (b2_store_find(s, e->key) < 0) abort(); /* every key is found */
    if (e->shown && b2_store_child(s, e->parent, e->shown) != i) abort();
    if (e->kind == B2_STORE_GROUP) {
      ssize_t k = b2_store_xattr_list(s, i, NULL, 0);
      if (k > 0 && k <= (ssize_t)sizeof buf && b2_store_xattr_list(s, i, buf, sizeof buf) != k)
        abort();
      continue;
    }
    b2_store_pread_raw(s, i, buf, sizeof buf, 0);
    for (int view = B2_VIEW_LOGICAL; view <= B2_VIEW_NPY; view++) {
      b2_file *f;
      if (b2_store_open_file(s, NULL, i, view, &f) < 0) continue;
      b2_file_pread(f, buf, sizeof buf, 0);
      b2_file_close(f);
    }
  }
  int64_t nk = b2_store_keys(s, NULL, 0);
  if (nk < 0 || nk > n) abort();
}

/* The index in (n entries, the first `key`) with key removed, then renamed:
 * what b2_embed_rekey writes parses again, with one entry less, or the
 * new key among the same number (one less when it replaced an entry). */
static void rekey(const uint8_t *in, size_t len, int64_t nbytes, const char *key, int64_t n) {
  static const char *const newkey = "/fuzz-new";
  for (int rename = 0; rename < 2; rename++) {
    uint8_t *out;
    size_t olen;
    if (b2_embed_rekey(in, len, key, rename ? newkey : NULL, &out, &olen) < 0) continue;
    b2_embed_item *it;
    int64_t m;
    if (b2_embed_parse(out, olen, nbytes, &it, &m) < 0) abort();
    int found = 0;
    for (int64_t k = 0; k < m; k++) found += strcmp(it[k].key, newkey) == 0;
    if (rename ? !found || (m != n && m != n - 1) : m != n - 1) abort();
    b2_embed_free(it, m);
    free(out);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  if (data[0] == 0) {
    b2_embed_item *it;
    int64_t n;
    if (b2_embed_parse(data + 2, size - 2, (int64_t)data[1] << 8, &it, &n) == 0) {
      if (n > 0) rekey(data + 2, size - 2, (int64_t)data[1] << 8, it[0].key, n);
      b2_embed_free(it, n);
    }
    return 0;
  }
  setup();
  char path[96];
  snprintf(path, sizeof path, "%s/s.%s", dir, data[0] == 1 ? "b2e" : "b2z");
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return 0;
  ssize_t w = write(fd, data + 1, size - 1);
  close(fd);
  if (w != (ssize_t)(size - 1)) return 0;
  b2_store *s;
  if (b2_store_open(NULL, path, &s) == 0) {
    walk(s);
    b2_store_close(s);
  }
  return 0;
}
