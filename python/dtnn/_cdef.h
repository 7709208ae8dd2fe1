/* The part of include/dtnn.h the Python package calls, for cffi (which reads no preprocessor
 * directives). Declared, not generated: python/tests/test_abi.py compiles the functions below
 * against the real header (a differing prototype does not compile) and compares every struct's
 * size and field offsets and every enum's values with a C compiler's. */

typedef int sig_atomic_t;

typedef enum {
    DTNN_OK, DTNN_ERR_ARG, DTNN_ERR_IO, DTNN_ERR_FORMAT, DTNN_ERR_SHAPE, DTNN_ERR_NOMEM,
    DTNN_ERR_NONFINITE, DTNN_ERR_UNSUPPORTED, DTNN_ERR_COMM, DTNN_ERR_INTERRUPTED,
    DTNN_ERR_DEVICE
} dtnn_status;

typedef struct {
    dtnn_status code;
    char message[512];
} dtnn_error;

typedef struct dtnn_model dtnn_model;
typedef struct dtnn_comm dtnn_comm;
typedef struct dtnn_trace dtnn_trace;
typedef struct dtnn_opt_params dtnn_opt_params;
typedef struct dtnn_optimizer dtnn_optimizer;

typedef enum { DTNN_INIT_DEFAULT = 0, DTNN_INIT_HE, DTNN_INIT_XAVIER } dtnn_init_scheme;
typedef enum { DTNN_CONV_AUTO = 0, DTNN_CONV_IM2COL, DTNN_CONV_DIRECT } dtnn_conv_algo;
typedef enum { DTNN_PRECISION_FP32 = 0, DTNN_PRECISION_BF16 } dtnn_precision;

typedef struct {
    int max_batch;
    int training;
    uint64_t seed;
    dtnn_init_scheme init;
    const char *device;
    int threads;
    size_t workspace_limit;
    int input_grad;
    dtnn_conv_algo conv_algo;
    dtnn_precision precision;
    int unfused;
    int optimizer_slots;
    size_t memory_limit;
    const char *const *freeze;
    int n_freeze;
    int freeze_bn;
    int allow_nonfinite_weights;
} dtnn_build_params;

typedef enum { DTNN_LOSS_CROSS_ENTROPY = 0, DTNN_LOSS_BCE, DTNN_LOSS_MSE } dtnn_loss_kind;
typedef struct {
    dtnn_loss_kind kind;
    float label_smoothing;
} dtnn_loss_params;

typedef struct {
    double loss_sum;
    int64_t top1;
    int64_t top5;
    int64_t count;
} dtnn_metrics;

typedef enum { DTNN_TENSOR_PARAM = 0, DTNN_TENSOR_BUFFER } dtnn_tensor_kind;
typedef enum { DTNN_F32 = 0, DTNN_I64 } dtnn_dtype;

typedef struct {
    const char *name;
    dtnn_tensor_kind kind;
    dtnn_dtype dtype;
    int ndim;
    int64_t dims[4];
    size_t offset;
    size_t count;
    int frozen;
} dtnn_tensor_info;

typedef enum {
    DTNN_OPT_SGD = 0, DTNN_OPT_ADAM, DTNN_OPT_ADAMW, DTNN_OPT_RMSPROP, DTNN_OPT_NADAM,
    DTNN_OPT_LARS, DTNN_OPT_LAMB
} dtnn_opt_kind;

struct dtnn_opt_params {
    dtnn_opt_kind kind;
    float momentum;
    float dampening;
    int nesterov;
    float weight_decay;
    float beta1, beta2;
    float eps;
    float alpha;
    int centered;
    float momentum_decay;
    float trust_coefficient;
    unsigned no_decay;
    float clip_grad_norm;
};

typedef enum {
    DTNN_SCHED_CONSTANT = 0, DTNN_SCHED_STEP, DTNN_SCHED_MULTISTEP, DTNN_SCHED_COSINE,
    DTNN_SCHED_POLY, DTNN_SCHED_PLATEAU
} dtnn_sched_kind;

typedef struct {
    dtnn_sched_kind kind;
    float base_lr;
    float gamma;
    int step_size;
    int milestones[16];
    int n_milestones;
    int t_max;
    float eta_min;
    float power;
    int patience;
    float warmup_epochs;
    float warmup_start_factor;
} dtnn_sched_params;

