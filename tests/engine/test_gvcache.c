/* test_gvcache.c: the grammar vocabulary's disk cache: a second start
 * loads what the first built (same masks), and a damaged, truncated,
 * stale or unwritable cache is rebuilt without an error. */
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/engine.h"
#include "test.h"

static char dir[64];

static hx_vocab *load_vocab(const char *rel, hx_gguf **g)
{
    const char *p = test_shared_file(rel);
    hx_vocab *v = NULL;
    if (!p || hx_gguf_open(p, g, NULL)) return NULL;
    if (hx_vocab_load(*g, &v, NULL)) v = NULL;
    return v;
}

/* The one cache file in d (its path into out); 0 if none. */
static int cache_file(const char *d, char *out, size_t n)
{
    char cmd[200];
    snprintf(cmd, sizeof cmd, "ls %s/gvocab-*.bin 2>/dev/null", d);
    FILE *f = popen(cmd, "r");
    int ok = f && fgets(out, (int)n, f) != NULL;
    if (f) pclose(f);
    if (ok) out[strcspn(out, "\n")] = 0;
    return ok;
}

/* Masks along a tool call agree between two grammar vocabularies. */
static int same_masks(const hx_gvocab *a, const hx_gvocab *b)
{
    hx_tool_spec t = {"noop", "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"}}}"};
    hx_grammar *g = NULL;
    if (hx_grammar_tool_calls(&t, 1, HX_TOOLS_LAZY, NULL, &g, NULL)) return 0;
    hx_matcher *ma = hx_matcher_new(g, a), *mb = hx_matcher_new(g, b);
    uint32_t nw = ((uint32_t)hx_gvocab_n_tokens(a) + 31) / 32;
    uint32_t *x = calloc(nw, 4), *y = calloc(nw, 4);
    const char *text = "Hi <tool_call>{\"name\": \"noop\", \"arguments\": {\"n\": 12}}</tool_call>";
    int ok = ma && mb && x && y && hx_gvocab_n_tokens(a) == hx_gvocab_n_tokens(b);
    for (size_t i = 0; ok && i <= strlen(text); i += 7) {
        ok = !hx_matcher_mask(ma, x) && !hx_matcher_mask(mb, y) && !memcmp(x, y, nw * 4);
        size_t k = strlen(text) - i < 7 ? strlen(text) - i : 7;
        ok = ok && !hx_matcher_feed(ma, text + i, k) && !hx_matcher_feed(mb, text + i, k);
    }
    free(x), free(y);
    hx_matcher_free(ma), hx_matcher_free(mb);
    hx_grammar_free(g);
    return ok;
}

static void test_cache_round_trip(const char *rel)
{
    hx_gguf *gg = NULL;
    hx_vocab *v = load_vocab(rel, &gg);
    if (!v) SKIP("%s not available", rel);
    hx_gvocab *built = NULL, *a = NULL, *b = NULL;
    int hit = -1;
    hx_err err = {0};
    ASSERT(hx_gvocab_from_vocab(v, &built, &err) == HX_OK);
    ASSERT(hx_gvocab_from_vocab_cached(v, dir, &a, &hit, &err) == HX_OK);
    EXPECT_EQ_INT(hit, 0);
    double t0 = hx_time_mono();
    ASSERT(hx_gvocab_from_vocab_cached(v, dir, &b, &hit, &err) == HX_OK);
    printf("# %s: cached load %.1f ms (wall)\n", rel, (hx_time_mono() - t0) * 1e3);
    EXPECT_EQ_INT(hit, 1);
    EXPECT(same_masks(built, b));
    EXPECT(same_masks(a, b));
    hx_gvocab_free(built), hx_gvocab_free(a), hx_gvocab_free(b);
    hx_vocab_free(v);
    hx_gguf_close(gg);
}

static void test_round_trip_stories(void) { test_cache_round_trip("models/stories260K.gguf"); }
static void test_round_trip_qwen(void) { test_cache_round_trip("vocab/ggml-vocab-qwen2.gguf"); }

