/*
 * replicas.c — keeping the ranks of data-parallel training one model: the start-up agreement
 * (model, settings, data and kernel set hashed on every rank and compared with rank 0's),
 * rank 0's weights broadcast, batch-norm statistics averaged, and the epoch-end check that the
 * replicas are still bit-identical (replicas.h, for trainer.c).
 */
#include <stdlib.h>
#include <string.h>

#include "../backend/backend.h"
#include "../comm/comm.h"
#include "../core/internal.h"
#include "../model/model.h"
#include "replicas.h"

/* The model (names, shapes, frozen flags, precision), the training options, the data (shapes,
 * labels) and the kernel set, hashed; rank 0's compared with every rank's. */
dtnn_status train_check_agreement(dtnn_model *m, dtnn_optimizer *opt, dtnn_loader *train,
                                  dtnn_loader *test, dtnn_comm *comm,
                                  const dtnn_train_params *p, const dtnn_train_state *ts,
                                  dtnn_error *err)
{
    uint64_t h[4] = {DTNN_FNV1A_INIT, DTNN_FNV1A_INIT, DTNN_FNV1A_INIT, DTNN_FNV1A_INIT};
    for (int i = 0; i < dtnn_model_tensor_count(m); i++) {
        const dtnn_tensor_info *t = dtnn_model_tensor(m, i);
        h[0] = dtnn__fnv1a(h[0], t->name, strlen(t->name));
        h[0] = dtnn__fnv1a(h[0], t->dims, sizeof(int64_t) * t->ndim);
        h[0] = dtnn__fnv1a(h[0], &t->frozen, sizeof t->frozen);
    }
    /* its arithmetic too: a bf16 replica beside an fp32 one would drift apart */
    const int64_t precision = model_build_params(m)->precision;
    h[0] = dtnn__fnv1a(h[0], &precision, sizeof precision);
    struct {
        int64_t epochs, steps, batch, accumulate, shuffle, loss, allreduce, dtype, sync_bn,
            collectives;
        uint64_t seed;
        double smoothing, lr, bucket, target, ema_decay;
        int64_t step, epoch, step_in_epoch, early_stop, ema_steps;
    } f = {p->epochs, p->steps, p->batch_size, p->accumulate, p->shuffle, p->loss.kind,
           p->allreduce, p->comm_dtype, p->sync_bn, p->collectives, p->seed,
           p->loss.label_smoothing, p->sched.base_lr, p->bucket_mb, p->stop_at_accuracy,
           p->ema_decay, ts->step, ts->epoch, ts->step_in_epoch, p->early_stop, p->ema_steps};
    h[1] = dtnn__fnv1a(h[1], &f, sizeof f);
    h[1] = dtnn__fnv1a(h[1], &p->sched, sizeof p->sched);
    h[1] = dtnn__fnv1a(h[1], dtnn_optimizer_params(opt), sizeof(dtnn_opt_params));
    dtnn_loader_info info[2];
    memset(info, 0, sizeof info);
    dtnn_loader_get_info(train, &info[0]);
    if (test)
        dtnn_loader_get_info(test, &info[1]);
    for (int k = 0; k < 2; k++) {
        int64_t shape[5] = {info[k].n, info[k].c, info[k].h, info[k].w, info[k].classes};
        h[2] = dtnn__fnv1a(h[2], shape, sizeof shape);
        /* What a batch holds: ranks that augment or mix differently train different models. */
        const dtnn_loader_params *lp = &info[k].params;
        const double aug[8] = {lp->batch_size, lp->shuffle, lp->augment, lp->crop_padding,
                               lp->random_erase, lp->mixup_alpha, lp->cutmix_alpha,
                               lp->repeated_augment};
        h[2] = dtnn__fnv1a(h[2], aug, sizeof aug);
        h[2] = dtnn__fnv1a(h[2], &lp->seed, sizeof lp->seed);
        if (info[k].labels)
            h[2] = dtnn__fnv1a(h[2], info[k].labels, sizeof(int32_t) * (size_t)info[k].n);
    }
    /* Kernel sets round differently (FMA tiles of other widths), so ranks computing on
     * different sets would drift apart too. */
    const char *arithmetic = model_backend(m)->arithmetic;
    if (arithmetic)
        h[3] = dtnn__fnv1a(h[3], arithmetic, strlen(arithmetic));
    int size = dtnn_comm_size(comm);
    uint64_t *all = malloc(sizeof h * (size_t)size);
    if (!all)
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory");
    comm_set_purpose(comm, "start-up agreement", -1, 0);
    dtnn_status st = dtnn_comm_allgather(comm, h, sizeof h, all, err);
    static const char *const what[4] = {"model", "training options", "dataset",
                                        "CPU kernel set"};
    static const char same_command[] = "every rank must run the same command on the same files";
    static const char same_kernels[] = "DTNN_CPU names different sets, or one another rank's "
                                       "CPU cannot run: unset it (auto: the ranks take the "
                                       "fastest set all of them run) or set one every node runs "
                                       "(dtnn devices names a node's), e.g. DTNN_CPU=avx2";
    static const char *const fix[4] = {same_command, same_command, same_command, same_kernels};
    for (int r = 1; r < size && !st; r++)
        for (int k = 0; k < 4 && !st; k++)
            if (all[4 * r + k] != all[k])
                st = dtnn_error_set(err, DTNN_ERR_ARG, "rank %d disagrees with rank 0 on the %s: %s",
                                    r, what[k], fix[k]);
    free(all);
    return st;
}

