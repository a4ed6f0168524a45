/*
 * b2_ns.h - layer 7: SOURCE's namespace, as the mount shows it.
 *
 * A SOURCE directory holds frames (a file NAME.b2frame, NAME.b2f, NAME.b2
 * or NAME.b2nd, or a sparse frame: a directory of that name holding
 * chunks.b2frame, whose first bytes are a frame's: b2_frame_starts_like;
 * a file under such a name that does not start like a frame is plain),
 * plain entries, and the engine's hidden temporaries.  The
 * namespace layer says what a person sees there: which entries are
 * frames, the name each is shown under, and which source entry a shown
 * name means; it chooses the source names of new entries, links and
 * renames so that they are shown under the names asked for.  Both
 * programs use it: the FUSE daemon maps its inodes to what it returns, and
 * `b2f ls DIR` prints a listing as the mount shows it.
 *
 * Every call addresses entries by directory descriptor and name (the
 * openat family), never by a path, so any depth works.  A directory
 * descriptor may be an O_PATH one.  Calls fail with negative B2_E_* codes
 * (B2_E_NOENT, B2_E_EXIST, B2_E_NAMETOOLONG, B2_E_XDEV, B2_E_NOTDIR,
 * B2_E_ISDIR, B2_E_INVAL, or the code of a failed system call: see
 * b2_to_errno for the errno a caller replies with).
 *
 * ## Names
 *
 * A frame whose source name ends in `.b2frame`, `.b2f` or `.b2` is shown
 * without the suffix (its logical content); `NAME.b2nd` is shown as
 * `NAME.npy` (the .npy view), and a python-blosc2 store `NAME.b2d`,
 * `NAME.b2z` or `NAME.b2e` (b2_store_detect) as the directory `NAME` (it
 * counts as a frame for the names: the probe says FRAME).  The short name
 * is used only while it is free: no source entry is shown under it (an
 * entry of that name that is itself a frame shown by its own short name
 * does not count) and no source entry that would take the same short name
 * with a higher priority exists.  Otherwise the frame keeps its full
 * source name (and its view).  So with `a.b2frame` shown as `a`, a new
 * file `a.b2frame` is stored as `a.b2frame.b2frame`, and no new frame
 * changes the name of an entry already shown.  Everything else keeps
 * its name; the engine's temporaries (`.NAME.b2tmp`, `chunks.b2frame.tmp`)
 * are never shown.  The mapping is a bijection between the entries of a
 * directory and the names shown for them.  Both directions are pure
 * functions of a name and of a probe that tells what the directory holds
 * under a name, so they are unit-tested and fuzzed without a file system
 * (tests/unit/test_names.c, tests/fuzz/fuzz_names.c).
 *
 * ## Changing a directory
 *
 * New entries get source names chosen so that they are shown under the
 * name asked for: a new regular file NAME is the frame NAME.b2frame (when
 * the caller wants frames), a frame moved or linked to NAME keeps its
 * suffix (NAME.b2f, ...; a .b2nd must be moved to a .npy name), anything
 * else keeps NAME.  A change is refused when the directory, as it will be
 * after it (an overlay probe), would not show the entry under that name.
 * b2_ns_choose_new, b2_ns_choose_link and b2_ns_plan_rename do that work;
 * the caller makes the simple changes (mkdirat, linkat, symlinkat...) and
 * has removals and renames carried out by b2_ns_remove and b2_ns_rename,
 * which keep the crash-safety protocol of docs/architecture.md (hidden
 * names, restore markers, the sweep; hard-linked frames are rewritten in
 * place by the frame layer).
 *
 * ## Removing, renaming, and frames open for writing
 *
 * b2_ns_remove and b2_ns_rename carry removals and renames out in steps
 * that a crash cannot turn into a lost entry (hidden names, restore
 * markers; the sweep, b2_ns_sweep, finishes or undoes what a dead process
 * left).  A frame open for writing is a node (b2_ns_node: directory
 * descriptor + source name + kind, owning the writable b2_file), valid
 * across its own rewrites; the caller moves it when it renames or sets
 * aside its entry.
 *
 * ## What comes next in this layer (see docs/architecture.md)
 *
 * Stores are directory nodes (b2_ns_store, below) holding the store's
 * current snapshot, whose keys are child nodes (b2_ns_key: lookups,
 * listings, sizes, reads with their retries); the daemon maps those to
 * its inodes.  Attributes of a frame come
 * from the probe's header read already (b2_ns_frame_size, b2_ns_has_sidecar,
 * below); an array's .npy size still needs its metalayer.
 */
#ifndef B2_NS_H
#define B2_NS_H

#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "b2_file.h"
#include "b2_store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* View selected by a source name's suffix. */
enum b2_ns_kind {
  B2_NS_PLAIN = 0,
  B2_NS_LOGICAL = 1,
  B2_NS_NPY = 2,
  B2_NS_STORE = 3 /* a python-blosc2 store (b2_store.h): directory NAME */
};

/* What a directory holds under a name (returned by a probe). */
enum b2_ns_probe_result {
  B2_NS_ABSENT = 0,  /* no entry */
  B2_NS_PRESENT = 1, /* an entry that is not a frame */
  B2_NS_FRAME = 2    /* a frame: a frame suffix, and a file or sparse dir */
};

/* Probe: B2_NS_ABSENT/PRESENT/FRAME for `name`, or a negative B2_E_* code. */
typedef int (*b2_ns_probe_fn)(void *ctx, const char *name);

/* Longest name (bytes, without the NUL); a longer one is B2_E_NAMETOOLONG. */
#define B2_NS_NAME_MAX 255
/* Suffix of new frames. */
#define B2_NS_NEW_SUFFIX ".b2frame"
/* Name of the index file that makes a directory a sparse frame. */
#define B2_NS_SPARSE_INDEX "chunks.b2frame"

