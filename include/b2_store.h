/*
 * b2_store.h - layer 7: python-blosc2 stores as trees of frames.
 *
 * python-blosc2 keeps many values under one name in three forms:
 *   EmbedStore  NAME.b2e   one SChunk whose logical bytes hold the values'
 *                          frames back to back; the vlmetalayer
 *                          `estore_metadata` maps each key to (offset,
 *                          length) in those bytes;
 *   DictStore / TreeStore  NAME.b2d  a directory: `embed.b2e` (an
 *                          EmbedStore for the small values) plus one frame
 *                          file per other value, at KEY + .b2nd/.b2f/.b2b;
 *                          NAME.b2z  the same files as the stored (never
 *                          deflated) members of a zip archive, read in
 *                          place.
 * Keys are paths ("/a/b").  A store opened here is a tree: groups (the
 * inner paths of the keys, directories) and leaves (values).  Every leaf's
 * frame is read where it lies: a file of the .b2d, a member of the .b2z
 * (b2_frame_open_fd), or the slice of the EmbedStore's logical bytes
 * (extracted, b2_frame_open_mem).  TreeStore group attributes live in the
 * vlmetalayers of a hidden empty SChunk `GROUP/__vlmeta__` (a carrier);
 * they are offered as the group's attributes.  Bookkeeping is never a
 * leaf: `embed.b2e`, carriers, `*.b2lock` sidecars, temporary files
 * (`*.tmp`, `*.b2tmp`).
 *
 * Everything read from a store is untrusted: the zip directory, local
 * headers and the msgpack index are checked against the real sizes; a
 * store whose structure is damaged (bad zip directory, embed.b2e not
 * stored or not a frame, broken index) fails to open with a detail naming
 * what is wrong.  A single leaf whose frame is damaged keeps its place in
 * the tree (its kind from its file suffix) and fails when it is opened.
 * A store is opened once and is immutable afterwards (a snapshot of the
 * tree; reads of leaves are safe from several threads at once).
 */
#ifndef B2_STORE_H
#define B2_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "b2_file.h"
#include "b2_frame.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct b2_store b2_store;

/* Form on disk. */
enum b2_store_form {
  B2_STORE_NONE = 0,
  B2_STORE_EMBED = 1, /* NAME.b2e, a file */
  B2_STORE_DIR = 2,   /* NAME.b2d, a directory holding embed.b2e */
  B2_STORE_ZIP = 3    /* NAME.b2z, a zip file */
};

/* Which python class wrote it (the metalayer of its EmbedStore frame). */
enum b2_store_flavor {
  B2_STORE_FLAVOR_EMBED = 1, /* "b2embed" (or none): EmbedStore */
  B2_STORE_FLAVOR_DICT = 2,  /* "b2dict": DictStore */
  B2_STORE_FLAVOR_TREE = 3   /* "b2tree": TreeStore (keys include groups) */
};

/* Kind of an entry. */
enum b2_store_kind {
  B2_STORE_GROUP = 0,   /* inner path: a directory */
  B2_STORE_NDARRAY = 1, /* a b2nd array: shown as NAME.npy */
  B2_STORE_SCHUNK = 2,  /* a plain SChunk: shown as NAME (its bytes) */
  B2_STORE_OBJECT = 3,  /* another python-blosc2 object (ObjectArray,
                           BatchArray, ListArray, lazy expression carrier,
                           proxy cache, nested store): shown as its raw
                           frame under NAME + suffix, never as data */
  B2_STORE_REMOTE = 4   /* a C2Array reference: no bytes here, not shown */
};

/* Where a leaf's frame lies. */
enum b2_store_loc {
  B2_STORE_IN_NONE = 0,   /* groups, remote references */
  B2_STORE_IN_FILE = 1,   /* the file `relpath` of the .b2d */
  B2_STORE_IN_MEMBER = 2, /* the zip member `relpath`: `length` bytes at
                             `offset` of the .b2z */
  B2_STORE_IN_EMBED = 3   /* `length` bytes at `offset` of the logical
                             bytes of the store's EmbedStore */
};

