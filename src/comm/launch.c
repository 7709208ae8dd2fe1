/*
 * launch.c — the launcher of this process from its environment, and host lists in Slurm's
 * short form. The variables were read from each launcher's ranks: Open MPI 4.1's mpirun sets
 * OMPI_COMM_WORLD_SIZE; MPICH 4.0's Hydra sets MPI_LOCALNRANKS (older Hydra
 * HYDRA_CONTROL_FD); Slurm 22.05's srun sets SLURM_STEP_NUM_TASKS, SLURM_PROCID and, with an
 * MPI plugin, SLURM_MPI_TYPE; sbatch puts ENVIRONMENT=BATCH into the batch script, which srun
 * and mpirun pass on to the ranks. An MPI launcher inside a Slurm job starts its daemons with
 * srun, so its ranks see the daemons' SLURM_* too: the MPI launcher's own variables decide.
 * Nothing here decides rank or size; MPI does (comm_mpi.c).
 */
#include <string.h>
#include <unistd.h>

#include "launch.h"

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static const char *mpi_launcher(void)
{
    if (env("OMPI_COMM_WORLD_SIZE"))
        return "mpirun";
    if (env("MPI_LOCALNRANKS") || env("HYDRA_CONTROL_FD"))
        return "mpiexec (hydra)";
    return NULL;
}

int launch_srun_tasks(const char **plugin)
{
    const char *tasks = env("SLURM_STEP_NUM_TASKS");
    if (!tasks || !env("SLURM_PROCID") || mpi_launcher())
        return 0;
    if (plugin) {
        const char *p = env("SLURM_MPI_TYPE");
        *plugin = p ? p : "none";
    }
    return atoi(tasks);
}

void launch_describe(char *out, size_t cap)
{
    const char *plugin = NULL;
    const char *who = mpi_launcher();
    char srun[64];
    if (!who && launch_srun_tasks(&plugin) > 0) {
        snprintf(srun, sizeof srun, "srun --mpi=%s", plugin);
        who = srun;
    }
    if (!who && env("PMIX_RANK"))
        who = "a PMIx launcher";
    if (!who && env("PMI_SIZE"))
        who = "a PMI launcher";
    const char *job = env("SLURM_JOB_ID");
    const char *batch = env("ENVIRONMENT");
    int in_batch = job && batch && !strcmp(batch, "BATCH");
    if (!who && !job) {
        if (cap > 0)
            out[0] = '\0';
        return;
    }
    /* dtnn run by the batch script itself is "sbatch"; in an salloc shell, the job alone. */
    if (!who)
        snprintf(out, cap, "%sSlurm job %s", in_batch ? "sbatch, " : "", job);
    else
        snprintf(out, cap, "%s%s%s%s", in_batch ? "sbatch+" : "", who, job ? ", Slurm job " : "",
                 job ? job : "");
}

void launch_this_host(char *out, size_t cap)
{
    if (cap == 0)
        return;
    if (gethostname(out, cap) != 0 || !out[0])
        snprintf(out, cap, "?");
    out[cap - 1] = '\0';
}

/* A host name as prefix + trailing number: "node007" is "node", 7, printed 3 wide (padded);
 * "dtnn-h12" is "dtnn-h", 12, unpadded (width 0), and groups with dtnn-h9 as Slurm's do. An
 * unpadded number as long as a padded one of the same prefix ("node10" beside "node07") takes
 * its width. */
typedef struct {
    const char *name;
    size_t prefix;          /* bytes before the number */
    int digits;             /* 0: no number */
    int width;              /* printed width: digits when zero-padded, else 0 */
    unsigned long number;
} host_key;

static host_key host_parse(const char *name)
{
    host_key k = {.name = name};
    size_t len = strlen(name), p = len;
    /* At most 9 digits so that the number fits in an unsigned long anywhere. */
    while (p > 0 && len - p < 9 && name[p - 1] >= '0' && name[p - 1] <= '9')
        p--;
    k.prefix = p;
    k.digits = (int)(len - p);
    k.number = k.digits ? strtoul(name + p, NULL, 10) : 0;
    k.width = k.digits > 1 && name[p] == '0' ? k.digits : 0;
    return k;
}

static int prefix_cmp(const host_key *a, const host_key *b)
{
    int c = memcmp(a->name, b->name, DTNN_MIN(a->prefix, b->prefix));
    if (c)
        return c;
    return (a->prefix > b->prefix) - (a->prefix < b->prefix);
}

/* Same group: same prefix, both numbered, same padding. */
static int same_group(const host_key *a, const host_key *b)
{
    return !prefix_cmp(a, b) && a->digits && b->digits && a->width == b->width;
}