/* ---- names (pure) ---------------------------------------------------------- */

/* Kind asked for by the suffix of `src`; *stem_len (may be NULL) gets the
 * length of the name without the suffix.  PLAIN when there is no suffix or
 * the stem would be empty, "." or "..". */
int b2_ns_name_kind(const char *src, size_t *stem_len);

/* Name shown for the existing source entry `src` (is_frame: the entry is a
 * frame), written to out (cap >= B2_NS_NAME_MAX + 1).  0 or a probe's code. */
int b2_ns_name_to_shown(const char *src, int is_frame, b2_ns_probe_fn probe,
                        void *ctx, char *out, size_t cap);

/* Does shown name end in ".npy" (an array's view may show under it, from
 * NAME.b2nd, or a plain frame, from NAME.npy.b2frame)? */
int b2_ns_shown_npy(const char *shown);

/* The two source names of a .npy file: its array, NAME.b2nd, and the
 * plain frame of its bytes, NAME.npy.b2frame (with `store`, in a .b2d
 * store: python-blosc2's SChunk NAME.npy.b2f, b2_store_file_name).  Given
 * either in src, the array's name into array, the plain frame's into kept
 * and the name both show, NAME.npy, into shown (each may be NULL; cap >=
 * B2_NS_NAME_MAX + 1 each): B2_NS_NPY for an array's name, B2_NS_LOGICAL
 * for a plain frame's, 0 for any other name or when a name asked for
 * would be too long (outputs untouched). */
int b2_ns_npy_names(const char *src, int store, char *array, char *kept, char *shown,
                    size_t cap);

/* Source entry shown as `shown`, written to out (cap >= B2_NS_NAME_MAX + 1).
 * Returns B2_NS_* kind of that entry's view (PLAIN when it is not a frame),
 * B2_E_NOENT when nothing is shown under that name, B2_E_NAMETOOLONG for a
 * name longer than B2_NS_NAME_MAX, or a probe's code. */
int b2_ns_name_to_source(const char *shown, b2_ns_probe_fn probe, void *ctx,
                         char *out, size_t cap);

/* Is `src` a name never shown (engine temporaries: ".NAME.b2tmp" and
 * "chunks.b2frame.tmp"; the reference library's lock sidecars
 * "NAME.b2lock")?  1, 0. */
int b2_ns_name_hidden(const char *src);

/* The frame suffix of source name `src` (a pointer into it; "" for none). */
const char *b2_ns_name_suffix(const char *src);

/* Source name for an entry of `kind` with frame suffix `suffix` shown as
 * `shown` (PLAIN: shown itself; LOGICAL: shown + suffix; NPY: STEM.b2nd for
 * a shown STEM.npy).  0, B2_E_NAMETOOLONG, or B2_E_XDEV when `shown`
 * cannot name that kind of view (an array's .npy view under a name
 * without .npy). */
int b2_ns_name_target(int kind, const char *suffix, const char *shown, char *out,
                      size_t cap);
/* b2_ns_name_target, but a LOGICAL frame too long with `suffix` takes the
 * first shorter frame suffix that fits (.b2f, .b2): names near NAME_MAX. */
int b2_ns_name_target_fit(int kind, const char *suffix, const char *shown, char *out,
                          size_t cap);

/* A probe of a directory as it will be: `gone` names absent, `added`
 * present as `added_as` (B2_NS_PRESENT or B2_NS_FRAME), the rest as the
 * underlying probe says.  Pass a b2_ns_overlay as ctx of b2_ns_overlay_probe. */
typedef struct b2_ns_overlay {
  b2_ns_probe_fn probe;
  void *ctx;
  const char *gone[2]; /* NULL: unused */
  const char *added;   /* NULL: none */
  int added_as;
} b2_ns_overlay;
int b2_ns_overlay_probe(void *ctx, const char *name);

/* 0 when `shown` names the source entry `src` (a frame when is_frame),
 * B2_E_EXIST when it would name something else or nothing, or a probe's
 * code. */
int b2_ns_name_check(const char *shown, const char *src, int is_frame,
                     b2_ns_probe_fn probe, void *ctx);

/* ---- a live directory ------------------------------------------------------ */

/* Does the directory open at fd hold a regular chunks.b2frame?  1, 0. */
int b2_ns_holds_sparse_index(int fd);
/* Does entry `name` of dirfd hold data (a frame the frame layer classes as
 * data, or one that starts like a frame but cannot be read: that fails
 * when opened)?  1, 0: 0 also for a file that does not start like a frame
 * (B2_KIND_NONE: text, empty), which is then a plain entry. */
int b2_ns_holds_data(int dirfd, const char *name);
/* Is entry `name` of dirfd (lstat `st`) a frame: a frame suffix, and a
 * regular file or a directory holding chunks.b2frame, that holds data?
 * 1, 0. */
int b2_ns_is_frame(int dirfd, const char *name, const struct stat *st);
/* The size of view `kind` (B2_NS_LOGICAL or B2_NS_NPY) of the frame whose
 * header file (the frame file, or a sparse frame's chunks.b2frame) has the
 * lstat `hst`, as the probe that found it a frame (b2_ns_is_frame, through
 * lookups and listings) read it from the header, while that file is
 * unchanged: 0 and *size.  B2_E_NOENT when not known that way (a .npy
 * view needs an array's metalayer or, for an SChunk, a look at its trailer
 * for a python-blosc2 tensor; a frame not probed since it changed): open
 * it then.  No system call. */
int b2_ns_frame_size(const struct stat *hst, int kind, int64_t *size);
/* Does frame `name` of dirfd (lstat st) have the reference library's
 * lock sidecar (NAME.b2lock beside a frame file, .b2lock inside a sparse
 * frame's directory; b2_frame.h)?  1, 0, or a negative code. */
