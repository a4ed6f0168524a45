/*
 * zip.c - the central directory of a zip archive (.b2z stores), read to
 * find where each member's bytes lie so that its frame can be read in
 * place.  Only what that needs: the end record (zip64 too), the central
 * entries, and each member's local header (whose name and extra field
 * lengths may differ from the central ones).  Every count, size and
 * offset is checked against the file; nothing is decompressed.
 */
#include <stdlib.h>
#include <string.h>

#include "b2_error.h"
#include "b2_frame.h"
#include "common/fileio.h"
#include "common/util.h"
#include "store/store_impl.h"

#define EOCD_SIG 0x06054b50u
#define EOCD_LEN 22
#define LOC64_SIG 0x07064b50u
#define LOC64_LEN 20
#define EOCD64_SIG 0x06064b50u
#define EOCD64_LEN 56
#define CEN_SIG 0x02014b50u
#define CEN_LEN 46
#define LOC_SIG 0x04034b50u
#define LOC_LEN 30
#define MAX_COMMENT 65535

typedef struct cdir {
  int64_t pos;      /* where the central directory really is */
  int64_t size;
  int64_t count;
  int64_t shift;    /* bytes prepended to the archive (offsets move) */
} cdir;

/* The end record: search the last 22 + 65535 bytes backwards. */
static int find_end(int fd, int64_t size, cdir *d) {
  if (size < EOCD_LEN)
    return b2_fail(B2_E_FORMAT, "zip: %lld bytes, too short for an archive",
                   (long long)size);
  int64_t span = B2_MIN(size, (int64_t)EOCD_LEN + MAX_COMMENT);
  uint8_t *tail = malloc((size_t)span);
  if (!tail) return b2_fail(B2_E_NOMEM, "out of memory");
  int rc = b2_io_pread(fd, tail, (size_t)span, size - span);
  if (rc < 0) {
    free(tail);
    return b2_context(rc, "zip: end record");
  }
  int64_t at = -1;
  for (int64_t i = span - EOCD_LEN; i >= 0; i--)
    if (b2_le32(tail + i) == EOCD_SIG &&
        i + EOCD_LEN + b2_le16(tail + i + 20) <= span) {
      at = i;
      break;
    }
  if (at < 0) {
    free(tail);
    return b2_fail(B2_E_FORMAT, "zip: no end of central directory record "
                   "(not a zip archive, or truncated)");
  }
  const uint8_t *r = tail + at;
  int64_t eocd = size - span + at;
  uint16_t disk = b2_le16(r + 4), cdisk = b2_le16(r + 6);
  uint16_t nthis = b2_le16(r + 8), ntotal = b2_le16(r + 10);
  uint32_t csize = b2_le32(r + 12), coff = b2_le32(r + 16);
  d->count = ntotal;
  d->size = csize;
  int64_t off = coff, cd_end = eocd;
  int zip64 = 0;
  if (eocd >= LOC64_LEN) {
    uint8_t loc[LOC64_LEN];
    rc = b2_io_pread(fd, loc, sizeof loc, eocd - LOC64_LEN);
    if (rc < 0) {
      free(tail);
      return b2_context(rc, "zip: zip64 locator");
    }
    if (b2_le32(loc) == LOC64_SIG) {
      zip64 = 1;
      uint64_t e64 = b2_le64(loc + 8);
      /* The zip64 end record sits just before the locator (shifted by
       * prepended bytes like everything else). */
      int64_t e64pos = eocd - LOC64_LEN - EOCD64_LEN;
      uint8_t rec[EOCD64_LEN];
      if (e64pos < 0 || e64 > (uint64_t)e64pos) {
        free(tail);
        return b2_fail(B2_E_FORMAT, "zip: zip64 end record at %llu is not "
                       "within the file", (unsigned long long)e64);
      }
      rc = b2_io_pread(fd, rec, sizeof rec, e64pos);
      if (rc < 0 || b2_le32(rec) != EOCD64_SIG) {
        free(tail);
        return rc < 0 ? b2_context(rc, "zip: zip64 end record")
                      : b2_fail(B2_E_FORMAT, "zip: bad zip64 end record");
      }
      disk = (uint16_t)(b2_le32(rec + 16) != 0);
      cdisk = (uint16_t)(b2_le32(rec + 20) != 0);
      uint64_t c = b2_le64(rec + 32), s = b2_le64(rec + 40), o = b2_le64(rec + 48);
      if (c > (uint64_t)size || s > (uint64_t)size || o > (uint64_t)size) {
        free(tail);
        return b2_fail(B2_E_FORMAT, "zip: zip64 end record: count, size or "
                       "offset beyond the file");
      }
      d->count = (int64_t)c;
      d->size = (int64_t)s;
      off = (int64_t)o;
      cd_end = e64pos;
      nthis = ntotal = 0;
    }
  }
  free(tail);
  if (disk != 0 || cdisk != 0 || (!zip64 && nthis != ntotal))
    return b2_fail(B2_E_UNSUPPORTED, "zip: archives split over several "
                   "disks are not supported");
  if (d->size > cd_end)
    return b2_fail(B2_E_FORMAT, "zip: central directory of %lld bytes does "
                   "not fit before its end record at %lld",
                   (long long)d->size, (long long)cd_end);
  d->pos = cd_end - d->size;
  d->shift = d->pos - off;
  if (d->shift < 0)
    return b2_fail(B2_E_FORMAT, "zip: central directory offset %lld is past "
                   "where it ends (%lld)", (long long)off, (long long)d->pos);
  if (d->size > B2_STORE_MAX_CDIR)
    return b2_fail(B2_E_LIMIT, "zip: central directory of %lld bytes (at "
                   "most %lld)", (long long)d->size,
                   (long long)B2_STORE_MAX_CDIR);
  if (d->count > d->size / CEN_LEN)
    return b2_fail(B2_E_FORMAT, "zip: %lld entries cannot fit a central "
                   "directory of %lld bytes", (long long)d->count,
                   (long long)d->size);
  return 0;
}

