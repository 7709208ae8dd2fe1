/*
 * launch.c — `dtnn launch`: a supervisor that runs `dtnn train` under mpirun over a list of
 * hosts and, when the job dies of something a restart can get past (a host lost, a rank
 * killed, a communication failure), restarts it from its newest complete checkpoint on the
 * hosts that still answer, with fewer ranks and the same global batch, up to --max-restarts.
 *
 * Design, and why:
 *  - It only supervises; it does not detect failures itself. A rank that fails ends the whole
 *    job within seconds with its message (comm_mpi.c aborts, Open MPI kills the job when a
 *    daemon is lost), so waiting for mpirun to exit is enough, and no heartbeat is needed.
 *  - Which failures are transient comes from the exit code, never from guessing at text: the
 *    CLI exits 1 for an error a rerun repeats (bad input, non-finite loss) and 2 for a usage
 *    error, and Open MPI's mpirun exits with the code a rank gave MPI_Abort; 3 means a
 *    communication failure, 128 + N a signal, anything else is the launcher's own failure
 *    (205: a lost daemon). A probe decides which hosts are alive; a lost host makes the
 *    failure transient whatever the code, since a dead peer explains any message.
 *  - The probe is a command per host with a timeout, run in parallel: by default the rsh agent
 *    mpirun was given (plm_rsh_agent) or ssh, with `HOST true`, since what matters is whether
 *    mpirun could start a daemon there.
 *  - Resuming needs no help from the trainer: checkpoints are written atomically and carry a
 *    checksum, the --keep copies sit beside --save, and resuming on another rank count trains
 *    the same (the batch is global). The newest file whose checksum holds is taken.
 *  - Each restart is one JSON object line appended to the train command's --log, between two
 *    runs (so nothing else writes it then); the resumed trainer appends after it.
 * Not done here: the supervisor's own host is not protected (run it where mpirun may run, a
 * login or first node), and the hostfile it writes is Open MPI's ("HOST slots=N"). fork,
 * execvp and waitpid throughout: no shell parses the user's arguments.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli_options.h"
#include "dtnn.h"

#define MAX_HOSTS 1024
#define MAX_ARGS 4096

/* A signal handler can only talk through globals: the count of SIGINT / SIGTERM received and
 * the last one, which the main loop forwards to the job (and then restarts nothing). */
static volatile sig_atomic_t signals_seen, last_signal;

static void on_signal(int sig)
{
    last_signal = sig;
    signals_seen++;
}

typedef struct {
    char *name;
    int slots;
    int alive;
} host;

typedef struct {
    host hosts[MAX_HOSTS];
    int n_hosts;
    const char *mpirun, *dtnn, *tmpdir;
    const char *mpirun_words[MAX_ARGS]; /* --mpirun-args split on blanks ({attempt} kept) */
    int n_mpirun_words;
    char *mpirun_buf[CLI_MAX_VALUES];   /* the copies those words point into */
    const char *probe[64];              /* probe command words ({host} kept) */
    int n_probe;
    char *probe_buf;
    double probe_timeout;
    char **train;                       /* argv after "--", starting with "train" */
    int n_train;
    const char *save, *log, *resume;    /* the train command's own options */
    int64_t batch, accumulate;
    int64_t started;                    /* checkpoints older than this are another run's */
    char reason_line[512];              /* the job's most telling stderr line */
    int reason_rank;                    /* its rank (see note_line): higher tells more */
    int after_rule;                     /* the last line was a rule of dashes */
} launch;

