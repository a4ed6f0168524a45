/*
 * ndlz.c - decoding the NDLZ codec (id 32) python-blosc2 offers for 2-D
 * arrays of bytes.  A stream starts with its own geometry: a byte 2 (the
 * dimensions) and the block's two sides as little-endian int32.  The block
 * is then cut into square cells of `meta` (4 or 8, the chunk's codec meta
 * byte) bytes a side, the last ones cut at the block's edges, taken in C
 * order; each cell is one token and what it needs:
 *   0            the cell's bytes, as many as it holds, row by row;
 *   0x40         one byte repeated over the cell;
 *   0xc0         an offset o (uint16): the cell's bytes are the input's
 *                at the token's position minus o, laid out as a literal;
 *   otherwise    some of the cell's rows (whole cell-wide rows) copied from
 *                earlier in the input, the others following as literal rows
 *                (the token says which rows, see below).
 * A cell is written to the block row by row, each row as wide as the cell
 * is inside the block, read one after another from the cell's bytes (for
 * row matches too, as the reference reads them).  Every reference into
 * the input and every literal is checked to lie inside it.
 *
 * Writing (b2_ndlz_compress): a simpler encoder than the reference's, in
 * the same format: a cell of one repeated byte as such, a cell whose bytes
 * equal those of an earlier literal cell within 65,535 bytes by reference,
 * any other cell as a literal; a block it does not make smaller is stored
 * raw by the chunk layer.
 */
#include "b2_codec.h"
#include "b2_error.h"

#include <string.h>

struct in {
  const uint8_t *p;
  int64_t len;
};

/* Bytes [pos, pos + n) of the input, or NULL when outside it. */
static const uint8_t *at(const struct in *s, int64_t pos, int64_t n) {
  return pos >= 0 && n >= 0 && pos <= s->len - n ? s->p + pos : NULL;
}

static int bad(const char *why) { return b2_fail(B2_E_CODEC, "ndlz stream: %s", why); }

/* Rows of a cell taken from a reference: copy `nref` consecutive cell rows
 * of the reference into the rows rows[0..nref) (a later one wins), then,
 * with `literals`, every other row from the input at *pos in increasing
 * order. */
static int rows_from(const struct in *s, int64_t ref, const int *rows, int nref, int side,
                     int literals, int64_t *pos, uint8_t *cell) {
  const uint8_t *r = at(s, ref, (int64_t)nref * side);
  if (!r) return bad("a row reference outside the input");
  int taken[8] = {0};
  for (int k = 0; k < nref; k++) {
    memcpy(cell + rows[k] * side, r + k * side, (size_t)side);
    taken[rows[k]] = 1;
  }
  for (int l = 0; l < side && literals; l++) {
    if (taken[l]) continue;
    const uint8_t *lit = at(s, *pos, side);
    if (!lit) return bad("literal rows past the input's end");
    memcpy(cell + l * side, lit, (size_t)side);
    *pos += side;
  }
  return 0;
}

/* The cell-wide rows a token of a 4x4 cell takes from references, and
 * where: returns how many rows (2, 3 or 4: two pairs), with the
 * references' input positions in ref[0] (and ref[1] for two pairs) and
 * where the literal rows start in *pos; 0 for an unknown token, -1 for
 * offsets past the input's end.
 *   224-255  three rows from one place (token >> 3: 28 rows 1-3, 29 rows
 *            0-2, 30 rows 0, 1, 3, 31 rows 0, 2, 3), one literal row;
 *   128-191  a pair of rows (128: rows 2, 3; else rows (t-128) >> 5 and
 *            ((t-128) >> 3) mod 4), two literal rows;
 *   40-63    rows 0 and (t-32) >> 3 from one place, the other two from
 *            another. */
