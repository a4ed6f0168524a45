/*
 * b2_error.h - error codes shared by every layer of the b2fs engine.
 *
 * Every engine function that can fail returns a negative B2_E_* code (or a
 * negative value of the same meaning through a wider type).  Zero or a
 * positive count means success.  When a function fails it also records a
 * one-line human-readable detail on the calling thread ("chunk 3: stream 2
 * overruns its block"), which b2_last_detail() returns until the next error
 * on that thread.  Tools print "<file>: <detail>".
 */
#ifndef B2_ERROR_H
#define B2_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

enum b2_error {
  B2_OK = 0,
  B2_E_IO = -1,          /* an operating-system I/O call failed */
  B2_E_NOMEM = -2,       /* out of memory */
  B2_E_INVAL = -3,       /* a bad argument from the caller */
  B2_E_FORMAT = -4,      /* data is damaged or not in the expected format */
  B2_E_TRUNCATED = -5,   /* data ends before a structure it declares */
  B2_E_UNSUPPORTED = -6, /* well formed but not supported (codec, filter, version) */
  B2_E_CODEC = -7,       /* a codec rejected its compressed stream */
  B2_E_LIMIT = -8,       /* a size or count is beyond what b2fs accepts */
  B2_E_RANGE = -9,       /* an index or offset is out of range */
  B2_E_NOENT = -10,      /* no such file, metalayer or entry */
  B2_E_EXIST = -11,      /* already exists */
  B2_E_NOSPC = -12,      /* no space left on the device */
  B2_E_ROFS = -13,       /* the object is read-only */
  B2_E_PERM = -14,       /* permission denied */
  B2_E_BUSY = -15,       /* resource busy */
  B2_E_CHECKSUM = -16,   /* stored checksum does not match the data */
  B2_E_NAMETOOLONG = -17, /* a name or path is longer than the system takes */
  B2_E_XDEV = -18,       /* a move that must copy instead (another kind of entry) */
  B2_E_NOTDIR = -19,     /* a directory was needed */
  B2_E_ISDIR = -20,      /* a directory where it cannot be */
  B2_E_STALE = -21,      /* another program changed the frame since it was opened */
  B2_E_NOTEMPTY = -22,   /* a directory (a store's group) still holds entries */
  B2_E_NOFILES = -23,    /* no file descriptor left (EMFILE, ENFILE) */
  B2_E_LAST = -23
};

/* Short English name of a code ("damaged or malformed data"). Never NULL. */
const char *b2_strerror(int code);

/* Detail recorded by the last failure on this thread ("" if none). */
const char *b2_last_detail(void);

/* Record a printf-style detail for the calling thread and return `code`.
 * Used by the engine as `return b2_fail(B2_E_FORMAT, "bad magic");`. */
int b2_fail(int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Prefix the current thread's detail with a context string, keeping the
 * code: `return b2_context(rc, "chunk %lld", i);` gives "chunk 3: <old>". */
int b2_context(int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Map an errno value to a B2_E_* code and back (for the FUSE adapter). */
int b2_from_errno(int err);
int b2_to_errno(int code);

#ifdef __cplusplus
}
#endif
#endif /* B2_ERROR_H */
