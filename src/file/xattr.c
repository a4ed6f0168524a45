/*
 * xattr.c - a frame's properties and metalayers as "user.b2.*" extended
 * attributes (b2_file_xattr_list / b2_file_xattr_get, see b2_file.h).
 *
 * Uses only the public frame and b2nd API, so it works on any open handle
 * whatever its view; the b2nd geometry attributes appear whenever the frame
 * carries a valid b2nd metalayer.  The frame's properties are read from a
 * copy (b2_frame_info_copy): a writable frame changes them while we look.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "b2_error.h"
#include "b2_file.h"

#define PREFIX "user.b2."
#define META_PREFIX "meta."
#define VLMETA_PREFIX "vlmeta."

static const char *const frame_keys[] = {
    "codec",  "clevel", "filters", "typesize", "chunksize",
    "blocksize", "nchunks", "cbytes", "nbytes", "cratio",
};
static const char *const array_keys[] = {"shape", "chunkshape", "blockshape",
                                         "dtype"};
#define KIND_KEY "kind" /* b2_frame_kind_name of the frame */
#define NFRAME_KEYS (sizeof frame_keys / sizeof frame_keys[0])
#define NARRAY_KEYS (sizeof array_keys / sizeof array_keys[0])

/* The frame's b2nd geometry, parsed from its metalayer (1), or a
 * python-blosc2 tensor's shape and dtype (2: its chunk and block shapes
 * are not the frame's, so only shape and dtype are offered); 0 when
 * neither is there or valid (then the array attributes are simply not
 * offered). */
static int get_array(b2_frame *fr, b2_b2nd *a) {
  const uint8_t *meta;
  size_t len;
  b2_frame_info in;
  memset(a, 0, sizeof *a);
  if (b2_frame_info_copy(fr, &in) < 0) return 0;
  if (b2_frame_meta_get(fr, "b2nd", &meta, &len) < 0) return b2_tensor_get(fr, a) == 1 ? 2 : 0;
  if (b2_b2nd_parse(meta, len, in.typesize, a) < 0) {
    b2_b2nd_free(a);
    return 0;
  }
  return 1;
}

/* Is array key k offered for get_array's answer `got`? */
static int array_key(int got, size_t k) {
  return got == 1 || (got == 2 && (!strcmp(array_keys[k], "shape") || !strcmp(array_keys[k], "dtype")));
}

/* Append one name (PREFIX + a + b, NUL-terminated); tracks the total. */
static void put_name(char *buf, size_t cap, size_t *total, const char *a,
                     const char *b) {
  size_t lp = strlen(PREFIX), la = strlen(a), lb = strlen(b);
  size_t n = lp + la + lb + 1;
  if (cap && *total + n <= cap) {
    char *p = buf + *total;
    memcpy(p, PREFIX, lp);
    memcpy(p + lp, a, la);
    memcpy(p + lp + la, b, lb);
    p[lp + la + lb] = 0;
  }
  *total += n;
}

/* A variable-length metalayer is listed when its value fits the kernel's
 * limit on one attribute (a larger one, such as the checksum table of a
 * frame of more than 16384 chunks, would make `getfattr -d` fail; it can
 * still be asked for by name).  A damaged one is listed: asking for it
 * then reports the damage. */
static int vlmeta_listed(b2_frame *fr, const char *name) {
  size_t len;
  if (b2_frame_vlmeta_get(fr, name, NULL, &len) < 0) return 1;
  return len <= B2_XATTR_VALUE_MAX;
}

ssize_t b2_file_xattr_list(b2_file *f, char *buf, size_t cap) {
  b2_frame *fr = b2_file_frame(f);
  b2_frame_info info;
  const b2_frame_info *in = &info;
  int rc = b2_frame_info_copy(fr, &info);
  if (rc < 0) return rc;
  size_t total = 0;
  for (size_t i = 0; i < NFRAME_KEYS; i++)
    put_name(buf, cap, &total, frame_keys[i], "");
  put_name(buf, cap, &total, KIND_KEY, "");
  b2_b2nd a;
  int got = get_array(fr, &a);
  for (size_t i = 0; i < NARRAY_KEYS; i++)
    if (array_key(got, i)) put_name(buf, cap, &total, array_keys[i], "");
  b2_b2nd_free(&a);
  for (int k = 0; k < in->nmeta; k++) {
    const char *name = b2_frame_meta_name(fr, k);
    if (name) put_name(buf, cap, &total, META_PREFIX, name);
  }
  for (int k = 0; k < in->nvlmeta; k++) {
    const char *name = b2_frame_vlmeta_name(fr, k);
    if (name && vlmeta_listed(fr, name)) put_name(buf, cap, &total, VLMETA_PREFIX, name);
  }
  if (cap && total > cap)
    return b2_fail(B2_E_RANGE, "attribute list needs %zu bytes", total);
  return (ssize_t)total;
}

int b2_file_xattr_derived(const char *name) {
  static const char *const derived[] = {"nchunks", "cbytes", "nbytes", "cratio",
                                        "kind",    "shape",  "dtype"};
  size_t lp = strlen(PREFIX);
  if (strncmp(name, PREFIX, lp) != 0) return 0;
  const char *key = name + lp;
  if (!strncmp(key, META_PREFIX, strlen(META_PREFIX)))
    return b2_frame_kind_marker(key + strlen(META_PREFIX));
  for (size_t i = 0; i < sizeof derived / sizeof derived[0]; i++)
    if (!strcmp(key, derived[i])) return 1;
  return 0;
}

/* Copy a value out under the getxattr size rules. */
static ssize_t put_value(const void *v, size_t n, void *buf, size_t cap) {
  if (cap == 0) return (ssize_t)n;
  if (n > cap) return b2_fail(B2_E_RANGE, "attribute value needs %zu bytes", n);
  if (n) memcpy(buf, v, n);
  return (ssize_t)n;
}

