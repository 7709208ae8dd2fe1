/*
 * affinity.c — the CPUs this process may run on (its affinity mask, as set by taskset, a
 * cgroup cpuset or an MPI launcher's binding), so thread counts can be fitted to the cores a
 * rank was actually given rather than to the whole machine.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

int dtnn__cpu_affinity(uint64_t mask[DTNN_CPU_MASK_WORDS])
{
    memset(mask, 0, sizeof(uint64_t) * DTNN_CPU_MASK_WORDS);
    int count = 0;
#ifdef __linux__
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        for (int cpu = 0; cpu < CPU_SETSIZE && cpu < 64 * DTNN_CPU_MASK_WORDS; cpu++)
            if (CPU_ISSET(cpu, &set)) {
                mask[cpu / 64] |= 1ull << (cpu % 64);
                count++;
            }
        if (count > 0)
            return count;
    }
#endif
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    count = online > 0 ? (int)DTNN_MIN(online, 64 * DTNN_CPU_MASK_WORDS) : 1;
    for (int cpu = 0; cpu < count; cpu++)
        mask[cpu / 64] |= 1ull << (cpu % 64);
    return count;
}
