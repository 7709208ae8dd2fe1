/*
 * launch.h — what started this process, read from the environment its launcher set (Open
 * MPI's mpirun, MPICH's Hydra mpiexec, Slurm's srun and sbatch), and a short form of a list of
 * host names ("dtnn-h[0-1]"). No MPI here: the communicators call these before or after
 * MPI's own start-up, and the single-process one calls them too.
 */
#ifndef DTNN_COMM_LAUNCH_H
#define DTNN_COMM_LAUNCH_H

#include "../core/internal.h"

/* How this process was started, for the start-up line: "mpirun", "mpiexec (hydra)",
 * "srun --mpi=pmix", "sbatch+mpirun", "sbatch+srun --mpi=pmix", each followed by
 * ", Slurm job ID" inside a Slurm job; "" when nothing launched it. */
void launch_describe(char *out, size_t cap);

/* The tasks of this job step when srun started this process itself (not an MPI launcher's
 * daemons that srun started inside an allocation, whose ranks also see SLURM_* variables of
 * the daemons' step), else 0. *plugin (may be NULL) receives srun's --mpi plugin, "none" where
 * srun names none. */
int launch_srun_tasks(const char **plugin);

/* This host's name (gethostname), "?" where it has none. */
void launch_this_host(char *out, size_t cap);

/* The n host names at names, names + stride, ... (each NUL-terminated within stride bytes)
 * written to out sorted, without repeats and compressed as Slurm writes host lists:
 * "dtnn-h[0-3,6]", "node[007-009],login1". When that does not fit in cap, the first ones
 * followed by "... (N hosts)". */
void launch_hostlist(const char *names, int n, size_t stride, char *out, size_t cap);

#endif
