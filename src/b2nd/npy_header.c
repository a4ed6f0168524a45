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
 * space).  As NumPy does, the text is Latin-1 in formats 1.0 and 2.0 (2.0
 * when the header does not fit 65535 bytes) and UTF-8 in 3.0, used only
 * when a dtype's (UTF-8) field names hold characters beyond Latin-1.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "b2_b2nd.h"
#include "b2_error.h"
#include "b2nd/b2nd_int.h"
#include "common/util.h"

#define GROWTH_DIGITS 21
#define ALIGN 64

typedef struct out {
  char *buf; /* NULL: only count */
  size_t n;
  int latin1; /* write the dtype's UTF-8 as Latin-1 (formats 1.0/2.0) */
  int sized;  /* a header of a given length: no room left for growth */
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

/* The dtype text, as Latin-1 when o->latin1 (valid UTF-8 checked before). */
static void put_text(out *o, const char *s) {
  if (!o->latin1) {
    puts_(o, s);
    return;
  }
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    char ch = (char)*p;
    if (*p >= 0xc2 && *p <= 0xc3) {
      ch = (char)(((*p & 0x03) << 6) | (p[1] & 0x3f));
      p++;
    }
    put(o, &ch, 1);
  }
}

/* The descr value: NumPy's descr for the dtype python-blosc2 rebuilds from
 * the metalayer's text (b2_dtype_to_npy), else raw bytes of the item size.
 * A dtype whose size differs from the frame's typesize is still given as
 * written: the reference library itself writes such arrays (its
 * example_day_month_temp.b2nd says '|u1' over 4-byte items) and readers
 * expect the metalayer's dtype; the data after the header are the stored
 * items in C order all the same. */
static void put_descr(out *o, const b2_b2nd *a, const char *descr) {
  if (descr && descr[0] == '[') {
    put_text(o, descr);
  } else if (descr) {
    puts_(o, "'");
    put_text(o, descr);
    puts_(o, "'");
  } else {
    char v[32];
    snprintf(v, sizeof v, "'|V%d'", a->itemsize);
    puts_(o, v);
  }
}

static void put_dict(out *o, const b2_b2nd *a, const char *descr) {
  char num[32];
  puts_(o, "{'descr': ");
  put_descr(o, a, descr);
  puts_(o, ", 'fortran_order': False, 'shape': (");
  for (int i = 0; i < a->ndim; i++) {
    snprintf(num, sizeof num, "%s%" PRId64, i ? ", " : "", a->shape[i]);
    puts_(o, num);
  }
  puts_(o, a->ndim == 1 ? ",), }" : "), }");
  if (a->ndim > 0 && !o->sized) {
    snprintf(num, sizeof num, "%" PRId64, a->shape[0]);
    size_t d = strlen(num);
    if (d < GROWTH_DIGITS) put_fill(o, ' ', GROWTH_DIGITS - d);
  }
}

/* The header of a padded to `want` bytes in all (0: numpy.save's
 * padding); see b2_npy_header and b2_npy_header_sized. */
static int make_header(const b2_b2nd *a, char *buf, size_t cap, size_t want) {
  if (!a || (!buf && cap)) return b2_fail(B2_E_INVAL, "npy header: bad arguments");
  char *descr = NULL;
  if (a->dtype_format == 0 && a->dtype && b2_dtype_to_npy(a->dtype, &descr, NULL) < 0)
    descr = NULL; /* not a dtype NumPy rebuilds: raw bytes */
  int kind = descr ? b2_npy_text_kind(descr) : 0;
  if (kind < 0) {
    free(descr);
    descr = NULL;
    kind = 0;
  }
  out o = {NULL, 0, kind == 1, want != 0};
  put_dict(&o, a, descr);
  size_t hlen = o.n + 1; /* + the final newline */
  int major = kind == 2 ? 3 : 1;
  size_t prefix = major == 1 ? 10 : 12;
  size_t pad = ALIGN - (prefix + hlen) % ALIGN;
  if (major == 1 && hlen + pad > 65535) {
    major = 2;
    prefix = 12;
    pad = ALIGN - (prefix + hlen) % ALIGN;
  }
  if (want) { /* the prefix numpy.save would use, padded to `want` */
    if (want < prefix + hlen || (prefix == 10 && want - prefix > 65535)) {
      free(descr);
      return b2_fail(B2_E_LIMIT, "npy header: %zu bytes cannot hold it", want);
    }
    pad = want - prefix - hlen;
  }
  size_t total = prefix + hlen + pad;
  if (total > INT32_MAX) {
    free(descr);
    return b2_fail(B2_E_LIMIT, "npy header: %zu bytes is too long", total);
  }
  if (!buf || cap < total) {
    free(descr);
    return (int)total;
  }

  memcpy(buf, B2_NPY_MAGIC, B2_NPY_MAGIC_LEN);
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
  put_dict(&o, a, descr);
  free(descr);
  put_fill(&o, ' ', pad);
  put(&o, "\n", 1);
  return (int)o.n;
}

int b2_npy_header(const b2_b2nd *a, char *buf, size_t cap) { return make_header(a, buf, cap, 0); }

int b2_npy_header_sized(const b2_b2nd *a, char *buf, size_t len) {
  if (!buf || !len) return b2_fail(B2_E_INVAL, "npy header: bad arguments");
  return make_header(a, buf, len, len);
}
