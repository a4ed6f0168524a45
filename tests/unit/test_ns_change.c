/* test_ns_change.c - the namespace layer's changes (src/ns/change.c) and
 * nodes (src/ns/node.c) on a real directory: removals set aside or not,
 * renames over an entry in use, and a frame open for writing that stays
 * valid while its entry is renamed, moved to another directory and
 * rewritten by the engine (an empty frame's commit writes a new file by
 * name). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "b2_error.h"
#include "b2_file.h"
#include "b2_ns.h"
#include "t.h"

static char root[64];

static int mkroot(void) {
  snprintf(root, sizeof root, "/tmp/b2fs-test-ns-XXXXXX");
  if (!mkdtemp(root)) return -1;
  return open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
}

static int rm_entry(int dfd, const char *name, unsigned char type, void *arg) {
  (void)arg;
  if (type == DT_DIR) {
    b2_ns_each_entry(dfd, name, rm_entry, NULL);
    return unlinkat(dfd, name, AT_REMOVEDIR) < 0 ? 0 : 0;
  }
  unlinkat(dfd, name, 0);
  return 0;
}

static void rmroot(int fd) {
  int d = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d >= 0) {
    b2_ns_each_entry(d, ".", rm_entry, NULL);
    close(d);
  }
  rmdir(root);
  close(fd);
}

static int exists(int dfd, const char *name) {
  struct stat st;
  return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* The first bytes of a frame (b2_frame_starts_like): a file under a frame
 * suffix that begins so is a frame (here a damaged one); put writes them
 * before the data of such names, head_of leaves them out. */
#define STUB "\x9e\xa8"
#define STUB_LEN (sizeof STUB - 1)

static void put(int dfd, const char *name, const char *data) {
  int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  CHECK(fd >= 0);
  if (fd < 0) return;
  int k = b2_ns_name_kind(name, NULL);
  if (k == B2_NS_LOGICAL || k == B2_NS_NPY) CHECK_EQ(write(fd, STUB, STUB_LEN), (long long)STUB_LEN);
  CHECK_EQ(write(fd, data, strlen(data)), (long long)strlen(data));
  close(fd);
}

/* Number of entries of dfd whose name starts with prefix. */
static int count_prefixed(int dfd, const char *prefix) {
  int d = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), n = 0;
  DIR *dir = d >= 0 ? fdopendir(d) : NULL;
  struct dirent *e;
  while (dir && (e = readdir(dir)))
    if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++;
  if (dir) closedir(dir);
  return n;
}

static void test_remove(void) {
  int r = mkroot();
  CHECK(r >= 0);
  if (r < 0) return;
  struct stat st;
  char hidden[B2_NS_HIDDEN_MAX];
  put(r, "a.b2frame", "x");
  fstatat(r, "a.b2frame", &st, AT_SYMLINK_NOFOLLOW);
  CHECK_EQ(b2_ns_remove(r, "a.b2frame", B2_NS_LOGICAL, &st, 0, hidden, sizeof hidden), 0);
  CHECK(!exists(r, "a.b2frame"));
  /* kept: set aside under a hidden name, which is never shown */
  put(r, "b.b2frame", "y");
  fstatat(r, "b.b2frame", &st, AT_SYMLINK_NOFOLLOW);
  CHECK_EQ(b2_ns_remove(r, "b.b2frame", B2_NS_LOGICAL, &st, 1, hidden, sizeof hidden), 1);
  CHECK(!exists(r, "b.b2frame"));
  CHECK(exists(r, hidden));
  CHECK(b2_ns_name_hidden(hidden));
  CHECK_EQ(b2_ns_delete(r, hidden), 0);
  CHECK(!exists(r, hidden));
  /* one name of a linked file: a plain unlink when not kept */
  put(r, "c.b2frame", "z");
  CHECK_EQ(linkat(r, "c.b2frame", r, "d.b2frame", 0), 0);
  fstatat(r, "c.b2frame", &st, AT_SYMLINK_NOFOLLOW);
  CHECK_EQ(b2_ns_remove(r, "c.b2frame", B2_NS_LOGICAL, &st, 0, hidden, sizeof hidden), 0);
  CHECK(!exists(r, "c.b2frame") && exists(r, "d.b2frame"));
  CHECK_EQ(count_prefixed(r, B2_NS_GONE_PREFIX), 0);
  /* kept (a writer rewrites it by that name): one more link, hidden */
  CHECK_EQ(linkat(r, "d.b2frame", r, "e.b2frame", 0), 0);
  fstatat(r, "e.b2frame", &st, AT_SYMLINK_NOFOLLOW);
  CHECK_EQ(b2_ns_remove(r, "e.b2frame", B2_NS_LOGICAL, &st, 1, hidden, sizeof hidden), 1);
  struct stat hs, ds;
  CHECK(!exists(r, "e.b2frame"));
  CHECK(fstatat(r, hidden, &hs, AT_SYMLINK_NOFOLLOW) == 0 &&
        fstatat(r, "d.b2frame", &ds, AT_SYMLINK_NOFOLLOW) == 0 && hs.st_ino == ds.st_ino &&
        ds.st_nlink == 2);
  CHECK_EQ(b2_ns_delete(r, hidden), 0);
  CHECK(fstatat(r, "d.b2frame", &ds, AT_SYMLINK_NOFOLLOW) == 0 && ds.st_nlink == 1);
  CHECK_EQ(count_prefixed(r, B2_NS_GONE_PREFIX), 0);
  /* the sidecar of the name removed goes, the other name's stays, linked or not */
  CHECK_EQ(linkat(r, "d.b2frame", r, "f.b2frame", 0), 0);
  put(r, "d.b2frame.b2lock", "");
  put(r, "f.b2frame.b2lock", "");
  fstatat(r, "f.b2frame", &st, AT_SYMLINK_NOFOLLOW);
  CHECK_EQ(b2_ns_remove(r, "f.b2frame", B2_NS_LOGICAL, &st, 0, hidden, sizeof hidden), 0);
  CHECK(!exists(r, "f.b2frame.b2lock") && exists(r, "d.b2frame.b2lock"));
  fstatat(r, "d.b2frame", &st, AT_SYMLINK_NOFOLLOW);
  CHECK_EQ(b2_ns_remove(r, "d.b2frame", B2_NS_LOGICAL, &st, 0, hidden, sizeof hidden), 0);
  CHECK(!exists(r, "d.b2frame") && !exists(r, "d.b2frame.b2lock"));
  /* a failed call keeps its own errno */
  CHECK(b2_ns_delete(r, "nothing") < 0);
  CHECK_EQ(b2_ns_last_errno(), ENOENT);
  rmroot(r);
}

