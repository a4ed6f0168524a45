/*
 * trailer.c - the frame trailer: its length (found from the end of the
 * frame) and the variable-length metalayers it holds.
 */
#include "b2_error.h"
#include "common/util.h"
#include "frame/frame_impl.h"

/* The trailer ends with `0xce <uint32 trailer_len> 0xd8 <type> <16 bytes>`,
 * so trailer_len sits B2_FRAME_TRAILER_LEN_BACK bytes before the end. */
int b2_frame_trailer_len(const uint8_t *tail, uint32_t *len) {
  const uint8_t *p = tail + B2_FRAME_TRAILER_MIN - B2_FRAME_TRAILER_LEN_BACK;
  if (p[-1] != 0xce)
    return b2_fail(B2_E_FORMAT, "trailer: no uint32 length marker (0xce) "
                   "%d bytes before the end of the frame (found 0x%02x)",
                   B2_FRAME_TRAILER_LEN_BACK + 1, p[-1]);
  *len = b2_be32(p);
  return 0;
}

/* Current layout: [version, metalayers section, trailer_len, fingerprint];
 * vlmetalayer offsets count from the start of the trailer. */
int b2_frame_parse_trailer(const uint8_t *trailer, size_t len, int legacy,
                           b2_frame_meta **out, int *count) {
  if (legacy) return b2_frame_parse_legacy_trailer(trailer, len, out, count);
  b2_mp_reader r;
  b2_mp_reader_init(&r, trailer, len);
  uint32_t nelem;
  int64_t version;
  int rc = b2_mp_read_array(&r, &nelem);
  if (!rc) rc = b2_mp_read_int(&r, &version);
  if (rc < 0) return b2_context(rc, "trailer");
  rc = b2_frame_parse_metalayers(trailer, len, r.pos, B2_FRAME_MAX_VLMETA,
                                 out, count);
  return rc < 0 ? b2_context(rc, "trailer: vlmetalayers") : 0;
}
