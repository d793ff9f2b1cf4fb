/* fuzz_memory_query.c: arbitrary user text through the FTS5 query builder,
 * normalisation, Jaccard, memory search, episode search and recall: the
 * builder's output must be well formed and no text may make SQLite fail. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memory/memory.h"

static hx_memory *mem;
static char dir[64];

static void cleanup(void)
{
    hx_memory_close(mem);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) return;
}

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/hx_fuzzmem_XXXXXX");
    if (!mkdtemp(dir)) abort();
    char path[128];
    snprintf(path, sizeof path, "%s/memory.db", dir);
    hx_memory_params p = hx_memory_default_params();
    p.path = path;
    p.sync_full = 0;
    if (hx_memory_open(&p, &mem, NULL)) abort();
    const char *facts[] = {"prefers meetings before noon",
                           "Bob is Robert Lee, bob@example.org",
                           "caf\xc3\xa9 on the corner is the favourite",
                           "the dentist is Dr Okafor"};
    for (int i = 0; i < 4; i++) {
        hx_mem_new n = {.kind = "fact", .text = facts[i]};
        if (hx_memory_remember(mem, &n, NULL, NULL, NULL)) abort();
    }
    hx_episode ep = {0};
    ep.request = "find 30 minutes with Bob";
    if (hx_memory_episode_add(mem, &ep, NULL, NULL)) abort();
    atexit(cleanup);
}

/* Every token of a built query is "word" with no quote inside, joined by
 * " OR "; the caller-buffer protocol is consistent. */
static void check_builder(const char *text)
{
    int need = hx_mem_fts_query(text, NULL, 0);
    if (need >= 0) abort();
    char *q = malloc((size_t)-need);
    if (!q) abort();
    int n = hx_mem_fts_query(text, q, (size_t)-need);
    if (n != -need - 1 || strlen(q) != (size_t)n) abort();
    for (const char *p = q; *p;) {
        if (*p != '"') abort();
        const char *e = strchr(p + 1, '"');
        if (!e || e == p + 1) abort();
        p = e + 1;
        if (*p && strncmp(p, " OR ", 4)) abort();
        if (*p) p += 4;
    }
    free(q);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!mem) setup();
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    check_builder(text);
    char norm[256];
    hx_mem_normalize(text, norm, sizeof norm);
    double j = hx_mem_jaccard(text, "prefers meetings before noon");
    if (!(j >= 0.0 && j <= 1.0)) abort();
    hx_err err = {0};
    hx_mem_list *l = NULL;
    if (hx_memory_search(mem, text, 5, &l, &err)) abort();
    hx_mem_list_free(l);
    int64_t *ids = NULL;
    int n = 0;
    if (hx_memory_episode_search(mem, text, 5, &ids, &n, &err)) abort();
    free(ids);
    hx_recall_params rp = hx_recall_default_params();
    rp.mark_used = 0;
    rp.budget_tokens = (int)(size % 64);
    char *sec = NULL;
    if (hx_memory_recall(mem, text, &rp, &sec, NULL, &err)) abort();
    if (strlen(sec) > (size_t)rp.budget_tokens * 4 + 64) abort();
    free(sec);
    free(text);
    return 0;
}
