/*
 * main.c - b2fs: mount a directory of Blosc2 frames as plain files.
 *
 *   b2fs SOURCE MOUNTPOINT [-f] [-d] [-s] [-o OPTIONS]
 *
 * Parses options, opens SOURCE, mounts, and runs the libfuse low-level
 * session loop (multi-threaded unless -s).  Also the entry point that
 * mount.fuse3 runs for an /etc/fstab line of type fuse.b2fs.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "b2fs.h"
#include "common/fileio.h"

static struct fuse_lowlevel_ops ops;

/* Allow as many descriptors as we may: each known inode holds one, each
 * frame kept open a few; keep idle frames open within a share of that. */
static void raise_fd_limit(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) getrlimit(RLIMIT_NOFILE, &rl);
  }
  rlim_t idle = rl.rlim_cur / 16;
  /* Each frame kept holds descriptors: leave half the limit to the rest. */
  if (b2fs_g.opts.idle_frames >= 0 && (rlim_t)b2fs_g.opts.idle_frames > rl.rlim_cur / 2) {
    b2fs_log("idle_frames=%d lowered to %d: the descriptor limit is %llu",
             b2fs_g.opts.idle_frames, (int)(rl.rlim_cur / 2), (unsigned long long)rl.rlim_cur);
    b2fs_g.opts.idle_frames = (int)(rl.rlim_cur / 2);
  }
  int kept = b2fs_g.opts.idle_frames >= 0 ? b2fs_g.opts.idle_frames
             : idle > 1024 ? 1024 : idle < 8 ? 8 : (int)idle;
  b2fs_frame_set_idle_max(kept);
  b2fs_shed_init((unsigned long)rl.rlim_cur, (unsigned long)kept);
}

/* The device numbers ("MAJ:MIN") of the mount at `mnt`, from
 * /proc/self/mountinfo (the latest mount there); without touching the
 * mount, whose requests no thread serves yet. */
static int mount_dev(const char *mnt, char *dev, size_t cap) {
  FILE *fp = fopen("/proc/self/mountinfo", "re");
  if (!fp) return -1;
  char line[8192], path[PATH_MAX];
  int found = 0;
  while (fgets(line, sizeof line, fp)) {
    char d[32], esc[4096];
    if (sscanf(line, "%*s %*s %31s %*s %4095s", d, esc) != 2) continue;
    size_t k = 0; /* the mount point, octal escapes (\040) undone */
    for (const char *c = esc; *c && k + 1 < sizeof path; c++) {
      if (c[0] == '\\' && c[1] >= '0' && c[1] <= '3' && c[2] >= '0' && c[2] <= '7' &&
          c[3] >= '0' && c[3] <= '7') {
        path[k++] = (char)((c[1] - '0') * 64 + (c[2] - '0') * 8 + (c[3] - '0'));
        c += 3;
      } else {
        path[k++] = *c;
      }
    }
    path[k] = 0;
    if (!strcmp(path, mnt)) found = snprintf(dev, cap, "%s", d) < (int)cap;
  }
  fclose(fp);
  return found ? 0 : -1;
}

/* Set the kernel's read-ahead of the new mount (its bdi in sysfs; needs
 * root).  The kernel starts FUSE mounts at 128 KiB, which splits a
 * sequential read into many small requests.  Best effort: a user who
 * asked for it explicitly hears when it could not be done. */
static void set_read_ahead(const char *mnt) {
  const b2fs_opts *o = &b2fs_g.opts;
  if (!o->read_ahead_kb) return;
  char dev[32], path[96], val[16];
  const char *why = NULL;
  if (mount_dev(mnt, dev, sizeof dev) < 0) {
    why = "mount not found";
  } else {
    snprintf(path, sizeof path, "/sys/class/bdi/%s/read_ahead_kb", dev);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    int n = snprintf(val, sizeof val, "%u\n", o->read_ahead_kb);
    if (fd < 0 || write(fd, val, (size_t)n) != n) why = strerror(errno);
    if (fd >= 0) close(fd);
  }
  if (why && o->has_read_ahead)
    fprintf(stderr, "b2fs: read_ahead_kb not set (%s); the kernel's default stays\n", why);
}

