/*
 * names.c - the source-name <-> shown-name mapping (see b2_ns.h).
 *
 * For a shown name M the source names that may be shown as M are, in
 * priority order: STEM.b2nd (when M is STEM.npy), M.b2frame, M.b2f, M.b2,
 * then the stores M.b2d, M.b2z, M.b2e.
 * An entry shows itself under its own name unless it is a frame that takes
 * its short name.  A frame S takes its short name M when no entry shows
 * itself as M and no candidate of M ahead of S exists; the reverse
 * direction takes the first existing candidate of M when it is a frame and
 * no entry shows itself as M.  These two rules are each other's inverse, so
 * shown names are unique.  ("a.b2frame" stored beside a frame that shows
 * as "a" is named "a.b2frame.b2frame": the entry named M is not shown as M.)
 * Deciding whether M shows itself looks at M's own short name, so the rule
 * recurses once per suffix M carries; each step strips one.
 */
#include "b2_ns.h"

#include <string.h>

#include "b2_error.h"

static const struct {
  const char *suffix;
  int kind;
} suffixes[] = {
    {".b2frame", B2_NS_LOGICAL},
    {".b2f", B2_NS_LOGICAL},
    {".b2", B2_NS_LOGICAL},
    {".b2nd", B2_NS_NPY},
    {".b2d", B2_NS_STORE},
    {".b2z", B2_NS_STORE},
    {".b2e", B2_NS_STORE},
};
#define NSUFFIXES (sizeof suffixes / sizeof suffixes[0])
#define NPY_EXT ".npy"
#define MAX_CANDIDATES 7

static int stem_ok(const char *s, size_t n) {
  if (n == 0) return 0;
  if (n == 1 && s[0] == '.') return 0;
  if (n == 2 && s[0] == '.' && s[1] == '.') return 0;
  return 1;
}

int b2_ns_name_kind(const char *src, size_t *stem_len) {
  size_t n = strlen(src);
  for (size_t i = 0; i < NSUFFIXES; i++) {
    size_t k = strlen(suffixes[i].suffix);
    if (n > k && memcmp(src + n - k, suffixes[i].suffix, k) == 0 &&
        stem_ok(src, n - k)) {
      if (stem_len) *stem_len = n - k;
      return suffixes[i].kind;
    }
  }
  if (stem_len) *stem_len = n;
  return B2_NS_PLAIN;
}

/* Join a and b into out; 0, or -1 when longer than B2_NS_NAME_MAX. */
static int join(char *out, const char *a, size_t alen, const char *b) {
  size_t blen = strlen(b);
  if (alen + blen > B2_NS_NAME_MAX) return -1;
  memcpy(out, a, alen);
  memcpy(out + alen, b, blen + 1);
  return 0;
}

/* Candidate source names of shown name m, in priority order. */
static int candidates(const char *m, char out[MAX_CANDIDATES][B2_NS_NAME_MAX + 1]) {
  size_t n = strlen(m);
  int k = 0;
  size_t e = sizeof NPY_EXT - 1;
  if (n > e && memcmp(m + n - e, NPY_EXT, e) == 0 && stem_ok(m, n - e) &&
      join(out[k], m, n - e, ".b2nd") == 0)
    k++;
  if (!stem_ok(m, n)) return k;
  for (size_t i = 0; i < NSUFFIXES; i++)
    if ((suffixes[i].kind == B2_NS_LOGICAL || suffixes[i].kind == B2_NS_STORE) &&
        join(out[k], m, n, suffixes[i].suffix) == 0)
      k++;
  return k;
}

/* Short name of a frame source name, or -1 when it has none. */
static int short_name(const char *src, char *out) {
  size_t stem;
  int kind = b2_ns_name_kind(src, &stem);
  if (kind == B2_NS_PLAIN) return -1;
  return join(out, src, stem, kind == B2_NS_NPY ? NPY_EXT : "");
}

static int copy_out(char *out, size_t cap, const char *s) {
  size_t n = strlen(s);
  if (n + 1 > cap) return B2_E_NAMETOOLONG;
  memcpy(out, s, n + 1);
  return 0;
}

/* Is the existing entry `name` (probe result p) shown under its own name?
 * 1, 0, or a probe's code. */
