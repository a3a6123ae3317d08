/* bufs.h — backend buffers for the kernel tests (conventions 13).
 *
 * Every op test runs on every registered backend (hm_backend_name_at: ref,
 * fast, checked, then any a device library registers), and every op it
 * runs on a backend under test reads and writes that backend's memory:
 * inputs are uploaded into hm_backend_alloc'ed buffers, outputs downloaded
 * after the op, the buffers freed. So one test runs unchanged on host
 * memory (ref, fast), guarded memory (checked) and device memory. The
 * oracle stays on the host: tests compute ref on host arrays (ref's memory
 * is host memory) and their own double loops.
 *
 * One case on a backend:
 *     TB_EACH(be) {
 *         float *y = tb_out(be, bytes);                    (alloc)
 *         hm_backend_op(be, y, tb_in(be, x, bytes), ...);  (alloc + upload)
 *         tb_get(be, host_y, y, bytes);                    (download)
 *         tb_free_all(be);                                 (guards, free)
 *         ... compare host_y with ref's host result / the oracle ...
 *     }
 * NULL optional arguments stay NULL (tb_in of NULL is NULL). Scalar results
 * (losses, norms, an index) are one-element buffers like any other.
 *
 * Guards (test-backend-ops style): every buffer is TB_GUARD bytes longer
 * than asked, the tail filled with the sentinel pattern; tb_free_all reads
 * each tail back and fails the test naming the buffer if an op wrote past
 * its end. tb_out also fills the buffer itself with the sentinel (a NaN
 * as float), so an element the op should write and did not shows up.
 *
 * HM_TEST_BACKENDS="fast,cuda" (comma-separated) limits the backends under
 * test to those names; unset: all of them. Every name it lists must open
 * (an unknown name, or cuda on a machine without a GPU, fails the test
 * instead of leaving the TB_EACH loops empty). HM_REQUIRE_CUDA=1 (the GPU
 * machine's run, tests/device/run.sh) makes a cuda backend that is absent
 * or does not open a failure too; without it a device backend that cannot
 * open here is left out, saying so once on stderr. HM_TB_TRACE=1 prints one line
 * per case on stderr ("tb: case on <backend>"), to count them. */
#ifndef HM_TEST_BUFS_H
#define HM_TEST_BUFS_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"

/* Bytes of n floats. */
#define TB_F(n) (sizeof(float) * (size_t)(n))

/* Bytes of guard after every buffer. */
#define TB_GUARD 64
/* The sentinel, as a float: a quiet NaN (bytes repeat every 4). */
#define TB_SENT_BITS 0x7FEDCBA9u

/* The i-th backend under test (the shared instance of
 * hm_backend_name_at's i-th name, after the HM_TEST_BACKENDS filter), or
 * NULL past the end. */
const struct hm_backend *tb_backend(int i);
/* for each backend under test: TB_EACH(be) { ... } with be declared by the
 * caller (const struct hm_backend *be). */
#define TB_EACH(be) for (int tb_i_ = 0; ((be) = tb_backend(tb_i_)) != NULL; tb_i_++)
/* Number of backends under test. */
int tb_count(void);

/* alloc + upload of bytes from host; NULL when host is NULL (an absent
 * optional argument). The buffer is recorded for tb_free_all. */
void *tb_in(const struct hm_backend *be, const void *host, size_t bytes);
/* alloc, filled with the sentinel (an output the op must write, or a
 * workspace). Recorded for tb_free_all. */
void *tb_out(const struct hm_backend *be, size_t bytes);
/* download bytes of buf (a pointer into a tb_in / tb_out buffer) to host. */
void tb_get(const struct hm_backend *be, void *host, const void *buf, size_t bytes);
/* Checks the guard of every buffer of be recorded since the last call, and
 * frees them; ends a case (and checks hm_backend_sync: a missing op or a
 * device error fails the test). */
void tb_free_all(const struct hm_backend *be);

/* 1 if be computes ref's bits by contract (ref itself, checked). */
int tb_ref_bits(const struct hm_backend *be);
/* If be computes ref's bits: expects got = want (ref's host result) bit
 * for bit, naming what and the backend. Otherwise nothing. */
void tb_expect_ref_bits(const struct hm_backend *be, const char *what, const void *got,
                        const void *want, size_t bytes);
/* For tests that compare every backend with an oracle only: ref's result
 * is kept under key (ref runs first: it is backend 0); a later backend
 * that computes ref's bits (checked) must equal it bit for bit. Keys are
 * compared as strings; each kept result is used once. */
void tb_keep(const struct hm_backend *be, const char *key, const void *host, size_t bytes);

#endif