static void test_rename(void) {
  int r = mkroot();
  CHECK(r >= 0);
  if (r < 0) return;
  put(r, "a.b2frame", "new");
  put(r, "b.b2frame", "old");
  b2_ns_move m;
  memset(&m, 0, sizeof m);
  m.pfd = m.qfd = r;
  /* b in use: a file replaced under its own name keeps a hidden link */
  CHECK_EQ(b2_ns_plan_rename(&m, "a", "b", 0), 0);
  CHECK_EQ(b2_ns_rename(&m, 1), 0);
  CHECK(m.linked && m.kept && !exists(r, "a.b2frame"));
  CHECK(m.note[0] == 0);
  char buf[8] = {0};
  int fd = openat(r, m.hidden, O_RDONLY | O_CLOEXEC);
  CHECK(fd >= 0 && read(fd, buf, sizeof buf) == 3 + STUB_LEN &&
        memcmp(buf, STUB "old", 3 + STUB_LEN) == 0);
  if (fd >= 0) close(fd);
  CHECK_EQ(b2_ns_delete(r, m.hidden), 0);
  /* not in use: replaced in one step, nothing hidden left */
  put(r, "c.b2frame", "c");
  memset(&m, 0, sizeof m);
  m.pfd = m.qfd = r;
  CHECK_EQ(b2_ns_plan_rename(&m, "c", "b", 0), 0);
  CHECK_EQ(b2_ns_rename(&m, 0), 0);
  CHECK(!m.kept && !m.linked);
  CHECK_EQ(count_prefixed(r, B2_NS_GONE_PREFIX), 0);
  /* a rename that fails (over a non-empty directory) leaves both entries */
  CHECK_EQ(mkdirat(r, "d", 0755), 0);
  CHECK_EQ(mkdirat(r, "e", 0755), 0);
  put(r, "e/x", "1");
  memset(&m, 0, sizeof m);
  m.pfd = m.qfd = r;
  CHECK_EQ(b2_ns_plan_rename(&m, "d", "e", 0), 0);
  CHECK(b2_ns_rename(&m, 0) < 0);
  CHECK(b2_ns_last_errno() == ENOTEMPTY || b2_ns_last_errno() == EEXIST);
  CHECK(exists(r, "d") && exists(r, "e/x"));
  rmroot(r);
}

/* Plan and carry out the rename of shown `name` (0, or the failed step's code). */
static int move(int pfd, int qfd, const char *name, const char *newname) {
  b2_ns_move m;
  memset(&m, 0, sizeof m);
  m.pfd = pfd;
  m.qfd = qfd;
  int rc = b2_ns_plan_rename(&m, name, newname, 0);
  return rc == 0 ? b2_ns_rename(&m, 0) : -1000 + rc;
}

