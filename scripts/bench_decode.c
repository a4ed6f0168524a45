/*
 * bench_decode.c - decode speed of the b2fs chunk layer (built and run by
 * scripts/bench-decode; see there for the options).
 *
 * Generates two data sets in memory (a smooth float64 signal and
 * pseudo-English text), encodes each into 1 MiB chunks with
 * b2_chunk_encode for every codec x filter configuration, then measures,
 * best of N runs:
 *   - full decode (b2_chunk_decode) of all chunks on 1 thread and on T
 *     threads (each decoding its share of the chunks, all started
 *     together),
 *   - "codec only": the codec libraries themselves (liblz4, libzstd, zlib;
 *     our own blosclz decoder, there being no other) decoding the same
 *     streams into the same output, with no filters: what the codecs
 *     allow on this data,
 *   - 4 KiB random reads (b2_chunk_decode_range at 4 KiB-aligned offsets).
 *   - one chunk at a time with its blocks shared among T threads
 *     (b2_chunk_decode_par on a pool of T - 1 workers): what a single
 *     reader of a chunk not cached gets,
 * Every full decode, threaded decode and partial read is checked byte for
 * byte against the source once per configuration, outside the timing.
 * With --frame PATH... it instead reads the chunks of existing frames and
 * prints the CPU seconds per GB of decoded bytes that the codec alone and
 * b2_chunk_decode take on them (one thread, thread CPU clock).
 * MB/s counts decoded bytes, 1 MB = 10^6 bytes.
 */
#include "b2_chunk.h"
#include "b2_codec.h"
#include "b2_error.h"
#include "b2_frame.h"
#include "chunk/chunk_internal.h" /* b2_chunk_par_helped */
#include "common/pool.h" /* the engine's worker pool (src/common) */

#include <errno.h>
#include <lz4.h>
#include <math.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "gen_data.h" /* data sets and random numbers (scripts/gen_data.c) */

#define MIB ((size_t)1 << 20)
#define CHUNK MIB
#define READ_SIZE 4096
#define MAX_THREADS 16

/* ---- small helpers ------------------------------------------------------ */

static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("bench-decode: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

static void die_rc(int rc, const char *what) {
  die("%s: %s (%s)", what, b2_strerror(rc), b2_last_detail());
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) die("out of memory (%zu bytes)", n);
  return p;
}

/* --cpu-clock: single-thread timings use the thread's CPU clock, which
 * other processes competing for the cores do not inflate (they still
 * share the caches); runs on several threads always use wall time. */
static int cpu_clock;

