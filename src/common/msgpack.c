/* msgpack.c - bounds-checked MessagePack reader and writer (see msgpack.h). */
#include "common/msgpack.h"

#include <stdlib.h>
#include <string.h>

#include "b2_error.h"
#include "common/util.h"

/* ---- reader ------------------------------------------------------------ */

void b2_mp_reader_init(b2_mp_reader *r, const void *buf, size_t len) {
  r->buf = buf;
  r->len = buf ? len : 0;
  r->pos = 0;
}

const char *b2_mp_kind_name(int kind) {
  switch (kind) {
    case B2_MP_NIL: return "nil";
    case B2_MP_BOOL: return "bool";
    case B2_MP_INT: return "integer";
    case B2_MP_FLOAT: return "float";
    case B2_MP_STR: return "str";
    case B2_MP_BIN: return "bin";
    case B2_MP_ARRAY: return "array";
    case B2_MP_MAP: return "map";
    case B2_MP_EXT: return "ext";
    default: return "unknown";
  }
}

/* Big-endian unsigned of `n` bytes (1, 2, 4 or 8). */
static uint64_t be_n(const uint8_t *p, int n) {
  switch (n) {
    case 1: return p[0];
    case 2: return b2_be16(p);
    case 4: return b2_be32(p);
    default: return b2_be64(p);
  }
}

static void set_uint(b2_mp_item *it, uint64_t v) {
  it->kind = B2_MP_INT;
  it->negative = 0;
  it->u = v;
  it->i = v <= (uint64_t)INT64_MAX ? (int64_t)v : 0;
}

static void set_sint(b2_mp_item *it, int64_t v) {
  it->kind = B2_MP_INT;
  it->negative = v < 0;
  it->i = v;
  it->u = v >= 0 ? (uint64_t)v : 0;
}

/* Sign-extend a big-endian integer of n bytes. */
static int64_t sbe_n(const uint8_t *p, int n) {
  switch (n) {
    case 1: return (int8_t)p[0];
    case 2: return (int16_t)b2_be16(p);
    case 4: return (int32_t)b2_be32(p);
    default: return (int64_t)b2_be64(p);
  }
}

