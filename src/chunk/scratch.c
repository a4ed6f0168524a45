/* scratch.c - per-thread growable scratch buffers of the chunk layer, so
 * that decoding a block does no allocation once a thread has warmed up.
 * Buffers are freed when the thread exits (pthread key destructor) or on
 * b2_chunk_thread_cleanup(). */
#include "b2_chunk.h"
#include "b2_error.h"
#include "chunk/chunk_internal.h"

#include <pthread.h>
#include <stdlib.h>

struct scratch_set {
  uint8_t *buf[B2_SCR_COUNT];
  size_t cap[B2_SCR_COUNT];
  int registered;
};

static _Thread_local struct scratch_set tls_scratch;
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static int scratch_key_ok;

static void scratch_free_set(struct scratch_set *s) {
  for (int i = 0; i < B2_SCR_COUNT; i++) {
    free(s->buf[i]);
    s->buf[i] = NULL;
    s->cap[i] = 0;
  }
}

static void scratch_destructor(void *p) {
  if (p) scratch_free_set(p);
}

static void scratch_make_key(void) {
  scratch_key_ok = pthread_key_create(&scratch_key, scratch_destructor) == 0;
}

uint8_t *b2_chunk_scratch(int slot, size_t n) {
  struct scratch_set *s = &tls_scratch;
  if (slot < 0 || slot >= B2_SCR_COUNT) return NULL;
  if (n == 0) n = 1;
  if (s->cap[slot] >= n) return s->buf[slot];
  if (!s->registered) {
    pthread_once(&scratch_once, scratch_make_key);
    if (scratch_key_ok) pthread_setspecific(scratch_key, s);
    s->registered = 1;
  }
  /* Grow by at least half again to avoid creeping reallocations. */
  size_t want = n;
  if (s->cap[slot] > 0 && want < s->cap[slot] + s->cap[slot] / 2)
    want = s->cap[slot] + s->cap[slot] / 2;
  free(s->buf[slot]); /* contents need not survive a resize */
  s->buf[slot] = malloc(want);
  if (!s->buf[slot] && want > n) s->buf[slot] = malloc(want = n);
  s->cap[slot] = s->buf[slot] ? want : 0;
  return s->buf[slot];
}

void b2_chunk_thread_cleanup(void) { scratch_free_set(&tls_scratch); }
