/* cli.h - shared declarations of the b2f subcommands. */
#ifndef B2_CLI_H
#define B2_CLI_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* Each subcommand: argc/argv start at the subcommand name.  Returns the
 * process exit status. */
int b2f_info(int argc, char **argv);
int b2f_cat(int argc, char **argv);
int b2f_verify(int argc, char **argv);
int b2f_pack(int argc, char **argv);
int b2f_unpack(int argc, char **argv);
int b2f_compact(int argc, char **argv);
int b2f_scrub(int argc, char **argv);
int b2f_ls(int argc, char **argv);
/* `b2f ls [-l] DIR` for a directory that is not a store (cmd_ls.c). */
int b2f_ls_dir(const char *path, int lng);

/* `b2f pack` of a NumPy .npy file into a b2nd array (cmd_npy.c).
 * b2f_npy_option: cmd_pack.c's parser offers it each option it does not
 * know; it takes --npy, --raw, --chunkshape A,B,.. and --blockshape A,B,..
 * (advancing *i past a value) and returns 1, or 0 for another option.
 * b2f_npy_wanted: IN is to be packed as an array (IN ends in .npy, or
 * --npy / --chunkshape / --blockshape was given; never with --raw).
 * b2f_pack_npy: do it; returns the exit status. */
struct b2_frame_params;
int b2f_npy_option(int argc, char **argv, int *i);
int b2f_npy_wanted(const char *in);
/* Does path name a .npy file (it ends in ".npy")? */
int b2f_npy_name(const char *path);
int b2f_pack_npy(const char *in, const char *out, const struct b2_frame_params *p, int force,
                 int threads);
/* Make way for `b2f pack`'s OUT (a file, not "-"): 0 when nothing is
 * there, or with `force` when a contiguous frame file was there and is
 * removed; else -1, with one line on stderr saying why OUT stays. */
int b2f_clear_output(const char *out, int force);

/* Write the content of the frame at `path` in `view` (B2_VIEW_*) to fd;
 * returns the exit status (errors reported on stderr). */
int b2f_copy_content(const char *path, int view, int fd, int show_progress);

/* The environment the reading commands use (a 64 MiB cache). */
struct b2_env;
struct b2_file;
int b2f_env(struct b2_env **env);
/* Write `size` bytes that rd(ctx, buf, n, off) reads (pread-like) to fd
 * (errors name `name`); returns the exit status.  b2f_copy_file: the
 * whole of an open handle, opened in `view` (B2_VIEW_NPY of a frame that
 * is no array: its bytes must be a .npy file, else B2_E_FORMAT). */
typedef ssize_t (*b2f_reader)(void *ctx, void *buf, size_t n, int64_t off);
int b2f_copy(b2f_reader rd, void *ctx, int64_t size, const char *name, int fd);
int b2f_copy_file(struct b2_file *f, int view, const char *name, int fd);
/* `b2f cat STORE KEY` (cmd_store.c): the value of KEY in `view`, or its
 * raw frame; objects that are not data always as their raw frame. */
int b2f_cat_store(const char *store, const char *key, int view, int raw, int fd);

/* Print "b2f: PATH: <detail of code>" on stderr; returns 1. */
int b2f_report(const char *path, int code);

/* Print a usage error for `cmd` and return 2. */
int b2f_usage_error(const char *cmd, const char *msg);

/* The arguments of a command taking one optional flag (*on set to 1 when
 * given) and exactly one operand (named `what` in errors, e.g. "PATH"):
 * 0, or the usage error's status (2). */
int b2f_flag_and_operand(const char *cmd, int argc, char **argv, const char *flag, int *on,
                         const char *what, const char **operand);

/* Write all of buf to fd; 0 or -1 with errno. */
int b2f_write_all(int fd, const void *buf, size_t n);

#endif
