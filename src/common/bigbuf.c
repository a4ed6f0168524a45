/*
 * bigbuf.c - the engine's large buffers: cache entries (b2_cache_buf_alloc
 * in b2_cache.h is this allocator), chunks being compressed, stored chunks
 * read for a decode (see bigbuf.h).
 *
 * Such buffers come and go all the time in sizes that differ from chunk to
 * chunk (stored chunks) next to sizes that repeat (decoded chunks).  Kept
 * in the malloc heap, such a mix fragments it: freed holes too small for
 * the next entry pile up until the process holds far more than the
 * cache's capacity.  So a large buffer gets its own mapping, sized up to
 * a 64 KiB class, and goes back to the system when freed, except for a
 * few kept (up to KEEP_BYTES) for the next buffers: a sequential reader
 * frees one decoded chunk as it decodes the next, a reader of many small
 * files frees each file's chunk at its close, and reusing those pages
 * for the next buffer of the same class spares the page faults of a fresh
 * mapping.
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
#include <unistd.h>

#include "common/bigbuf.h"

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
#define KEEP_BYTES (((size_t)8 << 20) + 2 * CLASS) /* e.g. two 4 MiB chunks */

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

/* A kept mapping of exactly `size` bytes (its pages were touched already:
 * no page faults, unlike a fresh mapping), or NULL.  Mappings of another
 * size are not resized: mremap of a mapping the process's threads have
 * used sends every other CPU a TLB flush, which in a virtual machine cost
 * more than the page faults of a fresh mapping (5% of the daemon's time in
 * `tar` of a tree of small frames, whose chunks come in many sizes). */
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
  if (p) UNPOISON(p, size); /* the shadow of the old range must not stay poisoned */
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

/* The loader writes every byte of a new buffer at once: making its pages
 * present in one call costs a fraction of a page fault for each (the
 * mapping's tail past the buffer stays untouched).  Kernels before 5.14
 * refuse the advice: then the pages fault in as written. */
static void populate(void *base, size_t len) {
#ifdef MADV_POPULATE_WRITE
  long page = sysconf(_SC_PAGESIZE);
  size_t n = (len + (size_t)page - 1) / (size_t)page * (size_t)page;
  (void)madvise(base, n, MADV_POPULATE_WRITE);
#else
  (void)base;
  (void)len;
#endif
}

/* A buffer of n bytes; zeroed when `zero` is set (a fresh mapping is
 * zeroed by the kernel already: only reused memory is cleared). */
static uint8_t *buf_alloc(size_t n, int zero) {
  if (n > SIZE_MAX - HDR - CLASS - REDZONE) return NULL;
  size_t need = n + HDR;
  void *base;
  int mapped = need >= MAP_MIN, fresh = 0;
  if (mapped) {
    need = (need + REDZONE + CLASS - 1) / CLASS * CLASS;
    base = take_kept(need);
    if (!base) {
      base = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (base == MAP_FAILED) return NULL;
      fresh = 1;
      /* not for a kept one: walking pages already present costs as much
       * again */
      populate(base, HDR + n);
    }
  } else {
    base = aligned_alloc(HDR, (need + HDR - 1) / HDR * HDR);
    if (!base) return NULL;
  }
  buf_hdr *h = base; /* the header is never poisoned */
  h->size = need;
  h->mapped = mapped;
  b2_bigbuf_use((uint8_t *)base + HDR, n);
  if (zero && !fresh) memset((uint8_t *)base + HDR, 0, n);
  return (uint8_t *)base + HDR;
}

uint8_t *b2_bigbuf_alloc(size_t n) { return buf_alloc(n, 0); }

uint8_t *b2_bigbuf_zalloc(size_t n) { return buf_alloc(n, 1); }

void b2_bigbuf_free(uint8_t *p) {
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

void b2_bigbuf_use(uint8_t *p, size_t len) {
  const buf_hdr *h = (const buf_hdr *)(const void *)(p - HDR);
  if (!h->mapped || len > h->size - HDR) return;
  UNPOISON(p, len);
  POISON(p + len, h->size - HDR - len);
}

size_t b2_bigbuf_cap(const uint8_t *p) {
  if (!p) return 0;
  const buf_hdr *h = (const buf_hdr *)(const void *)(p - HDR);
  return h->size - HDR - (h->mapped ? REDZONE : 0);
}
