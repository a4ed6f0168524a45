/*
 * t.h - the minimal unit-test harness.
 *
 * A test file defines functions `static void test_xxx(void)` and lists them
 * in main with T_RUN(test_xxx).  Each test prints one line, "ok NAME" or
 * "not ok NAME: reason", which tests/run.sh counts; "skip NAME: reason" for
 * a test whose inputs are absent.  CHECK* record a failure and continue.
 */
#ifndef B2_T_H
#define B2_T_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int t_failed_;
static int t_skipped_;
static int t_total_failed_;

#define CHECK(cond)                                                        \
  do {                                                                     \
    if (!(cond)) {                                                         \
      fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__,   \
              #cond);                                                      \
      t_failed_ = 1;                                                       \
    }                                                                      \
  } while (0)

#define CHECK_EQ(a, b)                                                     \
  do {                                                                     \
    long long a_ = (long long)(a), b_ = (long long)(b);                    \
    if (a_ != b_) {                                                        \
      fprintf(stderr, "  %s:%d: %s == %lld, expected %s == %lld\n",        \
              __FILE__, __LINE__, #a, a_, #b, b_);                         \
      t_failed_ = 1;                                                       \
    }                                                                      \
  } while (0)

#define CHECK_MEM(a, b, n) CHECK(memcmp((a), (b), (n)) == 0)

#define T_SKIP(...)                                                        \
  do {                                                                     \
    fprintf(stderr, "  skipped: " __VA_ARGS__);                            \
    fprintf(stderr, "\n");                                                 \
    t_skipped_ = 1;                                                        \
    return;                                                                \
  } while (0)

#define T_RUN(fn)                                                          \
  do {                                                                     \
    t_failed_ = 0;                                                         \
    t_skipped_ = 0;                                                        \
    fn();                                                                  \
    if (t_skipped_ && !t_failed_)                                          \
      printf("skip %s\n", #fn);                                            \
    else                                                                   \
      printf("%s %s\n", t_failed_ ? "not ok" : "ok", #fn);                 \
    fflush(stdout);                                                        \
    t_total_failed_ += t_failed_;                                          \
  } while (0)

#define T_END() return t_total_failed_ ? 1 : 0

/* Directory of the reference fixtures (B2FS_FIXTURES overrides). */
static inline const char *t_fixtures(void) {
  const char *e = getenv("B2FS_FIXTURES");
  return e && *e ? e : "../shared/fixtures";
}

/* Read a whole file; returns malloc'd buffer or NULL. */
static inline unsigned char *t_read_file(const char *path, size_t *len) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return NULL;
  if (fseek(fp, 0, SEEK_END) != 0) { fclose(fp); return NULL; }
  long n = ftell(fp);
  if (n < 0) { fclose(fp); return NULL; }
  rewind(fp);
  unsigned char *buf = malloc((size_t)n + 1);
  if (buf && fread(buf, 1, (size_t)n, fp) != (size_t)n) { free(buf); buf = NULL; }
  fclose(fp);
  if (buf) *len = (size_t)n;
  return buf;
}

/* Test data: Marsaglia's xorshift generators (shifts 13, 7, 17 on 64
 * bits; 13, 17, 5 on 32), repeatable from a seed; the state must not be 0. */
static inline uint64_t t_xorshift64(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}
static inline uint32_t t_xorshift32(uint32_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return *s;
}

#endif
