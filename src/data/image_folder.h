/*
 * image_folder.h — the file list of an image folder split (image_folder.c): root/<class>/...
 * as torchvision.datasets.ImageFolder lists it.
 */
#ifndef DTNN_IMAGE_FOLDER_H
#define DTNN_IMAGE_FOLDER_H

#include <stdint.h>

#include "dtnn.h"

typedef struct {
    int64_t n;
    char **paths;           /* [n] */
    int32_t *labels;        /* [n] */
    int classes;            /* labels are below this (the train split's class count) */
    int folders;
    char **class_names;     /* [folders]: this split's class folders, sorted */
} dtnn_image_list;

/* Lists root's class folders (sorted by name; hidden ones skipped) and, in each, the .jpg,
 * .jpeg and .png files (any case) of it and its subfolders, sorted by name. With `of` (the
 * train list, when listing val) each class takes the label of the same name in `of`, and a
 * class `of` lacks is an error. A class without images is an error, as in torchvision. */
dtnn_status dtnn__image_list_scan(dtnn_image_list *l, const char *root, const dtnn_image_list *of,
                                 dtnn_error *err);
/* Only the class names of root (n == 0): what listing a val split needs of the train split. */
dtnn_status dtnn__image_list_classes(dtnn_image_list *l, const char *root, dtnn_error *err);
void dtnn__image_list_free(dtnn_image_list *l);

#endif