typedef struct {
    float *x;
    int32_t *y;
    int64_t n;
    int c, h, w;
    int classes;
} dtnn_split;

typedef struct {
    dtnn_split train;
    dtnn_split test;
    float mean[4], std[4];
    char name[64];
} dtnn_dataset;

typedef struct {
    const char *name;
    const char *dir;
    int normalize;
    int64_t synthetic_n;
    int c, h, w, classes;
    uint64_t seed;
} dtnn_data_params;

typedef enum { DTNN_COMM_F32 = 0, DTNN_COMM_F16, DTNN_COMM_BF16 } dtnn_comm_dtype;
typedef enum { DTNN_COLLECTIVES_MPI = 0, DTNN_COLLECTIVES_NCCL } dtnn_collectives;
typedef enum {
    DTNN_ALLREDUCE_OVERLAP = 0, DTNN_ALLREDUCE_BLOCKING, DTNN_ALLREDUCE_HIERARCHICAL
} dtnn_allreduce_mode;

typedef struct {
    int64_t step;
    int64_t epoch;
    int64_t step_in_epoch;
    uint64_t seed;
    int64_t global_batch;
    int64_t skipped;
    int64_t monitored;
    double plateau_best, early_best;
    int64_t plateau_bad, early_bad, plateau_cuts;
} dtnn_train_state;

typedef struct {
    int epochs;
    int64_t steps;
    int batch_size;
    int shuffle;
    uint64_t seed;
    dtnn_loss_params loss;
    dtnn_sched_params sched;
    int eval_each_epoch;
    float stop_at_accuracy;
    int early_stop;
    float ema_decay;
    int ema_steps;
    const char *resume_from;
    const char *log_path;
    const char *save_path;
    dtnn_allreduce_mode allreduce;
    double bucket_mb;
    dtnn_comm_dtype comm_dtype;
    dtnn_collectives collectives;
    int accumulate;
    int sync_bn;
    int64_t checkpoint_every;
    int keep;
    const volatile sig_atomic_t *stop;
    int skip_nonfinite;
    dtnn_trace *trace;
    double progress_interval;
} dtnn_train_params;

typedef struct {
    int64_t step, total_steps;
    int64_t epoch, epochs;
    int64_t step_in_epoch, steps_per_epoch;
    double loss, acc;
    double images_per_sec;
    double elapsed;
    float lr;
    int epoch_end;
    double test_loss, test_acc;
    int has_test;
    double comm_wait;
    int64_t skipped;
    int64_t skipped_images;
    const char *stopping;
    int has_ema_test;
    double ema_test_loss, ema_test_acc;
} dtnn_progress;

typedef void (*dtnn_progress_fn)(const dtnn_progress *p, void *user);

typedef enum {
    DTNN_EXTERNAL_ZEROS = 0, DTNN_EXTERNAL_ONES, DTNN_EXTERNAL_WEIGHT, DTNN_EXTERNAL_BIAS
} dtnn_external_init;

typedef struct {
    int count;
    char names[4][24];
    int ndim[4];
    int64_t dims[4][4];
    dtnn_external_init init[4];
    double fan_in[4];
} dtnn_external_params;

typedef struct {
    const char *type;
    dtnn_status (*infer)(void *user, int n_in, const int *in_chw, int *out_chw,
                         dtnn_external_params *params, dtnn_error *err);
    dtnn_status (*forward)(void *user, int n, int training, const float *const *x,
                           const float *const *params, float *y, dtnn_error *err);
    dtnn_status (*backward)(void *user, int n, const float *const *x,
                            const float *const *params, const float *y, const float *dy,
                            float *const *dx, float *const *dparams, dtnn_error *err);
    void *user;
} dtnn_external_ops;

typedef struct {
    int checked, mismatches;
    double worst;
    char worst_name[128];
    double worst_analytic, worst_numeric;
} dtnn_gradcheck_result;

typedef struct dtnn_loader dtnn_loader;

typedef struct {
    int batch_size;
    int rank, ranks;
    int shuffle;
    uint64_t seed;
    unsigned augment;
    int crop_padding;
    float random_erase;
    int threads;
    int prefetch;
    int image_size;
    int strict;
    float mixup_alpha;
    float cutmix_alpha;
    int randaugment_ops;
    int randaugment_magnitude;
    int shuffle_buffer;
    int repeated_augment;
} dtnn_loader_params;