int b2_ns_has_sidecar(int dirfd, const char *name, const struct stat *st);
/* Probe of a live directory (ctx: int *dirfd). */
int b2_ns_probe_dir(void *ctx, const char *name);

/* The source entry shown as `shown` in dirfd: its name into src (cap >=
 * B2_NS_NAME_MAX + 1), its lstat into st; returns its B2_NS_* kind
 * (PLAIN for what is not a frame), B2_E_NOENT when nothing (or a hidden
 * temporary) is shown there, or another negative code. */
int b2_ns_resolve(int dirfd, const char *shown, char *src, struct stat *st);

/* ---- listings ---------------------------------------------------------------- */

/* One entry of a listing. */
typedef struct b2_ns_entry {
  char *name;          /* source name */
  char *shown;         /* name shown (may be the same string as name) */
  ino_t ino;
  unsigned char type;  /* DT_* as shown (a frame is DT_REG) */
  int frame;           /* 1 for a frame */
  int kind;            /* B2_NS_* as b2_ns_name_to_source would give it
                          (B2_NS_PLAIN for an entry shown as it is) */
} b2_ns_entry;

/* A snapshot of a directory, sorted by source name, hidden names left
 * out: every shown name is mapped against the snapshot itself, so one
 * listing is consistent with itself. */
typedef struct b2_ns_list {
  b2_ns_entry *e;
  size_t n;
} b2_ns_list;

/* Read directory fd (any descriptor of it, O_PATH included) into l (which
 * is emptied first; start from a zeroed one).  0 or a negative code. */
int b2_ns_list_load(int fd, b2_ns_list *l);
void b2_ns_list_free(b2_ns_list *l);

/* ---- choosing names for changes ------------------------------------------------ */

/* Source name for a new entry of type `type` (S_IFREG, S_IFDIR, ...) shown
 * as `shown` in dirfd: a regular file becomes a frame when `frames` allows
 * and the names let it (*frame = its B2_NS_* kind: an array STEM.b2nd for
 * a name STEM.npy, else NAME.b2frame), else the entry keeps its name
 * (*frame = 0).  A name with a frame's suffix, which a plain file cannot
 * have, becomes NAME.b2f or NAME.b2 when NAME.b2frame is too long
 * (b2_ns_name_target_fit).  0,
 * B2_E_EXIST, B2_E_INVAL (a name the namespace hides), B2_E_NAMETOOLONG
 * (also a name with a frame's suffix that no frame suffix fits after). */
int b2_ns_choose_new(int dirfd, const char *shown, mode_t type, int frames, char *src,
                     size_t cap, int *frame);

/* Source name for a second name `shown` in dirfd of the frame of `kind`
 * whose source name is `src` (its suffix is kept, as a rename would; a
 * hidden src, a name kept for a writer, gives B2_NS_NEW_SUFFIX): the
 * name must be free and the directory must then show it as `shown`.  0,
 * B2_E_EXIST, B2_E_INVAL, B2_E_NAMETOOLONG, B2_E_XDEV. */
int b2_ns_choose_link(int dirfd, const char *shown, int kind, const char *src, char *out,
                      size_t cap);

/* Room for a hidden name (B2_NS_GONE_PREFIX "PID-N.b2tmp" and the NUL). */
#define B2_NS_HIDDEN_MAX 64

/* A rename worked out (b2_ns_plan_rename) and carried out (b2_ns_rename). */
typedef struct b2_ns_move {
  int pfd, qfd;            /* the directories (set by the caller) */
  char src[B2_NS_NAME_MAX + 1];    /* the entry moved */
  char target[B2_NS_NAME_MAX + 1]; /* its new source name in qfd */
  char esrc[B2_NS_NAME_MAX + 1];   /* the entry shown under the new name */
  int kind, ekind;         /* B2_NS_* kinds; ekind < 0: nothing shown there */
  struct stat st, est;     /* their lstat */
  /* Set by b2_ns_rename: */
  char hidden[B2_NS_HIDDEN_MAX]; /* the replaced entry's hidden name in qfd */
  int linked;              /* ...a second link of it, made before the rename */
  int marked;              /* a restore marker exists (internal) */
  int kept;                /* the replaced entry lives on as `hidden` (the
                              caller deletes it: b2_ns_delete) */
  char note[1024];         /* something left behind, for the caller's log
                              ("" when none); the rename happened anyway */
} b2_ns_move;

/* Work out the rename of what is shown as `name` in m->pfd to `newname` in
 * m->qfd (noreplace: RENAME_NOREPLACE).  0, 1 (nothing to do: the same
 * entry), or a negative code: B2_E_EXIST, B2_E_ISDIR, B2_E_NOTDIR,
 * B2_E_XDEV (the entry would become another kind, or no frame suffix
 * fits after newname (b2_ns_name_target_fit): copy instead), B2_E_INVAL,
 * B2_E_NOENT, B2_E_NAMETOOLONG. */
int b2_ns_plan_rename(b2_ns_move *m, const char *name, const char *newname, int noreplace);

/* Plan the move of the engine's hidden entry `tmp` of m->qfd (m->pfd is
 * set to it), a frame of B2_NS_* kind `kind` made there, to what is shown
 * as `newname` in m->qfd, replacing what shows there (as
 * b2_ns_plan_rename: its codes; carried out by b2_ns_rename). */
int b2_ns_plan_put(b2_ns_move *m, const char *tmp, int kind, const char *newname,
                   int noreplace);