/* A frame file's `.b2lock` sidecar follows a rename; a sidecar the new
 * name has already stays (another process may hold it) and the moved
 * frame's own goes.  A plain file's look-alike is not touched. */
static void test_rename_sidecar(void) {
  int r = mkroot();
  CHECK(r >= 0);
  if (r < 0) return;
  struct stat before, after;
  put(r, "a.b2frame", "a");
  put(r, "a.b2frame.b2lock", "");
  CHECK_EQ(fstatat(r, "a.b2frame.b2lock", &before, AT_SYMLINK_NOFOLLOW), 0);
  CHECK_EQ(move(r, r, "a", "b"), 0);
  CHECK(!exists(r, "a.b2frame") && !exists(r, "a.b2frame.b2lock"));
  CHECK(fstatat(r, "b.b2frame.b2lock", &after, AT_SYMLINK_NOFOLLOW) == 0 &&
        after.st_ino == before.st_ino);
  /* over a frame with a sidecar of its own: that one stays */
  put(r, "c.b2frame", "c");
  put(r, "c.b2frame.b2lock", "");
  CHECK_EQ(fstatat(r, "b.b2frame.b2lock", &before, AT_SYMLINK_NOFOLLOW), 0);
  CHECK_EQ(move(r, r, "c", "b"), 0);
  CHECK(!exists(r, "c.b2frame") && !exists(r, "c.b2frame.b2lock"));
  CHECK(fstatat(r, "b.b2frame.b2lock", &after, AT_SYMLINK_NOFOLLOW) == 0 &&
        after.st_ino == before.st_ino);
  /* into another directory */
  CHECK_EQ(mkdirat(r, "sub", 0755), 0);
  int sub = openat(r, "sub", O_PATH | O_DIRECTORY | O_CLOEXEC);
  CHECK(sub >= 0);
  CHECK_EQ(move(r, sub, "b", "e"), 0);
  CHECK(!exists(r, "b.b2frame.b2lock") && exists(sub, "e.b2frame") &&
        exists(sub, "e.b2frame.b2lock"));
  if (sub >= 0) close(sub);
  /* a plain file: a name ending in .b2lock beside it is not its sidecar */
  put(r, "p", "p");
  put(r, "p.b2lock", "");
  CHECK_EQ(move(r, r, "p", "q"), 0);
  CHECK(exists(r, "q") && exists(r, "p.b2lock") && !exists(r, "q.b2lock"));
  rmroot(r);
}

/* Plan and carry out the exchange of shown `name` and `newname` of dfd. */
static int swap(int dfd, const char *name, const char *newname) {
  b2_ns_move m;
  memset(&m, 0, sizeof m);
  m.pfd = m.qfd = dfd;
  int rc = b2_ns_plan_exchange(&m, name, newname);
  return rc == 0 ? b2_ns_exchange(&m) : rc;
}

/* Reads the first bytes of entry name (0-terminated into buf). */
static const char *head_of(int dfd, const char *name, char *buf, size_t cap) {
  buf[0] = 0;
  int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return buf;
  ssize_t n = read(fd, buf, cap - 1);
  buf[n > 0 ? n : 0] = 0;
  close(fd);
  if (n >= (ssize_t)STUB_LEN && !memcmp(buf, STUB, STUB_LEN)) memmove(buf, buf + STUB_LEN, (size_t)n - STUB_LEN + 1);
  return buf;
}

/* RENAME_EXCHANGE: two plain entries or two frames under one suffix swap
 * in SOURCE, frame files with their sidecars; a frame and a plain entry,
 * or frames under two suffixes, are refused (what the names show would
 * change) and left as they were. */
