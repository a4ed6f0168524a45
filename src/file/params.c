/* params.c - textual frame parameters ("codec=zstd", "filters=shuffle,
 * delta", "chunksize=1M") shared by the mount options, b2f pack and the
 * user.b2.* attributes. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "b2_error.h"
#include "b2_file.h"

int b2_parse_size(const char *s, uint64_t *out) {
  char *end;
  if (!s || !isdigit((unsigned char)*s)) return b2_fail(B2_E_INVAL, "size '%s' is not a number", s ? s : "");
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno) return b2_fail(B2_E_INVAL, "size '%s' is out of range", s);
  int shift = 0;
  switch (toupper((unsigned char)*end)) {
    case 0: break;
    case 'K': shift = 10; break;
    case 'M': shift = 20; break;
    case 'G': shift = 30; break;
    case 'T': shift = 40; break;
    default: return b2_fail(B2_E_INVAL, "size '%s' has an unknown suffix", s);
  }
  if (*end) {
    end++;
    if (*end == 'i' || *end == 'I') end++;
    if (*end == 'b' || *end == 'B') end++;
    if (*end) return b2_fail(B2_E_INVAL, "size '%s' has trailing characters", s);
  }
  if (shift && v > (UINT64_MAX >> shift)) return b2_fail(B2_E_INVAL, "size '%s' is out of range", s);
  *out = (uint64_t)v << shift;
  return 0;
}

/* An integer within [lo, hi]. */
static int parse_int(const char *key, const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi)
    return b2_fail(B2_E_INVAL, "%s '%s' is not a number from %ld to %ld", key, s, lo, hi);
  *out = v;
  return 0;
}

/* A size within [lo, hi] bytes. */
static int parse_bytes(const char *key, const char *s, uint64_t lo, uint64_t hi, int32_t *out) {
  uint64_t v;
  int rc = b2_parse_size(s, &v);
  if (rc < 0) return b2_context(rc, "%s", key);
  if (v < lo || v > hi)
    return b2_fail(B2_E_INVAL, "%s %s is outside %llu..%llu bytes", key, s, (unsigned long long)lo,
                   (unsigned long long)hi);
  *out = (int32_t)v;
  return 0;
}

/* "NAME" or "NAME:META" (META -128..255, kept as its low byte, as
 * python-blosc2's codec_meta and filters_meta are) into name and *meta;
 * *has_meta says whether one was given. */
static int split_meta(const char *what, const char *s, size_t len, char *name, size_t cap,
                      int *meta, int *has_meta) {
  const char *colon = memchr(s, ':', len);
  size_t nlen = colon ? (size_t)(colon - s) : len;
  if (nlen == 0 || nlen >= cap) return b2_fail(B2_E_INVAL, "%s: bad name near '%.*s'", what, (int)len, s);
  memcpy(name, s, nlen);
  name[nlen] = 0;
  *meta = 0;
  *has_meta = colon != NULL;
  if (!colon) return 0;
  char num[8];
  size_t mlen = len - nlen - 1;
  long v;
  if (mlen == 0 || mlen >= sizeof num)
    return b2_fail(B2_E_INVAL, "%s: '%.*s' wants a number after ':'", what, (int)len, s);
  memcpy(num, colon + 1, mlen);
  num[mlen] = 0;
  int rc = parse_int(name, num, -128, 255, &v);
  if (rc < 0) return rc;
  *meta = (int)(uint8_t)v;
  return 0;
}

/* "shuffle,delta" / "trunc_prec:12,shuffle" / "none" / "" into the six
 * pipeline slots and their meta bytes. */
