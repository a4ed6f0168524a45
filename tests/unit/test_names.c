/* test_names.c - the namespace layer's name mapping (src/ns/names.c): fixed cases and a
 * randomised check that the mapping is a bijection on random directories. */
#include <errno.h>

#include "b2_error.h"
#include "b2_ns.h"
#include "t.h"

#define MAXE 64

typedef struct dir {
  int n;
  char name[MAXE][B2_NS_NAME_MAX + 1];
  int frame[MAXE];
  int fail_code; /* probes of `fail_name` fail with this B2_E_* code */
  const char *fail_name;
} dir;

static int probe(void *ctx, const char *name) {
  dir *d = ctx;
  if (d->fail_name && strcmp(name, d->fail_name) == 0) return d->fail_code;
  for (int i = 0; i < d->n; i++)
    if (strcmp(d->name[i], name) == 0)
      return d->frame[i] && b2_ns_name_kind(name, NULL) != B2_NS_PLAIN
                 ? B2_NS_FRAME
                 : B2_NS_PRESENT;
  return B2_NS_ABSENT;
}

static void add(dir *d, const char *name, int frame) {
  snprintf(d->name[d->n], sizeof d->name[0], "%s", name);
  d->frame[d->n++] = frame;
}

static const char *shown(dir *d, const char *src, int frame) {
  static char out[B2_NS_NAME_MAX + 1];
  int rc = b2_ns_name_to_shown(src, frame, probe, d, out, sizeof out);
  return rc < 0 ? "<error>" : out;
}

/* Source of a shown name; "" when absent. */
static const char *source(dir *d, const char *name, int *kind) {
  static char out[B2_NS_NAME_MAX + 1];
  int rc = b2_ns_name_to_source(name, probe, d, out, sizeof out);
  if (kind) *kind = rc;
  return rc < 0 ? "" : out;
}