typedef struct b2_store_entry {
  const char *key;     /* "/a/b" ("/" for the root group) */
  const char *name;    /* last component of the key ("" for the root) */
  const char *shown;   /* name in its parent directory: groups NAME,
                          arrays NAME.npy, SChunks NAME, objects NAME +
                          suffix; on a clash a leaf takes NAME + its file
                          suffix (.b2nd, .b2f, .b2b); NULL: not shown (the
                          root, remote references, unresolvable clashes) */
  int kind;            /* B2_STORE_* kind */
  const char *objkind; /* "group", or b2_frame_kind_name of the value
                          ("ndarray", "schunk", "objectarray", "lazyexpr",
                          ...; "c2array" for a remote reference) */
  int loc;             /* B2_STORE_IN_* */
  const char *relpath; /* FILE, MEMBER: the file or member name; EMBED: NULL */
  int64_t offset, length; /* MEMBER, EMBED (FILE: length = file size) */
  int64_t parent;      /* entry index of the parent group (-1: root) */
  int64_t nchildren;   /* groups: shown children, sorted by shown name */
  const int64_t *children;
  int has_attrs;       /* groups: a __vlmeta__ carrier exists */
  int bare;            /* groups: made by a .b2d's directories alone, no
                          value or carrier below (python-blosc2 lists none
                          of them, b2_store_keys neither; they are shown,
                          as where new values go) */
  int object_root;     /* groups of a TreeStore: the root of an object kept
                          as a subtree (a CTable: registered in the store's
                          `_object_registry`, or holding a `_meta` SChunk of
                          vlmeta kind "ctable"); python-blosc2 lists it as
                          one key and hides the keys below it (objkind
                          "ctable"); shown as a directory */
  const char *error;   /* leaves: why the frame could not be read when the
                          store was opened (NULL: it could) */
} b2_store_entry;

/* The form a directory entry would be opened as, from its name and type:
 * NAME.b2e regular file, NAME.b2d directory holding a regular embed.b2e,
 * NAME.b2z regular file; else B2_STORE_NONE.  No content is read. */
int b2_store_detect(int dirfd, const char *name);

/* Open the store `name` of directory dirfd (AT_FDCWD: a path), read its
 * index and build the tree.  env (may be NULL) serves reads of embedded
 * values through its cache.  Symbolic links inside a .b2d are not
 * followed. */
int b2_store_openat(b2_env *env, int dirfd, const char *name, b2_store **out);
int b2_store_open(b2_env *env, const char *path, b2_store **out);
/* The same for `path` of dirfd whose form and name (for messages) are
 * those of `name` (a daemon holding "/proc/self/fd/N" of a source entry
 * named NAME.b2z). */
int b2_store_open_named(b2_env *env, int dirfd, const char *path,
                        const char *name, b2_store **out);
void b2_store_close(b2_store *s);

/* 1 when what the store was read from has changed since (it was
 * replaced, rewritten, a value or a group added or removed: the store
 * itself, and for a .b2d its embed.b2e and every directory of it), else
 * 0.  A stale store still serves its old tree; open it again for the
 * new one.  (A value rewritten in place is read afresh by every open.) */
int b2_store_stale(const b2_store *s);

/* Hold the shared lock of the store's `.b2lock` sidecar (python-blosc2
 * changes a store under its exclusive lock): a descriptor to pass to
 * b2_store_release, or -1 when the store has no sidecar.  While held, no
 * locking writer changes the store, so opening it again and reading a
 * value cannot find it changed (B2_E_STALE): the way out when a busy
 * writer keeps changing it between two tries. */
int b2_store_hold(const b2_store *s);
void b2_store_release(int held);

int b2_store_form(const b2_store *s);
int b2_store_flavor(const b2_store *s);
/* The name it was opened by (for messages). */
const char *b2_store_name(const b2_store *s);

/* Entries: index 0 is the root group; every group and leaf has one entry
 * (a key that is both a leaf and a prefix of other keys has two). */
int64_t b2_store_count(const b2_store *s);
const b2_store_entry *b2_store_entry_at(const b2_store *s, int64_t i);

/* The child of group `dir` shown as `shown`, or B2_E_NOENT. */
int64_t b2_store_child(const b2_store *s, int64_t dir, const char *shown);
/* The leaf of key `key` (python's key, "/a/b"; leaves first), else the
 * group, else B2_E_NOENT.  b2_store_find_group: only a group ("/": the
 * root). */
