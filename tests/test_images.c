/*
 * test_images.c — image folders and loaders on tiny files written here with libjpeg and
 * libpng: decoding of every PNG colour type and of JPEG (pixel values within JPEG's tolerance),
 * corrupt and truncated files reported by path, torchvision's crop boxes, resampling, class
 * labels in sorted folder order, skipped images (count, paths, replacement) and --strict,
 * augmentation determinism across seeds, epochs and thread counts, sharding of the global batch
 * between ranks, and the CIFAR-style crop and flip of tensors held in memory.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jpeglib.h>

#include "core/internal.h"
#include "core/rng.h"
#include "data/image_folder.h"
#include "data/transform.h"
#include "testutil.h"

static char tmpdir[256];

static const char *tmp_path(const char *name)
{
    static char buf[4][600];
    static int next = 0;
    char *p = buf[next++ % 4];
    snprintf(p, 600, "%s/%s", tmpdir, name);
    return p;
}

/* ---- writers ------------------------------------------------------------------------------ */

static void write_jpeg(const char *path, int w, int h, int comps, const unsigned char *pix,
                       int quality)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr e;
    c.err = jpeg_std_error(&e);
    jpeg_create_compress(&c);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f)
        return;
    jpeg_stdio_dest(&c, f);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = comps;
    c.in_color_space = comps == 3 ? JCS_RGB : JCS_GRAYSCALE;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, quality, TRUE);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)(pix + (size_t)c.next_scanline * w * comps);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    fclose(f);
}

/* A PNG of the given type; bytes per row = w x channels x depth / 8. palette: 4 RGB entries
 * and 4 alpha values when color_type is PNG_COLOR_TYPE_PALETTE. */
static void write_png(const char *path, int w, int h, int color_type, int depth, int interlace,
                      const unsigned char *data, size_t stride)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f)
        return;
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    png_init_io(png, f);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, depth, color_type,
                 interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    if (color_type == PNG_COLOR_TYPE_PALETTE) {
        png_color pal[4] = {{255, 0, 0}, {0, 255, 0}, {0, 0, 255}, {10, 20, 30}};
        png_byte alpha[4] = {255, 128, 0, 255};
        png_set_PLTE(png, info, pal, 4);
        png_set_tRNS(png, info, alpha, 4, NULL);
    }
    png_write_info(png, info);
    png_bytep *rows = malloc(sizeof(png_bytep) * (size_t)h);
    for (int y = 0; y < h; y++)
        rows[y] = (png_bytep)(data + (size_t)y * stride);
    png_write_image(png, rows);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    free(rows);
    fclose(f);
}

/* A solid-colour RGB JPEG of w x h. */
static void solid_jpeg(const char *path, int w, int h, const unsigned char rgb[3])
{
    unsigned char *pix = malloc((size_t)w * h * 3);
    for (int i = 0; i < w * h; i++)
        memcpy(pix + 3 * i, rgb, 3);
    write_jpeg(path, w, h, 3, pix, 95);
    free(pix);
}

static void solid_png(const char *path, int w, int h, const unsigned char rgb[3])
{
    unsigned char *pix = malloc((size_t)w * h * 3);
    for (int i = 0; i < w * h; i++)
        memcpy(pix + 3 * i, rgb, 3);
    write_png(path, w, h, PNG_COLOR_TYPE_RGB, 8, 0, pix, (size_t)w * 3);
    free(pix);
}

/* Copies the first `keep` bytes of src to dst (a truncated file). */
static void truncated_copy(const char *src, const char *dst, long keep)
{
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    CHECK(in && out);
    for (long i = 0; in && out && i < keep; i++) {
        int ch = fgetc(in);
        if (ch == EOF)
            break;
        fputc(ch, out);
    }
    if (in)
        fclose(in);
    if (out)
        fclose(out);
}

static long file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

static void expect_error(const char *what, dtnn_status st, const dtnn_error *err,
                         const char *word1, const char *word2)
{
    int ok = st != DTNN_OK && (!word1 || strstr(err->message, word1)) &&
             (!word2 || strstr(err->message, word2));
    printf("%-34s -> %s%s\n", what, st ? err->message : "ok (expected an error)",
           ok ? "" : "  FAIL");
    if (!ok)
        test_failures++;
}

/* ---- decoding ------------------------------------------------------------------------------ */

