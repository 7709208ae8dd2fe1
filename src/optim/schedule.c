/*
 * schedule.c — learning-rate schedules as closed forms of PyTorch's epoch-stepped schedulers:
 * StepLR (base * gamma^floor(e / step_size)), MultiStepLR (base * gamma^(milestones <= e)) and
 * CosineAnnealingLR (eta_min + (base - eta_min) (1 + cos(pi e / T_max)) / 2, which, as
 * PyTorch's, rises again past T_max) and PolynomialLR (base (1 - min(e, T) / T)^power), with
 * e = step / steps_per_epoch, so the rate changes only at epoch boundaries. ReduceLROnPlateau
 * is parsed here, but its cuts come from a metric: train/monitor.c keeps them. An optional linear warm-up (Goyal et al. 2017, "Accurate, Large Minibatch
 * SGD") ramps per step from warmup_start_factor x lr to lr over warmup_epochs epochs, multiplied
 * onto the schedule as torch.optim.lr_scheduler.LinearLR chained with it would.
 *
 * Not here: per-step cosine; the parser covers only the decay, the trainer sets base_lr and the
 * warm-up fields from its own flags.
 */
#include <math.h>
#include <string.h>

#include "../core/internal.h"

#define SCHED_GRAMMAR "constant, step:SIZE[:GAMMA], multistep:M1,M2,...[:GAMMA], " \
                      "cosine[:TMAX[:ETAMIN]], poly:POWER[:T], plateau:PATIENCE[:FACTOR]"

/* base_lr 0.01 is a common SGD starting point (Adam runs usually want 1e-3); step_size 30 and
 * gamma 0.1 are the classic ImageNet recipe; warm-up is off, and when switched on starts at
 * 0.1 x lr. */
void dtnn_sched_params_default(dtnn_sched_params *p)
{
    memset(p, 0, sizeof *p);
    p->kind = DTNN_SCHED_CONSTANT;
    p->base_lr = 0.01f;
    p->gamma = 0.1f;
    p->step_size = 30;
    p->n_milestones = 0;
    p->t_max = 0;
    p->eta_min = 0.0f;
    p->warmup_epochs = 0.0f;
    p->warmup_start_factor = 0.1f;
    p->power = 1.0f;
    p->patience = 10;
}

static dtnn_status bad_part(const char *spec, const char *what, const char *part,
                            dtnn_error *err)
{
    return dtnn_error_set(err, DTNN_ERR_ARG, "schedule '%s': %s '%s' (grammar: " SCHED_GRAMMAR
                          ")", spec, what, part);
}

static int parse_count(const char *s, long long min, int *out)
{
    long long v;
    if (!s || !(*s >= '0' && *s <= '9') || dtnn__parse_int(s, &v) != 0 || v < min ||
        v > (1 << 30))
        return -1;
    *out = (int)v;
    return 0;
}

static int parse_real(const char *s, float *out)
{
    double v;
    if (!s || !((*s >= '0' && *s <= '9') || *s == '.') || dtnn__parse_float(s, &v) != 0 ||
        fabs(v) > 3.0e38)
        return -1;
    *out = (float)v;
    return 0;
}

/* Parses the decay of spec into p: kind and its fields (the others of the kind get their
 * defaults). base_lr and the warm-up fields are left as they are; on error nothing changes. */
