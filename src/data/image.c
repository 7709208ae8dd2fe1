/*
 * image.c — decodes JPEG (libjpeg-turbo) and PNG (libpng) images to 8-bit RGB, for the image
 * folder datasets. Both libraries report errors by calling a handler that must not return; by
 * default libjpeg's exits the process and libpng's aborts. Here both handlers store the
 * library's message and longjmp back to the decoder, which frees the library's state and
 * returns DTNN_ERR_FORMAT naming the image. A truncated JPEG is only a warning to libjpeg (it
 * pads the image with grey); it is an error here, as it is to PIL. Other JPEG warnings
 * (extraneous bytes, say) are ignored, as PIL does.
 *
 * Conversions follow PIL's Image.convert("RGB"): grayscale is replicated, palettes and tRNS are
 * expanded, alpha is dropped without compositing, 16-bit PNG samples keep their high byte. CMYK
 * and YCCK JPEGs (Adobe's inverted CMYK) become RGB as (255 - C)(255 - K) / 255, the naive
 * conversion without a colour profile.
 *
 * Not here: resizing and cropping (transform.c), listing folders (image_folder.c). Built
 * without the libraries (DTNN_IMAGES=OFF), decoding is refused with a message saying so.
 */
#include <errno.h>
#include <setjmp.h>
#include <string.h>
#include <sys/stat.h>

#ifndef DTNN_NO_IMAGES
#include <png.h>

#include <jpeglib.h>
#include <jerror.h>
#endif

#include "core/file_input.h"
#include "core/internal.h"
#include "data/data.h"

/* Files larger than this are not images a CNN is trained on. */
#define IMAGE_MAX_FILE_BYTES ((size_t)1 << 30)

void dtnn_image_free(dtnn_image *img)
{
    if (!img)
        return;
    free(img->pixels);
    free(img->file);
    memset(img, 0, sizeof *img);
}

/* Grows *buf to at least bytes; 0 on success. */
static int reserve(unsigned char **buf, size_t *capacity, size_t bytes)
{
    if (bytes <= *capacity)
        return 0;
    unsigned char *p = realloc(*buf, bytes);
    if (!p)
        return -1;
    *buf = p;
    *capacity = bytes;
    return 0;
}

#ifndef DTNN_NO_IMAGES
static dtnn_status check_size(const char *origin, const char *kind, long long w, long long h,
                              dtnn_error *err)
{
    if (w < 1 || h < 1)
        return dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: %s of %lldx%lld pixels is empty",
                              origin, kind, w, h);
    if (w * h > DTNN_IMAGE_MAX_PIXELS)
        return dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: %s of %lldx%lld pixels is over the "
                              "limit of %d pixels (a decompression bomb?)", origin, kind, w, h,
                              DTNN_IMAGE_MAX_PIXELS);
    return DTNN_OK;
}

/* ---- JPEG --------------------------------------------------------------------------------- */

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    char message[JMSG_LENGTH_MAX];
} jpeg_failure;

static void jpeg_on_error(j_common_ptr c)
{
    jpeg_failure *f = (jpeg_failure *)(void *)c->err;
    c->err->format_message(c, f->message);
    longjmp(f->jump, 1);
}

static void jpeg_on_message(j_common_ptr c, int level)
{
    if (level < 0 && c->err->msg_code == JWRN_JPEG_EOF)
        jpeg_on_error(c);
}

static void jpeg_silent(j_common_ptr c) { (void)c; }

