/*
 * progress.c — see progress.h.
 */
#define _POSIX_C_SOURCE 200809L
#include "progress.h"

#include <time.h>
#include <unistd.h>

double progress_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void format_time(char *buf, size_t len, double seconds)
{
    long s = seconds > 0 ? (long)(seconds + 0.5) : 0;
    if (s >= 3600)
        snprintf(buf, len, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
    else
        snprintf(buf, len, "%ld:%02ld", s / 60, s % 60);
}

void progress_init(progress_state *s, FILE *out, int quiet)
{
    s->out = out;
    s->tty = isatty(fileno(out));
    s->quiet = quiet;
    s->last_draw = 0;
    s->last_tenth = -1;
}

void progress_update(const dtnn_progress *p, void *user)
{
    progress_state *s = user;
    if (p->epoch_end) {
        if (s->tty)
            fprintf(s->out, "\r\033[K");
        fprintf(s->out, "epoch %lld/%lld: train loss %.4f acc %.2f%%", (long long)p->epoch + 1,
                (long long)p->epochs, p->loss, 100.0 * p->acc);
        if (p->has_test)
            fprintf(s->out, " | test loss %.4f acc %.2f%%", p->test_loss, 100.0 * p->test_acc);
        if (p->has_ema_test)
            fprintf(s->out, " | ema test loss %.4f acc %.2f%%", p->ema_test_loss,
                    100.0 * p->ema_test_acc);
        fprintf(s->out, " | %.0f img/s | %.1f s | lr %.4g", p->images_per_sec, p->elapsed,
                p->lr);
        if (p->skipped_images > 0)
            fprintf(s->out, " | %lld unreadable image%s skipped", (long long)p->skipped_images,
                    p->skipped_images == 1 ? "" : "s");
        fprintf(s->out, "\n");
        if (p->stopping)
            fprintf(s->out, "stopping after epoch %lld: %s\n", (long long)p->epoch + 1,
                    p->stopping);
        fflush(s->out);
        s->last_tenth = -1;
        return;
    }
    if (s->quiet)
        return;
    double left = p->images_per_sec > 0 && p->step_in_epoch > 0
                      ? p->elapsed / (double)p->step_in_epoch *
                            (double)(p->steps_per_epoch - p->step_in_epoch)
                      : 0.0;
    char eta[32];
    format_time(eta, sizeof eta, left);
    if (s->tty) {
        double t = progress_now();
        if (t - s->last_draw < 0.1 && p->step_in_epoch < p->steps_per_epoch)
            return;
        s->last_draw = t;
        enum { WIDTH = 24 };
        int fill = (int)(WIDTH * p->step_in_epoch / p->steps_per_epoch);
        char bar[WIDTH + 1];
        for (int i = 0; i < WIDTH; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[WIDTH] = '\0';
        fprintf(s->out, "\r\033[Kepoch %lld/%lld [%s] %lld/%lld loss %.4f acc %.2f%% %.0f img/s "
                "ETA %s", (long long)p->epoch + 1, (long long)p->epochs, bar,
                (long long)p->step_in_epoch, (long long)p->steps_per_epoch, p->loss,
                100.0 * p->acc, p->images_per_sec, eta);
        fflush(s->out);
        return;
    }
    int64_t tenth = 10 * p->step_in_epoch / p->steps_per_epoch;
    if (tenth == s->last_tenth || tenth == 10)
        return;
    s->last_tenth = tenth;
    fprintf(s->out, "epoch %lld/%lld step %lld/%lld loss %.4f acc %.2f%% %.0f img/s ETA %s\n",
            (long long)p->epoch + 1, (long long)p->epochs, (long long)p->step_in_epoch,
            (long long)p->steps_per_epoch, p->loss, 100.0 * p->acc, p->images_per_sec, eta);
    fflush(s->out);
}