typedef struct {
    int64_t n;
    int c, h, w, classes;
    int64_t steps_per_epoch;
    int local_max;
    const int32_t *labels;
    float mean[4], std[4];
    char name[64];
    dtnn_loader_params params;
} dtnn_loader_info;

typedef enum { DTNN_MIX_NONE = 0, DTNN_MIX_MIXUP = 1, DTNN_MIX_CUTMIX = 2 } dtnn_mix_kind;
typedef struct {
    dtnn_mix_kind kind;
    float lam;
    const int32_t *y2;
    double draw;
    int cx, cy;
    int box[4];
} dtnn_batch_mix;

/* ---- functions ---- */

const char *dtnn_strerror(dtnn_status code);
dtnn_status dtnn_precision_parse(const char *name, dtnn_precision *out, dtnn_error *err);
void dtnn_build_params_default(dtnn_build_params *p);
dtnn_model *dtnn_model_create(int c, int h, int w);
void dtnn_model_free(dtnn_model *m);
int dtnn_model_add(dtnn_model *m, const char *type, const char *name, const char *options,
                   const int *inputs, int n_inputs, dtnn_error *err);
int dtnn_model_find(const dtnn_model *m, const char *name);
int dtnn_model_add_external(dtnn_model *m, const char *name, const dtnn_external_ops *ops,
                            const int *inputs, int n_inputs, dtnn_error *err);
dtnn_status dtnn_model_gradcheck(dtnn_model *m, const float *x, int n, double eps, double tol,
                                 int max_entries, dtnn_gradcheck_result *out, dtnn_error *err);
dtnn_status dtnn_model_build(dtnn_model *m, const dtnn_build_params *p, dtnn_error *err);
dtnn_model *dtnn_model_parse_file(const char *path, dtnn_error *err);
dtnn_model *dtnn_model_parse_string(const char *text, const char *origin, dtnn_error *err);
const char *dtnn_zoo_name(int i, const char **description);
const char *dtnn_layer_type_name(int i);
dtnn_model *dtnn_model_from_spec(const char *spec, int classes, int c, int h, int w,
                                 dtnn_error *err);
dtnn_status dtnn_model_forward(dtnn_model *m, const float *x, int n, int training,
                               dtnn_error *err);
void dtnn_model_output_shape(const dtnn_model *m, int *n, int *classes);
void dtnn_model_read_output(const dtnn_model *m, float *dst);
void dtnn_model_input_shape(const dtnn_model *m, int *c, int *h, int *w);
void dtnn_loss_params_default(dtnn_loss_params *p);
dtnn_status dtnn_loss_parse(const char *name, dtnn_loss_kind *kind, dtnn_error *err);
int dtnn_model_tensor_count(const dtnn_model *m);
const dtnn_tensor_info *dtnn_model_tensor(const dtnn_model *m, int i);
size_t dtnn_model_param_count(const dtnn_model *m);
size_t dtnn_model_trainable_count(const dtnn_model *m);
dtnn_status dtnn_model_tensor_read(const dtnn_model *m, const dtnn_tensor_info *t, void *dst,
                                   dtnn_error *err);
dtnn_status dtnn_model_tensor_write(dtnn_model *m, const dtnn_tensor_info *t, const void *src,
                                    dtnn_error *err);
const char *dtnn_model_device(const dtnn_model *m);
void dtnn_opt_params_default(dtnn_opt_params *p, dtnn_opt_kind kind);
dtnn_status dtnn_opt_parse_groups(const char *text, unsigned *groups, dtnn_error *err);
int dtnn_opt_state_slots(const dtnn_opt_params *p);
dtnn_status dtnn_opt_parse(const char *name, dtnn_opt_kind *kind, dtnn_error *err);
const char *dtnn_opt_name(dtnn_opt_kind kind);
dtnn_optimizer *dtnn_optimizer_create(dtnn_model *m, const dtnn_opt_params *p, dtnn_error *err);
void dtnn_optimizer_free(dtnn_optimizer *o);
void dtnn_sched_params_default(dtnn_sched_params *p);
dtnn_status dtnn_sched_parse(const char *spec, dtnn_sched_params *p, dtnn_error *err);
void dtnn_data_params_default(dtnn_data_params *p);
dtnn_status dtnn_dataset_load(dtnn_dataset *d, const dtnn_data_params *p, dtnn_error *err);
void dtnn_dataset_free(dtnn_dataset *d);
dtnn_comm *dtnn_comm_create_single(void);
dtnn_comm *dtnn_comm_create_auto(int *argc, char ***argv, dtnn_error *err);
void dtnn_comm_free(dtnn_comm *c);
int dtnn_comm_rank(const dtnn_comm *c);
int dtnn_comm_size(const dtnn_comm *c);
int dtnn_comm_cores(const dtnn_comm *c);
const char *dtnn_comm_name(const dtnn_comm *c);
dtnn_status dtnn_allreduce_parse(const char *name, dtnn_allreduce_mode *mode, dtnn_error *err);
dtnn_status dtnn_comm_dtype_parse(const char *name, dtnn_comm_dtype *dtype, dtnn_error *err);
dtnn_status dtnn_checkpoint_save(const char *path, dtnn_model *m, dtnn_optimizer *opt,
                                 const dtnn_train_state *ts, const dtnn_dataset *norm,
                                 dtnn_error *err);
