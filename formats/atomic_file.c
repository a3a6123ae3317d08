#include "atomic_file.h"
#include "hash.h"

#include <dirent.h>
#include <ftw.h>
#include <limits.h>
#include <sys/file.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HM_AFILE_MAX_LIVE 64

struct hm_afile {
    FILE *fp;
    int is_stdout;
    int flags;
    char *path;
    char *tmp;
    int slot;
};

/* Signal handlers read this list; entries are set before the file exists and
 * cleared before the name is freed. */
static char *volatile live_tmp[HM_AFILE_MAX_LIVE];

static int live_add(char *tmp)
{
    for (int i = 0; i < HM_AFILE_MAX_LIVE; i++) {
        if (!live_tmp[i]) {
            live_tmp[i] = tmp;
            return i;
        }
    }
    return -1;
}

static void live_del(int slot)
{
    if (slot >= 0)
        live_tmp[slot] = NULL;
}

void hm_afile_cleanup_all(void)
{
    for (int i = 0; i < HM_AFILE_MAX_LIVE; i++) {
        char *t = live_tmp[i];
        if (t)
            unlink(t);
    }
}

int hm_same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    if (stat(a, &sa) != 0 || stat(b, &sb) != 0)
        return 0;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* ---- names beside an output ------------------------------------------------ */

/* The last component of path without trailing slashes, and its folder. */
static int split_path(const char *path, char **dir, char **base)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    size_t b = n;
    while (b > 0 && path[b - 1] != '/')
        b--;
    *base = strndup(path + b, n - b);
    *dir = b == 0 ? strdup(".") : strndup(path, b == 1 ? 1 : b - 1);
    if (*base && *dir)
        return 0;
    free(*base);
    free(*dir);
    return -1;
}

char *hm_side_path(const char *path, const char *pre, const char *post, size_t reserve)
{
    char *dir = NULL, *base = NULL, *out = NULL;
    if (split_path(path, &dir, &base) != 0)
        return NULL;
    size_t room = NAME_MAX - reserve - strlen(pre) - strlen(post), bn = strlen(base);
    char tail[18] = "";
    if (bn > room) {
        /* cut at a character boundary, then "~" + the xxh3 of the whole name */
        snprintf(tail, sizeof tail, "~%016llx", (unsigned long long)hm_xxh3(base, bn));
        bn = room > 17 ? room - 17 : 0;
        while (bn > 0 && ((unsigned char)base[bn] & 0xC0) == 0x80)
            bn--;
    }
    size_t n = strlen(dir) + strlen(pre) + bn + strlen(tail) + strlen(post) + 2;
    const int here = strchr(path, '/') == NULL; /* a bare name stays bare */
    if ((out = malloc(n)) != NULL)
        snprintf(out, n, "%s%s%s%.*s%s%s", here ? "" : dir, here ? "" : "/", pre, (int)bn, base,
                 tail, post);
    free(dir);
    free(base);
    return out;
}

/* Temporary names are "<dir>/.<base>.tmp.<pid>.XXXXXX" (base shortened as
 * hm_side_path does, 4 bytes to spare for a ".old" of a folder swap). */
#define TMP_RESERVE 21 /* pid (10) + ".XXXXXX" (7) + ".old" (4) */

char *hm_tmp_path(const char *path)
{
    char *pre = hm_side_path(path, ".", ".tmp.", TMP_RESERVE);
    size_t n = pre ? strlen(pre) + 32 : 0;
    char *t = pre ? malloc(n) : NULL;
    if (t)
        snprintf(t, n, "%s%ld.XXXXXX", pre, (long)getpid());
    free(pre);
    return t;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

void hm_rm_tree(const char *path)
{
    nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* A leftover of a killed run (its pid no longer alive) is removed by the
 * next run of the same output; a live run's is left alone. */
void hm_tmp_remove_dead(const char *path, int trees)
{
    char *pre = hm_side_path(path, ".", ".tmp.", TMP_RESERVE);
    char *slash = pre ? strrchr(pre, '/') : NULL;
    DIR *d = NULL;
    if (!pre)
        goto out;
    if (slash)
        *slash = '\0';
    const char *dir = slash ? (*pre ? pre : "/") : ".";
    const char *prefix = slash ? slash + 1 : pre;
    const size_t pn = strlen(prefix);
    if (!(d = opendir(dir)))
        goto out;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, pn) != 0)
            continue;
        char *end = NULL;
        long pid = strtol(e->d_name + pn, &end, 10);
        if (end == e->d_name + pn || *end != '.' || pid <= 0)
            continue; /* not ours (or an older name without a pid): leave it */
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue; /* that run is alive (or not ours to judge) */
        size_t n = strlen(dir) + strlen(e->d_name) + 2;
        char *full = malloc(n);
        if (full) {
            snprintf(full, n, "%s/%s", dir, e->d_name);
            if (trees)
                hm_rm_tree(full);
            else
                unlink(full);
            free(full);
        }
    }
