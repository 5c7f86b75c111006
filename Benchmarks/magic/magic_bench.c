/*
 * CPU time of one magic_buffer() call per corpus file, for libmagic configurations given on the
 * command line. Not a test: it measures, Benchmarks/magic/run.sh prints the comparison.
 *
 *   magic_bench CORPUS_DIR CONFIG...   # TSV: config, file, bytes passed, µs per call (min), MIME, median
 *
 * A CONFIG is tokens joined by '+': `base` (Larder's flags before this benchmark:
 * MAGIC_MIME_TYPE|MAGIC_ERROR|MAGIC_NO_CHECK_COMPRESS), a flag name without its MAGIC_ prefix
 * (NO_CHECK_TEXT, NO_CHECK_CSV, ...), `head=N` (bytes passed: min(file size, N); default 65536,
 * Larder's ContentSniffer.headLength), or a libmagic parameter: indir=N, name=N, elfph=N,
 * elfsh=N, elfnotes=N, regex=N, bytes=N, encoding=N (magic_setparam).
 *
 * CPU time is CLOCK_THREAD_CPUTIME_ID around a batch of calls (at least MIN_NS of CPU and 3
 * calls); each file is measured in ROUNDS (MAGIC_BENCH_ROUNDS, default 5) batches per
 * configuration, interleaved. Only this thread's CPU is counted, so other processes change the
 * numbers only through shared caches and the sibling hyperthread, which is why the minimum is
 * printed first. Larder's configuration since this benchmark is base+encoding=16384.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROUNDS_MAX 32
static int ROUNDS = 5; /* MAGIC_BENCH_ROUNDS */
#define MIN_NS 2000000L /* 2 ms of CPU per batch */

struct file { char name[256]; unsigned char *bytes; size_t size; };

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int cmp_file(const void *a, const void *b) {
  return strcmp(((const struct file *)a)->name, ((const struct file *)b)->name);
}

