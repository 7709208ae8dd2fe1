/*
 * test_launch.c — the launcher named from its environment (as Open MPI's mpirun, Hydra, srun
 * and sbatch set it; the variables are the ones read from real ranks, see src/comm/launch.c)
 * and host lists in Slurm's short form, including the cut to "first ones ... (N hosts)".
 * No launcher runs here: the environment is set by hand.
 */
#include <stdlib.h>
#include <string.h>

#include "comm/launch.h"
#include "testutil.h"

static void check_list(const char *const *names, int n, size_t cap, const char *want)
{
    char flat[64][32] = {{0}};
    for (int i = 0; i < n; i++)
        snprintf(flat[i], sizeof flat[i], "%s", names[i]);
    char out[256];
    launch_hostlist(flat[0], n, sizeof flat[0], out, cap);
    if (strcmp(out, want)) {
        printf("FAIL: host list '%s', want '%s'\n", out, want);
        test_failures++;
    }
}

static void test_hostlist(void)
{
    const char *two[] = {"dtnn-h1", "dtnn-h0", "dtnn-h1"};
    check_list(two, 3, 256, "dtnn-h[0-1]");
    const char *one[] = {"vm"};
    check_list(one, 1, 256, "vm");
    const char *mixed[] = {"node009", "login", "node007", "node008", "node011", "dtnn-h9",
                           "dtnn-h10", "n1"};
    check_list(mixed, 8, 256, "dtnn-h[9-10],login,n1,node[007-009,011]");
    /* node00..node39: the cut keeps whole ranges and closes the bracket. */
    const char *many[40];
    char buf[40][16];
    for (int i = 0; i < 40; i++) {
        snprintf(buf[i], sizeof buf[i], "node%02d", i * 7 % 40);
        many[i] = buf[i];
    }
    check_list(many, 40, 256, "node[00-39]");
    for (int i = 0; i < 40; i++)
        snprintf(buf[i], sizeof buf[i], "node%02d", 2 * i);
    check_list(many, 40, 40, "node[00,02,04,06,08,10],... (40 hosts)");
    check_list(many, 40, 16, "... (40 hosts)");
}

static void check_describe(const char *want)
{
    char out[96];
    launch_describe(out, sizeof out);
    if (strcmp(out, want)) {
        printf("FAIL: launcher '%s', want '%s'\n", out, want);
        test_failures++;
    }
}

static void clear_env(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS",
                                       "HYDRA_CONTROL_FD", "SLURM_STEP_NUM_TASKS",
                                       "SLURM_PROCID", "SLURM_MPI_TYPE", "SLURM_JOB_ID",
                                       "ENVIRONMENT", "PMIX_RANK", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
}

static void test_describe(void)
{
    const char *plugin = NULL;
    clear_env();
    check_describe("");
    CHECK(launch_srun_tasks(NULL) == 0);
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    check_describe("mpirun");
    /* mpirun inside a batch job: its daemons' srun step shows, the ranks are mpirun's. */
    setenv("SLURM_JOB_ID", "42", 1);
    setenv("ENVIRONMENT", "BATCH", 1);
    setenv("SLURM_STEP_NUM_TASKS", "2", 1);
    setenv("SLURM_PROCID", "1", 1);
    check_describe("sbatch+mpirun, Slurm job 42");
    CHECK(launch_srun_tasks(NULL) == 0);
    unsetenv("OMPI_COMM_WORLD_SIZE");
    setenv("SLURM_STEP_NUM_TASKS", "4", 1);
    setenv("SLURM_MPI_TYPE", "pmix", 1);
    check_describe("sbatch+srun --mpi=pmix, Slurm job 42");
    CHECK(launch_srun_tasks(&plugin) == 4 && !strcmp(plugin, "pmix"));
    unsetenv("ENVIRONMENT");
    unsetenv("SLURM_MPI_TYPE");
    check_describe("srun --mpi=none, Slurm job 42");
    CHECK(launch_srun_tasks(&plugin) == 4 && !strcmp(plugin, "none"));
    /* The batch script's own step has SLURM_PROCID but no step task count. */
    unsetenv("SLURM_STEP_NUM_TASKS");
    setenv("ENVIRONMENT", "BATCH", 1);
    check_describe("sbatch, Slurm job 42");
    clear_env();
    setenv("MPI_LOCALNRANKS", "2", 1);
    check_describe("mpiexec (hydra)");
    clear_env();
}

int main(void)
{
    test_hostlist();
    test_describe();
    return test_finish("test_launch");
}
