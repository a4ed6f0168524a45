/*
 * msgpack.h - a small bounds-checked MessagePack reader and writer.
 *
 * The reader walks a byte buffer one item at a time and never reads past
 * its end: every length is checked against the bytes that remain before it
 * is used.  The writer appends to a caller buffer (fixed size) or to a heap
 * buffer it grows; errors are sticky, so a sequence of puts can be checked
 * once at the end.  Besides the compact forms (smallest encoding), the
 * writer has fixed-width forms because the frame layout pins some fields to
 * a given encoding (int32 0xd2, uint64 0xcf, array16 0xdc, bin32 0xc6...).
 */
#ifndef B2_MSGPACK_H
#define B2_MSGPACK_H

#include <stddef.h>
#include <stdint.h>

/* ---- reader ------------------------------------------------------------ */

enum b2_mp_kind {
  B2_MP_NIL = 1,
  B2_MP_BOOL,
  B2_MP_INT,   /* any integer format, positive or negative */
  B2_MP_FLOAT, /* float32 or float64 */
  B2_MP_STR,
  B2_MP_BIN,
  B2_MP_ARRAY,
  B2_MP_MAP,
  B2_MP_EXT
};

typedef struct b2_mp_item {
  int kind;            /* B2_MP_* */
  uint8_t marker;      /* the format byte */
  int boolean;         /* B2_MP_BOOL */
  int negative;        /* B2_MP_INT: value < 0 (then it is in `i`) */
  int64_t i;           /* B2_MP_INT: the value when it fits int64 */
  uint64_t u;          /* B2_MP_INT: the value when it is >= 0 */
  double f;            /* B2_MP_FLOAT */
  const uint8_t *data; /* STR, BIN, EXT: the payload (inside the buffer) */
  uint32_t len;        /* STR, BIN, EXT: payload bytes; ARRAY: elements;
                          MAP: key/value pairs */
  int8_t ext_type;     /* B2_MP_EXT */
  size_t pos;          /* offset of the item's format byte in the buffer */
} b2_mp_item;

typedef struct b2_mp_reader {
  const uint8_t *buf;
  size_t len;
  size_t pos; /* next byte to read */
} b2_mp_reader;

void b2_mp_reader_init(b2_mp_reader *r, const void *buf, size_t len);

/* Read one item.  Arrays and maps: only their header (the caller reads the
 * elements next); str, bin and ext: the payload is consumed and pointed to.
 * Returns 0, B2_E_TRUNCATED when the buffer ends inside the item, or
 * B2_E_FORMAT for the reserved byte 0xc1.  On error the position is kept. */
int b2_mp_next(b2_mp_reader *r, b2_mp_item *it);

/* Skip one whole item, nested arrays and maps included. */
int b2_mp_skip(b2_mp_reader *r);

/* Typed reads: each reads one item and fails with B2_E_FORMAT (a detail
 * naming the byte offset and what was found) when it has another type. */
int b2_mp_read_int(b2_mp_reader *r, int64_t *v);    /* fits int64 */
int b2_mp_read_uint(b2_mp_reader *r, uint64_t *v);  /* >= 0 */
int b2_mp_read_bool(b2_mp_reader *r, int *v);
int b2_mp_read_str(b2_mp_reader *r, const uint8_t **s, uint32_t *len);
int b2_mp_read_bin(b2_mp_reader *r, const uint8_t **d, uint32_t *len);
int b2_mp_read_array(b2_mp_reader *r, uint32_t *n);
int b2_mp_read_map(b2_mp_reader *r, uint32_t *n);
int b2_mp_read_ext(b2_mp_reader *r, int8_t *type, const uint8_t **d,
                   uint32_t *len);

/* Short English name of an item kind ("array"). */
const char *b2_mp_kind_name(int kind);

/* ---- writer ------------------------------------------------------------ */

typedef struct b2_mp_writer {
  uint8_t *buf;
  size_t len;
  size_t cap;
  int fixed; /* the buffer belongs to the caller and cannot grow */
  int err;   /* first error (B2_E_NOSPC for a full fixed buffer, NOMEM) */
} b2_mp_writer;

/* buf != NULL: write into buf[0..cap) only.  buf == NULL: a heap buffer that
 * grows as needed; release it with b2_mp_writer_free (or take w->buf). */
void b2_mp_writer_init(b2_mp_writer *w, void *buf, size_t cap);
void b2_mp_writer_free(b2_mp_writer *w);

/* Every put returns the writer's error state (0 while all went well). */
int b2_mp_put_raw(b2_mp_writer *w, const void *data, size_t n);
int b2_mp_put_nil(b2_mp_writer *w);
int b2_mp_put_bool(b2_mp_writer *w, int v);
int b2_mp_put_int(b2_mp_writer *w, int64_t v);    /* smallest encoding */
int b2_mp_put_uint(b2_mp_writer *w, uint64_t v);  /* smallest encoding */
int b2_mp_put_float32(b2_mp_writer *w, float v);
int b2_mp_put_float64(b2_mp_writer *w, double v);
int b2_mp_put_str(b2_mp_writer *w, const void *s, size_t len);
int b2_mp_put_bin(b2_mp_writer *w, const void *d, size_t len);
int b2_mp_put_array(b2_mp_writer *w, uint32_t n);
int b2_mp_put_map(b2_mp_writer *w, uint32_t n);
int b2_mp_put_ext(b2_mp_writer *w, int8_t type, const void *d, size_t len);

/* Fixed-width forms. */
int b2_mp_put_i8(b2_mp_writer *w, int8_t v);     /* 0xd0 */
int b2_mp_put_i16(b2_mp_writer *w, int16_t v);   /* 0xd1 */
int b2_mp_put_i32(b2_mp_writer *w, int32_t v);   /* 0xd2 */
int b2_mp_put_i64(b2_mp_writer *w, int64_t v);   /* 0xd3 */
int b2_mp_put_u8(b2_mp_writer *w, uint8_t v);    /* 0xcc */
int b2_mp_put_u16(b2_mp_writer *w, uint16_t v);  /* 0xcd */
int b2_mp_put_u32(b2_mp_writer *w, uint32_t v);  /* 0xce */
int b2_mp_put_u64(b2_mp_writer *w, uint64_t v);  /* 0xcf */
int b2_mp_put_array16(b2_mp_writer *w, uint16_t n); /* 0xdc */
int b2_mp_put_map16(b2_mp_writer *w, uint16_t n);   /* 0xde */
int b2_mp_put_bin32(b2_mp_writer *w, const void *d, uint32_t len); /* 0xc6 */

#endif /* B2_MSGPACK_H */
