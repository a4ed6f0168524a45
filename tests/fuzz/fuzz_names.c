/* fuzz_names.c - libFuzzer target: the mount's path-name mapping.
 *
 * The input is a directory listing: names separated by '\n', each prefixed
 * by one flag byte (odd: the entry is a frame).  For every entry the shown
 * name must map back to that same entry, and no two entries may be shown
 * under one name (the mapping is a bijection); a violation aborts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuse/names.h"

#define MAXN 64

typedef struct {
  int n;
  char name[MAXN][B2FS_NAME_MAX + 1];
  int frame[MAXN];
} dir_t;

static int probe(void *ctx, const char *name) {
  const dir_t *d = ctx;
  for (int i = 0; i < d->n; i++)
    if (!strcmp(d->name[i], name)) return d->frame[i] ? B2FS_FRAME : B2FS_PRESENT;
  return B2FS_ABSENT;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static dir_t d;
  static char shown[MAXN][B2FS_NAME_MAX + 1];
  d.n = 0;
  size_t i = 0;
  while (i < size && d.n < MAXN) {
    int flag = data[i++] & 1;
    size_t start = i;
    while (i < size && data[i] != '\n') i++;
    size_t len = i - start;
    i++;
    if (len == 0 || len > B2FS_NAME_MAX || memchr(data + start, 0, len) || memchr(data + start, '/', len))
      continue;
    memcpy(d.name[d.n], data + start, len);
    d.name[d.n][len] = 0;
    if (probe(&d, d.name[d.n]) != B2FS_ABSENT) continue; /* names are unique */
    size_t stem;
    d.frame[d.n] = flag && b2fs_name_kind(d.name[d.n], &stem) != B2FS_KIND_PLAIN;
    d.n++;
  }
  for (int k = 0; k < d.n; k++) {
    if (b2fs_name_to_shown(d.name[k], d.frame[k], probe, &d, shown[k], sizeof shown[k]) != 0) abort();
    char back[B2FS_NAME_MAX + 1];
    int kind = b2fs_name_to_source(shown[k], probe, &d, back, sizeof back);
    if (kind < 0 || strcmp(back, d.name[k]) != 0) abort(); /* must map back */
    for (int j = 0; j < k; j++)
      if (!strcmp(shown[j], shown[k])) abort(); /* one name, one entry */
  }
  return 0;
}
