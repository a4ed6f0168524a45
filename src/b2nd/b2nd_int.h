/* b2nd_int.h - internals of the b2nd layer shared with its unit test. */
#ifndef B2_B2ND_INT_H
#define B2_B2ND_INT_H

#include <stddef.h>
#include <stdint.h>

#include "b2_b2nd.h"
#include "common/msgpack.h"

/* Largest piece of a block fetched into scratch at once (bytes).  Blocks
 * whose needed span is larger are fetched in consecutive windows, so a
 * crafted geometry cannot make a read allocate more than this.  Tests
 * lower it to exercise the windowed path; nothing else writes it. */
extern size_t b2_b2nd_window;

/* Length of the balanced Python list/tuple literal ("[('x', '<f4')]") at
 * the start of s[0..n), quotes respected and braces refused; 0 if none.
 * The .npy parser reads structured descrs with it and the header writer
 * uses it to check a metalayer's structured dtype before copying it. */
size_t b2_npy_literal_len(const char *s, size_t n);

/* How text can be stored in a .npy header: 0 ASCII, 1 every code point
 * fits Latin-1, 2 needs UTF-8 (format 3.0), -1 not valid UTF-8.  The
 * header writer picks the format with it; the dtype parser refuses
 * strings that are not UTF-8. */
int b2_npy_text_kind(const char *s);

/* A cursor over untrusted Python literal text (a dtype string, a .npy
 * header dict): the parsers of dtype.c and npy_parse.c skip whitespace and
 * take expected characters with these. */
typedef struct b2_lex {
  const char *p, *end;
} b2_lex;

static inline void b2_lex_ws(b2_lex *l) {
  while (l->p < l->end && (*l->p == ' ' || *l->p == '\t' || *l->p == '\n' || *l->p == '\r'))
    l->p++;
}

/* Skip whitespace, then take ch if it comes next (1), else take nothing (0). */
static inline int b2_lex_eat(b2_lex *l, char ch) {
  b2_lex_ws(l);
  if (l->p >= l->end || *l->p != ch) return 0;
  l->p++;
  return 1;
}

/* Check ndim's shapes (chunk and block shapes, block within chunk, sizes
 * within limits) and set nitems, nchunks, chunk_nbytes and block_nbytes;
 * itemsize must be set.  Shared by the metalayer parser and b2_b2nd_make. */
int b2_b2nd_derive(b2_b2nd *a);

/* Copy s[0..n) as a->dtype (NUL-terminated; a NUL inside is refused). */
int b2_b2nd_set_dtype(b2_b2nd *a, const uint8_t *s, size_t n);

/* The .npy descr (b2_npy_parse's form: a plain dtype's string, a
 * structured one's list literal) of the dtype python-blosc2 stores in a
 * tensor's msgpack (its dtype.str, or dtype.descr for void dtypes), read
 * at r as numpy.lib.format.descr_to_dtype reads it; malloc'd.  B2_E_FORMAT
 * for an item that is no dtype, B2_E_LIMIT beyond the text parser's
 * limits.  What no array can have (item size 0, a sub-array dtype) is
 * left to b2_dtype_from_npy, which the caller's b2_b2nd_from_npy runs. */
int b2_npy_descr_from_mp(b2_mp_reader *r, char **descr);

/* A msgpack array's header at r, as python-blosc2 writes tuples: a first
 * item "__tuple__" (its versions since 4) is skipped and not counted. */
int b2_tensor_mp_seq(b2_mp_reader *r, uint32_t *n);

#endif /* B2_B2ND_INT_H */
