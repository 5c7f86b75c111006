// C shim over RE2. RE2 matches in time linear in the input, which is why the
// rules language uses it: no pattern can backtrack catastrophically.
#include "cre2_shim.h"

#include <re2/re2.h>

#include <cstdio>
#include <cstring>
#include <new>
#include <string>

struct cre2_regex {
  re2::RE2 re;
  cre2_regex(const re2::StringPiece &pattern, const re2::RE2::Options &options)
      : re(pattern, options) {}
};

extern "C" cre2_regex *cre2_compile(const char *pattern, size_t pattern_len, long long max_mem,
                                    char *error, size_t error_cap) {
  re2::RE2::Options options;
  options.set_log_errors(false);
  options.set_encoding(re2::RE2::Options::EncodingUTF8);
  if (max_mem > 0) options.set_max_mem(max_mem);
  cre2_regex *handle = new (std::nothrow) cre2_regex(re2::StringPiece(pattern, pattern_len), options);
  if (handle == nullptr) {
    if (error != nullptr && error_cap > 0) std::snprintf(error, error_cap, "out of memory");
    return nullptr;
  }
  if (!handle->re.ok()) {
    if (error != nullptr && error_cap > 0) {
      const std::string &message = handle->re.error();
      size_t n = message.size() < error_cap - 1 ? message.size() : error_cap - 1;
      std::memcpy(error, message.data(), n);
      error[n] = '\0';
    }
    delete handle;
    return nullptr;
  }
  return handle;
}

extern "C" int cre2_full_match(const cre2_regex *re, const char *text, size_t text_len) {
  if (re == nullptr) return 0;
  return re2::RE2::FullMatch(re2::StringPiece(text, text_len), re->re) ? 1 : 0;
}

extern "C" int cre2_find(const cre2_regex *re, const char *text, size_t text_len, size_t start,
                         size_t *match_start, size_t *match_end) {
  if (re == nullptr || start > text_len) return 0;
  re2::StringPiece match;
  if (!re->re.Match(re2::StringPiece(text, text_len), start, text_len, re2::RE2::UNANCHORED,
                    &match, 1)) {
    return 0;
  }
  *match_start = static_cast<size_t>(match.data() - text);
  *match_end = *match_start + match.size();
  return 1;
}

extern "C" void cre2_free(cre2_regex *re) { delete re; }
