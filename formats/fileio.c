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

enum hm_status hm_read_file(const char *path, size_t max_bytes, char **out, size_t *len,
                            struct hm_error *err)
{
    *out = NULL;
    *len = 0;
    int fd = strcmp(path, "-") == 0 ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return hm_error_set_errno(err, HM_ERR_IO, errno, "cannot open");
    struct stat st;
    enum hm_status status;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode))
        status = hm_error_set(err, HM_ERR_IO, "is a directory");
    else
        status = hm_read_fd(fd, max_bytes, out, len, err);
    if (fd != STDIN_FILENO)
        close(fd);
    return status;
}