/* Options we add for libfuse unless the user chose otherwise. */
static int add_defaults(struct fuse_args *args, const char *abs_source) {
  const b2fs_opts *o = &b2fs_g.opts;
  int keep_perms = !o->no_default_perms;
  if (!keep_perms && geteuid() == 0) {
    /* The daemon acts on SOURCE as root: without the kernel's checks,
     * every user of an allow_other mount would get root's rights. */
    for (int i = 0; i < args->argc; i++)
      if (strstr(args->argv[i], "allow_other")) keep_perms = 1;
    if (keep_perms)
      fprintf(stderr, "b2fs: no_default_permissions ignored: as root with allow_other it would "
                      "give every user root's rights on SOURCE\n");
  }
  if (keep_perms && fuse_opt_add_arg(args, "-odefault_permissions")) return -1;
  if (!o->has_max_read && fuse_opt_add_arg(args, "-omax_read=1048576")) return -1;
  if (!o->has_fsname) {
    char *esc = NULL, *arg = NULL;
    int rc = -1;
    if (fuse_opt_add_opt_escaped(&esc, abs_source) == 0 &&
        asprintf(&arg, "-ofsname=%s", esc) >= 0)
      rc = fuse_opt_add_arg(args, arg);
    free(esc);
    free(arg);
    if (rc) return -1;
    /* libfuse adds subtype=b2fs only when fsname is absent: keep it. */
    if (fuse_opt_add_arg(args, "-osubtype=b2fs")) return -1;
  }
  return 0;
}

