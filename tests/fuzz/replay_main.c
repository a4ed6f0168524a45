/* replay_main.c - a main() for a fuzz target built without libFuzzer
 * (any C compiler, ASan/UBSan): runs LLVMFuzzerTestOneInput once on each
 * file named, or on each file of each directory named, printing
 * "replaying FILE" before each.  A finding aborts the process (the
 * sanitizers and the targets' own checks do), so the last line printed
 * tells which input it was.  Used by tests/t_fuzz_regress.sh. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path) {
  FILE *fp = fopen(path, "rb");
  if (!fp) { printf("not ok replay %s: cannot open\n", path); return 1; }
  size_t cap = 1 << 16, n = 0;
  uint8_t *buf = malloc(cap);
  size_t got;
  while (buf && (got = fread(buf + n, 1, cap - n, fp)) > 0) {
    n += got;
    if (n == cap) {
      uint8_t *nb = realloc(buf, cap * 2);
      if (!nb) { free(buf); buf = NULL; break; }
      buf = nb;
      cap *= 2;
    }
  }
  fclose(fp);
  if (!buf) { printf("not ok replay %s: out of memory\n", path); return 1; }
  printf("replaying %s\n", path);
  fflush(stdout);
  /* libFuzzer hands a copy of exactly n bytes: keep overreads visible */
  uint8_t *exact = malloc(n ? n : 1);
  memcpy(exact, buf, n);
  free(buf);
  LLVMFuzzerTestOneInput(exact, n);
  free(exact);
  return 0;
}

int main(int argc, char **argv) {
  int bad = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) { printf("not ok replay %s: missing\n", argv[i]); bad = 1; continue; }
    if (!S_ISDIR(st.st_mode)) { bad |= replay_file(argv[i]); continue; }
    struct dirent **ents;
    int n = scandir(argv[i], &ents, NULL, alphasort);
    for (int k = 0; k < n; k++) {
      char p[4096];
      snprintf(p, sizeof p, "%s/%s", argv[i], ents[k]->d_name);
      if (ents[k]->d_name[0] != '.' && stat(p, &st) == 0 && S_ISREG(st.st_mode))
        bad |= replay_file(p);
      free(ents[k]);
    }
    if (n >= 0) free(ents);
  }
  return bad;
}
