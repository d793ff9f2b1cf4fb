/* fuzz_gvcache.c: fuzz target for the grammar vocabulary cache loader:
 * edits a valid cache file of the stories260K vocabulary at offsets the
 * input picks (5 bytes per edit: offset, xor mask), reseals its checksum
 * so that the structural checks, not the sum, must catch the damage, and
 * loads it; a vocabulary loaded from it must give masks without harm.
 * Without the shared data it returns at once. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/grammar/gint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static hx_vocab *g_v;
static hx_grammar *g_g;
static char g_dir[64], g_path[400];
static char *g_img;
static size_t g_len;
static int g_state; /* 0 not tried, 1 ready, -1 unavailable */

static void cleanup(void)
{
    unlink(g_path);
    rmdir(g_dir);
}

static int setup(void)
{
    const char *dir = getenv("HEARTH_SHARED_DATA");
    char model[4096];
    hx_gguf *gg = NULL;
    hx_gvocab *gv = NULL;
    snprintf(model, sizeof model, "%s/models/stories260K.gguf", dir && *dir ? dir : "../shared/data");
    /* /dev/shm: thousands of rewrites of the file stay in memory */
    snprintf(g_dir, sizeof g_dir, "%s/hx_fuzz_gv_XXXXXX", access("/dev/shm", W_OK) ? "/tmp" : "/dev/shm");
    if (hx_gguf_open(model, &gg, NULL) || hx_vocab_load(gg, &g_v, NULL) || !mkdtemp(g_dir)) return -1;
    hx_gguf_close(gg);
    if (hx_gvocab_from_vocab_cached(g_v, g_dir, &gv, NULL, NULL)) return -1;
    hx_gvocab_free(gv);
    DIR *d = opendir(g_dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.') snprintf(g_path, sizeof g_path, "%s/%s", g_dir, e->d_name);
    if (d) closedir(d);
    atexit(cleanup);
    const char *s = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"maxLength\":5}}}";
    if (!g_path[0] || hx_read_file(g_path, 0, &g_img, &g_len, NULL) ||
        hx_grammar_from_schema(s, strlen(s), NULL, &g_g, NULL))
        return -1;
    return 1;
}

/* Masks along a short document: must not crash or read out of bounds. */
static void use(const hx_gvocab *gv)
{
    hx_matcher *m = hx_matcher_new(g_g, gv);
    uint32_t *mask = calloc(((size_t)hx_gvocab_n_tokens(gv) + 31) / 32, 4);
    const char *doc = "{\"a\": \"xy\"}";
    for (size_t i = 0; m && mask && doc[i]; i++) {
        hx_matcher_mask(m, mask);
        if (hx_matcher_feed(m, doc + i, 1)) break;
    }
    free(mask);
    hx_matcher_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_state) g_state = setup();
    if (g_state < 0) return 0;
    char *img = malloc(g_len);
    if (!img) return 0;
    memcpy(img, g_img, g_len);
    for (size_t i = 0; i + 5 <= size; i += 5) {
        uint32_t off;
        memcpy(&off, data + i, 4);
        img[off % g_len] ^= (char)data[i + 4];
    }
    hx_gvcache_reseal(img, g_len);
    FILE *f = fopen(g_path, "wb");
    if (f) {
        fwrite(img, 1, g_len, f);
        fclose(f);
    }
    free(img);
    hx_gvocab *gv = hx_gvcache_load(g_v, g_path);
    if (gv) use(gv);
    hx_gvocab_free(gv);
    return 0;
}
