/*
 * cache_buf.c - the buffers that hold cache entries (b2_cache_buf_alloc,
 * b2_cache_buf_free; see b2_cache.h).
 *
 * Entries come and go all the time in sizes that differ from chunk to
 * chunk (stored chunks) next to sizes that repeat (decoded chunks).  Kept
 * in the malloc heap, such a mix fragments it: freed holes too small for
 * the next entry pile up until the process holds far more than the
 * cache's capacity.  So a large buffer gets its own mapping, sized up to
 * a 64 KiB class, and goes back to the system when freed, except for a
 * few kept (up to KEEP_BYTES) for the next buffer of the same class: a
 * sequential reader frees one decoded chunk as it decodes the next, and
 * reusing those pages spares the page faults of a fresh mapping.
 *
 * Every buffer starts with a small header that records how it was made.
 *
 * AddressSanitizer puts no red zones around mappings by itself: in its
 * builds the bytes of a mapping past the buffer's length (at least
 * REDZONE of them) and whole kept mappings are poisoned by hand, so a
 * decoder writing past its chunk, or a use after free, is reported.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "b2_cache.h"
#include "cache/cache_int.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#define REDZONE 64
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#define REDZONE 0
#endif

#define HDR 64                      /* keeps the data 64-byte aligned */
#define MAP_MIN ((size_t)64 << 10)  /* smaller buffers come from malloc */
#define CLASS ((size_t)64 << 10)    /* mappings are multiples of this */
#define KEEP_SLOTS 32
#define KEEP_BYTES ((size_t)8 << 20)

typedef struct buf_hdr {
  size_t size;  /* bytes of the allocation, header included */
  int mapped;   /* from mmap (else malloc) */
} buf_hdr;

static struct {
  pthread_mutex_t mu;
  void *slot[KEEP_SLOTS];  /* freed mappings kept for reuse */
  size_t size[KEEP_SLOTS];
  int n;
  size_t bytes;
} keep = {PTHREAD_MUTEX_INITIALIZER, {0}, {0}, 0, 0};

/* A kept mapping of exactly `size` bytes, or NULL. */
static void *take_kept(size_t size) {
  void *p = NULL;
  pthread_mutex_lock(&keep.mu);
  for (int i = keep.n - 1; i >= 0; i--) {
    if (keep.size[i] != size) continue;
    p = keep.slot[i];
    keep.n--;
    keep.slot[i] = keep.slot[keep.n];
    keep.size[i] = keep.size[keep.n];
    keep.bytes -= size;
    break;
  }
  pthread_mutex_unlock(&keep.mu);
  return p;
}

/* Keep a freed mapping for reuse if there is room; 1 if kept. */
static int put_kept(void *p, size_t size) {
  int kept = 0;
  pthread_mutex_lock(&keep.mu);
  if (keep.n < KEEP_SLOTS && keep.bytes + size <= KEEP_BYTES) {
    keep.slot[keep.n] = p;
    keep.size[keep.n] = size;
    keep.n++;
    keep.bytes += size;
    kept = 1;
  }
  pthread_mutex_unlock(&keep.mu);
  return kept;
}

uint8_t *b2_cache_buf_alloc(size_t n) {
  if (n > SIZE_MAX - HDR - CLASS - REDZONE) return NULL;
  size_t need = n + HDR;
  void *base;
  int mapped = need >= MAP_MIN;
  if (mapped) {
    need = (need + REDZONE + CLASS - 1) / CLASS * CLASS;
    base = take_kept(need);
    if (!base) {
      base = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (base == MAP_FAILED) return NULL;
    }
  } else {
    base = aligned_alloc(HDR, (need + HDR - 1) / HDR * HDR);
    if (!base) return NULL;
  }
  buf_hdr *h = base; /* the header is never poisoned */
  h->size = need;
  h->mapped = mapped;
  b2_cache_buf_use((uint8_t *)base + HDR, n);
  return (uint8_t *)base + HDR;
}

void b2_cache_buf_free(uint8_t *p) {
  if (!p) return;
  buf_hdr *h = (buf_hdr *)(void *)(p - HDR);
  if (!h->mapped) {
    free(h);
    return;
  }
  size_t size = h->size;
  POISON(p, size - HDR); /* kept: any use is a use after free */
  if (!put_kept(h, size)) {
    UNPOISON(h, size); /* the next mapping there starts clean */
    munmap(h, size);
  }
}

void b2_cache_buf_use(uint8_t *p, size_t len) {
  const buf_hdr *h = (const buf_hdr *)(const void *)(p - HDR);
  if (!h->mapped || len > h->size - HDR) return;
  UNPOISON(p, len);
  POISON(p + len, h->size - HDR - len);
}

size_t b2_cache_buf_cap(const uint8_t *p) {
  if (!p) return 0;
  const buf_hdr *h = (const buf_hdr *)(const void *)(p - HDR);
  return h->size - HDR - (h->mapped ? REDZONE : 0);
}
