/*
 * npy_parse.c - parse an untrusted NumPy .npy header.
 *
 * Accepts what numpy.load accepts for formats 1.0, 2.0 and 3.0: the magic,
 * a header length, and a Python dict literal with exactly the keys
 * 'descr', 'fortran_order' and 'shape' (any order, either quote style,
 * optional trailing commas, whitespace, a repeated key taking the last
 * value).  descr is returned as the string's content ("<f8") or, for a
 * structured or sub-array dtype, as the literal text of its list or tuple
 * ("[('x', '<f4')]"), which is also how the b2nd metalayer stores it;
 * Latin-1 text of formats 1.0 and 2.0 is returned as UTF-8, like 3.0's.
 * Nothing here recurses or allocates; every index is checked.
 */
#include <stdlib.h>
#include <string.h>

#include "b2_b2nd.h"
#include "b2_error.h"
#include "b2nd/b2nd_int.h"
#include "common/util.h"

/* A quoted string without escapes; returns its content in place. */
static int quoted(b2_lex *l, const char **s, size_t *n) {
  b2_lex_ws(l);
  if (l->p >= l->end || (*l->p != '\'' && *l->p != '"'))
    return b2_fail(B2_E_FORMAT, "npy header: expected a quoted string");
  char q = *l->p++;
  const char *start = l->p;
  while (l->p < l->end && *l->p != q) {
    if (*l->p == '\\' || *l->p == '\n')
      return b2_fail(B2_E_FORMAT, "npy header: escapes in strings are not supported");
    l->p++;
  }
  if (l->p >= l->end) return b2_fail(B2_E_FORMAT, "npy header: unterminated string");
  *s = start;
  *n = (size_t)(l->p - start);
  l->p++;
  return 0;
}

/* Length of the balanced list or tuple literal at the start of s[0..n)
 * (quotes respected, no braces), or 0 if there is none. */
size_t b2_npy_literal_len(const char *s, size_t n) {
  int depth = 0;
  char q = 0;
  if (n == 0 || (s[0] != '[' && s[0] != '(')) return 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (q) {
      if (c == '\\') i++;
      else if (c == q) q = 0;
      continue;
    }
    if (c == '\'' || c == '"') {
      q = c;
    } else if (c == '[' || c == '(') {
      depth++;
    } else if (c == ']' || c == ')') {
      if (--depth == 0) return i + 1;
      if (depth < 0) return 0;
    } else if (c == '{' || c == '}' || c == '\n') {
      return 0;
    }
  }
  return 0;
}

/* A list or tuple literal, returned as its raw text (brackets included). */
static int bracketed(b2_lex *l, const char **s, size_t *n) {
  b2_lex_ws(l);
  size_t len = b2_npy_literal_len(l->p, (size_t)(l->end - l->p));
  if (!len) return b2_fail(B2_E_FORMAT, "npy header: unbalanced descr");
  *s = l->p;
  *n = len;
  l->p += len;
  return 0;
}

static int key_is(const char *s, size_t n, const char *k) {
  return n == strlen(k) && memcmp(s, k, n) == 0;
}

static int parse_shape(b2_lex *l, int *ndim, int64_t *shape) {
  if (!b2_lex_eat(l, '(')) return b2_fail(B2_E_FORMAT, "npy header: shape is not a tuple");
  int nd = 0, comma = 0;
  for (;;) {
    if (b2_lex_eat(l, ')')) break;
    b2_lex_ws(l);
    if (l->p >= l->end || *l->p < '0' || *l->p > '9')
      return b2_fail(B2_E_FORMAT, "npy header: shape holds a non-integer");
    uint64_t v = 0;
    while (l->p < l->end && *l->p >= '0' && *l->p <= '9') {
      if (v > ((uint64_t)INT64_MAX - 9) / 10)
        return b2_fail(B2_E_FORMAT, "npy header: shape value is too large");
      v = v * 10 + (uint64_t)(*l->p++ - '0');
    }
    if (l->p < l->end && (*l->p == 'L' || *l->p == 'l')) l->p++; /* Python 2 long */
    if (nd >= B2_B2ND_MAXDIM)
      return b2_fail(B2_E_LIMIT, "npy header: more than %d dimensions", B2_B2ND_MAXDIM);
    shape[nd++] = (int64_t)v;
    comma = b2_lex_eat(l, ',');
    if (!comma) {
      if (!b2_lex_eat(l, ')')) return b2_fail(B2_E_FORMAT, "npy header: bad shape tuple");
      break;
    }
  }
  if (nd == 1 && !comma) return b2_fail(B2_E_FORMAT, "npy header: shape (n) is not a tuple");
  uint64_t prod = 1;
  for (int i = 0; i < nd; i++)
    if (shape[i] && (b2_mul_overflow_u64(prod, (uint64_t)shape[i], &prod) || prod > INT64_MAX))
      return b2_fail(B2_E_LIMIT, "npy header: shape product overflows");
  *ndim = nd;
  return 0;
}

