// libvips' API is variadic (name/value option lists), which Swift cannot call: these inline
// functions fix the options Larder uses. Only LarderImages/Vips.swift imports this module.
#include <vips/vips.h>
#include <string.h>

static inline int larder_vips_init(void) {
  if (VIPS_INIT("larder")) return -1;
  // Larder caches results itself, as blobs; libvips' operation cache would only hold memory.
  vips_cache_set_max(0);
  vips_cache_set_max_mem(0);
  return 0;
}

/// Reads only the header: size, pages and the loader libvips would use. Nothing is decoded.
static inline int larder_vips_header(const void *buf, size_t len, int *width, int *height, int *pages,
                                     int *alpha, char *loader, size_t loader_len) {
  const char *name = vips_foreign_find_load_buffer(buf, len);
  if (!name) return -1;
  strncpy(loader, name, loader_len - 1);
  loader[loader_len - 1] = 0;
  VipsImage *image = vips_image_new_from_buffer(buf, len, "", "access", VIPS_ACCESS_SEQUENTIAL, NULL);
  if (!image) return -1;
  *width = vips_image_get_width(image);
  *height = vips_image_get_page_height(image);
  *pages = vips_image_get_n_pages(image);
  *alpha = vips_image_hasalpha(image);
  g_object_unref(image);
  return 0;
}

/// `image` without any metadata: EXIF (GPS position included), XMP, IPTC, the ICC profile, the
/// orientation tag, comments, which a saver would write. Only the meta table is emptied; the
/// built-in header fields (size, bands, format) are not in it. (libvips 8.14's webpsave still
/// writes an EXIF block it builds itself, strip or not: Vips.swift removes that chunk.)
static inline VipsImage *larder_vips_without_metadata(VipsImage *image) {
  VipsImage *out = NULL;
  if (vips_copy(image, &out, NULL)) return NULL;
  gchar **fields = vips_image_get_fields(out);
  for (int i = 0; fields[i]; i++) vips_image_remove(out, fields[i]);
  g_strfreev(fields);
  return out;
}

/// Whether the encoded image in `buf` embeds an ICC profile (read from its header only).
static inline int larder_vips_has_profile(const void *buf, size_t len) {
  VipsImage *image = vips_image_new_from_buffer(buf, len, "", "access", VIPS_ACCESS_SEQUENTIAL, NULL);
  if (!image) return 0;
  int has = vips_image_get_typeof(image, VIPS_META_ICC_NAME) != 0;
  g_object_unref(image);
  return has;
}

/// A thumbnail with shrink-on-load, the EXIF orientation applied to the pixels, the colour
/// converted to sRGB, and no metadata left (the sRGB result carries no profile: sRGB is what a
/// profile-less image means). An embedded profile is converted from through `export_profile`,
/// which 8.14 applies only when asked (and only then: on a profile-less image it would shift
/// sRGB's own values); CMYK without one through libvips' fallback profile. `crop`: centre-crop
/// to fill the box; `force`: stretch to exactly width x height. First page only (animated
/// GIF/WebP: the first frame).
static inline VipsImage *larder_vips_thumbnail(const void *buf, size_t len, int width, int height, int crop,
                                               int force) {
  VipsImage *out = NULL;
  int profiled = larder_vips_has_profile(buf, len);
  if (vips_thumbnail_buffer((void *)buf, len, &out, width, "height", height, "crop",
                            crop ? VIPS_INTERESTING_CENTRE : VIPS_INTERESTING_NONE, "size",
                            force ? VIPS_SIZE_FORCE : VIPS_SIZE_BOTH, "export_profile", profiled ? "srgb" : NULL,
                            "option_string", "fail=true", NULL))
    return NULL;
  // libvips reads `buf` lazily, and the caller's buffer lives only for this call: render now.
  VipsImage *rendered = vips_image_copy_memory(out);
  g_object_unref(out);
  if (!rendered) return NULL;
  VipsImage *bare = larder_vips_without_metadata(rendered);
  g_object_unref(rendered);
  return bare;
}

/// `image` converted to the colour profile `profile` (a file, or libvips' built-in `srgb`,
/// `cmyk`, `p3`), which it then carries (written by a save without strip); for test images.
static inline VipsImage *larder_vips_with_profile(VipsImage *image, const char *profile) {
  VipsImage *out = NULL;
  if (vips_icc_transform(image, &out, profile, "input_profile", "srgb", NULL)) return NULL;
  return out;
}

