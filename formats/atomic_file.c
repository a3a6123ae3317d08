#include "atomic_file.h"

#include <dirent.h>
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

/* Temporary names are "<dir>/.<base>.tmp.<pid>.XXXXXX". A leftover of a
 * killed run (its pid no longer alive) is removed by the next run of the
 * same output. */
static void remove_dead_leftovers(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    char *dir = slash ? strndup(path, (size_t)(slash - path) + (slash == path)) : strdup(".");
    char *prefix = malloc(strlen(base) + 8);
    DIR *d = dir ? opendir(dir) : NULL;
    if (!prefix || !d)
        goto out;
    sprintf(prefix, ".%s.tmp.", base);
    const size_t pn = strlen(prefix);
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
        char *full = malloc(strlen(dir) + strlen(e->d_name) + 2);
        if (full) {
            sprintf(full, "%s/%s", dir, e->d_name);
            unlink(full);
            free(full);
        }
    }
out:
    if (d)
        closedir(d);
    free(prefix);
    free(dir);
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
    remove_dead_leftovers(path);
    af->path = strdup(path);
    size_t n = strlen(path);
    af->tmp = malloc(n + 48);
    if (!af->path || !af->tmp) {
        free(af->path);
        free(af->tmp);
        free(af);
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    }
    /* "<dir>/.<base>.tmp.<pid>.XXXXXX" in the same directory, so rename is atomic */
    const char *slash = strrchr(path, '/');
    size_t dirlen = slash ? (size_t)(slash - path + 1) : 0;
    memcpy(af->tmp, path, dirlen);
    snprintf(af->tmp + dirlen, n + 48 - dirlen, ".%s.tmp.%ld.XXXXXX", path + dirlen,
             (long)getpid());
    af->slot = live_add(af->tmp);
    int fd = mkstemp(af->tmp);
    if (fd < 0) {
        int e = errno;
        live_del(af->slot);
        free(af->path);
        free(af->tmp);
        free(af);
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
