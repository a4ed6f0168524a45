/*
 * tree.c - the tree of a store from the values gathered at open: groups
 * for the inner paths of the keys, one leaf per value, the names shown in
 * each directory (clashes resolved deterministically), and the lookups.
 *
 * The values are sorted by key with each carrier (GROUP/__vlmeta__)
 * standing for "GROUP/": every key below a group then lies in one run of
 * the order, so one pass with a stack of open groups builds the tree.
 */
#include <stdlib.h>
#include <string.h>

#include "b2_error.h"
#include "store/store_impl.h"

typedef struct item {
  char *sortkey;  /* the key; a carrier or a directory: its group's key + "/" */
  int64_t src;
  int carrier;    /* a group's __vlmeta__ carrier */
  int dir;        /* a .b2d's directory: its group, nothing more */
} item;

static int cmp_item(const void *a, const void *b) {
  const item *x = a, *y = b;
  int c = strcmp(x->sortkey, y->sortkey);
  if (c) return c;
  return x->src < y->src ? -1 : x->src > y->src;
}

/* Does a (found after b) replace b for their key?  An external leaf wins
 * over an embedded one; between two files or two members the one found
 * last, as in python-blosc2's maps (zip members in directory order, files
 * in listing order). */
static int prefer(const b2_store_src *a, const b2_store_src *b) {
  int ea = a->loc == B2_STORE_IN_FILE || a->loc == B2_STORE_IN_MEMBER;
  int eb = b->loc == B2_STORE_IN_FILE || b->loc == B2_STORE_IN_MEMBER;
  return ea != eb ? ea : 1;
}

static int64_t add_entry(b2_store *s, const char *key, size_t klen, int kind,
                         int64_t parent, int64_t src) {
  if (s->n == s->cap) {
    int64_t cap = s->cap ? s->cap * 2 : 64;
    b2_store_entry *e = realloc(s->e, (size_t)cap * sizeof *e);
    if (!e) return b2_fail(B2_E_NOMEM, "out of memory");
    s->e = e;
    int64_t *sr = realloc(s->src, (size_t)cap * sizeof *sr);
    if (!sr) return b2_fail(B2_E_NOMEM, "out of memory");
    s->src = sr;
    s->cap = cap;
  }
  char *k = malloc(klen + 1);
  if (!k) return b2_fail(B2_E_NOMEM, "out of memory");
  memcpy(k, key, klen);
  k[klen] = 0;
  b2_store_entry *e = &s->e[s->n];
  memset(e, 0, sizeof *e);
  e->key = k;
  const char *slash = strrchr(k, '/');
  e->name = klen <= 1 ? k + klen : slash + 1;
  e->kind = kind;
  e->parent = parent;
  s->src[s->n] = src;
  if (kind == B2_STORE_GROUP) {
    e->objkind = "group";
  } else {
    const b2_store_src *sr = &s->srcs[src];
    e->objkind = sr->objkind;
    e->loc = sr->loc;
    e->relpath = sr->relpath;
    e->offset = sr->offset;
    e->length = sr->length;
    e->error = sr->error;
  }
  return s->n++;
}

/* Is group key g ("" root) the key p or a directory above it? */
static int covers(const char *g, const char *p, size_t plen) {
  size_t n = strlen(g);
  if (n == 1) return 1; /* "/" */
  return n <= plen && memcmp(g, p, n) == 0 && (n == plen || p[n] == '/');
}

/* Make the stack's top the group of key p[0..plen) ("" or "/" root). */
static int descend(b2_store *s, int64_t *stack, int *depth, const char *p,
                   size_t plen) {
  while (*depth > 1 && !covers(s->e[stack[*depth - 1]].key, p, plen))
    (*depth)--;
  for (;;) {
    const char *top = s->e[stack[*depth - 1]].key;
    size_t tl = strlen(top) == 1 ? 0 : strlen(top);
    if (tl >= plen) return 0;
    const char *next = memchr(p + tl + 1, '/', plen - tl - 1);
    size_t nl = next ? (size_t)(next - p) : plen;
    if (*depth > B2_STORE_MAX_DEPTH + 1)
      return b2_fail(B2_E_LIMIT, "keys nested too deep");
    int64_t g = add_entry(s, p, nl, B2_STORE_GROUP, stack[*depth - 1], -1);
    if (g < 0) return (int)g;
    stack[(*depth)++] = g;
  }
}