static int open_root(const char *source, char *abs, size_t cap) {
  if (!realpath(source, abs)) {
    fprintf(stderr, "b2fs: %s: %s\n", source, strerror(errno));
    return -1;
  }
  (void)cap;
  int fd = open(abs, O_PATH | O_DIRECTORY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) < 0) {
    fprintf(stderr, "b2fs: %s: %s\n", source, strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  b2fs_inode *r = &b2fs_g.root;
  r->fd = fd;
  r->dev = st.st_dev;
  r->ino = st.st_ino;
  r->kind = B2_NS_PLAIN;
  r->nlookup = 1;
  pthread_mutex_init(&r->lock, NULL);
  pthread_mutex_init(&r->wlock, NULL);
  pthread_mutex_init(&r->nslock, NULL);
  return 0;
}

static int run(struct fuse_session *se, const struct fuse_cmdline_opts *cmd) {
  if (cmd->singlethread) return fuse_session_loop(se);
  struct fuse_loop_config *cfg = fuse_loop_cfg_create();
  if (!cfg) return -ENOMEM;
  /* Each worker thread reads and answers through a descriptor of its own
   * (libfuse falls back to the shared one when the kernel refuses): with
   * one shared descriptor every request and reply contends for one lock
   * in the kernel.  On the 10,000-file tree (2 cores, quiet machine) this
   * took `ls -lR` from 1.19-1.50 s to 0.65-0.69 s and random 4 KiB reads
   * of the zstd signal from 1,800-4,900 to 6,100-6,500 per second. */
  fuse_loop_cfg_set_clone_fd(cfg, 1);
  fuse_loop_cfg_set_max_threads(cfg, cmd->max_threads);
  if (cmd->max_idle_threads != UINT_MAX)
    fuse_loop_cfg_set_idle_threads(cfg, cmd->max_idle_threads);
  int rc = fuse_session_loop_mt(se, cfg);
  fuse_loop_cfg_destroy(cfg);
  return rc;
}

/* An inode is freed (b2fs_hook.release). */
static void release_inode(b2fs_inode *in) {
  b2fs_store_free(in);
  b2fs_frame_forget(in);
  b2fs_warm_free(in->warm);
  in->warm = NULL;
}

int main(int argc, char **argv) {
  struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
  struct fuse_cmdline_opts cmd;
  struct fuse_session *se = NULL;
  char abs_source[PATH_MAX];
  int ret = 1, mounted = 0, handlers = 0;
  memset(&cmd, 0, sizeof cmd);
  b2fs_g.root.fd = -1;

  /* Buffers of the same size that each thread keeps or takes again (the
   * 1 MiB request and reply buffers) stay in the heap for reuse rather
   * than being mapped and zero-faulted anew; chunk-sized ones of mixed
   * sizes (cache entries, chunks compressed or read) have their own
   * mappings (common/bigbuf.c), as holes they left in the heap would stay
   * in the process. */
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  /* One arena per thread would each keep their own free chunk buffers and
   * push the resident size past the cache budget; two are enough. */
  mallopt(M_ARENA_MAX, 2);
  /* SOURCE may be changed by other users while we run as root: the engine
   * resolves the paths we give it without following any symbolic link. */
  b2_io_set_strict_paths(1);
  /* The kernel applied the caller's umask to every mode it passes us: the
   * entries we make get exactly that mode, not masked a second time. */
  umask(0);
  if (b2fs_opts_parse(&args, &b2fs_g.opts) < 0) goto out;
  if (b2fs_g.opts.source && open_root(b2fs_g.opts.source, abs_source, sizeof abs_source) < 0)
    goto out;
  if (b2fs_g.opts.source && add_defaults(&args, abs_source) < 0) goto out;
  if (fuse_parse_cmdline(&args, &cmd) != 0) goto out;
  if (cmd.show_help) {
    b2fs_opts_help(argv[0]);
    printf("FUSE options:\n");
    fflush(stdout);
    fuse_cmdline_help();
    fuse_lowlevel_help();
    ret = 0;
    goto out;
  }
  if (cmd.show_version) {
    printf("b2fs version %s\nzfp codecs: %s\n", B2FS_VERSION, b2_zfp_available() ? "yes (libzfp)" : "no");
    fflush(stdout);
    fuse_lowlevel_version();
    ret = 0;
    goto out;
  }
  if (!b2fs_g.opts.source || !cmd.mountpoint) {
    fprintf(stderr, "usage: %s SOURCE MOUNTPOINT [options]  (see --help)\n", argv[0]);
    goto out;
  }
  b2fs_hook.release = release_inode;
  b2fs_hook.store_stat = b2fs_store_stat;
  if (b2fs_table_init() < 0) {
    fprintf(stderr, "b2fs: out of memory\n");
    goto out;
  }
  b2fs_ops_read(&ops);
  b2fs_ops_dir(&ops);
  b2fs_ops_xattr(&ops);
  b2fs_ops_write(&ops);
  b2fs_ops_tree(&ops);

  se = fuse_session_new(&args, &ops, sizeof ops, NULL);
  if (!se) goto out;
  if (fuse_set_signal_handlers(se) != 0) goto out;
  handlers = 1;
  if (fuse_session_mount(se, cmd.mountpoint) != 0) goto out;
  mounted = 1;
  if (b2fs_dev_install(se) != 0) goto out;
  b2fs_g.se = se;
  set_read_ahead(cmd.mountpoint);
  if (fuse_daemonize(cmd.foreground) != 0) goto out;
  b2fs_log_init(cmd.foreground);
  raise_fd_limit();

  /* The C library loads libgcc_s the first time a thread is cancelled (the
   * session's workers, at unmount): load it now, while descriptors are to
   * be had, or a daemon out of them aborts at the end instead of
   * committing what it holds. */
  if (!dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_NODELETE))
    b2fs_log("libgcc_s.so.1 not loaded: %s", dlerror());

  /* The engine's threads start after daemonizing (fork keeps none). */
  int rc = b2_env_create(&b2fs_g.opts.env, &b2fs_g.env);
  if (rc < 0) {
    b2fs_log("cannot create the engine: %s", b2_last_detail());
    goto out;
  }
  if (b2fs_warm_start() < 0) b2fs_log("no thread to warm frames ahead of readers");
  if (b2fs_compactor_start() < 0) b2fs_log("no thread to compact frames kept open");
  rc = run(se, &cmd);
  /* libfuse ends the loop with the number of a signal it caught (SIGTERM,
   * SIGINT, SIGHUP): a stop asked for, which what follows completes as an
   * unmount does (writers committed, the mount removed). */
  if (rc > 0) b2fs_log("stopping on signal %d", rc);
  ret = rc < 0 ? 1 : 0;

out:
  /* Before the device is closed: the warming thread writes to it (its
   * hand-overs wait for no read: b2fs_frame_kopen). */
  b2fs_warm_stop();
  b2fs_compactor_stop(); /* before the inodes go */
  if (mounted) fuse_session_unmount(se);
  b2fs_notify_drain(); /* they write to the session's device */
  b2fs_shed_stop();    /* as it does */
  if (b2fs_shed_asked())
    b2fs_log("the descriptor limit made us ask the kernel to drop %llu names",
             (unsigned long long)b2fs_shed_asked());
  if (handlers) fuse_remove_signal_handlers(se);
  if (se) fuse_session_destroy(se);
  b2fs_warm_free(b2fs_g.root.warm);
  if (b2fs_g.buckets) {
    b2fs_store_forget_all(); /* they hold their stores' inodes */
    b2fs_table_destroy();
  }
  if (b2fs_g.env) b2_env_destroy(b2fs_g.env);
  if (b2fs_g.root.fd >= 0) {
    close(b2fs_g.root.fd);
    pthread_mutex_destroy(&b2fs_g.root.lock);
  }
  b2fs_opts_free(&b2fs_g.opts);
  free(cmd.mountpoint);
  fuse_opt_free_args(&args);
  return ret;
}
