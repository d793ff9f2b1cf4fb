/* driver.c: a standalone driver for the fuzz targets, so that `make test`
 * runs each one briefly without libFuzzer: it replays the seed files in
 * tests/fuzz/corpus/<target>/ and then HX_FUZZ_ITERS (default 2000) random
 * mutations of them (byte flips, truncations, insertions, splices) with a
 * fixed seed. Usage: fuzz_x [FILE|DIR ...]. Prints "ok"/"FAIL" lines. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct {
    uint8_t **data;
    size_t *size;
    size_t n, cap;
} corpus;

static void corpus_add_file(corpus *c, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (n < 0 || n > (16 << 20)) {
        fclose(f);
        return;
    }
    uint8_t *d = malloc((size_t)n + 1);
    if (!d || fread(d, 1, (size_t)n, f) != (size_t)n) {
        free(d);
        fclose(f);
        return;
    }
    fclose(f);
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 16;
        c->data = realloc(c->data, c->cap * sizeof *c->data);
        c->size = realloc(c->size, c->cap * sizeof *c->size);
    }
    c->data[c->n] = d;
    c->size[c->n++] = (size_t)n;
}

static void corpus_add(corpus *c, const char *path)
{
    struct stat st;
    if (stat(path, &st)) return;
    if (!S_ISDIR(st.st_mode)) {
        corpus_add_file(c, path);
        return;
    }
    DIR *d = opendir(path);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        corpus_add_file(c, p);
    }
    closedir(d);
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* One mutation of a random corpus entry into buf; returns its length. */
static size_t mutate(const corpus *c, uint8_t *buf, size_t cap)
{
    size_t i = rnd() % c->n, n = c->size[i];
    if (n > cap) n = cap;
    memcpy(buf, c->data[i], n);
    int k = 1 + (int)(rnd() % 8);
    while (k--) {
        switch (rnd() % 5) {
        case 0: if (n) buf[rnd() % n] ^= (uint8_t)(1u << (rnd() % 8)); break;
        case 1: if (n) buf[rnd() % n] = (uint8_t)rnd(); break;
        case 2: if (n) n = rnd() % n; break;
        case 3:
            if (n < cap) {
                size_t p = rnd() % (n + 1);
                memmove(buf + p + 1, buf + p, n - p);
                buf[p] = (uint8_t)rnd();
                n++;
            }
            break;
        case 4: {
            size_t j = rnd() % c->n, m = c->size[j];
            if (!m || !n) break;
            size_t from = rnd() % m, to = rnd() % n, len = rnd() % 64;
            if (len > m - from) len = m - from;
            if (len > n - to) len = n - to;
            memcpy(buf + to, c->data[j] + from, len);
            break;
        }
        }
    }
    return n;
}

int main(int argc, char **argv)
{
    corpus c = {0};
    for (int i = 1; i < argc; i++) corpus_add(&c, argv[i]);
    if (argc < 2) {
        char dir[4096];
        const char *name = strrchr(argv[0], '/');
        name = name ? name + 1 : argv[0];
        snprintf(dir, sizeof dir, "tests/fuzz/corpus/%s", name);
        corpus_add(&c, dir);
        if (!c.n) {
            /* a run that silently fuzzes one empty input checks nothing */
            printf("FAIL fuzz: no seed files in %s (run from the repository root)\n", dir);
            return 1;
        }
    }
    if (!c.n) {
        c.data = malloc(sizeof *c.data);
        c.size = malloc(sizeof *c.size);
        c.data[0] = malloc(1);
        c.size[0] = 0;
        c.n = 1;
    }
    for (size_t i = 0; i < c.n; i++) LLVMFuzzerTestOneInput(c.data[i], c.size[i]);
    const char *it = getenv("HX_FUZZ_ITERS");
    long iters = it ? atol(it) : 2000;
    size_t cap = 1 << 20;
    uint8_t *buf = malloc(cap);
    for (long i = 0; i < iters; i++) {
        size_t n = mutate(&c, buf, cap);
        uint8_t *copy = malloc(n ? n : 1); /* exact size so ASan sees overreads */
        memcpy(copy, buf, n);
        LLVMFuzzerTestOneInput(copy, n);
        free(copy);
    }
    free(buf);
    for (size_t i = 0; i < c.n; i++) free(c.data[i]);
    free(c.data);
    free(c.size);
    printf("ok   fuzz %zu seeds + %ld mutations\n", c.n, iters);
    printf("# 1 passed, 0 failed, 0 skipped\n");
    return 0;
}
