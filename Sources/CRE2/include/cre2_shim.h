// A minimal C interface to RE2 so Swift can use it without C++ interop.
// Only LarderRules imports this module.
#pragma once
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/// An opaque compiled RE2 pattern. Immutable after creation, so it may be used
/// from several threads at once (RE2's const methods are thread-safe).
typedef struct cre2_regex cre2_regex;

/// Compiles `pattern` (UTF-8, `pattern_len` bytes) with RE2 syntax.
/// Returns NULL on failure and writes a NUL-terminated message into `error`
/// (at most `error_cap` bytes, may be NULL). `max_mem` bounds the compiled
/// program size in bytes (0 = RE2's default of 8 MiB).
cre2_regex *cre2_compile(const char *pattern, size_t pattern_len, long long max_mem,
                         char *error, size_t error_cap);

/// 1 if the whole `text` matches, 0 otherwise.
int cre2_full_match(const cre2_regex *re, const char *text, size_t text_len);

/// Finds the first match in `text` starting at byte `start`. Returns 1 and the
/// byte range [*match_start, *match_end) on success, 0 when there is none.
int cre2_find(const cre2_regex *re, const char *text, size_t text_len, size_t start,
              size_t *match_start, size_t *match_end);

/// Frees a pattern returned by cre2_compile. NULL is ignored.
void cre2_free(cre2_regex *re);

#ifdef __cplusplus
}
#endif