dtnn_status dtnn_sched_parse(const char *spec, dtnn_sched_params *p, dtnn_error *err)
{
    if (!spec)
        return dtnn_error_set(err, DTNN_ERR_ARG, "schedule: none given (grammar: "
                              SCHED_GRAMMAR ")");
    char buf[512];
    if (strlen(spec) >= sizeof buf)
        return dtnn_error_set(err, DTNN_ERR_ARG, "schedule '%.40s...': longer than %zu "
                              "characters", spec, sizeof buf - 1);
    memcpy(buf, spec, strlen(spec) + 1);
    char *part[4];
    int n_parts = 0;
    for (char *s = buf;;) {
        if (n_parts == 4)
            return dtnn_error_set(err, DTNN_ERR_ARG, "schedule '%s': too many ':' parts "
                                  "(grammar: " SCHED_GRAMMAR ")", spec);
        part[n_parts++] = s;
        char *colon = strchr(s, ':');
        if (!colon)
            break;
        *colon = '\0';
        s = colon + 1;
    }

    dtnn_sched_params q = *p, d;
    dtnn_sched_params_default(&d);
    q.gamma = d.gamma;
    q.step_size = d.step_size;
    q.n_milestones = 0;
    memset(q.milestones, 0, sizeof q.milestones);
    q.t_max = d.t_max;
    q.eta_min = d.eta_min;
    q.power = d.power;
    q.patience = d.patience;
    const char *kind = part[0];
    int max_parts;
    if (!strcmp(kind, "constant")) {
        q.kind = DTNN_SCHED_CONSTANT;
        max_parts = 1;
    } else if (!strcmp(kind, "step")) {
        q.kind = DTNN_SCHED_STEP;
        max_parts = 3;
        if (n_parts < 2)
            return dtnn_error_set(err, DTNN_ERR_ARG, "schedule '%s': step needs a size in "
                                  "epochs, e.g. step:30 or step:30:0.1", spec);
        if (parse_count(part[1], 1, &q.step_size) != 0)
            return bad_part(spec, "step size must be a positive integer, not", part[1], err);
    } else if (!strcmp(kind, "multistep")) {
        q.kind = DTNN_SCHED_MULTISTEP;
        max_parts = 3;
        if (n_parts < 2)
            return dtnn_error_set(err, DTNN_ERR_ARG, "schedule '%s': multistep needs "
                                  "milestones in epochs, e.g. multistep:30,60,90", spec);
        char *m = part[1];
        for (;;) {
            char *comma = strchr(m, ',');
            if (comma)
                *comma = '\0';
            int v;
            if (parse_count(m, 1, &v) != 0)
                return bad_part(spec, "milestone must be a positive integer, not", m, err);
            if (q.n_milestones == (int)(sizeof q.milestones / sizeof q.milestones[0]))
                return dtnn_error_set(err, DTNN_ERR_ARG, "schedule '%s': more than %d "
                                      "milestones", spec,
                                      (int)(sizeof q.milestones / sizeof q.milestones[0]));
            if (q.n_milestones > 0 && v <= q.milestones[q.n_milestones - 1])
                return bad_part(spec, "milestones must increase, but got", m, err);
            q.milestones[q.n_milestones++] = v;
            if (!comma)
                break;
            m = comma + 1;
        }
    } else if (!strcmp(kind, "cosine")) {
        q.kind = DTNN_SCHED_COSINE;
        max_parts = 3;
        if (n_parts >= 2 && parse_count(part[1], 0, &q.t_max) != 0)
            return bad_part(spec, "cosine period TMAX must be an integer >= 0 (0 = the run's "
                            "epochs), not", part[1], err);
        if (n_parts >= 3 && (parse_real(part[2], &q.eta_min) != 0 || q.eta_min < 0.0f))
            return bad_part(spec, "ETAMIN must be a number >= 0, not", part[2], err);
    } else if (!strcmp(kind, "poly")) {
        q.kind = DTNN_SCHED_POLY;
        max_parts = 3;
        if (n_parts < 2)
            return dtnn_error_set(err, DTNN_ERR_ARG, "schedule '%s': poly needs a power, e.g. "
                                  "poly:2 (MLPerf's LARS recipe)", spec);
        if (parse_real(part[1], &q.power) != 0 || !(q.power > 0.0f))
            return bad_part(spec, "POWER must be a number > 0, not", part[1], err);
        if (n_parts >= 3 && parse_count(part[2], 0, &q.t_max) != 0)
            return bad_part(spec, "poly length T must be an integer >= 0 (0 = the run's "
                            "epochs), not", part[2], err);
    } else if (!strcmp(kind, "plateau")) {
        q.kind = DTNN_SCHED_PLATEAU;
        max_parts = 3;
        if (n_parts < 2)
            return dtnn_error_set(err, DTNN_ERR_ARG, "schedule '%s': plateau needs a patience "
                                  "in epochs, e.g. plateau:10 or plateau:10:0.1", spec);
        if (parse_count(part[1], 0, &q.patience) != 0)
            return bad_part(spec, "PATIENCE must be an integer >= 0, not", part[1], err);
        if (n_parts == 3 && (parse_real(part[2], &q.gamma) != 0 || !(q.gamma > 0.0f) ||
                             !(q.gamma < 1.0f)))
            return bad_part(spec, "FACTOR must be a number in (0, 1), not", part[2], err);
    } else {
        return bad_part(spec, "unknown kind", kind, err);
    }
    if (n_parts > max_parts)
        return bad_part(spec, "unexpected extra part", part[max_parts], err);
    if ((q.kind == DTNN_SCHED_STEP || q.kind == DTNN_SCHED_MULTISTEP) && n_parts == 3 &&
        (parse_real(part[2], &q.gamma) != 0 || !(q.gamma > 0.0f)))
        return bad_part(spec, "GAMMA must be a number > 0, not", part[2], err);
    *p = q;
    return DTNN_OK;
}

float dtnn_sched_lr(const dtnn_sched_params *p, int64_t step, int64_t steps_per_epoch)
{
    const int64_t spe = steps_per_epoch > 0 ? steps_per_epoch : 1;
    if (step < 0)
        step = 0;
    const int64_t e = step / spe;
    const double base = p->base_lr, pi = 3.14159265358979323846;
    double lr = base;
    switch (p->kind) {
    case DTNN_SCHED_CONSTANT:
        break;
    case DTNN_SCHED_STEP:
        if (p->step_size > 0)
            lr = base * pow(p->gamma, (double)(e / p->step_size));
        break;
    case DTNN_SCHED_MULTISTEP: {
        int passed = 0;
        const int n = DTNN_MIN(p->n_milestones, (int)(sizeof p->milestones / sizeof(int)));
        for (int i = 0; i < n; i++)
            passed += e >= p->milestones[i];
        lr = base * pow(p->gamma, passed);
        break;
    }
    case DTNN_SCHED_COSINE:
        /* t_max 0 means "the run's epochs", which the trainer fills in; left at 0 it is
         * constant rather than a division by zero. */
        if (p->t_max > 0)
            lr = p->eta_min + (base - p->eta_min) *
                 (1.0 + cos(pi * (double)e / (double)p->t_max)) / 2.0;
        break;
    case DTNN_SCHED_POLY:
        /* t_max 0: the trainer fills in the run's epochs, as for cosine */
        if (p->t_max > 0)
            lr = base * pow(1.0 - (double)DTNN_MIN(e, (int64_t)p->t_max) / (double)p->t_max,
                            (double)p->power);
        break;
    case DTNN_SCHED_PLATEAU:
        break;
    }
    const double warm = (double)p->warmup_epochs * (double)spe;
    if (warm > 0.0 && (double)step < warm) {
        const double f = p->warmup_start_factor;
        lr *= f + (1.0 - f) * (double)step / warm;
    }
    return (float)lr;
}
