/*
 * dtype.c - the item size of a NumPy dtype given as its .npy descr text.
 *
 * A simple dtype is a type string: an optional byte order (< > | =), a
 * kind letter and a size (bytes, or characters for 'U' at 4 bytes each),
 * with a unit in brackets for datetimes ("<M8[ns]").  A structured dtype
 * is a list of fields (name, dtype) or (name, dtype, shape), where the
 * name may be a (title, name) pair and the dtype nested; a sub-array
 * dtype is a tuple (dtype, shape).  NumPy lists padding as unnamed void
 * fields, so the item size is the sum of the fields.  The text is
 * untrusted: nesting is bounded and every size is overflow-checked.
 */
#include <stdint.h>
#include <string.h>

#include "b2_b2nd.h"
#include "b2_error.h"
#include "common/util.h"

#define MAX_DEPTH 32

typedef struct lex {
  const char *p, *end;
} lex;

static void ws(lex *l) {
  while (l->p < l->end && (*l->p == ' ' || *l->p == '\t' || *l->p == '\n' || *l->p == '\r'))
    l->p++;
}

static int peek(lex *l) {
  ws(l);
  return l->p < l->end ? (unsigned char)*l->p : -1;
}

static int eat(lex *l, char ch) {
  if (peek(l) != ch) return 0;
  l->p++;
  return 1;
}

static int bad(const char *what) { return b2_fail(B2_E_FORMAT, "dtype: %s", what); }

/* A quoted string (backslash escapes skipped over); its content. */
static int quoted(lex *l, const char **s, size_t *n) {
  int q = peek(l);
  if (q != '\'' && q != '"') return bad("expected a quoted string");
  const char *start = ++l->p;
  while (l->p < l->end && *l->p != q) l->p += *l->p == '\\' && l->end - l->p > 1 ? 2 : 1;
  if (l->p >= l->end) return bad("unterminated string");
  *s = start;
  *n = (size_t)(l->p - start);
  l->p++;
  return 0;
}

static int number(const char **p, const char *end, int64_t *v) {
  if (*p >= end || **p < '0' || **p > '9') return bad("expected a number");
  int64_t x = 0;
  while (*p < end && **p >= '0' && **p <= '9') {
    x = x * 10 + (**p - '0');
    if (x > INT32_MAX) return b2_fail(B2_E_LIMIT, "dtype: a size is too large");
    (*p)++;
  }
  *v = x;
  return 0;
}

static int in_set(int64_t v, const int *set) {
  for (; *set; set++)
    if (v == *set) return 1;
  return 0;
}

/* Size of a type string such as "<f8", "|S10", "<U3", "<M8[ns]". */
static int64_t simple_size(const char *s, size_t n) {
  const char *p = s, *end = s + n;
  if (p < end && strchr("<>|=", *p)) p++;
  if (p >= end) return bad("empty type string");
  char kind = *p++;
  if (kind == 'O') return b2_fail(B2_E_UNSUPPORTED, "dtype: object arrays hold no raw data");
  int64_t size;
  int rc = number(&p, end, &size);
  if (rc < 0) return rc;
  static const int ints[] = {1, 2, 4, 8, 0}, floats[] = {2, 4, 8, 12, 16, 0},
                   complexes[] = {8, 16, 24, 32, 0}, one[] = {1, 0}, eight[] = {8, 0};
  const int *ok = NULL;
  int64_t unit = 1;
  switch (kind) {
    case 'b': ok = one; break;
    case 'i': case 'u': ok = ints; break;
    case 'f': ok = floats; break;
    case 'c': ok = complexes; break;
    case 'M': case 'm':
      ok = eight;
      if (p < end && *p == '[') { /* a unit such as [ns] or [10us] */
        while (p < end && *p != ']') p++;
        if (p >= end) return bad("unterminated datetime unit");
        p++;
      }
      break;
    case 'S': case 'a': case 'V': break;
    case 'U': unit = 4; break;
    default: return b2_fail(B2_E_FORMAT, "dtype: unknown kind '%c'", kind);
  }
  if (p != end) return bad("junk after the type string");
  if (ok ? !in_set(size, ok) : size <= 0)
    return b2_fail(B2_E_FORMAT, "dtype: size %lld is not valid for kind '%c'", (long long)size, kind);
  return size * unit;
}

