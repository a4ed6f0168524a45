/*
 * log.c - the daemon's one-line messages: stderr while in the foreground,
 * syslog once daemonized (stderr is /dev/null then).
 */
#include <stdarg.h>
#include <stdio.h>
#include <syslog.h>

#include "b2fs.h"

static int to_stderr = 1;

void b2fs_log_init(int foreground) {
  to_stderr = foreground;
  if (!foreground) openlog("b2fs", LOG_PID, LOG_DAEMON);
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