int b2_mp_next(b2_mp_reader *r, b2_mp_item *it) {
  memset(it, 0, sizeof *it);
  size_t left = r->len - r->pos;
  if (left < 1)
    return b2_fail(B2_E_TRUNCATED, "msgpack: data ends at byte %zu, an item "
                   "was expected", r->pos);
  const uint8_t *p = r->buf + r->pos;
  uint8_t m = p[0];
  it->marker = m;
  it->pos = r->pos;
  size_t need = 1;   /* bytes of the item header (marker + fixed fields) */
  uint64_t body = 0; /* payload bytes after the header */

  if (m <= 0x7f) {
    set_uint(it, m);
  } else if (m >= 0xe0) {
    set_sint(it, (int8_t)m);
  } else if (m <= 0x8f) {
    it->kind = B2_MP_MAP;
    it->len = m & 0x0f;
  } else if (m <= 0x9f) {
    it->kind = B2_MP_ARRAY;
    it->len = m & 0x0f;
  } else if (m <= 0xbf) {
    it->kind = B2_MP_STR;
    body = m & 0x1f;
  } else {
    int w = 0; /* width of a size or value field */
    switch (m) {
      case 0xc0: it->kind = B2_MP_NIL; break;
      case 0xc1:
        return b2_fail(B2_E_FORMAT, "msgpack: reserved byte 0xc1 at byte %zu",
                       r->pos);
      case 0xc2: case 0xc3:
        it->kind = B2_MP_BOOL;
        it->boolean = m == 0xc3;
        break;
      case 0xc4: case 0xc5: case 0xc6:
        it->kind = B2_MP_BIN;
        w = 1 << (m - 0xc4);
        break;
      case 0xc7: case 0xc8: case 0xc9:
        it->kind = B2_MP_EXT;
        w = 1 << (m - 0xc7);
        break;
      case 0xca: it->kind = B2_MP_FLOAT; w = 4; break;
      case 0xcb: it->kind = B2_MP_FLOAT; w = 8; break;
      case 0xcc: case 0xcd: case 0xce: case 0xcf:
        it->kind = B2_MP_INT;
        w = 1 << (m - 0xcc);
        break;
      case 0xd0: case 0xd1: case 0xd2: case 0xd3:
        it->kind = B2_MP_INT;
        w = 1 << (m - 0xd0);
        break;
      case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8:
        it->kind = B2_MP_EXT;
        break;
      case 0xd9: case 0xda: case 0xdb:
        it->kind = B2_MP_STR;
        w = 1 << (m - 0xd9);
        break;
      case 0xdc: case 0xdd:
        it->kind = B2_MP_ARRAY;
        w = 2 << (m - 0xdc);
        break;
      default: /* 0xde, 0xdf */
        it->kind = B2_MP_MAP;
        w = 2 << (m - 0xde);
        break;
    }
    need = 1 + (size_t)w;
    if (m >= 0xd4 && m <= 0xd8) need = 2;            /* fixext: type byte */
    if (m >= 0xc7 && m <= 0xc9) need = 2 + (size_t)w; /* ext: size + type */
    if (left < need)
      return b2_fail(B2_E_TRUNCATED, "msgpack: %s at byte %zu needs %zu "
                     "bytes, %zu left", b2_mp_kind_name(it->kind), r->pos,
                     need, left);
    const uint8_t *q = p + 1;
    switch (it->kind) {
      case B2_MP_INT:
        if (m <= 0xcf) set_uint(it, be_n(q, w));
        else set_sint(it, sbe_n(q, w));
        break;
      case B2_MP_FLOAT:
        if (w == 4) {
          uint32_t bits = b2_be32(q);
          float f;
          memcpy(&f, &bits, sizeof f);
          it->f = f;
        } else {
          uint64_t bits = b2_be64(q);
          memcpy(&it->f, &bits, sizeof it->f);
        }
        break;
      case B2_MP_BIN: case B2_MP_STR:
        body = be_n(q, w);
        break;
      case B2_MP_ARRAY: case B2_MP_MAP:
        it->len = (uint32_t)be_n(q, w);
        break;
      case B2_MP_EXT:
        if (m >= 0xd4) {
          body = (uint64_t)1 << (m - 0xd4);
          it->ext_type = (int8_t)q[0];
        } else {
          body = be_n(q, w);
          it->ext_type = (int8_t)q[w];
        }
        break;
      default:
        break;
    }
  }
  if (left < need || body > left - need)
    return b2_fail(B2_E_TRUNCATED, "msgpack: %s at byte %zu declares %llu "
                   "bytes, only %zu left", b2_mp_kind_name(it->kind), r->pos,
                   (unsigned long long)body, left - need);
  if (it->kind == B2_MP_STR || it->kind == B2_MP_BIN || it->kind == B2_MP_EXT) {
    it->data = p + need;
    it->len = (uint32_t)body;
  }
  r->pos += need + (size_t)body;
  return 0;
}

int b2_mp_skip(b2_mp_reader *r) {
  /* Iterative: every item consumes at least one byte, so the loop ends
   * within r->len steps whatever the counts claim. */
  uint64_t pending = 1;
  size_t start = r->pos;
  while (pending > 0) {
    b2_mp_item it;
    int rc = b2_mp_next(r, &it);
    if (rc < 0) {
      r->pos = start;
      return rc;
    }
    pending--;
    if (it.kind == B2_MP_ARRAY) pending += it.len;
    else if (it.kind == B2_MP_MAP) pending += 2 * (uint64_t)it.len;
  }
  return 0;
}

