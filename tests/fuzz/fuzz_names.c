/* fuzz_names.c - libFuzzer target: the namespace layer's name mapping (src/ns/names.c).
 *
 * The input is a directory listing: names separated by '\n', each prefixed
 * by one flag byte.  Flag bit 0: the entry is a frame.  Flag bit 1: the
 * line is not an entry but a name asked for a new regular file (at most
 * four are tried, in order, each alone).
 *
 * Checked (a violation aborts): for every entry the shown name maps back to
 * that same entry, and no two entries are shown under one name (the mapping
 * is a bijection).  For a new file asked as S that is not shown yet: its
 * source name is b2_ns_name_target(LOGICAL, ".b2frame", S); when
 * b2_ns_name_check() accepts it in the directory with that entry added (the
 * overlay probe), that directory is still a bijection and shows the new
 * entry as S, and every other entry keeps the name it was shown under. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "b2_error.h"
#include "b2_ns.h"

#define MAXN 64
#define MAXASK 4

typedef struct {
  int n;
  char name[MAXN + 1][B2_NS_NAME_MAX + 1];
  int frame[MAXN + 1];
} dir_t;

static int probe(void *ctx, const char *name) {
  const dir_t *d = ctx;
  for (int i = 0; i < d->n; i++)
    if (!strcmp(d->name[i], name)) return d->frame[i] ? B2_NS_FRAME : B2_NS_PRESENT;
  return B2_NS_ABSENT;
}

/* The bijection over the entries of d (hidden ones are never shown). */
static void check_dir(dir_t *d) {
  static char shown[MAXN + 1][B2_NS_NAME_MAX + 1];
  for (int k = 0; k < d->n; k++) {
    if (b2_ns_name_to_shown(d->name[k], d->frame[k], probe, d, shown[k], sizeof shown[k]) != 0)
      abort();
    if (b2_ns_name_hidden(d->name[k])) continue;
    char back[B2_NS_NAME_MAX + 1];
    int kind = b2_ns_name_to_source(shown[k], probe, d, back, sizeof back);
    if (kind < 0 || strcmp(back, d->name[k]) != 0) abort(); /* must map back */
    for (int j = 0; j < k; j++)
      if (!b2_ns_name_hidden(d->name[j]) && !strcmp(shown[j], shown[k]))
        abort(); /* one name, one entry */
  }
}

/* A new regular file asked as `ask`. */
static void check_new_file(dir_t *d, const char *ask) {
  char src[B2_NS_NAME_MAX + 1], back[B2_NS_NAME_MAX + 1];
  if (b2_ns_name_to_source(ask, probe, d, back, sizeof back) != B2_E_NOENT) return; /* shown */
  if (b2_ns_name_target(B2_NS_LOGICAL, B2_NS_NEW_SUFFIX, ask, src, sizeof src) != 0) return;
  if (probe(d, src) != B2_NS_ABSENT) return;
  b2_ns_overlay ov = {.probe = probe, .ctx = d, .added = src, .added_as = B2_NS_FRAME};
  if (b2_ns_name_check(ask, src, 1, b2_ns_overlay_probe, &ov) != 0) return;
  static char before[MAXN + 1][B2_NS_NAME_MAX + 1];
  for (int k = 0; k < d->n; k++)
    if (b2_ns_name_to_shown(d->name[k], d->frame[k], probe, d, before[k], sizeof before[k]) != 0)
      abort();
  memcpy(d->name[d->n], src, sizeof src);
  d->frame[d->n] = 1;
  d->n++;
  char shown[B2_NS_NAME_MAX + 1];
  if (b2_ns_name_to_shown(src, 1, probe, d, shown, sizeof shown) != 0 || strcmp(shown, ask))
    abort(); /* accepted, but not shown as asked */
  for (int k = 0; k < d->n - 1; k++)
    if (b2_ns_name_to_shown(d->name[k], d->frame[k], probe, d, shown, sizeof shown) != 0 ||
        strcmp(shown, before[k]))
      abort(); /* the new frame renamed another entry */
  check_dir(d);
  d->n--;
}

/* The two source names of a .npy file, outside stores and in one: from
 * either name, the same pair and the same name shown. */
static void check_npy_names(const char *src) {
  for (int store = 0; store < 2; store++) {
    char a[B2_NS_NAME_MAX + 1], kp[B2_NS_NAME_MAX + 1], sh[B2_NS_NAME_MAX + 1];
    char a2[B2_NS_NAME_MAX + 1], kp2[B2_NS_NAME_MAX + 1], sh2[B2_NS_NAME_MAX + 1];
    int k = b2_ns_npy_names(src, store, a, kp, sh, sizeof a);
    if (k == 0) continue;
    if (strcmp(k == B2_NS_NPY ? a : kp, src) || !b2_ns_shown_npy(sh)) abort();
    if (b2_ns_npy_names(k == B2_NS_NPY ? kp : a, store, a2, kp2, sh2, sizeof a2) !=
            (k == B2_NS_NPY ? B2_NS_LOGICAL : B2_NS_NPY) ||
        strcmp(a, a2) || strcmp(kp, kp2) || strcmp(sh, sh2))
      abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static dir_t d;
  static char ask[MAXASK][B2_NS_NAME_MAX + 1];
  int nask = 0;
  d.n = 0;
  size_t i = 0;
  while (i < size && d.n < MAXN) {
    int flag = data[i++];
    size_t start = i;
    while (i < size && data[i] != '\n') i++;
    size_t len = i - start;
    i++;
    if (len == 0 || len > B2_NS_NAME_MAX || memchr(data + start, 0, len) || memchr(data + start, '/', len))
      continue;
    if (flag & 2) {
      if (nask < MAXASK) {
        memcpy(ask[nask], data + start, len);
        ask[nask++][len] = 0;
      }
      continue;
    }
    memcpy(d.name[d.n], data + start, len);
    d.name[d.n][len] = 0;
    check_npy_names(d.name[d.n]);
    if (probe(&d, d.name[d.n]) != B2_NS_ABSENT) continue; /* names are unique */
    size_t stem;
    d.frame[d.n] = (flag & 1) && b2_ns_name_kind(d.name[d.n], &stem) != B2_NS_PLAIN;
    d.n++;
  }
  check_dir(&d);
  for (int k = 0; k < nask; k++) check_new_file(&d, ask[k]);
  return 0;
}