static void test_exchange(void) {
  int r = mkroot();
  CHECK(r >= 0);
  if (r < 0) return;
  char buf[16];
  put(r, "p", "P");
  put(r, "q", "Q");
  CHECK_EQ(swap(r, "p", "q"), 0);
  CHECK(!strcmp(head_of(r, "p", buf, sizeof buf), "Q") && !strcmp(head_of(r, "q", buf, sizeof buf), "P"));
  put(r, "a.b2frame", "A");
  put(r, "a.b2frame.b2lock", "la");
  put(r, "b.b2frame", "B");
  CHECK_EQ(swap(r, "a", "b"), 0); /* one sidecar: it goes with its frame */
  CHECK(!strcmp(head_of(r, "b.b2frame", buf, sizeof buf), "A") &&
        !strcmp(head_of(r, "b.b2frame.b2lock", buf, sizeof buf), "la") &&
        !exists(r, "a.b2frame.b2lock"));
  put(r, "a.b2frame.b2lock", "lb");
  CHECK_EQ(swap(r, "a", "b"), 0); /* two: they swap */
  CHECK(!strcmp(head_of(r, "a.b2frame", buf, sizeof buf), "A") &&
        !strcmp(head_of(r, "a.b2frame.b2lock", buf, sizeof buf), "la") &&
        !strcmp(head_of(r, "b.b2frame.b2lock", buf, sizeof buf), "lb"));
  /* refused, nothing changed */
  CHECK_EQ(swap(r, "a", "p"), B2_E_INVAL);
  put(r, "c.b2", "C");
  CHECK_EQ(swap(r, "a", "c"), B2_E_INVAL); /* .b2frame and .b2 */
  CHECK(!strcmp(head_of(r, "a.b2frame", buf, sizeof buf), "A") &&
        !strcmp(head_of(r, "p", buf, sizeof buf), "Q") && !strcmp(head_of(r, "c.b2", buf, sizeof buf), "C"));
  CHECK_EQ(swap(r, "a", "nothing"), B2_E_NOENT);
  CHECK_EQ(linkat(r, "q", r, "q2", 0), 0);
  b2_ns_move m;
  memset(&m, 0, sizeof m);
  m.pfd = m.qfd = r;
  CHECK_EQ(b2_ns_plan_exchange(&m, "q", "q2"), 1); /* one file: nothing to do */
  rmroot(r);
}

/* Read the whole logical content of frame `name` of dfd into buf. */
static ssize_t read_frame(b2_env *env, int dfd, const char *name, char *buf, size_t cap) {
  b2_file *f;
  if (b2_file_open_at(env, dfd, name, B2_VIEW_LOGICAL, B2_OPEN_RDONLY, &f) < 0) return -1;
  ssize_t n = b2_file_pread(f, buf, cap, 0);
  b2_file_close(f);
  return n;
}

/* An engine without the idle flusher and a fresh root directory: its fd,
 * or -1 (then nothing to free). */
static int setup(b2_env **env) {
  b2_env_opts o;
  b2_env_opts_default(&o);
  o.idle_ms = 0;
  CHECK_EQ(b2_env_create(&o, env), 0);
  int r = mkroot();
  CHECK(r >= 0);
  if (r < 0) b2_env_destroy(*env);
  return r;
}

/* The logical (or .npy) view of frame `name` of dfd equals want. */
static int view_is(b2_env *env, int dfd, const char *name, int view, const void *want, size_t len) {
  b2_file *f;
  if (b2_file_open_at(env, dfd, name, view, B2_OPEN_RDONLY, &f) < 0) return 0;
  char *got = malloc(len + 1);
  int same = got && b2_file_size(f) == (int64_t)len && b2_file_pread(f, got, len, 0) == (ssize_t)len &&
             memcmp(got, want, len) == 0;
  free(got);
  b2_file_close(f);
  return same;
}

/* A .npy file of 200 x 3 int32 as numpy.save writes it. */
#define NPY_LEN (128 + 2400)
static void make_npy(char *npy) {
  const char *dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (200, 3), }";
  size_t dl = strlen(dict);
  memcpy(npy, "\x93NUMPY\x01\x00\x76\x00", 10);
  memcpy(npy + 10, dict, dl);
  memset(npy + 10 + dl, ' ', 128 - 10 - dl - 1);
  npy[127] = '\n';
  for (int i = 0; i < 600; i++) memcpy(npy + 128 + 4 * i, &i, 4);
}

/* A frame renamed to a name of another kind (b2_ns_convert, then
 * b2_ns_plan_put and b2_ns_rename): a plain frame holding a .npy file to
 * a .npy name becomes the array, with the source's time and mode; back to
 * another name, the plain frame of the view's bytes; a plain frame that
 * holds no .npy file is not made anew, and nothing is left behind. */