/* Damage the file in a way, then: no error, rebuilt (a miss), and the
 * rewritten file is used again. */
static void damaged(hx_vocab *v, const char *how, const char *d)
{
    char path[300], *data = NULL;
    size_t len = 0;
    hx_gvocab *g = NULL;
    int hit = -1;
    hx_err err = {0};
    ASSERT(hx_gvocab_from_vocab_cached(v, d, &g, &hit, &err) == HX_OK);
    hx_gvocab_free(g);
    ASSERT(cache_file(d, path, sizeof path));
    ASSERT(hx_read_file(path, 0, &data, &len, NULL) == HX_OK && len > 200);
    if (!strcmp(how, "flip")) data[len / 2] ^= 0x40;
    if (!strcmp(how, "truncate")) len = len * 2 / 3;
    if (!strcmp(how, "version")) data[4] = 99;
    if (!strcmp(how, "empty")) len = 0;
    if (!strcmp(how, "node")) data[len - 8] ^= 1; /* inside cum: only the sum sees it */
    ASSERT(hx_write_file_atomic(path, data, len, NULL) == HX_OK);
    free(data);
    g = NULL;
    EXPECT(hx_gvocab_from_vocab_cached(v, d, &g, &hit, &err) == HX_OK);
    EXPECT(g != NULL);
    EXPECT_EQ_INT(hit, 0);
    hx_gvocab_free(g);
    EXPECT(hx_gvocab_from_vocab_cached(v, d, &g, &hit, &err) == HX_OK);
    EXPECT_EQ_INT(hit, 1);
    hx_gvocab_free(g);
}

static void test_damaged_cache_is_rebuilt(void)
{
    hx_gguf *gg = NULL;
    hx_vocab *v = load_vocab("models/stories260K.gguf", &gg);
    if (!v) SKIP("models/stories260K.gguf not available");
    const char *hows[] = {"flip", "truncate", "version", "empty", "node"};
    char d[100];
    snprintf(d, sizeof d, "%s/damage", dir);
    for (int i = 0; i < 5; i++) damaged(v, hows[i], d);
    hx_vocab_free(v);
    hx_gguf_close(gg);
}

/* A directory that cannot be created: built, no error, no file. */
static void test_unwritable_dir(void)
{
    hx_gguf *gg = NULL;
    hx_vocab *v = load_vocab("models/stories260K.gguf", &gg);
    if (!v) SKIP("models/stories260K.gguf not available");
    hx_gvocab *g = NULL;
    int hit = -1;
    hx_err err = {0};
    EXPECT(hx_gvocab_from_vocab_cached(v, "/proc/no/such/dir", &g, &hit, &err) == HX_OK);
    EXPECT(g != NULL && hit == 0);
    hx_gvocab_free(g);
    /* NULL: hx_path_cache's directory ($HEARTH_HOME/cache here) */
    char home[128], cache[160];
    snprintf(home, sizeof home, "%s/home", dir);
    setenv("HEARTH_HOME", home, 1);
    EXPECT(hx_gvocab_from_vocab_cached(v, NULL, &g, &hit, &err) == HX_OK && hit == 0);
    hx_gvocab_free(g);
    EXPECT(hx_gvocab_from_vocab_cached(v, NULL, &g, &hit, &err) == HX_OK && hit == 1);
    hx_gvocab_free(g);
    snprintf(cache, sizeof cache, "%s/cache", home);
    struct stat st;
    EXPECT(stat(cache, &st) == 0 && S_ISDIR(st.st_mode));
    unsetenv("HEARTH_HOME");
    hx_vocab_free(v);
    hx_gguf_close(gg);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/hx_gvcache_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    RUN(test_round_trip_stories);
    RUN(test_round_trip_qwen);
    RUN(test_damaged_cache_is_rebuilt);
    RUN(test_unwritable_dir);
    char cmd[100];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) printf("# could not remove %s\n", dir);
    return test_summary();
}
