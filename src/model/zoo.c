/*
 * zoo.c — the built-in models, defined through the public C API exactly as their PyTorch
 * counterparts (module names become tensor names: conv1.weight, layer2.0.bn1.running_var, ...):
 *   lenet5    LeCun et al. 1998 as in the issue: 61,706 parameters on 1x28x28
 *   cifarcnn  a 4-conv CIFAR network: 2,168,362 parameters on 3x32x32
 *   resnet20  He et al. 2016 CIFAR ResNet-20 with option-A shortcuts: 269,722 parameters
 *             (and its deeper siblings resnet32/44/56/110)
 *   vgg16-64  the benchmark VGG-16 of the kernel work, on 3x64x64
 *   alexnet_cifar, vgg16_cifar  the CIFAR adaptations used by the PyTorch CIFAR model
 *             collections (e.g. bearpaw/pytorch-classification): AlexNet's five convs with
 *             CIFAR-sized padding and one linear head; VGG-16 with batch norm and one linear
 *   mlp       fc 512, ReLU, fc 512, ReLU, fc classes on any (flattened) input
 * and, from zoo_torchvision.c, torchvision's ImageNet models (alexnet, vgg*, resnet18/34/50,
 * mobilenet_v2, densenet121) and from zoo_modern.c those with squeeze-and-excitation
 * (mobilenet_v3_large, regnet_y_400mf,
 * efficientnet_v2_s) and convnext_tiny. The table at the bottom is the one list of zoo models.
 */
#include <stdarg.h>
#include <string.h>

#include "zoo_builder.h"

