/* dist.h — a run's processes over MPI (contract §10): the transport that
 * fills struct hm_run_comm (run.h), and the sharding of evaluation windows.
 *
 * Started by a launcher (mpirun, srun) with N > 1 processes, a tool calls
 * hm_dist_open once: MPI starts and every hook of the comm is MPI's. One
 * process, or a build without MPI (HM_MPI=OFF, or no MPI found), needs
 * nothing: hm_dist_open leaves the run single. A tool started by a launcher
 * with N > 1 in a build without MPI must not run N copies that each write
 * the output: hm_dist_open says so (HM_ERR_UNSUPPORTED), and the tool exits 2.
 *
 * The gradient sum (run.h: fixed order, equal to one process with
 * --grad-accum G). The trainable tensors, in p's order, are split into N
 * contiguous shares at tensor boundaries (hm_run_partition); process q owns
 * share q. After each micro-step every process downloads its gradients to a
 * host buffer and sends share q to process q (MPI_Alltoallv: a
 * reduce-scatter whose order MPI does not choose); the owner adds the N
 * pieces it receives to its share of the sum in rank order, in fp32. After
 * the step's last micro-step the shares are gathered (MPI_Allgatherv) and
 * uploaded as every process's gradients. Bytes each process sends a step:
 * A · (N−1)/N · 4·P for the folds and (N−1)/N · 4·P for the gather (P
 * trainable values).
 *
 * NCCL slots in at the same two hooks: fold_grads and gather_grads take the
 * backend's gradients, so a CUDA transport reduces device buffers with a
 * communicator bootstrapped over MPI (its unique id sent by MPI_Bcast), in
 * the same rank order (ncclReduceScatter's order is not fixed: the owner
 * receives the pieces and adds them itself, as here).
 *
 * A process that dies (kill -9) ends the run: the launcher ends the others
 * (mpirun stops them when one exits without MPI_Finalize), none of them
 * waits forever in a collective. Only process 0 writes, atomically, so what
 * is left is the last good state. */
#ifndef HM_DIST_H
#define HM_DIST_H

#include <stdint.h>

#include "hm_error.h"
#include "run.h"

/* 1 when built with MPI (HM_MPI). */
int hm_dist_built(void);

/* Processes the launcher says this run has, from its environment
 * (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_SIZE, ...): 1 when none is set. */
int hm_dist_launched_size(void);

/* Processes of the run on this machine, from the launcher's environment
 * (OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS): 1 when none is set. */
int hm_dist_local_size(void);

/* When started by a launcher with more than one process: start MPI and
 * fill *comm (owned by the caller; its ctx is released by hm_dist_close).
 * Otherwise *comm is a single process (size 1, no hooks). Not under a
 * launcher, or N = 1: HM_OK and nothing starts. Without MPI and N > 1:
 * HM_ERR_UNSUPPORTED. */
enum hm_status hm_dist_open(struct hm_run_comm *comm, struct hm_error *err);

/* Ends MPI: MPI_Finalize when code is 0; else MPI_Abort with code, so the
 * launcher ends the other processes now instead of leaving them in a
 * collective. Nothing when MPI was not started. */
void hm_dist_close(int code);

#endif