static const struct { const char *name; int value; } FLAGS[] = {
  {"NO_CHECK_COMPRESS", MAGIC_NO_CHECK_COMPRESS}, {"NO_CHECK_TAR", MAGIC_NO_CHECK_TAR},
  {"NO_CHECK_SOFT", MAGIC_NO_CHECK_SOFT}, {"NO_CHECK_APPTYPE", MAGIC_NO_CHECK_APPTYPE},
  {"NO_CHECK_ELF", MAGIC_NO_CHECK_ELF}, {"NO_CHECK_TEXT", MAGIC_NO_CHECK_TEXT},
  {"NO_CHECK_CDF", MAGIC_NO_CHECK_CDF}, {"NO_CHECK_CSV", MAGIC_NO_CHECK_CSV},
  {"NO_CHECK_TOKENS", MAGIC_NO_CHECK_TOKENS}, {"NO_CHECK_ENCODING", MAGIC_NO_CHECK_ENCODING},
  {"NO_CHECK_JSON", MAGIC_NO_CHECK_JSON}, {"NO_CHECK_BUILTIN", MAGIC_NO_CHECK_BUILTIN},
  {"MIME_ENCODING", MAGIC_MIME_ENCODING}, {"RAW", MAGIC_RAW},
};
static const struct { const char *name; int param; } PARAMS[] = {
  {"indir", MAGIC_PARAM_INDIR_MAX}, {"name", MAGIC_PARAM_NAME_MAX},
  {"elfph", MAGIC_PARAM_ELF_PHNUM_MAX}, {"elfsh", MAGIC_PARAM_ELF_SHNUM_MAX},
  {"elfnotes", MAGIC_PARAM_ELF_NOTES_MAX}, {"regex", MAGIC_PARAM_REGEX_MAX},
  {"bytes", MAGIC_PARAM_BYTES_MAX}, {"encoding", MAGIC_PARAM_ENCODING_MAX},
};

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s CORPUS_DIR CONFIG...\n", argv[0]);
    return 2;
  }
  if (getenv("MAGIC_BENCH_ROUNDS")) ROUNDS = atoi(getenv("MAGIC_BENCH_ROUNDS"));
  if (ROUNDS < 1 || ROUNDS > ROUNDS_MAX) ROUNDS = 5;
  DIR *dir = opendir(argv[1]);
  if (!dir) { perror(argv[1]); return 1; }
  struct file files[512];
  size_t count = 0;
  struct dirent *e;
  while ((e = readdir(dir)) && count < 512) {
    if (e->d_name[0] == '.') continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", argv[1], e->d_name);
    FILE *f = fopen(path, "rb");
    if (!f) continue;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    rewind(f);
    struct file *file = &files[count++];
    snprintf(file->name, sizeof file->name, "%s", e->d_name);
    file->bytes = malloc(size ? (size_t)size : 1);
    file->size = fread(file->bytes, 1, (size_t)size, f);
    fclose(f);
  }
  closedir(dir);
  qsort(files, count, sizeof files[0], cmp_file);

  {
    /* libmagic's own defaults, for the record. */
    magic_t m = magic_open(0);
    fprintf(stderr, "libmagic %d defaults:", magic_version());
    for (size_t p = 0; p < sizeof PARAMS / sizeof PARAMS[0]; p++) {
      size_t v = 0;
      magic_getparam(m, PARAMS[p].param, &v);
      fprintf(stderr, " %s=%zu", PARAMS[p].name, v);
    }
    fprintf(stderr, "\n");
    magic_close(m);
  }

  /* Every configuration's cookie is opened first; then rounds go file by file and, within a
   * file, configuration by configuration, so a burst of load from other processes lands on all of
   * them alike. The minimum over rounds is printed (CPU time only grows under contention: caches
   * and the sibling hyperthread are shared), the median beside it. */
  int nconf = argc - 2;
  magic_t *cookies = calloc((size_t)nconf, sizeof *cookies);
  size_t *heads = calloc((size_t)nconf, sizeof *heads);
  for (int c = 0; c < nconf; c++) {
    const char *name = argv[c + 2];
    int flags = 0;
    size_t head = 65536;
    struct { int param; size_t value; } set[16];
    int nset = 0;
    char *spec = strdup(name);
    for (char *tok = strtok(spec, "+"); tok; tok = strtok(NULL, "+")) {
      int known = 0;
      if (!strcmp(tok, "base")) { flags |= MAGIC_MIME_TYPE | MAGIC_ERROR | MAGIC_NO_CHECK_COMPRESS; known = 1; }
      for (size_t i = 0; !known && i < sizeof FLAGS / sizeof FLAGS[0]; i++)
        if (!strcmp(tok, FLAGS[i].name)) { flags |= FLAGS[i].value; known = 1; }
      char *eq = strchr(tok, '=');
      if (!known && eq) {
        *eq = 0;
        size_t v = strtoul(eq + 1, NULL, 10);
        if (!strcmp(tok, "head")) { head = v; known = 1; }
        for (size_t p = 0; !known && p < sizeof PARAMS / sizeof PARAMS[0]; p++)
          if (!strcmp(tok, PARAMS[p].name)) { set[nset].param = PARAMS[p].param; set[nset++].value = v; known = 1; }
        *eq = '=';
      }
      if (!known) { fprintf(stderr, "unknown token %s in %s\n", tok, name); return 2; }
    }
    free(spec);
    magic_t m = magic_open(flags);
    if (!m || magic_load(m, NULL) != 0) { fprintf(stderr, "magic_load: %s\n", m ? magic_error(m) : "?"); return 1; }
    for (int i = 0; i < nset; i++)
      if (magic_setparam(m, set[i].param, &set[i].value) != 0) { fprintf(stderr, "setparam failed in %s\n", name); return 1; }
    cookies[c] = m;
    heads[c] = head;
  }

  printf("config\tfile\tbytes\tus_per_call\tmime\tus_median\n");
  for (size_t i = 0; i < count; i++) {
    double per[64][ROUNDS_MAX];
    char mime[64][256];
    for (int c = 0; c < nconf && c < 64; c++) {
      size_t n = files[i].size < heads[c] ? files[i].size : heads[c];
      const char *r = magic_buffer(cookies[c], files[i].bytes, n); /* warm: page in the database */
      snprintf(mime[c], sizeof mime[c], "%s", r ? r : "(null)");
    }
    for (int round = 0; round < ROUNDS; round++)
      for (int c = 0; c < nconf && c < 64; c++) {
        size_t n = files[i].size < heads[c] ? files[i].size : heads[c];
        long calls = 0;
        long long start = now_ns(), spent;
        do {
          magic_buffer(cookies[c], files[i].bytes, n);
          calls++;
          spent = now_ns() - start;
        } while (spent < MIN_NS || calls < 3);
        per[c][round] = (double)spent / 1000.0 / (double)calls;
      }
    for (int c = 0; c < nconf && c < 64; c++) {
      size_t n = files[i].size < heads[c] ? files[i].size : heads[c];
      qsort(per[c], ROUNDS, sizeof per[c][0], cmp_double);
      printf("%s\t%s\t%zu\t%.1f\t%s\t%.1f\n", argv[c + 2], files[i].name, n, per[c][0], mime[c], per[c][ROUNDS / 2]);
    }
    fflush(stdout);
  }
  for (int c = 0; c < nconf; c++) magic_close(cookies[c]);
  return 0;
}
