#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/pem.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ecdsa.h>
#include <openssl/core_names.h>
#include <openssl/param_build.h>
#include <openssl/bn.h>

/* SHA-256 through the low-level SHA256_CTX, whose fields (unlike an EVP context's) can be saved
 * and restored, so a resumable upload can continue its hash on another node. OpenSSL 3 marks
 * these functions deprecated but ships them; the warning is silenced here only, and Swift calls
 * the wrappers, never the deprecated names. */
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wdeprecated-declarations"
#include <openssl/sha.h>

static inline int larder_sha256_init(SHA256_CTX *c) { return SHA256_Init(c); }
static inline int larder_sha256_update(SHA256_CTX *c, const void *data, size_t len) {
  return SHA256_Update(c, data, len);
}
static inline int larder_sha256_final(unsigned char *md, SHA256_CTX *c) { return SHA256_Final(md, c); }
#pragma clang diagnostic pop
