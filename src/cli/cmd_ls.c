/* cmd_ls.c - `b2f ls [-l] DIR`: a SOURCE directory as the mount shows it,
 * through the namespace layer (b2_ns.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "b2_error.h"
#include "b2_ns.h"
#include "cli/cli.h"

static const char *kind_of(const b2_ns_entry *e) {
  if (e->frame) {
    int k = b2_ns_name_kind(e->name, NULL);
    return k == B2_NS_NPY ? "array" : k == B2_NS_STORE ? "store" : "frame";
  }
  switch (e->type) {
  case DT_DIR: return "dir";
  case DT_REG: return "file";
  case DT_LNK: return "link";
  default: return "other";
  }
}

int b2f_ls_dir(const char *path, int lng) {
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return b2f_report(path, b2_fail(b2_from_errno(errno), "%s", strerror(errno)));
  b2_ns_list l = {NULL, 0};
  int rc = b2_ns_list_load(fd, &l);
  close(fd);
  if (rc < 0) return b2f_report(path, rc);
  for (size_t i = 0; i < l.n; i++) {
    const b2_ns_entry *e = &l.e[i];
    if (!lng) {
      printf("%s\n", e->shown);
      continue;
    }
    printf("%-6s %s", kind_of(e), e->shown);
    if (strcmp(e->shown, e->name) != 0) printf("  (%s)", e->name);
    printf("\n");
  }
  b2_ns_list_free(&l);
  return fflush(stdout) == 0 ? 0 : 1;
}