dtnn_status dtnn_checkpoint_load(const char *path, dtnn_model *m, dtnn_optimizer *opt,
                                 dtnn_train_state *ts, dtnn_dataset *norm, dtnn_error *err);
dtnn_status dtnn_checkpoint_load_weights(const char *path, dtnn_model *m,
                                         const char *const *exclude, int n_exclude,
                                         dtnn_error *err);
dtnn_status dtnn_checkpoint_load_average(const char *path, dtnn_model *m, dtnn_error *err);
int dtnn_onnx_available(void);
dtnn_status dtnn_onnx_export(const dtnn_model *m, const char *path, int opset, dtnn_error *err);
char *dtnn_onnx_import_text(const char *path, dtnn_error *err);
dtnn_status dtnn_onnx_load_weights(const char *path, dtnn_model *m, dtnn_error *err);
void dtnn_train_params_default(dtnn_train_params *p);
dtnn_status dtnn_train(dtnn_model *m, dtnn_optimizer *opt, const dtnn_dataset *d,
                       dtnn_comm *comm, const dtnn_train_params *p, dtnn_train_state *ts,
                       dtnn_progress_fn progress, void *user, dtnn_error *err);
dtnn_status dtnn_evaluate(dtnn_model *m, const dtnn_split *s, int batch_size,
                          const dtnn_loss_params *lp, dtnn_comm *comm, dtnn_metrics *out,
                          dtnn_error *err);
void dtnn_loader_params_default(dtnn_loader_params *p);
dtnn_loader *dtnn_loader_create(const dtnn_dataset *d, int test_split,
                                const dtnn_loader_params *p, dtnn_error *err);
dtnn_loader *dtnn_loader_create_folder(const char *dir, const char *split,
                                       const dtnn_loader_params *p, dtnn_error *err);
void dtnn_loader_free(dtnn_loader *l);
void dtnn_loader_get_info(const dtnn_loader *l, dtnn_loader_info *info);
int64_t dtnn_loader_skipped(const dtnn_loader *l, char *paths, size_t len);
dtnn_status dtnn_loader_batch(dtnn_loader *l, int64_t epoch, int64_t step, float *x, int32_t *y,
                              int *n, dtnn_error *err);
void dtnn_loader_mix(const dtnn_loader *l, dtnn_batch_mix *mix);
dtnn_loader *dtnn_loader_create_shards(const char *dir, const char *split,
                                       const dtnn_loader_params *p, dtnn_error *err);
int dtnn_shards_has_split(const char *dir, const char *split);
int64_t dtnn_loader_bytes_read(const dtnn_loader *l);
dtnn_status dtnn_train_loader(dtnn_model *m, dtnn_optimizer *opt, dtnn_loader *train,
                              dtnn_loader *test, dtnn_comm *comm, const dtnn_train_params *p,
                              dtnn_train_state *ts, dtnn_progress_fn progress, void *user,
                              dtnn_error *err);
dtnn_status dtnn_evaluate_loader(dtnn_model *m, dtnn_loader *l, int max_batch,
                                 const dtnn_loss_params *lp, dtnn_comm *comm, dtnn_metrics *out,
                                 dtnn_error *err);
const char *dtnn_cpu_kernels_name(void);
const char *dtnn_cpu_gemm_name(char *buf, size_t len);
void free(void *ptr);