int zadd(zoo_builder *b, const char *type, const char *name, const int *inputs, const char *fmt,
         ...)
{
    if (b->failed)
        return -1;
    char opts[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(opts, sizeof opts, fmt, ap);
    va_end(ap);
    int n_inputs = 0;
    while (inputs && inputs[n_inputs] != ZOO_END)
        n_inputs++;
    int id = dtnn_model_add(b->m, type, name, opts, n_inputs ? inputs : NULL, n_inputs, b->err);
    if (id < 0)
        b->failed = 1;
    return id;
}

static void build_lenet5(zoo_builder *b, int arg, int classes)
{
    (void)arg;
    zadd(b, "conv2d", "conv1", NULL, "filters=6 kernel=5 padding=2");
    zadd(b, "relu", "relu1", NULL, "%s", "");
    zadd(b, "maxpool", "pool1", NULL, "kernel=2");
    zadd(b, "conv2d", "conv2", NULL, "filters=16 kernel=5");
    zadd(b, "relu", "relu2", NULL, "%s", "");
    zadd(b, "maxpool", "pool2", NULL, "kernel=2");
    zadd(b, "flatten", "flatten", NULL, "%s", "");
    zadd(b, "linear", "fc1", NULL, "outputs=120");
    zadd(b, "relu", "relu3", NULL, "%s", "");
    zadd(b, "linear", "fc2", NULL, "outputs=84");
    zadd(b, "relu", "relu4", NULL, "%s", "");
    zadd(b, "linear", "fc3", NULL, "outputs=%d", classes);
}

static void build_cifarcnn(zoo_builder *b, int arg, int classes)
{
    (void)arg;
    const int widths[4] = {32, 32, 64, 64};
    for (int i = 0; i < 4; i++) {
        char conv[16], relu[16];
        snprintf(conv, sizeof conv, "conv%d", i + 1);
        snprintf(relu, sizeof relu, "relu%d", i + 1);
        zadd(b, "conv2d", conv, NULL, "filters=%d kernel=3 padding=1", widths[i]);
        zadd(b, "relu", relu, NULL, "%s", "");
        if (i % 2 == 1)
            zadd(b, "maxpool", i == 1 ? "pool1" : "pool2", NULL, "kernel=2");
    }
    zadd(b, "flatten", "flatten", NULL, "%s", "");
    zadd(b, "linear", "fc1", NULL, "outputs=512");
    zadd(b, "relu", "relu5", NULL, "%s", "");
    zadd(b, "linear", "fc2", NULL, "outputs=%d", classes);
}

/* One basic block: conv-bn-relu-conv-bn (+ shortcut) relu. Returns the block's output id. */
static int basic_block(zoo_builder *b, const char *prefix, int in, int in_planes, int planes,
                       int stride)
{
    char n[6][64];
    const char *suffix[6] = {"conv1", "bn1", "relu1", "conv2", "bn2", "shortcut"};
    for (int i = 0; i < 6; i++)
        snprintf(n[i], sizeof n[i], "%s.%s", prefix, suffix[i]);
    int x = zadd(b, "conv2d", n[0], INPUTS(in), "filters=%d kernel=3 stride=%d padding=1 bias=0",
                 planes, stride);
    /* The shortcut before bn2, so that bn2 may do the add (model_plan.c, plan_residual_fusion:
     * the residual must come from before it), and after conv1, so that backward it writes the
     * block input's gradient first, in one pass, and conv1 adds to it (the other way round
     * its strided add was several times slower in ResNet-20's first downsampling block;
     * measurements: docs/perf-notes.md). It has no parameters: the order of the model's
     * tensors is unchanged. */
    int shortcut = in;
    if (stride != 1 || in_planes != planes)
        shortcut = zadd(b, "shortcut_a", n[5], INPUTS(in), "stride=%d filters=%d", stride,
                        planes);
    x = zadd(b, "batchnorm", n[1], INPUTS(x), "%s", "");
    x = zadd(b, "relu", n[2], INPUTS(x), "%s", "");
    x = zadd(b, "conv2d", n[3], INPUTS(x), "filters=%d kernel=3 padding=1 bias=0", planes);
    x = zadd(b, "batchnorm", n[4], INPUTS(x), "%s", "");
    char add[64], relu[64];
    snprintf(add, sizeof add, "%s.add", prefix);
    snprintf(relu, sizeof relu, "%s.relu2", prefix);
    x = zadd(b, "add", add, INPUTS(x, shortcut), "%s", "");
    return zadd(b, "relu", relu, INPUTS(x), "%s", "");
}

static void build_cifar_resnet(zoo_builder *b, int depth, int classes)
{
    const int blocks_per_stage = (depth - 2) / 6;
    int x = zadd(b, "conv2d", "conv1", NULL, "filters=16 kernel=3 padding=1 bias=0");
    x = zadd(b, "batchnorm", "bn1", NULL, "%s", "");
    x = zadd(b, "relu", "relu", NULL, "%s", "");
    int in_planes = 16;
    for (int stage = 0; stage < 3; stage++) {
        int planes = 16 << stage;
        for (int i = 0; i < blocks_per_stage; i++) {
            char prefix[32];
            snprintf(prefix, sizeof prefix, "layer%d.%d", stage + 1, i);
            x = basic_block(b, prefix, x, in_planes, planes, (stage > 0 && i == 0) ? 2 : 1);
            in_planes = planes;
        }
    }
    zadd(b, "global_avgpool", "avgpool", INPUTS(x), "%s", "");
    zadd(b, "flatten", "flatten", NULL, "%s", "");
    zadd(b, "linear", "fc", NULL, "outputs=%d", classes);
}

static void build_mlp(zoo_builder *b, int arg, int classes)
{
    (void)arg;
    zadd(b, "flatten", "flatten", NULL, "%s", "");
    zadd(b, "linear", "fc1", NULL, "outputs=512");
    zadd(b, "relu", "relu1", NULL, "%s", "");
    zadd(b, "linear", "fc2", NULL, "outputs=512");
    zadd(b, "relu", "relu2", NULL, "%s", "");
    zadd(b, "linear", "fc3", NULL, "outputs=%d", classes);
}

/* VGG-16's convolution stack (3x3, padding 1, ReLU, no batch norm; 0 = 2x2 max pool) on a
 * 64x64 input, then fc 2048-512-512-classes: the benchmark model of the kernel work. Module
 * names follow torchvision's VGG (features.N, classifier.N), so checkpoints map onto a
 * PyTorch twin. */
static void build_vgg16_64(zoo_builder *b, int arg, int classes)
{
    (void)arg;
    zoo_vgg_features(b, 16, 0);
    zadd(b, "flatten", "flatten", NULL, "%s", "");
    zadd(b, "linear", "classifier.0", NULL, "outputs=512");
    zadd(b, "relu", "classifier.1", NULL, "%s", "");
    zadd(b, "linear", "classifier.2", NULL, "outputs=512");
    zadd(b, "relu", "classifier.3", NULL, "%s", "");
    zadd(b, "linear", "classifier.4", NULL, "outputs=%d", classes);
}

/* AlexNet's convolutions for 3x32x32 (11x11 stride 4 padding 5, 2x2 pools): 256 features at
 * 1x1, one linear layer. */
static void build_alexnet_cifar(zoo_builder *b, int arg, int classes)
{
    (void)arg;
    zadd(b, "conv2d", "features.0", NULL, "filters=64 kernel=11 stride=4 padding=5");
    zadd(b, "relu", "features.1", NULL, "%s", "");
    zadd(b, "maxpool", "features.2", NULL, "kernel=2");
    zadd(b, "conv2d", "features.3", NULL, "filters=192 kernel=5 padding=2");
    zadd(b, "relu", "features.4", NULL, "%s", "");
    zadd(b, "maxpool", "features.5", NULL, "kernel=2");
    zadd(b, "conv2d", "features.6", NULL, "filters=384 kernel=3 padding=1");
    zadd(b, "relu", "features.7", NULL, "%s", "");
    zadd(b, "conv2d", "features.8", NULL, "filters=256 kernel=3 padding=1");
    zadd(b, "relu", "features.9", NULL, "%s", "");
    zadd(b, "conv2d", "features.10", NULL, "filters=256 kernel=3 padding=1");
    zadd(b, "relu", "features.11", NULL, "%s", "");
    zadd(b, "maxpool", "features.12", NULL, "kernel=2");
    zadd(b, "flatten", "flatten", NULL, "%s", "");
    zadd(b, "linear", "classifier", NULL, "outputs=%d", classes);
}

/* VGG-16 with batch norm (torchvision's vgg16_bn feature stack and names): 512x1x1 features
 * on 3x32x32, then one linear layer. */
static void build_vgg16_cifar(zoo_builder *b, int arg, int classes)
{
    (void)arg;
    zoo_vgg_features(b, 16, 1);
    zadd(b, "flatten", "flatten", NULL, "%s", "");
    zadd(b, "linear", "classifier", NULL, "outputs=%d", classes);
}

typedef struct {
    const char *name;
    const char *description;
    int c, h, w;
    int classes;                /* when the caller gives none */
    void (*build)(zoo_builder *b, int arg, int classes);
    int arg;                    /* passed to build: a depth, a batch-norm flag, or unused */
} zoo_entry;

static const zoo_entry zoo[] = {
    {"lenet5", "LeNet-5, 1x28x28 (Fashion-MNIST), 61,706 parameters", 1, 28, 28, 10, build_lenet5,
     0},
    {"cifarcnn", "4 conv + 2 fc CIFAR network, 3x32x32, 2,168,362 parameters", 3, 32, 32, 10,
     build_cifarcnn, 0},
    {"resnet20", "CIFAR ResNet-20 (He et al. 2016, option A), 3x32x32, 269,722 parameters", 3,
     32, 32, 10, build_cifar_resnet, 20},
    {"resnet32", "CIFAR ResNet-32 (option A), 3x32x32, 464,154 parameters", 3, 32, 32, 10,
     build_cifar_resnet, 32},
    {"resnet44", "CIFAR ResNet-44 (option A), 3x32x32, 658,586 parameters", 3, 32, 32, 10,
     build_cifar_resnet, 44},
    {"resnet56", "CIFAR ResNet-56 (option A), 3x32x32, 853,018 parameters", 3, 32, 32, 10,
     build_cifar_resnet, 56},
    {"resnet110", "CIFAR ResNet-110 (option A), 3x32x32, 1,727,962 parameters", 3, 32, 32, 10,
     build_cifar_resnet, 110},
    {"alexnet_cifar", "AlexNet's convs for 3x32x32 + 1 linear, 2,472,266 parameters", 3, 32, 32,
     10, build_alexnet_cifar, 0},
    {"vgg16_cifar", "VGG-16 with batch norm on 3x32x32 + 1 linear, 14,728,266 parameters", 3, 32,
     32, 10, build_vgg16_cifar, 0},
    {"vgg16-64", "VGG-16 conv stack on 3x64x64, fc 2048-512-512-200, 16,129,032 parameters", 3,
     64, 64, 200, build_vgg16_64, 0},
    {"mlp", "fc 512, fc 512, fc classes on the flattened input (default 1x28x28)", 1, 28, 28,
     10, build_mlp, 0},
    {"alexnet", "torchvision AlexNet, 3x224x224, 61,100,840 parameters", 3, 224, 224, 1000,
     zoo_alexnet, 0},
    {"vgg11", "torchvision VGG-11, 3x224x224, 132,863,336 parameters", 3, 224, 224, 1000,
     zoo_vgg, 11},
    {"vgg16", "torchvision VGG-16, 3x224x224, 138,357,544 parameters", 3, 224, 224, 1000,
     zoo_vgg, 16},
    {"vgg11_bn", "torchvision VGG-11 with batch norm, 3x224x224, 132,868,840 parameters", 3, 224,
     224, 1000, zoo_vgg, 111},
    {"vgg16_bn", "torchvision VGG-16 with batch norm, 3x224x224, 138,365,992 parameters", 3, 224,
     224, 1000, zoo_vgg, 116},
    {"resnet18", "torchvision ResNet-18, 3x224x224, 11,689,512 parameters", 3, 224, 224, 1000,
     zoo_resnet, 18},
    {"resnet34", "torchvision ResNet-34, 3x224x224, 21,797,672 parameters", 3, 224, 224, 1000,
     zoo_resnet, 34},
    {"resnet50", "torchvision ResNet-50 (stride on the 3x3), 3x224x224, 25,557,032 parameters",
     3, 224, 224, 1000, zoo_resnet, 50},
    {"mobilenet_v2", "torchvision MobileNetV2, 3x224x224, 3,504,872 parameters", 3, 224, 224,
     1000, zoo_mobilenet_v2, 0},
    {"densenet121", "torchvision DenseNet-121, 3x224x224, 7,978,856 parameters", 3, 224, 224,
     1000, zoo_densenet121, 0},
    {"mobilenet_v3_large", "torchvision MobileNetV3-Large, 3x224x224, 5,483,032 parameters", 3,
     224, 224, 1000, zoo_mobilenet_v3_large, 0},
    {"regnet_y_400mf", "torchvision RegNetY-400MF, 3x224x224, 4,344,144 parameters", 3, 224, 224,
     1000, zoo_regnet_y_400mf, 0},
    {"efficientnet_v2_s", "torchvision EfficientNetV2-S, 3x224x224, 21,458,488 parameters", 3,
     224, 224, 1000, zoo_efficientnet_v2_s, 0},
    {"convnext_tiny", "torchvision ConvNeXt-Tiny, 3x224x224, 28,589,128 parameters", 3, 224, 224,
     1000, zoo_convnext_tiny, 0},
};

const char *dtnn_zoo_name(int i, const char **description)
{
    if (i < 0 || i >= (int)(sizeof zoo / sizeof zoo[0]))
        return NULL;
    if (description)
        *description = zoo[i].description;
    return zoo[i].name;
}

dtnn_model *dtnn_zoo_create(const char *name, int classes, int c, int h, int w, dtnn_error *err)
{
    const zoo_entry *e = NULL;
    for (size_t i = 0; i < sizeof zoo / sizeof zoo[0]; i++)
        if (!strcmp(zoo[i].name, name))
            e = &zoo[i];
    if (!e) {
        char names[1024] = "";
        for (size_t i = 0; i < sizeof zoo / sizeof zoo[0]; i++) {
            strncat(names, i ? ", " : "", sizeof names - strlen(names) - 1);
            strncat(names, zoo[i].name, sizeof names - strlen(names) - 1);
        }
        dtnn_error_set(err, DTNN_ERR_ARG, "unknown model '%s' (the zoo has: %s; or give a model "
                       "file path)", name, names);
        return NULL;
    }
    if (classes <= 0)
        classes = e->classes;
    dtnn_model *m = dtnn_model_create(c > 0 ? c : e->c, h > 0 ? h : e->h, w > 0 ? w : e->w);
    if (!m) {
        dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory creating model '%s'", name);
        return NULL;
    }
    zoo_builder b = {m, err, 0};
    e->build(&b, e->arg, classes);
    if (b.failed) {
        dtnn_model_free(m);
        return NULL;
    }
    return m;
}

dtnn_model *dtnn_model_from_spec(const char *spec, int classes, int c, int h, int w,
                                 dtnn_error *err)
{
    /* A path (it has a '/' or a '.') is a model file, which fixes its own input and classes;
     * "*.onnx" is an ONNX model. */
    size_t len = strlen(spec);
    if (len > 5 && !strcmp(spec + len - 5, ".onnx"))
        return dtnn_onnx_import(spec, err);
    if (strchr(spec, '/') || strchr(spec, '.'))
        return dtnn_model_parse_file(spec, err);
    return dtnn_zoo_create(spec, classes, c, h, w, err);
}
