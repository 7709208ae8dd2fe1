/*
 * zoo_modern.c — torchvision 0.14's models with squeeze-and-excitation, layer for layer and
 * with its module names (as zoo_torchvision.c): MobileNetV3-Large (hardswish, SE gated by
 * hardsigmoid), RegNetY-400MF (grouped bottlenecks, SE gated by sigmoid) and EfficientNetV2-S
 * (fused and depthwise inverted residuals, SiLU, SE gated by sigmoid); and ConvNeXt-Tiny, which
 * has no SE but the other blocks of the 2020s (LayerNorm over channels, GELU, layer scale).
 *
 * torchvision's SqueezeExcitation is avgpool -> fc1 (1x1 conv with bias) -> activation -> fc2
 * -> scale activation -> x * scale; here global_avgpool, two conv2d named <prefix>.fc1 and
 * .fc2, and a broadcasting mul of [C, 1, 1] against [C, H, W].
 */
#include <string.h>

#include "zoo_builder.h"

#define NAME_LEN 96     /* a layer name (layer.h holds 96) */

/* buf = prefix + suffix. No name here comes near NAME_LEN; one that did would be cut, and the
 * layer's name then clash with its sibling's, which zadd reports. */
static const char *sub(char buf[NAME_LEN], const char *prefix, const char *suffix)
{
    if (snprintf(buf, NAME_LEN, "%s%s", prefix, suffix) >= NAME_LEN)
        buf[NAME_LEN - 1] = '\0';
    return buf;
}

/* conv (no bias) <prefix>.0 + batch norm <prefix>.1 (eps, momentum) [+ activation <prefix>.2,
 * act NULL for none]: torchvision's Conv2dNormActivation. */
static int conv_norm_act(zoo_builder *b, int in, const char *prefix, int filters, int kernel,
                         int stride, int groups, const char *bn_opts, const char *act)
{
    char conv[NAME_LEN], bn[NAME_LEN], a[NAME_LEN];
    sub(conv, prefix, ".0");
    sub(bn, prefix, ".1");
    sub(a, prefix, ".2");
    int x = zadd(b, "conv2d", conv, in == ZOO_END ? NULL : INPUTS(in),
                 "filters=%d kernel=%d stride=%d padding=%d groups=%d bias=0", filters, kernel,
                 stride, (kernel - 1) / 2, groups);
    x = zadd(b, "batchnorm", bn, INPUTS(x), "%s", bn_opts);
    return act ? zadd(b, act, a, INPUTS(x), "%s", "") : x;
}

/* torchvision's SqueezeExcitation over x (channels wide), squeezed to `squeeze` channels. */
static int squeeze_excite(zoo_builder *b, int x, const char *prefix, int channels, int squeeze,
                          const char *act, const char *gate)
{
    char name[NAME_LEN];
    sub(name, prefix, ".avgpool");
    int s = zadd(b, "global_avgpool", name, INPUTS(x), "%s", "");
    sub(name, prefix, ".fc1");
    s = zadd(b, "conv2d", name, INPUTS(s), "filters=%d kernel=1", squeeze);
    sub(name, prefix, ".activation");
    s = zadd(b, act, name, INPUTS(s), "%s", "");
    sub(name, prefix, ".fc2");
    s = zadd(b, "conv2d", name, INPUTS(s), "filters=%d kernel=1", channels);
    sub(name, prefix, ".scale_activation");
    s = zadd(b, gate, name, INPUTS(s), "%s", "");
    sub(name, prefix, ".scale");
    return zadd(b, "mul", name, INPUTS(x, s), "%s", "");
}

/* MobileNetV3-Large (Howard et al. 2019; torchvision's width 1.0, no dilation): a 3x3
 * hardswish stem, 15 inverted residual blocks, a 1x1 conv to 960, global average pool,
 * linear 1280 + hardswish + dropout 0.2, linear. Batch norms with eps 0.001, momentum 0.01. */