/* A frame of B2_NS_* kind `kind` renamed to a name that shows the other
 * kind: a plain frame (B2_NS_LOGICAL) whose content is a .npy file (a
 * program saved it under another name and renames it to a .npy name) made
 * into the b2nd array a new .npy file of those bytes is
 * (b2_file_create_npy_at), or an array's .npy view (B2_NS_NPY) renamed to
 * another name into the plain frame of its bytes (b2_file_create_at);
 * with the environment's parameters, at a fresh hidden name of qfd
 * written to tmp (cap >= B2_NS_HIDDEN_MAX), with the source's
 * modification time, owner, mode, user.* attributes and vlmeta
 * (python-blosc2's; not the engine's own), synced: then 1, and the caller
 * renames it in (b2_ns_plan_put) and removes the source.  0 when the
 * content is no .npy file that can be an array (nothing is left behind),
 * or a negative code (nothing left either). */
int b2_ns_convert(b2_env *env, int pfd, const char *src, int kind, int qfd, char *tmp,
                  size_t cap);

/* Is extended attribute `name` one of a frame's own, kept on its source
 * entry (user.*, but not the user.b2.* that describe the frame)? */
int b2_ns_own_xattr(const char *name);
/* Copy those of the entry at descriptor `from` (any, O_PATH included) to
 * the entry at `to`: 0, or the errno of the first that failed (the others
 * are copied still). */
int b2_ns_copy_own_xattrs(int from, int to);

/* Is the entry of kind `kind` with lstat st a sparse frame (a directory)? */
int b2_ns_is_sparse(int kind, const struct stat *st);

/* Carry out the rename m planned by b2_ns_plan_rename (0 from it), in the
 * steps that keep it crash-safe:
 *
 *   1. When an entry is replaced and the rename cannot replace it in one
 *      step (the replaced entry's source name is not the target's, either
 *      entry is a sparse frame, or `ebusy`: the caller still uses the
 *      replaced entry), the replaced entry first gets a hidden name
 *      (b2_ns_hidden_name) in m->qfd:
 *        - a regular file replaced under its own name by a regular file
 *          while busy gets it as a second hard link (m->linked): a crash
 *          from here on leaves the target with its old content;
 *        - anything else is renamed to it, after a restore marker beside it
 *          records its name and the rename's target (b2_ns_restore_mark):
 *          a crash before step 2 leaves the marker, and the next sweep
 *          (b2_ns_sweep) puts the entry back while the target is free.
 *   2. The entry is renamed to m->target (RENAME_NOREPLACE after a move
 *      aside); on failure step 1 is undone and the code returned.
 *   3. The marker goes (the target name is taken), then the replaced entry
 *      under its hidden name is deleted (b2_ns_remove) unless `ebusy`: it
 *      is then kept (m->kept) for the caller to delete when it is done
 *      with it (b2_ns_delete); a process that dies first leaves it to the
 *      sweep.
 *   Between 2 and 3, a frame file's `NAME.b2lock` sidecar (or a store
 *   zip's) is renamed along (RENAME_NOREPLACE); when the target name has
 *   one already, that one stays and the moved frame's is removed.
 *
 * The caller keeps others from changing these entries meanwhile (the
 * daemon: its namespace locks) and takes care of its own writers (they
 * must have committed: a frame moved is a frame as last committed).
 * 0 or the negative code of the failed step (nothing changed then); a
 * problem after the rename happened is described in m->note. */
int b2_ns_rename(b2_ns_move *m, int ebusy);

/* The exchange of what is shown as `name` in m->pfd and `newname` in
 * m->qfd (renameat2 RENAME_EXCHANGE): fills m->src, m->kind, m->st (the
 * first), m->esrc (= m->target), m->ekind, m->est (the second).  Both must
 * exist and be of one kind whose source names differ as the shown ones do
 * (two plain entries, two frames under one suffix, each of them contiguous
 * or both sparse), so that swapping what the two source names hold shows
 * each entry under the other's name and changes nothing else.  0, 1 (one
 * file under both names: nothing to do), or a negative code: B2_E_NOENT,
 * B2_E_INVAL (not of one kind), B2_E_NAMETOOLONG. */
int b2_ns_plan_exchange(b2_ns_move *m, const char *name, const char *newname);

/* Carry out the exchange m planned (b2_ns_plan_exchange gave 0): one
 * renameat2(RENAME_EXCHANGE) of the two source entries, atomic; then two
 * frame files swap their `.b2lock` sidecars too (one alone moves to the
 * other name).  0 or a negative code (nothing changed); a sidecar left in
 * place is told in m->note. */
int b2_ns_exchange(b2_ns_move *m);

/* Remove entry `src` of dirfd, of B2_NS_* kind `kind` and lstat `st` (as
 * b2_ns_resolve gives them).  With `keep` (the caller still uses the
 * entry: a frame open for writing, whose writer may rewrite it by name,
 * also one name of a hard-linked frame, or a sparse frame open at all) the entry is
 * renamed to a fresh hidden name, written to `hidden` (cap >=
 * B2_NS_HIDDEN_MAX; a src already hidden keeps its name): it is no longer
 * shown, and the caller deletes it with b2_ns_delete once done, or the
 * sweep of a later run does if the caller dies first (a hidden name of a
 * linked file is one link more, which the caller may delete as soon as its
 * writer is done, b2_ns_delete).  Without `keep` the
 * entry is deleted: one name of a hard-linked file unlinked (the file
 * lives on under the others), a file unlinked, a sparse frame's directory emptied
 * and removed.  When a name of a contiguous frame goes (its last or not),
 * its `NAME.b2lock` sidecar goes too, as the reference library removes it.
 * 0 (deleted), 1 (kept under `hidden`), or a negative code with a
 * detail. */
int b2_ns_remove(int dirfd, const char *src, int kind, const struct stat *st, int keep,
                 char *hidden, size_t cap);

