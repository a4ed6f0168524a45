/* cli.h - shared declarations of the b2f subcommands. */
#ifndef B2_CLI_H
#define B2_CLI_H

#include <stdio.h>

/* Each subcommand: argc/argv start at the subcommand name.  Returns the
 * process exit status. */
int b2f_info(int argc, char **argv);
int b2f_cat(int argc, char **argv);
int b2f_verify(int argc, char **argv);
int b2f_pack(int argc, char **argv);
int b2f_unpack(int argc, char **argv);
int b2f_compact(int argc, char **argv);

/* Write the content of the frame at `path` in `view` (B2_VIEW_*) to fd;
 * returns the exit status (errors reported on stderr). */
int b2f_copy_content(const char *path, int view, int fd, int show_progress);

/* Print "b2f: PATH: <detail of code>" on stderr; returns 1. */
int b2f_report(const char *path, int code);

/* Print a usage error for `cmd` and return 2. */
int b2f_usage_error(const char *cmd, const char *msg);

/* Write all of buf to fd; 0 or -1 with errno. */
int b2f_write_all(int fd, const void *buf, size_t n);

#endif
