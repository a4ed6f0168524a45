/* fuzz_chunk.c - libFuzzer target: the chunk decoder on arbitrary bytes.
 * Parses the header and decodes the whole chunk and partial ranges.  When
 * the whole chunk decodes, every range must decode too and give the same
 * bytes as the whole decode (a mismatch aborts). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "b2_chunk.h"
#include "b2_error.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAVE_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define HAVE_ASAN 1
#endif
#ifdef HAVE_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define MAX_OUT (64u << 20)

/* The range read as b2_frame_read_range does: a buffer as long as the
 * chunk where only the bytes b2_chunk_range_plan asks for are copied and
 * readable (the rest is poisoned: a read of them is a finding).  When the
 * whole chunk decodes (`whole` not NULL), the range must give the same
 * bytes or B2_E_FORMAT (blocks not laid out one after another). */
static void check_spans(const uint8_t *data, size_t size, const b2_chunk_info *in,
                        const uint8_t *whole, size_t off, size_t len, uint8_t *tmp) {
  size_t cb = (size_t)in->cbytes;
  if (cb < 16 || cb > size) return;
  uint8_t *buf = malloc(cb);
  if (!buf) return;
  size_t have = cb < 32 ? cb : 32;
  memcpy(buf, data, have);
  POISON(buf + have, cb - have);
  for (int round = 0; round < 2; round++) {
    size_t head;
    b2_chunk_span sp[B2_CHUNK_SPANS];
    int ns;
    if (b2_chunk_range_plan(buf, have, off, len, &head, sp, &ns) < 0 || ns < 0) break;
    if (ns == 0) {
      if (head <= have || head > cb) abort(); /* a plan must move on */
      UNPOISON(buf + have, head - have);
      memcpy(buf + have, data + have, head - have);
      have = head;
      continue;
    }
    for (int k = 0; k < ns; k++) {
      if (sp[k].lo < 0 || sp[k].lo >= sp[k].hi || (size_t)sp[k].hi > cb) abort();
      UNPOISON(buf + sp[k].lo, (size_t)(sp[k].hi - sp[k].lo));
      memcpy(buf + sp[k].lo, data + sp[k].lo, (size_t)(sp[k].hi - sp[k].lo));
    }
    int rc = b2_chunk_decode_range_spans(buf, cb, off, len, tmp);
    if (whole && rc != B2_E_FORMAT && (rc != (int)len || memcmp(tmp, whole + off, len) != 0))
      abort(); /* read by blocks, the range differs from the whole decode */
    break;
  }
  UNPOISON(buf, cb);
  free(buf);
}

static void check_range(const uint8_t *data, size_t size, const uint8_t *whole,
                        size_t off, size_t len, uint8_t *tmp) {
  if (b2_chunk_decode_range(data, size, off, len, tmp) != (int)len ||
      memcmp(tmp, whole + off, len) != 0)
    abort(); /* the range differs from the whole decode */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  b2_chunk_info in;
  if (b2_chunk_parse(data, size, &in) < 0) return 0;
  if (in.nbytes < 0 || (uint32_t)in.nbytes > MAX_OUT) return 0;
  size_t n = (size_t)in.nbytes;
  uint8_t *out = malloc(n ? n : 1), *tmp = malloc(n ? n : 1);
  if (!out || !tmp) goto done;
  if (b2_chunk_decode(data, size, out, n) == (int)n && n > 0) {
    check_range(data, size, out, 0, n, tmp);
    check_range(data, size, out, n - 1, 1, tmp);
    if (n > 2) check_range(data, size, out, n / 3, n / 3 + 1, tmp);
    if (in.blocksize > 0 && (size_t)in.blocksize < n) { /* across a block end */
      check_range(data, size, out, (size_t)in.blocksize - 1, 2, tmp);
      check_spans(data, size, &in, out, (size_t)in.blocksize - 1, 2, tmp);
    }
    check_spans(data, size, &in, out, n / 3, n / 3 < 4096 ? n / 3 + 1 : 4096, tmp);
  } else if (n > 2) {
    b2_chunk_decode_range(data, size, n / 3, n / 3 + 1, out);
    check_spans(data, size, &in, NULL, n / 3, n / 3 + 1, tmp);
  }
done:
  free(out);
  free(tmp);
  return 0;
}
