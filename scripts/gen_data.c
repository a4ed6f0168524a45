/*
 * gen_data.c - deterministic benchmark data sets, streamed to a file.
 *
 *   gen_data KIND SIZE [OUT] [--seed N]
 *
 *   KIND  signal  smooth float64 samples (three sines plus a little noise,
 *                 quantised to 2^-12, like scaled ADC readings: the low
 *                 mantissa bits are zero, the lowest significant ones noisy)
 *         text    pseudo-English sentences (a Zipf-like draw from a few
 *                 hundred common words, commas, full stops, a newline every
 *                 fifth sentence)
 *         random  incompressible bytes
 *         zeros   all zero bytes
 *   SIZE  bytes, with an optional K, M or G suffix (powers of two)
 *   OUT   output file (default: standard output)
 *   --seed N  another sequence of the same kind (default seed per kind)
 *
 *   gen_data --tree N DIR [--min SIZE] [--max SIZE]
 *
 *   N files in DIR (made if absent), 100 per subdirectory dNNN: file k is
 *   dNNN/fNNNNN.txt (text) for even k, dNNN/fNNNNN.f64 (signal, a whole
 *   number of float64) for odd k, each with its own seed, of a size drawn
 *   log-uniformly from [--min, --max] (2K, 512K).  Prints the total bytes.
 *
 * The same arguments always give the same bytes, on every machine (only
 * integer arithmetic and sin() of exactly representable arguments, rounded
 * to 2^-12, feed the output).  Written in 1 MiB pieces: any size fits.
 * Shared by scripts/bench-read and scripts/bench-write (build it with
 * bench_build_tools in scripts/bench_common.sh); scripts/bench_decode.c
 * links it with -DGEN_DATA_NO_MAIN and calls gen_data_fill (gen_data.h).
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gen_data.h"

#define PIECE ((size_t)1 << 20)

/* splitmix64: small, seeded, the same numbers everywhere. */
uint64_t gen_data_rng(uint64_t *s) {
  uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

static double rng_unit(uint64_t *s) {
  return (double)(gen_data_rng(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* ---- generators: fill buf[0..n) continuing from their state -------------- */

typedef struct gen {
  uint64_t rng;
  uint64_t index;     /* signal: next sample number */
  uint8_t carry[64];  /* bytes of a sample or word cut at a piece's end */
  size_t ncarry;
  int words_left;     /* text: words left in the sentence */
  uint64_t sentences;
} gen;

static size_t put_carry(gen *g, uint8_t *buf, size_t n) {
  size_t k = g->ncarry < n ? g->ncarry : n;
  memcpy(buf, g->carry, k);
  memmove(g->carry, g->carry + k, g->ncarry - k);
  g->ncarry -= k;
  return k;
}

/* Emit `len` bytes of `src`; what does not fit goes to the carry. */
static size_t put(gen *g, uint8_t *buf, size_t room, const void *src, size_t len) {
  size_t k = len < room ? len : room;
  memcpy(buf, src, k);
  memcpy(g->carry, (const uint8_t *)src + k, len - k);
  g->ncarry = len - k;
  return k;
}

static void fill_signal(gen *g, uint8_t *buf, size_t n) {
  const double tau = 6.283185307179586;
  size_t pos = put_carry(g, buf, n);
  while (pos < n) {
    double t = (double)g->index++;
    double v = 100.0 * sin(tau * t / 65536.0) + 20.0 * sin(tau * t / 977.3 + 0.3) +
               3.0 * sin(tau * t / 61.7 + 1.1) + 2e-3 * (rng_unit(&g->rng) - 0.5);
    v = nearbyint(v * 4096.0) / 4096.0;
    pos += put(g, buf + pos, n - pos, &v, sizeof v);
  }
}

static const char *const vocab[] = {
    "the", "of", "and", "to", "a", "in", "is", "it", "that", "was", "for", "on",
    "are", "with", "as", "he", "be", "at", "by", "this", "had", "not", "but",
    "from", "or", "have", "an", "they", "which", "one", "you", "were", "her",
    "all", "she", "there", "would", "their", "we", "him", "been", "has", "when",
    "who", "will", "more", "no", "if", "out", "so", "said", "what", "up", "its",
    "about", "into", "than", "them", "can", "only", "other", "new", "some",
    "could", "time", "these", "two", "may", "then", "do", "first", "any", "my",
    "now", "such", "like", "our", "over", "man", "me", "even", "most", "made",
    "after", "also", "did", "many", "before", "must", "through", "back",
    "years", "where", "much", "your", "way", "well", "down", "should",
    "because", "each", "just", "those", "people", "how", "too", "little",
    "state", "good", "very", "make", "world", "still", "own", "see", "men",
    "work", "long", "get", "here", "between", "both", "life", "being", "under",
    "never", "day", "same", "another", "know", "while", "last", "might", "us",
    "great", "old", "year", "off", "come", "since", "against", "go", "came",
    "right", "used", "take", "three", "himself", "few", "house", "use",
    "during", "without", "again", "place", "around", "however", "home",
    "small", "found", "thought", "went", "say", "part", "once", "general",
    "high", "upon", "school", "every", "does", "got", "united", "left",
    "number", "course", "war", "until", "always", "away", "something", "fact",
    "though", "water", "less", "public", "put", "think", "almost", "hand",
    "enough", "far", "took", "head", "yet", "government", "system", "better",
    "set", "told", "nothing", "night", "end", "why", "called", "didn't",
    "eyes", "find", "going", "look", "asked", "later", "knew", "point", "next",
    "program", "city", "business", "give", "group", "toward", "young", "days",
    "let", "room", "president", "side", "social", "given", "present",
    "several", "order", "national", "possible", "rather", "second", "face",
    "per", "among", "form", "important", "often", "things", "looked", "early",
    "white", "case", "john", "become", "large", "big", "need", "four",
    "within", "felt", "along", "children", "saw", "best", "church", "ever",
    "least", "power", "development", "light", "thing", "seemed", "family",
    "interest", "want", "members", "mind", "country", "area", "others",
    "although", "turned", "done", "open", "god", "service", "certain", "kind",
    "problem", "began", "different", "door", "thus", "help", "sense", "means",
    "whole", "matter", "perhaps", "itself", "york", "times", "law", "human",
    "line", "above", "name", "example", "action", "company", "hands", "local",
    "show", "whether", "five", "history", "gave", "today", "either", "act",
    "feet", "across", "taken", "past", "quite", "anything", "seen", "having",
    "death", "body", "week", "experience", "half", "really", "field", "word",
    "free", "information", "money", "kept", "morning", "car", "value",
    "behind", "office", "political"};
#define NVOCAB (sizeof vocab / sizeof vocab[0])

static void fill_text(gen *g, uint8_t *buf, size_t n) {
  size_t pos = put_carry(g, buf, n);
  while (pos < n) {
    char w[64];
    int first = g->words_left == 0;
    if (first) g->words_left = 6 + (int)(gen_data_rng(&g->rng) % 18);
    double u = rng_unit(&g->rng);
    const char *word = vocab[(size_t)((double)NVOCAB * u * u * u)];
    size_t len = strlen(word);
    memcpy(w, word, len);
    if (first && w[0] >= 'a' && w[0] <= 'z') w[0] = (char)(w[0] - 32);
    if (--g->words_left == 0) {
      w[len++] = '.';
      w[len++] = (++g->sentences % 5 == 0) ? '\n' : ' ';
    } else {
      if (gen_data_rng(&g->rng) % 13 == 0) w[len++] = ',';
      w[len++] = ' ';
    }
    pos += put(g, buf + pos, n - pos, w, len);
  }
}

static void fill_random(gen *g, uint8_t *buf, size_t n) {
  for (size_t pos = 0; pos < n; pos += 8) {
    uint64_t v = gen_data_rng(&g->rng);
    memcpy(buf + pos, &v, n - pos < 8 ? n - pos : 8);
  }
}

static void fill_zeros(gen *g, uint8_t *buf, size_t n) {
  (void)g;
  memset(buf, 0, n);
}

static const struct {
  const char *name;
  void (*fill)(gen *, uint8_t *, size_t);
  uint64_t seed;
} kinds[] = {
    {"signal", fill_signal, 42},
    {"text", fill_text, 7},
    {"random", fill_random, 1},
    {"zeros", fill_zeros, 0},
};
#define NKINDS (sizeof kinds / sizeof kinds[0])

static int find_kind(const char *name) {
  for (size_t k = 0; k < NKINDS; k++)
    if (!strcmp(kinds[k].name, name)) return (int)k;
  return -1;
}

int gen_data_fill(const char *kind, uint8_t *buf, size_t n) {
  int k = find_kind(kind);
  if (k < 0) return -1;
  gen g;
  memset(&g, 0, sizeof g);
  g.rng = kinds[k].seed;
  kinds[k].fill(&g, buf, n);
  return 0;
}

#ifndef GEN_DATA_NO_MAIN
/* ---- command line ---------------------------------------------------------- */

static int parse_size(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s || errno || s[0] == '-') return -1;
  int shift = 0;
  if (*end == 'K' || *end == 'k') shift = 10;
  else if (*end == 'M' || *end == 'm') shift = 20;
  else if (*end == 'G' || *end == 'g') shift = 30;
  if (shift) end++;
  if (*end || (shift && v > (UINT64_MAX >> shift))) return -1;
  *out = (uint64_t)v << shift;
  return 0;
}

static int usage(void) {
  fputs("usage: gen_data signal|text|random|zeros SIZE[K|M|G] [OUT] [--seed N]\n"
        "       gen_data --tree N DIR [--min SIZE] [--max SIZE]\n", stderr);
  return 2;
}

/* `size` bytes of kind k (index into kinds[]) from `seed` into out (named
 * `name` in messages), closed here. */
static int write_data(FILE *out, const char *name, int k, uint64_t seed, uint64_t size,
                      uint8_t *buf) {
  gen g;
  memset(&g, 0, sizeof g);
  g.rng = seed;
  for (uint64_t done = 0; done < size;) {
    size_t n = size - done < PIECE ? (size_t)(size - done) : PIECE;
    kinds[k].fill(&g, buf, n);
    if (fwrite(buf, 1, n, out) != n) {
      fprintf(stderr, "gen_data: %s: write: %s\n", name, strerror(errno));
      fclose(out);
      return 1;
    }
    done += n;
  }
  if (fclose(out) != 0) {
    fprintf(stderr, "gen_data: %s: close: %s\n", name, strerror(errno));
    return 1;
  }
  return 0;
}

static int write_file(const char *path, int k, uint64_t seed, uint64_t size, uint8_t *buf) {
  FILE *out = fopen(path, "wb");
  if (!out) {
    fprintf(stderr, "gen_data: %s: %s\n", path, strerror(errno));
    return 1;
  }
  return write_data(out, path, k, seed, size, buf);
}

static int make_tree(int argc, char **argv) {
  uint64_t nfiles, lo = 2048, hi = 512 * 1024;
  if (argc < 4 || parse_size(argv[2], &nfiles) < 0 || nfiles > 10000000) return usage();
  const char *dir = argv[3];
  for (int i = 4; i < argc; i++) {
    if (i + 1 >= argc) return usage();
    if (!strcmp(argv[i], "--min") && parse_size(argv[i + 1], &lo) == 0) i++;
    else if (!strcmp(argv[i], "--max") && parse_size(argv[i + 1], &hi) == 0) i++;
    else return usage();
  }
  if (lo < 8 || hi < lo) return usage();
  int ktext = find_kind("text"), ksig = find_kind("signal");
  uint8_t *buf = malloc(PIECE);
  char path[4096];
  if (!buf) return 1;
  uint64_t s = 0x7265657274ULL, total = 0; /* sizes: one sequence */
  mkdir(dir, 0755);
  for (uint64_t f = 0; f < nfiles; f++) {
    double u = (double)(gen_data_rng(&s) >> 11) * (1.0 / 9007199254740992.0);
    uint64_t size = (uint64_t)exp(log((double)lo) + u * (log((double)hi) - log((double)lo)));
    int odd = (int)(f & 1);
    if (odd) size &= ~(uint64_t)7;
    snprintf(path, sizeof path, "%s/d%03llu", dir, (unsigned long long)(f / 100));
    if (f % 100 == 0 && mkdir(path, 0755) != 0 && errno != EEXIST) {
      fprintf(stderr, "gen_data: %s: %s\n", path, strerror(errno));
      return 1;
    }
    snprintf(path, sizeof path, "%s/d%03llu/f%05llu.%s", dir, (unsigned long long)(f / 100),
             (unsigned long long)f, odd ? "f64" : "txt");
    if (write_file(path, odd ? ksig : ktext, kinds[odd ? ksig : ktext].seed + 1 + f, size, buf))
      return 1;
    total += size;
  }
  free(buf);
  printf("%llu\n", (unsigned long long)total);
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "--tree")) return make_tree(argc, argv);
  const char *pos[3] = {NULL, NULL, NULL};
  int npos = 0, have_seed = 0;
  uint64_t seed = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
      if (parse_size(argv[++i], &seed) < 0) return usage();
      have_seed = 1;
    } else if (npos < 3) {
      pos[npos++] = argv[i];
    } else {
      return usage();
    }
  }
  if (npos < 2) return usage();
  int k = find_kind(pos[0]);
  uint64_t size;
  if (k < 0 || parse_size(pos[1], &size) < 0) return usage();

  FILE *out = stdout;
  if (pos[2] && strcmp(pos[2], "-") && !(out = fopen(pos[2], "wb"))) {
    fprintf(stderr, "gen_data: %s: %s\n", pos[2], strerror(errno));
    return 1;
  }
  uint8_t *buf = malloc(PIECE);
  if (!buf) {
    fputs("gen_data: out of memory\n", stderr);
    return 1;
  }
  int rc = write_data(out, pos[2] ? pos[2] : "stdout", k, have_seed ? seed : kinds[k].seed,
                      size, buf);
  free(buf);
  return rc;
}
#endif /* GEN_DATA_NO_MAIN */