static void test_kind(void) {
  /* shown names an array's view may have */
  CHECK(b2_ns_shown_npy("a.npy") && b2_ns_shown_npy("x.b2nd.npy"));
  CHECK(!b2_ns_shown_npy(".npy") && !b2_ns_shown_npy("a.npz") && !b2_ns_shown_npy("a.npy.b2frame") &&
        !b2_ns_shown_npy(""));
  /* the two source names of a .npy file, from either */
  char arr[B2_NS_NAME_MAX + 1] = "", kept[B2_NS_NAME_MAX + 1] = "", shown[B2_NS_NAME_MAX + 1] = "";
  CHECK_EQ(b2_ns_npy_names("x.y.b2nd", 0, arr, kept, shown, sizeof arr), B2_NS_NPY);
  CHECK(!strcmp(arr, "x.y.b2nd") && !strcmp(kept, "x.y.npy.b2frame") && !strcmp(shown, "x.y.npy"));
  CHECK_EQ(b2_ns_npy_names("a.npy.b2frame", 0, arr, kept, shown, sizeof arr), B2_NS_LOGICAL);
  CHECK(!strcmp(arr, "a.b2nd") && !strcmp(kept, "a.npy.b2frame") && !strcmp(shown, "a.npy"));
  CHECK_EQ(b2_ns_npy_names("a.b2frame", 0, arr, NULL, NULL, sizeof arr), 0);
  CHECK_EQ(b2_ns_npy_names(".npy.b2frame", 0, arr, NULL, NULL, sizeof arr), 0);
  CHECK_EQ(b2_ns_npy_names("a.npy", 0, arr, NULL, NULL, sizeof arr), 0);
  CHECK_EQ(b2_ns_npy_names("a.b2nd", 0, NULL, NULL, NULL, 0), B2_NS_NPY);
  CHECK_EQ(b2_ns_npy_names("a.b2nd", 0, arr, NULL, NULL, 4), 0); /* no room */
  char longest[B2_NS_NAME_MAX + 1];
  memset(longest, 'x', B2_NS_NAME_MAX - 5);
  strcpy(longest + B2_NS_NAME_MAX - 5, ".b2nd"); /* its plain frame's name is too long */
  CHECK_EQ(b2_ns_npy_names(longest, 0, NULL, kept, NULL, sizeof kept), 0);
  CHECK_EQ(b2_ns_npy_names(longest, 0, NULL, NULL, shown, sizeof shown), B2_NS_NPY); /* that one fits */
  CHECK_EQ(strlen(shown), (size_t)B2_NS_NAME_MAX - 1);
  /* in a .b2d store, the bytes kept are python-blosc2's SChunk NAME.npy.b2f */
  CHECK_EQ(b2_ns_npy_names("h.b2nd", 1, arr, kept, shown, sizeof arr), B2_NS_NPY);
  CHECK(!strcmp(arr, "h.b2nd") && !strcmp(kept, "h.npy.b2f") && !strcmp(shown, "h.npy"));
  CHECK_EQ(b2_ns_npy_names("h.npy.b2f", 1, arr, kept, shown, sizeof arr), B2_NS_LOGICAL);
  CHECK(!strcmp(arr, "h.b2nd") && !strcmp(kept, "h.npy.b2f") && !strcmp(shown, "h.npy"));
  CHECK_EQ(b2_ns_npy_names("h.npy.b2frame", 1, arr, NULL, NULL, sizeof arr), 0);
  CHECK_EQ(b2_ns_npy_names("h.b2f", 1, arr, NULL, NULL, sizeof arr), 0);
  CHECK_EQ(b2_ns_npy_names(".npy.b2f", 1, arr, NULL, NULL, sizeof arr), 0);
  CHECK_EQ(b2_ns_npy_names("h.npy.b2f", 0, arr, NULL, NULL, sizeof arr), 0);
  size_t s;
  CHECK_EQ(b2_ns_name_kind("a.b2frame", &s), B2_NS_LOGICAL);
  CHECK_EQ(s, 1);
  CHECK_EQ(b2_ns_name_kind("ab.b2f", &s), B2_NS_LOGICAL);
  CHECK_EQ(s, 2);
  CHECK_EQ(b2_ns_name_kind("abc.b2", &s), B2_NS_LOGICAL);
  CHECK_EQ(s, 3);
  CHECK_EQ(b2_ns_name_kind("x.y.b2nd", &s), B2_NS_NPY);
  CHECK_EQ(s, 3);
  CHECK_EQ(b2_ns_name_kind("a.b2frames", NULL), B2_NS_PLAIN);
  CHECK_EQ(b2_ns_name_kind("a.B2", NULL), B2_NS_PLAIN);
  CHECK_EQ(b2_ns_name_kind(".b2frame", NULL), B2_NS_PLAIN);
  CHECK_EQ(b2_ns_name_kind("..b2", NULL), B2_NS_PLAIN);
  CHECK_EQ(b2_ns_name_kind("...b2", NULL), B2_NS_PLAIN);
  CHECK_EQ(b2_ns_name_kind("....b2", &s), B2_NS_LOGICAL);
  CHECK_EQ(s, 3);
  CHECK_EQ(b2_ns_name_kind("b2", NULL), B2_NS_PLAIN);
  CHECK_EQ(b2_ns_name_kind("", NULL), B2_NS_PLAIN);
}

static void test_simple(void) {
  dir d = {0};
  int kind;
  add(&d, "a.b2frame", 1);
  add(&d, "b.b2nd", 1);
  add(&d, "c.txt", 0);
  add(&d, "d.b2", 0); /* a directory without chunks.b2frame: not a frame */
  CHECK(!strcmp(shown(&d, "a.b2frame", 1), "a"));
  CHECK(!strcmp(shown(&d, "b.b2nd", 1), "b.npy"));
  CHECK(!strcmp(shown(&d, "c.txt", 0), "c.txt"));
  CHECK(!strcmp(shown(&d, "d.b2", 0), "d.b2"));
  CHECK(!strcmp(source(&d, "a", &kind), "a.b2frame"));
  CHECK_EQ(kind, B2_NS_LOGICAL);
  CHECK(!strcmp(source(&d, "b.npy", &kind), "b.b2nd"));
  CHECK_EQ(kind, B2_NS_NPY);
  CHECK(!strcmp(source(&d, "c.txt", &kind), "c.txt"));
  CHECK_EQ(kind, B2_NS_PLAIN);
  CHECK(!strcmp(source(&d, "d.b2", &kind), "d.b2"));
  CHECK_EQ(kind, B2_NS_PLAIN);
  /* Shortened frames are not reachable by their full name; a non-frame
   * never gets a short name. */
  source(&d, "a.b2frame", &kind);
  CHECK_EQ(kind, B2_E_NOENT);
  source(&d, "b.b2nd", &kind);
  CHECK_EQ(kind, B2_E_NOENT);
  source(&d, "d", &kind);
  CHECK_EQ(kind, B2_E_NOENT);
  source(&d, "zzz", &kind);
  CHECK_EQ(kind, B2_E_NOENT);
}

