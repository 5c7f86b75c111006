/* CRC-32C with the CPU's own instruction (SSE 4.2 `crc32`), for LarderCrypto/CRC32C.swift, which
   keeps the table-driven version for CPUs without it. Swift cannot emit the instruction itself.
   Header-only: no library is linked. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>

/* 1 when the CPU has SSE 4.2 (CPUID leaf 1, ECX bit 20). */
static inline int larder_crc32c_hardware(void) {
  unsigned int a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
  return (c & bit_SSE4_2) != 0;
}

/* Continues the inverted register `crc` over `n` bytes at `p`, eight bytes per instruction (one
   stream, limited by the instruction's latency). Only call when larder_crc32c_hardware() is 1. */
__attribute__((target("sse4.2"))) static inline uint32_t larder_crc32c_update(uint32_t crc, const void *p, size_t n) {
  const unsigned char *b = (const unsigned char *)p;
  uint64_t c = crc;
  while (n > 0 && ((uintptr_t)b & 7) != 0) { c = __builtin_ia32_crc32qi((uint32_t)c, *b++); n--; }
  while (n >= 8) {
    uint64_t w;
    memcpy(&w, b, 8);
    c = __builtin_ia32_crc32di(c, w);
    b += 8;
    n -= 8;
  }
  while (n > 0) { c = __builtin_ia32_crc32qi((uint32_t)c, *b++); n--; }
  return (uint32_t)c;
}

/* The bytes of each of the three streams of larder_crc32c_update3. */
#define LARDER_CRC32C_BLOCK 8192

/* The same as larder_crc32c_update, about three times as fast on long inputs: three independent
   streams over consecutive blocks of LARDER_CRC32C_BLOCK bytes hide the instruction's latency,
   then the first two are carried over the blocks after them (the register is linear in its
   input: the register after A·B is A's register moved over |B| zero bytes, XOR B's register from
   zero). `shift` holds that move over one block, 4 × 256 entries: the move of byte k of a
   register is shift[k * 256 + byte]. */
__attribute__((target("sse4.2"))) static inline uint32_t larder_crc32c_update3(
    uint32_t crc, const void *p, size_t n, const uint32_t *shift) {
  const unsigned char *b = (const unsigned char *)p;
  uint64_t c0 = crc;
  while (n > 0 && ((uintptr_t)b & 7) != 0) { c0 = __builtin_ia32_crc32qi((uint32_t)c0, *b++); n--; }
  while (n >= 3 * LARDER_CRC32C_BLOCK) {
    uint64_t c1 = 0, c2 = 0;
    const unsigned char *end = b + LARDER_CRC32C_BLOCK;
    do {
      uint64_t w0, w1, w2;
      memcpy(&w0, b, 8);
      memcpy(&w1, b + LARDER_CRC32C_BLOCK, 8);
      memcpy(&w2, b + 2 * LARDER_CRC32C_BLOCK, 8);
      c0 = __builtin_ia32_crc32di(c0, w0);
      c1 = __builtin_ia32_crc32di(c1, w1);
      c2 = __builtin_ia32_crc32di(c2, w2);
      b += 8;
    } while (b < end);
    uint32_t r = (uint32_t)c0;
    r = (shift[r & 0xff] ^ shift[256 + ((r >> 8) & 0xff)] ^ shift[512 + ((r >> 16) & 0xff)] ^ shift[768 + (r >> 24)]) ^ (uint32_t)c1;
    r = (shift[r & 0xff] ^ shift[256 + ((r >> 8) & 0xff)] ^ shift[512 + ((r >> 16) & 0xff)] ^ shift[768 + (r >> 24)]) ^ (uint32_t)c2;
    c0 = r;
    b += 2 * LARDER_CRC32C_BLOCK;
    n -= 3 * LARDER_CRC32C_BLOCK;
  }
  return larder_crc32c_update((uint32_t)c0, b, n);
}
#else
static inline int larder_crc32c_hardware(void) { return 0; }
static inline uint32_t larder_crc32c_update(uint32_t crc, const void *p, size_t n) { (void)p; (void)n; return crc; }
#define LARDER_CRC32C_BLOCK 8192
static inline uint32_t larder_crc32c_update3(uint32_t crc, const void *p, size_t n, const uint32_t *shift) {
  (void)p; (void)n; (void)shift; return crc;
}
#endif
