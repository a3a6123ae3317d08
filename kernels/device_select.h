/* device_select.h — which GPU a process uses (the CUDA backend's open calls
 * this; plain C, no CUDA, so that it is unit-tested on machines without a
 * GPU: tests/test_device_select.c).
 *
 * Under a launcher that starts several processes on one machine (mpirun,
 * srun), each process takes the device of its *local* rank, modulo the
 * number of devices it sees:
 *   HM_CUDA_DEVICE=<n>                 (explicit; wins over everything)
 *   OMPI_COMM_WORLD_LOCAL_RANK         (Open MPI)
 *   MV2_COMM_WORLD_LOCAL_RANK          (MVAPICH2)
 *   MPI_LOCALRANKID                    (MPICH / Intel MPI, Hydra)
 *   PMI_LOCAL_RANK, PMIX_LOCAL_RANK    (PMI and PMIx launchers)
 *   SLURM_LOCALID                      (srun)
 *   LOCAL_RANK                         (torchrun-style launchers)
 * and none of them: device 0. The indices count the devices that
 * CUDA_VISIBLE_DEVICES leaves visible (the CUDA runtime renumbers them from
 * 0), so a launcher that gives each process one device through
 * CUDA_VISIBLE_DEVICES (srun --gpus-per-task=1) gives every process n = 1
 * and device 0, its own. */
#ifndef HM_DEVICE_SELECT_H
#define HM_DEVICE_SELECT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* An environment lookup: the value of name, or NULL when unset (getenv's
 * contract; tests pass their own). */
typedef const char *(*hm_env_lookup)(const char *name);

/* The device index in [0, n_devices) this process uses (rules above), or
 * -1 when n_devices < 1 or a variable holds no non-negative integer, or
 * HM_CUDA_DEVICE is not below n_devices. why (why_len bytes, may be NULL)
 * gets a one-line reason either way, e.g. "local rank 1
 * (OMPI_COMM_WORLD_LOCAL_RANK) of 2 visible devices". */
int hm_device_select(hm_env_lookup env, int n_devices, char *why, size_t why_len);

#ifdef __cplusplus
}
#endif

#endif