static cli_opt launch_opts[] = {
    {"hosts", OPT_STRING, NULL, "comma-separated hosts, e.g. node1,node2,node3", 0, NULL, 0},
    {"hostfile", OPT_STRING, NULL, "file of hosts, one per line ('HOST [slots=N]', # comments)",
     0, NULL, 0},
    {"ranks-per-host", OPT_INT, "1", "ranks per host (a hostfile's slots=N wins)", 0, NULL, 0},
    {"mpirun", OPT_STRING, "mpirun", "the MPI launcher (Open MPI's)", 0, NULL, 0},
    {"mpirun-args", OPT_STRINGS, NULL, "extra launcher arguments, split on blanks; {attempt} "
     "becomes the start's number (0, 1, ..)", 0, NULL, 0},
    {"dtnn", OPT_STRING, NULL, "the dtnn the ranks run (default: this one's path)", 0, NULL, 0},
    {"probe", OPT_STRING, NULL, "command that succeeds when a host is alive; {host} is the host "
     "(default: the --mca plm_rsh_agent in --mpirun-args, else ssh -o BatchMode=yes, then "
     "{host} true)", 0, NULL, 0},
    {"probe-timeout", OPT_FLOAT, "10", "seconds a probe may take before its host counts as lost",
     0, NULL, 0},
    {"max-restarts", OPT_INT, "3", "restarts after transient failures before giving up", 0,
     NULL, 0},
    {"help", OPT_FLAG, NULL, "show this help (the train command follows --)", 0, NULL, 0},
};

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* Splits s (modified) on blanks into words; returns 0, or -1 when more than max. */
static int split_words(char *s, const char **words, int *n, int max)
{
    char *save = NULL;
    for (char *tok = strtok_r(s, " \t\n", &save); tok; tok = strtok_r(NULL, " \t\n", &save)) {
        if (*n >= max)
            return -1;
        words[(*n)++] = tok;
    }
    return 0;
}

/* The supervisor's few small allocations: without them it cannot go on at all. */
static void *or_die(void *p)
{
    if (!p) {
        fprintf(stderr, "dtnn launch: out of memory\n");
        abort();
    }
    return p;
}

static char *dup_or_die(const char *s) { return or_die(strdup(s)); }

/* A malloc'd copy of word with every key (e.g. "{host}") replaced by value. */
static char *substitute(const char *word, const char *key, const char *value)
{
    const size_t kl = strlen(key), vl = strlen(value);
    size_t n = 0;
    for (const char *p = strstr(word, key); p; p = strstr(p + kl, key))
        n++;
    char *out = or_die(malloc(strlen(word) + n * vl + 1)), *o = out;
    const char *p = word;
    for (const char *q; (q = strstr(p, key)); p = q + kl) {
        memcpy(o, p, (size_t)(q - p));
        o += q - p;
        memcpy(o, value, vl);
        o += vl;
    }
    strcpy(o, p);
    return out;
}

static int add_host(launch *l, const char *name, int slots)
{
    if (!*name)
        return 0;
    for (int i = 0; i < l->n_hosts; i++)
        if (!strcmp(l->hosts[i].name, name))
            return cli_usage_error("launch", "host '%s' is listed twice", name);
    if (l->n_hosts == MAX_HOSTS)
        return cli_usage_error("launch", "more than %s hosts", "1024");
    l->hosts[l->n_hosts++] = (host){dup_or_die(name), slots, 1};
    return 0;
}

/* --hosts a,b,c or --hostfile FILE ("HOST [slots=N]" lines). Returns 0 or an exit code. */
static int read_hosts(launch *l, const char *list, const char *file, int per_host)
{
    int rc = 0;
    if (list) {
        char *copy = dup_or_die(list), *save = NULL;
        for (char *h = strtok_r(copy, ",", &save); h && !rc; h = strtok_r(NULL, ",", &save))
            rc = add_host(l, h, per_host);
        free(copy);
        return rc;
    }
    FILE *f = fopen(file, "r");
    if (!f) {
        fprintf(stderr, "dtnn launch: cannot read the hostfile '%s': %s\n", file,
                strerror(errno));
        return 2;
    }
    char line[1024];
    while (!rc && fgets(line, sizeof line, f)) {
        char *hash = strchr(line, '#'), name[512];
        if (hash)
            *hash = 0;
        int slots = per_host, used = 0;
        if (sscanf(line, "%511s%n", name, &used) != 1)
            continue;
        const char *s = strstr(line + used, "slots=");
        if (s && ((slots = atoi(s + 6)) < 1 || slots > 4096)) {
            fprintf(stderr, "dtnn launch: %s: host %s has slots=%s\n", file, name, s + 6);
            rc = 2;
        } else {
            rc = add_host(l, name, slots);
        }
    }
    fclose(f);
    return rc;
}

