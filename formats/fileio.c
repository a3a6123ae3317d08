#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int hm_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int hm_is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int hm_folder_file(const char *path, struct hm_error *err)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        if (errno == ENOENT)
            return 0;
        hm_error_set_errno(err, HM_ERR_IO, errno, "cannot stat '%s'", path);
        return -1;
    }
    if (S_ISREG(st.st_mode))
        return 1;
    hm_error_set(err, HM_ERR_INVALID,
                 "'%s' is not a regular file (a device, FIFO, socket or folder)", path);
    return -1;
}

enum hm_status hm_read_fd(int fd, size_t max_bytes, char **out, size_t *len,
                          struct hm_error *err)
{
    *out = NULL;
    *len = 0;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    if (!buf)
        return hm_error_set(err, HM_ERR_NOMEM, "out of memory");
    for (;;) {
        if (n + 1 >= cap) {
            char *nb = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                return hm_error_set(err, HM_ERR_NOMEM, "out of memory reading the input");
            }
            buf = nb;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + n, cap - n - 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            return hm_error_set_errno(err, HM_ERR_IO, e, "read failed");
        }
        if (r == 0)
            break;
        n += (size_t)r;
        if (n > max_bytes) {
            free(buf);
            return hm_error_set(err, HM_ERR_INVALID, "input is larger than %zu bytes",
                                max_bytes);
        }
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return HM_OK;
}

int hm_open_input(const char *path, struct stat *sb, struct hm_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        hm_error_set_errno(err, HM_ERR_IO, errno, "cannot open");
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fstat(fd, sb) != 0 || fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        int e = errno;
        close(fd);
        hm_error_set_errno(err, HM_ERR_IO, e, "cannot stat");
        return -1;
    }
    return fd;
}

enum hm_status hm_input_regular(const struct stat *sb, const char *what, struct hm_error *err)
{
    if (S_ISREG(sb->st_mode) || S_ISFIFO(sb->st_mode))
        return HM_OK;
    const char *kind = S_ISDIR(sb->st_mode)    ? "a directory"
                       : S_ISSOCK(sb->st_mode) ? "a socket"
                       : S_ISCHR(sb->st_mode) || S_ISBLK(sb->st_mode) ? "a device"
                                                                       : "not a regular file";
    return hm_error_set(err, HM_ERR_INVALID, "is %s; %s must be a file, a pipe or '-'", kind,
                        what);
}

enum hm_status hm_read_file(const char *path, size_t max_bytes, char **out, size_t *len,
                            struct hm_error *err)
{
    *out = NULL;
    *len = 0;
    struct stat st;
    int fd = STDIN_FILENO;
    if (strcmp(path, "-") != 0 && (fd = hm_open_input(path, &st, err)) < 0)
        return err ? err->status : HM_ERR_IO;
    enum hm_status status = HM_OK;
    if (fd != STDIN_FILENO)
        status = hm_input_regular(&st, "this input", err);
    if (status == HM_OK)
        status = hm_read_fd(fd, max_bytes, out, len, err);
    if (fd != STDIN_FILENO)
        close(fd);
    return status;
}