static int build_entries(b2_store *s, item *it, int64_t n) {
  int64_t r = add_entry(s, "/", 1, B2_STORE_GROUP, -1, -1);
  if (r < 0) return (int)r;
  int64_t stack[B2_STORE_MAX_DEPTH + 2];
  int depth = 1;
  stack[0] = 0;
  for (int64_t i = 0; i < n; i++) {
    const char *k = it[i].sortkey;
    size_t kl = strlen(k);
    const char *slash = strrchr(k, '/');
    size_t plen = (size_t)(slash - k);
    int rc = descend(s, stack, &depth, k, plen);
    if (rc < 0) return rc;
    int64_t top = stack[depth - 1];
    if (it[i].dir) continue;
    if (it[i].carrier) {
      if (s->src[top] < 0) s->src[top] = it[i].src;
      continue;
    }
    b2_store_src *src = &s->srcs[it[i].src];
    int64_t e = add_entry(s, k, kl, src->kind, top, it[i].src);
    if (e < 0) return (int)e;
  }
  for (int64_t i = 0; i < s->n; i++) {
    s->e[i].bare = s->e[i].kind == B2_STORE_GROUP;
    if (s->e[i].kind == B2_STORE_GROUP) s->e[i].has_attrs = s->src[i] >= 0;
  }
  for (int64_t i = 0; i < s->n; i++) /* what holds a value or attributes */
    if (s->e[i].kind != B2_STORE_GROUP || s->e[i].has_attrs)
      for (int64_t g = i; g >= 0 && (g == i || s->e[g].bare); g = s->e[g].parent) s->e[g].bare = 0;
  return 0;
}

/* ---- shown names ------------------------------------------------------------ */

typedef struct shown {
  int64_t e;
  char *name;
} shown;

static int cmp_shown(const void *a, const void *b) {
  const shown *x = a, *y = b;
  if (!x->name || !y->name) return !x->name - !y->name;
  int c = strcmp(x->name, y->name);
  if (c) return c;
  return x->e < y->e ? -1 : x->e > y->e;
}

static char *join(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la + lb > B2_STORE_MAX_COMPONENT) return NULL;
  char *p = malloc(la + lb + 1);
  if (p) {
    memcpy(p, a, la);
    memcpy(p + la, b, lb + 1);
  }
  return p;
}

static const char *short_suffix(const b2_store *s, int64_t i) {
  const b2_store_entry *e = &s->e[i];
  if (e->kind == B2_STORE_NDARRAY) return ".npy";
  if (e->kind == B2_STORE_OBJECT) return s->srcs[s->src[i]].suffix;
  return "";
}

/* In a clash a group keeps its name; among leaves the first key does. */
static int cmp_rank(const b2_store *s, const shown *x, const shown *y) {
  int gx = s->e[x->e].kind == B2_STORE_GROUP, gy = s->e[y->e].kind == B2_STORE_GROUP;
  return gy - gx;
}

/* Mark the losers of each run of equal names; returns how many. */
static int64_t losers(const b2_store *s, shown *v, int64_t n, char *lost) {
  int64_t count = 0;
  for (int64_t i = 0; i < n && v[i].name;) {
    int64_t j = i + 1, best = i;
    while (j < n && v[j].name && !strcmp(v[j].name, v[i].name)) {
      if (cmp_rank(s, &v[j], &v[best]) < 0) best = j;
      j++;
    }
    for (int64_t k = i; k < j; k++)
      if (k != best) {
        lost[k] = 1;
        count++;
      }
    i = j;
  }
  return count;
}

static int name_dir(b2_store *s, int64_t g, shown *v, int64_t n, char *lost) {
  for (int64_t k = 0; k < n; k++) {
    int64_t i = v[k].e;
    const b2_store_entry *e = &s->e[i];
    v[k].name = e->kind == B2_STORE_REMOTE ? NULL : join(e->name, short_suffix(s, i));
    if (!v[k].name && e->kind != B2_STORE_REMOTE)
      b2_store_add_note(s, "%s: name too long to show", e->key);
  }
  for (int round = 0; round < 2; round++) {
    qsort(v, (size_t)n, sizeof *v, cmp_shown);
    memset(lost, 0, (size_t)n);
    if (losers(s, v, n, lost) == 0) break;
    for (int64_t k = 0; k < n; k++) {
      if (!lost[k]) continue;
      int64_t i = v[k].e;
      const b2_store_entry *e = &s->e[i];
      free(v[k].name);
      v[k].name = NULL;
      if (round == 0 && e->kind != B2_STORE_GROUP) {
        const char *suf = s->srcs[s->src[i]].suffix;
        v[k].name = strcmp(suf, short_suffix(s, i)) ? join(e->name, suf) : NULL;
      }
      if (!v[k].name)
        b2_store_add_note(s, "%s: its name clashes with another entry's, not "
                          "shown", e->key);
    }
  }
  qsort(v, (size_t)n, sizeof *v, cmp_shown);
  int64_t shown_n = 0;
  for (int64_t k = 0; k < n; k++) {
    s->e[v[k].e].shown = v[k].name;
    if (v[k].name) s->kids[(s->e[g].children - s->kids) + shown_n++] = v[k].e;
  }
  s->e[g].nchildren = shown_n;
  return 0;
}

