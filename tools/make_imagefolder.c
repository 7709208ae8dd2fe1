/*
 * make_imagefolder.c — writes a synthetic ImageNet-like image folder of JPEGs for tests and for
 * `dtnn bench --loader`: DIR/train/classNNN/imgNNNNN.jpg and DIR/val/classNNN/imgNNNNN.jpg.
 * Each class has its own colour and stripe direction and every image smooth waves plus noise,
 * so decoding costs what a photograph of that size costs (roughly: the entropy of the noise
 * keeps JPEG from shrinking it to nothing) and a model can still learn the classes.
 *
 *   build/make-imagefolder DIR [--classes 10] [--train 50] [--val 10] [--width 500]
 *                              [--height 375] [--quality 90] [--seed 1]
 *
 * --train and --val count images per class; the defaults make 600 images of ImageNet's typical
 * 500x375 size at quality 90, about 60 KB each (ImageNet averages about 110 KB).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jpeglib.h>

static uint64_t next_random(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int make_dir(const char *path)
{
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "make-imagefolder: cannot create %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

static int write_jpeg(const char *path, const unsigned char *pix, int w, int h, int quality)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "make-imagefolder: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr e;
    c.err = jpeg_std_error(&e);
    jpeg_create_compress(&c);
    jpeg_stdio_dest(&c, f);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = 3;
    c.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, quality, TRUE);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)(pix + (size_t)c.next_scanline * w * 3);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    return fclose(f) == 0 ? 0 : -1;
}

static void paint(unsigned char *pix, int w, int h, int cls, int classes, uint64_t *rng)
{
    const double angle = 3.14159265 * cls / classes;
    const double fx = cos(angle) * 0.08, fy = sin(angle) * 0.08;
    const double phase = (double)(next_random(rng) % 628) / 100.0;
    const int base[3] = {(cls * 83) % 200 + 28, (cls * 47 + 90) % 200 + 28,
                         (cls * 131 + 30) % 200 + 28};
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            double wave = 50.0 * sin(x * fx + y * fy + phase);
            uint64_t r = next_random(rng);
            for (int c = 0; c < 3; c++) {
                double v = base[c] + wave + (double)((r >> (8 * c)) & 31) - 16.0;
                pix[((size_t)y * w + x) * 3 + c] = (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
        }
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || argv[1][0] == '-') {
        printf("usage: make-imagefolder DIR [--classes 10] [--train 50] [--val 10] "
               "[--width 500] [--height 375] [--quality 90] [--seed 1]\n");
        return argc < 2 || argv[1][0] == '-' ? 2 : 0;
    }
    const char *dir = argv[1];
    long classes = 10, train = 50, val = 10, w = 500, h = 375, quality = 90, seed = 1;
    static const char *const names[] = {"--classes", "--train", "--val", "--width", "--height",
                                        "--quality", "--seed"};
    long *values[] = {&classes, &train, &val, &w, &h, &quality, &seed};
    for (int i = 2; i < argc; i += 2) {
        int k = 0;
        while (k < 7 && strcmp(argv[i], names[k]))
            k++;
        char *end = NULL;
        if (k == 7 || i + 1 >= argc || (*values[k] = strtol(argv[i + 1], &end, 10), *end)) {
            fprintf(stderr, "make-imagefolder: bad option '%s' (see --help)\n", argv[i]);
            return 2;
        }
    }
    if (classes < 1 || classes > 100000 || train < 0 || val < 0 || w < 1 || h < 1 ||
        w > 16384 || h > 16384 || quality < 1 || quality > 100) {
        fprintf(stderr, "make-imagefolder: out-of-range option value\n");
        return 2;
    }
    unsigned char *pix = malloc((size_t)w * h * 3);
    if (!pix)
        return 1;
    uint64_t rng = (uint64_t)seed;
    char path[4096];
    long written = 0;
    if (make_dir(dir))
        return 1;
    static const char *const splits[] = {"train", "val"};
    const long counts[] = {train, val};
    for (int s = 0; s < 2; s++) {
        snprintf(path, sizeof path, "%s/%s", dir, splits[s]);
        if (make_dir(path))
            return 1;
        for (long c = 0; c < classes; c++) {
            snprintf(path, sizeof path, "%s/%s/class%03ld", dir, splits[s], c);
            if (make_dir(path))
                return 1;
            for (long i = 0; i < counts[s]; i++) {
                paint(pix, (int)w, (int)h, (int)c, (int)classes, &rng);
                snprintf(path, sizeof path, "%s/%s/class%03ld/img%05ld.jpg", dir, splits[s], c,
                         i);
                if (write_jpeg(path, pix, (int)w, (int)h, (int)quality))
                    return 1;
                written++;
            }
        }
    }
    free(pix);
    printf("make-imagefolder: wrote %ld JPEGs of %ldx%ld (quality %ld) in %ld classes to %s\n",
           written, w, h, quality, classes, dir);
    return 0;
}