int b2_npy_parse(const void *buf, size_t len, size_t *header_len, char *descr, size_t descr_cap,
                 int *fortran, int *ndim, int64_t shape[B2_B2ND_MAXDIM]) {
  const unsigned char *b = buf;
  if ((!b && len) || !header_len || !fortran || !ndim || !shape || (!descr && descr_cap))
    return b2_fail(B2_E_INVAL, "npy header: bad arguments");
  if (len < 10) return b2_fail(B2_E_TRUNCATED, "npy header: %zu bytes is too short", len);
  if (memcmp(b, B2_NPY_MAGIC, B2_NPY_MAGIC_LEN) != 0) return b2_fail(B2_E_FORMAT, "npy header: bad magic");
  if (b[7] != 0 || b[6] < 1 || b[6] > 3)
    return b2_fail(B2_E_UNSUPPORTED, "npy header: format %d.%d", b[6], b[7]);
  size_t prefix = b[6] == 1 ? 10 : 12;
  if (len < prefix) return b2_fail(B2_E_TRUNCATED, "npy header: %zu bytes is too short", len);
  uint64_t hl = prefix == 10 ? b2_le16(b + 8) : b2_le32(b + 8);
  if (hl > len - prefix)
    return b2_fail(B2_E_TRUNCATED, "npy header: declares %llu bytes, %zu present",
                   (unsigned long long)hl, len - prefix);

  b2_lex l = {(const char *)b + prefix, (const char *)b + prefix + hl};
  const char *ds = NULL;
  size_t dn = 0;
  int have = 0, rc, fo = 0, nd = 0;
  int64_t sh[B2_B2ND_MAXDIM];
  if (!b2_lex_eat(&l, '{')) return b2_fail(B2_E_FORMAT, "npy header: not a dict");
  for (;;) {
    if (b2_lex_eat(&l, '}')) break;
    const char *k;
    size_t kn;
    if ((rc = quoted(&l, &k, &kn)) < 0) return rc;
    if (!b2_lex_eat(&l, ':')) return b2_fail(B2_E_FORMAT, "npy header: expected ':'");
    if (key_is(k, kn, "descr")) {
      b2_lex_ws(&l);
      if (l.p < l.end && (*l.p == '[' || *l.p == '('))
        rc = bracketed(&l, &ds, &dn);
      else
        rc = quoted(&l, &ds, &dn);
      if (rc < 0) return rc;
      have |= 1;
    } else if (key_is(k, kn, "fortran_order")) {
      b2_lex_ws(&l);
      size_t left = (size_t)(l.end - l.p);
      if (left >= 4 && memcmp(l.p, "True", 4) == 0) {
        fo = 1;
        l.p += 4;
      } else if (left >= 5 && memcmp(l.p, "False", 5) == 0) {
        fo = 0;
        l.p += 5;
      } else {
        return b2_fail(B2_E_FORMAT, "npy header: fortran_order is not True or False");
      }
      have |= 2;
    } else if (key_is(k, kn, "shape")) {
      if ((rc = parse_shape(&l, &nd, sh)) < 0) return rc;
      have |= 4;
    } else {
      return b2_fail(B2_E_FORMAT, "npy header: unexpected key '%.*s'", (int)B2_MIN(kn, 32), k);
    }
    if (!b2_lex_eat(&l, ',')) {
      if (!b2_lex_eat(&l, '}')) return b2_fail(B2_E_FORMAT, "npy header: expected ',' or '}'");
      break;
    }
  }
  b2_lex_ws(&l);
  if (l.p != l.end) return b2_fail(B2_E_FORMAT, "npy header: text after the dict");
  if (have != 7) return b2_fail(B2_E_FORMAT, "npy header: missing %s",
                                !(have & 1) ? "descr" : !(have & 2) ? "fortran_order" : "shape");
  if (dn == 0) return b2_fail(B2_E_FORMAT, "npy header: empty descr");
  if (memchr(ds, 0, dn)) return b2_fail(B2_E_FORMAT, "npy header: NUL in descr");
  if (descr) {
    /* formats 1.0 and 2.0 hold Latin-1 text: hand it out as UTF-8 */
    int latin1 = b[6] < 3;
    size_t need = dn;
    for (size_t i = 0; latin1 && i < dn; i++) need += (unsigned char)ds[i] >= 0x80;
    if (need >= descr_cap)
      return b2_fail(B2_E_LIMIT, "npy header: descr of %zu bytes does not fit", need);
    size_t o = 0;
    for (size_t i = 0; i < dn; i++) {
      unsigned char ch = (unsigned char)ds[i];
      if (latin1 && ch >= 0x80) {
        descr[o++] = (char)(0xc0 | ch >> 6);
        descr[o++] = (char)(0x80 | (ch & 0x3f));
      } else {
        descr[o++] = (char)ch;
      }
    }
    descr[o] = 0;
  }
  *header_len = prefix + (size_t)hl;
  *fortran = fo;
  *ndim = nd;
  memcpy(shape, sh, sizeof(int64_t) * (size_t)nd);
  return 0;
}
