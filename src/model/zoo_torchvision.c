/*
 * zoo_torchvision.c — the ImageNet models of torchvision 0.14, layer for layer: AlexNet, VGG
 * (11/16, with or without batch norm), ResNet (18/34 basic blocks, 50 bottlenecks with the
 * stride on the 3x3 as torchvision's "v1.5"), MobileNetV2 and DenseNet-121. Every module that
 * holds tensors has torchvision's name (features.3.weight, layer2.0.downsample.1.running_var,
 * features.denseblock2.denselayer4.conv1.weight, ...), so a dtnn checkpoint is a torchvision
 * state_dict and back (tests/test_zoo.c checks names, shapes and outputs against files written
 * by tools/gen_zoo_reference.py). Layers without tensors (ReLU, pooling, add, concat) get
 * descriptive names of their own, since torchvision's are not part of any state_dict.
 *
 * The classifier heads end in `classes` outputs; the adaptive average pools let AlexNet and VGG
 * take other input sizes as torchvision's do (the feature stack must still fit the input: a
 * layer that does not is reported by name when the model is built).
 */
#include <string.h>

#include "zoo_builder.h"

#define NAME_LEN 96     /* a layer name (layer.h holds 96) */
#define PREFIX_LEN 64   /* a block prefix, leaving room for a suffix */

/* conv (no bias) + batch norm [+ activation], the unit of ResNet, MobileNetV2 and DenseNet. */
static int conv_bn(zoo_builder *b, int in, const char *conv_name, const char *bn_name,
                   int filters, int kernel, int stride, int groups)
{
    int x = zadd(b, "conv2d", conv_name, in == ZOO_END ? NULL : INPUTS(in),
                 "filters=%d kernel=%d stride=%d padding=%d groups=%d bias=0", filters, kernel,
                 stride, (kernel - 1) / 2, groups);
    return zadd(b, "batchnorm", bn_name, INPUTS(x), "%s", "");
}

/* torchvision's Conv2dNormActivation with ReLU6, named <prefix>.0 (conv) and <prefix>.1 (bn). */
static int conv_bn_relu6(zoo_builder *b, int in, const char *prefix, int filters, int kernel,
                         int stride, int groups)
{
    char conv[NAME_LEN], bn[NAME_LEN], act[NAME_LEN];
    snprintf(conv, sizeof conv, "%s.0", prefix);
    snprintf(bn, sizeof bn, "%s.1", prefix);
    snprintf(act, sizeof act, "%s.2", prefix);
    int x = conv_bn(b, in, conv, bn, filters, kernel, stride, groups);
    return zadd(b, "relu6", act, INPUTS(x), "%s", "");
}

void zoo_alexnet(zoo_builder *b, int arg, int classes)
{
    (void)arg;
    zadd(b, "conv2d", "features.0", NULL, "filters=64 kernel=11 stride=4 padding=2");
    zadd(b, "relu", "features.1", NULL, "%s", "");
    zadd(b, "maxpool", "features.2", NULL, "kernel=3 stride=2");
    zadd(b, "conv2d", "features.3", NULL, "filters=192 kernel=5 padding=2");
    zadd(b, "relu", "features.4", NULL, "%s", "");
    zadd(b, "maxpool", "features.5", NULL, "kernel=3 stride=2");
    zadd(b, "conv2d", "features.6", NULL, "filters=384 kernel=3 padding=1");
    zadd(b, "relu", "features.7", NULL, "%s", "");
    zadd(b, "conv2d", "features.8", NULL, "filters=256 kernel=3 padding=1");
    zadd(b, "relu", "features.9", NULL, "%s", "");
    zadd(b, "conv2d", "features.10", NULL, "filters=256 kernel=3 padding=1");
    zadd(b, "relu", "features.11", NULL, "%s", "");
    zadd(b, "maxpool", "features.12", NULL, "kernel=3 stride=2");
    zadd(b, "adaptive_avgpool", "avgpool", NULL, "output=6x6");
    zadd(b, "flatten", "flatten", NULL, "%s", "");
    zadd(b, "dropout", "classifier.0", NULL, "p=0.5");
    zadd(b, "linear", "classifier.1", NULL, "outputs=4096");
    zadd(b, "relu", "classifier.2", NULL, "%s", "");
    zadd(b, "dropout", "classifier.3", NULL, "p=0.5");
    zadd(b, "linear", "classifier.4", NULL, "outputs=4096");
    zadd(b, "relu", "classifier.5", NULL, "%s", "");
    zadd(b, "linear", "classifier.6", NULL, "outputs=%d", classes);
}