static void test_decode(void)
{
    dtnn_image img = {0};
    dtnn_error err = {0};
    const int w = 13, h = 9;
    unsigned char rgb[13 * 9 * 3], gray[13 * 9], ga[13 * 9 * 2], pal[13 * 9];
    uint16_t rgb16[13 * 9 * 3];
    for (int i = 0; i < w * h; i++) {
        for (int c = 0; c < 3; c++) {
            rgb[3 * i + c] = (unsigned char)(i * 7 + c * 50);
            /* Big-endian 16-bit samples as PNG stores them. */
            uint16_t v = (uint16_t)(rgb[3 * i + c] * 257);
            unsigned char *b = (unsigned char *)&rgb16[3 * i + c];
            b[0] = (unsigned char)(v >> 8);
            b[1] = (unsigned char)v;
        }
        gray[i] = (unsigned char)(i * 3);
        ga[2 * i] = gray[i];
        ga[2 * i + 1] = (unsigned char)(255 - i);
        pal[i] = (unsigned char)(i % 4);
    }
    /* Every PNG colour type becomes exactly the RGB PIL's convert("RGB") gives. */
    struct {
        const char *name;
        int type, depth, interlace;
        const void *data;
        size_t stride;
    } pngs[] = {
        {"rgb.png", PNG_COLOR_TYPE_RGB, 8, 0, rgb, (size_t)w * 3},
        {"rgb_adam7.png", PNG_COLOR_TYPE_RGB, 8, 1, rgb, (size_t)w * 3},
        {"rgb16.png", PNG_COLOR_TYPE_RGB, 16, 0, rgb16, (size_t)w * 6},
        {"gray.png", PNG_COLOR_TYPE_GRAY, 8, 0, gray, (size_t)w},
        {"gray_alpha.png", PNG_COLOR_TYPE_GRAY_ALPHA, 8, 0, ga, (size_t)w * 2},
        {"palette.png", PNG_COLOR_TYPE_PALETTE, 8, 0, pal, (size_t)w},
    };
    static const unsigned char palette_rgb[4][3] = {{255, 0, 0}, {0, 255, 0}, {0, 0, 255},
                                                    {10, 20, 30}};
    for (size_t k = 0; k < sizeof pngs / sizeof pngs[0]; k++) {
        const char *path = tmp_path(pngs[k].name);
        write_png(path, w, h, pngs[k].type, pngs[k].depth, pngs[k].interlace, pngs[k].data,
                  pngs[k].stride);
        CHECK_OK(dtnn_image_read(path, &img, &err), &err);
        CHECK(img.w == w && img.h == h);
        int bad = 0;
        for (int i = 0; i < w * h && img.w == w && img.h == h; i++)
            for (int c = 0; c < 3; c++) {
                int want = pngs[k].type == PNG_COLOR_TYPE_RGB ? rgb[3 * i + c]
                           : pngs[k].type == PNG_COLOR_TYPE_PALETTE ? palette_rgb[i % 4][c]
                                                                    : gray[i];
                bad += img.pixels[3 * i + c] != want;
            }
        printf("decode %-16s %dx%d, %d wrong pixel values\n", pngs[k].name, img.w, img.h, bad);
        CHECK(bad == 0);
    }
    /* JPEG: a smooth image within the tolerance of quality 95, and grayscale replicated. */
    unsigned char smooth[32 * 24 * 3], smooth_gray[32 * 24];
    for (int y = 0; y < 24; y++)
        for (int x = 0; x < 32; x++) {
            smooth[3 * (y * 32 + x)] = (unsigned char)(40 + 4 * x);
            smooth[3 * (y * 32 + x) + 1] = (unsigned char)(200 - 3 * y);
            smooth[3 * (y * 32 + x) + 2] = 90;
            smooth_gray[y * 32 + x] = (unsigned char)(30 + 2 * x + y);
        }
    const char *jpg = tmp_path("smooth.jpg");
    write_jpeg(jpg, 32, 24, 3, smooth, 95);
    CHECK_OK(dtnn_image_read(jpg, &img, &err), &err);
    int worst = 0;
    for (int i = 0; i < 32 * 24 * 3 && img.w == 32 && img.h == 24; i++)
        worst = DTNN_MAX(worst, abs(img.pixels[i] - smooth[i]));
    printf("decode smooth.jpg %dx%d, max abs error %d (tolerance 8)\n", img.w, img.h, worst);
    CHECK(img.w == 32 && img.h == 24 && worst <= 8);
    const char *gjpg = tmp_path("gray.jpg");
    write_jpeg(gjpg, 32, 24, 1, smooth_gray, 95);
    CHECK_OK(dtnn_image_read(gjpg, &img, &err), &err);
    worst = 0;
    for (int i = 0; i < 32 * 24 && img.w == 32; i++)
        for (int c = 0; c < 3; c++)
            worst = DTNN_MAX(worst, abs(img.pixels[3 * i + c] - smooth_gray[i]));
    printf("decode gray.jpg %dx%d as RGB, max abs error %d (tolerance 4)\n", img.w, img.h, worst);
    CHECK(img.w == 32 && worst <= 4);

    /* Broken files: errors naming the file, never a crash or a grey image. */
    const char *tj = tmp_path("truncated.jpg");
    truncated_copy(jpg, tj, file_size(jpg) / 2);
    expect_error("truncated JPEG", dtnn_image_read(tj, &img, &err), &err, "truncated.jpg",
                 "JPEG");
    const char *tp = tmp_path("truncated.png");
    truncated_copy(tmp_path("rgb.png"), tp, file_size(tmp_path("rgb.png")) - 30);
    expect_error("truncated PNG", dtnn_image_read(tp, &img, &err), &err, "truncated.png",
                 "PNG");
    unsigned char junk[600];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (unsigned char)(i * 131 + 7);
    junk[0] = 0xff, junk[1] = 0xd8, junk[2] = 0xff;
    expect_error("JPEG signature, then junk", dtnn_image_decode(junk, sizeof junk, "junk.jpg",
                                                                 &img, &err), &err, "junk.jpg",
                 NULL);
    memcpy(junk, "\x89PNG\r\n\x1a\n", 8);
    expect_error("PNG signature, then junk", dtnn_image_decode(junk, sizeof junk, "junk.png",
                                                                &img, &err), &err, "junk.png",
                 NULL);
    expect_error("text file", dtnn_image_decode("hello", 5, "hello.txt", &img, &err), &err,
                 "hello.txt", "not a JPEG or PNG");
    expect_error("empty file", dtnn_image_decode("", 0, "empty.jpg", &img, &err), &err,
                 "empty.jpg", NULL);
    expect_error("missing file", dtnn_image_read(tmp_path("nope.jpg"), &img, &err), &err,
                 "nope.jpg", "No such file");
    /* After all that, the same dtnn_image still decodes. */
    CHECK_OK(dtnn_image_read(tmp_path("rgb.png"), &img, &err), &err);
    CHECK(img.w == w && img.pixels[5] == rgb[5]);
    dtnn_image_free(&img);
}