/* Where a new value shown as `shown` in group `group` goes in a .b2d
 * (python-blosc2 finds a .b2d's values in files by walking it: the key's
 * groups are its directories, an array is NAME.b2nd, an SChunk NAME.b2f):
 * its path relative to the store's directory into rel, and *kind
 * B2_STORE_NDARRAY for NAME.npy, B2_STORE_SCHUNK for any other name (or
 * when *kind is B2_STORE_SCHUNK on entry: an SChunk renamed to a NAME.npy
 * name keeps its kind, NAME.npy.b2f).
 * B2_E_ROFS for a .b2z or .b2e or a group holding an object, B2_E_EXIST
 * when the key (or the name shown) is there (B2_E_ISDIR: as a group),
 * B2_E_INVAL for names that are no key python-blosc2 makes (bookkeeping,
 * hidden names).  With `replace` (a rename onto it), 1 when the name shown
 * is a value of that kind in its own file at rel: that file is replaced;
 * B2_E_ROFS when it is an embedded value, B2_E_XDEV when a value of the
 * other kind (an SChunk under a NAME.npy name, kept as bytes). */
int b2_store_new_value(const b2_store *s, int64_t group, const char *shown, int replace,
                       char *rel, size_t cap, int *kind);
/* The suffixes python-blosc2 gives the files of a .b2d's values: an
 * array's, an SChunk's. */
#define B2_STORE_NDARRAY_SUFFIX ".b2nd"
#define B2_STORE_SCHUNK_SUFFIX ".b2f"
/* The file name python-blosc2 gives a value of kind B2_STORE_NDARRAY or
 * B2_STORE_SCHUNK whose key ends in `name` (an array NAME.b2nd, an SChunk
 * NAME.b2f), into out: 0, or B2_E_NAMETOOLONG. */
int b2_store_file_name(const char *name, int kind, char *out, size_t cap);
/* Where a new group shown as `shown` in group `group` of a .b2d goes: its
 * directory, relative to the store's, into rel (an empty group is a
 * directory; python-blosc2 lists it once it holds a value).  B2_E_EXIST,
 * B2_E_ROFS, B2_E_INVAL as for b2_store_new_value. */
int b2_store_new_group(const b2_store *s, int64_t group, const char *shown, char *rel,
                       size_t cap);
/* What removing group `shown` of group `group` of a .b2d takes: its
 * directory's path into rel (it may not exist: a group made by its
 * attributes alone), the file of its attributes into carrier ("" when
 * none).  B2_E_NOENT, B2_E_NOTDIR (a value), B2_E_NOTEMPTY (it holds
 * values or groups), B2_E_ROFS (.b2z, .b2e, an object's group, attributes
 * kept in the EmbedStore). */
int b2_store_old_group(const b2_store *s, int64_t group, const char *shown, char *rel,
                       size_t cap, char *carrier, size_t ccap);
/* The directory of group `group` (0: the root) of a .b2d, relative to the
 * store's ("" for the root), into rel: where its mode, owner and times
 * live (it may not exist: a group of embedded values alone).  B2_E_NOTDIR
 * (a value), B2_E_ROFS (.b2z, .b2e, an object or a group inside one). */
int b2_store_group_dir(const b2_store *s, int64_t group, char *rel, size_t cap);
/* Does key lie at or below group key g ("/a/b" below "/a", and "/a" itself)? */
int b2_store_key_below(const char *key, const char *g);
/* Whether the group shown as `shown` in group `group` of a .b2d can move
 * to `nshown` in group `ngroup` of the same store (rename(2) of its
 * directory: python-blosc2 then finds its values under their new keys):
 * 0 with the directories' paths relative to the store's into rel and
 * nrel, and the old and new keys into key and nkey; 1 when both name the
 * same group (nothing to do); 2 when `shown` is a value (or none the
 * snapshot knows: a value made since?).  B2_E_NOTDIR
 * when the target is one, B2_E_NOENT, B2_E_ROFS (.b2z, .b2e, an object or a
 * group inside one), B2_E_XDEV (it holds values or attributes in the
 * EmbedStore, whose keys a move of files cannot change: mv copies and
 * removes), B2_E_EXIST (noreplace, or a value has the new key),
 * B2_E_NOTEMPTY (the target group holds entries; also, as rename(2)
 * says, for a value or group whose group lies at or below the target), B2_E_INVAL (into
 * itself, or no key python-blosc2 would make).  Each buffer holds
 * B2_STORE_KEY_CAP bytes. */
