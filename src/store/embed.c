/*
 * embed.c - the index of an EmbedStore: the vlmetalayer `estore_metadata`,
 * msgpack {"embed_map": {KEY: {"offset": int, "length": int} |
 * {"urlbase": str, "path": str}}, "current_offset": int} (keys of the maps
 * in any order; unknown ones skipped).  Every value is checked before use:
 * offsets and lengths against the logical size of the EmbedStore.
 */
#include <stdlib.h>
#include <string.h>

#include "b2_error.h"
#include "common/msgpack.h"
#include "store/store_impl.h"

void b2_embed_free(b2_embed_item *it, int64_t n) {
  if (!it) return;
  for (int64_t i = 0; i < n; i++) free(it[i].key);
  free(it);
}

static int str_is(const uint8_t *s, uint32_t n, const char *lit) {
  return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

/* One entry's map. */
static int parse_entry(b2_mp_reader *r, b2_embed_item *it, int64_t nbytes) {
  uint32_t n;
  int rc = b2_mp_read_map(r, &n);
  if (rc < 0) return rc;
  int have_off = 0, have_len = 0;
  for (uint32_t k = 0; k < n; k++) {
    const uint8_t *name;
    uint32_t nlen;
    rc = b2_mp_read_str(r, &name, &nlen);
    if (rc < 0) return rc;
    if (str_is(name, nlen, "offset") || str_is(name, nlen, "length")) {
      int64_t v;
      rc = b2_mp_read_int(r, &v);
      if (rc < 0) return rc;
      if (v < 0) return b2_fail(B2_E_FORMAT, "negative %.*s", (int)nlen, name);
      if (name[0] == 'o') {
        it->offset = v;
        have_off = 1;
      } else {
        it->length = v;
        have_len = 1;
      }
    } else {
      if (str_is(name, nlen, "urlbase")) it->remote = 1;
      rc = b2_mp_skip(r);
      if (rc < 0) return rc;
    }
  }
  if (it->remote) return 0;
  if (!have_off || !have_len)
    return b2_fail(B2_E_FORMAT, "entry without offset and length");
  if (it->offset > nbytes || it->length > nbytes - it->offset)
    return b2_fail(B2_E_FORMAT, "bytes [%lld, +%lld) lie past the %lld "
                   "bytes of the store", (long long)it->offset,
                   (long long)it->length, (long long)nbytes);
  return 0;
}

static int parse_map(b2_mp_reader *r, int64_t nbytes, b2_embed_item **out,
                     int64_t *count) {
  uint32_t n;
  int rc = b2_mp_read_map(r, &n);
  if (rc < 0) return rc;
  /* Each entry takes at least a few bytes: n is bounded by the buffer. */
  if (n > B2_STORE_MAX_LEAVES)
    return b2_fail(B2_E_LIMIT, "%u keys (at most %d)", n, B2_STORE_MAX_LEAVES);
  if ((size_t)n > r->len - r->pos)
    return b2_fail(B2_E_TRUNCATED, "%u keys in %zu bytes", n, r->len - r->pos);
  b2_embed_item *it = calloc(n ? n : 1, sizeof *it);
  if (!it) return b2_fail(B2_E_NOMEM, "out of memory");
  uint32_t k = 0;
  for (; k < n; k++) {
    const uint8_t *key;
    uint32_t klen;
    rc = b2_mp_read_str(r, &key, &klen);
    if (rc < 0) break;
    it[k].key = malloc((size_t)klen + 1);
    if (!it[k].key) {
      rc = b2_fail(B2_E_NOMEM, "out of memory");
      break;
    }
    memcpy(it[k].key, key, klen);
    it[k].key[klen] = 0;
    rc = parse_entry(r, &it[k], nbytes);
    if (rc < 0) {
      rc = b2_context(rc, "key %.*s", (int)(klen > 200 ? 200 : klen), key);
      k++;
      break;
    }
  }
  if (rc < 0) {
    b2_embed_free(it, k);
    return rc;
  }
  *out = it;
  *count = n;
  return 0;
}

/* Move r, inside a map with *left entries to go, past the entries before
 * the next one named `key`, to its value: 1, 0 at the map's end, or a
 * code. */
static int seek_key(b2_mp_reader *r, uint32_t *left, const char *key) {
  while (*left > 0) {
    const uint8_t *name;
    uint32_t nlen;
    --*left;
    int rc = b2_mp_read_str(r, &name, &nlen);
    if (rc == 0 && str_is(name, nlen, key)) return 1;
    if (rc == 0) rc = b2_mp_skip(r);
    if (rc < 0) return rc;
  }
  return 0;
}

/* Move r to the value of the index's first "embed_map". */
static int seek_map(b2_mp_reader *r) {
  uint32_t n;
  int rc = b2_mp_read_map(r, &n);
  if (rc == 0) rc = seek_key(r, &n, "embed_map");
  return rc < 0 ? rc : rc == 1 ? 0 : b2_fail(B2_E_FORMAT, "no embed_map");
}

int b2_embed_parse(const uint8_t *buf, size_t len, int64_t nbytes,
                   b2_embed_item **out, int64_t *count) {
  *out = NULL;
  *count = 0;
  b2_mp_reader r;
  b2_mp_reader_init(&r, buf, len);
  int rc = seek_map(&r);
  if (rc == 0) rc = parse_map(&r, nbytes, out, count);
  if (rc < 0) {
    b2_embed_free(*out, *count);
    *out = NULL;
    *count = 0;
    return b2_context(rc, "estore_metadata");
  }
  return 0;
}

int b2_embed_rekey(const uint8_t *in, size_t len, const char *key, const char *newkey,
                   uint8_t **out, size_t *outlen) {
  *out = NULL;
  *outlen = 0;
  b2_mp_reader r;
  b2_mp_reader_init(&r, in, len);
  b2_mp_item h;
  int rc = seek_map(&r);
  if (rc == 0) rc = b2_mp_next(&r, &h);
  if (rc == 0 && h.kind != B2_MP_MAP) rc = b2_fail(B2_E_FORMAT, "embed_map is no map");
  /* Where the entry of key lies (its key ends at kend), and newkey's. */
  size_t body = r.pos, at[2] = {0, 0}, end[2] = {0, 0}, kend = 0;
  int found[2] = {0, 0};
  for (uint32_t k = 0; rc == 0 && k < h.len; k++) {
    size_t start = r.pos, ke;
    const uint8_t *name;
    uint32_t nlen;
    rc = b2_mp_read_str(&r, &name, &nlen);
    ke = r.pos;
    if (rc == 0) rc = b2_mp_skip(&r);
    int which = rc < 0                                         ? -1
                : !found[0] && str_is(name, nlen, key)          ? 0
                : newkey && !found[1] && str_is(name, nlen, newkey) ? 1
                                                               : -1;
    if (which < 0) continue;
    found[which] = 1;
    at[which] = start;
    end[which] = r.pos;
    if (which == 0) kend = ke;
  }
  if (rc < 0) return b2_context(rc, "estore_metadata");
  if (!found[0]) return b2_fail(B2_E_NOENT, "%s: not in the EmbedStore", key);
  /* The same map, less newkey's old entry, key's entry renamed or gone;
   * the count keeps its format (python reads any). */
  uint32_t count = h.len - (newkey ? 0u : 1u) - (uint32_t)found[1];
  b2_mp_writer w;
  b2_mp_writer_init(&w, NULL, 0);
  b2_mp_put_raw(&w, in, h.pos);
  if (h.marker == 0xdf) {
    uint8_t b[5] = {0xdf, (uint8_t)(count >> 24), (uint8_t)(count >> 16), (uint8_t)(count >> 8),
                    (uint8_t)count};
    b2_mp_put_raw(&w, b, sizeof b);
  } else if (h.marker == 0xde) {
    b2_mp_put_map16(&w, (uint16_t)count);
  } else {
    b2_mp_put_map(&w, count); /* a fixmap: fewer entries still fit */
  }
  int first = !found[1] || at[0] < at[1] ? 0 : 1;
  size_t pos = body;
  for (int s = 0; s < 2; s++) {
    int which = s == 0 ? first : !first;
    if (!found[which]) continue;
    b2_mp_put_raw(&w, in + pos, at[which] - pos);
    if (which == 0 && newkey) {
      b2_mp_put_str(&w, newkey, strlen(newkey));
      b2_mp_put_raw(&w, in + kend, end[0] - kend);
    }
    pos = end[which];
  }
  b2_mp_put_raw(&w, in + pos, len - pos);
  if (w.err) {
    rc = w.err;
    b2_mp_writer_free(&w);
    return b2_fail(rc, "estore_metadata: out of memory");
  }
  *out = w.buf;
  *outlen = w.len;
  return 0;
}

/* Whether the map at r (an entry of the registry) says kind "ctable". */
static int is_ctable(b2_mp_reader *r, int *yes) {
  uint32_t n;
  int rc = b2_mp_read_map(r, &n);
  *yes = 0;
  while (rc == 0 && (rc = seek_key(r, &n, "kind")) == 1) {
    const uint8_t *v;
    uint32_t vlen;
    rc = b2_mp_read_str(r, &v, &vlen);
    if (rc == 0) *yes = str_is(v, vlen, "ctable");
  }
  return rc;
}

int b2_embed_roots(const uint8_t *buf, size_t len, char ***roots, int *count) {
  *roots = NULL;
  *count = 0;
  b2_mp_reader r;
  b2_mp_reader_init(&r, buf, len);
  uint32_t n;
  int rc = b2_mp_read_map(&r, &n);
  if (rc == 0 && n > B2_STORE_MAX_ROOTS)
    rc = b2_fail(B2_E_LIMIT, "%u object roots (at most %d)", n, B2_STORE_MAX_ROOTS);
  char **out = rc == 0 ? calloc(n ? n : 1, sizeof *out) : NULL;
  if (rc == 0 && !out) rc = b2_fail(B2_E_NOMEM, "out of memory");
  int got = 0;
  for (uint32_t k = 0; rc == 0 && k < n; k++) {
    const uint8_t *key;
    uint32_t klen;
    int yes;
    rc = b2_mp_read_str(&r, &key, &klen);
    if (rc == 0) rc = is_ctable(&r, &yes);
    if (rc == 0 && yes) {
      out[got] = malloc((size_t)klen + 1);
      if (!out[got]) {
        rc = b2_fail(B2_E_NOMEM, "out of memory");
        break;
      }
      memcpy(out[got], key, klen);
      out[got++][klen] = 0;
    }
  }
  if (rc < 0) {
    for (int k = 0; k < got; k++) free(out[k]);
    free(out);
    return b2_context(rc, "_object_registry");
  }
  *roots = out;
  *count = got;
  return 0;
}
