/* fileio.h — small whole-file reads with a size cap. */
#ifndef HM_FILEIO_H
#define HM_FILEIO_H

#include <stddef.h>
#include <sys/stat.h>
#include "hm_error.h"

/* Opens an input for reading without ever blocking: O_NONBLOCK for the
 * open (a FIFO without a writer opens at once and reads as empty), then
 * blocking reads; fills *sb. Returns the fd, or -1 with err filled (errno
 * text). `what` names the kind of input in messages. Regular files are
 * what hm reads; callers decide what else they accept (hm_input_regular). */
int hm_open_input(const char *path, struct stat *sb, struct hm_error *err);

/* HM_OK when sb is a regular file, or a FIFO/pipe (a stream: read with a
 * cap; hm_open_input never waits for its writer); else an error saying what
 * it is (directory, device, socket) and that `what` must be a file. */
enum hm_status hm_input_regular(const struct stat *sb, const char *what, struct hm_error *err);

/* Read all of path ("-" = stdin) into a NUL-terminated buffer. Files larger
 * than max_bytes are refused. out: owned, free with free(). */
enum hm_status hm_read_file(const char *path, size_t max_bytes, char **out, size_t *len,
                            struct hm_error *err);

/* Read fd to its end into a NUL-terminated buffer (pipes, stdin, devices).
 * More than max_bytes is refused. out: owned, free with free(). */
enum hm_status hm_read_fd(int fd, size_t max_bytes, char **out, size_t *len,
                          struct hm_error *err);

/* A file a folder input may hold (config.json, model.safetensors, ...):
 * 1 if path is a regular file (symlinks followed), 0 if absent, -1 with
 * err set ("'path' is not a regular file (a device, FIFO, socket or
 * folder)") if something else is there: never read, never taken for
 * absent. */
int hm_folder_file(const char *path, struct hm_error *err);

/* 1 if path is an existing directory / regular file. */
int hm_is_dir(const char *path);
int hm_is_file(const char *path);

#endif
