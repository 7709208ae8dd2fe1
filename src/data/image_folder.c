/*
 * image_folder.c — lists an ImageNet-style split, root/<class>/<image>, in the order of
 * torchvision.datasets.ImageFolder: classes sorted by folder name (byte order, as Python's
 * sorted), label = index among them; images of a class in name order, those of its subfolders
 * after its own files, each subfolder in name order. Only names are read here: a file that is
 * not a decodable image is found (and skipped or reported) when the loader decodes it.
 *
 * Symbolic links to folders are followed (a split assembled from links is common), but every
 * folder, the split's own included, may be reached once: a link back to an ancestor (a loop,
 * which multiplied the samples or grew the scan without end) or to a folder listed elsewhere
 * (which gave its images a second label) is an error naming the link and the folder. Folders
 * are told apart by device and inode, so no spelling of a path hides them.
 */
#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/internal.h"
#include "data/image_folder.h"

#define FOLDER_MAX_DEPTH 8
#define FOLDER_PATH_MAX 4096

typedef struct {
    char **items;
    size_t n, cap;
} name_list;

static void names_free(name_list *v)
{
    for (size_t i = 0; i < v->n; i++)
        free(v->items[i]);
    free(v->items);
    memset(v, 0, sizeof *v);
}

static int names_push(name_list *v, const char *s)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 64;
        char **p = realloc(v->items, cap * sizeof *p);
        if (!p)
            return -1;
        v->items = p;
        v->cap = cap;
    }
    if (!(v->items[v->n] = dtnn__strdup(s)))
        return -1;
    v->n++;
    return 0;
}

static dtnn_status join(char *out, const char *dir, const char *name, dtnn_error *err)
{
    int n = snprintf(out, FOLDER_PATH_MAX, "%s/%s", dir, name);
    if (n < 0 || n >= FOLDER_PATH_MAX)
        return dtnn_error_set(err, DTNN_ERR_ARG, "path too long: %s/%s", dir, name);
    return DTNN_OK;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int has_image_extension(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot && (!strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg") ||
                   !strcasecmp(dot, ".png"));
}

/* The entries of dir, sorted, split into folders and files (hidden entries skipped). */
static dtnn_status read_dir(const char *dir, name_list *dirs, name_list *files, dtnn_error *err)
{
    DIR *dp = opendir(dir);
    if (!dp)
        return dtnn_error_set(err, DTNN_ERR_IO, "%s: %s", dir, strerror(errno));
    dtnn_status st = DTNN_OK;
    struct dirent *e;
    char path[FOLDER_PATH_MAX];
    while (!st && (e = readdir(dp))) {
        if (e->d_name[0] == '.')
            continue;
        if ((st = join(path, dir, e->d_name, err)))
            break;
        struct stat sb;
        if (stat(path, &sb) != 0)
            continue;       /* a dangling link: not an image, and not a class */
        name_list *to = S_ISDIR(sb.st_mode) ? dirs : (S_ISREG(sb.st_mode) ? files : NULL);
        if (to && names_push(to, e->d_name))
            st = dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory listing %s", dir);
    }
    closedir(dp);
    if (dirs && dirs->n > 1)
        qsort(dirs->items, dirs->n, sizeof(char *), cmp_names);
    if (files && files->n > 1)
        qsort(files->items, files->n, sizeof(char *), cmp_names);
    return st;
}

static dtnn_status push_image(dtnn_image_list *l, size_t *cap, const char *path, int32_t label,
                              dtnn_error *err)
{
    if ((size_t)l->n == *cap) {
        size_t c = *cap ? 2 * *cap : 1024;
        char **p = realloc(l->paths, c * sizeof *p);
        if (p)
            l->paths = p;
        int32_t *y = p ? realloc(l->labels, c * sizeof *y) : NULL;
        if (!y)
            return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory listing images");
        l->labels = y;
        *cap = c;
    }
    if (!(l->paths[l->n] = dtnn__strdup(path)))
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory listing images");
    l->labels[l->n++] = label;
    return DTNN_OK;
}

/* The folders of one split already listed (device and inode), with the path each was found
 * at, for the error message. */
typedef struct {
    dev_t *dev;
    ino_t *ino;
    char **path;
    size_t n, cap;
} folder_set;

static void folders_free(folder_set *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->path[i]);
    free(s->dev);
    free(s->ino);
    free(s->path);
    memset(s, 0, sizeof *s);
}

/* Adds dir to the folders listed; an error when it is one of them already. The set stays
 * small (one entry per folder of the split), so the search is linear. */
