/* testutil.h — helpers shared by the Criterion tests. */
#ifndef HM_TESTUTIL_H
#define HM_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

/* A fresh empty directory under $TMPDIR (or /tmp). owned: free(). */
char *tu_mkdtemp(const char *tag);
/* dir + "/" + name. owned: free(). */
char *tu_path(const char *dir, const char *name);
/* Write bytes to path (creating/truncating); aborts the test on failure. */
void tu_write_file(const char *path, const void *data, size_t len);
/* Read a whole file. owned: free(); aborts on failure. */
char *tu_read_file(const char *path, size_t *len);

/* Run a shell command; captures stdout and stderr (owned, NUL-terminated;
 * pass NULL to discard). Returns the exit status, or 128 + signal when the
 * command died from a signal (so tests can fail on crashes). */
int tu_run(const char *cmd, char **out, char **err);

/* Deterministic random numbers (splitmix64 / uniform / normal). */
uint64_t tu_rand_u64(uint64_t *state);
double tu_rand_uniform(uint64_t *state);       /* [0, 1) */
double tu_rand_normal(uint64_t *state);        /* N(0, 1) */

#endif