/* The value of train option --name (as "--name V" or "--name=V"), or NULL. */
static const char *train_value(const launch *l, const char *name)
{
    const size_t n = strlen(name);
    for (int i = 1; i < l->n_train; i++) {
        const char *a = l->train[i];
        if (strncmp(a, "--", 2) || strncmp(a + 2, name, n))
            continue;
        if (a[2 + n] == '=')
            return a + 3 + n;
        if (!a[2 + n] && i + 1 < l->n_train)
            return l->train[i + 1];
    }
    return NULL;
}

/* The most ranks, at most the slots of the hosts alive, that the global batch (and its
 * micro-batches) divides by: the trainer refuses any other count. */
static int choose_ranks(const launch *l, int quiet)
{
    int slots = 0;
    for (int i = 0; i < l->n_hosts; i++)
        slots += l->hosts[i].alive ? l->hosts[i].slots : 0;
    int r = slots;
    while (r > 0 && l->batch % ((int64_t)r * l->accumulate))
        r--;
    if (r > 0 && r < slots && !quiet)
        fprintf(stderr, "dtnn launch: %d of the %d slots, since --batch-size %lld must divide "
                "by the ranks x --accumulate %lld\n", r, slots, (long long)l->batch,
                (long long)l->accumulate);
    return r;
}

/* Runs every alive host's probe at once and marks the ones that fail or overrun the timeout
 * as lost. Each probe runs in its own process group, so a timeout kills what it started. */
static void probe_hosts(launch *l)
{
    pid_t pids[MAX_HOSTS];
    for (int i = 0; i < l->n_hosts; i++) {
        pids[i] = -1;
        if (!l->hosts[i].alive)
            continue;
        const char *argv[72];
        int n = 0, has_host = 0;
        char *owned[72];
        for (int k = 0; k < l->n_probe; k++) {
            has_host |= strstr(l->probe[k], "{host}") != NULL;
            argv[n] = owned[n] = substitute(l->probe[k], "{host}", l->hosts[i].name);
            n++;
        }
        if (!has_host) {
            argv[n] = owned[n] = dup_or_die(l->hosts[i].name);
            n++;
            argv[n] = owned[n] = dup_or_die("true");
            n++;
        }
        argv[n] = NULL;
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            setpgid(0, 0);
            int null = open("/dev/null", O_RDWR);
            dup2(null, 0), dup2(null, 1), dup2(null, 2);
            execvp(argv[0], (char **)argv);
            _exit(127);
        }
        for (int k = 0; k < n; k++)
            free(owned[k]);
        if (pid < 0)
            l->hosts[i].alive = 0;
        else
            setpgid(pid, pid), pids[i] = pid;
    }
    const double deadline = now_seconds() + l->probe_timeout;
    for (int left = 1; left;) {
        left = 0;
        for (int i = 0; i < l->n_hosts; i++) {
            int status;
            if (pids[i] <= 0)
                continue;
            pid_t r = waitpid(pids[i], &status, WNOHANG);
            if (r == 0 && now_seconds() < deadline) {
                left = 1;
                continue;
            }
            if (r == 0) {
                kill(-pids[i], SIGKILL);
                waitpid(pids[i], &status, 0);
                status = -1;
            }
            l->hosts[i].alive = r > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
            pids[i] = -1;
        }
        if (left)
            sleep_ms(50);
    }
}

/* Remembers the first line of the most telling kind about why the job ended: a rank's own
 * message (what comm_mpi.c prints before it aborts, 4) beats dtnn's message on one process
 * (3), which beats the launcher's notice that a process was killed (2), which beats the first
 * line of any help message Open MPI prints below a rule of dashes (1: a daemon lost). */
static void note_line(launch *l, const char *line)
{
    int rank = 0;
    if (!strncmp(line, "dtnn (rank ", 11))
        rank = 4;
    else if (!strncmp(line, "dtnn ", 5) && strncmp(line, "dtnn launch", 11))
        rank = 3;
    else if (strstr(line, "noticed that process") || strstr(line, "exited on signal"))
        rank = 2;
    else if (l->after_rule && line[0])
        rank = 1;
    l->after_rule = strspn(line, "-") >= 10 && !line[strspn(line, "-")];
    if (rank > l->reason_rank) {
        snprintf(l->reason_line, sizeof l->reason_line, "%.*s", (int)sizeof l->reason_line - 1,
                 line);
        l->reason_rank = rank;
    }
}