static dtnn_status folders_visit(folder_set *s, const char *dir, dtnn_error *err)
{
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return dtnn_error_set(err, DTNN_ERR_IO, "%s: %s", dir, strerror(errno));
    for (size_t i = 0; i < s->n; i++)
        if (s->dev[i] == sb.st_dev && s->ino[i] == sb.st_ino)
            return dtnn_error_set(err, DTNN_ERR_FORMAT, "%s is the folder %s again (a symbolic "
                                  "link%s): an image folder must list each image once, under "
                                  "one class; remove the link", dir, s->path[i],
                                  strncmp(dir, s->path[i], strlen(s->path[i])) ? ""
                                  : " back to its own parent, a loop");
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        dev_t *d = realloc(s->dev, cap * sizeof *d);
        if (d)
            s->dev = d;
        ino_t *in = d ? realloc(s->ino, cap * sizeof *in) : NULL;
        if (in)
            s->ino = in;
        char **p = in ? realloc(s->path, cap * sizeof *p) : NULL;
        if (!p)
            return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory listing %s", dir);
        s->path = p;
        s->cap = cap;
    }
    if (!(s->path[s->n] = dtnn__strdup(dir)))
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory listing %s", dir);
    s->dev[s->n] = sb.st_dev;
    s->ino[s->n++] = sb.st_ino;
    return DTNN_OK;
}

static dtnn_status walk(dtnn_image_list *l, size_t *cap, folder_set *seen, const char *dir,
                        int32_t label, int depth, dtnn_error *err)
{
    name_list dirs = {0}, files = {0};
    dtnn_status st = folders_visit(seen, dir, err);
    if (!st)
        st = read_dir(dir, &dirs, &files, err);
    char path[FOLDER_PATH_MAX];
    for (size_t i = 0; i < files.n && !st; i++) {
        if (!has_image_extension(files.items[i]))
            continue;
        if (!(st = join(path, dir, files.items[i], err)))
            st = push_image(l, cap, path, label, err);
    }
    for (size_t i = 0; i < dirs.n && !st && depth < FOLDER_MAX_DEPTH; i++) {
        if (!(st = join(path, dir, dirs.items[i], err)))
            st = walk(l, cap, seen, path, label, depth + 1, err);
    }
    names_free(&dirs);
    names_free(&files);
    return st;
}

void dtnn__image_list_free(dtnn_image_list *l)
{
    if (!l)
        return;
    for (int64_t i = 0; i < l->n; i++)
        free(l->paths[i]);
    for (int i = 0; i < l->folders; i++)
        free(l->class_names[i]);
    free(l->paths);
    free(l->labels);
    free(l->class_names);
    memset(l, 0, sizeof *l);
}

static dtnn_status scan(dtnn_image_list *l, const char *root, const dtnn_image_list *of,
                        int classes_only, dtnn_error *err)
{
    name_list classes = {0};
    dtnn_status st = read_dir(root, &classes, NULL, err);
    if (!st && classes.n == 0)
        st = dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: no class folders (an image folder holds "
                            "<class>/<image>.jpg|.png)", root);
    if (!st && classes.n > INT32_MAX / 2)
        st = dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: too many class folders", root);
    if (st) {
        names_free(&classes);
        return st;
    }
    /* The list takes the class names over. */
    l->class_names = classes.items;
    l->folders = l->classes = (int)classes.n;
    size_t cap = 0;
    char path[FOLDER_PATH_MAX];
    folder_set seen = {0};
    if (!classes_only)
        st = folders_visit(&seen, root, err);
    for (int c = 0; c < l->folders && !st && !classes_only; c++) {
        int32_t label = c;
        if (of) {
            char **hit = bsearch(&l->class_names[c], of->class_names, (size_t)of->folders,
                                 sizeof(char *), cmp_names);
            if (!hit) {
                st = dtnn_error_set(err, DTNN_ERR_FORMAT, "%s/%s: class '%s' is not among the "
                                    "%d training classes", root, l->class_names[c],
                                    l->class_names[c], of->folders);
                break;
            }
            label = (int32_t)(hit - of->class_names);
        }
        int64_t before = l->n;
        if (!(st = join(path, root, l->class_names[c], err)))
            st = walk(l, &cap, &seen, path, label, 0, err);
        if (!st && l->n == before)
            st = dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: class folder without .jpg, .jpeg or "
                                ".png files", path);
    }
    folders_free(&seen);
    if (of)
        l->classes = of->classes;
    return st;
}

dtnn_status dtnn__image_list_scan(dtnn_image_list *l, const char *root, const dtnn_image_list *of,
                                 dtnn_error *err)
{
    memset(l, 0, sizeof *l);
    dtnn_status st = scan(l, root, of, 0, err);
    if (st)
        dtnn__image_list_free(l);
    return st;
}

dtnn_status dtnn__image_list_classes(dtnn_image_list *l, const char *root, dtnn_error *err)
{
    memset(l, 0, sizeof *l);
    dtnn_status st = scan(l, root, NULL, 1, err);
    if (st)
        dtnn__image_list_free(l);
    return st;
}
