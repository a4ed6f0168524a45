/*
 * gen_data.h - the benchmark data sets of scripts/gen_data.c, in memory.
 */
#ifndef GEN_DATA_H
#define GEN_DATA_H

#include <stddef.h>
#include <stdint.h>

/* Fill buf with the first n bytes of data set `kind` ("signal", "text",
 * "random", "zeros"; the default seed): the same bytes `gen_data KIND n`
 * writes.  Returns 0, or -1 for an unknown kind. */
int gen_data_fill(const char *kind, uint8_t *buf, size_t n);

/* splitmix64: the next number of the sequence whose state is *s (the
 * same numbers on every machine). */
uint64_t gen_data_rng(uint64_t *s);

#endif /* GEN_DATA_H */
