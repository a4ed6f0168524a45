/* error.c - error names and the per-thread detail message. */
#include "b2_error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define DETAIL_MAX 512

static _Thread_local char detail[DETAIL_MAX];

static const char *const names[] = {
    "success",
    "I/O error",
    "out of memory",
    "invalid argument",
    "damaged or malformed data",
    "truncated data",
    "unsupported feature",
    "codec error",
    "size limit exceeded",
    "out of range",
    "not found",
    "already exists",
    "no space left on device",
    "read-only",
    "permission denied",
    "resource busy",
    "checksum mismatch",
    "name too long",
    "cross-kind move",
    "not a directory",
    "is a directory",
    "changed by another program",
    "not empty",
    "too many open files",
};

const char *b2_strerror(int code) {
  if (code > 0 || code < B2_E_LAST) return "unknown error";
  return names[-code];
}

const char *b2_last_detail(void) { return detail; }

int b2_fail(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  return code;
}

int b2_context(int code, const char *fmt, ...) {
  char prefix[DETAIL_MAX];
  char old[DETAIL_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  memcpy(old, detail, sizeof old);
  /* "prefix: old", cut to the buffer: the start says the most. */
  const char *parts[3] = {prefix, ": ", old[0] ? old : b2_strerror(code)};
  size_t len = 0;
  for (int k = 0; k < 3; k++) {
    size_t m = strlen(parts[k]);
    if (m > sizeof detail - 1 - len) m = sizeof detail - 1 - len;
    memcpy(detail + len, parts[k], m);
    len += m;
  }
  detail[len] = 0;
  return code;
}

static const struct {
  int err, code;
} errmap[] = {
    {EIO, B2_E_IO},       {ENOMEM, B2_E_NOMEM},   {EINVAL, B2_E_INVAL},
    {ERANGE, B2_E_RANGE}, {ENOENT, B2_E_NOENT},   {EEXIST, B2_E_EXIST},
    {ENOSPC, B2_E_NOSPC}, {EDQUOT, B2_E_NOSPC},   {EROFS, B2_E_ROFS},
    {EACCES, B2_E_PERM},  {EPERM, B2_E_PERM},     {EBUSY, B2_E_BUSY},  {ESTALE, B2_E_STALE},
    {EFBIG, B2_E_LIMIT},  {ENOTSUP, B2_E_UNSUPPORTED},
    {ENAMETOOLONG, B2_E_NAMETOOLONG}, {EXDEV, B2_E_XDEV},
    {ENOTDIR, B2_E_NOTDIR}, {EISDIR, B2_E_ISDIR}, {ENOTEMPTY, B2_E_NOTEMPTY},
    {EMFILE, B2_E_NOFILES}, {ENFILE, B2_E_NOFILES},
};

int b2_from_errno(int err) {
  for (size_t i = 0; i < sizeof errmap / sizeof errmap[0]; i++)
    if (errmap[i].err == err) return errmap[i].code;
  return B2_E_IO;
}

int b2_to_errno(int code) {
  if (code >= 0) return 0;
  for (size_t i = 0; i < sizeof errmap / sizeof errmap[0]; i++)
    if (errmap[i].code == code) return errmap[i].err;
  return EIO; /* damaged data, codec failures, checksum mismatches */
}