static void test_convert(void) {
  b2_env *env;
  int r = setup(&env);
  if (r < 0) return;
  char npy[NPY_LEN];
  make_npy(npy);
  b2_file *f = NULL;
  CHECK_EQ(b2_file_create_at(env, r, "t.b2frame", NULL, &f), 0);
  if (!f) goto out;
  CHECK_EQ(b2_file_pwrite(f, npy, sizeof npy, 0), (ssize_t)sizeof npy);
  CHECK_EQ(b2_file_close(f), 0);
  struct timespec ts[2] = {{1000000, 5}, {1700000000, 123456789}};
  CHECK_EQ(utimensat(r, "t.b2frame", ts, 0), 0);
  CHECK_EQ(fchmodat(r, "t.b2frame", 0640, 0), 0);
  char tmp[B2_NS_HIDDEN_MAX];
  CHECK_EQ(b2_ns_convert(env, r, "t.b2frame", B2_NS_LOGICAL, r, tmp, sizeof tmp), 1);
  CHECK(b2_ns_name_hidden(tmp));
  CHECK(view_is(env, r, tmp, B2_VIEW_NPY, npy, sizeof npy));
  /* the sidecar its write session left (locking on) goes with it */
  char lk[B2_NS_HIDDEN_MAX + 8];
  snprintf(lk, sizeof lk, "%s.b2lock", tmp);
  put(r, lk, "");
  CHECK(view_is(env, r, tmp, B2_VIEW_CORDER, npy + 128, sizeof npy - 128));
  b2_ns_move m;
  memset(&m, 0, sizeof m);
  m.qfd = r;
  CHECK_EQ(b2_ns_plan_put(&m, tmp, B2_NS_NPY, "x.npy", 0), 0);
  CHECK(strcmp(m.target, "x.b2nd") == 0);
  CHECK_EQ(b2_ns_rename(&m, 0), 0);
  CHECK(!exists(r, lk) && exists(r, "x.b2nd.b2lock"));
  struct stat st;
  CHECK(fstatat(r, "x.b2nd", &st, 0) == 0 && st.st_mtim.tv_sec == 1700000000 &&
        st.st_mtim.tv_nsec == 123456789 && (st.st_mode & 07777) == 0640);
  CHECK(view_is(env, r, "x.b2nd", B2_VIEW_NPY, npy, sizeof npy));
  /* back to a name that is no .npy name: the plain frame of its bytes */
  CHECK_EQ(b2_ns_convert(env, r, "x.b2nd", B2_NS_NPY, r, tmp, sizeof tmp), 1);
  CHECK(view_is(env, r, tmp, B2_VIEW_LOGICAL, npy, sizeof npy));
  memset(&m, 0, sizeof m);
  m.qfd = r;
  CHECK_EQ(b2_ns_plan_put(&m, tmp, B2_NS_LOGICAL, "x.bak", 0), 0);
  CHECK_EQ(b2_ns_rename(&m, 0), 0);
  CHECK(view_is(env, r, "x.bak.b2frame", B2_VIEW_LOGICAL, npy, sizeof npy));
  /* no .npy file, or no array (Fortran order): nothing made, nothing left */
  CHECK_EQ(b2_file_create_at(env, r, "txt.b2frame", NULL, &f), 0);
  if (f) {
    CHECK_EQ(b2_file_pwrite(f, "plain text\n", 11, 0), 11);
    CHECK_EQ(b2_file_close(f), 0);
  }
  CHECK_EQ(b2_ns_convert(env, r, "txt.b2frame", B2_NS_LOGICAL, r, tmp, sizeof tmp), 0);
  memcpy(npy + 10 + 34, "True ", 5); /* 'fortran_order': True */
  CHECK_EQ(b2_file_create_at(env, r, "fo.b2frame", NULL, &f), 0);
  if (f) {
    CHECK_EQ(b2_file_pwrite(f, npy, sizeof npy, 0), (ssize_t)sizeof npy);
    CHECK_EQ(b2_file_close(f), 0);
  }
  CHECK_EQ(b2_ns_convert(env, r, "fo.b2frame", B2_NS_LOGICAL, r, tmp, sizeof tmp), 0);
  CHECK_EQ(count_prefixed(r, B2_NS_GONE_PREFIX), 0);
  CHECK_EQ(count_prefixed(r, "."), 2); /* "." and ".." alone: no hidden entry */
out:
  b2_env_destroy(env);
  rmroot(r);
}

/* A plain frame of n bytes of buf under name, through a node closed
 * again (as the daemon's writer leaves it): the node, or NULL. */
static b2_ns_node *kept(b2_env *env, int dfd, const char *name, const void *buf, size_t n) {
  b2_ns_node *node = NULL;
  CHECK_EQ(b2_ns_node_create(env, dfd, name, B2_NS_LOGICAL, NULL, &node), 0);
  if (!node) return NULL;
  CHECK_EQ(b2_file_pwrite(b2_ns_node_file(node), buf, n, 0), (ssize_t)n);
  CHECK_EQ(b2_ns_node_close_file(node, NULL), 0);
  return node;
}

/* A .npy file kept as its bytes (NAME.npy.b2frame) that holds a whole
 * array again at its writer's close becomes that array, NAME.b2nd, and
 * the node follows (b2_ns_node_rearray); bytes that are no such array
 * (short, one byte more, Fortran order), other names and hard-linked
 * files are left as they are.  b2_file_npy_is_array reads a header longer
 * than its first look (a structured dtype of 6000 fields, .npy 2.0). */