static int rows4(const struct in *s, uint8_t token, int64_t cur, int *rows, int64_t *ref,
                 int64_t *pos) {
  const uint8_t *o = at(s, cur + 1, token >= 40 && token <= 63 ? 4 : 2);
  if (!o) return -1;
  uint16_t off, off2; /* offsets with their bias, in 16 bits as stored */
  memcpy(&off, o, 2);
  if (token >= 224) { /* three rows from one place, one literal */
    int t = token >> 3;
    if (t == 28) rows[0] = 1, rows[1] = 2, rows[2] = 3;
    else rows[0] = 0, rows[1] = t < 30 ? 1 : t == 30 ? 1 : 2, rows[2] = t < 30 ? 2 : 3;
    *ref = cur + 3 - (uint16_t)(off + 3);
    *pos = cur + 3;
    return 3;
  }
  if (token >= 128 && token <= 191) { /* a pair of rows, two literal */
    if (token == 128) rows[0] = 2, rows[1] = 3;
    else rows[0] = (token - 128) >> 5, rows[1] = ((token - 128) >> 3) - (rows[0] << 2);
    *ref = cur + 3 - (uint16_t)(off + 3);
    *pos = cur + 3;
    return 2;
  }
  if (token >= 40 && token <= 63) { /* two pairs from two places */
    memcpy(&off2, o + 2, 2);
    int j = (token - 32) >> 3;
    rows[0] = 0, rows[1] = j;
    int n = 2;
    for (int k = 1; k < 4; k++)
      if (k != j) rows[n++] = k;
    ref[0] = cur + 5 - (uint16_t)(off + 5);
    ref[1] = cur + 5 - (uint16_t)(off2 + 5);
    *pos = cur + 5;
    return 4;
  }
  return 0;
}

int b2_ndlz_decompress(int meta, const void *src, size_t srclen, void *dst, size_t dstlen) {
  if (meta != 4 && meta != 8)
    return b2_fail(B2_E_UNSUPPORTED, "ndlz: cell size %d, not 4 or 8", meta);
  if (srclen < 9 || srclen > INT32_MAX) return bad("shorter than its 9-byte header");
  struct in s = {src, (int64_t)srclen};
  if (s.p[0] != 2) return bad("not 2 dimensions");
  int32_t bs[2];
  memcpy(&bs[0], s.p + 1, 4);
  memcpy(&bs[1], s.p + 5, 4);
  if (bs[0] < 0 || bs[1] < 0 || (int64_t)bs[0] * bs[1] != (int64_t)dstlen)
    return b2_fail(B2_E_CODEC, "ndlz stream: a %d x %d block, not the block's %zu bytes", bs[0],
                   bs[1], dstlen);
  const int side = meta;
  uint8_t *out = dst, cell[64];
  memset(out, 0, dstlen);
  int64_t pos = 9;
  int64_t gy = (bs[0] + side - 1) / side, gx = (bs[1] + side - 1) / side;
  for (int64_t cy = 0; cy < gy; cy++) {
    for (int64_t cx = 0; cx < gx; cx++) {
      int ph = cy == gy - 1 && bs[0] % side ? bs[0] % side : side; /* rows inside */
      int pw = cx == gx - 1 && bs[1] % side ? bs[1] % side : side; /* bytes per row */
      int64_t cur = pos;
      const uint8_t *t = at(&s, cur, 1);
      if (!t) return bad("a cell past the input's end");
      uint8_t token = *t;
      const uint8_t *from = cell;
      if (token == 0) {
        if (!(from = at(&s, cur + 1, (int64_t)ph * pw))) return bad("a literal cell past the end");
        pos = cur + 1 + (int64_t)ph * pw;
      } else if (token == 0xc0) {
        const uint8_t *o = at(&s, cur + 1, 2);
        uint16_t off;
        if (!o) return bad("a cell reference past the end");
        memcpy(&off, o, 2);
        if (!(from = at(&s, cur - off, (int64_t)ph * pw)))
          return bad("a cell reference outside the input");
        pos = cur + 3;
      } else if (token == 0x40) {
        const uint8_t *v = at(&s, cur + 1, 1);
        if (!v) return bad("a repeated byte past the end");
        memset(cell, *v, sizeof cell);
        pos = cur + 2;
      } else if (side == 4) {
        int rows[4];
        int64_t ref[2];
        int n = rows4(&s, token, cur, rows, ref, &pos);
        if (n < 0) return bad("a row reference past the end");
        if (n == 0) return b2_fail(B2_E_CODEC, "ndlz stream: unknown token %u", token);
        int rc = n == 4 ? rows_from(&s, ref[0], rows, 2, 4, 0, &pos, cell)
                        : rows_from(&s, ref[0], rows, n, 4, 1, &pos, cell);
        if (rc == 0 && n == 4) rc = rows_from(&s, ref[1], rows + 2, 2, 4, 0, &pos, cell);
        if (rc < 0) return rc;
      } else {
        int type = token >> 3, row = token & 7, n = type == 21 ? 3 : type == 17 ? 2 : 0;
        if (n == 0) return b2_fail(B2_E_CODEC, "ndlz stream: unknown token %u", token);
        if (row + n > side) return bad("matched rows past the cell");
        const uint8_t *o = at(&s, cur + 1, 2);
        uint16_t off;
        if (!o) return bad("a row reference past the end");
        memcpy(&off, o, 2);
        int rows[3] = {row, row + 1, row + 2};
        pos = cur + 3;
        int rc = rows_from(&s, cur - off, rows, n, 8, 1, &pos, cell);
        if (rc < 0) return rc;
      }
      /* rows of the cell inside the block, each pw bytes, read in turn */
      uint8_t *o = out + cy * side * bs[1] + cx * side;
      for (int r = 0; r < ph; r++) memcpy(o + (int64_t)r * bs[1], from + r * pw, (size_t)pw);
    }
  }
  return (int)dstlen;
}

