/* b2f.c - the b2f command-line tool: dispatch to subcommands. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "b2_codec.h"
#include "b2_error.h"
#include "cli/cli.h"

#define B2FS_VERSION "0.1.0"

static const struct {
  const char *name;
  int (*fn)(int, char **);
  const char *help;
} commands[] = {
    {"info", b2f_info, "info [--json] PATH      describe a frame"},
    {"inspect", b2f_info, "inspect [--json] PATH   the same as info"},
    {"cat", b2f_cat, "cat [--c-order|--npy] PATH  write the content to stdout\n"
                     "  cat [--c-order|--npy|--raw] STORE KEY  the same for a value of a store"},
    {"ls", b2f_ls, "ls [-l] STORE|DIR       list a store's keys, or DIR as the mount shows it"},
    {"verify", b2f_verify, "verify PATH...          check conformance, decode everything"},
    {"pack", b2f_pack, "pack [OPTIONS] IN OUT   compress a plain file into a frame"},
    {"unpack", b2f_unpack, "unpack [--npy|--c-order|--raw] IN OUT\n"
                           "                          write a frame's content to a plain file (.npy when OUT ends so)"},
    {"compact", b2f_compact, "compact PATH...         reclaim the dead space of frames"},
    {"scrub", b2f_scrub, "scrub [-q] DIR...       report every damaged chunk of the frames in trees"},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *out) {
  fprintf(out, "usage: b2f COMMAND [OPTIONS] ARGS\n\ncommands:\n");
  for (size_t i = 0; i < NCOMMANDS; i++) fprintf(out, "  %s\n", commands[i].help);
  fprintf(out, "\nb2f --version prints the version.\n");
}

int b2f_report(const char *path, int code) {
  const char *d = b2_last_detail();
  fprintf(stderr, "b2f: %s: %s\n", path, d && *d ? d : b2_strerror(code));
  return 1;
}

int b2f_usage_error(const char *cmd, const char *msg) {
  fprintf(stderr, "b2f %s: %s (see b2f --help)\n", cmd, msg);
  return 2;
}

int b2f_flag_and_operand(const char *cmd, int argc, char **argv, const char *flag, int *on,
                         const char *what, const char **operand) {
  char msg[64];
  *operand = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], flag)) {
      *on = 1;
    } else if (argv[i][0] == '-' && argv[i][1]) {
      return b2f_usage_error(cmd, "unknown option");
    } else if (!*operand) {
      *operand = argv[i];
    } else {
      snprintf(msg, sizeof msg, "one %s only", what);
      return b2f_usage_error(cmd, msg);
    }
  }
  if (*operand) return 0;
  snprintf(msg, sizeof msg, "missing %s", what);
  return b2f_usage_error(cmd, msg);
}

int b2f_write_all(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(argv[1], "--version")) {
    printf("b2f %s\nzfp codecs: %s\n", B2FS_VERSION, b2_zfp_available() ? "yes (libzfp)" : "no");
    return 0;
  }
  for (size_t i = 0; i < NCOMMANDS; i++)
    if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "b2f: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