static double clock_s(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double now(void) { return clock_s(CLOCK_MONOTONIC); }

static double now1(void) {
  return clock_s(cpu_clock ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC);
}

static uint32_t rd32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

/* ---- configurations ------------------------------------------------------- */

struct dataset {
  const char *name;
  int typesize;
  uint8_t *src;
  size_t n;
};

struct filtcfg {
  const char *name;
  uint8_t f[B2_MAX_FILTERS];
  int signal_only;
};

/* Filters run in slot order on encode: delta before shuffle, bytedelta
 * after shuffle (on its byte planes), as Blosc users set them. */
static const struct filtcfg filtcfgs[] = {
    {"none", {0, 0, 0, 0, 0, 0}, 0},
    {"shuffle", {0, 0, 0, 0, 0, B2_FILTER_SHUFFLE}, 0},
    {"bitshuffle", {0, 0, 0, 0, 0, B2_FILTER_BITSHUFFLE}, 0},
    {"delta+shuffle", {0, 0, 0, 0, B2_FILTER_DELTA, B2_FILTER_SHUFFLE}, 1},
    {"shuffle+bytedelta", {0, 0, 0, 0, B2_FILTER_SHUFFLE, B2_FILTER_BYTEDELTA},
     1},
};
#define NFILTCFG (sizeof filtcfgs / sizeof filtcfgs[0])

struct codeccfg {
  int codec, clevel;
};
static const struct codeccfg codeccfgs[] = {
    {B2_CODEC_BLOSCLZ, 5}, {B2_CODEC_LZ4, 5},  {B2_CODEC_LZ4HC, 5},
    {B2_CODEC_ZLIB, 5},    {B2_CODEC_ZSTD, 5}, {B2_CODEC_ZSTD, 1},
};
#define NCODECCFG (sizeof codeccfgs / sizeof codeccfgs[0])

/* The encoded chunks of one configuration: chunk i at buf + i * stride. */
struct encoded {
  const struct dataset *ds;
  size_t nchunks, stride;
  uint8_t *buf;
  size_t *len;      /* cbytes of each chunk */
  size_t total;     /* sum of cbytes */
  b2_cparams p;
};

static const uint8_t *chunk_at(const struct encoded *e, size_t i) {
  return e->buf + i * e->stride;
}

static size_t chunk_nbytes(const struct encoded *e, size_t i) {
  size_t off = i * CHUNK;
  return e->ds->n - off < CHUNK ? e->ds->n - off : CHUNK;
}

/* ---- per-thread codec contexts for the codec-only decode ------------------ */

struct wctx {
  ZSTD_DCtx *zd;
  z_stream zs;
  int zs_ready;
};

static void wctx_free(struct wctx *w) {
  ZSTD_freeDCtx(w->zd);
  if (w->zs_ready) inflateEnd(&w->zs);
  memset(w, 0, sizeof *w);
}

/* One stream, straight through the codec library. */
static int raw_stream(struct wctx *w, int format, const uint8_t *s, size_t sl,
                      uint8_t *d, size_t dl) {
  switch (format) {
  case B2_FORMAT_LZ4:
    return LZ4_decompress_safe((const char *)s, (char *)d, (int)sl, (int)dl) ==
                   (int)dl
               ? 0
               : -1;
  case B2_FORMAT_ZSTD: {
    if (!w->zd && !(w->zd = ZSTD_createDCtx())) return -1;
    size_t r = ZSTD_decompressDCtx(w->zd, d, dl, s, sl);
    return !ZSTD_isError(r) && r == dl ? 0 : -1;
  }
  case B2_FORMAT_ZLIB: {
    z_stream *z = &w->zs;
    if (!w->zs_ready) {
      memset(z, 0, sizeof *z);
      if (inflateInit(z) != Z_OK) return -1;
      w->zs_ready = 1;
    } else if (inflateReset(z) != Z_OK) {
      return -1;
    }
    z->next_in = (Bytef *)(uintptr_t)s;
    z->avail_in = (uInt)sl;
    z->next_out = d;
    z->avail_out = (uInt)dl;
    return inflate(z, Z_FINISH) == Z_STREAM_END && z->total_out == dl ? 0
                                                                      : -1;
  }
  default: /* blosclz: ours is the only decoder */
    return b2_stream_decompress(format, s, sl, d, dl, NULL, 0) == (int)dl
               ? 0
               : -1;
  }
}

/* Decode the codec streams of a chunk (we wrote it: trusted layout) into
 * dst without running any filter. */
static int codec_only_chunk(struct wctx *w, const uint8_t *c, size_t len,
                            uint8_t *dst) {
  b2_chunk_info in;
  int rc = b2_chunk_parse(c, len, &in);
  if (rc < 0) return rc;
  if (in.special) {
    memset(dst, 0, (size_t)in.nbytes);
    return 0;
  }
  if (in.memcpyed) {
    memcpy(dst, c + in.header_len, (size_t)in.nbytes);
    return 0;
  }
  for (int32_t b = 0; b < in.nblocks; b++) {
    int last = b == in.nblocks - 1 && in.leftover > 0;
    int32_t bsize = last ? in.leftover : in.blocksize;
    int32_t ns = in.split && !last ? in.typesize : 1;
    int32_t neb = bsize / ns;
    const uint8_t *p = c + rd32(c + in.header_len + 4 * (size_t)b);
    uint8_t *o = dst + (size_t)b * (size_t)in.blocksize;
    for (int32_t j = 0; j < ns; j++, o += neb) {
      int32_t cs = (int32_t)rd32(p);
      p += 4;
      if (cs <= 0) { /* zeros, or a byte run with its token */
        memset(o, cs == 0 ? 0 : -cs, (size_t)neb);
        p += cs < 0;
      } else if (cs == neb) {
        memcpy(o, p, (size_t)neb);
        p += cs;
      } else {
        if (raw_stream(w, in.format, p, (size_t)cs, o, (size_t)neb) < 0)
          return B2_E_CODEC;
        p += cs;
      }
    }
  }
  return 0;
}

/* ---- thread team ---------------------------------------------------------- */

enum { JOB_ENCODE, JOB_DECODE, JOB_DECODE_PAR, JOB_CODEC, JOB_MEMCPY, JOB_PAIR, JOB_QUIT };

/* Workers that share a chunk's blocks with the caller (JOB_DECODE_PAR). */
static b2_pool *par_pool;

struct job {
  int kind;
  struct encoded *e;
  uint8_t *out;
  int rc[MAX_THREADS];
  /* JOB_PAIR: every thread decodes chunk `chunk` at once, the caller into
   * out + chunk * CHUNK, thread k > 0 into out2 + (k - 1) * CHUNK, and
   * notes how long its own decode took */
  size_t chunk;
  uint8_t *out2;
  int cold_out; /* evict each output buffer first */
  double took[MAX_THREADS];
};

struct team {
  int n; /* threads taking part, the caller included */
  pthread_t th[MAX_THREADS];
  pthread_barrier_t start, done;
  struct job *job;
  struct wctx w[MAX_THREADS];
};

static struct team team;

/* Evict n bytes at p from every CPU cache (--latency: a chunk's output
 * buffer is cold, as a cache slot reused after LRU eviction is). */
static void flush_lines(const uint8_t *p, size_t n) {
#if defined(__x86_64__)
  for (size_t k = 0; k < n; k += 64) __builtin_ia32_clflush(p + k);
  __builtin_ia32_mfence();
#else
  (void)p;
  (void)n;
#endif
}

static int run_share(struct job *j, int me, int n) {
  struct encoded *e = j->e;
  if (j->kind == JOB_PAIR) {
    size_t i = j->chunk, nb = chunk_nbytes(e, i);
    uint8_t *out = me ? j->out2 + (size_t)(me - 1) * CHUNK : j->out + i * CHUNK;
    if (j->cold_out) flush_lines(out, nb);
    double t0 = now();
    int rc = b2_chunk_decode(chunk_at(e, i), e->len[i], out, nb);
    j->took[me] = now() - t0;
    return rc < 0 ? rc : (size_t)rc == nb ? 0 : B2_E_FORMAT;
  }
  size_t lo = e->nchunks * (size_t)me / (size_t)n;
  size_t hi = e->nchunks * (size_t)(me + 1) / (size_t)n;
  for (size_t i = lo; i < hi; i++) {
    size_t nb = chunk_nbytes(e, i);
    uint8_t *out = j->out + i * CHUNK;
    int rc = 0;
    switch (j->kind) {
    case JOB_ENCODE:
      rc = b2_chunk_encode(&e->p, e->ds->src + i * CHUNK, nb,
                           e->buf + i * e->stride, e->stride);
      if (rc >= 0) e->len[i] = (size_t)rc;
      break;
    case JOB_DECODE:
      rc = b2_chunk_decode(chunk_at(e, i), e->len[i], out, nb);
      if (rc >= 0 && (size_t)rc != nb) rc = B2_E_FORMAT;
      break;
    case JOB_DECODE_PAR:
      rc = b2_chunk_decode_par(chunk_at(e, i), e->len[i], out, nb, par_pool, NULL);
      if (rc >= 0 && (size_t)rc != nb) rc = B2_E_FORMAT;
      break;
    case JOB_CODEC:
      rc = codec_only_chunk(&team.w[me], chunk_at(e, i), e->len[i], out);
      break;
    case JOB_MEMCPY:
      memcpy(out, e->ds->src + i * CHUNK, nb);
      break;
    default:
      break;
    }
    if (rc < 0) {
      if (j->kind != JOB_CODEC)
        fprintf(stderr, "bench-decode: chunk %zu: %s (%s)\n", i,
                b2_strerror(rc), b2_last_detail());
      return rc;
    }
  }
  return 0;
}

static void *worker(void *arg) {
  int me = (int)(intptr_t)arg;
  for (;;) {
    pthread_barrier_wait(&team.start);
    struct job *j = team.job;
    if (j->kind == JOB_QUIT) break;
    j->rc[me] = run_share(j, me, team.n);
    pthread_barrier_wait(&team.done);
  }
  wctx_free(&team.w[me]);
  b2_chunk_thread_cleanup();
  b2_codec_thread_cleanup();
  return NULL;
}

static void team_start(int n) {
  team.n = n;
  if (n < 2) return;
  if (pthread_barrier_init(&team.start, NULL, (unsigned)n) ||
      pthread_barrier_init(&team.done, NULL, (unsigned)n))
    die("pthread_barrier_init failed");
  for (int i = 1; i < n; i++)
    if (pthread_create(&team.th[i], NULL, worker, (void *)(intptr_t)i))
      die("pthread_create failed");
}

static void team_stop(void) {
  if (team.n >= 2) {
    struct job q = {.kind = JOB_QUIT};
    team.job = &q;
    pthread_barrier_wait(&team.start);
    for (int i = 1; i < team.n; i++) pthread_join(team.th[i], NULL);
    pthread_barrier_destroy(&team.start);
    pthread_barrier_destroy(&team.done);
  }
  wctx_free(&team.w[0]);
}

/* Run job over all chunks on `n` threads (1 or team.n); returns seconds. */
static double run_job(struct job *j, int n) {
  memset(j->rc, 0, sizeof j->rc);
  double t;
  if (j->kind == JOB_DECODE_PAR) { /* one caller, the pool helps: wall time */
    double t0 = now();
    j->rc[0] = run_share(j, 0, 1);
    t = now() - t0;
  } else if (n < 2) {
    double t0 = now1();
    j->rc[0] = run_share(j, 0, 1);
    t = now1() - t0;
  } else {
    double t0 = now();
    team.job = j;
    pthread_barrier_wait(&team.start);
    j->rc[0] = run_share(j, 0, team.n);
    pthread_barrier_wait(&team.done);
    t = now() - t0;
  }
  for (int i = 0; i < MAX_THREADS; i++)
    if (j->rc[i] < 0) die("job %d failed on thread %d", j->kind, i);
  return t;
}

static double best_of(struct job *j, int n, int runs) {
  double best = 1e30;
  for (int r = 0; r < runs; r++) {
    double t = run_job(j, n);
    if (t < best) best = t;
  }
  return best;
}

/* ---- one configuration ---------------------------------------------------- */

struct opts {
  size_t mib;
  int runs, threads, tsv, nreads, verbose, latency, warm_out;
  const char *only_data, *only_codec, *only_filter;
};

struct result {
  int32_t blocksize;
  double ratio, mbs1, mbsn, mbs_par, mbs_codec, read_us;
  double helped; /* share of the blocks the pool decoded (in-chunk runs) */
};

static void verify(const struct dataset *ds, const uint8_t *out,
                   const char *what, const char *cfg) {
  if (memcmp(ds->src, out, ds->n) != 0) {
    size_t k = 0;
    while (ds->src[k] == out[k]) k++;
    die("%s (%s): decoded bytes differ from the source at byte %zu", cfg,
        what, k);
  }
}

/* Random 4 KiB reads: the same seeded positions for every config.  A
 * first, untimed pass checks every read against the source and stops
 * early after READ_BUDGET seconds (slow codecs); the timed passes then
 * repeat that many reads.  Returns microseconds per read. */
#define READ_BUDGET 0.04
static double time_reads(const struct encoded *e, int nreads, int runs,
                         uint8_t *buf, const char *cfg) {
  size_t nslots = e->ds->n / READ_SIZE;
  if (nslots == 0 || nreads <= 0) return 0;
  double best = 1e30;
  for (int pass = -1; pass < runs; pass++) {
    uint64_t s = 99;
    double t0 = now1();
    for (int r = 0; r < nreads; r++) {
      size_t pos = (size_t)(gen_data_rng(&s) % nslots) * READ_SIZE;
      size_t ci = pos / CHUNK, off = pos % CHUNK;
      size_t nb = chunk_nbytes(e, ci);
      size_t len = READ_SIZE < nb - off ? READ_SIZE : nb - off;
      int rc = b2_chunk_decode_range(chunk_at(e, ci), e->len[ci], off, len,
                                     buf, NULL);
      if (rc < 0) die_rc(rc, "b2_chunk_decode_range");
      if (pass < 0) {
        if (memcmp(buf, e->ds->src + pos, len) != 0)
          die("%s: 4 KiB read at %zu differs from the source", cfg, pos);
        if (r >= 20 && now1() - t0 > READ_BUDGET) nreads = r + 1;
      }
    }
    double t = now1() - t0;
    if (pass >= 0 && t < best) best = t;
  }
  return best / nreads * 1e6;
}

/* Encode the data set into 1 MiB chunks with one configuration (on every
 * thread; not measured).  Free e->buf and e->len afterwards. */
static void encode_all(const struct dataset *ds, const struct codeccfg *cc,
                       const struct filtcfg *fc, uint8_t *out,
                       struct encoded *e) {
  memset(e, 0, sizeof *e);
  e->ds = ds;
  e->nchunks = (ds->n + CHUNK - 1) / CHUNK;
  e->stride = b2_chunk_bound(CHUNK);
  e->buf = xmalloc(e->nchunks * e->stride);
  e->len = xmalloc(e->nchunks * sizeof *e->len);
  b2_cparams_default(&e->p);
  e->p.codec = cc->codec;
  e->p.clevel = cc->clevel;
  e->p.typesize = ds->typesize;
  memcpy(e->p.filters, fc->f, B2_MAX_FILTERS);
  memset(e->p.filters_meta, 0, B2_MAX_FILTERS);
  struct job j = {.kind = JOB_ENCODE, .e = e, .out = out};
  run_job(&j, team.n);
  for (size_t i = 0; i < e->nchunks; i++) e->total += e->len[i];
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The encoded chunks as a contiguous frame file in a fresh directory of
 * $TMPDIR (or /tmp), reopened read-only; *dir gets the directory, to be
 * removed with the frame. */
static b2_frame *write_frame(const struct encoded *e, char *dir, size_t dirlen,
                             char *path, size_t pathlen) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, dirlen, "%s/bench_decode.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) die("mkdtemp %s: %s", dir, strerror(errno));
  snprintf(path, pathlen, "%s/chunks.b2frame", dir);
  b2_frame_params fp;
  b2_frame_params_default(&fp);
  fp.cparams = e->p;
  fp.chunksize = CHUNK;
  b2_frame *f;
  int rc = b2_frame_create(path, &fp, &f);
  if (rc < 0) die_rc(rc, path);
  for (size_t i = 0; i < e->nchunks && rc >= 0; i++)
    rc = b2_frame_put_chunk(f, (int64_t)i, chunk_at(e, i), e->len[i]);
  if (rc >= 0) rc = b2_frame_commit(f);
  if (rc < 0) die_rc(rc, path);
  b2_frame_close(f);
  if ((rc = b2_frame_open(path, &f)) < 0) die_rc(rc, path);
  return f;
}

/* --latency: one chunk at a time, as a reader waits for a chunk that is
 * not cached.  For every chunk, `runs` rounds of four ways, each first
 * in turn: decoding the chunk in memory on this thread (b2_chunk_decode)
 * and shared (b2_chunk_decode_par: this thread and the pool's idle
 * workers, woken for the chunk); and the cold read a reader waits for,
 * the chunk read from a frame file in the page cache and decoded
 * (b2_frame_decode_chunk_par), on this thread and shared (where a worker
 * is woken before the read).  Wall clock; per chunk the smallest time of
 * each way (the rounds other work on the machine delayed least).  Prints
 * the median per-chunk times and ratios, the share of blocks the workers
 * decoded, the process CPU time per chunk of the in-memory ways (all
 * rounds: what sharing costs in hand-overs and wake-ups), and the floor
 * (JOB_PAIR, run right after each 1T decode).  Every output buffer is
 * evicted from the CPU caches before its decode (unless --warm-out): the
 * engine decodes a chunk that is not cached into a slot it reuses after
 * evicting the least recently used chunk, whose bytes no core holds any
 * more; a buffer just written by the caller would make the shared decode
 * pay for moving half of it to the other core. */
static void run_latency(const struct dataset *ds, const struct codeccfg *cc,
                        const struct filtcfg *fc, const struct opts *o,
                        uint8_t *out) {
  struct encoded e;
  encode_all(ds, cc, fc, out, &e);
  char dir[512], path[600];
  b2_frame *fr = write_frame(&e, dir, sizeof dir, path, sizeof path);
  size_t nc = e.nchunks;
  double *t1 = xmalloc(nc * sizeof *t1), *tp = xmalloc(nc * sizeof *tp);
  double *r1 = xmalloc(nc * sizeof *r1), *rp = xmalloc(nc * sizeof *rp);
  double *rat = xmalloc(nc * sizeof *rat);
  /* The machine's floor for sharing a chunk: every thread of the team
   * decoding the chunk at once (JOB_PAIR), each thread's own time; half
   * of that (on two threads) over the 1T time is the least ratio a split
   * of the chunk could reach with no hand-over at all, 0.5 on two cores
   * that do not slow each other down (shared caches, memory bandwidth, a
   * hypervisor's siblings do). */
  double *tpair = xmalloc(nc * sizeof *tpair), *flo = xmalloc(nc * sizeof *flo);
  struct job pair = {.kind = JOB_PAIR, .e = &e, .out = out, .cold_out = !o->warm_out,
                     .out2 = xmalloc((size_t)(team.n > 1 ? team.n - 1 : 1) * CHUNK)};
  double cpu1 = 0, cpup = 0, helped = 0, blocks = 0;
  for (size_t i = 0; i < nc; i++) t1[i] = tp[i] = r1[i] = rp[i] = tpair[i] = 1e30;
  for (int r = 0; r < o->runs; r++) {
    for (size_t i = 0; i < nc; i++) {
      size_t nb = chunk_nbytes(&e, i);
      uint8_t *dst = out + i * CHUNK;
      /* The ways in turn, each first in every fourth round: those that run
       * later find the chunk and its output in the caches. */
      for (int k = 0; k < 4; k++) {
        int way = (k + r) % 4, par = way & 1, cold = way >> 1;
        if (r < 4) memset(dst, 0xA5, nb);
        if (!o->warm_out) flush_lines(dst, nb);
        long h0 = atomic_load(&b2_chunk_par_helped);
        double c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID), w0 = now();
        int rc = cold  ? b2_frame_decode_chunk_par(fr, (int64_t)i, dst, nb, par ? par_pool : NULL)
                 : par ? b2_chunk_decode_par(chunk_at(&e, i), e.len[i], dst, nb, par_pool, NULL)
                       : b2_chunk_decode(chunk_at(&e, i), e.len[i], dst, nb);
        double w1 = now(), c1 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        if (rc < 0 || (size_t)rc != nb)
          die("chunk %zu: %s %s decode failed", i, cold ? "cold" : "", par ? "shared" : "1T");
        if (r < 4 && memcmp(dst, ds->src + i * CHUNK, nb))
          die("chunk %zu differs (%s %s)", i, cold ? "cold" : "", par ? "shared" : "1T");
        double *t = cold ? (par ? rp : r1) : (par ? tp : t1);
        if (w1 - w0 < t[i]) t[i] = w1 - w0;
        if (way == 0 && team.n >= 2) { /* the floor, right after a 1T decode */
          pair.chunk = i;
          run_job(&pair, team.n);
          for (int th = 0; r == 0 && th < team.n; th++)
            if (memcmp(th ? pair.out2 + (size_t)(th - 1) * CHUNK : dst, ds->src + i * CHUNK, nb))
              die("chunk %zu differs (floor, thread %d)", i, th);
          double m = 0;
          for (int th = 0; th < team.n; th++) m += pair.took[th] / team.n;
          if (m < tpair[i]) tpair[i] = m;
        }
        if (cold) continue;
        if (par) {
          cpup += c1 - c0;
          helped += (double)(atomic_load(&b2_chunk_par_helped) - h0);
          b2_chunk_info ci;
          if (b2_chunk_parse(chunk_at(&e, i), e.len[i], &ci) == 0) blocks += ci.nblocks;
        } else {
          cpu1 += c1 - c0;
        }
      }
    }
  }
  b2_frame_close(fr);
  if (unlink(path) != 0 || rmdir(dir) != 0) die("cannot remove %s: %s", dir, strerror(errno));
  for (size_t i = 0; i < nc; i++) {
    rat[i] = tp[i] / t1[i];
    flo[i] = team.n >= 2 ? tpair[i] / team.n / t1[i] : 1.0;
  }
  qsort(flo, nc, sizeof *flo, cmp_double);
  double floor_ratio = flo[nc / 2];
  qsort(t1, nc, sizeof *t1, cmp_double);
  qsort(tp, nc, sizeof *tp, cmp_double);
  qsort(r1, nc, sizeof *r1, cmp_double);
  qsort(rp, nc, sizeof *rp, cmp_double);
  qsort(rat, nc, sizeof *rat, cmp_double);
  double m1 = t1[nc / 2] * 1e6, mp = tp[nc / 2] * 1e6, n = (double)nc * o->runs;
  double c1 = r1[nc / 2] * 1e6, cp = rp[nc / 2] * 1e6;
  int32_t bs = b2_chunk_blocksize(&e.p, CHUNK);
  char cfg[64];
  snprintf(cfg, sizeof cfg, "%s/%d", b2_codec_name(cc->codec), cc->clevel);
  if (o->tsv)
    printf("tsv\tlatency\t%s\t%s\t%s\t%d\t%.1f\t%.1f\t%.3f\t%.3f\t%.0f\t%.1f\t%.1f"
           "\t%.1f\t%.1f\t%.3f\t%.3f\t%.3f\n",
           ds->name, cfg, fc->name, (int)(CHUNK / (size_t)bs), m1, mp, mp / m1, rat[nc / 2],
           blocks > 0 ? 100 * helped / blocks : 0, cpu1 / n * 1e6, cpup / n * 1e6, c1, cp,
           cp / c1, cp / m1, floor_ratio);
  else
    printf("%-7s %-9s %-18s %6d %9.1f %9.1f %7.2f %7.2f %6.0f%% %9.1f %9.1f %9.1f %9.1f %7.2f "
           "%7.2f %7.2f\n",
           ds->name, cfg, fc->name, (int)(CHUNK / (size_t)bs), m1, mp, mp / m1, rat[nc / 2],
           blocks > 0 ? 100 * helped / blocks : 0, cpu1 / n * 1e6, cpup / n * 1e6, c1, cp,
           cp / c1, cp / m1, floor_ratio);
  free(t1);
  free(tp);
  free(r1);
  free(rp);
  free(rat);
  free(tpair);
  free(flo);
  free(pair.out2);
  free(e.buf);
  free(e.len);
}

