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
   stream: about 8 bytes per 3 cycles, the instruction's latency; several GB/s, where the tables
   manage 1.4). Only call when larder_crc32c_hardware() is 1. */
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
#else
static inline int larder_crc32c_hardware(void) { return 0; }
static inline uint32_t larder_crc32c_update(uint32_t crc, const void *p, size_t n) { (void)p; (void)n; return crc; }
#endif