static void fmt_shape(char *out, size_t cap, int ndim, const int64_t *s64,
                      const int32_t *s32) {
  size_t used = 0;
  out[0] = 0;
  for (int d = 0; d < ndim && used < cap; d++) {
    long long v = s64 ? (long long)s64[d] : (long long)s32[d];
    int n = snprintf(out + used, cap - used, d ? "x%lld" : "%lld", v);
    if (n < 0) break;
    used += (size_t)n;
  }
}

/* Text value of a frame key into txt; 0, or B2_E_NOENT. */
static int frame_value(const b2_frame_info *in, const char *key, char *txt,
                       size_t cap) {
  if (!strcmp(key, "codec")) {
    const char *nm = b2_codec_name(in->codec);
    int v;
    if (nm && b2_codec_meta(in->codec, in->codec_meta, &v))
      snprintf(txt, cap, "%s:%d", nm, v);
    else if (nm)
      snprintf(txt, cap, "%s", nm);
    else
      snprintf(txt, cap, "codec%d", in->codec);
  } else if (!strcmp(key, "clevel")) {
    snprintf(txt, cap, "%d", in->clevel);
  } else if (!strcmp(key, "filters")) {
    b2_filters_text(in->filters, in->filters_meta, txt, cap);
  } else if (!strcmp(key, "typesize")) {
    snprintf(txt, cap, "%d", (int)in->typesize);
  } else if (!strcmp(key, "chunksize")) {
    snprintf(txt, cap, "%d", (int)in->chunksize);
  } else if (!strcmp(key, "blocksize")) {
    snprintf(txt, cap, "%d", (int)in->blocksize);
  } else if (!strcmp(key, "nchunks")) {
    snprintf(txt, cap, "%lld", (long long)in->nchunks);
  } else if (!strcmp(key, "cbytes")) {
    snprintf(txt, cap, "%lld", (long long)in->cbytes);
  } else if (!strcmp(key, "nbytes")) {
    snprintf(txt, cap, "%lld", (long long)in->nbytes);
  } else if (!strcmp(key, "cratio")) {
    double r = in->cbytes > 0 ? (double)in->nbytes / (double)in->cbytes : 0.0;
    snprintf(txt, cap, "%.2f", r);
  } else {
    return B2_E_NOENT;
  }
  return 0;
}

static ssize_t array_value(b2_frame *fr, size_t k, void *buf, size_t cap) {
  b2_b2nd a;
  char txt[B2_B2ND_MAXDIM * 24];
  ssize_t rc;
  const char *key = array_keys[k];
  if (!array_key(get_array(fr, &a), k)) {
    b2_b2nd_free(&a);
    return B2_E_NOENT;
  }
  if (!strcmp(key, "dtype")) {
    rc = put_value(a.dtype, a.dtype ? strlen(a.dtype) : 0, buf, cap);
  } else {
    if (!strcmp(key, "shape"))
      fmt_shape(txt, sizeof txt, a.ndim, a.shape, NULL);
    else if (!strcmp(key, "chunkshape"))
      fmt_shape(txt, sizeof txt, a.ndim, NULL, a.chunkshape);
    else
      fmt_shape(txt, sizeof txt, a.ndim, NULL, a.blockshape);
    rc = put_value(txt, strlen(txt), buf, cap);
  }
  b2_b2nd_free(&a);
  return rc;
}

ssize_t b2_file_xattr_get(b2_file *f, const char *name, void *buf, size_t cap) {
  b2_frame *fr = b2_file_frame(f);
  size_t lp = strlen(PREFIX);
  if (strncmp(name, PREFIX, lp) != 0)
    return b2_fail(B2_E_NOENT, "no attribute %s", name);
  const char *key = name + lp;
  if (!strncmp(key, META_PREFIX, strlen(META_PREFIX))) {
    const uint8_t *data;
    size_t len;
    if (b2_frame_meta_get(fr, key + strlen(META_PREFIX), &data, &len) < 0)
      return b2_fail(B2_E_NOENT, "no metalayer %s", key + strlen(META_PREFIX));
    return put_value(data, len, buf, cap);
  }
  if (!strncmp(key, VLMETA_PREFIX, strlen(VLMETA_PREFIX))) {
    uint8_t *data = NULL;
    size_t len = 0;
    int rc = b2_frame_vlmeta_get(fr, key + strlen(VLMETA_PREFIX), &data, &len);
    if (rc < 0)
      return rc == B2_E_NOENT
                 ? b2_fail(B2_E_NOENT, "no vlmetalayer %s", key + strlen(VLMETA_PREFIX))
                 : b2_context(rc, "vlmetalayer %s", key + strlen(VLMETA_PREFIX));
    ssize_t n = put_value(data, len, buf, cap);
    free(data);
    return n;
  }
  if (!strcmp(key, KIND_KEY)) {
    int kind = b2_frame_kind(fr);
    if (kind < 0) return kind;
    const char *v = b2_frame_kind_name(kind);
    return put_value(v, strlen(v), buf, cap);
  }
  char txt[64];
  b2_frame_info info;
  int irc = b2_frame_info_copy(fr, &info);
  if (irc < 0) return irc;
  if (frame_value(&info, key, txt, sizeof txt) == 0)
    return put_value(txt, strlen(txt), buf, cap);
  for (size_t i = 0; i < NARRAY_KEYS; i++)
    if (!strcmp(key, array_keys[i])) {
      ssize_t rc = array_value(fr, i, buf, cap);
      if (rc == B2_E_NOENT) break;
      return rc;
    }
  return b2_fail(B2_E_NOENT, "no attribute %s", name);
}