/* zip64 extended information (extra field id 1) of a central entry: the
 * fields whose 32-bit value is all ones follow, in order. */
static int zip64_extra(const uint8_t *x, size_t len, uint64_t *usize,
                       uint64_t *csize, uint64_t *lho, const char *name) {
  size_t p = 0;
  while (p + 4 <= len) {
    uint16_t id = b2_le16(x + p), sz = b2_le16(x + p + 2);
    if (p + 4 + sz > len) break;
    if (id == 1) {
      const uint8_t *v = x + p + 4;
      size_t q = 0;
      uint64_t *want[3] = {usize, csize, lho};
      for (int k = 0; k < 3; k++) {
        if (*want[k] != 0xffffffffu) continue;
        if (q + 8 > sz)
          return b2_fail(B2_E_FORMAT, "zip: member %s: zip64 field too "
                         "short", name);
        *want[k] = b2_le64(v + q);
        q += 8;
      }
      return 0;
    }
    p += 4 + (size_t)sz;
  }
  if (*usize == 0xffffffffu || *csize == 0xffffffffu || *lho == 0xffffffffu)
    return b2_fail(B2_E_FORMAT, "zip: member %s: sizes need a zip64 field "
                   "that is missing", name);
  return 0;
}

void b2_zip_free(b2_zip_member *m, int64_t n) {
  if (!m) return;
  for (int64_t i = 0; i < n; i++) free(m[i].name);
  free(m);
}