/* Read one item and require `kind`. */
static int next_kind(b2_mp_reader *r, b2_mp_item *it, int kind) {
  size_t at = r->pos;
  int rc = b2_mp_next(r, it);
  if (rc < 0) return rc;
  if (it->kind != kind) {
    r->pos = at;
    return b2_fail(B2_E_FORMAT, "msgpack: expected %s at byte %zu, found %s "
                   "(0x%02x)", b2_mp_kind_name(kind), at,
                   b2_mp_kind_name(it->kind), it->marker);
  }
  return 0;
}

int b2_mp_read_int(b2_mp_reader *r, int64_t *v) {
  b2_mp_item it;
  int rc = next_kind(r, &it, B2_MP_INT);
  if (rc < 0) return rc;
  if (!it.negative && it.u > (uint64_t)INT64_MAX) {
    r->pos = it.pos;
    return b2_fail(B2_E_FORMAT, "msgpack: integer at byte %zu is larger "
                   "than int64", it.pos);
  }
  *v = it.i;
  return 0;
}

int b2_mp_read_uint(b2_mp_reader *r, uint64_t *v) {
  b2_mp_item it;
  int rc = next_kind(r, &it, B2_MP_INT);
  if (rc < 0) return rc;
  if (it.negative) {
    r->pos = it.pos;
    return b2_fail(B2_E_FORMAT, "msgpack: integer at byte %zu is negative "
                   "(%lld)", it.pos, (long long)it.i);
  }
  *v = it.u;
  return 0;
}

int b2_mp_read_bool(b2_mp_reader *r, int *v) {
  b2_mp_item it;
  int rc = next_kind(r, &it, B2_MP_BOOL);
  if (rc == 0) *v = it.boolean;
  return rc;
}

int b2_mp_read_str(b2_mp_reader *r, const uint8_t **s, uint32_t *len) {
  b2_mp_item it;
  int rc = next_kind(r, &it, B2_MP_STR);
  if (rc == 0) {
    *s = it.data;
    *len = it.len;
  }
  return rc;
}

int b2_mp_read_bin(b2_mp_reader *r, const uint8_t **d, uint32_t *len) {
  b2_mp_item it;
  int rc = next_kind(r, &it, B2_MP_BIN);
  if (rc == 0) {
    *d = it.data;
    *len = it.len;
  }
  return rc;
}

int b2_mp_read_array(b2_mp_reader *r, uint32_t *n) {
  b2_mp_item it;
  int rc = next_kind(r, &it, B2_MP_ARRAY);
  if (rc == 0) *n = it.len;
  return rc;
}

int b2_mp_read_map(b2_mp_reader *r, uint32_t *n) {
  b2_mp_item it;
  int rc = next_kind(r, &it, B2_MP_MAP);
  if (rc == 0) *n = it.len;
  return rc;
}

int b2_mp_read_ext(b2_mp_reader *r, int8_t *type, const uint8_t **d,
                   uint32_t *len) {
  b2_mp_item it;
  int rc = next_kind(r, &it, B2_MP_EXT);
  if (rc == 0) {
    *type = it.ext_type;
    *d = it.data;
    *len = it.len;
  }
  return rc;
}

/* ---- writer ------------------------------------------------------------ */

void b2_mp_writer_init(b2_mp_writer *w, void *buf, size_t cap) {
  w->buf = buf;
  w->len = 0;
  w->cap = buf ? cap : 0;
  w->fixed = buf != NULL;
  w->err = 0;
}

void b2_mp_writer_free(b2_mp_writer *w) {
  if (!w->fixed) free(w->buf);
  w->buf = NULL;
  w->len = w->cap = 0;
}

