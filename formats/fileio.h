/* fileio.h — small whole-file reads with a size cap. */
#ifndef HM_FILEIO_H
#define HM_FILEIO_H

#include <stddef.h>
#include "hm_error.h"

/* Read all of path ("-" = stdin) into a NUL-terminated buffer. Files larger
 * than max_bytes are refused. out: owned, free with free(). */
enum hm_status hm_read_file(const char *path, size_t max_bytes, char **out, size_t *len,
                            struct hm_error *err);

/* Read fd to its end into a NUL-terminated buffer (pipes, stdin, devices).
 * More than max_bytes is refused. out: owned, free with free(). */
enum hm_status hm_read_fd(int fd, size_t max_bytes, char **out, size_t *len,
                          struct hm_error *err);

/* 1 if path is an existing directory / regular file. */
int hm_is_dir(const char *path);
int hm_is_file(const char *path);

#endif