static void test_collisions(void) {
  dir d = {0};
  int kind;
  add(&d, "a", 0);
  add(&d, "a.b2frame", 1);  /* "a" taken: keeps its name */
  add(&d, "b.b2frame", 1);  /* wins "b" over b.b2f and b.b2 */
  add(&d, "b.b2f", 1);
  add(&d, "b.b2", 1);
  add(&d, "c.b2f", 1);      /* wins "c" over c.b2 */
  add(&d, "c.b2", 1);
  add(&d, "x.npy", 0);
  add(&d, "x.b2nd", 1);     /* "x.npy" taken */
  add(&d, "y.b2nd", 1);     /* .b2nd comes first for "y.npy" */
  add(&d, "y.npy.b2frame", 1);
  add(&d, "z.b2.b2", 1);    /* "z.b2" is shown as z: takes "z.b2" */
  add(&d, "z.b2", 1);       /* becomes "z" */
  add(&d, "v.b2", 0);       /* shows itself (not a frame) */
  add(&d, "v.b2.b2", 1);    /* so keeps its name */
  CHECK(!strcmp(shown(&d, "a", 0), "a"));
  CHECK(!strcmp(shown(&d, "a.b2frame", 1), "a.b2frame"));
  CHECK(!strcmp(shown(&d, "b.b2frame", 1), "b"));
  CHECK(!strcmp(shown(&d, "b.b2f", 1), "b.b2f"));
  CHECK(!strcmp(shown(&d, "b.b2", 1), "b.b2"));
  CHECK(!strcmp(shown(&d, "c.b2f", 1), "c"));
  CHECK(!strcmp(shown(&d, "c.b2", 1), "c.b2"));
  CHECK(!strcmp(shown(&d, "x.b2nd", 1), "x.b2nd"));
  CHECK(!strcmp(shown(&d, "y.b2nd", 1), "y.npy"));
  CHECK(!strcmp(shown(&d, "y.npy.b2frame", 1), "y.npy.b2frame"));
  CHECK(!strcmp(shown(&d, "z.b2.b2", 1), "z.b2"));
  CHECK(!strcmp(shown(&d, "v.b2.b2", 1), "v.b2.b2"));
  CHECK(!strcmp(shown(&d, "z.b2", 1), "z"));
  CHECK(!strcmp(source(&d, "a", &kind), "a"));
  CHECK_EQ(kind, B2_NS_PLAIN);
  CHECK(!strcmp(source(&d, "a.b2frame", &kind), "a.b2frame"));
  CHECK_EQ(kind, B2_NS_LOGICAL);
  CHECK(!strcmp(source(&d, "b", NULL), "b.b2frame"));
  CHECK(!strcmp(source(&d, "b.b2f", &kind), "b.b2f"));
  CHECK_EQ(kind, B2_NS_LOGICAL);
  CHECK(!strcmp(source(&d, "c.b2", NULL), "c.b2"));
  CHECK(!strcmp(source(&d, "x.b2nd", &kind), "x.b2nd"));
  CHECK_EQ(kind, B2_NS_NPY);
  CHECK(!strcmp(source(&d, "x.npy", &kind), "x.npy"));
  CHECK_EQ(kind, B2_NS_PLAIN);
  CHECK(!strcmp(source(&d, "y.npy", &kind), "y.b2nd"));
  CHECK_EQ(kind, B2_NS_NPY);
  CHECK(!strcmp(source(&d, "z", NULL), "z.b2"));
  CHECK(!strcmp(source(&d, "z.b2", &kind), "z.b2.b2"));
  CHECK_EQ(kind, B2_NS_LOGICAL);
  source(&d, "z.b2.b2", &kind);
  CHECK_EQ(kind, B2_E_NOENT);
  CHECK(!strcmp(source(&d, "v.b2.b2", NULL), "v.b2.b2"));
  CHECK(!strcmp(source(&d, "v.b2", &kind), "v.b2"));
  CHECK_EQ(kind, B2_NS_PLAIN);
}

/* A non-frame entry ahead in priority still blocks the short name, and a
 * non-frame candidate is never taken for an absent name. */
static void test_nonframe_blocks(void) {
  dir d = {0};
  int kind;
  add(&d, "q.b2frame", 0); /* plain directory */
  add(&d, "q.b2", 1);
  CHECK(!strcmp(shown(&d, "q.b2frame", 0), "q.b2frame"));
  CHECK(!strcmp(shown(&d, "q.b2", 1), "q.b2"));
  source(&d, "q", &kind);
  CHECK_EQ(kind, B2_E_NOENT);
  CHECK(!strcmp(source(&d, "q.b2", NULL), "q.b2"));
}