static int parse_filters(const char *s, b2_cparams *c) {
  uint8_t f[B2_MAX_FILTERS] = {0}, fm[B2_MAX_FILTERS] = {0};
  int n = 0, meta, has_meta;
  char name[32];
  while (*s) {
    size_t len = strcspn(s, ",+");
    int rc = split_meta("filters", s, len, name, sizeof name, &meta, &has_meta);
    if (rc < 0) return rc;
    s += len + (s[len] ? 1 : 0);
    if (!strcmp(name, "none") || !strcmp(name, "nofilter")) continue;
    int id = b2_filter_from_name(name);
    if (id < 0) return b2_fail(B2_E_INVAL, "filters: unknown filter '%s'", name);
    /* Every filter with a parameter needs it (the bits kept, the cell
     * side: no usable default), the others take none. */
    int takes = b2_filter_meta(id, meta, &(int){0});
    if (has_meta && !takes) return b2_fail(B2_E_INVAL, "filters: %s takes no parameter", name);
    if (takes && !has_meta)
      return b2_fail(B2_E_INVAL, "filters: %s needs its parameter: %s:N (N the %s)", name, name,
                     id == B2_FILTER_NDCELL || id == B2_FILTER_NDMEAN
                         ? "cell side"
                         : "bits kept, or -N the bits removed");
    if (n == B2_MAX_FILTERS) return b2_fail(B2_E_INVAL, "filters: more than %d", B2_MAX_FILTERS);
    fm[n] = (uint8_t)meta;
    f[n++] = (uint8_t)id;
  }
  /* Filters sit in the last slots, as the reference library places them. */
  memset(c->filters, 0, sizeof c->filters);
  memset(c->filters_meta, 0, sizeof c->filters_meta);
  for (int i = 0; i < n; i++) {
    c->filters[B2_MAX_FILTERS - n + i] = f[i];
    c->filters_meta[B2_MAX_FILTERS - n + i] = fm[i];
  }
  return 0;
}

int b2_params_set(b2_frame_params *p, const char *key, const char *value) {
  long v;
  int rc;
  if (!strcmp(key, "codec")) {
    char name[16];
    int meta, has_meta;
    if ((rc = split_meta("codec", value, strlen(value), name, sizeof name, &meta, &has_meta)) < 0)
      return rc;
    int c = b2_codec_from_name(name);
    if (c < 0 || b2_codec_format(c) < 0) return b2_fail(B2_E_INVAL, "codec '%s' is not supported", value);
    if (has_meta && !b2_codec_meta(c, meta, &(int){0}))
      return b2_fail(B2_E_INVAL, "codec: %s takes no parameter", name);
    if (c == B2_CODEC_NDLZ && !has_meta)
      return b2_fail(B2_E_INVAL, "codec: ndlz needs its cell side: ndlz:4 or ndlz:8");
    p->cparams.codec = c;
    p->cparams.codec_meta = meta;
    /* ZFP encodes the floats themselves: filters that move their bytes
     * would have it encode something else (python-blosc2 keeps its default
     * shuffle there, and such arrays come back as garbage). */
    for (int i = 0; i < B2_MAX_FILTERS && b2_codec_is_zfp(c); i++)
      if (b2_filter_moves_bytes(p->cparams.filters[i]))
        p->cparams.filters[i] = p->cparams.filters_meta[i] = 0;
  } else if (!strcmp(key, "clevel")) {
    if ((rc = parse_int(key, value, 0, 9, &v)) < 0) return rc;
    p->cparams.clevel = (int)v;
  } else if (!strcmp(key, "typesize")) {
    if ((rc = parse_int(key, value, 1, 255, &v)) < 0) return rc;
    p->cparams.typesize = (int)v;
  } else if (!strcmp(key, "filters")) {
    return parse_filters(value, &p->cparams);
  } else if (!strcmp(key, "chunksize")) {
    return parse_bytes(key, value, 1, 1u << 30, &p->chunksize);
  } else if (!strcmp(key, "blocksize")) {
    if (!strcmp(value, "0") || !strcmp(value, "auto")) {
      p->cparams.blocksize = 0;
      return 0;
    }
    return parse_bytes(key, value, 16, 1u << 30, &p->cparams.blocksize);
  } else if (!strcmp(key, "layout")) {
    if (!strcmp(value, "contiguous"))
      p->layout = B2_LAYOUT_CONTIGUOUS;
    else if (!strcmp(value, "sparse"))
      p->layout = B2_LAYOUT_SPARSE;
    else
      return b2_fail(B2_E_INVAL, "layout '%s' is not contiguous or sparse", value);
  } else {
    return b2_fail(B2_E_INVAL, "unknown parameter '%s'%s", key,
                  !strcmp(key, "chunkshape") || !strcmp(key, "blockshape") ? " (for .npy files)" : "");
  }
  return 0;
}