/* torchvision's cfgs "A" (VGG-11) and "D" (VGG-16); 0 = 2x2 max pool. Each conv is 3x3,
 * padding 1, with bias (also before batch norm, as torchvision), then [bn,] ReLU, all named
 * features.N in order as torchvision's nn.Sequential. */
void zoo_vgg_features(zoo_builder *b, int depth, int batch_norm)
{
    static const int cfg_a[] = {64, 0, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0, -1};
    static const int cfg_d[] = {64,  64,  0,   128, 128, 0,   256, 256, 256, 0,
                                512, 512, 512, 0,   512, 512, 512, 0,   -1};
    const int *cfg = depth == 11 ? cfg_a : cfg_d;
    int index = 0;
    char name[NAME_LEN];
    for (int i = 0; cfg[i] >= 0; i++) {
        snprintf(name, sizeof name, "features.%d", index++);
        if (cfg[i] == 0) {
            zadd(b, "maxpool", name, NULL, "kernel=2");
            continue;
        }
        zadd(b, "conv2d", name, NULL, "filters=%d kernel=3 padding=1", cfg[i]);
        if (batch_norm) {
            snprintf(name, sizeof name, "features.%d", index++);
            zadd(b, "batchnorm", name, NULL, "%s", "");
        }
        snprintf(name, sizeof name, "features.%d", index++);
        zadd(b, "relu", name, NULL, "%s", "");
    }
}

/* arg = depth + 100 * batch_norm */
void zoo_vgg(zoo_builder *b, int arg, int classes)
{
    zoo_vgg_features(b, arg % 100, arg >= 100);
    zadd(b, "adaptive_avgpool", "avgpool", NULL, "output=7x7");
    zadd(b, "flatten", "flatten", NULL, "%s", "");
    zadd(b, "linear", "classifier.0", NULL, "outputs=4096");
    zadd(b, "relu", "classifier.1", NULL, "%s", "");
    zadd(b, "dropout", "classifier.2", NULL, "p=0.5");
    zadd(b, "linear", "classifier.3", NULL, "outputs=4096");
    zadd(b, "relu", "classifier.4", NULL, "%s", "");
    zadd(b, "dropout", "classifier.5", NULL, "p=0.5");
    zadd(b, "linear", "classifier.6", NULL, "outputs=%d", classes);
}

/* One residual block of torchvision's ResNet: basic (two 3x3) or bottleneck (1x1 to `planes`,
 * 3x3 carrying the stride, 1x1 to 4 * planes). The shortcut is a strided 1x1 conv + bn
 * ("downsample") when the shape changes. Returns the block's output id. */
static int resnet_block(zoo_builder *b, const char *prefix, int in, int in_planes, int planes,
                        int stride, int bottleneck)
{
    char n1[NAME_LEN], n2[NAME_LEN];
    const int out_planes = bottleneck ? 4 * planes : planes;
    const int convs = bottleneck ? 3 : 2;
    int x = in;
    for (int i = 1; i <= convs; i++) {
        int kernel = bottleneck && i != 2 ? 1 : 3;
        int conv_stride = (bottleneck ? i == 2 : i == 1) ? stride : 1;
        int filters = i == convs ? out_planes : planes;
        snprintf(n1, sizeof n1, "%s.conv%d", prefix, i);
        snprintf(n2, sizeof n2, "%s.bn%d", prefix, i);
        x = conv_bn(b, x, n1, n2, filters, kernel, conv_stride, 1);
        if (i < convs) {
            snprintf(n1, sizeof n1, "%s.relu%d", prefix, i);
            x = zadd(b, "relu", n1, INPUTS(x), "%s", "");
        }
    }
    int shortcut = in;
    if (stride != 1 || in_planes != out_planes) {
        snprintf(n1, sizeof n1, "%s.downsample.0", prefix);
        snprintf(n2, sizeof n2, "%s.downsample.1", prefix);
        shortcut = conv_bn(b, in, n1, n2, out_planes, 1, stride, 1);
    }
    snprintf(n1, sizeof n1, "%s.add", prefix);
    x = zadd(b, "add", n1, INPUTS(x, shortcut), "%s", "");
    snprintf(n1, sizeof n1, "%s.relu", prefix);
    return zadd(b, "relu", n1, INPUTS(x), "%s", "");
}