/* Make room for n more bytes; returns the write pointer or NULL. */
static uint8_t *room(b2_mp_writer *w, size_t n) {
  if (w->err) return NULL;
  if (n > SIZE_MAX - w->len) {
    w->err = b2_fail(B2_E_LIMIT, "msgpack: output size overflows");
    return NULL;
  }
  if (w->len + n > w->cap) {
    if (w->fixed) {
      w->err = b2_fail(B2_E_NOSPC, "msgpack: %zu-byte buffer full", w->cap);
      return NULL;
    }
    size_t ncap = w->cap ? w->cap : 64;
    while (ncap < w->len + n) {
      if (ncap > SIZE_MAX / 2) {
        ncap = w->len + n;
        break;
      }
      ncap *= 2;
    }
    uint8_t *nb = realloc(w->buf, ncap);
    if (!nb) {
      w->err = b2_fail(B2_E_NOMEM, "msgpack: cannot grow buffer to %zu bytes",
                       ncap);
      return NULL;
    }
    w->buf = nb;
    w->cap = ncap;
  }
  uint8_t *p = w->buf + w->len;
  w->len += n;
  return p;
}

/* Marker byte followed by a big-endian field of `width` bytes. */
static int put_be(b2_mp_writer *w, uint8_t marker, uint64_t v, int width) {
  uint8_t *p = room(w, 1 + (size_t)width);
  if (!p) return w->err;
  p[0] = marker;
  for (int k = 0; k < width; k++)
    p[1 + k] = (uint8_t)(v >> (8 * (width - 1 - k)));
  return 0;
}

int b2_mp_put_raw(b2_mp_writer *w, const void *data, size_t n) {
  uint8_t *p = room(w, n);
  if (!p) return w->err;
  if (n) memcpy(p, data, n);
  return 0;
}

int b2_mp_put_nil(b2_mp_writer *w) { return b2_mp_put_raw(w, "\xc0", 1); }

int b2_mp_put_bool(b2_mp_writer *w, int v) {
  return b2_mp_put_raw(w, v ? "\xc3" : "\xc2", 1);
}

int b2_mp_put_uint(b2_mp_writer *w, uint64_t v) {
  if (v <= 0x7f) {
    uint8_t b = (uint8_t)v;
    return b2_mp_put_raw(w, &b, 1);
  }
  if (v <= UINT8_MAX) return put_be(w, 0xcc, v, 1);
  if (v <= UINT16_MAX) return put_be(w, 0xcd, v, 2);
  if (v <= UINT32_MAX) return put_be(w, 0xce, v, 4);
  return put_be(w, 0xcf, v, 8);
}

int b2_mp_put_int(b2_mp_writer *w, int64_t v) {
  if (v >= 0) return b2_mp_put_uint(w, (uint64_t)v);
  if (v >= -32) {
    uint8_t b = (uint8_t)(int8_t)v;
    return b2_mp_put_raw(w, &b, 1);
  }
  if (v >= INT8_MIN) return put_be(w, 0xd0, (uint64_t)v, 1);
  if (v >= INT16_MIN) return put_be(w, 0xd1, (uint64_t)v, 2);
  if (v >= INT32_MIN) return put_be(w, 0xd2, (uint64_t)v, 4);
  return put_be(w, 0xd3, (uint64_t)v, 8);
}

int b2_mp_put_float32(b2_mp_writer *w, float v) {
  uint32_t bits;
  memcpy(&bits, &v, sizeof bits);
  return put_be(w, 0xca, bits, 4);
}

int b2_mp_put_float64(b2_mp_writer *w, double v) {
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  return put_be(w, 0xcb, bits, 8);
}

/* Header of a str/bin payload of `len` bytes; smallest form. */
static int put_sized(b2_mp_writer *w, size_t len, uint8_t m8, uint8_t m16,
                     uint8_t m32) {
  if (len > UINT32_MAX) {
    if (!w->err) w->err = b2_fail(B2_E_LIMIT, "msgpack: %zu bytes exceed "
                                  "the 32-bit size field", len);
    return w->err;
  }
  if (len <= UINT8_MAX && m8) return put_be(w, m8, len, 1);
  if (len <= UINT16_MAX) return put_be(w, m16, len, 2);
  return put_be(w, m32, len, 4);
}