/* ---- transforms -------------------------------------------------------------------------- */

static void test_transforms(void)
{
    /* Resize(256) + CenterCrop(224) of a 500x375 image: resized to 341x256, cropped at
     * left round(58.5) = 58 (half to even) and top 16. */
    float box[4];
    dtnn__center_crop_box(500, 375, 256, 224, box);
    const float sx = 500.0f / 341.0f, sy = 375.0f / 256.0f;
    printf("center crop box of 500x375: %.3f %.3f %.3f %.3f\n", box[0], box[1], box[2], box[3]);
    CHECK(fabsf(box[0] - 58 * sx) < 1e-3f && fabsf(box[1] - 16 * sy) < 1e-3f &&
          fabsf(box[2] - 282 * sx) < 1e-3f && fabsf(box[3] - 240 * sy) < 1e-3f);
    /* RandomResizedCrop boxes stay inside, with scale and ratio in range (or the fallback). */
    int inside = 1, in_range = 1;
    for (int i = 0; i < 2000; i++) {
        dtnn_rng r;
        dtnn__augment_rng(&r, 5, 0, i);
        int w = 20 + i % 300, h = 10 + (i * 7) % 400;
        dtnn__random_resized_crop_box(w, h, &r, box);
        float bw = box[2] - box[0], bh = box[3] - box[1];
        inside &= box[0] >= 0 && box[1] >= 0 && box[2] <= w && box[3] <= h && bw >= 1 && bh >= 1;
        float area = bw * bh / ((float)w * h), ratio = bw / bh;
        in_range &= (area > 0.07f && area <= 1.0f && ratio > 0.7f && ratio < 1.4f) ||
                    bw == w || bh == h;
    }
    printf("random resized crop: 2000 boxes inside %d, scale and ratio in range %d\n", inside,
           in_range);
    CHECK(inside && in_range);
    /* The same stream gives the same box; another epoch another one. */
    dtnn_rng a, b, c;
    dtnn__augment_rng(&a, 9, 3, 17);
    dtnn__augment_rng(&b, 9, 3, 17);
    dtnn__augment_rng(&c, 9, 4, 17);
    float ba[4], bb[4], bc[4];
    dtnn__random_resized_crop_box(300, 200, &a, ba);
    dtnn__random_resized_crop_box(300, 200, &b, bb);
    dtnn__random_resized_crop_box(300, 200, &c, bc);
    CHECK(!memcmp(ba, bb, sizeof ba) && memcmp(ba, bc, sizeof ba));

    /* Resampling: the whole image at its own size is the image itself; mirrored when flipped. */
    const int w = 7, h = 5;
    unsigned char src[7 * 5 * 3];
    for (int i = 0; i < w * h * 3; i++)
        src[i] = (unsigned char)(i * 37 % 251);
    const float mean[3] = {0, 0, 0}, std[3] = {1, 1, 1};
    float out[3 * 7 * 5], want[3 * 7 * 5], whole[4] = {0, 0, 7, 5};
    dtnn_resample_scratch rs = {0};
    dtnn_error err = {0};
    for (int flip = 0; flip < 2; flip++) {
        CHECK_OK(dtnn__resample_rgb(src, w, h, whole, w, h, flip, mean, std, out, &rs, &err),
                 &err);
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                for (int ch = 0; ch < 3; ch++)
                    want[(ch * h + y) * w + (flip ? w - 1 - x : x)] =
                        (float)src[(y * w + x) * 3 + ch] / 255.0f;
        test_compare(flip ? "resample identity, flipped" : "resample identity", out, want,
                     (size_t)3 * w * h, 0, 0);
    }
    /* A 2x downscale of a checkerboard averages it (antialiasing), not samples it. */
    unsigned char board[8 * 8 * 3];
    for (int y = 0; y < 8; y++)
        for (int x = 0; x < 8; x++)
            for (int ch = 0; ch < 3; ch++)
                board[(y * 8 + x) * 3 + ch] = (x + y) % 2 ? 200 : 0;
    float small[3 * 4 * 4], bbox[4] = {0, 0, 8, 8};
    CHECK_OK(dtnn__resample_rgb(board, 8, 8, bbox, 4, 4, 0, mean, std, small, &rs, &err), &err);
    /* Inside, the filter's 4 taps see two of each colour; at the edges it is cut off (and
     * renormalised) as in Pillow, so only a grey between the two is asked of those. */
    int averaged = 1;
    for (int ch = 0; ch < 3; ch++)
        for (int y = 0; y < 4; y++)
            for (int x = 0; x < 4; x++) {
                float v = small[(ch * 4 + y) * 4 + x] * 255.0f;
                int inner = x > 0 && x < 3 && y > 0 && y < 3;
                averaged &= inner ? fabsf(v - 100.0f) <= 0.5f : v > 50.0f && v < 150.0f;
            }
    printf("2x downscale of a checkerboard is grey (antialiased): %s\n", averaged ? "yes" : "NO");
    CHECK(averaged);
    /* The 8-bit resample that TrivialAugment and RandAugment work on, normalised afterwards,
     * is the normalised resample bit for bit (an augmentation that leaves a pixel alone
     * leaves its float alone); and data in memory survives the 8-bit round trip. */
    const float in_mean[3] = {0.485f, 0.456f, 0.406f}, in_std[3] = {0.229f, 0.224f, 0.225f};
    float part[4] = {0.5f, 1.25f, 6.0f, 4.5f}, direct[3 * 6 * 4], via[3 * 6 * 4];
    unsigned char bytes[3 * 6 * 4], back[3 * 6 * 4];
    for (int flip = 0; flip < 2; flip++) {
        CHECK_OK(dtnn__resample_rgb(src, w, h, part, 6, 4, flip, in_mean, in_std, direct, &rs,
                                    &err), &err);
        CHECK_OK(dtnn__resample_rgb_u8(src, w, h, part, 6, 4, flip, bytes, &rs, &err), &err);
        dtnn__normalize_u8(bytes, 3, 24, in_mean, in_std, via);
        tu_same_bits("8-bit resample, normalised", via, direct, sizeof via);
        dtnn__denormalize_u8(via, 3, 24, in_mean, in_std, back);
        CHECK(!memcmp(back, bytes, sizeof bytes));
    }
    dtnn__resample_scratch_free(&rs);
}