static dtnn_status decode_jpeg(const unsigned char *data, size_t len, const char *origin,
                               dtnn_image *img, dtnn_error *err)
{
    struct jpeg_decompress_struct cinfo;
    jpeg_failure jf;
    memset(&cinfo, 0, sizeof cinfo);
    cinfo.err = jpeg_std_error(&jf.pub);
    jf.pub.error_exit = jpeg_on_error;
    jf.pub.emit_message = jpeg_on_message;
    jf.pub.output_message = jpeg_silent;
    jf.message[0] = '\0';
    if (setjmp(jf.jump)) {
        jpeg_destroy_decompress(&cinfo);
        return dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: unreadable JPEG: %s", origin,
                              jf.message);
    }
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, data, (unsigned long)len);
    jpeg_read_header(&cinfo, TRUE);
    const int cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
    cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
    dtnn_status st = check_size(origin, "JPEG", cinfo.image_width, cinfo.image_height, err);
    if (!st) {
        jpeg_start_decompress(&cinfo);
        if (cinfo.output_components != (cmyk ? 4 : 3))
            st = dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: JPEG decodes to %d components",
                                origin, cinfo.output_components);
    }
    const size_t w = cinfo.output_width, h = cinfo.output_height;
    if (!st && reserve(&img->pixels, &img->pixels_capacity, w * h * 3))
        st = dtnn_error_set(err, DTNN_ERR_NOMEM, "%s: out of memory for %zux%zu pixels", origin,
                            w, h);
    if (st) {
        jpeg_destroy_decompress(&cinfo);
        return st;
    }
    /* CMYK rows go through a row of the decoder's own pool, freed with it. */
    JSAMPARRAY cmyk_row = cmyk ? cinfo.mem->alloc_sarray((j_common_ptr)&cinfo, JPOOL_IMAGE,
                                                          (JDIMENSION)(w * 4), 1)
                               : NULL;
    while (cinfo.output_scanline < cinfo.output_height) {
        unsigned char *out = img->pixels + (size_t)cinfo.output_scanline * w * 3;
        if (!cmyk) {
            JSAMPROW row = out;
            jpeg_read_scanlines(&cinfo, &row, 1);
            continue;
        }
        jpeg_read_scanlines(&cinfo, cmyk_row, 1);
        const unsigned char *in = cmyk_row[0];
        /* Adobe writes CMYK inverted; libjpeg passes it through as stored. */
        const int inverted = cinfo.saw_Adobe_marker;
        for (size_t x = 0; x < w; x++) {
            int k = inverted ? in[4 * x + 3] : 255 - in[4 * x + 3];
            for (int c = 0; c < 3; c++) {
                int v = inverted ? in[4 * x + c] : 255 - in[4 * x + c];
                out[3 * x + c] = (unsigned char)((v * k + 127) / 255);
            }
        }
    }
    jpeg_finish_decompress(&cinfo);
    jpeg_destroy_decompress(&cinfo);
    img->w = (int)w;
    img->h = (int)h;
    return DTNN_OK;
}

/* ---- PNG ---------------------------------------------------------------------------------- */

typedef struct {
    const unsigned char *data;
    size_t len, pos;
    char message[256];
} png_source;

static void png_on_error(png_structp png, png_const_charp msg)
{
    png_source *s = png_get_error_ptr(png);
    snprintf(s->message, sizeof s->message, "%s", msg);
    png_longjmp(png, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

static void png_read_memory(png_structp png, png_bytep out, png_size_t n)
{
    png_source *s = png_get_io_ptr(png);
    if (n > s->len - s->pos)
        png_error(png, "the file ends early (truncated)");
    memcpy(out, s->data + s->pos, n);
    s->pos += n;
}

static dtnn_status decode_png(const unsigned char *data, size_t len, const char *origin,
                              dtnn_image *img, dtnn_error *err)
{
    png_source src = {data, len, 0, ""};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_on_error,
                                             png_on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "%s: out of memory for the PNG decoder",
                              origin);
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, NULL);
        return dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: unreadable PNG: %s", origin,
                              src.message);
    }
    png_set_read_fn(png, &src, png_read_memory);
    png_read_info(png, info);
    const png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    dtnn_status st = check_size(origin, "PNG", w, h, err);
    if (!st && reserve(&img->pixels, &img->pixels_capacity, (size_t)w * h * 3))
        st = dtnn_error_set(err, DTNN_ERR_NOMEM, "%s: out of memory for %ux%u pixels", origin,
                            (unsigned)w, (unsigned)h);
    if (st) {
        png_destroy_read_struct(&png, &info, NULL);
        return st;
    }
    png_set_expand(png);
    png_set_strip_16(png);
    png_set_strip_alpha(png);
    png_set_gray_to_rgb(png);
    const int passes = png_set_interlace_handling(png);
    png_read_update_info(png, info);
    if (png_get_rowbytes(png, info) != (size_t)w * 3)
        png_error(png, "does not convert to 8-bit RGB");
    for (int pass = 0; pass < passes; pass++)
        for (png_uint_32 y = 0; y < h; y++)
            png_read_row(png, img->pixels + (size_t)y * w * 3, NULL);
    png_destroy_read_struct(&png, &info, NULL);
    img->w = (int)w;
    img->h = (int)h;
    return DTNN_OK;
}

#endif

#ifndef DTNN_NO_IMAGES
/* The PNG encoder's output: a buffer grown as libpng writes. */
typedef struct {
    png_source err;         /* png_on_error's message (its first fields) */
    unsigned char *buf;
    size_t len, cap;
} png_sink;

