/*
 * names.h - how source names map to the names shown under the mount.
 *
 * A frame whose source name ends in `.b2frame`, `.b2f` or `.b2` is shown
 * without the suffix (its logical content); `NAME.b2nd` is shown as
 * `NAME.npy` (the .npy view).  The short name is used only while it is free:
 * no source entry of that name exists and no source entry that would take
 * the same short name with a higher priority exists.  Otherwise the frame
 * keeps its full source name (and its view).  Everything else keeps its name.
 *
 * The mapping is a bijection between the entries of a source directory and
 * the names shown for them.  Both directions are pure functions of the name
 * and of a probe that tells what the directory holds under a name, so they
 * can be unit-tested and fuzzed without a file system.
 */
#ifndef B2FS_NAMES_H
#define B2FS_NAMES_H

#include <stddef.h>

/* View selected by a source name's suffix. */
enum b2fs_kind { B2FS_KIND_PLAIN = 0, B2FS_KIND_LOGICAL = 1, B2FS_KIND_NPY = 2 };

/* What a directory holds under a name (returned by a probe). */
enum b2fs_probe_result {
  B2FS_ABSENT = 0,  /* no entry */
  B2FS_PRESENT = 1, /* an entry that is not a frame */
  B2FS_FRAME = 2    /* a frame: a frame suffix, and a file or sparse dir */
};

/* Probe: B2FS_ABSENT/PRESENT/FRAME for `name`, or a negative errno. */
typedef int (*b2fs_probe_fn)(void *ctx, const char *name);

/* Longest name handled (bytes, without the NUL); looking up a longer name
 * is ENAMETOOLONG. */
#define B2FS_NAME_MAX 255

/* Kind asked for by the suffix of `src`; *stem_len gets the length of the
 * name without the suffix.  PLAIN when there is no suffix or the stem would
 * be empty, "." or "..". */
int b2fs_name_kind(const char *src, size_t *stem_len);

/* Name shown for the existing source entry `src` (is_frame: the entry is a
 * frame).  Writes it to out (cap >= B2FS_NAME_MAX + 1).  Returns 0 or a
 * negative errno from the probe. */
int b2fs_name_to_shown(const char *src, int is_frame, b2fs_probe_fn probe,
                       void *ctx, char *out, size_t cap);

/* Source entry shown as `shown`, written to out (cap >= B2FS_NAME_MAX + 1).
 * Returns B2FS_KIND_* of that entry's view (PLAIN when it is not a frame),
 * -ENOENT when nothing is shown under that name, -ENAMETOOLONG for a name
 * longer than B2FS_NAME_MAX, or a negative errno. */
int b2fs_name_to_source(const char *shown, b2fs_probe_fn probe, void *ctx,
                        char *out, size_t cap);

/* ---- changing a directory -------------------------------------------------
 * New entries get source names chosen so that they are shown under the name
 * asked for: a new regular file NAME is the frame NAME.b2frame, a frame
 * moved to NAME keeps its suffix (NAME.b2f, ...; a .b2nd must be moved to
 * a .npy name), anything else keeps NAME.  b2fs_name_check() then tells
 * whether the directory, as it will be after the change (an overlay probe),
 * shows that source entry under NAME. */

/* Suffix of new frames. */
#define B2FS_NEW_SUFFIX ".b2frame"

/* Is `src` a name the daemon never shows (engine temporaries: ".NAME.b2tmp"
 * and "chunks.b2frame.tmp")?  1, 0. */
int b2fs_name_hidden(const char *src);

/* The frame suffix of source name `src` (a pointer into it; "" for none). */
const char *b2fs_name_suffix(const char *src);

/* Source name for an entry of `kind` with frame suffix `suffix` shown as
 * `shown` (PLAIN: shown itself; LOGICAL: shown + suffix; NPY: STEM.b2nd for
 * a shown STEM.npy).  0, -ENAMETOOLONG, or -EXDEV when `shown` cannot name
 * that kind of view (an array's .npy view under a name without .npy). */
int b2fs_name_target(int kind, const char *suffix, const char *shown,
                     char *out, size_t cap);

/* A probe of a directory as it will be: `gone` names absent, `added`
 * present as `added_as` (B2FS_PRESENT or B2FS_FRAME), the rest as the
 * underlying probe says.  Pass a b2fs_overlay as ctx of b2fs_overlay_probe. */
typedef struct b2fs_overlay {
  b2fs_probe_fn probe;
  void *ctx;
  const char *gone[2]; /* NULL: unused */
  const char *added;   /* NULL: none */
  int added_as;
} b2fs_overlay;
int b2fs_overlay_probe(void *ctx, const char *name);

/* 0 when `shown` names the source entry `src` (a frame when is_frame),
 * -EEXIST when it would name something else or nothing, or a negative
 * errno from the probe. */
int b2fs_name_check(const char *shown, const char *src, int is_frame,
                    b2fs_probe_fn probe, void *ctx);

#endif /* B2FS_NAMES_H */