/* A shape: an integer or a tuple of them; the product of its entries. */
static int64_t shape_count(lex *l) {
  int64_t prod = 1, v;
  int rc;
  if (eat(l, '(')) {
    while (!eat(l, ')')) {
      ws(l);
      if ((rc = number(&l->p, l->end, &v)) < 0) return rc;
      uint64_t r;
      if (b2_mul_overflow_u64((uint64_t)prod, (uint64_t)v, &r) || r > INT32_MAX)
        return b2_fail(B2_E_LIMIT, "dtype: a sub-array is too large");
      prod = (int64_t)r;
      if (!eat(l, ',') && peek(l) != ')') return bad("expected ',' or ')' in a shape");
    }
    return prod;
  }
  ws(l);
  if ((rc = number(&l->p, l->end, &v)) < 0) return rc;
  return v;
}

static int64_t times(int64_t a, int64_t b) {
  uint64_t r;
  if (b2_mul_overflow_u64((uint64_t)a, (uint64_t)b, &r) || r > INT32_MAX)
    return b2_fail(B2_E_LIMIT, "dtype: the item size exceeds 2 GiB");
  return (int64_t)r;
}

static int64_t value_size(lex *l, int depth);

/* A field "(name, dtype[, shape])"; its size. */
static int64_t field_size(lex *l, int depth) {
  const char *s;
  size_t n;
  int rc;
  if (!eat(l, '(')) return bad("expected a field tuple");
  if (eat(l, '(')) { /* (title, name) */
    if ((rc = quoted(l, &s, &n)) < 0) return rc;
    if (!eat(l, ',')) return bad("expected ',' in a field title");
    if ((rc = quoted(l, &s, &n)) < 0) return rc;
    if (!eat(l, ')')) return bad("expected ')' after a field title");
  } else if ((rc = quoted(l, &s, &n)) < 0) {
    return rc;
  }
  if (!eat(l, ',')) return bad("expected ',' after a field name");
  int64_t size = value_size(l, depth + 1);
  if (size < 0) return size;
  if (eat(l, ',') && peek(l) != ')') {
    int64_t c = shape_count(l);
    if (c < 0) return c;
    size = times(size, c);
    if (size < 0) return size;
    eat(l, ',');
  }
  if (!eat(l, ')')) return bad("expected ')' after a field");
  return size;
}

/* A dtype value: a type string, a list of fields or (dtype, shape). */
static int64_t value_size(lex *l, int depth) {
  if (depth > MAX_DEPTH) return b2_fail(B2_E_LIMIT, "dtype: nested too deeply");
  int c = peek(l);
  if (c == '\'' || c == '"') {
    const char *s;
    size_t n;
    int rc = quoted(l, &s, &n);
    return rc < 0 ? rc : simple_size(s, n);
  }
  if (eat(l, '[')) {
    uint64_t total = 0;
    while (!eat(l, ']')) {
      int64_t f = field_size(l, depth);
      if (f < 0) return f;
      total += (uint64_t)f;
      if (total > INT32_MAX) return b2_fail(B2_E_LIMIT, "dtype: the item size exceeds 2 GiB");
      if (!eat(l, ',') && peek(l) != ']') return bad("expected ',' or ']' between fields");
    }
    return total ? (int64_t)total : bad("a structured dtype without fields");
  }
  if (eat(l, '(')) {
    int64_t size = value_size(l, depth + 1);
    if (size < 0) return size;
    if (!eat(l, ',')) return bad("expected ',' in a sub-array dtype");
    int64_t cnt = shape_count(l);
    if (cnt < 0) return cnt;
    eat(l, ',');
    if (!eat(l, ')')) return bad("expected ')' after a sub-array dtype");
    return times(size, cnt);
  }
  return bad("expected a type string, a list or a tuple");
}

int64_t b2_npy_descr_itemsize(const char *descr) {
  if (!descr) return b2_fail(B2_E_INVAL, "dtype: none given");
  size_t n = strlen(descr);
  if (descr[0] != '[' && descr[0] != '(') return simple_size(descr, n);
  lex l = {descr, descr + n};
  int64_t size = value_size(&l, 0);
  if (size < 0) return size;
  if (peek(&l) != -1) return bad("junk after the dtype");
  if (size == 0) return bad("item size 0");
  return size;
}