/* Delete entry `name` of dirfd: a file (and its `NAME.b2lock` sidecar), or
 * a sparse frame's directory (its files, then it).  For what b2_ns_remove
 * or b2_ns_rename kept. */
int b2_ns_delete(int dirfd, const char *name);

/* The `.b2lock` sidecar of frame file `src` in pfd, which was just renamed
 * to `target` in qfd, follows it (as b2_ns_rename moves it): unless
 * `target` has one already, which stays (another process may hold it),
 * and src's goes. */
void b2_ns_move_sidecar(int pfd, const char *src, int qfd, const char *target);

/* The errno of the system call whose failure the last failed
 * b2_ns_rename, b2_ns_remove or b2_ns_delete of this thread returned (its
 * B2_E_* code does not tell ENOTEMPTY, EACCES, EMLINK... apart): what a
 * caller replying to a system call of its own reports. */
int b2_ns_last_errno(void);

/* A fresh hidden name (B2_NS_GONE_PREFIX "PID-N.b2tmp", unique in this
 * process) into out (cap >= B2_NS_HIDDEN_MAX). */
void b2_ns_hidden_name(char *out, size_t cap);

/* ---- removing, and what crashes leave (leftover.c) ------------------------ */

/* Hidden name of an entry set aside before it is deleted or replaced:
 * B2_NS_GONE_PREFIX "PID-N.b2tmp" (PID: the process that set it aside). */
#define B2_NS_GONE_PREFIX ".b2fs-gone-"

/* Call fn on every entry but . and .. of directory `name` of pfd (not
 * followed if a symlink; "." for pfd itself), until fn returns < 0: that
 * code, or 0, or a negative code. */
typedef int (*b2_ns_entry_fn)(int dfd, const char *name, unsigned char type, void *arg);
int b2_ns_each_entry(int pfd, const char *name, b2_ns_entry_fn fn, void *arg);
/* Remove a sparse frame directory `name` of dirfd: its files, then it. */
int b2_ns_remove_frame_dir(int dirfd, const char *name);
/* Remove the hidden entries (engine leftovers) of directory `name` of
 * dirfd: 1 if it held only those (now gone), 0 if it holds more, or a
 * negative code.  Frames this process set aside while open (and their
 * temporaries and sidecars) are left to their owner, which deletes them
 * at their last close: 2 if it held only those besides leftovers. */
int b2_ns_clear_hidden(int dirfd, const char *name);
/* A rename that moves the entry it replaces aside to the hidden name
 * `hidden` (a directory cannot be hard-linked) first leaves a marker
 * beside it naming the entry's source name and the rename's target: if
 * the process dies before the rename takes the target name, the sweep puts
 * the entry back instead of deleting it.  Cleared once the target name is
 * taken (or the rename is given up).  0 or a negative code. */
int b2_ns_restore_mark(int dirfd, const char *hidden, const char *esrc, const char *target);
void b2_ns_restore_unmark(int dirfd, const char *hidden);

/* What the sweep asks its caller. */
typedef struct b2_ns_sweep_ops {
  /* Does a writer of the caller work on frame `name` of dirfd (its
   * temporaries are in use)?  1 also when the caller cannot tell. */
  int (*busy)(void *ctx, int dirfd, const char *name);
  /* A leftover that could not be repaired (may be NULL). */
  void (*note)(void *ctx, const char *name, const char *detail);
  void *ctx;
} b2_ns_sweep_ops;
/* Remove the leftovers of crashes in directory dirfd (a readable
 * descriptor): the number removed or repaired, or a negative code. */
int b2_ns_sweep(int dirfd, const b2_ns_sweep_ops *ops);

/* ---- nodes: frames as the directory and name they are at (node.c) ---------
 *
 * A node is a frame of SOURCE held as the directory it is in (a shared,
 * refcounted descriptor, b2_ns_dir: the directory may be moved, and any
 * depth works), its source name there and its kind (B2_NS_LOGICAL or
 * B2_NS_NPY: the view).  The caller keeps one node per frame it shows
 * (the daemon: one per frame inode, read-only or not); opened for writing
 * (b2_ns_node_open_file), the node owns the writable b2_file.  The engine
 * rewrites the frame at that directory and name (compaction, the commit of
 * an empty frame, a .npy file created anew once its header is in, redo
 * files of hard-linked frames), so a node stays valid across its own
 * rewrites without its caller's help.  A rename or removal made through
 * the caller (b2_ns_rename, b2_ns_remove) moves the entry: the caller then
 * tells the node (b2_ns_node_moved, or b2_ns_node_place when it has no
 * file: a lookup found the frame elsewhere), with the node's file kept to
 * itself meanwhile.  A frame moved by another program is not followed: its
 * commits still reach the file (they write through its descriptor), its
 * rewrites by name fail (B2_E_BUSY: the name holds another file) or do
 * not happen (b2_ns_node_compact).
 *
 * Neither nodes nor directories are locked (a directory's reference count
 * is atomic): the caller serialises its calls with any use of the node's
 * file (the daemon: the handle's `use` lock, held exclusively around
 * b2_ns_node_moved) and of its place (the daemon: the inode lock). */
typedef struct b2_ns_dir b2_ns_dir;
typedef struct b2_ns_node b2_ns_node;

/* A directory for nodes: a new descriptor of dirfd (any descriptor of it,
 * O_PATH included) with one reference; `known` (may be NULL) is its lstat
 * when the caller has it (st_dev, st_ino: one call less). */
int b2_ns_dir_open(int dirfd, const struct stat *known, b2_ns_dir **out);
b2_ns_dir *b2_ns_dir_ref(b2_ns_dir *d); /* one more reference (d may be NULL) */
void b2_ns_dir_put(b2_ns_dir *d);        /* one less (d may be NULL) */
int b2_ns_dir_fd(const b2_ns_dir *d);    /* its descriptor, valid while referenced */
/* Is d the directory of these numbers (st_dev, st_ino of an lstat)? */
int b2_ns_dir_is(const b2_ns_dir *d, const struct stat *st);