out:
    if (d)
        closedir(d);
    free(pre);
}

enum hm_status hm_output_dir_check(const char *path, struct hm_error *err)
{
    char *dir = NULL, *base = NULL;
    if (split_path(path, &dir, &base) != 0)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    free(base);
    struct stat sb;
    enum hm_status st = HM_OK;
    if (stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        if (access(dir, W_OK) != 0)
            st = hm_error_set_errno(err, HM_ERR_IO, errno, "directory '%s' is not writable",
                                    dir);
        goto out;
    }
    /* the deepest existing prefix: a file where a folder should be, or a
     * folder that is missing */
    char *p = strdup(dir);
    for (char *s; p && stat(p, &sb) != 0 && (s = strrchr(p, '/')) != NULL && s != p;)
        *s = '\0';
    if (p && stat(p, &sb) == 0 && !S_ISDIR(sb.st_mode))
        st = hm_error_set(err, HM_ERR_INVALID, "'%s' is not a directory", p);
    else
        st = hm_error_set(err, HM_ERR_INVALID, "directory '%s' does not exist", dir);
    free(p);
out:
    free(dir);
    return st;
}

/* ---- holding an output for a run's life -------------------------------------- */

#define HM_HELD_MAX 16
/* Static storage: the release runs in signal handlers and at exit, where
 * nothing may be allocated or freed. */
static char held_buf[HM_HELD_MAX][PATH_MAX];
static char *volatile held_path[HM_HELD_MAX];
static int held_fd[HM_HELD_MAX];
static dev_t held_dev[HM_HELD_MAX]; /* the inode held: release unlinks the name */
static ino_t held_ino[HM_HELD_MAX]; /* only while it is still that file */

/* A lock file's bytes: empty or one pid line (anything else is not ours). */
static long lock_file_pid(int fd, int *ours)
{
    char buf[32];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    *ours = n >= 0;
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *end = NULL;
    long pid = strtol(buf, &end, 10);
    *ours = end != buf && (*end == '\0' || strcmp(end, "\n") == 0) && pid > 0;
    return pid;
}