#define B2_STORE_KEY_CAP 4098 /* a key's bytes, its NUL and one to spare */
int b2_store_group_move(const b2_store *s, int64_t group, const char *shown, int64_t ngroup,
                        const char *nshown, int noreplace, char *rel, char *nrel, char *key,
                        char *nkey);
/* The entry of the value shown as `shown` in group `group` when it is one
 * of the EmbedStore's (a .b2d's or a .b2e's), which
 * b2_store_embed_rekey can remove or rename: 0 and *entry, B2_E_NOENT,
 * B2_E_ISDIR (a group), B2_E_ROFS (a value in a file of its own or in a
 * zip, part of an object). */
int b2_store_embedded(const b2_store *s, int64_t group, const char *shown, int64_t *entry);
/* The key embedded value `from` (b2_store_embedded) takes when renamed to
 * `shown` in group `group`, into key.  B2_E_EXIST (also with `replace`,
 * unless what is there is an embedded value of the same kind, which goes),
 * B2_E_ISDIR, B2_E_XDEV (an array's name without .npy or an SChunk's
 * with it), B2_E_ROFS (an object), B2_E_INVAL. */
int b2_store_embedded_target(const b2_store *s, int64_t from, int64_t group, const char *shown,
                             int replace, char *key, size_t cap);
/* Remove (newkey NULL) or rename embedded value `key` in the index of the
 * EmbedStore of s (a .b2d's or a .b2e), as python-blosc2's del does: only
 * the index changes, the bytes stay where they are.  The EmbedStore is
 * opened for writing, under its lock when the store is shared (other
 * python-blosc2 handles then read the index again).  0, B2_E_NOENT, or the
 * frame's code (B2_E_BUSY while another writer has it). */
int b2_store_embed_rekey(const b2_store *s, const char *key, const char *newkey);
/* Tell python-blosc2 handles sharing the .b2d store whose directory is
 * open at dirfd (python-blosc2 with locking=True) that its value files
 * changed (one made, renamed or removed): python-blosc2 bumps its
 * EmbedStore's lock counter for its own such changes, and its handles walk
 * the store again when the counter moved.  0 when nobody locks the store
 * (no sidecar), else the code of the sidecar's failure. */
int b2_store_files_changed(int dirfd);
int64_t b2_store_find(const b2_store *s, const char *key);
int64_t b2_store_find_group(const b2_store *s, const char *key);

/* Keys python-blosc2 lists, in byte order, as entry indices: the leaves
 * (remote references included), and for a TreeStore also the groups
 * (not the root), but nothing below an object root.  Returns the count;
 * fills idx up to cap. */
int64_t b2_store_keys(const b2_store *s, int64_t *idx, int64_t cap);

/* Notes gathered while opening (members left out: deflated, encrypted,
 * names that cannot be shown): count and text. */
int b2_store_nnotes(const b2_store *s);
const char *b2_store_note(const b2_store *s, int k);

/* Open leaf i's frame read-only (its own handle; close it).  Remote
 * references and groups give B2_E_INVAL. */
int b2_store_open_frame(b2_store *s, int64_t i, b2_frame **out);

/* A read-only handle on leaf i: `view` B2_VIEW_* (array views need an
 * NDArray leaf). */
int b2_store_open_file(b2_store *s, b2_env *env, int64_t i, int view,
                       b2_file **out);

/* The raw frame bytes of leaf i: its size, and a positioned read (returns
 * the bytes read, short only at the end). */
int64_t b2_store_raw_size(const b2_store *s, int64_t i);
ssize_t b2_store_pread_raw(b2_store *s, int64_t i, void *buf, size_t n,
                           int64_t off);

/* Attributes of group i (the vlmetalayers of its carrier), as
 * "user.b2.vlmeta.NAME" extended attributes with the same conventions as
 * b2_file_xattr_list / b2_file_xattr_get (cap 0: the size needed).  A
 * group without carrier has none. */
ssize_t b2_store_xattr_list(b2_store *s, int64_t i, char *buf, size_t cap);
ssize_t b2_store_xattr_get(b2_store *s, int64_t i, const char *name,
                           void *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif /* B2_STORE_H */