void zoo_mobilenet_v3_large(zoo_builder *b, int arg, int classes)
{
    (void)arg;
    static const struct {
        short in, kernel, expanded, out, squeeze, hardswish, stride;
    } blocks[15] = {
        {16, 3, 16, 16, 0, 0, 1},     {16, 3, 64, 24, 0, 0, 2},     {24, 3, 72, 24, 0, 0, 1},
        {24, 5, 72, 40, 24, 0, 2},    {40, 5, 120, 40, 32, 0, 1},   {40, 5, 120, 40, 32, 0, 1},
        {40, 3, 240, 80, 0, 1, 2},    {80, 3, 200, 80, 0, 1, 1},    {80, 3, 184, 80, 0, 1, 1},
        {80, 3, 184, 80, 0, 1, 1},    {80, 3, 480, 112, 120, 1, 1}, {112, 3, 672, 112, 168, 1, 1},
        {112, 5, 672, 160, 168, 1, 2}, {160, 5, 960, 160, 240, 1, 1},
        {160, 5, 960, 160, 240, 1, 1}};
    const char *bn = "eps=0.001 momentum=0.01";
    int x = conv_norm_act(b, ZOO_END, "features.0", 16, 3, 2, 1, bn, "hardswish");
    char prefix[NAME_LEN];
    for (int i = 0; i < 15; i++) {
        const char *act = blocks[i].hardswish ? "hardswish" : "relu";
        const int exp = blocks[i].expanded;
        int block_in = x, part = 0;
        if (exp != blocks[i].in) {
            snprintf(prefix, sizeof prefix, "features.%d.block.%d", i + 1, part++);
            x = conv_norm_act(b, x, prefix, exp, 1, 1, 1, bn, act);
        }
        snprintf(prefix, sizeof prefix, "features.%d.block.%d", i + 1, part++);
        x = conv_norm_act(b, x, prefix, exp, blocks[i].kernel, blocks[i].stride, exp, bn, act);
        if (blocks[i].squeeze) {
            snprintf(prefix, sizeof prefix, "features.%d.block.%d", i + 1, part++);
            x = squeeze_excite(b, x, prefix, exp, blocks[i].squeeze, "relu", "hardsigmoid");
        }
        snprintf(prefix, sizeof prefix, "features.%d.block.%d", i + 1, part);
        x = conv_norm_act(b, x, prefix, blocks[i].out, 1, 1, 1, bn, NULL);
        if (blocks[i].stride == 1 && blocks[i].in == blocks[i].out) {
            snprintf(prefix, sizeof prefix, "features.%d.add", i + 1);
            x = zadd(b, "add", prefix, INPUTS(x, block_in), "%s", "");
        }
    }
    x = conv_norm_act(b, x, "features.16", 960, 1, 1, 1, bn, "hardswish");
    zadd(b, "global_avgpool", "avgpool", INPUTS(x), "%s", "");
    zadd(b, "flatten", "flatten", NULL, "%s", "");
    zadd(b, "linear", "classifier.0", NULL, "outputs=1280");
    zadd(b, "hardswish", "classifier.1", NULL, "%s", "");
    zadd(b, "dropout", "classifier.2", NULL, "p=0.2");
    zadd(b, "linear", "classifier.3", NULL, "outputs=%d", classes);
}

/* RegNetY-400MF (Radosavovic et al. 2020; torchvision's regnet_y_400mf): a 3x3 stem of 32,
 * four stages of 1, 3, 6, 6 residual bottlenecks of widths 48, 104, 208, 440 (group width 8,
 * bottleneck ratio 1, SE squeezing to a quarter of the block's input width, the first block of
 * a stage striding 2 with a 1x1 projection shortcut), global average pool, linear. */