/* A node of frame `name` in dir, not open (no system call).  B2_E_INVAL
 * for a kind that is not a frame's view. */
int b2_ns_node_new(b2_ns_dir *dir, const char *name, int kind, b2_ns_node **out);
/* Open the node's frame for writing, at its directory and name, with the
 * view of its kind (already open: 0).  0 or the code of b2_file_open_at
 * (B2_E_UNSUPPORTED: a frame the writer cannot keep valid, B2_E_BUSY:
 * another writer holds it). */
int b2_ns_node_open_file(b2_ns_node *n, b2_env *env);
/* Commit and close the node's writable file (a failed commit is tried
 * once more); the node stays.  With entry, *entry gets an O_PATH
 * descriptor of what its name holds afterwards (-1 if none).  A new
 * NAME.npy made as NAME.b2nd whose header was no array
 * (b2_file_npy_fell_back) is renamed NAME.npy.b2frame, the plain frame a
 * plain NAME.npy is (in a store, NAME.npy.b2f), when that name is free
 * (the node follows).  The
 * close's code (0 when not open). */
int b2_ns_node_close_file(b2_ns_node *n, int *entry);
/* The node is a value of a .b2d store (b2_ns_node_close_file then names
 * a new .npy kept as its bytes as python-blosc2 names an SChunk). */
void b2_ns_node_in_store(b2_ns_node *n);
/* Is the node a plain frame shown under a .npy name (NAME.npy.b2frame: a
 * .npy file kept as its bytes, also a new one b2_ns_node_close_file just
 * renamed so)? */
int b2_ns_node_kept_npy(const b2_ns_node *n);
/* A node closed (no file) of a plain frame shown under a .npy name
 * (NAME.npy.b2frame: a .npy file kept as its bytes, b2_ns_node_close_file)
 * whose bytes are a whole array again (b2_file_npy_is_array: a program
 * wrote a complete .npy file over it) is made the array a new NAME.npy
 * of those bytes is: b2_ns_convert at a hidden name, renamed NAME.b2nd
 * (when free) beside the plain frame, which then goes with its sidecar
 * moved to the array (the name is never without a file: NAME.b2nd shows
 * as NAME.npy first; a crash between leaves both, the plain frame shown
 * under its own name); the node follows (kind B2_NS_NPY, name NAME.b2nd).
 * Not for a sparse frame or a hard-linked file.  1 made (note: what could
 * not be removed, "" when nothing), 0 not (nothing changed), or a
 * negative code (nothing changed). */
int b2_ns_node_rearray(b2_ns_node *n, b2_env *env, char *note, size_t cap);
/* Close its file if open (b2_ns_node_close_file) and free the node. */
void b2_ns_node_free(b2_ns_node *n);

/* A node of frame `name` of dirfd opened for writing at once (new node,
 * new b2_ns_dir; b2_ns_node_open_file's codes). */
int b2_ns_node_open(b2_env *env, int dirfd, const char *name, int kind, b2_ns_node **out);
/* Create frame `name` in dirfd (kind B2_NS_NPY: a new .npy file, whose
 * array is created once its header is written; p NULL: the environment's
 * parameters) and open it as a node.  B2_E_EXIST when the name exists. */
int b2_ns_node_create(b2_env *env, int dirfd, const char *name, int kind,
                      const b2_frame_params *p, b2_ns_node **out);
/* The same in directory dir, shared (a reference taken: no descriptor of
 * its own, as a node kept with its inode would hold). */
int b2_ns_node_create_in(b2_env *env, b2_ns_dir *dir, const char *name, int kind,
                         const b2_frame_params *p, b2_ns_node **out);
/* b2_ns_node_close_file, then b2_ns_node_free. */
int b2_ns_node_close(b2_ns_node *n, int *entry);

/* The node's writable file (NULL when not open for writing). */
b2_file *b2_ns_node_file(const b2_ns_node *n);
int b2_ns_node_kind(const b2_ns_node *n);
/* Its source name, and whether it is entry `name` of the directory with
 * device and inode numbers (ddev, dino). */
const char *b2_ns_node_name(const b2_ns_node *n);
void b2_ns_node_dir(const b2_ns_node *n, dev_t *ddev, ino_t *dino);
int b2_ns_node_is_at(const b2_ns_node *n, dev_t ddev, ino_t dino, const char *name);
/* Where it is: its directory (one more reference: b2_ns_dir_put it) and
 * its name copied to name; NULL when cap is too small. */
b2_ns_dir *b2_ns_node_where(const b2_ns_node *n, char *name, size_t cap);
/* The entry was moved to `name` of dirfd (renamed, or set aside under a
 * hidden name): the frame is rewritten there from now on.  0 or a code
 * (nothing changed then). */
int b2_ns_node_moved(b2_ns_node *n, int dirfd, const char *name);
/* The frame is `name` of dir now (a lookup found it there), for a node
 * not open for writing (B2_E_BUSY otherwise: b2_ns_node_moved). */
int b2_ns_node_place(b2_ns_node *n, b2_ns_dir *dir, const char *name);
/* Has the node's writer moved to another file than the one `known`
 * describes (a rewrite of its own: compaction, the commit of an empty
 * frame, a recreation)?  1 with *fd an O_PATH descriptor of that file at
 * the node's name; 0 when not (no writer, the same file, a sparse frame, or
 * the name holds another file: moved behind the caller's back). */
int b2_ns_node_current(const b2_ns_node *n, const struct stat *known, int *fd);
/* A new descriptor (open flags: O_PATH, O_RDONLY...) of what the node's
 * name holds now, the file a rewrite left there; or a negative code. */