static void run_config(const struct dataset *ds, const struct codeccfg *cc,
                       const struct filtcfg *fc, const struct opts *o,
                       uint8_t *out, struct result *res) {
  char cfg[128];
  snprintf(cfg, sizeof cfg, "%s %s/%d %s", ds->name, b2_codec_name(cc->codec),
           cc->clevel, fc->name);
  struct encoded e;
  double t0 = now();
  encode_all(ds, cc, fc, out, &e);
  double t_enc = now() - t0, t_start = now();
  res->blocksize = b2_chunk_blocksize(&e.p, CHUNK);
  res->ratio = (double)ds->n / (double)e.total;
  struct job j = {.e = &e, .out = out};

  /* Rounds of (1 thread, team, codec alone), interleaved so that other
   * load on the machine hits the columns alike; keep the best of each.
   * In round 0 the output is poisoned first and checked afterwards. */
  struct job cj = {.kind = JOB_CODEC, .e = &e, .out = out};
  struct job pj = {.kind = JOB_DECODE_PAR, .e = &e, .out = out};
  double best1 = 1e30, bestn = 1e30, bestp = 1e30, bestc = 1e30, t;
  double helped = 0, blocks = 0;
  j.kind = JOB_DECODE;
  for (int r = 0; r < o->runs; r++) {
    if (r == 0) memset(out, 0xA5, ds->n);
    if ((t = run_job(&j, 1)) < best1) best1 = t;
    if (r == 0) {
      verify(ds, out, "1 thread", cfg);
      memset(out, 0x5A, ds->n);
    }
    if ((t = run_job(&j, team.n)) < bestn) bestn = t;
    if (r == 0) {
      verify(ds, out, "threads", cfg);
      memset(out, 0xA5, ds->n);
    }
    long h0 = atomic_load(&b2_chunk_par_helped);
    if ((t = run_job(&pj, 1)) < bestp) bestp = t;
    helped += (double)(atomic_load(&b2_chunk_par_helped) - h0);
    for (size_t i = 0; i < e.nchunks; i++) {
      b2_chunk_info ci;
      if (b2_chunk_parse(chunk_at(&e, i), e.len[i], &ci) == 0) blocks += ci.nblocks;
    }
    if (r == 0) verify(ds, out, "blocks shared", cfg);
    if ((t = run_job(&cj, 1)) < bestc) bestc = t;
  }
  double mb = (double)ds->n / 1e6;
  res->mbs1 = mb / best1;
  res->mbsn = mb / bestn;
  res->mbs_par = mb / bestp;
  res->helped = blocks > 0 ? helped / blocks : 0;
  res->mbs_codec = mb / bestc;
  double t_reads = now();
  res->read_us = time_reads(&e, o->nreads, o->runs, out, cfg);
  if (o->verbose)
    fprintf(stderr, "%s: encode %.2f s, decode %.2f s, reads %.2f s\n", cfg,
            t_enc, t_reads - t_start, now() - t_reads);
  free(e.buf);
  free(e.len);
}