/* ---- image folders ------------------------------------------------------------------------ */

static const unsigned char class_rgb[3][3] = {{230, 20, 20}, {20, 200, 40}, {30, 40, 220}};

/* DIR/train: ant (3 JPEGs), cat (2 JPEGs, 1 PNG, one corrupt .jpg), dog (2 PNGs of other
 * sizes, one truncated .png), plus a text file and a hidden folder; DIR/val: ant, dog. */
static void make_folder(const char *dir)
{
    char path[700];
    static const char *const classes[] = {"ant", "cat", "dog"};
    mkdir(dir, 0700);
    snprintf(path, sizeof path, "%s/train", dir);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/val", dir);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/train/.hidden", dir);
    mkdir(path, 0700);
    for (int c = 0; c < 3; c++) {
        snprintf(path, sizeof path, "%s/train/%s", dir, classes[c]);
        mkdir(path, 0700);
        if (c != 1) {
            snprintf(path, sizeof path, "%s/val/%s", dir, classes[c]);
            mkdir(path, 0700);
        }
    }
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/train/ant/a%d.jpg", dir, i);
        solid_jpeg(path, 40 + 8 * i, 30, class_rgb[0]);
    }
    snprintf(path, sizeof path, "%s/train/cat/c0.JPG", dir);
    solid_jpeg(path, 24, 36, class_rgb[1]);
    snprintf(path, sizeof path, "%s/train/cat/c1.jpeg", dir);
    solid_jpeg(path, 50, 50, class_rgb[1]);
    snprintf(path, sizeof path, "%s/train/cat/c2.png", dir);
    solid_png(path, 33, 20, class_rgb[1]);
    snprintf(path, sizeof path, "%s/train/cat/c3_corrupt.jpg", dir);
    FILE *f = fopen(path, "wb");
    fputs("\xff\xd8\xff this is not really a JPEG", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/train/cat/notes.txt", dir);
    f = fopen(path, "wb");
    fputs("not an image, and not named like one", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/train/dog/d0.png", dir);
    solid_png(path, 64, 48, class_rgb[2]);
    snprintf(path, sizeof path, "%s/train/dog/d1.png", dir);
    solid_png(path, 17, 29, class_rgb[2]);
    char whole[700];
    snprintf(whole, sizeof whole, "%s/train/dog/d1.png", dir);
    snprintf(path, sizeof path, "%s/train/dog/d2_truncated.png", dir);
    truncated_copy(whole, path, file_size(whole) - 20);
    snprintf(path, sizeof path, "%s/val/ant/va.png", dir);
    solid_png(path, 30, 30, class_rgb[0]);
    snprintf(path, sizeof path, "%s/val/dog/vd.jpg", dir);
    solid_jpeg(path, 30, 40, class_rgb[2]);
}

/* DIR/train/{a,b}: 5 PNGs each, textured (so crops and flips change them), of several sizes;
 * and one corrupt file, so replacement takes part too. */
static void make_textured_folder(const char *dir)
{
    char path[700];
    mkdir(dir, 0700);
    snprintf(path, sizeof path, "%s/train", dir);
    mkdir(path, 0700);
    for (int c = 0; c < 2; c++) {
        snprintf(path, sizeof path, "%s/train/%c", dir, 'a' + c);
        mkdir(path, 0700);
        for (int i = 0; i < 5; i++) {
            int w = 20 + 9 * i, h = 40 - 5 * i;
            unsigned char *pix = malloc((size_t)w * h * 3);
            for (int y = 0; y < h; y++)
                for (int x = 0; x < w; x++)
                    for (int ch = 0; ch < 3; ch++)
                        pix[(y * w + x) * 3 + ch] =
                            (unsigned char)((x * (7 + ch) + y * y * (c + 2) + i * 40) & 0xff);
            snprintf(path, sizeof path, "%s/train/%c/%d.png", dir, 'a' + c, i);
            write_png(path, w, h, PNG_COLOR_TYPE_RGB, 8, 0, pix, (size_t)w * 3);
            free(pix);
        }
    }
    snprintf(path, sizeof path, "%s/train/b/9_bad.png", dir);
    FILE *f = fopen(path, "wb");
    fputs("\x89PNG\r\n\x1a\n broken", f);
    fclose(f);
}

/* Whether sample i of x [n, 3, s, s] is class k's colour, normalised with ImageNet's values. */
static int is_colour(const float *x, int i, int s, int k)
{
    static const float mean[3] = {0.485f, 0.456f, 0.406f}, sd[3] = {0.229f, 0.224f, 0.225f};
    for (int ch = 0; ch < 3; ch++)
        for (int j = 0; j < s * s; j++) {
            float v = x[((size_t)i * 3 + ch) * s * s + j] * sd[ch] + mean[ch];
            if (fabsf(v * 255.0f - class_rgb[k][ch]) > 6.0f)
                return 0;
        }
    return 1;
}

static void test_folder_list(const char *dir)
{
    dtnn_image_list l;
    dtnn_error err = {0};
    char root[700];
    snprintf(root, sizeof root, "%s/train", dir);
    CHECK_OK(dtnn__image_list_scan(&l, root, NULL, &err), &err);
    static const char *const want[] = {"ant/a0.jpg", "ant/a1.jpg", "ant/a2.jpg", "cat/c0.JPG",
                                       "cat/c1.jpeg", "cat/c2.png", "cat/c3_corrupt.jpg",
                                       "dog/d0.png", "dog/d1.png", "dog/d2_truncated.png"};
    static const int32_t labels[] = {0, 0, 0, 1, 1, 1, 1, 2, 2, 2};
    CHECK(l.n == 10 && l.classes == 3);
    for (int64_t i = 0; i < l.n && l.n == 10; i++)
        CHECK(strstr(l.paths[i], want[i]) && l.labels[i] == labels[i]);
    printf("train list: %lld images of %d classes (%s, %s, %s)\n", (long long)l.n, l.classes,
           l.classes == 3 ? l.class_names[0] : "?", l.classes == 3 ? l.class_names[1] : "?",
           l.classes == 3 ? l.class_names[2] : "?");
    dtnn_image_list v;
    snprintf(root, sizeof root, "%s/val", dir);
    CHECK_OK(dtnn__image_list_scan(&v, root, &l, &err), &err);
    CHECK(v.n == 2 && v.classes == 3 && v.n == 2 && v.labels[0] == 0 && v.labels[1] == 2);
    dtnn__image_list_free(&v);
    dtnn__image_list_free(&l);
}

static dtnn_loader_params folder_params(int batch, unsigned augment, int threads)
{
    dtnn_loader_params p;
    dtnn_loader_params_default(&p);
    p.batch_size = batch;
    p.augment = augment;
    p.threads = threads;
    p.image_size = 16;
    p.seed = 3;
    return p;
}

static void test_folder_loader(const char *dir)
{
    dtnn_error err = {0};
    /* File order, centre crops: every sample is its class's colour with its class's label. */
    dtnn_loader_params p = folder_params(4, 0, 0);
    p.shuffle = 0;
    dtnn_loader *l = dtnn_loader_create_folder(dir, "train", &p, &err);
    CHECK(l != NULL);
    if (!l) {
        fprintf(stderr, "%s\n", err.message);
        return;
    }
    dtnn_loader_info info;
    dtnn_loader_get_info(l, &info);
    CHECK(info.n == 10 && info.c == 3 && info.h == 16 && info.w == 16 && info.classes == 3 &&
          info.steps_per_epoch == 3 && info.local_max == 4);
    float *x = malloc(sizeof(float) * 4 * 3 * 16 * 16);
    int32_t y[4];
    int n = 0, right = 0, total = 0;
    /* Position 6 (the corrupt cat) is replaced by position 7 (the first dog); position 9 (the
     * truncated dog) wraps around to position 0 (the first ant). */
    static const int32_t want_labels[10] = {0, 0, 0, 1, 1, 1, 2, 2, 2, 0};
    CHECK_OK(dtnn_loader_start(l, 0, 0, 3, &err), &err);
    for (int s = 0; s < 3; s++) {
        const float *bx;
        const int32_t *by;
        int64_t global_n;
        CHECK_OK(dtnn_loader_next(l, &bx, &by, &n, &global_n, &err), &err);
        CHECK(n == (s < 2 ? 4 : 2) && global_n == n);
        for (int i = 0; i < n; i++, total++) {
            right += by[i] == want_labels[4 * s + i] && is_colour(bx, i, 16, by[i]);
        }
    }
    char paths[1600];
    int64_t skipped = dtnn_loader_skipped(l, paths, sizeof paths);
    printf("train split in file order: %d of %d samples right, %lld skipped (%s)\n", right, total,
           (long long)skipped, paths);
    CHECK(right == 10 && total == 10 && skipped == 2 && strstr(paths, "c3_corrupt.jpg") &&
          strstr(paths, "d2_truncated.png"));
    /* The epoch's steps are used up. */
    const float *bx;
    const int32_t *by;
    expect_error("next() past the epoch's steps", dtnn_loader_next(l, &bx, &by, &n, NULL, &err),
                 &err, "used up", NULL);
    dtnn_loader_free(l);

    /* --strict: the first unreadable image is an error that names it. */
    p.strict = 1;
    p.threads = 2;
    l = dtnn_loader_create_folder(dir, "train", &p, &err);
    CHECK(l != NULL);
    dtnn_status st = l ? dtnn_loader_start(l, 0, 0, 3, &err) : DTNN_ERR_ARG;
    for (int s = 0; s < 3 && !st; s++)
        st = dtnn_loader_next(l, &bx, &by, &n, NULL, &err);
    expect_error("--strict on a corrupt image", st, &err, "c3_corrupt.jpg", "--strict");
    dtnn_loader_free(l);

    /* The val split: classes of train, centre crops. */
    p = folder_params(8, 0, 1);
    p.shuffle = 0;
    l = dtnn_loader_create_folder(dir, "val", &p, &err);
    CHECK(l != NULL);
    if (l) {
        dtnn_loader_get_info(l, &info);
        CHECK(info.n == 2 && info.classes == 3);
        CHECK_OK(dtnn_loader_batch(l, 0, 0, x, y, &n, &err), &err);
        CHECK(n == 2 && y[0] == 0 && y[1] == 2 && is_colour(x, 0, 16, 0) &&
              is_colour(x, 1, 16, 2));
        dtnn_loader_free(l);
    }
    /* A missing folder and a split name that is neither train nor val. */
    char missing[700];
    snprintf(missing, sizeof missing, "%s/nothing", tmpdir);
    l = dtnn_loader_create_folder(missing, "train", &p, &err);
    expect_error("missing image folder", l ? DTNN_OK : err.code, &err, "nothing/train",
                 "DIR/train/<class>");
    dtnn_loader_free(l);
    l = dtnn_loader_create_folder(dir, "test", &p, &err);
    expect_error("split 'test'", l ? DTNN_OK : err.code, &err, "train or val", NULL);
    dtnn_loader_free(l);
    free(x);
}

/* All steps of an epoch through start / next, copied out: [steps][local_max * sample]. */
static void epoch_batches(dtnn_loader *l, int64_t epoch, float *x, int32_t *y, int *counts)
{
    dtnn_loader_info info;
    dtnn_loader_get_info(l, &info);
    const size_t sample = (size_t)info.c * info.h * info.w;
    dtnn_error err = {0};
    memset(y, 0, sizeof(int32_t) * (size_t)info.local_max * (size_t)info.steps_per_epoch);
    CHECK_OK(dtnn_loader_start(l, epoch, 0, info.steps_per_epoch, &err), &err);
    for (int64_t s = 0; s < info.steps_per_epoch; s++) {
        const float *bx;
        const int32_t *by;
        int n = 0;
        CHECK_OK(dtnn_loader_next(l, &bx, &by, &n, NULL, &err), &err);
        counts[s] = n;
        memcpy(x + (size_t)s * info.local_max * sample, bx, sizeof(float) * sample * n);
        memcpy(y + (size_t)s * info.local_max, by, sizeof(int32_t) * n);
    }
}

static void test_determinism(const char *dir)
{
    dtnn_error err = {0};
    const size_t sample = 3 * 16 * 16, per_step = 4 * sample;
    const size_t bytes = sizeof(float) * 3 * per_step;
    float *ref = calloc(1, bytes), *got = calloc(1, bytes);
    int32_t yref[12], ygot[12];
    int cref[3], cgot[3];
    /* Synchronous, then 1 and 3 threads with 1 and 2 batches of prefetch: the same bytes. */
    dtnn_loader_params p = folder_params(4, DTNN_AUG_CROP | DTNN_AUG_FLIP, 0);
    dtnn_loader *l = dtnn_loader_create_folder(dir, "train", &p, &err);
    CHECK(l != NULL);
    if (!l)
        return;
    epoch_batches(l, 1, ref, yref, cref);
    dtnn_loader_free(l);
    for (int t = 1; t <= 3; t += 2) {
        p.threads = t;
        p.prefetch = t == 1 ? 1 : 2;
        l = dtnn_loader_create_folder(dir, "train", &p, &err);
        memset(got, 0, bytes);
        epoch_batches(l, 1, got, ygot, cgot);
        int same = !memcmp(ref, got, bytes) && !memcmp(yref, ygot, sizeof yref) &&
                   !memcmp(cref, cgot, sizeof cref);
        printf("augmented epoch with %d thread%s: %s the synchronous one\n", t,
               t == 1 ? "" : "s", same ? "identical to" : "DIFFERS from");
        CHECK(same);
        /* Random access and resuming mid-epoch give the same batch. */
        float one[4 * 3 * 16 * 16];
        int32_t yone[4];
        int n;
        CHECK_OK(dtnn_loader_batch(l, 1, 2, one, yone, &n, &err), &err);
        CHECK(n == cref[2] && !memcmp(one, ref + 2 * per_step, sizeof(float) * sample * n));
        CHECK_OK(dtnn_loader_start(l, 1, 1, 3, &err), &err);
        const float *bx;
        const int32_t *by;
        CHECK_OK(dtnn_loader_next(l, &bx, &by, &n, NULL, &err), &err);
        CHECK(n == cref[1] && !memcmp(bx, ref + per_step, sizeof(float) * sample * n));
        dtnn_loader_free(l);
    }
    /* Another seed or another epoch: other crops. */
    p.threads = 0;
    p.seed = 4;
    l = dtnn_loader_create_folder(dir, "train", &p, &err);
    epoch_batches(l, 1, got, ygot, cgot);
    CHECK(memcmp(ref, got, bytes) != 0);
    dtnn_loader_free(l);
    p.seed = 3;
    p.shuffle = 0;
    l = dtnn_loader_create_folder(dir, "train", &p, &err);
    float *e0 = calloc(1, bytes);
    epoch_batches(l, 0, e0, ygot, cgot);
    epoch_batches(l, 2, got, ygot, cgot);
    printf("augmentation: another seed and another epoch give other crops: %s\n",
           memcmp(e0, got, bytes) ? "yes" : "NO");
    CHECK(memcmp(e0, got, bytes) != 0);
    dtnn_loader_free(l);
    free(e0);
    free(ref);
    free(got);
}

/* Two ranks' batches are the two halves of one rank's, for every step (the last one odd). */
static void test_sharding(const char *dir)
{
    dtnn_error err = {0};
    const size_t sample = 3 * 16 * 16;
    dtnn_loader_params p = folder_params(6, DTNN_AUG_CROP | DTNN_AUG_FLIP, 1);
    dtnn_loader *whole = dtnn_loader_create_folder(dir, "train", &p, &err);
    p.ranks = 2;
    p.rank = 0;
    dtnn_loader *r0 = dtnn_loader_create_folder(dir, "train", &p, &err);
    p.rank = 1;
    p.threads = 0;
    dtnn_loader *r1 = dtnn_loader_create_folder(dir, "train", &p, &err);
    CHECK(whole && r0 && r1);
    if (!whole || !r0 || !r1)
        return;
    float *xw = calloc(2 * 6, sizeof(float) * sample), *x0 = calloc(2 * 3, sizeof(float) * sample);
    float *x1 = calloc(2 * 3, sizeof(float) * sample);
    int32_t yw[12], y0[6], y1[6];
    int cw[2], c0[2], c1[2];
    epoch_batches(whole, 5, xw, yw, cw);
    epoch_batches(r0, 5, x0, y0, c0);
    epoch_batches(r1, 5, x1, y1, c1);
    int ok = 1;
    for (int s = 0; s < 2; s++) {
        ok &= c0[s] + c1[s] == cw[s];
        ok &= !memcmp(x0 + (size_t)s * 3 * sample, xw + (size_t)s * 6 * sample,
                      sizeof(float) * sample * c0[s]);
        ok &= !memcmp(x1 + (size_t)s * 3 * sample, xw + ((size_t)s * 6 + c0[s]) * sample,
                      sizeof(float) * sample * c1[s]);
        ok &= !memcmp(y0 + s * 3, yw + s * 6, sizeof(int32_t) * c0[s]);
        ok &= !memcmp(y1 + s * 3, yw + s * 6 + c0[s], sizeof(int32_t) * c1[s]);
    }
    printf("sharding: steps of %d+%d and %d+%d samples on 2 ranks = the global batches: %s\n",
           c0[0], c1[0], c0[1], c1[1], ok ? "yes" : "NO");
    CHECK(ok && cw[0] == 6 && cw[1] == 4 && c0[1] == 2 && c1[1] == 2);
    /* Each rank skipped only what it decoded itself, together both bad images once each. */
    int64_t s0 = dtnn_loader_skipped(r0, NULL, 0), s1 = dtnn_loader_skipped(r1, NULL, 0);
    CHECK(s0 + s1 == dtnn_loader_skipped(whole, NULL, 0) && s0 + s1 == 2);
    dtnn_loader_free(whole);
    dtnn_loader_free(r0);
    dtnn_loader_free(r1);
    free(xw);
    free(x0);
    free(x1);
}

/* ---- in memory: RandomCrop(padding=4) and flip ------------------------------------------- */

static void test_memory_augment(void)
{
    dtnn_data_params dp;
    dtnn_data_params_default(&dp);
    dp.name = "synthetic";
    dp.synthetic_n = 20;
    dp.h = dp.w = 8;
    dtnn_dataset d;
    dtnn_error err = {0};
    CHECK_OK(dtnn_dataset_load(&d, &dp, &err), &err);
    d.mean[0] = 0.5f, d.std[0] = 0.25f;    /* padding is black: (0 - 0.5) / 0.25 = -2 */
    dtnn_loader_params p;
    dtnn_loader_params_default(&p);
    p.batch_size = 20;
    p.augment = DTNN_AUG_CROP | DTNN_AUG_FLIP;
    p.crop_padding = 2;
    p.threads = 2;
    dtnn_loader *l = dtnn_loader_create(&d, 0, &p, &err);
    CHECK(l != NULL);
    if (!l) {
        dtnn_dataset_free(&d);
        return;
    }
    const size_t sample = 3 * 8 * 8;
    float *x = malloc(sizeof(float) * 20 * sample), *cand = malloc(sizeof(float) * sample);
    int32_t y[20];
    int n;
    int64_t perm[20];
    dtnn_epoch_permutation(perm, 20, p.seed, 0, 1);
    CHECK_OK(dtnn_loader_batch(l, 0, 0, x, y, &n, &err), &err);
    /* Each output is some crop (dx, dy in [0, 4]) of its sample, mirrored or not. */
    int found = 0, flipped = 0, shifted = 0;
    const float fill[3] = {-2.0f, d.std[1] ? -d.mean[1] / d.std[1] : 0, -d.mean[2] / d.std[2]};
    for (int i = 0; i < n; i++) {
        const float *src = d.train.x + (size_t)perm[i] * sample;
        int hit = 0;
        for (int f = 0; f < 2 && !hit; f++)
            for (int dy = 0; dy <= 4 && !hit; dy++)
                for (int dx = 0; dx <= 4 && !hit; dx++) {
                    dtnn__crop_flip_chw(src, 3, 8, 8, 2, dx, dy, f, fill, cand);
                    if (!memcmp(cand, x + (size_t)i * sample, sizeof(float) * sample)) {
                        hit = 1;
                        flipped += f;
                        shifted += dx != 2 || dy != 2;
                    }
                }
        found += hit && y[i] == d.train.y[perm[i]];
    }
    printf("in-memory crop+flip: %d of %d samples are a crop of theirs (%d flipped, %d shifted)\n",
           found, n, flipped, shifted);
    CHECK(found == 20 && flipped > 2 && flipped < 18 && shifted > 10);
    dtnn_loader_free(l);
    free(x);
    free(cand);
    dtnn_dataset_free(&d);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/dtnn_test_images.XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_decode();
    test_transforms();
    const char *dir = tmp_path("folder");
    char folder[600];
    snprintf(folder, sizeof folder, "%s", dir);
    make_folder(folder);
    test_folder_list(folder);
    test_folder_loader(folder);
    char textured[600];
    snprintf(textured, sizeof textured, "%s", tmp_path("textured"));
    make_textured_folder(textured);
    test_determinism(textured);
    test_sharding(folder);
    test_memory_augment();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return test_finish("test_images");
}
