#include <curl/curl.h>

/* curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call: one typed
   function per argument kind. Each returns libcurl's own result code. */

typedef size_t (*larder_curl_data_callback)(char *buffer, size_t size, size_t count, void *context);

static inline CURLcode larder_curl_set_long(CURL *handle, CURLoption option, long value) {
  return curl_easy_setopt(handle, option, value);
}
static inline CURLcode larder_curl_set_offset(CURL *handle, CURLoption option, curl_off_t value) {
  return curl_easy_setopt(handle, option, value);
}
/* libcurl copies string options (since 7.17), so the Swift string may go away afterwards. */
static inline CURLcode larder_curl_set_string(CURL *handle, CURLoption option, const char *value) {
  return curl_easy_setopt(handle, option, value);
}
static inline CURLcode larder_curl_set_pointer(CURL *handle, CURLoption option, void *value) {
  return curl_easy_setopt(handle, option, value);
}
static inline CURLcode larder_curl_set_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
  return curl_easy_setopt(handle, option, value);
}
/* For CURLOPT_WRITEFUNCTION, CURLOPT_READFUNCTION and CURLOPT_HEADERFUNCTION, which share a shape. */
static inline CURLcode larder_curl_set_data_callback(CURL *handle, CURLoption option, larder_curl_data_callback value) {
  return curl_easy_setopt(handle, option, value);
}
static inline CURLcode larder_curl_get_long(CURL *handle, CURLINFO info, long *value) {
  return curl_easy_getinfo(handle, info, value);
}
/* CURL_READFUNC_ABORT is a macro Swift cannot see (it is a size_t constant). */
static inline size_t larder_curl_read_abort(void) { return CURL_READFUNC_ABORT; }