void zoo_regnet_y_400mf(zoo_builder *b, int arg, int classes)
{
    (void)arg;
    static const int depth[4] = {1, 3, 6, 6}, width[4] = {48, 104, 208, 440};
    int x = conv_norm_act(b, ZOO_END, "stem", 32, 3, 2, 1, "", "relu");
    int w_in = 32;
    char prefix[NAME_LEN], name[NAME_LEN];
    for (int s = 0; s < 4; s++) {
        const int w = width[s];
        for (int i = 0; i < depth[s]; i++) {
            const int stride = i == 0 ? 2 : 1;
            snprintf(prefix, sizeof prefix, "trunk_output.block%d.block%d-%d", s + 1, s + 1, i);
            int shortcut = x;
            if (w_in != w || stride != 1) {
                sub(name, prefix, ".proj");
                shortcut = conv_norm_act(b, x, name, w, 1, stride, 1, "", NULL);
            }
            sub(name, prefix, ".f.a");
            int y = conv_norm_act(b, x, name, w, 1, 1, 1, "", "relu");
            sub(name, prefix, ".f.b");
            y = conv_norm_act(b, y, name, w, 3, stride, w / 8, "", "relu");
            sub(name, prefix, ".f.se");
            /* round(0.25 * w_in): every input width here is a multiple of 4 */
            y = squeeze_excite(b, y, name, w, w_in / 4, "relu", "sigmoid");
            sub(name, prefix, ".f.c");
            y = conv_norm_act(b, y, name, w, 1, 1, 1, "", NULL);
            sub(name, prefix, ".add");
            y = zadd(b, "add", name, INPUTS(y, shortcut), "%s", "");
            sub(name, prefix, ".activation");
            x = zadd(b, "relu", name, INPUTS(y), "%s", "");
            w_in = w;
        }
    }
    zadd(b, "global_avgpool", "avgpool", INPUTS(x), "%s", "");
    zadd(b, "flatten", "flatten", NULL, "%s", "");
    zadd(b, "linear", "fc", NULL, "outputs=%d", classes);
}

/* EfficientNetV2-S (Tan & Le 2021; torchvision's efficientnet_v2_s): a 3x3 SiLU stem of 24, three
 * stages of fused inverted residuals (a 3x3 expansion, a 1x1 projection), three of depthwise
 * ones with SE squeezing to a quarter of the block's input, a 1x1 conv to 1280, global average
 * pool, dropout 0.2, linear. Batch norms with eps 0.001. Each residual branch ends in
 * stochastic depth as torchvision's, p = 0.2 * (index of the block among all 40) / 40. */
void zoo_efficientnet_v2_s(zoo_builder *b, int arg, int classes)
{
    (void)arg;
    static const struct {
        short fused, expand, stride, out, layers;
    } stages[6] = {{1, 1, 1, 24, 2},  {1, 4, 2, 48, 4},  {1, 4, 2, 64, 4},
                   {0, 4, 2, 128, 6}, {0, 6, 1, 160, 9}, {0, 6, 2, 256, 15}};
    const char *bn = "eps=0.001";
    int x = conv_norm_act(b, ZOO_END, "features.0", 24, 3, 2, 1, bn, "silu");
    int in = 24, block = 0;
    char prefix[NAME_LEN], name[NAME_LEN];
    for (int s = 0; s < 6; s++) {
        const int out = stages[s].out, expand = stages[s].expand;
        for (int i = 0; i < stages[s].layers; i++) {
            const int stride = i == 0 ? stages[s].stride : 1, hidden = in * expand;
            int block_in = x;
            snprintf(prefix, sizeof prefix, "features.%d.%d.block", s + 1, i);
            if (stages[s].fused && expand == 1) {
                x = conv_norm_act(b, x, sub(name, prefix, ".0"), out, 3, stride, 1, bn, "silu");
            } else if (stages[s].fused) {
                x = conv_norm_act(b, x, sub(name, prefix, ".0"), hidden, 3, stride, 1, bn,
                                  "silu");
                x = conv_norm_act(b, x, sub(name, prefix, ".1"), out, 1, 1, 1, bn, NULL);
            } else {
                x = conv_norm_act(b, x, sub(name, prefix, ".0"), hidden, 1, 1, 1, bn, "silu");
                x = conv_norm_act(b, x, sub(name, prefix, ".1"), hidden, 3, stride, hidden, bn,
                                  "silu");
                x = squeeze_excite(b, x, sub(name, prefix, ".2"), hidden, in / 4, "silu",
                                   "sigmoid");
                x = conv_norm_act(b, x, sub(name, prefix, ".3"), out, 1, 1, 1, bn, NULL);
            }
            if (stride == 1 && in == out) {
                /* p = 0 (the first block) is the identity: no layer */
                snprintf(name, sizeof name, "features.%d.%d.stochastic_depth", s + 1, i);
                if (block > 0)
                    x = zadd(b, "stochastic_depth", name, INPUTS(x), "p=%.9g",
                             0.2 * block / 40.0);
                snprintf(name, sizeof name, "features.%d.%d.add", s + 1, i);
                x = zadd(b, "add", name, INPUTS(x, block_in), "%s", "");
            }
            in = out;
            block++;
        }
    }
    x = conv_norm_act(b, x, "features.7", 1280, 1, 1, 1, bn, "silu");
    zadd(b, "global_avgpool", "avgpool", INPUTS(x), "%s", "");
    zadd(b, "flatten", "flatten", NULL, "%s", "");
    zadd(b, "dropout", "classifier.0", NULL, "p=0.2");
    zadd(b, "linear", "classifier.1", NULL, "outputs=%d", classes);
}