static int shows_itself(const char *name, int p, b2_ns_probe_fn probe, void *ctx) {
  char back[B2_NS_NAME_MAX + 1];
  if (p == B2_NS_ABSENT) return 0;
  if (p != B2_NS_FRAME) return 1;
  int rc = b2_ns_name_to_shown(name, 1, probe, ctx, back, sizeof back);
  return rc < 0 ? rc : strcmp(back, name) == 0;
}

int b2_ns_name_to_shown(const char *src, int is_frame, b2_ns_probe_fn probe,
                       void *ctx, char *out, size_t cap) {
  char shrt[B2_NS_NAME_MAX + 1];
  if (!is_frame || strlen(src) > B2_NS_NAME_MAX || short_name(src, shrt) < 0)
    return copy_out(out, cap, src);
  int p = probe(ctx, shrt);
  if (p < 0) return p;
  p = shows_itself(shrt, p, probe, ctx);
  if (p != 0) return p < 0 ? p : copy_out(out, cap, src);
  char cand[MAX_CANDIDATES][B2_NS_NAME_MAX + 1];
  int nc = candidates(shrt, cand);
  for (int i = 0; i < nc; i++) {
    if (strcmp(cand[i], src) == 0) return copy_out(out, cap, shrt);
    p = probe(ctx, cand[i]);
    if (p < 0) return p;
    if (p != B2_NS_ABSENT) break; /* a sibling ahead of src takes the name */
  }
  return copy_out(out, cap, src);
}

int b2_ns_shown_npy(const char *shown) {
  size_t n = strlen(shown), e = sizeof NPY_EXT - 1;
  return n > e && memcmp(shown + n - e, NPY_EXT, e) == 0;
}

/* Does s (n bytes) end in e, after a stem of its own? */
static int ends_in(const char *s, size_t n, const char *e) {
  size_t k = strlen(e);
  return n > k && memcmp(s + n - k, e, k) == 0 && stem_ok(s, n - k);
}

int b2_ns_npy_names(const char *src, int store, char *array, char *kept, char *shown,
                    size_t cap) {
  /* The array's suffix and the kept bytes' (NAME.npy + the plain frame's
   * suffix: outside stores B2_NS_NEW_SUFFIX, in one python-blosc2's
   * SChunk's; header constants only: this file links alone). */
  const char *atail = store ? B2_STORE_NDARRAY_SUFFIX : ".b2nd";
  const char *tail = store ? NPY_EXT B2_STORE_SCHUNK_SUFFIX : NPY_EXT B2_NS_NEW_SUFFIX;
  size_t n = strlen(src), stem;
  int kind = store ? B2_NS_PLAIN : b2_ns_name_kind(src, &stem);
  if ((store || kind == B2_NS_LOGICAL) && ends_in(src, n, tail)) {
    kind = B2_NS_LOGICAL;
    stem = n - strlen(tail);
  } else if (store && ends_in(src, n, atail)) {
    kind = B2_NS_NPY;
    stem = n - strlen(atail);
  } else if (kind != B2_NS_NPY) {
    return 0;
  }
  /* (each name asked for, into a buffer of its own first: src may be one) */
  const char *ends[3] = {atail, tail, NPY_EXT};
  char *outs[3] = {array, kept, shown}, names[3][B2_NS_NAME_MAX + 1];
  for (int i = 0; i < 3; i++)
    if (outs[i] && (join(names[i], src, stem, ends[i]) < 0 || cap < strlen(names[i]) + 1))
      return 0;
  for (int i = 0; i < 3; i++)
    if (outs[i]) memcpy(outs[i], names[i], strlen(names[i]) + 1);
  return kind;
}

