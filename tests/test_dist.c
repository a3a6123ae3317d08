/* test_dist.c — the process seam without a launcher: the launcher check,
 * the refusal of a build without MPI (dist.c compiled here without
 * HM_HAVE_MPI, under other names), the tensor shares and the chunk
 * exchange. The MPI transport itself runs in tests/cli/mpi.sh. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"
#include "run.h"

/* dist.c as a build without MPI compiles it */
#undef HM_HAVE_MPI
#define hm_dist_built nompi_dist_built
#define hm_dist_launched_size nompi_dist_launched_size
#define hm_dist_local_size nompi_dist_local_size
#define hm_dist_open nompi_dist_open
#define hm_dist_close nompi_dist_close
#include "../libconvert/dist/dist.c"

static void clear_launcher(void)
{
    const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE",
                          "MV2_COMM_WORLD_SIZE", "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        unsetenv(vars[i]);
}

Test(dist, the_launcher_size_from_its_environment)
{
    clear_launcher();
    cr_expect_eq(nompi_dist_launched_size(), 1);
    setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
    cr_expect_eq(nompi_dist_launched_size(), 4);
    setenv("OMPI_COMM_WORLD_SIZE", "4x", 1);
    cr_expect_eq(nompi_dist_launched_size(), 1, "a malformed size is no launcher");
    setenv("OMPI_COMM_WORLD_SIZE", "1", 1);
    cr_expect_eq(nompi_dist_launched_size(), 1);
    setenv("PMI_SIZE", "3", 1);
    cr_expect_eq(nompi_dist_launched_size(), 3, "MPICH's PMI_SIZE");
    clear_launcher();
}

Test(dist, a_build_without_mpi_refuses_several_processes)
{
    struct hm_run_comm c;
    struct hm_error err;
    hm_error_clear(&err);
    clear_launcher();
    cr_expect_eq(nompi_dist_built(), 0);
    cr_assert_eq(nompi_dist_open(&c, &err), HM_OK, "one process: %s", err.msg);
    cr_expect_eq(c.size, 1);
    cr_expect_null(c.fold_grads);
    setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
    cr_assert_eq(nompi_dist_open(&c, &err), HM_ERR_UNSUPPORTED);
    cr_expect(strstr(err.msg, "3 processes") && strstr(err.msg, "no MPI"), "%s", err.msg);
    nompi_dist_close(1); /* nothing started: nothing to end */
    clear_launcher();
}

/* The shares against a direct reading of their definition: contiguous,
 * every tensor once, each process's share starting at the first tensor at
 * or past its fraction of the elements. */
Test(dist, tensor_shares)
{
    const int64_t sizes[][6] = {{10, 10, 10, 10, 10, 10}, {1000, 1, 1, 1, 1, 1},
                                {1, 1, 1, 1, 1, 1000}, {5, 0, 7, 3, 0, 9}};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        int64_t off[7] = {0};
        for (int i = 0; i < 6; i++)
            off[i + 1] = off[i] + sizes[k][i];
        for (int n = 1; n <= 8; n++) {
            int64_t first[9];
            hm_run_partition(off, 6, n, first);
            cr_expect_eq(first[0], 0);
            cr_expect_eq(first[n], 6);
            for (int r = 1; r < n; r++) {
                cr_expect_leq(first[r - 1], first[r], "case %zu n %d: not contiguous", k, n);
                int64_t want = 6;
                for (int i = 0; i < 6; i++)
                    if (off[i] * n >= off[6] * r) {
                        want = i;
                        break;
                    }
                cr_expect_eq(first[r], want, "case %zu n %d r %d: %lld, want %lld", k, n, r,
                             (long long)first[r], (long long)want);
            }
        }
    }
}

/* A fake comm of 3 processes in which this one is rank 1 and the others'
 * values are known: the owners' values land, in chunk order. */
struct fake {
    int64_t n;
};

static enum hm_status fake_allgather(void *ctx, const double *x, int64_t n, double *out,
                                     struct hm_error *err)
{
    (void)ctx, (void)err;
    for (int q = 0; q < 3; q++)
        for (int64_t i = 0; i < n; i++)
            out[q * n + i] = q == 1 ? x[i] : 100.0 * q + (double)i;
    return HM_OK;
}

Test(dist, chunks_come_from_their_owners)
{
    struct fake f = {0};
    struct hm_run_comm c = {.rank = 1, .size = 3, .ctx = &f, .allgather = fake_allgather};
    double v[10]; /* 5 chunks of 2 */
    for (int i = 0; i < 10; i++)
        v[i] = hm_run_owns_chunk(&c, i / 2) ? -1.0 - i : 0.0;
    cr_expect(hm_run_owns_chunk(&c, 1) && hm_run_owns_chunk(&c, 4));
    cr_expect(!hm_run_owns_chunk(&c, 0) && !hm_run_owns_chunk(&c, 2));
    cr_assert_eq(hm_run_share_chunks(&c, v, 5, 2, NULL), HM_OK);
    for (int i = 0; i < 10; i++) {
        const int owner = (i / 2) % 3;
        const double want = owner == 1 ? -1.0 - i : 100.0 * owner + i;
        cr_expect_eq(v[i], want, "v[%d] = %g, want %g", i, v[i], want);
    }
}
