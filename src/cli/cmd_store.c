/* cmd_store.c - `b2f ls [-l] STORE` and `b2f cat STORE KEY`: the keys and
 * values of python-blosc2 stores (.b2e, .b2d, .b2z), through the store
 * layer (b2_store.h).  `b2f ls DIR` of another directory lists it as the
 * mount shows it (cmd_ls.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "b2_error.h"
#include "b2_file.h"
#include "b2_store.h"
#include "cli/cli.h"

static void print_notes(const b2_store *s) {
  for (int k = 0; k < b2_store_nnotes(s); k++)
    fprintf(stderr, "b2f: %s: %s\n", b2_store_name(s), b2_store_note(s, k));
}

static const char *where(const b2_store_entry *e) {
  switch (e->loc) {
  case B2_STORE_IN_FILE: return "file";
  case B2_STORE_IN_MEMBER: return "member";
  case B2_STORE_IN_EMBED: return "embedded";
  default: return e->kind == B2_STORE_REMOTE ? "remote" : "-";
  }
}

int b2f_ls(int argc, char **argv) {
  int lng = 0;
  const char *path;
  int urc = b2f_flag_and_operand("ls", argc, argv, "-l", &lng, "STORE", &path);
  if (urc) return urc;
  struct stat st;
  if (b2_store_detect(AT_FDCWD, path) == B2_STORE_NONE && stat(path, &st) == 0 &&
      S_ISDIR(st.st_mode))
    return b2f_ls_dir(path, lng); /* a SOURCE directory, as the mount shows it */
  b2_store *s;
  int rc = b2_store_open(NULL, path, &s);
  if (rc < 0) return b2f_report(path, rc);
  print_notes(s);
  int64_t n = b2_store_keys(s, NULL, 0);
  int64_t *idx = malloc((size_t)(n ? n : 1) * sizeof *idx);
  if (!idx) {
    b2_store_close(s);
    return b2f_report(path, b2_fail(B2_E_NOMEM, "out of memory"));
  }
  b2_store_keys(s, idx, n);
  for (int64_t k = 0; k < n; k++) {
    const b2_store_entry *e = b2_store_entry_at(s, idx[k]);
    if (!lng) {
      printf("%s\n", e->key);
      continue;
    }
    printf("%-12s %-8s %10lld  %s", e->objkind, where(e),
           (long long)(e->kind == B2_STORE_GROUP ? 0 : e->length), e->key);
    if (e->shown && e->kind != B2_STORE_GROUP) printf("  (%s)", e->shown);
    if (e->error) printf("  damaged: %s", e->error);
    printf("\n");
  }
  free(idx);
  b2_store_close(s);
  return fflush(stdout) == 0 ? 0 : 1;
}

typedef struct raw_ctx {
  b2_store *s;
  int64_t i;
} raw_ctx;

static ssize_t raw_reader(void *ctx, void *buf, size_t n, int64_t off) {
  raw_ctx *r = ctx;
  return b2_store_pread_raw(r->s, r->i, buf, n, off);
}

/* The raw frame of leaf i to fd. */
static int copy_raw(b2_store *s, int64_t i, const char *name, int fd) {
  raw_ctx r = {s, i};
  return b2f_copy(raw_reader, &r, b2_store_raw_size(s, i), name, fd);
}

int b2f_cat_store(const char *store, const char *key, int view, int raw, int fd) {
  size_t n = strlen(store) + strlen(key) + 2;
  char *name = malloc(n);
  if (!name) return b2f_report(store, b2_fail(B2_E_NOMEM, "out of memory"));
  snprintf(name, n, "%s:%s", store, key);
  b2_env *env = NULL;
  b2_store *s = NULL;
  int status = 0;
  int rc = b2f_env(&env);
  if (!rc) rc = b2_store_open(env, store, &s);
  if (rc < 0) {
    status = b2f_report(store, rc);
    goto out;
  }
  int64_t i = b2_store_find(s, key);
  const b2_store_entry *e = i < 0 ? NULL : b2_store_entry_at(s, i);
  if (!e) {
    status = b2f_report(name, b2_fail(B2_E_NOENT, "no such key"));
  } else if (e->kind == B2_STORE_GROUP) {
    status = b2f_report(name, b2_fail(B2_E_INVAL, "a group, not a value"));
  } else if (e->kind == B2_STORE_REMOTE) {
    status = b2f_report(name, b2_fail(B2_E_UNSUPPORTED, "a remote reference (C2Array): no bytes here"));
  } else if (raw || e->kind == B2_STORE_OBJECT) {
    if (e->kind == B2_STORE_OBJECT && view != B2_VIEW_LOGICAL)
      status = b2f_report(name, b2_fail(B2_E_FORMAT, "a %s, not an array", e->objkind));
    else
      status = copy_raw(s, i, name, fd);
  } else {
    b2_file *f;
    rc = b2_store_open_file(s, env, i, view, &f);
    if (rc < 0) {
      status = b2f_report(name, rc);
    } else {
      status = b2f_copy_file(f, view, name, fd);
      b2_file_close(f);
    }
  }
out:
  b2_store_close(s);
  b2_env_destroy(env);
  free(name);
  return status;
}