int b2_ns_name_to_source(const char *shown, b2_ns_probe_fn probe, void *ctx,
                        char *out, size_t cap) {
  if (strlen(shown) > B2_NS_NAME_MAX) return B2_E_NAMETOOLONG; /* as any file system */
  int self = probe(ctx, shown);
  if (self < 0) return self;
  int own = shows_itself(shown, self, probe, ctx);
  if (own < 0) return own;
  if (own) {
    int rc = copy_out(out, cap, shown);
    if (rc < 0) return rc;
    return self == B2_NS_FRAME ? b2_ns_name_kind(shown, NULL) : B2_NS_PLAIN;
  }
  /* No entry shows itself as `shown`: only a frame's short name can be. */
  char cand[MAX_CANDIDATES][B2_NS_NAME_MAX + 1];
  int nc = candidates(shown, cand);
  for (int i = 0; i < nc; i++) {
    int p = probe(ctx, cand[i]);
    if (p < 0) return p;
    if (p == B2_NS_ABSENT) continue;
    if (p != B2_NS_FRAME) break;
    int rc = copy_out(out, cap, cand[i]);
    return rc < 0 ? rc : b2_ns_name_kind(cand[i], NULL);
  }
  return B2_E_NOENT;
}

/* ---- changing a directory ---------------------------------------------- */

#define TMP_SUFFIX ".b2tmp"
#define SPARSE_TMP "chunks.b2frame.tmp"
#define LOCK_SUFFIX ".b2lock" /* the reference library's lock sidecars */

int b2_ns_name_hidden(const char *src) {
  size_t n = strlen(src), k = sizeof TMP_SUFFIX - 1, l = sizeof LOCK_SUFFIX - 1;
  if (strcmp(src, SPARSE_TMP) == 0) return 1;
  if (n >= l && memcmp(src + n - l, LOCK_SUFFIX, l) == 0) return 1; /* lock sidecars (".b2lock" in a sparse frame) */
  return src[0] == '.' && n > k + 1 && memcmp(src + n - k, TMP_SUFFIX, k) == 0;
}

const char *b2_ns_name_suffix(const char *src) {
  size_t stem;
  if (b2_ns_name_kind(src, &stem) == B2_NS_PLAIN) return src + strlen(src);
  return src + stem;
}

int b2_ns_name_target(int kind, const char *suffix, const char *shown,
                     char *out, size_t cap) {
  char buf[B2_NS_NAME_MAX + 1];
  size_t n = strlen(shown), e = sizeof NPY_EXT - 1;
  if (n > B2_NS_NAME_MAX) return B2_E_NAMETOOLONG;
  switch (kind) {
  case B2_NS_PLAIN:
    return copy_out(out, cap, shown);
  case B2_NS_LOGICAL:
  case B2_NS_STORE:
    if (join(buf, shown, n, suffix) < 0) return B2_E_NAMETOOLONG;
    return copy_out(out, cap, buf);
  case B2_NS_NPY:
    if (n <= e || memcmp(shown + n - e, NPY_EXT, e) != 0 || !stem_ok(shown, n - e))
      return B2_E_XDEV;
    if (join(buf, shown, n - e, ".b2nd") < 0) return B2_E_NAMETOOLONG;
    return copy_out(out, cap, buf);
  default:
    return B2_E_INVAL;
  }
}

int b2_ns_name_target_fit(int kind, const char *suffix, const char *shown, char *out,
                          size_t cap) {
  int rc = b2_ns_name_target(kind, suffix, shown, out, cap);
  for (size_t i = 0; i < NSUFFIXES && rc == B2_E_NAMETOOLONG && kind == B2_NS_LOGICAL; i++)
    if (suffixes[i].kind == B2_NS_LOGICAL && strlen(suffixes[i].suffix) < strlen(suffix))
      rc = b2_ns_name_target(kind, suffixes[i].suffix, shown, out, cap);
  return rc;
}

int b2_ns_overlay_probe(void *ctx, const char *name) {
  const b2_ns_overlay *o = ctx;
  if (o->added && strcmp(name, o->added) == 0) return o->added_as;
  for (int i = 0; i < 2; i++)
    if (o->gone[i] && strcmp(name, o->gone[i]) == 0) return B2_NS_ABSENT;
  return o->probe(o->ctx, name);
}

int b2_ns_name_check(const char *shown, const char *src, int is_frame,
                    b2_ns_probe_fn probe, void *ctx) {
  char out[B2_NS_NAME_MAX + 1];
  int kind = b2_ns_name_to_source(shown, probe, ctx, out, sizeof out);
  if (kind == B2_E_NOENT) return B2_E_EXIST;
  if (kind < 0) return kind;
  if (strcmp(out, src) != 0 || (kind != B2_NS_PLAIN) != (is_frame != 0))
    return B2_E_EXIST;
  return 0;
}