/* ---- output ----------------------------------------------------------------- */

static void print_header(const struct opts *o) {
  if (o->tsv) {
    printf("#tsv\tdata\tcodec\tclevel\tfilter\tblocksize\tratio\tmbs_1t"
           "\tmbs_%dt\tmbs_codec\tpct_codec\tread4k_us\tmbs_inchunk\tpct_inchunk_helped\n",
           o->threads);
    return;
  }
  char tcol[16];
  snprintf(tcol, sizeof tcol, "%dT MB/s", o->threads);
  printf("%-6s %-10s %-17s %6s %7s %8s %8s %11s %6s %9s %9s %6s\n", "data", "codec",
         "filter", "ratio", "blk KiB", "1T MB/s", tcol, "codec MB/s",
         "%codec", "4K rd us", "in-chunk", "%help");
}

static void print_row(const struct dataset *ds, const struct codeccfg *cc,
                      const struct filtcfg *fc, const struct result *r,
                      const struct opts *o) {
  int32_t blocksize = r->blocksize;
  double pct = 100.0 * r->mbs1 / r->mbs_codec;
  if (o->tsv) {
    printf("tsv\t%s\t%s\t%d\t%s\t%d\t%.3f\t%.0f\t%.0f\t%.0f\t%.1f\t%.1f\t%.0f\t%.0f\n",
           ds->name, b2_codec_name(cc->codec), cc->clevel, fc->name, blocksize,
           r->ratio, r->mbs1, r->mbsn, r->mbs_codec, pct, r->read_us, r->mbs_par,
           100 * r->helped);
  } else {
    char codec[24];
    snprintf(codec, sizeof codec, "%s/%d", b2_codec_name(cc->codec),
             cc->clevel);
    printf("%-6s %-10s %-17s %6.2f %7d %8.0f %8.0f %11.0f %5.0f%% %9.1f %9.0f %5.0f%%\n",
           ds->name, codec, fc->name, r->ratio, blocksize / 1024, r->mbs1,
           r->mbsn, r->mbs_codec, pct, r->read_us, r->mbs_par, 100 * r->helped);
  }
  fflush(stdout);
}