/// Encodes: 0 JPEG, 1 PNG, 2 WebP, 3 AVIF. JPEG has no alpha: it is flattened onto white.
static inline int larder_vips_save(VipsImage *image, int format, int quality, int strip, void **buf, size_t *len) {
  switch (format) {
  case 0: {
    VipsImage *flat = NULL;
    int r;
    if (vips_image_hasalpha(image)) {
      double white[3] = {255, 255, 255};
      VipsArrayDouble *background = vips_array_double_new(white, 3);
      r = vips_flatten(image, &flat, "background", background, NULL);
      vips_area_unref(VIPS_AREA(background));
      if (r) return -1;
    } else {
      flat = image;
      g_object_ref(flat);
    }
    r = vips_jpegsave_buffer(flat, buf, len, "Q", quality, "strip", strip, "optimize_coding", TRUE, NULL);
    g_object_unref(flat);
    return r;
  }
  case 1: return vips_pngsave_buffer(image, buf, len, "strip", strip, NULL);
  case 2: return vips_webpsave_buffer(image, buf, len, "Q", quality, "strip", strip, NULL);
  case 3:
    return vips_heifsave_buffer(image, buf, len, "Q", quality, "compression", VIPS_FOREIGN_HEIF_COMPRESSION_AV1,
                                "strip", strip, NULL);
  default: return -1;
  }
}

/// Decodes a whole image from memory (tests and tools read results back with it).
static inline VipsImage *larder_vips_load(const void *buf, size_t len) {
  VipsImage *lazy = vips_image_new_from_buffer(buf, len, "", "access", VIPS_ACCESS_RANDOM, NULL);
  if (!lazy) return NULL;
  VipsImage *decoded = vips_image_copy_memory(lazy);
  g_object_unref(lazy);
  return decoded;
}

static inline int larder_vips_width(VipsImage *image) { return vips_image_get_width(image); }
static inline int larder_vips_height(VipsImage *image) { return vips_image_get_height(image); }
static inline int larder_vips_bands(VipsImage *image) { return vips_image_get_bands(image); }
static inline int larder_vips_has_alpha(VipsImage *image) { return vips_image_hasalpha(image); }
static inline int larder_vips_interpretation(VipsImage *image) { return (int)vips_image_get_interpretation(image); }
static inline int larder_vips_orientation(VipsImage *image) { return vips_image_get_orientation(image); }

/// The pixel at (x, y), up to 4 bands, as doubles.
static inline int larder_vips_pixel(VipsImage *image, int x, int y, double *out, int max) {
  double *vector = NULL;
  int n = 0;
  if (vips_getpoint(image, &vector, &n, x, y, NULL)) return -1;
  for (int i = 0; i < n && i < max; i++) out[i] = vector[i];
  g_free(vector);
  return n;
}

/// A solid test image: `bands` 3 (sRGB) or 4 (with alpha), `value` per band.
static inline VipsImage *larder_vips_solid(int width, int height, int bands, const double *value) {
  VipsImage *black = NULL, *out = NULL, *cast = NULL;
  if (vips_black(&black, width, height, "bands", bands, NULL)) return NULL;
  int r = vips_linear(black, &out, (double[]){1, 1, 1, 1}, (double *)value, bands, NULL);
  g_object_unref(black);
  if (r) return NULL;
  r = vips_cast_uchar(out, &cast, NULL);
  g_object_unref(out);
  if (r) return NULL;
  cast->Type = bands == 1 ? VIPS_INTERPRETATION_B_W : VIPS_INTERPRETATION_sRGB;
  return cast;
}

/// A copy of `image` whose EXIF orientation tag is `orientation` (written by a save without strip).
static inline VipsImage *larder_vips_with_orientation(VipsImage *image, int orientation) {
  VipsImage *out = NULL;
  if (vips_copy(image, &out, NULL)) return NULL;
  vips_image_set_int(out, VIPS_META_ORIENTATION, orientation);
  return out;
}

static inline void larder_vips_unref(VipsImage *image) { g_object_unref(image); }
static inline void larder_vips_free(void *buf) { g_free(buf); }

/// The last error's text, cleared.
static inline void larder_vips_error(char *out, size_t len) {
  const char *text = vips_error_buffer();
  strncpy(out, text ? text : "", len - 1);
  out[len - 1] = 0;
  vips_error_clear();
}
