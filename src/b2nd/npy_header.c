/*
 * npy_header.c - write the NumPy .npy header that makes a b2nd array a
 * plain .npy file.
 *
 * The header is what numpy.save writes for the same shape and dtype: the
 * magic "\x93NUMPY", the version, a little-endian header length (uint16 in
 * format 1.0, uint32 in 2.0 and 3.0), then the dict literal
 * "{'descr': ..., 'fortran_order': False, 'shape': (...), }", the spare
 * spaces NumPy leaves for the first axis to grow (21 digits), and spaces
 * plus a final newline up to a multiple of 64 bytes (always at least one
 * space).  Format 2.0 is used when the header does not fit 65535 bytes,
 * 3.0 when the dtype holds non-ASCII bytes (NumPy reads 3.0 as UTF-8).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "b2_b2nd.h"
#include "b2_error.h"
#include "common/util.h"

#define GROWTH_DIGITS 21
#define ALIGN 64

typedef struct out {
  char *buf; /* NULL: only count */
  size_t n;
} out;

static void put(out *o, const char *s, size_t n) {
  if (o->buf) memcpy(o->buf + o->n, s, n);
  o->n += n;
}

static void puts_(out *o, const char *s) { put(o, s, strlen(s)); }

static void put_fill(out *o, char ch, size_t n) {
  if (o->buf) memset(o->buf + o->n, ch, n);
  o->n += n;
}

/* Bytes per item a simple NumPy dtype string ("<f8", "|S10", "<U3",
 * "<M8[ns]") implies, or -1 if it is not of that form. */
static int64_t simple_size(const char *s) {
  if (*s == '<' || *s == '>' || *s == '|' || *s == '=') s++;
  char kind = *s++;
  if (!strchr("biufcVSaUMm?", kind) || kind == 0) return -1;
  if (kind == '?' && *s == 0) return 1;
  int64_t v = 0;
  int digits = 0;
  while (*s >= '0' && *s <= '9' && digits < 12) {
    v = v * 10 + (*s++ - '0');
    digits++;
  }
  if (!digits) return -1;
  if (*s == '[' && (kind == 'M' || kind == 'm')) {
    while (*s && *s != ']') s++;
    if (*s++ != ']') return -1;
  }
  if (*s) return -1;
  return kind == 'U' ? v * 4 : v;
}

/* Characters allowed in a dtype written verbatim: printable, no quote
 * that could end the literal early for a simple dtype. */
static int safe_text(const char *s, int simple) {
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p < 0x20 || *p == 0x7f) return 0;
    if (simple && (*p == '\'' || *p == '"' || *p == '\\')) return 0;
  }
  return 1;
}

/* The descr value: the metalayer's dtype when it is NumPy's and plausible,
 * else raw bytes of the item size. */
static void put_descr(out *o, const b2_b2nd *a) {
  const char *dt = a->dtype;
  if (a->dtype_format == 0 && dt && *dt) {
    if ((dt[0] == '[' || dt[0] == '(') && safe_text(dt, 0)) {
      puts_(o, dt);
      return;
    }
    if (dt[0] != '[' && dt[0] != '(' && safe_text(dt, 1)) {
      int64_t sz = simple_size(dt);
      if (sz < 0 || sz == a->itemsize) {
        puts_(o, "'");
        puts_(o, dt);
        puts_(o, "'");
        return;
      }
    }
  }
  char v[32];
  snprintf(v, sizeof v, "'|V%d'", a->itemsize);
  puts_(o, v);
}

static void put_dict(out *o, const b2_b2nd *a) {
  char num[32];
  puts_(o, "{'descr': ");
  put_descr(o, a);
  puts_(o, ", 'fortran_order': False, 'shape': (");
  for (int i = 0; i < a->ndim; i++) {
    snprintf(num, sizeof num, "%s%" PRId64, i ? ", " : "", a->shape[i]);
    puts_(o, num);
  }
  puts_(o, a->ndim == 1 ? ",), }" : "), }");
  if (a->ndim > 0) {
    snprintf(num, sizeof num, "%" PRId64, a->shape[0]);
    size_t d = strlen(num);
    if (d < GROWTH_DIGITS) put_fill(o, ' ', GROWTH_DIGITS - d);
  }
}

static int non_ascii(const char *s) {
  for (; s && *s; s++)
    if ((unsigned char)*s >= 0x80) return 1;
  return 0;
}

int b2_npy_header(const b2_b2nd *a, char *buf, size_t cap) {
  if (!a || (!buf && cap)) return b2_fail(B2_E_INVAL, "npy header: bad arguments");
  out o = {NULL, 0};
  put_dict(&o, a);
  size_t hlen = o.n + 1; /* + the final newline */
  int major = non_ascii(a->dtype) && a->dtype_format == 0 ? 3 : 1;
  size_t prefix = major == 1 ? 10 : 12;
  size_t pad = ALIGN - (prefix + hlen) % ALIGN;
  if (major == 1 && hlen + pad > 65535) {
    major = 2;
    prefix = 12;
    pad = ALIGN - (prefix + hlen) % ALIGN;
  }
  size_t total = prefix + hlen + pad;
  if (total > INT32_MAX) return b2_fail(B2_E_LIMIT, "npy header: %zu bytes is too long", total);
  if (!buf || cap < total) return (int)total;

  memcpy(buf, "\x93NUMPY", 6);
  buf[6] = (char)major;
  buf[7] = 0;
  if (prefix == 10) {
    buf[8] = (char)((hlen + pad) & 0xff);
    buf[9] = (char)((hlen + pad) >> 8);
  } else {
    b2_put_le32(buf + 8, (uint32_t)(hlen + pad));
  }
  o.buf = buf;
  o.n = prefix;
  put_dict(&o, a);
  put_fill(&o, ' ', pad);
  put(&o, "\n", 1);
  return (int)o.n;
}
