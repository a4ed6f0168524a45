/* store_impl.h - internals of the store layer (src/store/). */
#ifndef B2_STORE_IMPL_H
#define B2_STORE_IMPL_H

#include <stdint.h>
#include <sys/stat.h>

#include "b2_store.h"

/* Bounds on untrusted stores. */
#define B2_STORE_MAX_LEAVES (1 << 20)      /* values in one store */
#define B2_STORE_MAX_DEPTH 64              /* components of a key */
#define B2_STORE_MAX_KEY 4096              /* bytes of a key */
#define B2_STORE_MAX_COMPONENT 255         /* bytes of one component */
#define B2_STORE_MAX_CDIR ((int64_t)64 << 20) /* zip central directory */
#define B2_STORE_MAX_INDEX ((size_t)256 << 20) /* estore_metadata bytes */
#define B2_STORE_MAX_VALUE ((int64_t)1 << 30)  /* one embedded value */
#define B2_STORE_MAX_NOTES 64
#define B2_STORE_MAX_ROOTS 4096               /* registered object roots */

/* ---- zip (zip.c) --------------------------------------------------------- */
typedef struct b2_zip_member {
  char *name;       /* as stored (NUL-free) */
  int stored;       /* method 0 and not encrypted: readable in place */
  int method;
  int64_t offset;   /* of the data, from the start of the file */
  int64_t length;   /* compressed (stored) size */
} b2_zip_member;

/* Read the central directory of the zip file fd (size bytes) and locate
 * every member's data (local headers checked).  *out is malloc'd, each
 * name too (b2_zip_free).  B2_E_FORMAT / B2_E_TRUNCATED with a detail for
 * a damaged archive. */
int b2_zip_read(int fd, int64_t size, b2_zip_member **out, int64_t *n);
void b2_zip_free(b2_zip_member *m, int64_t n);

/* ---- the EmbedStore index (embed.c) ------------------------------------ */
typedef struct b2_embed_item {
  char *key;
  int remote;       /* a C2Array reference (no bytes) */
  int64_t offset, length;
} b2_embed_item;

/* Parse `estore_metadata` (msgpack) into items; each offset+length is
 * checked against `nbytes`, the logical size of the EmbedStore. */
int b2_embed_parse(const uint8_t *buf, size_t len, int64_t nbytes,
                   b2_embed_item **out, int64_t *n);
void b2_embed_free(b2_embed_item *it, int64_t n);
/* The index `in` (estore_metadata) with key's entry removed (newkey NULL)
 * or renamed newkey (newkey's own entry, if any, removed): a malloc'd
 * *out.  B2_E_NOENT when key is not there, B2_E_FORMAT for a damaged index. */
int b2_embed_rekey(const uint8_t *in, size_t len, const char *key, const char *newkey,
                   uint8_t **out, size_t *outlen);

/* Parse `_object_registry` ({KEY: {"kind": str, ...}}): the keys whose
 * kind is "ctable", malloc'd (each too).  B2_E_FORMAT when malformed. */
int b2_embed_roots(const uint8_t *buf, size_t len, char ***roots, int *n);

/* ---- leaves as gathered before the tree is built (store.c, tree.c) ---- */
typedef struct b2_store_src {
  char *key;
  int kind;          /* B2_STORE_* (GROUP: a __vlmeta__ carrier) */
  const char *objkind;
  int loc;
  char *relpath;
  int64_t offset, length;
  const char *suffix; /* the file's suffix or the canonical one */
  char *error;
} b2_store_src;

/* What a store was read from, to tell when it changed: the store itself
 * (rel NULL, looked up again by name), and for a .b2d its embed.b2e and
 * every directory walked. */
typedef struct b2_store_sig {
  char *rel;
  dev_t dev;
  ino_t ino;
  off_t size;          /* regular files only */
  struct timespec mtime, ctime;
} b2_store_sig;

struct b2_store {
  char *name;         /* its name (the form comes from it) */
  char *path;         /* what was opened, relative to pfd */
  int pfd;            /* the directory it was opened in (a duplicate), or
                         AT_FDCWD */
  b2_store_sig *sigs;
  int nsigs, sigcap;
  int form, flavor;
  int fd;             /* .b2d: the directory; .b2z, .b2e: the file */
  b2_file *embed;     /* the EmbedStore's logical bytes (NULL: none) */
  int efd;            /* .b2e, .b2d: the EmbedStore file, opened by its
                         /proc/self/fd path so that it takes part in the
                         reference library's sidecar locking; -1 */
  int locked;         /* it does (a sidecar exists) */
  uint64_t gen;       /* the sidecar's counter when the store was read */
  int lockfd;         /* while the store is read: its sidecar, shared-locked */
  int building;       /* the store is being read (the lock is held) */
  b2_env *env;

  b2_store_entry *e;  /* entries, [0] the root */
  int64_t n, cap;
  int64_t *kids;      /* children arrays of all groups */
  int64_t *bykey;     /* entry indices sorted by key, leaves first */
  int64_t *src;       /* per entry: its leaf (or a group's carrier) in srcs,
                         or -1 */
  b2_store_src *srcs; /* leaves and carriers as found */
  int64_t nsrcs, srccap;

  char **roots;       /* object roots named by `_object_registry` */
  int nroots;

  char *notes[B2_STORE_MAX_NOTES];
  int nnotes;
};

/* Record a note (formatted); silently dropped past the limit. */
void b2_store_add_note(b2_store *s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Is entry i below the root of an object kept as a subtree (a CTable)? */
int b2_store_inside_object(const b2_store *s, int64_t i);

/* Whether `key` is a valid key (python's rules, plus components that can
 * name files: none empty, ".", ".." or longer than 255 bytes). */
int b2_store_key_ok(const char *key);
/* Whether key names a group attribute carrier; *glen gets the length of
 * the group's key ("" root: 0). */
int b2_store_is_carrier(const char *key, size_t *glen);

/* Remember what `st` says of rel (NULL: the store itself). */
int b2_store_add_sig(b2_store *s, const char *rel, const struct stat *st);

/* Build the tree from s->srcs (tree.c). */
int b2_store_build(b2_store *s);

/* Open the frame of source k (a leaf or a carrier). */
int b2_store_src_frame(b2_store *s, const b2_store_src *src, b2_frame **out);

#endif /* B2_STORE_IMPL_H */