/* Rank 0's values of a model region for every rank, through a host copy. */
dtnn_status train_broadcast_region(dtnn_model *m, dtnn_comm *comm, dtnn_region r,
                                   dtnn_error *err)
{
    size_t bytes;
    void *host = model_region_to_host(m, r, &bytes, err);
    if (!host)
        return err->code;
    comm_set_purpose(comm, r == DTNN_REGION_PARAMS ? "rank 0's weights" : "rank 0's buffers", -1,
                     0);
    dtnn_status st = dtnn_comm_broadcast(comm, host, bytes, 0, err);
    if (!st)
        st = dtnn_model_write(m, r, 0, host, bytes, err);
    free(host);
    return st;
}

/* Every rank must hold bitwise the same parameters and buffers: the all-reduce gives each the
 * same sum and the optimizer is deterministic. A difference means a broken transport or a
 * non-deterministic kernel, and is an error rather than silently diverging replicas. */
dtnn_status train_check_replicas(dtnn_model *m, dtnn_comm *comm, int64_t epoch,
                                 dtnn_error *err)
{
    uint64_t h[2] = {0xcbf29ce484222325ull, 0xcbf29ce484222325ull};
    size_t pbytes, bbytes = 0;
    void *params = model_region_to_host(m, DTNN_REGION_PARAMS, &pbytes, err);
    void *buffers = params ? model_region_to_host(m, DTNN_REGION_BUFFERS, &bbytes, err) : NULL;
    if (!buffers) {
        free(params);
        return err->code;
    }
    h[0] = dtnn__fnv1a(h[0], params, pbytes);
    h[1] = dtnn__fnv1a(h[1], buffers, bbytes);
    free(params);
    free(buffers);
    int size = dtnn_comm_size(comm);
    uint64_t *all = malloc(sizeof h * (size_t)size);
    if (!all)
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory");
    comm_set_purpose(comm, "replica check", -1, 0);
    dtnn_status st = dtnn_comm_allgather(comm, h, sizeof h, all, err);
    for (int r = 1; r < size && !st; r++)
        if (all[2 * r] != all[0] || all[2 * r + 1] != all[1])
            st = dtnn_error_set(err, DTNN_ERR_COMM, "after epoch %lld the %s of rank %d differ "
                                "from rank 0's: the replicas diverged", (long long)epoch + 1,
                                all[2 * r] != all[0] ? "parameters" : "buffers", r);
    free(all);
    return st;
}

/* Averages the float buffers (batch-norm running statistics) over the ranks. */
dtnn_status train_average_buffers(dtnn_model *m, dtnn_comm *comm, dtnn_error *err)
{
    float inv = 1.0f / (float)dtnn_comm_size(comm);
    size_t bytes;
    unsigned char *buffers = model_region_to_host(m, DTNN_REGION_BUFFERS, &bytes, err);
    if (!buffers)
        return err->code;
    dtnn_status st = DTNN_OK;
    for (int i = 0; i < dtnn_model_tensor_count(m) && !st; i++) {
        const dtnn_tensor_info *t = dtnn_model_tensor(m, i);
        if (t->kind != DTNN_TENSOR_BUFFER || t->dtype != DTNN_F32)
            continue;
        float *v = (float *)(void *)(buffers + t->offset);
        comm_set_purpose(comm, "batch-norm buffer averaging", -1, 0);
        st = dtnn_comm_allreduce_sum(comm, v, t->count, err);
        for (size_t j = 0; j < t->count && !st; j++)
            v[j] *= inv;
    }
    if (!st)
        st = dtnn_model_write(m, DTNN_REGION_BUFFERS, 0, buffers, bytes, err);
    free(buffers);
    return st;
}