int b2_mp_put_str(b2_mp_writer *w, const void *s, size_t len) {
  int rc;
  if (len <= 31) {
    uint8_t b = (uint8_t)(0xa0 | len);
    rc = b2_mp_put_raw(w, &b, 1);
  } else {
    rc = put_sized(w, len, 0xd9, 0xda, 0xdb);
  }
  return rc ? rc : b2_mp_put_raw(w, s, len);
}

int b2_mp_put_bin(b2_mp_writer *w, const void *d, size_t len) {
  int rc = put_sized(w, len, 0xc4, 0xc5, 0xc6);
  return rc ? rc : b2_mp_put_raw(w, d, len);
}

int b2_mp_put_array(b2_mp_writer *w, uint32_t n) {
  if (n <= 15) {
    uint8_t b = (uint8_t)(0x90 | n);
    return b2_mp_put_raw(w, &b, 1);
  }
  if (n <= UINT16_MAX) return put_be(w, 0xdc, n, 2);
  return put_be(w, 0xdd, n, 4);
}

int b2_mp_put_map(b2_mp_writer *w, uint32_t n) {
  if (n <= 15) {
    uint8_t b = (uint8_t)(0x80 | n);
    return b2_mp_put_raw(w, &b, 1);
  }
  if (n <= UINT16_MAX) return put_be(w, 0xde, n, 2);
  return put_be(w, 0xdf, n, 4);
}

int b2_mp_put_ext(b2_mp_writer *w, int8_t type, const void *d, size_t len) {
  int rc;
  uint8_t t = (uint8_t)type;
  switch (len) {
    case 1: rc = b2_mp_put_raw(w, "\xd4", 1); break;
    case 2: rc = b2_mp_put_raw(w, "\xd5", 1); break;
    case 4: rc = b2_mp_put_raw(w, "\xd6", 1); break;
    case 8: rc = b2_mp_put_raw(w, "\xd7", 1); break;
    case 16: rc = b2_mp_put_raw(w, "\xd8", 1); break;
    default: rc = put_sized(w, len, 0xc7, 0xc8, 0xc9); break;
  }
  if (!rc) rc = b2_mp_put_raw(w, &t, 1);
  return rc ? rc : b2_mp_put_raw(w, d, len);
}

int b2_mp_put_i8(b2_mp_writer *w, int8_t v) {
  return put_be(w, 0xd0, (uint64_t)(int64_t)v, 1);
}
int b2_mp_put_i16(b2_mp_writer *w, int16_t v) {
  return put_be(w, 0xd1, (uint64_t)(int64_t)v, 2);
}
int b2_mp_put_i32(b2_mp_writer *w, int32_t v) {
  return put_be(w, 0xd2, (uint64_t)(int64_t)v, 4);
}
int b2_mp_put_i64(b2_mp_writer *w, int64_t v) {
  return put_be(w, 0xd3, (uint64_t)v, 8);
}
int b2_mp_put_u8(b2_mp_writer *w, uint8_t v) { return put_be(w, 0xcc, v, 1); }
int b2_mp_put_u16(b2_mp_writer *w, uint16_t v) { return put_be(w, 0xcd, v, 2); }
int b2_mp_put_u32(b2_mp_writer *w, uint32_t v) { return put_be(w, 0xce, v, 4); }
int b2_mp_put_u64(b2_mp_writer *w, uint64_t v) { return put_be(w, 0xcf, v, 8); }
int b2_mp_put_array16(b2_mp_writer *w, uint16_t n) {
  return put_be(w, 0xdc, n, 2);
}
int b2_mp_put_map16(b2_mp_writer *w, uint16_t n) {
  return put_be(w, 0xde, n, 2);
}
int b2_mp_put_bin32(b2_mp_writer *w, const void *d, uint32_t len) {
  int rc = put_be(w, 0xc6, len, 4);
  return rc ? rc : b2_mp_put_raw(w, d, len);
}
