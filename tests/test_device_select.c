/* test_device_select.c — the device a process of a multi-process run opens
 * (kernels/device_select.h), without a GPU: a fake environment per case.
 * `mpirun -np 2 hm-finetune ... --device cuda` on one machine with two GPUs
 * sets OMPI_COMM_WORLD_LOCAL_RANK=0 and 1: devices 0 and 1. And the order
 * of the shared backends' teardown at exit (dispatch.c): a device backend
 * closes before the runtime it opened tears itself down. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend.h"
#include "backend_impl.h"
#include "device_select.h"

/* the fake environment: NAME=VALUE pairs, NULL-terminated */
static const char *const *g_env;

static const char *fake_env(const char *name)
{
    for (int i = 0; g_env && g_env[i]; i += 2)
        if (strcmp(g_env[i], name) == 0)
            return g_env[i + 1];
    return NULL;
}

static int pick(const char *const *env, int n, char *why, size_t len)
{
    g_env = env;
    return hm_device_select(fake_env, n, why, len);
}

Test(device_select, mpirun_np_2_takes_devices_0_and_1)
{
    char why[256];
    const char *r0[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "0", "OMPI_COMM_WORLD_RANK", "0", NULL};
    const char *r1[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "1", "OMPI_COMM_WORLD_RANK", "1", NULL};
    cr_expect_eq(pick(r0, 2, why, sizeof why), 0, "%s", why);
    cr_expect_eq(pick(r1, 2, why, sizeof why), 1, "%s", why);
    cr_expect(strstr(why, "local rank 1 (OMPI_COMM_WORLD_LOCAL_RANK) of 2"), "%s", why);
}

Test(device_select, every_launcher_variable)
{
    const char *vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_RANK",
                          "MPI_LOCALRANKID", "PMI_LOCAL_RANK", "PMIX_LOCAL_RANK",
                          "SLURM_LOCALID", "LOCAL_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *env[] = {vars[i], "3", NULL};
        char why[256];
        cr_expect_eq(pick(env, 4, why, sizeof why), 3, "%s: %s", vars[i], why);
        cr_expect(strstr(why, vars[i]), "%s", why);
    }
}

Test(device_select, the_global_rank_is_not_the_local_one)
{
    /* 2 machines × 2 processes: global rank 3 is local rank 1 */
    const char *env[] = {"OMPI_COMM_WORLD_RANK", "3", "OMPI_COMM_WORLD_LOCAL_RANK", "1",
                         "PMI_RANK", "3", NULL};
    cr_expect_eq(pick(env, 2, NULL, 0), 1);
}

Test(device_select, more_ranks_than_devices_wrap)
{
    const char *env[] = {"SLURM_LOCALID", "5", NULL};
    cr_expect_eq(pick(env, 2, NULL, 0), 1);
    /* srun --gpus-per-task=1: CUDA_VISIBLE_DEVICES leaves each rank one device */
    const char *one[] = {"SLURM_LOCALID", "1", "CUDA_VISIBLE_DEVICES", "1", NULL};
    cr_expect_eq(pick(one, 1, NULL, 0), 0);
}

Test(device_select, no_launcher_is_device_0)
{
    const char *env[] = {NULL};
    char why[256];
    cr_expect_eq(pick(env, 8, why, sizeof why), 0);
    cr_expect(strstr(why, "device 0"), "%s", why);
}

Test(device_select, explicit_device_wins_and_is_checked)
{
    char why[256];
    const char *env[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "0", "HM_CUDA_DEVICE", "1", NULL};
    cr_expect_eq(pick(env, 2, why, sizeof why), 1, "%s", why);
    const char *bad[] = {"HM_CUDA_DEVICE", "2", NULL};
    cr_expect_eq(pick(bad, 2, why, sizeof why), -1);
    cr_expect(strstr(why, "HM_CUDA_DEVICE='2'"), "%s", why);
}

Test(device_select, malformed_values_and_no_device_are_errors)
{
    char why[256];
    const char *env[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "1x", NULL};
    cr_expect_eq(pick(env, 2, why, sizeof why), -1);
    cr_expect(strstr(why, "'1x' is not a local rank"), "%s", why);
    const char *neg[] = {"SLURM_LOCALID", "-1", NULL};
    cr_expect_eq(pick(neg, 2, NULL, 0), -1);
    const char *none[] = {NULL};
    cr_expect_eq(pick(none, 0, why, sizeof why), -1);
}

/* ---- teardown order at exit -------------------------------------------------- */

/* A fake device backend whose open starts a "runtime" that registers its
 * teardown with atexit (as libcudart does at its first call); each event
 * is one byte written to g_fd: 'c' close, 't' runtime teardown. */
static int g_fd = -1;

static void runtime_teardown(void) { (void)!write(g_fd, "t", 1); }

static enum hm_status fake_open(void **ctx, struct hm_error *err)
{
    atexit(runtime_teardown);
    *ctx = &g_fd;
    return HM_OK;
}

static void fake_close(void *ctx) { (void)!write(g_fd, "c", 1); }

static struct hm_backend_ops g_fake_ops;
static struct hm_backend_desc g_fake = {"fake-device", &g_fake_ops, fake_open};

Test(device_select, a_device_backend_closes_before_its_runtime_tears_down)
{
    g_fake_ops.close = fake_close;
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        g_fd = fds[1];
        /* a CPU backend first: the order that broke the single handler
         * registered at the first open */
        const struct hm_backend *be;
        struct hm_error err;
        if (hm_backend_acquire("ref", &be, &err) != HM_OK)
            _exit(3);
        hm_backend_register(&g_fake);
        if (hm_backend_acquire("fake-device", &be, &err) != HM_OK)
            _exit(4);
        exit(0); /* the atexit handlers run */
    }
    close(fds[1]);
    char got[8] = {0};
    ssize_t n = 0, r;
    while (n < (ssize_t)sizeof got - 1 && (r = read(fds[0], got + n, sizeof got - 1 - n)) > 0)
        n += r;
    close(fds[0]);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    cr_expect_str_eq(got, "ct", "events at exit: '%s' (want close 'c' before the runtime's "
                     "teardown 't')", got);
}
