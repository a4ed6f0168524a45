/*
 * dtype.c - NumPy dtypes as python-blosc2 stores them and as .npy files
 * describe them, and the conversion between the two.
 *
 * The b2nd metalayer holds a dtype as text.  python-blosc2 writes
 * `dtype.str` ("<f8", "|S7", "<M8[ns]") for every dtype except void ones,
 * where it writes `str(dtype)`: a list literal for packed structured dtypes
 * ("[('a', '<i4', (2, 3)), ('b', 'S3')]") and a dict literal for padded or
 * aligned ones ("{'names': [...], 'formats': [...], 'offsets': [...],
 * 'itemsize': 16, 'aligned': True}").  It reads the text back with
 * numpy.dtype(text), or numpy.dtype(ast.literal_eval(text)) when that fails.
 *
 * A .npy header's 'descr' is what numpy.lib.format.dtype_to_descr gives:
 * `dtype.str` for a plain dtype, `dtype.descr` for a structured one (a list
 * of (name, descr[, shape]) tuples in field order, padding as unnamed
 * '|Vn' fields, every scalar spelled as dtype.str).  numpy.load rebuilds the
 * dtype from it with descr_to_dtype (padding dropped, offsets summed).
 *
 * Both directions go through one model: the text is read as a Python
 * literal (strings with their escapes, integers, None, True/False, lists,
 * tuples, dicts), the literal is turned into a dtype tree as NumPy would
 * build it (type strings and char codes, sub-arrays, fields with titles,
 * explicit or computed offsets), and the tree is written back either as
 * NumPy's descr or as NumPy's str(dtype).  The text is untrusted: nesting
 * is bounded, every size is overflow-checked, nothing recurses deeper than
 * MAX_DEPTH dtype levels.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "b2_b2nd.h"
#include "b2_error.h"
#include "b2nd/b2nd_int.h"
#include "common/util.h"

#define MAX_DEPTH 32           /* nested dtypes */
#define MAX_LIT_DEPTH (3 * MAX_DEPTH + 4) /* nested literals */
#define MAX_SUBDIM 64          /* NumPy's limit on sub-array dimensions */
#define SIZE_MAX32 INT32_MAX

static int bad(const char *what) { return b2_fail(B2_E_FORMAT, "dtype: %s", what); }

/* ---- Python literals ---------------------------------------------------- */

enum { L_STR, L_INT, L_NONE, L_BOOL, L_LIST, L_TUPLE, L_DICT };

typedef struct lit {
  int type;
  char *s;   /* L_STR: UTF-8 content, NUL-terminated (owned) */
  size_t n;  /* L_STR: length */
  int64_t i; /* L_INT, L_BOOL */
  struct lit **items; /* L_LIST, L_TUPLE; L_DICT: key, value, key, ... */
  size_t nitems;
} lit;

static void lit_free(lit *v) {
  if (!v) return;
  for (size_t k = 0; k < v->nitems; k++) lit_free(v->items[k]);
  free(v->items);
  free(v->s);
  free(v);
}

static int peek(b2_lex *l) {
  b2_lex_ws(l);
  return l->p < l->end ? (unsigned char)*l->p : -1;
}