/* Within one prefix: unnumbered first, then by width, number, name. */
static int number_cmp(const host_key *a, const host_key *b)
{
    if ((a->digits != 0) != (b->digits != 0))
        return a->digits ? 1 : -1;
    if (a->width != b->width)
        return a->width < b->width ? -1 : 1;
    if (a->number != b->number)
        return a->number < b->number ? -1 : 1;
    return strcmp(a->name, b->name);
}

static int host_cmp(const void *pa, const void *pb)
{
    const host_key *a = pa, *b = pb;
    int c = prefix_cmp(a, b);
    return c ? c : number_cmp(a, b);
}

/* Sorts the keys and gives unpadded numbers the width of a padded one as long. */
static void host_sort(host_key *k, int n)
{
    qsort(k, (size_t)n, sizeof *k, host_cmp);
    for (int i = 0; i < n;) {
        int j = i, padded = 0;
        while (j < n && !prefix_cmp(&k[i], &k[j])) {
            padded |= k[j].width ? 1 << k[j].width : 0;
            j++;
        }
        int changed = 0;
        for (int r = i; r < j; r++)
            if (!k[r].width && k[r].digits > 1 && (padded >> k[r].digits & 1))
                k[r].width = k[r].digits, changed = 1;
        if (changed)
            qsort(k + i, (size_t)(j - i), sizeof *k, host_cmp);
        i = j;
    }
}

/* out with its length and capacity; `reserve` bytes at the end stay free. */
typedef struct {
    char *s;
    size_t len, cap, reserve;
} text;

/* Appends head_len bytes of head, then piece; returns 0 and appends nothing when that would
 * not fit. */
static int put(text *t, const char *head, size_t head_len, const char *piece)
{
    size_t n = head_len + strlen(piece);
    if (t->len + n + t->reserve >= t->cap)
        return 0;
    memcpy(t->s + t->len, head, head_len);
    memcpy(t->s + t->len + head_len, piece, strlen(piece) + 1);
    t->len += n;
    return 1;
}

static int put_str(text *t, const char *s) { return put(t, "", 0, s); }

/* Writes the sorted, distinct keys; 1 when all fit, 0 when it stopped at one that did not
 * (the text then ends in a complete name or bracket). */
static int write_hosts(const host_key *k, int n, text *t)
{
    for (int i = 0; i < n;) {
        int j = i + 1;
        while (j < n && same_group(&k[i], &k[j]))
            j++;
        size_t mark = t->len;
        if (i > 0 && !put_str(t, ","))
            return 0;
        if (j - i == 1) {
            if (!put(t, "", 0, k[i].name)) {
                t->len = mark, t->s[mark] = '\0';
                return 0;
            }
            i = j;
            continue;
        }
        if (!put(t, k[i].name, k[i].prefix, "[")) {
            t->len = mark, t->s[mark] = '\0';
            return 0;
        }
        size_t open = t->len;
        for (int r = i; r < j;) {
            int e = r;
            while (e + 1 < j && k[e + 1].number == k[e].number + 1)
                e++;
            char range[48];
            if (e == r)
                snprintf(range, sizeof range, "%s%0*lu", r > i ? "," : "", k[r].width,
                         k[r].number);
            else
                snprintf(range, sizeof range, "%s%0*lu-%0*lu", r > i ? "," : "", k[r].width,
                         k[r].number, k[e].width, k[e].number);
            /* One byte for the closing bracket. */
            t->reserve++;
            int ok = put_str(t, range);
            t->reserve--;
            if (!ok) {
                if (t->len == open)
                    t->len = mark, t->s[mark] = '\0';
                else
                    put_str(t, "]");
                return 0;
            }
            r = e + 1;
        }
        if (!put_str(t, "]"))
            return 0;
        i = j;
    }
    return 1;
}

void launch_hostlist(const char *names, int n, size_t stride, char *out, size_t cap)
{
    if (cap == 0)
        return;
    out[0] = '\0';
    host_key *k = n > 0 ? malloc(sizeof *k * (size_t)n) : NULL;
    if (!k) {
        if (n > 0)
            snprintf(out, cap, "%d hosts", n);
        return;
    }
    for (int i = 0; i < n; i++)
        k[i] = host_parse(names + (size_t)i * stride);
    host_sort(k, n);
    int distinct = 0;
    for (int i = 0; i < n; i++)
        if (distinct == 0 || strcmp(k[distinct - 1].name, k[i].name))
            k[distinct++] = k[i];
    text t = {out, 0, cap, 0};
    if (!write_hosts(k, distinct, &t)) {
        char tail[48];
        snprintf(tail, sizeof tail, ",... (%d hosts)", distinct);
        t.len = 0, t.reserve = strlen(tail), out[0] = '\0';
        write_hosts(k, distinct, &t);
        t.reserve = 0;
        put_str(&t, t.len ? tail : tail + 1);
    }
    free(k);
}