static void test_long_and_errors(void) {
  dir d = {0};
  char longname[B2_NS_NAME_MAX + 1];
  int kind;
  memset(longname, 'n', 247);
  strcpy(longname + 247, ".b2frame"); /* exactly 255 bytes */
  add(&d, longname, 1);
  longname[247] = 0;
  CHECK(!strcmp(shown(&d, d.name[0], 1), longname));
  CHECK(!strcmp(source(&d, longname, &kind), d.name[0]));
  CHECK_EQ(kind, B2_NS_LOGICAL);
  /* a shown name too long for any candidate */
  char big[B2_NS_NAME_MAX + 1];
  memset(big, 'm', B2_NS_NAME_MAX);
  big[B2_NS_NAME_MAX] = 0;
  source(&d, big, &kind);
  CHECK_EQ(kind, B2_E_NOENT);
  /* a name longer than any component may be: ENAMETOOLONG, not ENOENT */
  char huge[B2_NS_NAME_MAX + 2];
  memset(huge, 'h', B2_NS_NAME_MAX + 1);
  huge[B2_NS_NAME_MAX + 1] = 0;
  source(&d, huge, &kind);
  CHECK_EQ(kind, B2_E_NAMETOOLONG);
  /* probe errors come back */
  dir e = {0};
  add(&e, "w.b2f", 1);
  e.fail_name = "w";
  e.fail_code = B2_E_PERM;
  char out[B2_NS_NAME_MAX + 1];
  CHECK_EQ(b2_ns_name_to_shown("w.b2f", 1, probe, &e, out, sizeof out), B2_E_PERM);
  CHECK_EQ(b2_ns_name_to_source("w", probe, &e, out, sizeof out), B2_E_PERM);
  /* a short output buffer */
  dir f = {0};
  add(&f, "abcdef.b2", 1);
  CHECK_EQ(b2_ns_name_to_shown("abcdef.b2", 1, probe, &f, out, 3), B2_E_NAMETOOLONG);
}

/* Random directories over names built from a few confusable pieces. */
static uint64_t rng = 0x9e3779b97f4a7c15u;
static unsigned rnd(unsigned n) { return (unsigned)(t_xorshift64(&rng) % n); }

static void random_name(char *out) {
  static const char *const stems[] = {"a", "b", ".", "..", "", "a.npy", "a.b2"};
  static const char *const sfx[] = {"", ".b2frame", ".b2f", ".b2", ".b2nd",
                                    ".npy", ".b2.b2", ".npy.b2f"};
  int n;
  do {
    n = snprintf(out, B2_NS_NAME_MAX + 1, "%s%s%s", stems[rnd(7)], sfx[rnd(8)],
                 sfx[rnd(8)]);
  } while (n == 0 || !strcmp(out, ".") || !strcmp(out, ".."));
}

static void test_random_bijection(void) {
  int bad = 0;
  for (int iter = 0; iter < 20000 && !bad; iter++) {
    dir d = {0};
    int want = 1 + (int)rnd(12);
    while (d.n < want) {
      char nm[B2_NS_NAME_MAX + 1];
      random_name(nm);
      int dup = 0;
      for (int i = 0; i < d.n; i++) dup |= !strcmp(d.name[i], nm);
      if (!dup) add(&d, nm, (int)rnd(4) != 0);
    }
    char shown_names[MAXE][B2_NS_NAME_MAX + 1];
    for (int i = 0; i < d.n; i++) {
      int fr = d.frame[i] && b2_ns_name_kind(d.name[i], NULL) != B2_NS_PLAIN;
      snprintf(shown_names[i], sizeof shown_names[i], "%s", shown(&d, d.name[i], fr));
      for (int j = 0; j < i; j++)
        if (!strcmp(shown_names[i], shown_names[j])) {
          fprintf(stderr, "  %s and %s both shown as %s\n", d.name[i], d.name[j],
                  shown_names[i]);
          bad = 1;
        }
      int kind;
      const char *back = source(&d, shown_names[i], &kind);
      int want_kind = fr ? b2_ns_name_kind(d.name[i], NULL) : B2_NS_PLAIN;
      if (strcmp(back, d.name[i]) || kind != want_kind) {
        fprintf(stderr, "  %s shown as %s maps back to '%s' (kind %d, want %d)\n",
                d.name[i], shown_names[i], back, kind, want_kind);
        bad = 1;
      }
    }
    /* Names not shown resolve to nothing. */
    for (int q = 0; q < 8; q++) {
      char nm[B2_NS_NAME_MAX + 1];
      random_name(nm);
      int is_shown = 0;
      for (int i = 0; i < d.n; i++) is_shown |= !strcmp(shown_names[i], nm);
      int kind;
      source(&d, nm, &kind);
      if (!is_shown && kind != B2_E_NOENT) {
        fprintf(stderr, "  unshown name %s resolves (kind %d)\n", nm, kind);
        bad = 1;
      }
    }
  }
  CHECK(!bad);
}