/* ---- --frame: CPU per GB on the chunks of existing frames ------------------ */

/* Prints "frame PATH GB codec_s_per_gb decode_s_per_gb" (best of `runs`,
 * thread CPU time of one thread). */
static void frame_mode(char **paths, int npaths, int runs) {
  cpu_clock = 1;
  struct wctx w;
  memset(&w, 0, sizeof w);
  printf("#tsv\tframe\tpath\tdecoded_gb\tcodec_cpu_s_per_gb\tdecode_cpu_s_per_gb\n");
  for (int k = 0; k < npaths; k++) {
    b2_frame *f;
    int rc = b2_frame_open(paths[k], &f);
    if (rc < 0) die_rc(rc, paths[k]);
    int64_t n = b2_frame_get_info(f)->nchunks;
    uint8_t **c = xmalloc((size_t)n * sizeof *c);
    size_t *len = xmalloc((size_t)n * sizeof *len);
    size_t maxnb = 1;
    double bytes = 0;
    for (int64_t i = 0; i < n; i++) {
      rc = b2_frame_read_chunk(f, i, &c[i], &len[i]);
      if (rc < 0) die_rc(rc, paths[k]);
      int32_t nb = b2_frame_chunk_nbytes(f, i);
      if ((size_t)nb > maxnb) maxnb = (size_t)nb;
      bytes += nb;
    }
    uint8_t *out = xmalloc(maxnb);
    double bc = 1e30, bd = 1e30;
    for (int r = 0; r < runs; r++) {
      double t0 = now1();
      for (int64_t i = 0; i < n; i++)
        if (codec_only_chunk(&w, c[i], len[i], out) < 0)
          die("%s: chunk %lld: codec-only decode failed", paths[k], (long long)i);
      double t1 = now1();
      for (int64_t i = 0; i < n; i++)
        if ((rc = b2_chunk_decode(c[i], len[i], out, maxnb)) < 0) die_rc(rc, paths[k]);
      double t2 = now1();
      if (t1 - t0 < bc) bc = t1 - t0;
      if (t2 - t1 < bd) bd = t2 - t1;
    }
    double gb = bytes / 1e9;
    printf("tsv\tframe\t%s\t%.3f\t%.3f\t%.3f\n", paths[k], gb, bc / gb, bd / gb);
    fflush(stdout);
    for (int64_t i = 0; i < n; i++) free(c[i]);
    free(c);
    free(len);
    free(out);
    b2_frame_close(f);
  }
  wctx_free(&w);
}