static void png_write_memory(png_structp png, png_bytep data, png_size_t n)
{
    png_sink *s = png_get_io_ptr(png);
    if (n > s->cap - s->len) {
        size_t cap = s->cap ? s->cap : 4096;
        while (cap - s->len < n)
            cap *= 2;
        unsigned char *nb = realloc(s->buf, cap);
        if (!nb)
            png_error(png, "out of memory");
        s->buf = nb;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, data, n);
    s->len += n;
}

static void png_flush_nothing(png_structp png)
{
    (void)png;
}

static dtnn_status encode_png(const unsigned char *chw, int c, int h, int w, unsigned char **out,
                              size_t *len, dtnn_error *err)
{
    png_sink sink = {{NULL, 0, 0, ""}, NULL, 0, 0};
    unsigned char *row = malloc((size_t)w * c);
    png_structp png = row ? png_create_write_struct(PNG_LIBPNG_VER_STRING, &sink.err,
                                                    png_on_error, png_on_warning)
                          : NULL;
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_write_struct(&png, NULL);
        free(row);
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "out of memory for the PNG encoder");
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        free(row);
        free(sink.buf);
        return dtnn_error_set(err, DTNN_ERR_NOMEM, "PNG encoding failed: %s", sink.err.message);
    }
    png_set_write_fn(png, &sink, png_write_memory, png_flush_nothing);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8,
                 c == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    const size_t plane = (size_t)h * w;
    for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++)
            for (int ch = 0; ch < c; ch++)
                row[(size_t)x * c + ch] = chw[ch * plane + (size_t)y * w + x];
        png_write_row(png, row);
    }
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    free(row);
    *out = sink.buf;
    *len = sink.len;
    return DTNN_OK;
}
#endif

dtnn_status dtnn__png_encode(const unsigned char *chw, int c, int h, int w, unsigned char **out,
                             size_t *len, dtnn_error *err)
{
    *out = NULL;
    *len = 0;
    if (c != 1 && c != 3)
        return dtnn_error_set(err, DTNN_ERR_UNSUPPORTED, "PNG images of %d channels: 1 or 3 "
                              "only", c);
#ifdef DTNN_NO_IMAGES
    (void)chw, (void)h, (void)w;
    return dtnn_error_set(err, DTNN_ERR_UNSUPPORTED, "cannot encode PNG: this dtnn was built "
                          "without libpng (-DDTNN_IMAGES=OFF)");
#else
    return encode_png(chw, c, h, w, out, len, err);
#endif
}

/* ---- entry points ------------------------------------------------------------------------- */

dtnn_status dtnn_image_decode(const void *data, size_t len, const char *origin, dtnn_image *img,
                              dtnn_error *err)
{
    const unsigned char *b = data;
    img->w = img->h = 0;
#ifdef DTNN_NO_IMAGES
    (void)b;
    return dtnn_error_set(err, DTNN_ERR_UNSUPPORTED, "%s: cannot decode (%zu bytes): this dtnn "
                          "was built without libjpeg and libpng (-DDTNN_IMAGES=OFF)", origin, len);
#else
    if (len >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff)
        return decode_jpeg(b, len, origin, img, err);
    if (len >= 8 && !png_sig_cmp(b, 0, 8))
        return decode_png(b, len, origin, img, err);
    return dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: not a JPEG or PNG image (%zu bytes%s)",
                          origin, len, len ? ", unknown signature" : "");
#endif
}

dtnn_status dtnn_image_read(const char *path, dtnn_image *img, dtnn_error *err)
{
    int64_t file_size = 0;
    FILE *f;
    dtnn_status opened = file_open_input(path, "image", &f, &file_size, err);
    if (opened)
        return opened;
    dtnn_status st = DTNN_OK;
    if ((uint64_t)file_size > IMAGE_MAX_FILE_BYTES)
        st = dtnn_error_set(err, DTNN_ERR_FORMAT, "%s: %lld bytes is too large for an image",
                            path, (long long)file_size);
    const size_t len = st ? 0 : (size_t)file_size;
    if (!st && reserve(&img->file, &img->file_capacity, DTNN_MAX(len, 1)))
        st = dtnn_error_set(err, DTNN_ERR_NOMEM, "%s: out of memory", path);
    if (!st && len && fread(img->file, 1, len, f) != len)
        st = dtnn_error_set(err, DTNN_ERR_IO, "%s: read failed: %s", path,
                            ferror(f) ? strerror(errno) : "the file shrank");
    fclose(f);
    return st ? st : dtnn_image_decode(img->file, len, path, img, err);
}
