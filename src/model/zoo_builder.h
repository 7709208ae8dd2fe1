/*
 * zoo_builder.h — what the zoo's model files share: a builder that adds layers with
 * printf-formatted options and remembers the first failure, so a model definition reads as a
 * plain list of layers with one error check at the end. zoo.c holds the table of models and the
 * CIFAR-sized networks; zoo_torchvision.c the ImageNet models of torchvision 0.14.
 */
#ifndef DTNN_ZOO_BUILDER_H
#define DTNN_ZOO_BUILDER_H

#include "../core/internal.h"

typedef struct {
    dtnn_model *m;
    dtnn_error *err;
    int failed;
} zoo_builder;

/* Adds a layer; inputs is a list ended by ZOO_END (NULL = the previous layer). Returns its id,
 * or -1 once anything failed. */
#define ZOO_END (-99)
#if defined(__GNUC__)
__attribute__((format(printf, 5, 6)))
#endif
int zadd(zoo_builder *b, const char *type, const char *name, const int *inputs, const char *fmt,
         ...);

#define INPUTS(...) ((const int[]){__VA_ARGS__, ZOO_END})

/* torchvision 0.14's models, with its module names (zoo_torchvision.c). Every zoo builder has
 * this signature; `arg` is what a family needs (a depth, a batch-norm flag), else unused. */
void zoo_alexnet(zoo_builder *b, int arg, int classes);
void zoo_vgg(zoo_builder *b, int arg, int classes);       /* arg = depth + 100 * batch_norm */
void zoo_resnet(zoo_builder *b, int depth, int classes);
void zoo_mobilenet_v2(zoo_builder *b, int arg, int classes);
void zoo_densenet121(zoo_builder *b, int arg, int classes);
/* torchvision 0.14's models with squeeze-and-excitation (zoo_modern.c). */
void zoo_mobilenet_v3_large(zoo_builder *b, int arg, int classes);
void zoo_regnet_y_400mf(zoo_builder *b, int arg, int classes);
void zoo_efficientnet_v2_s(zoo_builder *b, int arg, int classes);
void zoo_convnext_tiny(zoo_builder *b, int arg, int classes);
/* VGG's feature stack (depth 11 or 16), features.0 .. features.N, shared with the zoo's
 * VGG-16 variants for 64x64 and CIFAR inputs. */
void zoo_vgg_features(zoo_builder *b, int depth, int batch_norm);

#endif