/* ConvNeXt-Tiny (Liu et al. 2022; torchvision's convnext_tiny): a 4x4 stride-4 stem and
 * LayerNorm2d; stages of 3, 3, 9, 3 blocks of 96, 192, 384, 768 channels, a LayerNorm2d and a
 * 2x2 stride-2 convolution between them. A block: 7x7 depthwise convolution, LayerNorm over
 * channels, Linear to 4x, GELU, Linear back (torchvision's between two permutes: here 1x1
 * convolutions whose weights are [out, in] as its Linears', weight_dims = 2), times the
 * trainable layer scale <block>.layer_scale [C, 1, 1] (1e-6 at first), stochastic depth
 * (p = 0.1 * block / 17), plus the block's input. Global average pool, LayerNorm2d, linear.
 * LayerNorms with eps 1e-6. */
void zoo_convnext_tiny(zoo_builder *b, int arg, int classes)
{
    (void)arg;
    static const int depth[4] = {3, 3, 9, 3}, width[4] = {96, 192, 384, 768};
    const char *ln = "eps=1e-6";
    zadd(b, "conv2d", "features.0.0", NULL, "filters=96 kernel=4 stride=4");
    int x = zadd(b, "layernorm", "features.0.1", NULL, "%s", ln);
    char prefix[NAME_LEN], name[NAME_LEN];
    int block = 0;
    for (int s = 0; s < 4; s++) {
        const int dim = width[s];
        if (s > 0) {
            snprintf(prefix, sizeof prefix, "features.%d", 2 * s);
            x = zadd(b, "layernorm", sub(name, prefix, ".0"), INPUTS(x), "%s", ln);
            x = zadd(b, "conv2d", sub(name, prefix, ".1"), INPUTS(x), "filters=%d kernel=2 "
                     "stride=2", dim);
        }
        for (int i = 0; i < depth[s]; i++, block++) {
            snprintf(prefix, sizeof prefix, "features.%d.%d", 2 * s + 1, i);
            int y = zadd(b, "conv2d", sub(name, prefix, ".block.0"), INPUTS(x),
                         "filters=%d kernel=7 padding=3 groups=%d", dim, dim);
            y = zadd(b, "layernorm", sub(name, prefix, ".block.2"), INPUTS(y), "%s", ln);
            y = zadd(b, "conv2d", sub(name, prefix, ".block.3"), INPUTS(y),
                     "filters=%d kernel=1 weight_dims=2", 4 * dim);
            y = zadd(b, "gelu", sub(name, prefix, ".block.4"), INPUTS(y), "%s", "");
            y = zadd(b, "conv2d", sub(name, prefix, ".block.5"), INPUTS(y),
                     "filters=%d kernel=1 weight_dims=2", dim);
            y = zadd(b, "mul", prefix, INPUTS(y), "const_shape=%dx1x1 const_value=1e-6 "
                     "trainable=true const_name=layer_scale", dim);
            if (block > 0)
                y = zadd(b, "stochastic_depth", sub(name, prefix, ".stochastic_depth"),
                         INPUTS(y), "p=%.9g", 0.1 * block / 17.0);
            x = zadd(b, "add", sub(name, prefix, ".add"), INPUTS(y, x), "%s", "");
        }
    }
    zadd(b, "global_avgpool", "avgpool", INPUTS(x), "%s", "");
    zadd(b, "layernorm", "classifier.0", NULL, "%s", ln);
    zadd(b, "flatten", "classifier.1", NULL, "%s", "");
    zadd(b, "linear", "classifier.2", NULL, "outputs=%d", classes);
}
