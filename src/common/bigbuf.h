/* bigbuf.h - large buffers that cannot fragment the heap (internal).
 *
 * A buffer of 64 KiB and up is a mapping of its own, in 64 KiB classes,
 * returned to the system when freed (a few freed ones are kept for the
 * next buffer of the same class); smaller ones come from malloc.  For
 * anything chunk-sized that comes and goes: cache entries (the cache's
 * public b2_cache_buf_* are these), chunks being compressed, stored
 * chunks read for a decode.  Kept in the heap instead, such buffers leave
 * freed holes the process keeps (glibc returns no pages from the middle
 * of its heap): 50 MiB over the cache in a mapped rewrite of an array.
 *
 * b2_bigbuf_alloc: n bytes, contents undefined; NULL when out of memory.
 * b2_bigbuf_zalloc: the same, zeroed (free for a fresh mapping).
 * b2_bigbuf_free: accepts NULL.
 * b2_bigbuf_cap: the bytes usable in p (>= the n asked for).
 * b2_bigbuf_use: p now holds len <= cap bytes; for AddressSanitizer
 * builds, the rest is off limits until the next call. */
#ifndef B2_BIGBUF_H
#define B2_BIGBUF_H

#include <stddef.h>
#include <stdint.h>

uint8_t *b2_bigbuf_alloc(size_t n);
uint8_t *b2_bigbuf_zalloc(size_t n);
void b2_bigbuf_free(uint8_t *p);
size_t b2_bigbuf_cap(const uint8_t *p);
void b2_bigbuf_use(uint8_t *p, size_t len);

#endif /* B2_BIGBUF_H */
