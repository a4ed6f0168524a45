/*
 * log.c - the daemon's one-line messages: stderr while in the foreground,
 * syslog once daemonized (stderr is /dev/null then), libfuse's included.
 */
#include <stdarg.h>
#include <stdio.h>
#include <syslog.h>

#include "b2fs.h"

static int to_stderr = 1;

/* libfuse's own messages follow ours to syslog once daemonized. */
static void fuse_to_syslog(enum fuse_log_level level, const char *fmt, va_list ap) {
  vsyslog((int)level, fmt, ap);
}

void b2fs_log_init(int foreground) {
  to_stderr = foreground;
  if (!foreground) {
    openlog("b2fs", LOG_PID, LOG_DAEMON);
    fuse_set_log_func(fuse_to_syslog);
  }
}

void b2fs_log(const char *fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (to_stderr)
    fprintf(stderr, "b2fs: %s\n", line);
  else
    syslog(LOG_ERR, "%s", line);
}