static void test_rearray(void) {
  b2_env *env;
  int r = setup(&env);
  if (r < 0) return;
  char npy[NPY_LEN], note[1024];
  make_npy(npy);
  b2_ns_node *n = kept(env, r, "k.npy.b2frame", npy, sizeof npy);
  if (!n) goto out;
  CHECK(b2_ns_node_kept_npy(n));
  CHECK_EQ(b2_ns_node_rearray(n, env, note, sizeof note), 1);
  CHECK(strcmp(b2_ns_node_name(n), "k.b2nd") == 0 && b2_ns_node_kind(n) == B2_NS_NPY);
  CHECK(!exists(r, "k.npy.b2frame") && !b2_ns_node_kept_npy(n) && note[0] == 0);
  CHECK(view_is(env, r, "k.b2nd", B2_VIEW_NPY, npy, sizeof npy));
  CHECK(view_is(env, r, "k.b2nd", B2_VIEW_CORDER, npy + 128, sizeof npy - 128));
  b2_ns_node_free(n);
  /* no such array: nothing changes */
  struct { const char *name; size_t len; } no[] = {
      {"short.npy.b2frame", sizeof npy - 1}, {"txt.b2frame", sizeof npy}, {"tiny.npy.b2frame", 6}};
  for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
    n = kept(env, r, no[i].name, npy, no[i].len);
    if (n) CHECK_EQ(b2_ns_node_rearray(n, env, note, sizeof note), 0);
    CHECK(n && strcmp(b2_ns_node_name(n), no[i].name) == 0 && exists(r, no[i].name));
    b2_ns_node_free(n);
  }
  char more[sizeof npy + 1];
  memcpy(more, npy, sizeof npy);
  more[sizeof npy] = 7;
  n = kept(env, r, "more.npy.b2frame", more, sizeof more);
  if (n) CHECK_EQ(b2_ns_node_rearray(n, env, note, sizeof note), 0);
  b2_ns_node_free(n);
  memcpy(npy + 10 + 34, "True ", 5); /* 'fortran_order': True */
  n = kept(env, r, "fo.npy.b2frame", npy, sizeof npy);
  if (n) CHECK_EQ(b2_ns_node_rearray(n, env, note, sizeof note), 0);
  b2_ns_node_free(n);
  memcpy(npy + 10 + 34, "False", 5);
  n = kept(env, r, "ln.npy.b2frame", npy, sizeof npy);
  CHECK_EQ(linkat(r, "ln.npy.b2frame", r, "ln2.b2frame", 0), 0);
  if (n) CHECK_EQ(b2_ns_node_rearray(n, env, note, sizeof note), 0);
  b2_ns_node_free(n);
  CHECK(exists(r, "short.npy.b2frame") && exists(r, "more.npy.b2frame") &&
        exists(r, "fo.npy.b2frame") && exists(r, "ln.npy.b2frame") && !exists(r, "ln.b2nd"));
  /* a header past the first 64 KiB read: .npy 2.0, 6000 one-byte fields */
  size_t cap = 6000 * 20 + 256, hl;
  char *big = malloc(cap + 6000);
  CHECK(big != NULL);
  if (big) {
    size_t k = 12;
    k += (size_t)sprintf(big + k, "{'descr': [");
    for (int i = 0; i < 6000; i++) k += (size_t)sprintf(big + k, "('f%04d', '|u1'), ", i);
    k += (size_t)sprintf(big + k, "], 'fortran_order': False, 'shape': (1,), }");
    hl = (k + 1 + 63) / 64 * 64;
    memset(big + k, ' ', hl - k - 1);
    big[hl - 1] = '\n';
    memcpy(big, "\x93NUMPY\x02\x00", 8);
    uint32_t len = (uint32_t)(hl - 12);
    memcpy(big + 8, &len, 4);
    memset(big + hl, 5, 6000);
    CHECK(hl > 64 * 1024);
    n = kept(env, r, "big.npy.b2frame", big, hl + 6000);
    b2_file *f = NULL;
    CHECK_EQ(b2_file_open_at(env, r, "big.npy.b2frame", B2_VIEW_LOGICAL, B2_OPEN_RDONLY, &f), 0);
    if (f) CHECK_EQ(b2_file_npy_is_array(f), 1);
    if (f) b2_file_close(f);
    if (n) CHECK_EQ(b2_ns_node_rearray(n, env, note, sizeof note), 1);
    CHECK(view_is(env, r, "big.b2nd", B2_VIEW_CORDER, big + hl, 6000));
    b2_ns_node_free(n);
    free(big);
  }
  CHECK_EQ(count_prefixed(r, B2_NS_GONE_PREFIX), 0);