static void test_hidden_and_suffix(void) {
  CHECK(b2_ns_name_hidden(".a.b2frame.b2tmp"));
  CHECK(b2_ns_name_hidden(".x.b2tmp"));
  CHECK(b2_ns_name_hidden("chunks.b2frame.tmp"));
  CHECK(!b2_ns_name_hidden(".b2tmp"));
  CHECK(!b2_ns_name_hidden("a.b2tmp"));
  CHECK(!b2_ns_name_hidden(".a.b2tmp.b2frame"));
  CHECK(!b2_ns_name_hidden("chunks.b2frame"));
  CHECK(!strcmp(b2_ns_name_suffix("a.b2frame"), ".b2frame"));
  CHECK(!strcmp(b2_ns_name_suffix("a.b2.b2f"), ".b2f"));
  CHECK(!strcmp(b2_ns_name_suffix("x.b2nd"), ".b2nd"));
  CHECK(!strcmp(b2_ns_name_suffix("plain"), ""));
  CHECK(!strcmp(b2_ns_name_suffix(".b2"), ""));
}

static void test_target(void) {
  char out[B2_NS_NAME_MAX + 1];
  CHECK_EQ(b2_ns_name_target(B2_NS_LOGICAL, ".b2f", "b", out, sizeof out), 0);
  CHECK(!strcmp(out, "b.b2f"));
  CHECK_EQ(b2_ns_name_target(B2_NS_PLAIN, "", "b.b2", out, sizeof out), 0);
  CHECK(!strcmp(out, "b.b2"));
  CHECK_EQ(b2_ns_name_target(B2_NS_NPY, ".b2nd", "q.npy", out, sizeof out), 0);
  CHECK(!strcmp(out, "q.b2nd"));
  CHECK_EQ(b2_ns_name_target(B2_NS_NPY, ".b2nd", "q", out, sizeof out), B2_E_XDEV);
  CHECK_EQ(b2_ns_name_target(B2_NS_NPY, ".b2nd", ".npy", out, sizeof out), B2_E_XDEV);
  char longname[B2_NS_NAME_MAX + 1];
  memset(longname, 'n', 250);
  longname[250] = 0;
  CHECK_EQ(b2_ns_name_target(B2_NS_LOGICAL, ".b2frame", longname, out, sizeof out),
           B2_E_NAMETOOLONG);
  CHECK_EQ(b2_ns_name_target(B2_NS_PLAIN, "", longname, out, sizeof out), 0);
}

/* Would a new entry `src` (frame or not) show as `shown` in d? */
static int check_new(dir *d, const char *shown_name, const char *src, int frame,
                     const char *gone) {
  b2_ns_overlay o = {probe, d, {gone, NULL}, src, frame ? B2_NS_FRAME : B2_NS_PRESENT};
  return b2_ns_name_check(shown_name, src, frame, b2_ns_overlay_probe, &o);
}