enum hm_status hm_output_hold(const char *path, struct hm_error *err)
{
    if (!path || strcmp(path, "-") == 0)
        return HM_OK;
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode))
        return hm_error_set(err, HM_ERR_INVALID,
                            "output is not a regular file or folder (a device, FIFO or "
                            "socket): refusing to replace it, even with -f");
    enum hm_status st = hm_output_dir_check(path, err);
    if (st != HM_OK)
        return st;
    /* a live run's lock file is never an output: replacing it would let a
     * second run take the output the first one still writes */
    if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd >= 0) {
            int busy = flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
            close(fd);
            if (busy)
                return hm_error_set(err, HM_ERR_INVALID,
                                    "it is locked by another process (a live run's lock "
                                    "file?): refusing to replace it, even with -f");
        }
    }
    char *lock = hm_side_path(path, "", ".lock", 0);
    if (!lock)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    int slot = -1;
    for (int i = 0; i < HM_HELD_MAX; i++) {
        if (held_path[i] && strcmp(held_path[i], lock) == 0) {
            free(lock); /* this process holds it already */
            return HM_OK;
        }
        if (!held_path[i] && slot < 0)
            slot = i;
    }
    if (slot < 0) {
        free(lock);
        return hm_error_set(err, HM_ERR_INVALID, "too many outputs held at once");
    }
    for (int tries = 0; tries < 16; tries++) {
        int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
        if (fd < 0) {
            st = hm_error_set_errno(err, HM_ERR_IO, errno, "cannot create the lock file '%s'",
                                    lock);
            break;
        }
        int ours;
        struct stat fs, ps;
        if (fstat(fd, &fs) == 0 && S_ISREG(fs.st_mode) && fs.st_nlink > 1) {
            /* a hard link to someone's file: writing our pid would write it */
            close(fd);
            st = hm_error_set(err, HM_ERR_INVALID,
                              "the lock file '%s' has %lld other hard links (it is another "
                              "file's name too): refusing to use it", lock,
                              (long long)fs.st_nlink - 1);
            break;
        }
        if (fstat(fd, &fs) != 0 || !S_ISREG(fs.st_mode) || (lock_file_pid(fd, &ours), !ours)) {
            close(fd);
            st = hm_error_set(err, HM_ERR_INVALID,
                              "'%s' exists and is not an hm lock file: refusing to use it",
                              lock);
            break;
        }
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int e = errno;
            long pid = lock_file_pid(fd, &ours);
            close(fd);
            if (e != EWOULDBLOCK && e != EINTR) {
                st = hm_error_set_errno(err, HM_ERR_IO, e, "cannot lock '%s'", lock);
                break;
            }
            char who[32] = "";
            if (pid > 0)
                snprintf(who, sizeof who, " (pid %ld)", pid);
            st = hm_error_set(err, HM_ERR_INVALID,
                              "another run%s is writing it (it holds '%s'); wait for it to end",
                              who, lock);
            break;
        }
        /* the file we locked must still be the one at that name: a run that
         * just finished unlinks it (then a new one is made) */
        if (stat(lock, &ps) != 0 || ps.st_dev != fs.st_dev || ps.st_ino != fs.st_ino) {
            close(fd);
            continue;
        }
        char pid[32];
        int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
        if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
            /* the pid is for messages only; the lock is held */
        }
        held_fd[slot] = fd;
        held_dev[slot] = fs.st_dev;
        held_ino[slot] = fs.st_ino;
        snprintf(held_buf[slot], sizeof held_buf[slot], "%s", lock); /* open() took it: fits */
        held_path[slot] = held_buf[slot];
        free(lock);
        return HM_OK;
    }
    if (st == HM_OK)
        st = hm_error_set(err, HM_ERR_IO, "cannot lock '%s': it keeps being replaced", lock);
    free(lock);
    return st;
}

void hm_output_release_all(void)
{
    for (int i = 0; i < HM_HELD_MAX; i++) {
        char *p = held_path[i];
        if (!p)
            continue;
        /* unlink while holding, then close: a run that opened the old file
         * finds on its stat that the name moved on, and retries. Only the
         * inode held: a file another has put at that name since is its own
         * (stat and unlink are async-signal-safe) */
        struct stat sb;
        if (stat(p, &sb) == 0 && sb.st_dev == held_dev[i] && sb.st_ino == held_ino[i])
            unlink(p);
        close(held_fd[i]);
        held_path[i] = NULL;
    }
}

int hm_path_inside(const char *path, const char *dir)
{
    char *rd = realpath(dir, NULL), *p = strdup(path), *rp = NULL;
    /* the deepest folder above path that exists, resolved */
    while (rd && p && !rp) {
        size_t n = strlen(p);
        while (n > 1 && p[n - 1] == '/')
            p[--n] = '\0';
        char *slash = strrchr(p, '/');
        if (!slash) {
            rp = realpath(".", NULL);
            break;
        }
        slash[slash == p ? 1 : 0] = '\0';
        rp = realpath(p, NULL);
        if (!rp && strcmp(p, "/") == 0)
            break;
    }
    size_t n = rd ? strlen(rd) : 0;
    int in = rp && rd && strncmp(rp, rd, n) == 0 &&
             (rp[n] == '\0' || rp[n] == '/' || (n == 1 && rd[0] == '/'));
    free(rd);
    free(p);
    free(rp);
    return in;
}

/* 1 when dir holds a MANIFEST.json (an hm bundle folder). */
static int is_bundle_dir(const char *dir)
{
    size_t n = strlen(dir) + sizeof "/MANIFEST.json";
    char *m = malloc(n);
    struct stat sb;
    int r = m && (snprintf(m, n, "%s/MANIFEST.json", dir), stat(m, &sb) == 0) &&
            S_ISREG(sb.st_mode);
    free(m);
    return r;
}