/* Starts argv with its stderr through a pipe (copied to ours line by line, to find the
 * reason), stdin from /dev/null and a process group of its own (so a Ctrl-C reaches it once,
 * from us). Forwards SIGINT / SIGTERM. Returns its exit code (128 + N for signal N), or -1. */
static int run_job(launch *l, char **argv)
{
    int fds[2];
    if (pipe(fds))
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return close(fds[0]), close(fds[1]), -1;
    if (pid == 0) {
        setpgid(0, 0);
        int null = open("/dev/null", O_RDONLY);
        dup2(null, 0);
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        execvp(argv[0], argv);
        fprintf(stderr, "dtnn launch: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    close(fds[1]);
    l->reason_line[0] = 0;
    l->reason_rank = l->after_rule = 0;
    char buf[4096], line[1024];
    size_t len = 0;
    int status = 0, exited = 0, open_pipe = 1, forwarded = 0, pressed = 0;
    double exit_time = 0, forward_time = 0;
    /* A daemon the launcher left behind may hold the pipe open: the launcher's own exit, and a
     * short drain of the pipe after it, end the wait. */
    while (!exited || (open_pipe && now_seconds() < exit_time + 2.0)) {
        if (signals_seen > forwarded && !exited) {
            forwarded = signals_seen;
            forward_time = now_seconds();
            kill(pid, last_signal);
        }
        /* mpirun that waits for a daemon it cannot reach any more ignores one signal (Open
         * MPI's "hit ctrl-c again within 5 seconds to forcibly terminate"): the signal goes
         * again after 10 s, and after 30 s the launcher's process group is killed. */
        const double waited = forwarded && !exited ? now_seconds() - forward_time : 0;
        if (waited > 10 && pressed == 0)
            pressed = 1, kill(pid, last_signal), kill(pid, last_signal);
        if (waited > 30 && pressed == 1)
            pressed = 2, kill(-pid, SIGKILL);
        struct pollfd pfd = {fds[0], POLLIN, 0};
        if (!open_pipe) {
            sleep_ms(200);
        } else if (poll(&pfd, 1, 200) > 0) {
            ssize_t got = read(fds[0], buf, sizeof buf);
            if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) {
                open_pipe = 0;
            } else if (got > 0) {
                fwrite(buf, 1, (size_t)got, stderr);
                fflush(stderr);
                for (ssize_t i = 0; i < got; i++) {
                    if (buf[i] != '\n' && len + 1 < sizeof line) {
                        line[len++] = buf[i];
                    } else if (buf[i] == '\n') {
                        line[len] = 0;
                        note_line(l, line);
                        len = 0;
                    }
                }
            }
        }
        if (!exited && waitpid(pid, &status, WNOHANG) == pid)
            exited = 1, exit_time = now_seconds();
    }
    close(fds[0]);
    return WIFEXITED(status) ? WEXITSTATUS(status) : CLI_EXIT_SIGNAL + WTERMSIG(status);
}

/* The newest complete checkpoint of the run: --save or one of its --keep copies written since
 * this supervisor started (a --save path reused from an earlier run may still hold that run's
 * copies, with more steps than this one has reached), or the --resume it was given. Returns a
 * malloc'd path (its step in *step), or NULL. */
static char *newest_checkpoint(const launch *l, int64_t *step)
{
    char path[PATH_MAX];
    dtnn_train_state ts;
    dtnn_error err = {0};
    *step = -1;
    if (l->save && !dtnn_checkpoint_newest(l->save, l->started, path, sizeof path, &ts, &err))
        *step = ts.step;
    if (l->resume && !dtnn_checkpoint_read_state(l->resume, &ts, &err) && ts.step > *step) {
        snprintf(path, sizeof path, "%s", l->resume);
        *step = ts.step;
    }
    return *step >= 0 ? dup_or_die(path) : NULL;
}

/* Appends s to f as a JSON string (quotes, backslashes and control characters escaped). */
static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void json_hosts(FILE *f, const launch *l, int alive)
{
    fputc('[', f);
    for (int i = 0, first = 1; i < l->n_hosts; i++)
        if (l->hosts[i].alive == alive) {
            fputs(first ? "" : ", ", f);
            json_string(f, l->hosts[i].name);
            first = 0;
        }
    fputc(']', f);
}

/* The restart's log line. A run killed while writing may have left half a line at the end of
 * the log; that part goes, so every line stays one JSON object. Then the line is appended in
 * one write. Printed on stderr too. */
static void log_restart(const launch *l, int restart, const char *reason, int rc, int ranks,
                        int64_t step, const char *from)
{
    char *text = NULL;
    size_t size = 0;
    FILE *m = open_memstream(&text, &size);
    if (!m)
        return;
    fprintf(m, "{\"event\": \"restart\", \"restart\": %d, \"reason\": ", restart);
    json_string(m, reason);
    fprintf(m, ", \"exit_code\": %d, \"lost_hosts\": ", rc);
    json_hosts(m, l, 0);
    fputs(", \"hosts\": ", m);
    json_hosts(m, l, 1);
    fprintf(m, ", \"ranks\": %d, \"resume_step\": %lld, \"resume_from\": ", ranks,
            (long long)(step > 0 ? step : 0));
    if (from)
        json_string(m, from);
    else
        fputs("null", m);
    fputs("}\n", m);
    fclose(m);
    fprintf(stderr, "dtnn launch: %s", text);
    if (l->log) {
        int fd = open(l->log, O_RDWR | O_CREAT, 0644);
        struct stat st;
        if (fd >= 0 && !fstat(fd, &st) && st.st_size > 0) {
            off_t keep = st.st_size;
            char c = 0;
            while (keep > 0 && pread(fd, &c, 1, keep - 1) == 1 && c != '\n')
                keep--;
            if (keep < st.st_size && ftruncate(fd, keep) == 0)
                fprintf(stderr, "dtnn launch: dropped a half-written last line of %s\n", l->log);
        }
        if (fd >= 0 && (lseek(fd, 0, SEEK_END) < 0 || write(fd, text, size) != (ssize_t)size))
            fprintf(stderr, "dtnn launch: cannot append to the log '%s': %s\n", l->log,
                    strerror(errno));
        if (fd >= 0)
            close(fd);
        else
            fprintf(stderr, "dtnn launch: cannot open the log '%s': %s\n", l->log,
                    strerror(errno));
    }
    free(text);
}

/* Whether a is one of the train options a resume replaces: the checkpoint holds everything,
 * and the trainer refuses --init (and so --init-exclude) beside --resume. Sets *pair when its
 * value is the next argument. */
static int replaced_by_resume(const char *a, int *pair)
{
    static const char *const names[] = {"--resume", "--init", "--init-exclude"};
    for (int k = 0; k < 3; k++) {
        const size_t n = strlen(names[k]);
        if (!strncmp(a, names[k], n) && (a[n] == 0 || a[n] == '=')) {
            *pair = a[n] == 0;
            return 1;
        }
    }
    return 0;
}

/* mpirun --hostfile FILE -np R [args] DTNN train ... [--resume CKPT]. */
static int build_argv(const launch *l, int attempt, int ranks, const char *hostfile,
                      const char *resume, char **argv, char **owned, int *n_owned)
{
    int n = 0;
    char num[32], np[32];
    snprintf(num, sizeof num, "%d", attempt);
    snprintf(np, sizeof np, "%d", ranks);
    argv[n++] = (char *)l->mpirun;
    argv[n++] = "--hostfile";
    argv[n++] = (char *)hostfile;
    argv[n++] = "-np";
    argv[n++] = owned[(*n_owned)++] = dup_or_die(np);
    for (int i = 0; i < l->n_mpirun_words && n < MAX_ARGS - 8; i++)
        argv[n++] = owned[(*n_owned)++] = substitute(l->mpirun_words[i], "{attempt}", num);
    argv[n++] = (char *)l->dtnn;
    for (int i = 0; i < l->n_train && n < MAX_ARGS - 4; i++) {
        const char *a = l->train[i];
        int pair = 0;
        if (resume && replaced_by_resume(a, &pair)) {
            i += pair;
            continue;
        }
        argv[n++] = (char *)a;
    }
    if (resume) {
        argv[n++] = "--resume";
        argv[n++] = (char *)resume;
    }
    argv[n] = NULL;
    return n < MAX_ARGS - 4 ? 0 : -1;
}

static int write_hostfile(const launch *l, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    for (int i = 0; i < l->n_hosts; i++)
        if (l->hosts[i].alive)
            fprintf(f, "%s slots=%d\n", l->hosts[i].name, l->hosts[i].slots);
    return fclose(f);
}

/* Why the job failed, and whether a restart may help: 1 transient, 0 permanent. */
static int classify(const launch *l, int rc, char *reason, size_t len)
{
    char lost[512] = "";
    size_t used = 0;
    for (int i = 0; i < l->n_hosts && used + 1 < sizeof lost; i++)
        if (!l->hosts[i].alive)
            used += (size_t)snprintf(lost + used, sizeof lost - used, "%s%s", used ? ", " : "",
                                     l->hosts[i].name);
    const char *what = rc == CLI_EXIT_ERROR   ? "a runtime error"
                       : rc == CLI_EXIT_USAGE ? "a usage error"
                       : rc == CLI_EXIT_COMM  ? "a communication error"
                       : rc == 126 || rc == 127 ? "a launcher that cannot run"
                       : rc > CLI_EXIT_SIGNAL ? "a process killed by a signal"
                                              : "the launcher's own failure";
    const char *line = l->reason_line[0] ? l->reason_line : "(no message)";
    if (used)
        snprintf(reason, len, "host%s %s lost (no answer to the probe); the job ended with "
                 "exit %d: %s", strchr(lost, ',') ? "s" : "", lost, rc, line);
    else
        snprintf(reason, len, "the job ended with exit %d (%s): %s", rc, what, line);
    if (used)
        return 1;
    return !(rc == CLI_EXIT_ERROR || rc == CLI_EXIT_USAGE || rc == 126 || rc == 127);
}

/* Now, by the clock of the file system that holds path (--save): the modification time of a
 * file made beside it. Checkpoints are stamped by that clock, which on a network file system
 * is the server's, and need not agree with this host's. */
static int64_t file_system_now(const char *path)
{
    char probe[PATH_MAX];
    struct stat st;
    snprintf(probe, sizeof probe, "%s.launch.%ld", path ? path : "", (long)getpid());
    int fd = path ? open(probe, O_WRONLY | O_CREAT | O_EXCL, 0600) : -1;
    int ok = fd >= 0 && !fstat(fd, &st);
    if (fd >= 0)
        close(fd), unlink(probe);
    return ok ? (int64_t)st.st_mtime : (int64_t)time(NULL) - 1;
}

/* Everything after the options: the supervision loop. Returns the exit code. */
static int supervise(launch *l, int max_restarts)
{
    l->started = file_system_now(l->save);
    probe_hosts(l);
    for (int i = 0; i < l->n_hosts; i++)
        if (!l->hosts[i].alive)
            fprintf(stderr, "dtnn launch: host %s does not answer the probe; starting without "
                    "it\n", l->hosts[i].name);
    char *resume = NULL;
    int rc = 1;
    for (int attempt = 0;; attempt++) {
        if (signals_seen) {
            fprintf(stderr, "dtnn launch: stopped by signal %d before start %d\n",
                    (int)last_signal, attempt);
            rc = CLI_EXIT_SIGNAL + (int)last_signal;
            break;
        }
        const int ranks = choose_ranks(l, 0);
        if (ranks == 0) {
            fprintf(stderr, "dtnn launch: no host%s left to run on\n",
                    attempt ? "" : " answers the probe, so none");
            break;
        }
        char hostfile[PATH_MAX];
        snprintf(hostfile, sizeof hostfile, "%s/hostfile.%d", l->tmpdir, attempt);
        char *argv[MAX_ARGS], *owned[MAX_ARGS];
        int n_owned = 0;
        if (write_hostfile(l, hostfile) ||
            build_argv(l, attempt, ranks, hostfile, resume, argv, owned, &n_owned)) {
            fprintf(stderr, "dtnn launch: cannot write %s or the command is too long\n",
                    hostfile);
            rc = 1;
            break;
        }
        fprintf(stderr, "dtnn launch: start %d: %d rank%s on", attempt, ranks,
                ranks == 1 ? "" : "s");
        for (int i = 0; i < l->n_hosts; i++)
            if (l->hosts[i].alive)
                fprintf(stderr, " %s", l->hosts[i].name);
        fprintf(stderr, "%s%s\n", resume ? ", resuming from " : "", resume ? resume : "");
        rc = run_job(l, argv);
        for (int i = 0; i < n_owned; i++)
            free(owned[i]);
        unlink(hostfile);
        if (rc == 0 || rc < 0) {
            if (rc < 0)
                fprintf(stderr, "dtnn launch: cannot start %s: %s\n", l->mpirun,
                        strerror(errno));
            rc = rc < 0 ? 1 : 0;
            break;
        }
        if (signals_seen) {
            /* The job's ranks have saved a checkpoint on the way out (dtnn train does on
             * SIGINT / SIGTERM); exiting as a signalled process says so to the caller. */
            fprintf(stderr, "dtnn launch: stopped by signal %d (the job's exit %d); not "
                    "restarting\n", (int)last_signal, rc);
            rc = CLI_EXIT_SIGNAL + (int)last_signal;
            break;
        }
        probe_hosts(l);
        char reason[1024];
        if (!classify(l, rc, reason, sizeof reason)) {
            fprintf(stderr, "dtnn launch: %s; a permanent error, not restarting (%d restart%s "
                    "before)\n", reason, attempt, attempt == 1 ? "" : "s");
            break;
        }
        if (attempt >= max_restarts) {
            fprintf(stderr, "dtnn launch: %s; giving up after %d restart%s (--max-restarts)\n",
                    reason, attempt, attempt == 1 ? "" : "s");
            break;
        }
        int64_t step;
        free(resume);
        resume = newest_checkpoint(l, &step);
        if (!resume)
            fprintf(stderr, "dtnn launch: no complete checkpoint%s: the run starts over\n",
                    l->save ? " yet" : " (the train command has no --save)");
        const int next = choose_ranks(l, 1);
        log_restart(l, attempt + 1, reason, rc, next, step, resume);
    }
    free(resume);
    return rc;
}

/* Where the work files go: a fresh folder under $TMPDIR (or /tmp). */
static char *make_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/dtnn-launch.XXXXXX", base && *base ? base : "/tmp");
    return mkdtemp(path) ? dup_or_die(path) : NULL;
}