out:
  b2_env_destroy(env);
  rmroot(r);
}

static void test_node_moves(void) {
  b2_env *env;
  int r = setup(&env);
  if (r < 0) return;
  CHECK_EQ(mkdirat(r, "d1", 0755), 0);
  CHECK_EQ(mkdirat(r, "d2", 0755), 0);
  int d1 = openat(r, "d1", O_PATH | O_DIRECTORY | O_CLOEXEC);
  int d2 = openat(r, "d2", O_PATH | O_DIRECTORY | O_CLOEXEC);
  b2_ns_node *n = NULL;
  CHECK_EQ(b2_ns_node_create(env, d1, "a.b2frame", B2_NS_LOGICAL, NULL, &n), 0);
  if (!n) goto out;
  b2_file *f = b2_ns_node_file(n);
  CHECK_EQ(b2_file_pwrite(f, "first", 5, 0), 5);
  CHECK_EQ(b2_file_flush(f), 0);
  struct stat dst;
  fstat(d1, &dst);
  CHECK(b2_ns_node_is_at(n, dst.st_dev, dst.st_ino, "a.b2frame"));
  /* renamed into another directory while open: the node is told */
  CHECK_EQ(renameat(d1, "a.b2frame", d2, "b.b2frame"), 0);
  CHECK_EQ(b2_ns_node_moved(n, d2, "b.b2frame"), 0);
  fstat(d2, &dst);
  CHECK(b2_ns_node_is_at(n, dst.st_dev, dst.st_ino, "b.b2frame"));
  CHECK(strcmp(b2_ns_node_name(n), "b.b2frame") == 0);
  /* emptied: the commit of an empty frame writes a new file by name */
  struct stat was, now;
  int cfd = -1;
  CHECK_EQ(fstatat(d2, "b.b2frame", &was, AT_SYMLINK_NOFOLLOW), 0);
  CHECK_EQ(b2_ns_node_current(n, &was, &cfd), 0); /* still that file */
  CHECK_EQ(b2_file_truncate(f, 0), 0);
  CHECK_EQ(b2_file_flush(f), 0);
  CHECK(!exists(d1, "a.b2frame"));
  CHECK(exists(d2, "b.b2frame"));
  /* the node tells the new file its writer is in, by its own descriptor */
  CHECK_EQ(b2_ns_node_current(n, &was, &cfd), 1);
  CHECK(cfd >= 0 && fstat(cfd, &now) == 0 && now.st_ino != was.st_ino &&
        fstatat(d2, "b.b2frame", &was, AT_SYMLINK_NOFOLLOW) == 0 && was.st_ino == now.st_ino);
  if (cfd >= 0) close(cfd);
  CHECK_EQ(b2_file_pwrite(f, "second", 6, 0), 6);
  CHECK_EQ(b2_file_flush(f), 0);
  /* the entry is the file the node writes */
  int e = b2_ns_node_entry(n, O_PATH);
  struct stat a, b;
  CHECK(e >= 0 && fstat(e, &a) == 0 && fstatat(d2, "b.b2frame", &b, 0) == 0 &&
        a.st_ino == b.st_ino);
  if (e >= 0) close(e);
  /* the directory itself moved: nothing to tell */
  CHECK_EQ(renameat(r, "d2", r, "d3"), 0);
  CHECK_EQ(b2_file_truncate(f, 0), 0);
  CHECK_EQ(b2_file_flush(f), 0);
  CHECK_EQ(b2_file_pwrite(f, "third", 5, 0), 5);
  /* compaction only while the name holds the file expected */
  struct stat other;
  memset(&other, 0, sizeof other);
  CHECK_EQ(b2_ns_node_compact(n, &other), 0);
  int entry = -1;
  CHECK_EQ(b2_ns_node_close(n, &entry), 0);
  CHECK(entry >= 0);
  if (entry >= 0) close(entry);
  char buf[16] = {0};
  CHECK_EQ(read_frame(env, d2, "b.b2frame", buf, sizeof buf), 5);
  CHECK(memcmp(buf, "third", 5) == 0);
  CHECK(!exists(d1, "a.b2frame"));
out:
  close(d1);
  close(d2);
  rmroot(r);
  b2_env_destroy(env);
}

/* The size shown for a frame comes from its probe's header read while the
 * file is unchanged; the sidecar is found by directory and name. */