int hm_output_clobbers(const char *out, const char *in)
{
    if (!out || !in || strcmp(out, "-") == 0 || strcmp(in, "-") == 0)
        return 0;
    if (hm_same_file(out, in))
        return 1;
    struct stat si;
    if (stat(in, &si) != 0 || !S_ISDIR(si.st_mode))
        return 0;
    /* a bundle folder: MANIFEST.json covers every file, so any new one
     * anywhere inside breaks its verification */
    if (is_bundle_dir(in) && hm_path_inside(out, in))
        return 1;
    /* in is a folder: out may not be a file its loader reads (a shard, the
     * index, the config), existing or new (it would change what the folder is) */
    char *dir = strdup(out);
    if (!dir)
        return 1; /* cannot tell: refuse */
    char *slash = strrchr(dir, '/');
    const char *base = strrchr(out, '/') ? strrchr(out, '/') + 1 : out; /* in out, not dir */
    const char *d = slash ? (slash == dir ? "/" : (*slash = '\0', dir)) : ".";
    int inside = hm_same_file(d, in);
    free(dir);
    if (!inside)
        return 0;
    static const char *loader_names[] = {"model.safetensors.index.json", "config.json",
                                         "MANIFEST.json"};
    for (size_t i = 0; i < sizeof loader_names / sizeof *loader_names; i++)
        if (strcmp(base, loader_names[i]) == 0)
            return 1;
    /* model.safetensors and its shards model-0000k-of-0000n.safetensors */
    size_t n = strlen(base);
    if (strncmp(base, "model", 5) == 0 && n > 12 && strcmp(base + n - 12, ".safetensors") == 0)
        return 1;
    return 0;
}

enum hm_status hm_afile_open(const char *path, int flags, struct hm_afile **out,
                             struct hm_error *err)
{
    *out = NULL;
    struct hm_afile *af = calloc(1, sizeof *af);
    if (!af)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    af->slot = -1;
    if (strcmp(path, "-") == 0) {
        af->fp = stdout;
        af->is_stdout = 1;
        af->path = strdup("-");
        if (!af->path) {
            free(af);
            return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        }
        *out = af;
        return HM_OK;
    }
    struct stat st;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            free(af);
            return hm_error_set(err, HM_ERR_INVALID, "output is a directory");
        }
        if (!S_ISREG(st.st_mode)) {
            free(af);
            return hm_error_set(err, HM_ERR_INVALID,
                                "output is not a regular file (a device, FIFO or socket): "
                                "refusing to replace it, even with -f");
        }
        if (!(flags & HM_AFILE_FORCE)) {
            free(af);
            return hm_error_set(err, HM_ERR_INVALID,
                                "output exists (use -f/--force to replace it)");
        }
    }
    af->flags = flags;
    hm_tmp_remove_dead(path, 0);
    af->path = strdup(path);
    af->tmp = hm_tmp_path(path);
    if (!af->path || !af->tmp) {
        free(af->path);
        free(af->tmp);
        free(af);
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    }
    af->slot = live_add(af->tmp);
    int fd = mkstemp(af->tmp);
    if (fd < 0) {
        int e = errno;
        live_del(af->slot);
        free(af->path);
        free(af->tmp);
        free(af);
        if ((e == ENOENT || e == ENOTDIR) && hm_output_dir_check(path, err) != HM_OK)
            return err->status; /* names the folder that is missing or not one */
        return hm_error_set_errno(err, HM_ERR_IO, e, "cannot create a temporary file");
    }
    fchmod(fd, 0644);
    af->fp = fdopen(fd, "wb");
    if (!af->fp) {
        int e = errno;
        close(fd);
        unlink(af->tmp);
        live_del(af->slot);
        free(af->path);
        free(af->tmp);
        free(af);
        return hm_error_set_errno(err, HM_ERR_IO, e, "cannot open a temporary file");
    }
    *out = af;
    return HM_OK;
}

FILE *hm_afile_stream(struct hm_afile *af) { return af->fp; }

const char *hm_afile_path(const struct hm_afile *af) { return af->path; }

static void afile_free(struct hm_afile *af)
{
    live_del(af->slot);
    free(af->tmp);
    free(af->path);
    free(af);
}

/* Flushes, fsyncs and closes af's temp file (no rename). 0 or an errno. */
static int afile_sync(struct hm_afile *af)
{
    int e = 0;
    errno = 0;
    if (fflush(af->fp) != 0 || ferror(af->fp))
        e = errno ? errno : EIO;
    else if (fsync(fileno(af->fp)) != 0 && errno != EINVAL)
        e = errno;
    errno = 0;
    if (fclose(af->fp) != 0 && !e)
        e = errno ? errno : EIO;
    af->fp = NULL;
    return e;
}

