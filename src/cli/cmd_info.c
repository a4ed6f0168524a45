/* cmd_info.c - `b2f info [--json] PATH`: describe a frame. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "b2_b2nd.h"
#include "b2_error.h"
#include "b2_frame.h"
#include "cli/cli.h"

/* One output sink for both formats: text lines "key: value" or JSON. */
typedef struct {
  int json;
  int first;
} out_t;

/* Length of the well-formed UTF-8 sequence at s[0..n) (lead >= 0x80), or 0. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
  size_t len = s[0] >= 0xc2 && s[0] <= 0xdf ? 2 : s[0] >= 0xe0 && s[0] <= 0xef ? 3
             : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : 0;
  if (!len || len > n) return 0;
  for (size_t k = 1; k < len; k++)
    if ((s[k] & 0xc0) != 0x80) return 0;
  if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0) ||
      (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))
    return 0; /* overlong, surrogate, beyond U+10FFFF */
  return len;
}

/* A JSON string: UTF-8 text as it is, other bytes as \u00XX. */
static void json_str(const char *s, size_t n) {
  putchar('"');
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    size_t u = c >= 0x80 ? utf8_seq((const unsigned char *)s + i, n - i) : 0;
    if (u) {
      fwrite(s + i, 1, u, stdout);
      i += u - 1;
    } else if (c == '"' || c == '\\') {
      printf("\\%c", c);
    } else if (c < 0x20 || c >= 0x7f) {
      printf("\\u%04x", c);
    } else {
      putchar(c);
    }
  }
  putchar('"');
}

static void key(out_t *o, const char *k) {
  if (o->json) {
    printf("%s\n  ", o->first ? "{" : ",");
    json_str(k, strlen(k));
    printf(": ");
  } else {
    printf("%-13s ", k);
  }
  o->first = 0;
}

static void put_int(out_t *o, const char *k, int64_t v) {
  key(o, k);
  printf("%" PRId64 "%s", v, o->json ? "" : "\n");
}

static void put_str(out_t *o, const char *k, const char *v) {
  key(o, k);
  if (o->json)
    json_str(v, strlen(v));
  else
    printf("%s\n", v);
}

static void put_ratio(out_t *o, const char *k, double v) {
  key(o, k);
  printf("%.3f%s", v, o->json ? "" : "\n");
}

/* A list of integers: JSON array, or "a x b x c" in text. */
static void put_dims(out_t *o, const char *k, int n, const int64_t *v) {
  key(o, k);
  if (o->json) putchar('[');
  for (int i = 0; i < n; i++)
    printf("%s%" PRId64, i ? (o->json ? ", " : " x ") : "", v[i]);
  printf(o->json ? "]" : "\n");
}

/* A list of names: JSON array of strings, or comma-separated text. */
static void put_names(out_t *o, const char *k, int n, const char *const *v) {
  key(o, k);
  if (o->json) putchar('[');
  for (int i = 0; i < n; i++) {
    if (i) printf(o->json ? ", " : ",");
    if (o->json)
      json_str(v[i], strlen(v[i]));
    else
      printf("%s", v[i]);
  }
  if (o->json)
    putchar(']');
  else
    printf("%s\n", n ? "" : "-");
}

int b2f_info(int argc, char **argv) {
  out_t o = {0, 1};
  const char *path;
  int urc = b2f_flag_and_operand("info", argc, argv, "--json", &o.json, "PATH", &path);
  if (urc) return urc;

  b2_frame *f;
  int rc = b2_frame_open(path, &f);
  if (rc < 0) return b2f_report(path, rc);
  const b2_frame_info *in = b2_frame_get_info(f);

  /* b2nd geometry, if the frame carries a valid metalayer. */
  b2_b2nd arr;
  int has_arr = 0;
  const uint8_t *meta;
  size_t metalen;
  if (b2_frame_meta_get(f, "b2nd", &meta, &metalen) == 0) {
    rc = b2_b2nd_parse(meta, metalen, in->typesize, &arr);
    if (rc < 0) {
      b2f_report(path, b2_context(rc, "b2nd metalayer"));
      b2_frame_close(f);
      return 1;
    }
    has_arr = 1;
  } else if (b2_tensor_get(f, &arr) == 1) {
    has_arr = 2; /* a python-blosc2 tensor: shape and dtype, no chunk shapes */
  }

  char filters[128];
  b2_filters_text(in->filters, in->filters_meta, filters, sizeof filters);
  const char *codec = b2_codec_name(in->codec);

  put_str(&o, "path", path);
  put_str(&o, "layout", in->layout == B2_LAYOUT_SPARSE ? "sparse" : "contiguous");
  put_int(&o, "legacy", in->legacy);
  put_int(&o, "format", in->format_version);
  put_int(&o, "nbytes", in->nbytes);
  put_int(&o, "cbytes", in->cbytes);
  put_int(&o, "frame_size", in->frame_size);
  put_ratio(&o, "ratio", in->cbytes > 0 ? (double)in->nbytes / (double)in->cbytes : 0.0);
  put_int(&o, "nchunks", in->nchunks);
  put_str(&o, "codec", codec ? codec : "unknown");
  put_int(&o, "codec_meta", in->codec_meta); /* ZFP's tolerance, precision or rate; NDLZ's cell */
  put_int(&o, "clevel", in->clevel);
  put_str(&o, "filters", filters);
  put_int(&o, "typesize", in->typesize);
  put_int(&o, "chunksize", in->chunksize);
  put_int(&o, "blocksize", in->blocksize);
  put_int(&o, "varlen", in->varlen_chunks);
  b2_frame_csum_info ci;
  if (b2_frame_checksums(f, &ci) == 0) {
    static const char *const states[] = {"none", "all chunks", "partial", "ignored"};
    put_str(&o, "checksums", ci.state >= 0 && ci.state <= 3 ? states[ci.state] : "unknown");
  }

  const char *names[256];
  int n = 0;
  for (int k = 0; k < in->nmeta && n < 256; k++) names[n++] = b2_frame_meta_name(f, k);
  put_names(&o, "metalayers", n, names);
  put_str(&o, "kind", b2_frame_kind_name(b2_frame_kind(f)));
  n = 0;
  for (int k = 0; k < in->nvlmeta && n < 256; k++) names[n++] = b2_frame_vlmeta_name(f, k);
  put_names(&o, "vlmetalayers", n, names);

  if (has_arr) {
    int64_t dims[B2_B2ND_MAXDIM];
    put_dims(&o, "shape", arr.ndim, arr.shape);
    if (has_arr == 1) {
      for (int i = 0; i < arr.ndim; i++) dims[i] = arr.chunkshape[i];
      put_dims(&o, "chunkshape", arr.ndim, dims);
      for (int i = 0; i < arr.ndim; i++) dims[i] = arr.blockshape[i];
      put_dims(&o, "blockshape", arr.ndim, dims);
    }
    put_str(&o, "dtype", arr.dtype);
    b2_b2nd_free(&arr);
  }
  if (o.json) printf("\n}\n");
  b2_frame_close(f);
  return 0;
}