static void test_probe_attrs(void) {
  b2_env *env;
  int r = setup(&env);
  if (r < 0) return;
  b2_file *f;
  char data[3000];
  memset(data, 'q', sizeof data);
  CHECK_EQ(b2_file_create_at(env, r, "p.b2frame", NULL, &f), 0);
  CHECK_EQ(b2_file_pwrite(f, data, sizeof data, 0), (long long)sizeof data);
  CHECK_EQ(b2_file_close(f), 0);
  struct stat st;
  int64_t size = -1;
  CHECK_EQ(fstatat(r, "p.b2frame", &st, AT_SYMLINK_NOFOLLOW), 0);
  CHECK_EQ(b2_ns_is_frame(r, "p.b2frame", &st), 1); /* the probe reads the header */
  CHECK_EQ(b2_ns_frame_size(&st, B2_NS_LOGICAL, &size), 0);
  CHECK_EQ(size, (long long)sizeof data);
  /* an SChunk's .npy view: a python-blosc2 tensor's has a header, known
   * from its trailer only */
  CHECK_EQ(b2_ns_frame_size(&st, B2_NS_NPY, &size), B2_E_NOENT);
  /* changed since: not known without a new probe */
  CHECK_EQ(b2_file_open_at(env, r, "p.b2frame", B2_VIEW_LOGICAL, B2_OPEN_RDWR, &f), 0);
  CHECK_EQ(b2_file_pwrite(f, data, 100, sizeof data), 100);
  CHECK_EQ(b2_file_close(f), 0);
  struct stat now;
  CHECK_EQ(fstatat(r, "p.b2frame", &now, AT_SYMLINK_NOFOLLOW), 0);
  CHECK_EQ(b2_ns_frame_size(&now, B2_NS_LOGICAL, &size), B2_E_NOENT);
  CHECK_EQ(b2_ns_is_frame(r, "p.b2frame", &now), 1);
  CHECK_EQ(b2_ns_frame_size(&now, B2_NS_LOGICAL, &size), 0);
  CHECK_EQ(size, (long long)sizeof data + 100);
  /* the reference library's lock sidecar */
  CHECK_EQ(b2_ns_has_sidecar(r, "p.b2frame", &now), 0);
  put(r, "p.b2frame" B2_FRAME_LOCK_SUFFIX, "");
  CHECK_EQ(b2_ns_has_sidecar(r, "p.b2frame", &now), 1);
  rmroot(r);
  b2_env_destroy(env);
}

/* A store directory node over a damaged store: the failure is reported
 * once per distinct detail, and the store is not opened again before
 * `recheck` seconds unless asked. */
static void count_note(void *arg, const char *line) {
  (void)line;
  ++*(int *)arg;
}

static void test_store_node(void) {
  b2_env *env;
  int r = setup(&env);
  if (r < 0) return;
  put(r, "s.b2e", "not a store at all");
  int fd = openat(r, "s.b2e", O_PATH | O_CLOEXEC);
  b2_ns_store *n = b2_ns_store_new();
  CHECK(n != NULL && fd >= 0);
  b2_ns_snap *p = NULL;
  int report = 0;
  int rc = b2_ns_store_get(n, env, fd, 3600, &p, &report);
  CHECK(rc < 0 && rc != B2_E_IO && report == 1 && p == NULL); /* the open's own code */
  rc = b2_ns_store_get(n, env, fd, 3600, &p, &report); /* within recheck: not opened */
  CHECK_EQ(rc, B2_E_IO);
  CHECK_EQ(report, 0);
  b2_ns_store_recheck(n);
  rc = b2_ns_store_get(n, env, fd, 3600, &p, &report); /* opened again, same detail */
  CHECK(rc < 0 && rc != B2_E_IO);
  CHECK_EQ(report, 0);
  b2_ns_store_free(n);
  /* bound: its keys are looked up through it, failures told once */
  int told = 0;
  n = b2_ns_store_new();
  CHECK(n != NULL);
  b2_ns_store_bind(n, env, fd, 3600, count_note, &told);
  b2_ns_key *k = NULL;
  b2_ns_store_file file;
  rc = b2_ns_store_lookup(n, NULL, "a", &k, &file);
  CHECK(rc < 0 && rc != B2_E_IO && k == NULL);
  CHECK_EQ(told, 1);
  b2_ns_list l = {0};
  CHECK_EQ(b2_ns_store_list(n, NULL, &l), B2_E_IO); /* within recheck: not opened again */
  CHECK_EQ(l.n, 0);
  CHECK_EQ(told, 1);
  b2_ns_store_free(n);
  if (fd >= 0) close(fd);
  rmroot(r);
  b2_env_destroy(env);
}

int main(void) {
  T_RUN(test_remove);
  T_RUN(test_rename);
  T_RUN(test_rename_sidecar);
  T_RUN(test_exchange);
  T_RUN(test_node_moves);
  T_RUN(test_convert);
  T_RUN(test_rearray);
  T_RUN(test_probe_attrs);
  T_RUN(test_store_node);
  T_END();
}