/* Renames af's temp file over its path. With HM_AFILE_FORCE an existing
 * path is exchanged (*old = 1: its previous file now sits at af->tmp, so
 * that the rename can be undone); else the rename is exclusive. 0 or an
 * errno (EEXIST: the path appeared meanwhile). */
static int afile_publish(struct hm_afile *af, int *old)
{
    *old = 0;
    if (af->flags & HM_AFILE_FORCE) {
        if (renameat2(AT_FDCWD, af->tmp, AT_FDCWD, af->path, RENAME_EXCHANGE) == 0) {
            *old = 1;
            return 0;
        }
        return rename(af->tmp, af->path) == 0 ? 0 : errno;
    }
    /* exclusive: two writers of one output cannot both win silently */
    if (renameat2(AT_FDCWD, af->tmp, AT_FDCWD, af->path, RENAME_NOREPLACE) == 0)
        return 0;
    int e = errno;
    if (e == EINVAL || e == ENOSYS) { /* no RENAME_NOREPLACE here: link is exclusive */
        e = link(af->tmp, af->path) == 0 ? 0 : errno;
        unlink(af->tmp);
    }
    return e;
}

/* Takes back afile_publish: the previous file (if any) returns to the path,
 * else the path is removed. */
static void afile_unpublish(struct hm_afile *af, int old)
{
    if (old)
        renameat2(AT_FDCWD, af->tmp, AT_FDCWD, af->path, RENAME_EXCHANGE);
    else
        unlink(af->path);
}

enum hm_status hm_afile_commit_all(struct hm_afile **afs, int n, int *failed,
                                   struct hm_error *err)
{
    enum hm_status st = HM_OK;
    int e = 0, bad = -1, appeared = 0, published = 0;
    int old[HM_AFILE_MAX_LIVE] = {0};
    if (n > HM_AFILE_MAX_LIVE)
        return hm_error_set(err, HM_ERR_INVALID, "too many outputs in one commit");
    /* 1. every temp file complete on disk, then stdout flushed */
    for (int pass = 0; pass < 2 && bad < 0; pass++)
        for (int i = 0; i < n && bad < 0; i++) {
            struct hm_afile *af = afs[i];
            if (pass == 0 && !af->is_stdout) {
                e = afile_sync(af);
            } else if (pass == 1 && af->is_stdout) {
                errno = 0;
                if (fflush(stdout) != 0)
                    e = errno ? errno : EIO;
                else if (ferror(stdout)) /* an earlier write failed; its errno is gone */
                    e = -1;
            }
            if (e)
                bad = i;
        }
    /* 2. the renames; a failed one takes back those before it */
    for (int i = 0; i < n && bad < 0; i++) {
        if (afs[i]->is_stdout)
            continue;
        if ((e = afile_publish(afs[i], &old[i])) != 0) {
            bad = i;
            appeared = !(afs[i]->flags & HM_AFILE_FORCE) && e == EEXIST;
        } else {
            published = i + 1;
        }
    }
    if (bad >= 0)
        for (int i = 0; i < published; i++)
            if (!afs[i]->is_stdout)
                afile_unpublish(afs[i], old[i]);
    for (int i = 0; i < n; i++) {
        struct hm_afile *af = afs[i];
        if (!af->is_stdout && af->fp)
            fclose(af->fp);
        if (!af->is_stdout && (bad >= 0 || old[i]))
            unlink(af->tmp); /* a temp file, or a replaced file's old content */
    }
    if (bad >= 0) {
        const char *what = afs[bad]->is_stdout ? "cannot write to stdout" : "cannot write the output";
        st = appeared ? hm_error_set(err, HM_ERR_INVALID,
                                     "output appeared while this run was writing it "
                                     "(another writer?); left it alone (use -f to replace)")
             : e == -1 ? hm_error_set(err, HM_ERR_IO, "%s: an earlier write failed", what)
                       : hm_error_set_errno(err, HM_ERR_IO, e, "%s", what);
        if (failed)
            *failed = bad;
    }
    for (int i = 0; i < n; i++)
        afile_free(afs[i]);
    return st;
}

enum hm_status hm_afile_commit(struct hm_afile *af, struct hm_error *err)
{
    return hm_afile_commit_all(&af, 1, NULL, err);
}

void hm_afile_abort(struct hm_afile *af)
{
    if (!af)
        return;
    if (!af->is_stdout) {
        if (af->fp)
            fclose(af->fp);
        unlink(af->tmp);
    } else {
        fflush(stdout);
    }
    afile_free(af);
}