int b2_ns_node_entry(const b2_ns_node *n, int flags);
/* Compact the (committed) frame open for writing at its name when that
 * name still holds the file `expect` describes: 1 compacted (the name now
 * holds the new file, or the same one rewritten in place when it has other
 * links), 0 left alone (or not open), or a negative code. */
int b2_ns_node_compact(b2_ns_node *n, const struct stat *expect);

/* ---- stores: directory nodes (store.c) ------------------------------------
 *
 * A python-blosc2 store of SOURCE (kind B2_NS_STORE: NAME.b2e, NAME.b2d,
 * NAME.b2z, shown as the directory NAME) is a directory node whose
 * children are the store's keys (b2_store.h gives the tree and its
 * names).  The node holds the store's current snapshot: opened at its
 * first use, shared by reference counts, and opened again when the store
 * changed on disk (b2_store_stale), which is checked at most once every
 * `recheck` seconds (or at the next use after b2_ns_store_recheck: a read
 * that failed may have met a change).  A store that cannot be opened
 * (damaged) shows nothing of its old snapshot and is not opened again
 * before `recheck` seconds.  Thread-safe. */
typedef struct b2_ns_store b2_ns_store;
typedef struct b2_ns_snap b2_ns_snap;

/* A node with no snapshot yet; NULL when out of memory. */
b2_ns_store *b2_ns_store_new(void);
void b2_ns_store_free(b2_ns_store *n);
/* The current snapshot of the store entry open at fd (any descriptor of
 * it, O_PATH included; its name decides the store's form), with a
 * reference for the caller (b2_ns_snap_put).  *report is set when the
 * caller should tell someone: a snapshot just opened (its notes,
 * b2_store_note, are new), or a failure whose detail differs from the last
 * one reported.  0, or the code of the failed open (B2_E_IO while a
 * damaged store waits for `recheck`). */
int b2_ns_store_get(b2_ns_store *n, b2_env *env, int fd, double recheck, b2_ns_snap **out,
                    int *report);
/* Check the store for changes at its next use, whatever `recheck` says. */
void b2_ns_store_recheck(b2_ns_store *n);
/* A snapshot's store, one more reference, one less (the last closes it). */
b2_store *b2_ns_snap_store(const b2_ns_snap *p);
b2_ns_snap *b2_ns_snap_ref(b2_ns_snap *p);
void b2_ns_snap_put(b2_ns_snap *p);

/* ---- a store's keys as child nodes (store.c) --------------------------------
 *
 * A store node bound to its entry (b2_ns_store_bind: the environment, a
 * descriptor of the store entry kept open by the caller, the recheck
 * interval, and a callback told each line worth reporting: a new
 * snapshot's notes, a failure to open it not reported yet) answers for its
 * keys: a lookup of a name in a group gives the child node of that key
 * (b2_ns_key: a group or a value not in a file of its own), or, for a
 * value that is a file of a .b2d, that file's directory and name (an
 * ordinary frame, or a plain file for an object).  A key node names its key
 * only: every call finds it again in the store's current snapshot
 * (B2_E_NOENT once the store no longer has it), and calls that read a
 * value retry while another process changes the store under its lock
 * (B2_E_STALE: again, holding the store's sidecar meanwhile), then check
 * the store again at its next use.  A key NULL is the store's root
 * group.  Key nodes are freed by their caller (b2_ns_key_free) before the
 * store node. */
typedef struct b2_ns_key b2_ns_key;
typedef struct b2_ns_value b2_ns_value;
typedef struct b2_ns_store_file {
  int dirfd;                     /* O_PATH descriptor of its directory */
  char name[B2_NS_NAME_MAX + 1]; /* its name there */
  int kind;                      /* B2_NS_NPY, B2_NS_LOGICAL or B2_NS_PLAIN */
} b2_ns_store_file;

void b2_ns_store_bind(b2_ns_store *n, b2_env *env, int fd, double recheck,
                      void (*note)(void *arg, const char *line), void *arg);
/* Child `name` (as shown) of group dir (NULL: the root) of a bound store
 * node: 0 with *key (a new node), or 1 with *file filled (close its
 * dirfd).  B2_E_NOENT, B2_E_NOTDIR (dir is a value), or the code of the
 * snapshot's open. */
int b2_ns_store_lookup(b2_ns_store *n, const b2_ns_key *dir, const char *name, b2_ns_key **key,
                       b2_ns_store_file *file);
/* Where a new value `name` of group dir (NULL: the root) goes
 * (b2_store_new_value: NAME.npy an array NAME.b2nd, other names an SChunk
 * NAME.b2f, in the group's directory of a .b2d, made here when missing and
 * given to uid and gid unless those are -1; file->kind B2_NS_LOGICAL on
 * entry keeps an SChunk under a NAME.npy name, NAME.npy.b2f: a rename of
 * one; set it to 0 otherwise).  0 with *file filled (its
 * dirfd to close; the store checked again at its next use), or B2_E_ROFS,
 * B2_E_EXIST, B2_E_ISDIR, B2_E_INVAL, B2_E_NOTDIR, B2_E_XDEV.  With `replace` (a
 * rename onto the name), 1 with *file when `name` is a value of that kind
 * in a file of its own: that file (also one made since the snapshot).
 * The caller creates (or renames) the frame, then calls
 * b2_ns_store_changed. */
int b2_ns_store_create(b2_ns_store *n, const b2_ns_key *dir, const char *name, int replace,
                       uid_t uid, gid_t gid, b2_ns_store_file *file);
/* Make group `name` of group dir (NULL: the root) of a .b2d: its directory
 * (b2_store_new_group; with mode, given to uid and gid unless -1, as are
 * the directories above it made on the way).  0, or B2_E_EXIST, B2_E_ROFS,
 * B2_E_INVAL, B2_E_NOTDIR, or the system's code. */