static void test_check(void) {
  dir d = {0};
  add(&d, "y.b2frame", 1); /* shown as y */
  add(&d, "z.b2nd", 0);    /* a directory: blocks z.npy */
  add(&d, "p", 0);
  /* a new file "n" is the frame n.b2frame */
  CHECK_EQ(check_new(&d, "n", "n.b2frame", 1, NULL), 0);
  /* the frame y.b2frame is shown as y, so nothing shows as "y.b2frame":
   * a new file of that name is the frame y.b2frame.b2frame (but the
   * name itself is an entry's, so not a plain file) */
  CHECK_EQ(check_new(&d, "y.b2frame", "y.b2frame.b2frame", 1, NULL), 0);
  /* a chain: y.b2frame.b2frame there, y.b2frame.b2frame.b2frame shows as
   * the name that one leaves */
  add(&d, "y.b2frame.b2frame", 1);
  CHECK(!strcmp(shown(&d, "y.b2frame.b2frame", 1), "y.b2frame"));
  CHECK_EQ(check_new(&d, "y.b2frame.b2frame", "y.b2frame.b2frame.b2frame", 1, NULL), 0);
  CHECK_EQ(check_new(&d, "y.b2frame", "y.b2frame.b2f", 1, NULL), B2_E_EXIST);
  d.n--;
  /* "z.npy" cannot be a frame (z.b2nd comes first), but a plain file can */
  CHECK_EQ(check_new(&d, "z.npy", "z.npy.b2frame", 1, NULL), B2_E_EXIST);
  CHECK_EQ(check_new(&d, "z.npy", "z.npy", 0, NULL), 0);
  /* moving the frame y over the plain file p: p goes, p.b2frame shows as p */
  CHECK_EQ(check_new(&d, "p", "p.b2frame", 1, NULL), B2_E_EXIST);
  CHECK_EQ(check_new(&d, "p", "p.b2frame", 1, "p"), 0);
  /* a regular file named w.b2 is a frame, shown as w, not as w.b2; a
   * directory of that name is not (no chunks.b2frame) and keeps it */
  CHECK_EQ(check_new(&d, "w.b2", "w.b2", 1, NULL), B2_E_EXIST);
  CHECK_EQ(check_new(&d, "w", "w.b2", 1, NULL), 0);
  CHECK_EQ(check_new(&d, "w.b2", "w.b2", 0, NULL), 0);
}

/* The overlay agrees with really adding the entry: when the check passes,
 * the added entry is shown under the name asked for. */
static void test_random_new(void) {
  int bad = 0;
  for (int iter = 0; iter < 20000 && !bad; iter++) {
    dir d = {0};
    int want = (int)rnd(10);
    while (d.n < want) {
      char nm[B2_NS_NAME_MAX + 1];
      random_name(nm);
      int dup = 0;
      for (int i = 0; i < d.n; i++) dup |= !strcmp(d.name[i], nm);
      if (!dup) add(&d, nm, (int)rnd(4) != 0);
    }
    char nm[B2_NS_NAME_MAX + 1], src[B2_NS_NAME_MAX + 1];
    random_name(nm);
    int frame = (int)rnd(2);
    if (b2_ns_name_target(frame ? B2_NS_LOGICAL : B2_NS_PLAIN,
                         B2_NS_NEW_SUFFIX, nm, src, sizeof src) < 0)
      continue;
    int real_frame = frame && b2_ns_name_kind(src, NULL) != B2_NS_PLAIN;
    int exists = 0;
    for (int i = 0; i < d.n; i++) exists |= !strcmp(d.name[i], src);
    if (exists) continue;
    int was_shown;
    source(&d, nm, &was_shown);
    was_shown = was_shown != B2_E_NOENT; /* then a create opens that entry */
    int rc = check_new(&d, nm, src, real_frame, NULL);
    static char before[MAXE][B2_NS_NAME_MAX + 1];
    for (int i = 0; i < d.n; i++)
      snprintf(before[i], sizeof before[i], "%s", shown(&d, d.name[i], d.frame[i]));
    add(&d, src, real_frame);
    /* a new frame under a name not shown yet leaves every other entry's
     * name as it was */
    for (int i = 0; i < d.n - 1 && rc == 0 && real_frame && !was_shown && !bad; i++)
      if (strcmp(before[i], shown(&d, d.name[i], d.frame[i])) != 0) {
        fprintf(stderr, "  new %s as %s: %s was %s, now %s\n", src, nm, d.name[i], before[i],
                shown(&d, d.name[i], d.frame[i]));
        bad = 1;
      }
    int kind;
    const char *back = source(&d, nm, &kind);
    int ok_now = !strcmp(back, src) && (kind != B2_NS_PLAIN) == real_frame;
    if ((rc == 0) != ok_now) {
      fprintf(stderr, "  new %s as %s: check %d, real mapping '%s'\n", src, nm, rc, back);
      bad = 1;
    }
  }
  CHECK(!bad);
}

int main(void) {
  T_RUN(test_kind);
  T_RUN(test_simple);
  T_RUN(test_collisions);
  T_RUN(test_nonframe_blocks);
  T_RUN(test_long_and_errors);
  T_RUN(test_random_bijection);
  T_RUN(test_hidden_and_suffix);
  T_RUN(test_target);
  T_RUN(test_check);
  T_RUN(test_random_new);
  T_END();
}
