/* bundle_sink.c — where a bundle's bytes go (bundle_internal.h): an archive
 * through an atomic output file, or a folder built beside its final path
 * as ".NAME.tmp.PID.XXXXXX" and renamed (or exchanged) into place. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "bundle_internal.h"
#include "fileio.h"


static char *join(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", a, b);
    return p;
}

/* 1 when some file files lists lies under the folder rel. */
static int lists_under(const cJSON *files, const char *rel)
{
    size_t n = strlen(rel);
    const cJSON *e;
    cJSON_ArrayForEach(e, files) if (strncmp(e->string, rel, n) == 0 && e->string[n] == '/')
        return 1;
    return 0;
}

/* The first entry of the folder root/rel (symlinks not followed) that is
 * not the bundle's own: neither MANIFEST.json, nor a file it lists, nor a
 * folder holding one. *found: owned, NULL when every entry is the bundle's. */
static enum hm_status find_foreign(const char *root, const char *rel, const cJSON *files,
                                   char **found, struct hm_error *err)
{
    char *dir = *rel ? join(root, rel) : strdup(root);
    DIR *d = dir ? opendir(dir) : NULL;
    enum hm_status st = HM_OK;
    if (!d) {
        st = dir ? hm_error_set_errno(err, HM_ERR_IO, errno, "cannot list '%s'", dir)
                 : hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        free(dir);
        return st;
    }
    struct dirent *de;
    while (st == HM_OK && !*found && (de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char *name = *rel ? join(rel, de->d_name) : strdup(de->d_name);
        char *disk = join(dir, de->d_name);
        struct stat sb;
        if (!name || !disk)
            st = hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        else if (lstat(disk, &sb) != 0)
            st = hm_error_set_errno(err, HM_ERR_IO, errno, "cannot read '%s'", disk);
        else if (S_ISDIR(sb.st_mode) && lists_under(files, name))
            st = find_foreign(root, name, files, found, err);
        else if ((S_ISDIR(sb.st_mode) || strcmp(name, HM_BUNDLE_MANIFEST) != 0) &&
                 (S_ISDIR(sb.st_mode) || !cJSON_GetObjectItemCaseSensitive(files, name))) {
            *found = name;
            name = NULL;
        }
        free(name);
        free(disk);
    }
    closedir(d);
    free(dir);
    return st;
}

/* May an existing out be replaced by a folder bundle? A file, an empty
 * folder, or a bundle folder that holds nothing but the bundle's own files
 * (what its MANIFEST.json lists): anything else in it, a .git folder or
 * notes, would be deleted with it, so it is refused, never lost. */
static enum hm_status check_replace(const char *out, const struct stat *sb, int force,
                                    struct hm_error *err)
{
    if (!force)
        return hm_error_set(err, HM_ERR_INVALID, "exists (use -f/--force to replace it)");
    if (!S_ISDIR(sb->st_mode) && !S_ISREG(sb->st_mode) && !S_ISLNK(sb->st_mode))
        return hm_error_set(err, HM_ERR_INVALID,
                            "is not a regular file or folder: refusing to replace it");
    if (!S_ISDIR(sb->st_mode))
        return HM_OK;
    char *m = join(out, HM_BUNDLE_MANIFEST), *text = NULL, *found = NULL;
    size_t len;
    struct hm_error ignored;
    cJSON *man = NULL;
    if (m && hm_is_file(m) &&
        hm_read_file(m, HM_BUNDLE_MAX_SMALL_FILE, &text, &len, &ignored) == HM_OK)
        man = cJSON_ParseWithLength(text, len);
    free(m);
    free(text);
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(man, "files");
    cJSON *none = cJSON_IsObject(files) ? NULL : cJSON_CreateObject();
    enum hm_status st = find_foreign(out, "", none ? none : files, &found, err);
    if (st == HM_OK && found)
        st = man ? hm_error_set(err, HM_ERR_INVALID,
                                "is a bundle folder that also holds '%s', which is not part of "
                                "the bundle (not in its %s): refusing to replace it (move "
                                "that away first)", found, HM_BUNDLE_MANIFEST)
                 : hm_error_set(err, HM_ERR_INVALID,
                                "is a folder that is not a bundle: refusing to replace it");
    free(found);
    cJSON_Delete(none);
    cJSON_Delete(man);
    return st;
}

enum hm_status hm_bundle_sink_open(struct hm_bundle_sink *s, const char *out, int kind,
                                   int64_t mtime, int force, struct hm_error *err)
{
    memset(s, 0, sizeof *s);
    s->kind = kind;
    if (kind != HM_BUNDLE_DIR) {
        enum hm_status st = hm_afile_open(out, force ? HM_AFILE_FORCE : 0, &s->af, err);
        if (st == HM_OK)
            st = hm_archive_writer_open(hm_afile_stream(s->af), (enum hm_archive_format)kind,
                                        mtime, &s->aw, err);
        return st;
    }
    if (strcmp(out, "-") == 0)
        return hm_error_set(err, HM_ERR_INVALID, "a folder bundle cannot go to stdout "
                            "(give --format with an archive format)");
    struct stat sb;
    enum hm_status st = lstat(out, &sb) == 0 ? check_replace(out, &sb, force, err) : HM_OK;
    if (st != HM_OK)
        return st;
    if ((st = hm_output_dir_check(out, err)) != HM_OK)
        return st;
    hm_tmp_remove_dead(out, 1);
    s->force = force;
    if (!(s->tmpdir = hm_tmp_path(out)))
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    if (!mkdtemp(s->tmpdir)) {
        free(s->tmpdir);
        s->tmpdir = NULL;
        return hm_error_set_errno(err, HM_ERR_IO, errno, "cannot create a temporary folder");
    }
    /* mkdtemp makes it 0700: give the bundle the usual mode */
    mode_t um = umask(022);
    umask(um);
    chmod(s->tmpdir, 0777 & ~um);
    return HM_OK;
}

int hm_bundle_sink_write(struct hm_bundle_sink *s, const void *data, size_t n, struct hm_error *err)
{
    if (s->kind != HM_BUNDLE_DIR)
        return hm_archive_writer_data(s->aw, data, n, err) == HM_OK ? 0 : -1;
    if (fwrite(data, 1, n, s->cur) != n) {
        hm_error_set_errno(err, HM_ERR_IO, errno, "write failed");
        return -1;
    }
    return 0;
}

enum hm_status hm_bundle_sink_begin(struct hm_bundle_sink *s, const char *name, uint64_t size,
                                 struct hm_error *err)
{
    if (s->kind != HM_BUNDLE_DIR)
        return hm_archive_writer_begin(s->aw, name, size, err);
    char *p = join(s->tmpdir, name);
    if (!p)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    for (char *q = p + strlen(s->tmpdir) + 1; (q = strchr(q, '/')); q++) {
        *q = '\0';
        int r = mkdir(p, 0755);
        *q = '/';
        if (r != 0 && errno != EEXIST) {
            free(p);
            return hm_error_set_errno(err, HM_ERR_IO, errno, "cannot create folder for '%s'", name);
        }
    }
    s->cur = fopen(p, "wbx");
    free(p);
    return s->cur ? HM_OK : hm_error_set_errno(err, HM_ERR_IO, errno, "cannot create '%s'", name);
}

enum hm_status hm_bundle_sink_end(struct hm_bundle_sink *s, struct hm_error *err)
{
    if (s->kind != HM_BUNDLE_DIR)
        return hm_archive_writer_end(s->aw, err);
    int bad = fflush(s->cur) != 0 || fsync(fileno(s->cur)) != 0;
    int e = errno;
    bad |= fclose(s->cur) != 0;
    s->cur = NULL;
    return bad ? hm_error_set_errno(err, HM_ERR_IO, e ? e : EIO, "write failed") : HM_OK;
}

void hm_bundle_sink_abort(struct hm_bundle_sink *s)
{
    if (s->cur)
        fclose(s->cur);
    hm_archive_writer_free(s->aw);
    hm_afile_abort(s->af);
    if (s->tmpdir)
        hm_rm_tree(s->tmpdir);
    free(s->tmpdir);
    memset(s, 0, sizeof *s);
}

/* Puts the finished folder at out: renamed into place, or atomically
 * exchanged with what is there (then removed). */
static enum hm_status swap_in(struct hm_bundle_sink *s, const char *out, struct hm_error *err)
{
    int fd = open(s->tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    struct stat sb;
    if (!s->force) {
        /* exclusive: an output that appeared meanwhile is left alone */
        if (renameat2(AT_FDCWD, s->tmpdir, AT_FDCWD, out, RENAME_NOREPLACE) != 0) {
            int e = errno;
            return e == EEXIST ? hm_error_set(err, HM_ERR_INVALID,
                                              "output appeared while this run was writing it "
                                              "(another writer?); left it alone (use -f to "
                                              "replace)")
                               : hm_error_set_errno(err, HM_ERR_IO, e,
                                                    "cannot rename the finished folder");
        }
    } else if (lstat(out, &sb) != 0) {
        if (rename(s->tmpdir, out) != 0)
            return hm_error_set_errno(err, HM_ERR_IO, errno, "cannot rename the finished folder");
    } else if (renameat2(AT_FDCWD, s->tmpdir, AT_FDCWD, out, RENAME_EXCHANGE) == 0) {
        hm_rm_tree(s->tmpdir); /* now the replaced output */
    } else {
        /* no RENAME_EXCHANGE here: move the old one aside first */
        size_t n = strlen(s->tmpdir) + 8;
        char *old = malloc(n);
        if (!old)
            return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
        snprintf(old, n, "%s.old", s->tmpdir);
        if (rename(out, old) != 0 || rename(s->tmpdir, out) != 0) {
            int e = errno;
            rename(old, out);
            free(old);
            return hm_error_set_errno(err, HM_ERR_IO, e, "cannot replace the existing output");
        }
        hm_rm_tree(old);
        free(old);
    }
    free(s->tmpdir);
    s->tmpdir = NULL;
    return HM_OK;
}

enum hm_status hm_bundle_sink_commit(struct hm_bundle_sink *s, const char *out, struct hm_error *err)
{
    if (s->kind == HM_BUNDLE_DIR)
        return swap_in(s, out, err);
    enum hm_status st = hm_archive_writer_finish(s->aw, err);
    s->aw = NULL;
    if (st != HM_OK)
        return st;
    st = hm_afile_commit(s->af, err);
    s->af = NULL;
    return st;
}