void zoo_resnet(zoo_builder *b, int depth, int classes)
{
    static const int blocks18[4] = {2, 2, 2, 2}, blocks34[4] = {3, 4, 6, 3};
    const int *blocks = depth == 18 ? blocks18 : blocks34;  /* 50 has 34's counts */
    const int bottleneck = depth >= 50;
    int x = conv_bn(b, ZOO_END, "conv1", "bn1", 64, 7, 2, 1);
    /* conv_bn pads (k - 1) / 2 = 3 for the 7x7, as torchvision's conv1. */
    x = zadd(b, "relu", "relu", INPUTS(x), "%s", "");
    x = zadd(b, "maxpool", "maxpool", INPUTS(x), "kernel=3 stride=2 padding=1");
    int in_planes = 64;
    for (int stage = 0; stage < 4; stage++) {
        int planes = 64 << stage;
        for (int i = 0; i < blocks[stage]; i++) {
            char prefix[32];
            snprintf(prefix, sizeof prefix, "layer%d.%d", stage + 1, i);
            x = resnet_block(b, prefix, x, in_planes, planes, stage > 0 && i == 0 ? 2 : 1,
                             bottleneck);
            in_planes = bottleneck ? 4 * planes : planes;
        }
    }
    zadd(b, "global_avgpool", "avgpool", INPUTS(x), "%s", "");
    zadd(b, "flatten", "flatten", NULL, "%s", "");
    zadd(b, "linear", "fc", NULL, "outputs=%d", classes);
}

/* MobileNetV2 (width 1.0): a 3x3 stem, 17 inverted residual blocks (1x1 expansion by t unless
 * t = 1, 3x3 depthwise carrying the stride, linear 1x1 projection, identity shortcut when the
 * shape is kept), a 1x1 conv to 1280, global average pool, dropout 0.2, linear. */
void zoo_mobilenet_v2(zoo_builder *b, int arg, int classes)
{
    (void)arg;
    static const int settings[7][4] = {/* t, c, n, s */
                                       {1, 16, 1, 1},  {6, 24, 2, 2},  {6, 32, 3, 2},
                                       {6, 64, 4, 2},  {6, 96, 3, 1},  {6, 160, 3, 2},
                                       {6, 320, 1, 1}};
    int x = conv_bn_relu6(b, ZOO_END, "features.0", 32, 3, 2, 1);
    int in_ch = 32, index = 1;
    char prefix[PREFIX_LEN], n1[NAME_LEN], n2[NAME_LEN];
    for (int s = 0; s < 7; s++) {
        const int t = settings[s][0], out_ch = settings[s][1];
        for (int i = 0; i < settings[s][2]; i++) {
            const int stride = i == 0 ? settings[s][3] : 1, hidden = in_ch * t;
            int block_in = x, part = 0;
            if (t != 1) {
                snprintf(prefix, sizeof prefix, "features.%d.conv.%d", index, part++);
                x = conv_bn_relu6(b, x, prefix, hidden, 1, 1, 1);
            }
            snprintf(prefix, sizeof prefix, "features.%d.conv.%d", index, part++);
            x = conv_bn_relu6(b, x, prefix, hidden, 3, stride, hidden);
            snprintf(n1, sizeof n1, "features.%d.conv.%d", index, part++);
            snprintf(n2, sizeof n2, "features.%d.conv.%d", index, part);
            x = conv_bn(b, x, n1, n2, out_ch, 1, 1, 1);
            if (stride == 1 && in_ch == out_ch) {
                snprintf(n1, sizeof n1, "features.%d.add", index);
                x = zadd(b, "add", n1, INPUTS(x, block_in), "%s", "");
            }
            in_ch = out_ch;
            index++;
        }
    }
    snprintf(prefix, sizeof prefix, "features.%d", index);
    x = conv_bn_relu6(b, x, prefix, 1280, 1, 1, 1);
    zadd(b, "global_avgpool", "avgpool", INPUTS(x), "%s", "");
    zadd(b, "flatten", "flatten", NULL, "%s", "");
    zadd(b, "dropout", "classifier.0", NULL, "p=0.2");
    zadd(b, "linear", "classifier.1", NULL, "outputs=%d", classes);
}