static int name_all(b2_store *s) {
  int64_t *count = calloc((size_t)s->n, sizeof *count);
  s->kids = malloc((size_t)(s->n ? s->n : 1) * sizeof *s->kids);
  if (!count || !s->kids) {
    free(count);
    return b2_fail(B2_E_NOMEM, "out of memory");
  }
  for (int64_t i = 1; i < s->n; i++) count[s->e[i].parent]++;
  int64_t at = 0, most = 0;
  for (int64_t i = 0; i < s->n; i++) {
    s->e[i].children = s->kids + at;
    at += count[i];
    if (count[i] > most) most = count[i];
  }
  /* Gather each group's children in place (their final order is set by
   * name_dir), then name each directory. */
  int64_t *fill = calloc((size_t)s->n, sizeof *fill);
  shown *v = malloc((size_t)(most ? most : 1) * sizeof *v);
  char *lost = malloc((size_t)(most ? most : 1));
  int rc = fill && v && lost ? 0 : b2_fail(B2_E_NOMEM, "out of memory");
  for (int64_t i = 1; !rc && i < s->n; i++) {
    int64_t p = s->e[i].parent;
    s->kids[s->e[p].children - s->kids + fill[p]++] = i;
  }
  for (int64_t g = 0; !rc && g < s->n; g++) {
    if (s->e[g].kind != B2_STORE_GROUP) continue;
    for (int64_t k = 0; k < count[g]; k++) v[k].e = s->e[g].children[k];
    rc = name_dir(s, g, v, count[g], lost);
  }
  free(count);
  free(fill);
  free(v);
  free(lost);
  return rc;
}

/* ---- object roots ------------------------------------------------------------ */

/* Does leaf i (a `_meta` SChunk) say vlmeta kind "ctable"? */
static int says_ctable(b2_store *s, int64_t i) {
  static const uint8_t want[] = {0xa6, 'c', 't', 'a', 'b', 'l', 'e'};
  b2_frame *f;
  if (b2_store_src_frame(s, &s->srcs[s->src[i]], &f) < 0) return 0;
  uint8_t *v = NULL;
  size_t len = 0;
  int yes = b2_frame_vlmeta_get(f, "kind", NULL, &len) == 0 && len == sizeof want &&
            b2_frame_vlmeta_get(f, "kind", &v, &len) == 0 && len == sizeof want &&
            memcmp(v, want, len) == 0;
  free(v);
  b2_frame_close(f);
  return yes;
}

/* Mark the groups of a TreeStore that are object roots (CTables). */
static void mark_roots(b2_store *s) {
  if (s->flavor != B2_STORE_FLAVOR_TREE) return;
  for (int k = 0; k < s->nroots; k++) {
    int64_t g = b2_store_find_group(s, s->roots[k]);
    if (g > 0) s->e[g].object_root = 1;
  }
  for (int64_t i = 1; i < s->n; i++) {
    b2_store_entry *e = &s->e[i];
    if (e->kind == B2_STORE_SCHUNK && e->parent > 0 && !strcmp(e->name, "_meta") &&
        !s->e[e->parent].object_root && says_ctable(s, i))
      s->e[e->parent].object_root = 1;
  }
  for (int64_t i = 1; i < s->n; i++)
    if (s->e[i].object_root) s->e[i].objkind = "ctable";
}

/* Is entry i below an object root? */
int b2_store_inside_object(const b2_store *s, int64_t i) {
  for (int64_t p = s->e[i].parent; p > 0; p = s->e[p].parent)
    if (s->e[p].object_root) return 1;
  return 0;
}

/* ---- build ------------------------------------------------------------------- */

static int cmp_bykey(const void *a, const void *b, void *ctx) {
  const b2_store *st = ctx;
  const b2_store_entry *x = &st->e[*(const int64_t *)a];
  const b2_store_entry *y = &st->e[*(const int64_t *)b];
  int c = strcmp(x->key, y->key);
  if (c) return c;
  return (x->kind == B2_STORE_GROUP) - (y->kind == B2_STORE_GROUP);
}