/* The default probe: the rsh agent Open MPI was told to use, else ssh that never asks. */
static void default_probe(launch *l)
{
    const char *agent = getenv("OMPI_MCA_plm_rsh_agent");
    for (int i = 0; i + 2 < l->n_mpirun_words; i++)
        if ((!strcmp(l->mpirun_words[i], "--mca") || !strcmp(l->mpirun_words[i], "-mca")) &&
            !strcmp(l->mpirun_words[i + 1], "plm_rsh_agent"))
            agent = l->mpirun_words[i + 2];
    l->probe_buf = dup_or_die(agent && *agent ? agent : "ssh -o BatchMode=yes -o "
                              "ConnectTimeout=5");
    /* "ssh : rsh" lists alternatives; the first is the one to probe with. */
    char *colon = strstr(l->probe_buf, " :");
    if (colon)
        *colon = 0;
    split_words(l->probe_buf, l->probe, &l->n_probe, 60);
}

int cmd_launch(int argc, char **argv)
{
    cli_opt *o = launch_opts;
    const int n = N_OPTS(launch_opts);
    int dashes = 2;
    while (dashes < argc && strcmp(argv[dashes], "--"))
        dashes++;
    int early = cli_start("launch", "Runs `dtnn train` under mpirun on the hosts given and "
                          "restarts it from its newest checkpoint on the hosts still alive "
                          "after a transient failure (a lost host, a killed rank, a "
                          "communication error).\n  dtnn launch --hosts h1,h2,h3 [options] -- "
                          "train --save CKPT --checkpoint-every N ...", o, n, dashes, argv);
    if (early >= 0)
        return early;
    if (dashes + 1 >= argc || strcmp(argv[dashes + 1], "train"))
        return cli_usage_error("launch", "%s", "the train command follows --: dtnn launch "
                               "--hosts h1,h2 -- train --model ...");
    if (cli_given(o, n, "hosts") == cli_given(o, n, "hostfile"))
        return cli_usage_error("launch", "%s", "give --hosts or --hostfile (one of them)");
    const int64_t per_host = cli_int(o, n, "ranks-per-host"), restarts = cli_int(o, n,
                                                                                "max-restarts");
    if (per_host < 1 || per_host > 4096 || restarts < 0 || restarts > 1000 ||
        !(cli_float(o, n, "probe-timeout") > 0))
        return cli_usage_error("launch", "%s", "--ranks-per-host must be in [1, 4096], "
                               "--max-restarts in [0, 1000], --probe-timeout positive");
    launch *l = calloc(1, sizeof *l);
    if (!l)
        return fprintf(stderr, "dtnn launch: out of memory\n"), 1;
    int rc = read_hosts(l, cli_str(o, n, "hosts"), cli_str(o, n, "hostfile"), (int)per_host);
    if (!rc && l->n_hosts == 0)
        rc = cli_usage_error("launch", "%s", "no hosts given");
    l->train = argv + dashes + 1;
    l->n_train = argc - dashes - 1;
    l->save = train_value(l, "save");
    l->log = train_value(l, "log");
    l->resume = train_value(l, "resume");
    const char *b = train_value(l, "batch-size"), *acc = train_value(l, "accumulate");
    l->batch = b ? strtoll(b, NULL, 10) : 64;
    l->accumulate = acc ? strtoll(acc, NULL, 10) : 1;
    if (!rc && (l->batch < 1 || l->accumulate < 1))
        rc = cli_usage_error("launch", "%s", "the train command's --batch-size and "
                             "--accumulate must be positive");
    const char *words[CLI_MAX_VALUES];
    const int n_words = cli_strs("mpirun-args", dashes, argv, 2, words);
    for (int i = 0; i < n_words && !rc; i++) {
        l->mpirun_buf[i] = dup_or_die(words[i]);
        if (split_words(l->mpirun_buf[i], l->mpirun_words, &l->n_mpirun_words, MAX_ARGS / 2))
            rc = cli_usage_error("launch", "%s", "--mpirun-args: too many words");
    }
    if (cli_given(o, n, "probe")) {
        l->probe_buf = dup_or_die(cli_str(o, n, "probe"));
        if (split_words(l->probe_buf, l->probe, &l->n_probe, 60) || l->n_probe == 0)
            rc = rc ? rc : cli_usage_error("launch", "%s", "--probe needs 1 to 60 words");
    } else {
        default_probe(l);
    }
    l->probe_timeout = cli_float(o, n, "probe-timeout");
    l->mpirun = cli_str(o, n, "mpirun");
    char self[PATH_MAX];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    self[sl > 0 ? sl : 0] = 0;
    l->dtnn = cli_given(o, n, "dtnn") ? cli_str(o, n, "dtnn") : sl > 0 ? self : argv[0];
    char *tmp = rc ? NULL : make_tmpdir();
    if (!rc && !tmp) {
        fprintf(stderr, "dtnn launch: cannot make a work folder in $TMPDIR: %s\n",
                strerror(errno));
        rc = 1;
    }
    if (!rc) {
        l->tmpdir = tmp;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        rc = supervise(l, (int)restarts);
        rmdir(tmp);
    }
    free(tmp);
    for (int i = 0; i < l->n_hosts; i++)
        free(l->hosts[i].name);
    for (int i = 0; i < CLI_MAX_VALUES; i++)
        free(l->mpirun_buf[i]);
    free(l->probe_buf);
    free(l);
    return rc;
}
