/*
 * spans_read.h - a range of a chunk read the way b2_frame_read_range reads
 * it, shared by test_chunk (every fixture chunk) and fuzz_chunk (any input):
 * a buffer as long as the chunk where only its first 32 bytes and the bytes
 * b2_chunk_range_plan asks for are copied.  The rest holds 0xEE and, under
 * AddressSanitizer, is poisoned, so a decoder reading a byte it was not
 * given is a finding.
 */
#ifndef SPANS_READ_H
#define SPANS_READ_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "b2_chunk.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SPANS_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define SPANS_ASAN 1
#endif
#ifdef SPANS_ASAN
#include <sanitizer/asan_interface.h>
#define SPANS_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define SPANS_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define SPANS_POISON(p, n) ((void)(p), (void)(n))
#define SPANS_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

enum spans_outcome {
  SPANS_DECODED, /* *rc: what b2_chunk_decode_range_spans returned */
  SPANS_WHOLE,   /* the plan reads the chunk whole */
  SPANS_NOPLAN,  /* b2_chunk_range_plan failed, or asked for the header
                    three times */
  SPANS_BAD,     /* the plan asks for no more header than it has, or for
                    bytes outside the chunk's data */
};

/* Read [off, off + n) of `chunk` (cb bytes, its cbytes, at least 16) into
 * out, as above. */
static enum spans_outcome spans_read(const uint8_t *chunk, size_t cb, size_t off, size_t n,
                                     uint8_t *out, int *rc) {
  uint8_t *buf = malloc(cb);
  if (!buf) return SPANS_NOPLAN;
  memset(buf, 0xEE, cb);
  size_t have = cb < 32 ? cb : 32;
  memcpy(buf, chunk, have);
  SPANS_POISON(buf + have, cb - have);
  enum spans_outcome res = SPANS_NOPLAN;
  for (int round = 0; round < 3; round++) {
    size_t head;
    b2_chunk_span sp[B2_CHUNK_SPANS];
    int ns;
    if (b2_chunk_range_plan(buf, have, off, n, &head, sp, &ns) < 0) break;
    if (ns < 0) {
      res = SPANS_WHOLE;
      break;
    }
    if (ns == 0) { /* more of the header first */
      if (head <= have || head > cb) {
        res = SPANS_BAD;
        break;
      }
      SPANS_UNPOISON(buf + have, head - have);
      memcpy(buf + have, chunk + have, head - have);
      have = head;
      continue;
    }
    for (int k = 0; k < ns && res != SPANS_BAD; k++) {
      if (sp[k].lo < 16 || sp[k].lo >= sp[k].hi || sp[k].hi > (int64_t)cb) {
        res = SPANS_BAD;
      } else {
        SPANS_UNPOISON(buf + sp[k].lo, (size_t)(sp[k].hi - sp[k].lo));
        memcpy(buf + sp[k].lo, chunk + sp[k].lo, (size_t)(sp[k].hi - sp[k].lo));
      }
    }
    if (res == SPANS_BAD) break;
    *rc = b2_chunk_decode_range_spans(buf, cb, off, n, out, NULL);
    res = SPANS_DECODED;
    break;
  }
  SPANS_UNPOISON(buf, cb);
  free(buf);
  return res;
}

#endif