int b2_ns_store_mkdir(b2_ns_store *n, const b2_ns_key *dir, const char *name, mode_t mode,
                      uid_t uid, gid_t gid);
/* Begin removing group `name` of group dir (NULL: the root) of a .b2d,
 * which must hold no value or group (b2_store_old_group): the file of its
 * attributes goes; the caller removes its directory, named `base` (cap
 * bytes) in the descriptor returned (O_PATH; to close), then calls
 * b2_ns_store_changed.  B2_E_NOENT, B2_E_NOTDIR, B2_E_NOTEMPTY, B2_E_ROFS,
 * or the system's code. */
int b2_ns_store_rmdir(b2_ns_store *n, const b2_ns_key *dir, const char *name, char *base,
                      size_t cap);
/* The directory of group dir (NULL: the root) of a .b2d, which holds the
 * mode, owner and times the group shows (with `make`, made first when
 * missing: a group of embedded values alone has none): an O_PATH
 * descriptor to close, or B2_E_NOENT (none, and not `make`), B2_E_NOTDIR,
 * B2_E_ROFS (.b2z, .b2e, an object's group), or the code of the
 * snapshot's open. */
int b2_ns_store_group_dir(b2_ns_store *n, const b2_ns_key *dir, int make);
/* Move group `name` of group dir (NULL: the root) of a .b2d to `newname`
 * in group ndir of the same store: its directory is renamed
 * (b2_store_group_move says when it can be), so that python-blosc2 finds
 * its values under their new keys; the group's old and new keys into key
 * and nkey (B2_STORE_KEY_CAP bytes each), for b2_ns_key_moved.  0, 1 (the
 * same group: nothing done), 2 (`name` is a value: not a group move), or
 * B2_E_NOTDIR (the target is a value), B2_E_NOENT, B2_E_ROFS, B2_E_XDEV, B2_E_EXIST,
 * B2_E_NOTEMPTY, B2_E_INVAL, or the system's code. */
int b2_ns_store_move_group(b2_ns_store *n, const b2_ns_key *dir, const char *name,
                           const b2_ns_key *ndir, const char *newname, int noreplace, char *key,
                           char *nkey);
/* Group `from` of key node k's store moved to `to`: a node at or below it
 * names its new key from now on, one at or below `to` (replaced) is gone
 * (B2_E_NOENT).  0, or B2_E_NOMEM (the node is then gone). */
int b2_ns_key_moved(b2_ns_key *k, const char *from, const char *to);
/* Remove (newname NULL) embedded value `name` of group dir of store n (a
 * .b2d or a .b2e), or rename it `newname` in group ndir of the same store
 * (`replace`: an embedded value of that name and kind goes), in its
 * EmbedStore's index (b2_store_embedded, b2_store_embedded_target,
 * b2_store_embed_rekey).  0, or B2_E_NOENT, B2_E_ROFS (not an embedded
 * value), B2_E_EXIST, B2_E_ISDIR, B2_E_XDEV, B2_E_INVAL, B2_E_BUSY... */
int b2_ns_store_rekey(b2_ns_store *n, const b2_ns_key *dir, const char *name,
                      const b2_ns_key *ndir, const char *newname, int replace);
/* The .b2d store n was changed here: other processes sharing it under
 * python-blosc2's locking are told (b2_store_files_changed; a failure goes
 * to the note callback) and the store is opened again: at its next use,
 * or, when only value files were made, renamed or removed (`files`), at
 * its next listing or change of groups (lookups look for values where
 * their files lie, so that a copy of many files into a store, or rm -r,
 * does not walk it for each; the snapshot is still checked for other
 * changes every `recheck` seconds). */
void b2_ns_store_changed(b2_ns_store *n, int files);
/* The names shown in group dir (NULL: the root; type DT_DIR or DT_REG,
 * kind B2_NS_STORE, ino the position + 3, as in a listing after "." and
 * ".."); free with b2_ns_list_free. */
int b2_ns_store_list(b2_ns_store *n, const b2_ns_key *dir, b2_ns_list *l);
void b2_ns_key_free(b2_ns_key *k);
const char *b2_ns_key_name(const b2_ns_key *k);
int b2_ns_key_is_group(const b2_ns_key *k);
/* Do two key nodes name the same key of one store (a group or a value, neither gone)? */
int b2_ns_key_same(const b2_ns_key *a, const b2_ns_key *b);
/* A value's size as shown (its .npy or logical view, an object's raw
 * frame; 0 when it cannot be read; remembered while the snapshot lasts)
 * and its raw size in the store.  B2_E_ISDIR for a group. */
int b2_ns_key_size(b2_ns_key *k, int64_t *size, int64_t *raw);
/* Open a value for reading (B2_E_ISDIR for a group), read it (a short
 * count only at its end), close it.  A value that cannot be opened or
 * read is told to the node's listener ("KEY: detail"). */
int b2_ns_key_open(b2_ns_key *k, b2_ns_value **v);
ssize_t b2_ns_value_pread(b2_ns_key *k, b2_ns_value *v, void *buf, size_t size, int64_t off);
void b2_ns_value_close(b2_ns_value *v);
/* user.b2.* attributes of key k (NULL: the root group) of store n: a
 * group's python attributes, a value's frame attributes, an object's
 * user.b2.kind.  name NULL: the list.  Bytes, or B2_E_RANGE (buf too
 * small), B2_E_NOENT (no such attribute, or the key is gone) or another
 * code. */
ssize_t b2_ns_key_xattr(b2_ns_store *n, const b2_ns_key *k, const char *name, char *buf,
                        size_t size);

#ifdef __cplusplus
}
#endif
#endif /* B2_NS_H */