/* Hash of a cell's bytes, for finding an earlier literal cell like it. */
static uint32_t cell_hash(const uint8_t *p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
  return h ^ (uint32_t)n;
}

#define NDLZ_TAB 4096

int b2_ndlz_compress(int meta, int ndim, const int32_t *shape, const void *src, size_t srclen,
                     void *dst, size_t dstcap) {
  if ((meta != 4 && meta != 8) || ndim != 2 || shape[0] <= 0 || shape[1] <= 0 ||
      (int64_t)shape[0] * shape[1] != (int64_t)srclen || srclen > INT32_MAX)
    return 0; /* not a whole 2-D block of bytes: stored raw */
  const uint8_t *in = src;
  uint8_t *out = dst, cell[64];
  size_t limit = dstcap < srclen ? dstcap : srclen; /* not smaller: raw */
  if (limit < 9) return 0;
  out[0] = 2;
  memcpy(out + 1, &shape[0], 4);
  memcpy(out + 5, &shape[1], 4);
  size_t pos = 9;
  int32_t tab[NDLZ_TAB]; /* start of an earlier literal cell's bytes, or -1 */
  for (int i = 0; i < NDLZ_TAB; i++) tab[i] = -1;
  const int side = meta;
  int64_t gy = (shape[0] + side - 1) / side, gx = (shape[1] + side - 1) / side;
  for (int64_t cy = 0; cy < gy; cy++) {
    for (int64_t cx = 0; cx < gx; cx++) {
      int ph = cy == gy - 1 && shape[0] % side ? shape[0] % side : side;
      int pw = cx == gx - 1 && shape[1] % side ? shape[1] % side : side;
      const uint8_t *o = in + cy * side * shape[1] + cx * side;
      size_t n = (size_t)ph * (size_t)pw;
      for (int r = 0; r < ph; r++) memcpy(cell + r * pw, o + (int64_t)r * shape[1], (size_t)pw);
      int same = 1;
      for (size_t i = 1; i < n && same; i++) same = cell[i] == cell[0];
      if (same) {
        if (pos + 2 > limit) return 0;
        out[pos++] = 0x40;
        out[pos++] = cell[0];
        continue;
      }
      uint32_t h = cell_hash(cell, n) % NDLZ_TAB;
      int32_t at = tab[h];
      if (at >= 0 && (size_t)at + n <= pos && pos - (size_t)at <= 65535 &&
          memcmp(out + at, cell, n) == 0) {
        if (pos + 3 > limit) return 0;
        uint16_t off = (uint16_t)(pos - (size_t)at); /* the decoder reads at token - off */
        out[pos++] = 0xc0;
        memcpy(out + pos, &off, 2);
        pos += 2;
        continue;
      }
      if (pos + 1 + n > limit) return 0;
      out[pos++] = 0;
      tab[h] = (int32_t)pos;
      memcpy(out + pos, cell, n);
      pos += n;
    }
  }
  return pos < srclen ? (int)pos : 0;
}