/* bn -> relu -> conv (no bias), DenseNet's pre-activation unit; names <prefix>.norm<s>,
 * .relu<s>, .conv<s> (s = "" in transitions). */
static int bn_relu_conv(zoo_builder *b, int in, const char *prefix, const char *s, int filters,
                        int kernel)
{
    char name[NAME_LEN];
    snprintf(name, sizeof name, "%s.norm%s", prefix, s);
    int x = zadd(b, "batchnorm", name, INPUTS(in), "%s", "");
    snprintf(name, sizeof name, "%s.relu%s", prefix, s);
    x = zadd(b, "relu", name, INPUTS(x), "%s", "");
    snprintf(name, sizeof name, "%s.conv%s", prefix, s);
    return zadd(b, "conv2d", name, INPUTS(x), "filters=%d kernel=%d padding=%d bias=0", filters,
                kernel, (kernel - 1) / 2);
}

/* DenseNet-121: growth 32, blocks of 6/12/24/16 layers (bn-relu-1x1 conv to 128, bn-relu-3x3
 * conv to 32), each layer reading the concatenation of everything before it in its block;
 * transitions halve the channels (1x1) and the size (2x2 average pool). The concatenation is
 * built as a chain, cat(cat(cat(x0, y1), y2), ...), which is torch.cat of the same list. */
void zoo_densenet121(zoo_builder *b, int arg, int classes)
{
    (void)arg;
    static const int block_layers[4] = {6, 12, 24, 16};
    const int growth = 32, bottleneck_width = 4 * 32;
    zadd(b, "conv2d", "features.conv0", NULL, "filters=64 kernel=7 stride=2 padding=3 bias=0");
    zadd(b, "batchnorm", "features.norm0", NULL, "%s", "");
    zadd(b, "relu", "features.relu0", NULL, "%s", "");
    int x = zadd(b, "maxpool", "features.pool0", NULL, "kernel=3 stride=2 padding=1");
    int features = 64;
    char prefix[PREFIX_LEN];
    for (int blk = 0; blk < 4; blk++) {
        for (int i = 0; i < block_layers[blk]; i++) {
            snprintf(prefix, sizeof prefix, "features.denseblock%d.denselayer%d", blk + 1, i + 1);
            int y = bn_relu_conv(b, x, prefix, "1", bottleneck_width, 1);
            y = bn_relu_conv(b, y, prefix, "2", growth, 3);
            char cat[NAME_LEN];
            snprintf(cat, sizeof cat, "%s.cat", prefix);
            x = zadd(b, "concat", cat, INPUTS(x, y), "%s", "");
            features += growth;
        }
        if (blk == 3)
            break;
        snprintf(prefix, sizeof prefix, "features.transition%d", blk + 1);
        features /= 2;
        x = bn_relu_conv(b, x, prefix, "", features, 1);
        char pool[NAME_LEN];
        snprintf(pool, sizeof pool, "%s.pool", prefix);
        x = zadd(b, "avgpool", pool, INPUTS(x), "kernel=2");
    }
    x = zadd(b, "batchnorm", "features.norm5", INPUTS(x), "%s", "");
    x = zadd(b, "relu", "relu", INPUTS(x), "%s", "");
    zadd(b, "global_avgpool", "avgpool", INPUTS(x), "%s", "");
    zadd(b, "flatten", "flatten", NULL, "%s", "");
    zadd(b, "linear", "classifier", NULL, "outputs=%d", classes);
}