static int parse_entries(int fd, const cdir *d, const uint8_t *cd,
                         b2_zip_member *m, int64_t *got) {
  size_t p = 0, cdlen = (size_t)d->size;
  for (int64_t i = 0; i < d->count; i++) {
    if (cdlen - p < CEN_LEN || b2_le32(cd + p) != CEN_SIG)
      return b2_fail(B2_E_FORMAT, "zip: central directory entry %lld is "
                     "damaged", (long long)i);
    const uint8_t *c = cd + p;
    uint16_t flags = b2_le16(c + 8), method = b2_le16(c + 10);
    uint64_t csize = b2_le32(c + 20), usize = b2_le32(c + 24);
    size_t nlen = b2_le16(c + 28), xlen = b2_le16(c + 30), clen = b2_le16(c + 32);
    uint64_t lho = b2_le32(c + 42);
    if (cdlen - p - CEN_LEN < nlen + xlen + clen)
      return b2_fail(B2_E_FORMAT, "zip: central directory entry %lld "
                     "overruns the directory", (long long)i);
    if (nlen == 0 || memchr(c + CEN_LEN, 0, nlen))
      return b2_fail(B2_E_FORMAT, "zip: central directory entry %lld has an "
                     "empty name or one with a NUL byte", (long long)i);
    char *name = malloc(nlen + 1);
    if (!name) return b2_fail(B2_E_NOMEM, "out of memory");
    memcpy(name, c + CEN_LEN, nlen);
    name[nlen] = 0;
    m[i].name = name;
    *got = i + 1;
    int rc = zip64_extra(c + CEN_LEN + nlen, xlen, &usize, &csize, &lho, name);
    if (rc < 0) return rc;
    p += CEN_LEN + nlen + xlen + clen;
    m[i].method = method;
    m[i].stored = method == 0 && !(flags & 1);
    if (m[i].stored && csize != usize)
      return b2_fail(B2_E_FORMAT, "zip: member %s is stored with a size of "
                     "%llu but says %llu uncompressed", name,
                     (unsigned long long)csize, (unsigned long long)usize);
    /* The local header, which precedes the data: its own name and extra
     * lengths decide where the data starts. */
    int64_t loc = (int64_t)lho + d->shift;
    if (lho > (uint64_t)d->pos || loc > d->pos - LOC_LEN)
      return b2_fail(B2_E_FORMAT, "zip: member %s: local header offset %llu "
                     "is past the central directory", name,
                     (unsigned long long)lho);
    uint8_t lh[LOC_LEN];
    rc = b2_io_pread(fd, lh, sizeof lh, loc);
    if (rc < 0) return b2_context(rc, "zip: member %s: local header", name);
    if (b2_le32(lh) != LOC_SIG)
      return b2_fail(B2_E_FORMAT, "zip: member %s: no local header at %lld",
                     name, (long long)loc);
    int64_t data = loc + LOC_LEN + b2_le16(lh + 26) + b2_le16(lh + 28);
    if (data > d->pos || csize > (uint64_t)(d->pos - data))
      return b2_fail(B2_E_FORMAT, "zip: member %s: %llu bytes at %lld "
                     "overrun the central directory at %lld", name,
                     (unsigned long long)csize, (long long)data,
                     (long long)d->pos);
    m[i].offset = data;
    m[i].length = (int64_t)csize;
  }
  return 0;
}

int b2_zip_read(int fd, int64_t size, b2_zip_member **out, int64_t *n) {
  *out = NULL;
  *n = 0;
  cdir d = {0};
  int rc = find_end(fd, size, &d);
  if (rc < 0) return rc;
  uint8_t *cd = malloc(d.size ? (size_t)d.size : 1);
  b2_zip_member *m = calloc(d.count ? (size_t)d.count : 1, sizeof *m);
  if (!cd || !m) {
    free(cd);
    free(m);
    return b2_fail(B2_E_NOMEM, "out of memory for the zip directory");
  }
  rc = b2_io_pread(fd, cd, (size_t)d.size, d.pos);
  if (rc < 0) rc = b2_context(rc, "zip: central directory");
  int64_t got = 0;
  if (!rc) rc = parse_entries(fd, &d, cd, m, &got);
  free(cd);
  if (rc < 0) {
    b2_zip_free(m, got);
    return rc;
  }
  *out = m;
  *n = d.count;
  return 0;
}
