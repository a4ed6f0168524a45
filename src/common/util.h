/* util.h - small internal helpers shared by the engine layers (not public).
 * Byte-order loads and stores, overflow-checked arithmetic, the monotonic
 * clock, whether two fstat results describe the same unchanged file. */
#ifndef B2_UTIL_H
#define B2_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static inline uint16_t b2_le16(const void *p) {
  const uint8_t *b = p;
  return (uint16_t)(b[0] | (b[1] << 8));
}
static inline uint32_t b2_le32(const void *p) {
  const uint8_t *b = p;
  return (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) |
         ((uint32_t)b[3] << 24);
}
static inline uint64_t b2_le64(const void *p) {
  const uint8_t *b = p;
  return (uint64_t)b2_le32(b) | ((uint64_t)b2_le32(b + 4) << 32);
}
static inline uint16_t b2_be16(const void *p) {
  const uint8_t *b = p;
  return (uint16_t)((b[0] << 8) | b[1]);
}
static inline uint32_t b2_be32(const void *p) {
  const uint8_t *b = p;
  return ((uint32_t)b[0] << 24) | ((uint32_t)b[1] << 16) |
         ((uint32_t)b[2] << 8) | (uint32_t)b[3];
}
static inline uint64_t b2_be64(const void *p) {
  const uint8_t *b = p;
  return ((uint64_t)b2_be32(b) << 32) | (uint64_t)b2_be32(b + 4);
}
static inline void b2_put_le32(void *p, uint32_t v) {
  uint8_t *b = p;
  b[0] = (uint8_t)v; b[1] = (uint8_t)(v >> 8);
  b[2] = (uint8_t)(v >> 16); b[3] = (uint8_t)(v >> 24);
}
static inline void b2_put_le64(void *p, uint64_t v) {
  b2_put_le32(p, (uint32_t)v);
  b2_put_le32((uint8_t *)p + 4, (uint32_t)(v >> 32));
}
static inline void b2_put_be16(void *p, uint16_t v) {
  uint8_t *b = p;
  b[0] = (uint8_t)(v >> 8); b[1] = (uint8_t)v;
}
static inline void b2_put_be32(void *p, uint32_t v) {
  uint8_t *b = p;
  b[0] = (uint8_t)(v >> 24); b[1] = (uint8_t)(v >> 16);
  b[2] = (uint8_t)(v >> 8); b[3] = (uint8_t)v;
}
static inline void b2_put_be64(void *p, uint64_t v) {
  b2_put_be32(p, (uint32_t)(v >> 32));
  b2_put_be32((uint8_t *)p + 4, (uint32_t)v);
}

/* Overflow-checked arithmetic: return 1 on overflow, else store result. */
static inline int b2_mul_overflow_u64(uint64_t a, uint64_t b, uint64_t *r) {
  if (a != 0 && b > UINT64_MAX / a) return 1;
  *r = a * b;
  return 0;
}
static inline int b2_add_overflow_u64(uint64_t a, uint64_t b, uint64_t *r) {
  if (b > UINT64_MAX - a) return 1;
  *r = a + b;
  return 0;
}

/* CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t b2_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CLOCK_REALTIME ms milliseconds from now: a deadline for
 * pthread_cond_timedwait. */
static inline struct timespec b2_deadline_ms(unsigned ms) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += (time_t)(ms / 1000);
  ts.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  return ts;
}

/* Wall-clock nanoseconds just below the coarse clock file times come from
 * (CLOCK_REALTIME_COARSE - 1, at least 1): a time stamped now that any
 * later write by another program leaves a file time above. */
static inline int64_t b2_stamp_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  int64_t ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec - 1;
  return ns > 0 ? ns : 1;
}

/* Do a and b describe the same file with the same bytes (device, inode,
 * size, modification and change times)? */
static inline int b2_same_file(const struct stat *a, const struct stat *b) {
  return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
         a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
         a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

#define B2_MIN(a, b) ((a) < (b) ? (a) : (b))
#define B2_MAX(a, b) ((a) > (b) ? (a) : (b))

#endif /* B2_UTIL_H */