/* Append code point cp as UTF-8. */
static size_t put_utf8(char *d, uint32_t cp) {
  if (cp < 0x80) {
    d[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    d[0] = (char)(0xc0 | cp >> 6);
    d[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
  }
  if (cp < 0x10000) {
    d[0] = (char)(0xe0 | cp >> 12);
    d[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    d[2] = (char)(0x80 | (cp & 0x3f));
    return 3;
  }
  d[0] = (char)(0xf0 | cp >> 18);
  d[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
  d[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
  d[3] = (char)(0x80 | (cp & 0x3f));
  return 4;
}

static int hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* A quoted Python string with its escapes, as UTF-8 (owned by v). */
static int lit_string(b2_lex *l, lit *v) {
  char q = *l->p++;
  const char *start = l->p;
  while (l->p < l->end && *l->p != q && *l->p != '\n')
    l->p += *l->p == '\\' && l->end - l->p > 1 ? 2 : 1;
  if (l->p >= l->end || *l->p != q) return bad("unterminated string");
  const char *stop = l->p++;
  /* an escape never grows: \xHH (4) -> <= 2, \uHHHH (6) -> <= 3, \U (10) -> <= 4 */
  char *d = malloc((size_t)(stop - start) + 1);
  if (!d) return b2_fail(B2_E_NOMEM, "dtype: no memory");
  size_t n = 0;
  for (const char *p = start; p < stop;) {
    if (*p != '\\') {
      d[n++] = *p++;
      continue;
    }
    p++;
    char e = *p++;
    const char *simple = strchr("\\'\"abfnrtv", e);
    if (e && simple) {
      static const char map[] = "\\'\"\a\b\f\n\r\t\v";
      d[n++] = map[simple - "\\'\"abfnrtv"];
      continue;
    }
    int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    uint32_t cp = 0;
    if (digits) {
      if (stop - p < digits) goto bad_escape;
      for (int k = 0; k < digits; k++) {
        int h = hexval((unsigned char)p[k]);
        if (h < 0) goto bad_escape;
        cp = cp << 4 | (uint32_t)h;
      }
      p += digits;
    } else if (e >= '0' && e <= '7') {
      cp = (uint32_t)(e - '0');
      for (int k = 0; k < 2 && p < stop && *p >= '0' && *p <= '7'; k++) cp = cp * 8 + (uint32_t)(*p++ - '0');
    } else {
      goto bad_escape;
    }
    if (cp == 0 || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) goto bad_escape;
    n += put_utf8(d + n, cp);
  }
  d[n] = 0;
  if (b2_npy_text_kind(d) < 0) { /* Python text is Unicode: UTF-8 here */
    free(d);
    return bad("a string is not valid UTF-8");
  }
  v->type = L_STR;
  v->s = d;
  v->n = n;
  return 0;
bad_escape:
  free(d);
  return bad("an escape in a string is not valid here");
}

/* How the dtype text can be stored: 0 ASCII, 1 every code point fits
 * Latin-1, 2 needs UTF-8 (format 3.0), -1 not valid UTF-8. */
int b2_npy_text_kind(const char *s) {
  int kind = 0;
  const unsigned char *p = (const unsigned char *)s;
  while (p && *p) {
    if (*p < 0x80) {
      p++;
      continue;
    }
    int extra = *p >= 0xf0 && *p <= 0xf4 ? 3 : *p >= 0xe0 ? 2 : *p >= 0xc2 ? 1 : -1;
    if (extra < 0 || *p > 0xf4) return -1;
    uint32_t cp = *p & (0x3f >> extra);
    for (int k = 1; k <= extra; k++) {
      if ((p[k] & 0xc0) != 0x80) return -1;
      cp = cp << 6 | (p[k] & 0x3f);
    }
    if ((extra == 2 && cp < 0x800) || (extra == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
      return -1;
    kind = B2_MAX(kind, cp <= 0xff ? 1 : 2);
    p += 1 + extra;
  }
  return kind;
}

static int lit_parse(b2_lex *l, int depth, lit **out);

/* Items up to `close`, separated by commas (a trailing comma allowed);
 * a dict reads key ':' value pairs. */
static int lit_items(b2_lex *l, int depth, char close, int dict, lit *v, int *commas) {
  size_t cap = 0;
  for (;;) {
    if (b2_lex_eat(l, close)) return 0;
    for (int k = 0; k <= dict; k++) {
      if (k == 1 && !b2_lex_eat(l, ':')) return bad("expected ':' in a dict");
      lit *item;
      int rc = lit_parse(l, depth + 1, &item);
      if (rc < 0) return rc;
      if (v->nitems == cap) {
        size_t nc = cap ? cap * 2 : 4;
        lit **ni = realloc(v->items, nc * sizeof *ni);
        if (!ni) {
          lit_free(item);
          return b2_fail(B2_E_NOMEM, "dtype: no memory");
        }
        v->items = ni;
        cap = nc;
      }
      v->items[v->nitems++] = item;
    }
    if (b2_lex_eat(l, ',')) (*commas)++;
    else if (peek(l) != close) return bad("expected ',' between items");
  }
}

static int lit_parse(b2_lex *l, int depth, lit **out) {
  *out = NULL;
  if (depth > MAX_LIT_DEPTH) return b2_fail(B2_E_LIMIT, "dtype: nested too deeply");
  int c = peek(l);
  lit *v = calloc(1, sizeof *v);
  if (!v) return b2_fail(B2_E_NOMEM, "dtype: no memory");
  int rc = 0;
  if (c == '\'' || c == '"') {
    rc = lit_string(l, v);
  } else if (c >= '0' && c <= '9') {
    v->type = L_INT;
    while (l->p < l->end && *l->p >= '0' && *l->p <= '9') {
      v->i = v->i * 10 + (*l->p++ - '0');
      if (v->i > SIZE_MAX32) {
        rc = b2_fail(B2_E_LIMIT, "dtype: a number is too large");
        break;
      }
    }
  } else if (c == '[' || c == '(' || c == '{') {
    l->p++;
    v->type = c == '[' ? L_LIST : c == '(' ? L_TUPLE : L_DICT;
    int commas = 0;
    rc = lit_items(l, depth, c == '[' ? ']' : c == '(' ? ')' : '}', c == '{', v, &commas);
    if (rc == 0 && c == '(' && v->nitems == 1 && !commas) { /* "(x)" is x, not a tuple */
      lit *inner = v->items[0];
      v->nitems = 0;
      lit_free(v);
      *out = inner;
      return 0;
    }
  } else {
    static const struct {
      const char *w;
      int type, val;
    } words[] = {{"None", L_NONE, 0}, {"True", L_BOOL, 1}, {"False", L_BOOL, 0}};
    rc = bad("expected a string, a number, a list, a tuple or a dict");
    for (size_t k = 0; k < sizeof words / sizeof *words; k++) {
      size_t wl = strlen(words[k].w);
      if ((size_t)(l->end - l->p) >= wl && !memcmp(l->p, words[k].w, wl)) {
        l->p += wl;
        v->type = words[k].type;
        v->i = words[k].val;
        rc = 0;
        break;
      }
    }
  }
  if (rc < 0) {
    lit_free(v);
    return rc;
  }
  *out = v;
  return 0;
}

/* ---- the dtype model ---------------------------------------------------- */

enum { D_SCALAR, D_SUB, D_STRUCT };

typedef struct dt dt;

typedef struct field {
  char *name, *title; /* UTF-8; title NULL when none (owned) */
  dt *type;
  int64_t offset;
} field;

struct dt {
  int kind;
  int64_t size, align;
  /* D_SCALAR: byte order ('<', '>', '|'), kind letter, datetime unit */
  char order, code;
  char unit[24];
  /* D_SUB */
  dt *base;
  int nshape;
  int64_t shape[MAX_SUBDIM];
  /* D_STRUCT */
  field *f;
  size_t nf;
  int aligned;
};

static void dt_free(dt *d) {
  if (!d) return;
  dt_free(d->base);
  for (size_t k = 0; k < d->nf; k++) {
    free(d->f[k].name);
    free(d->f[k].title);
    dt_free(d->f[k].type);
  }
  free(d->f);
  free(d);
}

static int too_big(void) { return b2_fail(B2_E_LIMIT, "dtype: the item size exceeds 2 GiB"); }

/* A type string as numpy.dtype reads it: "<f8", "|S10", "<U3", "<M8[ns]",
 * "?", "u1", a char code ("d", "i") or a few names ("float64"). */
static int scalar(const char *s, size_t n, dt **out) {
  static const struct {
    const char *name;
    char code;
    int size;
  } names[] = {
      {"bool", 'b', 1},     {"int8", 'i', 1},      {"int16", 'i', 2},     {"int32", 'i', 4},
      {"int64", 'i', 8},    {"uint8", 'u', 1},     {"uint16", 'u', 2},    {"uint32", 'u', 4},
      {"uint64", 'u', 8},   {"float16", 'f', 2},   {"float32", 'f', 4},   {"float64", 'f', 8},
      {"complex64", 'c', 8}, {"complex128", 'c', 16}, {"?", 'b', 1},      {"b", 'i', 1},
      {"B", 'u', 1},        {"h", 'i', 2},         {"H", 'u', 2},         {"i", 'i', 4},
      {"I", 'u', 4},        {"l", 'i', 8},         {"L", 'u', 8},         {"q", 'i', 8},
      {"Q", 'u', 8},        {"p", 'i', 8},         {"P", 'u', 8},         {"e", 'f', 2},
      {"f", 'f', 4},        {"d", 'f', 8},         {"g", 'f', 16},        {"F", 'c', 8},
      {"D", 'c', 16},       {"G", 'c', 32},
  };
  const char *p = s, *end = s + n;
  char order = 0;
  if (p < end && strchr("<>|=", *p)) order = *p++;
  if (p >= end) return bad("empty type string");
  dt *d = calloc(1, sizeof *d);
  if (!d) return b2_fail(B2_E_NOMEM, "dtype: no memory");
  d->kind = D_SCALAR;
  int64_t size = -1;
  char code = 0;
  for (size_t k = 0; k < sizeof names / sizeof *names; k++)
    if ((size_t)(end - p) == strlen(names[k].name) && !memcmp(p, names[k].name, (size_t)(end - p))) {
      code = names[k].code;
      size = names[k].size;
      p = end;
      break;
    }
  if (!code) {
    code = *p++;
    if (code == 'O') {
      free(d);
      return b2_fail(B2_E_UNSUPPORTED, "dtype: object arrays hold no raw data");
    }
    if (code == 'a') code = 'S';
    if (p < end && *p >= '0' && *p <= '9') {
      size = 0;
      while (p < end && *p >= '0' && *p <= '9') {
        size = size * 10 + (*p++ - '0');
        if (size > SIZE_MAX32) {
          free(d);
          return b2_fail(B2_E_LIMIT, "dtype: a size is too large");
        }
      }
    } else if (code == 'M' || code == 'm') {
      size = 8;
    } else {
      free(d);
      return b2_fail(B2_E_FORMAT, "dtype: '%.*s' is not a type string", (int)n, s);
    }
    if ((code == 'M' || code == 'm') && p < end && *p == '[') { /* a unit: [ns], [10us] */
      const char *u = p;
      while (p < end && *p != ']') p++;
      if (p >= end) {
        free(d);
        return bad("unterminated datetime unit");
      }
      p++;
      if ((size_t)(p - u) >= sizeof d->unit) {
        free(d);
        return bad("datetime unit too long");
      }
      memcpy(d->unit, u, (size_t)(p - u));
    }
  }
  if (p != end) {
    free(d);
    return bad("junk after the type string");
  }
  static const int ints[] = {1, 2, 4, 8, 0}, floats[] = {2, 4, 8, 12, 16, 0},
                   complexes[] = {8, 16, 24, 32, 0}, one[] = {1, 0}, eight[] = {8, 0};
  const int *ok = NULL;
  int64_t unit = 1, align = size;
  switch (code) {
    case 'b': ok = one; break;
    case 'i': case 'u': ok = ints; break;
    case 'f': ok = floats; break;
    case 'c': ok = complexes; align = size / 2; break;
    case 'M': case 'm': ok = eight; break;
    case 'S': case 'V': align = 1; break;
    case 'U': unit = 4; align = 4; break;
    default: free(d); return b2_fail(B2_E_FORMAT, "dtype: unknown kind '%c'", code);
  }
  int valid = 0;
  if (ok) {
    for (const int *k = ok; *k; k++) valid |= size == *k;
  } else {
    valid = size > 0;
  }
  if (!valid) {
    free(d);
    return b2_fail(B2_E_FORMAT, "dtype: size %lld is not valid for kind '%c'", (long long)size, code);
  }
  if (size * unit > SIZE_MAX32) {
    free(d);
    return too_big();
  }
  d->code = code;
  d->size = size * unit;
  d->align = align;
  /* NumPy's dtype.str spelling: '|' where byte order means nothing, the
   * native '<' for '=' or none */
  if (code == 'b' || code == 'S' || code == 'V' || ((code == 'i' || code == 'u') && size == 1))
    d->order = '|';
  else
    d->order = order == '>' ? '>' : '<';
  *out = d;
  return 0;
}

static int build(const lit *v, int depth, int npy, dt **out);

/* A shape: an integer or a tuple of integers. */
static int get_shape(const lit *v, int *nd, int64_t *shape) {
  if (v->type == L_INT) {
    *nd = 1;
    shape[0] = v->i;
    return 0;
  }
  if (v->type != L_TUPLE) return bad("a sub-array shape is not an integer or a tuple");
  if (v->nitems > MAX_SUBDIM) return b2_fail(B2_E_LIMIT, "dtype: a sub-array has too many dimensions");
  for (size_t k = 0; k < v->nitems; k++) {
    if (v->items[k]->type != L_INT) return bad("a sub-array shape holds a non-integer");
    shape[k] = v->items[k]->i;
  }
  *nd = (int)v->nitems;
  return 0;
}

/* (base, shape) as numpy.dtype builds it: no shape gives base itself (a
 * sub-array base stays one: NumPy keeps ('<i2', (2,)) inside (x, (3,))). */
static int subarray(dt *base, int nd, const int64_t *shape, dt **out) {
  if (nd == 0) {
    *out = base;
    return 0;
  }
  dt *d = calloc(1, sizeof *d);
  if (!d) {
    dt_free(base);
    return b2_fail(B2_E_NOMEM, "dtype: no memory");
  }
  d->kind = D_SUB;
  d->align = base->align;
  int64_t count = 1;
  for (int k = 0; k < nd; k++) d->shape[d->nshape++] = shape[k];
  d->base = base;
  for (int k = 0; k < d->nshape; k++) {
    uint64_t r;
    if (b2_mul_overflow_u64((uint64_t)count, (uint64_t)d->shape[k], &r) || r > SIZE_MAX32) {
      dt_free(d);
      return b2_fail(B2_E_LIMIT, "dtype: a sub-array is too large");
    }
    count = (int64_t)r;
  }
  uint64_t total;
  if (b2_mul_overflow_u64((uint64_t)count, (uint64_t)d->base->size, &total) || total > SIZE_MAX32) {
    dt_free(d);
    return too_big();
  }
  d->size = (int64_t)total;
  *out = d;
  return 0;
}

static dt *new_struct(void) {
  dt *d = calloc(1, sizeof *d);
  if (d) {
    d->kind = D_STRUCT;
    d->align = 1;
  }
  return d;
}

static char *dup_str(const char *s) {
  char *d = strdup(s);
  if (!d) b2_fail(B2_E_NOMEM, "dtype: no memory");
  return d;
}

/* Add a field (takes `type`); name and title are copied. */
static int add_field(dt *d, const char *name, const char *title, dt *type, int64_t offset) {
  if ((d->nf & (d->nf - 1)) == 0) { /* grow at powers of two */
    field *nf = realloc(d->f, (d->nf ? d->nf * 2 : 1) * sizeof *nf);
    if (!nf) {
      dt_free(type);
      return b2_fail(B2_E_NOMEM, "dtype: no memory");
    }
    d->f = nf;
  }
  field *f = &d->f[d->nf];
  memset(f, 0, sizeof *f);
  f->type = type;
  f->offset = offset;
  d->nf++;
  if (!(f->name = dup_str(name))) return B2_E_NOMEM;
  if (title && !(f->title = dup_str(title))) return B2_E_NOMEM;
  return 0;
}

static int64_t round_up(int64_t v, int64_t a) { return a > 1 ? (v + a - 1) / a * a : v; }

/* A field name: a string, or a (title, name) pair. */
static int field_name(const lit *v, const char **name, const char **title) {
  *title = NULL;
  if (v->type == L_STR) {
    *name = v->s;
    return 0;
  }
  if (v->type == L_TUPLE && v->nitems == 2 && v->items[0]->type == L_STR &&
      v->items[1]->type == L_STR) {
    *title = v->items[0]->s;
    *name = v->items[1]->s;
    return 0;
  }
  return bad("a field name is not a string or a (title, name) pair");
}

/* A list of fields.  As numpy.dtype(list): packed, an empty name becomes
 * 'f<index>'.  As a .npy descr (descr_to_dtype): unnamed plain void fields
 * are padding, left out but counted in the offsets. */
static int build_list(const lit *v, int depth, int npy, dt **out) {
  if (v->nitems == 0) return bad("a structured dtype without fields");
  dt *d = new_struct();
  if (!d) return b2_fail(B2_E_NOMEM, "dtype: no memory");
  int64_t off = 0;
  int rc = 0;
  for (size_t k = 0; k < v->nitems && rc == 0; k++) {
    const lit *f = v->items[k];
    const char *name = NULL, *title = NULL;
    if (f->type != L_TUPLE || f->nitems < 2 || f->nitems > 3) {
      rc = bad("a field is not a (name, dtype[, shape]) tuple");
      break;
    }
    if ((rc = field_name(f->items[0], &name, &title)) < 0) break;
    dt *t;
    if ((rc = build(f->items[1], depth + 1, npy, &t)) < 0) break;
    if (f->nitems == 3) {
      int nd;
      int64_t shape[MAX_SUBDIM];
      if ((rc = get_shape(f->items[2], &nd, shape)) < 0) {
        dt_free(t);
        break;
      }
      if ((rc = subarray(t, nd, shape, &t)) < 0) break; /* t consumed */
    }
    int64_t size = t->size;
    char gen[32];
    if (!*name && !title) {
      if (npy && t->kind == D_SCALAR && t->code == 'V') {
        dt_free(t);
        t = NULL;
      } else if (!npy) {
        snprintf(gen, sizeof gen, "f%zu", k);
        name = gen;
      }
    }
    if (t) rc = add_field(d, name, title, t, off);
    if (off + size > SIZE_MAX32) rc = too_big();
    off += size;
  }
  d->size = off;
  if (rc == 0 && d->nf == 0) rc = bad("a structured dtype without fields");
  if (rc < 0) {
    dt_free(d);
    return rc;
  }
  *out = d;
  return 0;
}

static const lit *dict_get(const lit *v, const char *key) {
  for (size_t k = 0; k + 1 < v->nitems; k += 2)
    if (v->items[k]->type == L_STR && !strcmp(v->items[k]->s, key)) return v->items[k + 1];
  return NULL;
}

/* The dict form {'names', 'formats'[, 'offsets', 'titles', 'itemsize',
 * 'aligned']}, as numpy.dtype(dict) builds it. */
static int build_dict(const lit *v, int depth, int npy, dt **out) {
  const lit *names = dict_get(v, "names"), *formats = dict_get(v, "formats"),
            *offsets = dict_get(v, "offsets"), *titles = dict_get(v, "titles"),
            *itemsize = dict_get(v, "itemsize"), *aligned = dict_get(v, "aligned");
  for (size_t k = 0; k + 1 < v->nitems; k += 2) {
    const lit *key = v->items[k];
    if (key->type != L_STR || !strstr(" names formats offsets titles itemsize aligned ", key->s) ||
        strchr(key->s, ' ') || !*key->s)
      return bad("a dict dtype has an unknown key");
  }
  if (!names || !formats || names->type != L_LIST || formats->type != L_LIST ||
      names->nitems != formats->nitems || names->nitems == 0)
    return bad("a dict dtype needs lists 'names' and 'formats' of one length");
  size_t n = names->nitems;
  if ((offsets && (offsets->type != L_LIST || offsets->nitems != n)) ||
      (titles && (titles->type != L_LIST || titles->nitems != n)) ||
      (itemsize && itemsize->type != L_INT) ||
      (aligned && aligned->type != L_BOOL))
    return bad("a dict dtype's 'offsets', 'titles', 'itemsize' or 'aligned' is malformed");
  dt *d = new_struct();
  if (!d) return b2_fail(B2_E_NOMEM, "dtype: no memory");
  d->aligned = aligned && aligned->i;
  int64_t off = 0, end = 0;
  int rc = 0;
  for (size_t k = 0; k < n && rc == 0; k++) {
    const lit *nm = names->items[k], *ti = titles ? titles->items[k] : NULL;
    if (nm->type != L_STR || (ti && ti->type != L_STR && ti->type != L_NONE)) {
      rc = bad("a dict dtype's names and titles must be strings");
      break;
    }
    dt *t;
    if ((rc = build(formats->items[k], depth + 1, npy, &t)) < 0) break;
    if (d->aligned) d->align = B2_MAX(d->align, t->align);
    if (offsets) {
      if (offsets->items[k]->type != L_INT) {
        dt_free(t);
        rc = bad("a dict dtype's offsets must be integers");
        break;
      }
      off = offsets->items[k]->i;
    } else if (d->aligned) {
      off = round_up(off, t->align);
    }
    int64_t size = t->size;
    rc = add_field(d, nm->s, ti && ti->type == L_STR ? ti->s : NULL, t, off);
    if (off + size > SIZE_MAX32) rc = too_big();
    off += size;
    end = B2_MAX(end, off);
  }
  if (rc == 0) {
    if (d->aligned) end = round_up(end, d->align);
    if (itemsize && itemsize->i < end)
      rc = bad("a dict dtype's itemsize is smaller than its fields");
    d->size = itemsize ? itemsize->i : end;
    if (d->size > SIZE_MAX32) rc = too_big();
  }
  if (rc < 0) {
    dt_free(d);
    return rc;
  }
  *out = d;
  return 0;
}

static int build(const lit *v, int depth, int npy, dt **out) {
  if (depth > MAX_DEPTH) return b2_fail(B2_E_LIMIT, "dtype: nested too deeply");
  switch (v->type) {
    case L_STR: return scalar(v->s, v->n, out);
    case L_LIST: return build_list(v, depth, npy, out);
    case L_DICT:
      if (npy) return bad("a .npy descr is not a dict");
      return build_dict(v, depth, npy, out);
    case L_TUPLE: {
      if (v->nitems != 2) return bad("a sub-array dtype is not a (dtype, shape) pair");
      int nd;
      int64_t shape[MAX_SUBDIM];
      int rc = get_shape(v->items[1], &nd, shape);
      if (rc < 0) return rc;
      dt *base;
      if ((rc = build(v->items[0], depth + 1, npy, &base)) < 0) return rc;
      return subarray(base, nd, shape, out);
    }
    default: return bad("expected a type string, a list, a dict or a tuple");
  }
}

/* Parse dtype text: a bare type string, or a literal. */
static int parse_text(const char *text, int npy, dt **out) {
  if (!text) return b2_fail(B2_E_INVAL, "dtype: none given");
  size_t n = strlen(text);
  if (n > B2_B2ND_MAXDTYPE) return b2_fail(B2_E_LIMIT, "dtype: text of %zu bytes is too long", n);
  if (text[0] != '[' && text[0] != '(' && text[0] != '{') return scalar(text, n, out);
  b2_lex l = {text, text + n};
  lit *v;
  int rc = lit_parse(&l, 0, &v);
  if (rc < 0) return rc;
  if (peek(&l) != -1) rc = bad("junk after the dtype");
  if (rc == 0) rc = build(v, 0, npy, out);
  lit_free(v);
  return rc;
}

/* ---- writing text ------------------------------------------------------- */

typedef struct sbuf {
  char *p;
  size_t n, cap;
  int err;
} sbuf;

static void sput(sbuf *b, const char *s, size_t n) {
  if (b->err) return;
  if (b->n + n + 1 > b->cap) {
    size_t nc = B2_MAX(b->cap * 2, b->n + n + 64);
    char *np = realloc(b->p, nc);
    if (!np) {
      b->err = 1;
      return;
    }
    b->p = np;
    b->cap = nc;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = 0;
}

static void sputs(sbuf *b, const char *s) { sput(b, s, strlen(s)); }

static void sprint(sbuf *b, const char *fmt, long long v) {
  char t[48];
  snprintf(t, sizeof t, fmt, v);
  sputs(b, t);
}

/* Code points Python's repr() escapes beyond ASCII controls: C1 controls,
 * separators and format characters that str.isprintable() refuses. */
static int py_unprintable(uint32_t cp) {
  return (cp >= 0x7f && cp <= 0xa0) || cp == 0xad || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200f) ||
         (cp >= 0x2028 && cp <= 0x202f) || (cp >= 0x205f && cp <= 0x206f) || cp == 0x3000 ||
         cp == 0xfeff || (cp >= 0xfff9 && cp <= 0xfffb);
}

/* repr(s) of a UTF-8 string as Python writes it. */
static void put_repr(sbuf *b, const char *s) {
  char q = strchr(s, '\'') && !strchr(s, '"') ? '"' : '\'';
  sput(b, &q, 1);
  for (const unsigned char *p = (const unsigned char *)s; *p;) {
    uint32_t cp = *p;
    int len = 1;
    if (cp >= 0x80) { /* valid UTF-8 from the parser or b2_npy_parse */
      len = cp >= 0xf0 ? 4 : cp >= 0xe0 ? 3 : 2;
      cp &= 0x3fu >> (len - 1);
      for (int k = 1; k < len && p[k]; k++) cp = cp << 6 | (p[k] & 0x3f);
    }
    char t[16];
    if (cp == (uint32_t)q || cp == '\\') {
      t[0] = '\\';
      t[1] = (char)cp;
      sput(b, t, 2);
    } else if (cp == '\n' || cp == '\r' || cp == '\t') {
      sputs(b, cp == '\n' ? "\\n" : cp == '\r' ? "\\r" : "\\t");
    } else if (cp < 0x20 || py_unprintable(cp)) {
      snprintf(t, sizeof t, cp < 0x100 ? "\\x%02x" : "\\u%04x", (unsigned)cp);
      sputs(b, t);
    } else {
      sput(b, (const char *)p, (size_t)len);
    }
    for (int k = 0; k < len && *p; k++) p++;
  }
  sput(b, &q, 1);
}

static void put_shape(sbuf *b, const dt *d) {
  sputs(b, "(");
  for (int k = 0; k < d->nshape; k++) sprint(b, k ? ", %lld" : "%lld", d->shape[k]);
  sputs(b, d->nshape == 1 ? ",)" : ")");
}

/* A field's name, or its (title, name) pair, and the comma after it. */
static void put_field_name(sbuf *b, const field *f) {
  if (f->title) {
    sputs(b, "(");
    put_repr(b, f->title);
    sputs(b, ", ");
  }
  put_repr(b, f->name);
  sputs(b, f->title ? "), " : ", ");
}

/* dtype.str of a scalar: "<f8", "|S3", "<U5", "<M8[ns]". */
static void put_str(sbuf *b, const dt *d) {
  char t[64];
  snprintf(t, sizeof t, "%c%c%lld%s", d->order, d->code,
           (long long)(d->code == 'U' ? d->size / 4 : d->size), d->unit);
  sputs(b, t);
}

/* numpy.lib.format.dtype_to_descr, as Python literal text (a scalar's
 * string quoted when `quote`). */
static int put_descr(sbuf *b, const dt *d, int quote) {
  if (d->kind == D_SCALAR) {
    if (quote) sputs(b, "'");
    put_str(b, d);
    if (quote) sputs(b, "'");
    return 0;
  }
  if (d->kind == D_SUB) {
    sputs(b, "(");
    int rc = put_descr(b, d->base, 1);
    sputs(b, ", ");
    put_shape(b, d);
    sputs(b, ")");
    return rc;
  }
  int64_t off = 0;
  sputs(b, "[");
  for (size_t k = 0; k < d->nf; k++) {
    const field *f = &d->f[k];
    if (f->offset < off)
      return b2_fail(B2_E_UNSUPPORTED, "dtype: fields overlap or are out of order (NumPy has no descr for it)");
    if (k) sputs(b, ", ");
    if (f->offset > off) sprint(b, "('', '|V%lld'), ", f->offset - off);
    sputs(b, "(");
    put_field_name(b, f);
    const dt *t = f->type->kind == D_SUB ? f->type->base : f->type;
    int rc = put_descr(b, t, 1);
    if (rc < 0) return rc;
    if (f->type->kind == D_SUB) {
      sputs(b, ", ");
      put_shape(b, f->type);
    }
    sputs(b, ")");
    off = f->offset + f->type->size;
  }
  if (d->size > off) sprint(b, ", ('', '|V%lld')", d->size - off);
  sputs(b, "]");
  return 0;
}

static void put_struct_str(sbuf *b, const dt *d, int include_align);

/* NumPy's _construction_repr(dtype, short=True): the spelling of a field's
 * dtype inside str(dtype). */
static void put_construction(sbuf *b, const dt *d) {
  if (d->kind == D_STRUCT) {
    put_struct_str(b, d, 0);
  } else if (d->kind == D_SUB) {
    sputs(b, "(");
    put_construction(b, d->base);
    sputs(b, ", ");
    put_shape(b, d);
    sputs(b, ")");
  } else if (d->code == 'b') {
    sputs(b, "'?'");
  } else {
    char t[64];
    const char *order = d->order == '|' ? "" : d->order == '>' ? ">" : "<";
    if (d->code == 'S' || d->code == 'V') order = "";
    snprintf(t, sizeof t, "'%s%c%lld%s'", order, d->code,
             (long long)(d->code == 'U' ? d->size / 4 : d->size), d->unit);
    sputs(b, t);
  }
}

/* NumPy's _is_packed: fields in order without gaps (aligned offsets for an
 * aligned struct), nothing after them. */
static int is_packed(const dt *d) {
  int64_t total = 0, maxal = 1;
  for (size_t k = 0; k < d->nf; k++) {
    if (d->aligned) {
      total = round_up(total, d->f[k].type->align);
      maxal = B2_MAX(maxal, d->f[k].type->align);
    }
    if (d->f[k].offset != total) return 0;
    total += d->f[k].type->size;
  }
  if (d->aligned) total = round_up(total, maxal);
  return total == d->size;
}

/* NumPy's _struct_str: the list form when packed (and not an aligned
 * struct whose flag is to be shown), else the dict form. */
static void put_struct_str(sbuf *b, const dt *d, int include_align) {
  if (!(include_align && d->aligned) && is_packed(d)) {
    sputs(b, "[");
    for (size_t k = 0; k < d->nf; k++) {
      const field *f = &d->f[k];
      sputs(b, k ? ", (" : "(");
      put_field_name(b, f);
      if (f->type->kind == D_SUB) {
        put_construction(b, f->type->base);
        sputs(b, ", ");
        put_shape(b, f->type);
      } else {
        put_construction(b, f->type);
      }
      sputs(b, ")");
    }
    sputs(b, "]");
    return;
  }
  int titles = 0;
  sputs(b, "{'names': [");
  for (size_t k = 0; k < d->nf; k++) {
    if (k) sputs(b, ", ");
    put_repr(b, d->f[k].name);
    titles |= d->f[k].title != NULL;
  }
  sputs(b, "], 'formats': [");
  for (size_t k = 0; k < d->nf; k++) {
    if (k) sputs(b, ", ");
    put_construction(b, d->f[k].type);
  }
  sputs(b, "], 'offsets': [");
  for (size_t k = 0; k < d->nf; k++) sprint(b, k ? ", %lld" : "%lld", d->f[k].offset);
  if (titles) {
    sputs(b, "], 'titles': [");
    for (size_t k = 0; k < d->nf; k++) {
      if (k) sputs(b, ", ");
      if (d->f[k].title) put_repr(b, d->f[k].title);
      else sputs(b, "None");
    }
  }
  sprint(b, "], 'itemsize': %lld", d->size);
  sputs(b, include_align && d->aligned ? ", 'aligned': True}" : "}");
}

static int finish(sbuf *b, int rc, char **out) {
  if (rc == 0 && b->err) rc = b2_fail(B2_E_NOMEM, "dtype: no memory");
  if (rc < 0) {
    free(b->p);
    return rc;
  }
  *out = b->p;
  return 0;
}

/* ---- msgpack descrs ------------------------------------------------------
 * python-blosc2 stores a tensor's structured dtype as the msgpack of
 * dtype.descr: a list of (name, format[, shape]) tuples, a name either a
 * string or a (title, name) pair, a format a string or a nested list.  It
 * writes a tuple as an array whose first item is the string "__tuple__"
 * (2.7.1, 3.12.2 and 4.14.1 alike); msgpack's default is a plain array.
 * The position of each item says which of list and tuple it is, so both
 * read the same. */

#define MP_TUPLE "__tuple__"

int b2_tensor_mp_seq(b2_mp_reader *r, uint32_t *n) {
  int rc = b2_mp_read_array(r, n);
  if (rc < 0 || *n == 0) return rc;
  b2_mp_reader ahead = *r;
  b2_mp_item it;
  if (b2_mp_next(&ahead, &it) == 0 && it.kind == B2_MP_STR && it.len == sizeof MP_TUPLE - 1 &&
      !memcmp(it.data, MP_TUPLE, it.len)) {
    *r = ahead;
    (*n)--;
  }
  return 0;
}

static int mp_kind(const b2_mp_reader *r) {
  b2_mp_reader ahead = *r;
  b2_mp_item it;
  return b2_mp_next(&ahead, &it) < 0 ? -1 : it.kind;
}

/* A new literal of `type` with room for n items. */
static int mp_lit(int type, uint32_t n, lit **out) {
  *out = calloc(1, sizeof **out);
  if (*out && n) (*out)->items = calloc(n, sizeof *(*out)->items);
  if (!*out || (n && !(*out)->items)) {
    lit_free(*out);
    *out = NULL;
    return b2_fail(B2_E_NOMEM, "dtype: no memory");
  }
  (*out)->type = type;
  return 0;
}

static int mp_str(b2_mp_reader *r, lit **out) {
  const uint8_t *s;
  uint32_t n;
  int rc = b2_mp_read_str(r, &s, &n);
  if (rc < 0) return rc;
  if (n > B2_B2ND_MAXDTYPE || memchr(s, 0, n)) return bad("a string is too long or holds a NUL");
  if ((rc = mp_lit(L_STR, 0, out)) < 0) return rc;
  (*out)->s = malloc((size_t)n + 1);
  if (!(*out)->s) {
    lit_free(*out);
    return b2_fail(B2_E_NOMEM, "dtype: no memory");
  }
  memcpy((*out)->s, s, n);
  (*out)->s[n] = 0;
  (*out)->n = n;
  if (b2_npy_text_kind((*out)->s) < 0) {
    lit_free(*out);
    return bad("a string is not valid UTF-8");
  }
  return 0;
}

/* A sub-array length. */
static int mp_int(b2_mp_reader *r, lit **out) {
  int64_t v;
  int rc = b2_mp_read_int(r, &v);
  if (rc == 0 && (v < 0 || v > SIZE_MAX32)) rc = b2_fail(B2_E_LIMIT, "dtype: a sub-array length is out of range");
  if (rc == 0 && (rc = mp_lit(L_INT, 0, out)) == 0) (*out)->i = v;
  return rc;
}

/* A sub-array shape (an integer or a sequence of them) or a (title, name)
 * pair: a tuple of n items of one msgpack kind. */
static int mp_tuple_of(b2_mp_reader *r, int kind, uint32_t lo, uint32_t hi, lit **out) {
  uint32_t n;
  int rc = b2_tensor_mp_seq(r, &n);
  if (rc < 0) return rc;
  if (n < lo || n > hi) return bad("a tuple of the wrong length");
  if ((rc = mp_lit(L_TUPLE, n, out)) < 0) return rc;
  for (uint32_t k = 0; k < n && rc == 0; k++) {
    lit **item = &(*out)->items[(*out)->nitems];
    rc = kind == B2_MP_STR ? mp_str(r, item) : mp_int(r, item);
    if (rc == 0) (*out)->nitems++;
  }
  if (rc < 0) lit_free(*out);
  return rc;
}

static int mp_fields(b2_mp_reader *r, int depth, lit **out);

/* A format: a type string, or a nested list of fields. */
static int mp_format(b2_mp_reader *r, int depth, lit **out) {
  return mp_kind(r) == B2_MP_STR ? mp_str(r, out) : mp_fields(r, depth + 1, out);
}

static int mp_field(b2_mp_reader *r, int depth, lit **out) {
  uint32_t n;
  int rc = b2_tensor_mp_seq(r, &n);
  if (rc < 0) return rc;
  if (n < 2 || n > 3) return bad("a field is not a (name, dtype[, shape]) tuple");
  if ((rc = mp_lit(L_TUPLE, n, out)) < 0) return rc;
  lit **items = (*out)->items;
  rc = mp_kind(r) == B2_MP_STR ? mp_str(r, &items[0]) : mp_tuple_of(r, B2_MP_STR, 2, 2, &items[0]);
  if (rc == 0) (*out)->nitems++, rc = mp_format(r, depth, &items[1]);
  if (rc == 0) (*out)->nitems++;
  if (rc == 0 && n == 3) {
    rc = mp_kind(r) == B2_MP_INT ? mp_int(r, &items[2]) : mp_tuple_of(r, B2_MP_INT, 0, MAX_SUBDIM, &items[2]);
    if (rc == 0) (*out)->nitems++;
  }
  if (rc < 0) lit_free(*out);
  return rc;
}

static int mp_fields(b2_mp_reader *r, int depth, lit **out) {
  if (depth > MAX_DEPTH) return b2_fail(B2_E_LIMIT, "dtype: nested too deeply");
  uint32_t n;
  int rc = b2_tensor_mp_seq(r, &n);
  if (rc < 0) return rc;
  if (n == 0) return bad("a structured dtype without fields");
  if (n > r->len - r->pos) return b2_fail(B2_E_TRUNCATED, "dtype: %u fields in fewer bytes", n);
  if ((rc = mp_lit(L_LIST, n, out)) < 0) return rc;
  for (uint32_t k = 0; k < n && rc == 0; k++) {
    rc = mp_field(r, depth, &(*out)->items[k]);
    if (rc == 0) (*out)->nitems++;
  }
  if (rc < 0) lit_free(*out);
  return rc;
}

int b2_npy_descr_from_mp(b2_mp_reader *r, char **descr) {
  *descr = NULL;
  lit *v;
  int rc = mp_format(r, 0, &v);
  if (rc < 0) return rc;
  dt *d;
  rc = build(v, 0, 1, &d); /* as numpy.lib.format.descr_to_dtype reads it */
  lit_free(v);
  if (rc < 0) return rc;
  sbuf b = {0}; /* item size 0 and sub-array dtypes: refused as any descr */
  rc = put_descr(&b, d, 0);
  dt_free(d);
  return finish(&b, rc, descr);
}

/* ---- public ------------------------------------------------------------- */

/* Parse `text` (a metalayer's text, or a .npy descr when `from_npy`) and
 * write the other side's spelling into *out when wanted. */
static int convert(const char *text, int from_npy, char **out, int64_t *itemsize) {
  dt *d;
  if (out) *out = NULL;
  int rc = parse_text(text, from_npy, &d);
  if (rc < 0) return rc;
  if (d->size == 0) { /* ('<f4', 0), a struct of empty fields: no array's items */
    dt_free(d);
    return bad("item size 0");
  }
  if (itemsize) *itemsize = d->size;
  sbuf b = {0};
  if (out) {
    if (d->kind == D_SCALAR) put_str(&b, d);
    else if (from_npy && d->kind == D_STRUCT) put_struct_str(&b, d, 1);
    else if (from_npy) rc = b2_fail(B2_E_UNSUPPORTED, "dtype: a sub-array dtype is not an array's dtype");
    else if (d->kind == D_SUB) sprint(&b, "|V%lld", d->size); /* dtype.str of a sub-array */
    else rc = put_descr(&b, d, 1);
    rc = finish(&b, rc, out);
  }
  dt_free(d);
  return rc;
}

int b2_dtype_to_npy(const char *dtype, char **descr, int64_t *itemsize) {
  return convert(dtype, 0, descr, itemsize);
}

int b2_dtype_from_npy(const char *descr, char **dtype, int64_t *itemsize) {
  return convert(descr, 1, dtype, itemsize);
}

int64_t b2_npy_descr_itemsize(const char *descr) {
  int64_t size = 0;
  int rc = b2_dtype_from_npy(descr, NULL, &size);
  return rc < 0 ? rc : size;
}