int b2_store_build(b2_store *s) {
  int64_t n = s->nsrcs;
  item *it = calloc((size_t)(n ? n : 1), sizeof *it);
  if (!it) return b2_fail(B2_E_NOMEM, "out of memory");
  int rc = 0;
  int64_t m = 0;
  for (int64_t i = 0; i < n && !rc; i++) {
    size_t glen;
    it[m].src = i;
    it[m].dir = s->srcs[i].kind == B2_STORE_GROUP && s->srcs[i].loc == B2_STORE_IN_NONE;
    if (it[m].dir) glen = strlen(s->srcs[i].key);
    if (it[m].dir || b2_store_is_carrier(s->srcs[i].key, &glen)) {
      it[m].carrier = !it[m].dir;
      it[m].sortkey = malloc(glen + 2);
      if (it[m].sortkey) {
        memcpy(it[m].sortkey, s->srcs[i].key, glen);
        memcpy(it[m].sortkey + glen, "/", 2);
      }
    } else {
      it[m].sortkey = strdup(s->srcs[i].key);
    }
    if (!it[m].sortkey) rc = b2_fail(B2_E_NOMEM, "out of memory");
    else m++;
  }
  if (!rc) {
    qsort(it, (size_t)m, sizeof *it, cmp_item);
    /* One value per key (prefer). */
    int64_t w = 0;
    for (int64_t i = 0; i < m; i++) {
      if (w > 0 && !strcmp(it[w - 1].sortkey, it[i].sortkey)) {
        item *keep = &it[w - 1], *other = &it[i];
        /* A directory only makes its group: any carrier of it counts more. */
        if (!other->dir && (keep->dir || prefer(&s->srcs[other->src], &s->srcs[keep->src]))) {
          item t = *keep;
          *keep = *other;
          *other = t;
        }
        free(other->sortkey);
        continue;
      }
      it[w++] = it[i];
    }
    m = w;
    rc = build_entries(s, it, m);
  }
  for (int64_t i = 0; i < m; i++) free(it[i].sortkey);
  free(it);
  if (!rc) rc = name_all(s);
  if (!rc) {
    s->bykey = malloc((size_t)s->n * sizeof *s->bykey);
    if (!s->bykey) return b2_fail(B2_E_NOMEM, "out of memory");
    for (int64_t i = 0; i < s->n; i++) s->bykey[i] = i;
    qsort_r(s->bykey, (size_t)s->n, sizeof *s->bykey, cmp_bykey, s);
    mark_roots(s);
  }
  return rc;
}

/* ---- lookups ----------------------------------------------------------------- */

int64_t b2_store_count(const b2_store *s) { return s->n; }

const b2_store_entry *b2_store_entry_at(const b2_store *s, int64_t i) {
  return i >= 0 && i < s->n ? &s->e[i] : NULL;
}

int64_t b2_store_child(const b2_store *s, int64_t dir, const char *name) {
  if (dir < 0 || dir >= s->n || s->e[dir].kind != B2_STORE_GROUP)
    return b2_fail(B2_E_INVAL, "entry %lld is not a group", (long long)dir);
  int64_t lo = 0, hi = s->e[dir].nchildren;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    int c = strcmp(s->e[s->e[dir].children[mid]].shown, name);
    if (c == 0) return s->e[dir].children[mid];
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return b2_fail(B2_E_NOENT, "%s: no entry %s", s->e[dir].key, name);
}

/* Position in bykey of the first entry whose key is >= key. */
static int64_t first_at(const b2_store *s, const char *key) {
  int64_t lo = 0, hi = s->n;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (strcmp(s->e[s->bykey[mid]].key, key) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

int64_t b2_store_find(const b2_store *s, const char *key) {
  int64_t k = first_at(s, key);
  if (k < s->n && !strcmp(s->e[s->bykey[k]].key, key)) return s->bykey[k];
  return b2_fail(B2_E_NOENT, "no key %s", key);
}

int64_t b2_store_find_group(const b2_store *s, const char *key) {
  /* A leaf of the same key sorts first: the group, if any, follows it. */
  for (int64_t k = first_at(s, key); k < s->n && !strcmp(s->e[s->bykey[k]].key, key); k++)
    if (s->e[s->bykey[k]].kind == B2_STORE_GROUP) return s->bykey[k];
  return b2_fail(B2_E_NOENT, "no group %s", key);
}

int64_t b2_store_keys(const b2_store *s, int64_t *idx, int64_t cap) {
  int64_t n = 0;
  const char *last = NULL;
  for (int64_t k = 0; k < s->n; k++) {
    int64_t i = s->bykey[k];
    const b2_store_entry *e = &s->e[i];
    if (i == 0) continue;
    if (e->kind == B2_STORE_GROUP && (s->flavor != B2_STORE_FLAVOR_TREE || e->bare))
      continue;
    if (s->flavor == B2_STORE_FLAVOR_TREE && b2_store_inside_object(s, i)) continue;
    if (last && !strcmp(last, e->key)) continue; /* a leaf and a group */
    last = e->key;
    if (n < cap) idx[n] = i;
    n++;
  }
  return n;
}