static void usage(void) {
  fputs("usage: bench_decode [--mib N] [--runs N] [--threads N] [--reads N]\n"
        "                    [--data signal|text] [--codec NAME]\n"
        "                    [--filter NAME] [--tsv] [--verbose] [--cpu-clock]\n"
        "                    [--latency [--warm-out]]\n"
        "       bench_decode [--runs N] --frame PATH...\n",
        stderr);
  exit(2);
}

int main(int argc, char **argv) {
  struct opts o = {.mib = 64, .runs = 3, .threads = 2, .nreads = 2000};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--tsv")) { o.tsv = 1; continue; }
    if (!strcmp(a, "--verbose")) { o.verbose = 1; continue; }
    if (!strcmp(a, "--cpu-clock")) { cpu_clock = 1; continue; }
    if (!strcmp(a, "--latency")) { o.latency = 1; continue; }
    if (!strcmp(a, "--warm-out")) { o.warm_out = 1; continue; }
    if (!strcmp(a, "--frame")) {
      if (i + 1 >= argc) usage();
      frame_mode(argv + i + 1, argc - i - 1, o.runs);
      return 0;
    }
    if (!v) usage();
    if (!strcmp(a, "--mib")) o.mib = (size_t)atol(v);
    else if (!strcmp(a, "--runs")) o.runs = atoi(v);
    else if (!strcmp(a, "--threads")) o.threads = atoi(v);
    else if (!strcmp(a, "--reads")) o.nreads = atoi(v);
    else if (!strcmp(a, "--data")) o.only_data = v;
    else if (!strcmp(a, "--codec")) o.only_codec = v;
    else if (!strcmp(a, "--filter")) o.only_filter = v;
    else usage();
    i++;
  }
  if (o.mib < 1 || o.mib > 4096 || o.runs < 1 || o.threads < 1 ||
      o.threads > MAX_THREADS || o.nreads < 0)
    usage();
  int known = !o.only_data || !strcmp(o.only_data, "signal") ||
              !strcmp(o.only_data, "text");
  if (!known) die("unknown data set '%s' (signal, text)", o.only_data);
  known = !o.only_codec;
  for (size_t c = 0; c < NCODECCFG; c++)
    if (o.only_codec && !strcmp(o.only_codec, b2_codec_name(codeccfgs[c].codec)))
      known = 1;
  if (!known) die("unknown codec '%s'", o.only_codec);
  known = !o.only_filter;
  for (size_t f = 0; f < NFILTCFG; f++)
    if (o.only_filter && !strcmp(o.only_filter, filtcfgs[f].name)) known = 1;
  if (!known) die("unknown filter set '%s'", o.only_filter);

  size_t n = o.mib * MIB;
  struct dataset sets[2] = {{"signal", 8, NULL, n}, {"text", 1, NULL, n}};
  uint8_t *out = xmalloc(n);
  team_start(o.threads);
  if (o.threads >= 2) {
    int rc = b2_pool_create(o.threads - 1, 64, &par_pool);
    if (rc < 0) die_rc(rc, "b2_pool_create");
  }

  /* memcpy of the whole data set: the memory-bandwidth ceiling */
  sets[0].src = xmalloc(n);
  gen_data_fill("signal", sets[0].src, n); /* scripts/gen_data.c */
  struct encoded me = {.ds = &sets[0], .nchunks = (n + CHUNK - 1) / CHUNK};
  struct job mj = {.kind = JOB_MEMCPY, .e = &me, .out = out};
  run_job(&mj, 1);
  double mc1 = (double)n / 1e6 / best_of(&mj, 1, o.runs);
  double mcn = (double)n / 1e6 / best_of(&mj, team.n, o.runs);
  double load[1] = {-1};
  getloadavg(load, 1); /* other work on the machine skews the timings */
  if (o.tsv)
    printf("#tsv\tmemcpy\t%zu MiB\tsimd %s\t1t %.0f\t%dt %.0f\tload %.2f"
           "\tclock %s\n",
           o.mib, b2_simd_level(), mc1, o.threads, mcn, load[0],
           cpu_clock ? "thread-cpu" : "wall");
  else
    printf("%zu MiB per data set, 1 MiB chunks, best of %d, filters %s; "
           "memcpy %.0f MB/s (1T), %.0f MB/s (%dT); load average %.2f on "
           "%ld CPUs%s\n",
           o.mib, o.runs, b2_simd_level(), mc1, mcn, o.threads, load[0],
           sysconf(_SC_NPROCESSORS_ONLN),
           cpu_clock ? "; 1T, codec and 4K columns in thread CPU time" : "");
  if (o.latency && o.tsv)
    printf("#tsv\tlatency\tdata\tcodec\tfilter\tblocks\tus_1t\tus_inchunk\tratio"
           "\tmedian_ratio\tpct_helped\tcpu_us_1t\tcpu_us_inchunk\tus_read_1t\tus_read_inchunk"
           "\tread_ratio\tread_vs_decode_1t\tfloor\n");
  else if (o.latency)
    printf("one chunk at a time, median over chunks of each chunk's best of %d (wall us);\n"
           "in-chunk = b2_chunk_decode_par with %d pool worker(s); CPU = process CPU per chunk;\n"
           "read = the chunk read from a frame file (page cache) and decoded, 1T or in-chunk;\n"
           "rd.rat = read in-chunk / read 1T, rd/dec = read in-chunk / 1T decode;\n"
           "floor = the chunk decoded by all %d threads at once, each thread's time / %d,\n"
           "over 1T (median over chunks of each chunk's best): the least ratio any split\n"
           "of a chunk could reach on this machine, 0.5 on two cores that do not slow\n"
           "each other down\n"
           "%-7s %-9s %-18s %6s %9s %9s %7s %7s %7s %9s %9s %9s %9s %7s %7s %7s\n", o.runs,
           o.threads - 1, o.threads, o.threads, "data", "codec", "filter", "blocks", "1T us",
           "in-chunk", "ratio", "med.rat", "%help", "CPU 1T", "CPU in-ch", "read 1T", "read in",
           "rd.rat", "rd/dec", "floor");
  else
    print_header(&o);

  for (size_t d = 0; d < 2; d++) {
    struct dataset *ds = &sets[d];
    if (o.only_data && strcmp(o.only_data, ds->name) != 0) continue;
    if (!ds->src) {
      ds->src = xmalloc(n);
      gen_data_fill("text", ds->src, n);
    }
    for (size_t c = 0; c < NCODECCFG; c++) {
      if (o.only_codec &&
          strcmp(o.only_codec, b2_codec_name(codeccfgs[c].codec)) != 0)
        continue;
      for (size_t f = 0; f < NFILTCFG; f++) {
        if (filtcfgs[f].signal_only && ds->typesize == 1) continue;
        if (o.only_filter && strcmp(o.only_filter, filtcfgs[f].name) != 0)
          continue;
        if (o.latency) {
          run_latency(ds, &codeccfgs[c], &filtcfgs[f], &o, out);
          fflush(stdout);
          continue;
        }
        struct result r;
        run_config(ds, &codeccfgs[c], &filtcfgs[f], &o, out, &r);
        print_row(ds, &codeccfgs[c], &filtcfgs[f], &r, &o);
      }
    }
  }
  team_stop();
  b2_pool_destroy(par_pool);
  b2_chunk_thread_cleanup();
  b2_codec_thread_cleanup();
  free(out);
  free(sets[0].src);
  free(sets[1].src);
  return 0;
}
