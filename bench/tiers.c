/* tiers.c: the request tiers and the governor's tool cut measured on the
 * agent evaluation's tasks, without a model: which tier each request's
 * rule puts it in, and how often the cut leaves out a tool the task's
 * oracle called (a run that then cannot succeed). `make bench-tiers`.
 *
 * usage: tiers TASKS.jsonl   (hearth datagen --tasks --split heldout ...)
 * TIERS_MISSES=1 prints each request whose cut leaves out a needed tool.
 * Tiers: "small" when the cut offers only reading tools (a plain read or
 * recall: governor.small_model may serve it), "one tool" the part of those
 * whose cut is a single tool (a candidate for calling it with no model),
 * "full" the rest (every tool, the configured model). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/turn.h"

enum { N_CAT = 8 };

typedef struct tally {
    char name[16];
    int n, small, one, cut, lost_small, lost_cut;
} tally;

/* 1 when every call the oracle made is offered by filter. */
static int offers_expected(const cJSON *task, const char *filter)
{
    const cJSON *calls = cJSON_GetObjectItem(cJSON_GetObjectItem(task, "expect"), "calls");
    for (const cJSON *c = calls ? calls->child : NULL; c; c = c->next) {
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(c, "name"));
        if (name && !hx_agent_tool_offered(filter, name)) return 0;
    }
    return 1;
}

static tally *category(tally *t, int *n, const char *name)
{
    for (int i = 0; i < *n; i++)
        if (!strcmp(t[i].name, name)) return &t[i];
    if (*n == N_CAT - 1) return &t[N_CAT - 1];
    snprintf(t[*n].name, sizeof t[*n].name, "%s", name);
    return &t[(*n)++];
}

static void count(tally *a, const tally *b)
{
    a->n += b->n, a->small += b->small, a->one += b->one, a->cut += b->cut;
    a->lost_small += b->lost_small, a->lost_cut += b->lost_cut;
}

static void line(const tally *t)
{
    printf("| %-8s | %4d | %4d (%3.0f%%) | %4d | %4d (%3.0f%%) | %3d | %3d |\n", t->name, t->n,
           t->small, t->n ? 100.0 * t->small / t->n : 0, t->one, t->cut,
           t->n ? 100.0 * t->cut / t->n : 0, t->lost_small, t->lost_cut);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: tiers TASKS.jsonl\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "r");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    toolset ts;
    if (open_tools(&ts)) return 1;
    tally cats[N_CAT] = {0}, all = {.name = "all"};
    snprintf(cats[N_CAT - 1].name, sizeof cats[0].name, "other");
    int n_cat = 0;
    char *buf = NULL;
    size_t cap = 0;
    while (getline(&buf, &cap, f) > 0) {
        cJSON *task = cJSON_Parse(buf);
        const char *req = cJSON_GetStringValue(cJSON_GetObjectItem(task, "request"));
        const char *cat = cJSON_GetStringValue(cJSON_GetObjectItem(task, "category"));
        if (!req || !cat) {
            cJSON_Delete(task);
            continue;
        }
        tally *t = category(cats, &n_cat, cat);
        char filter[1024];
        int k = hx_agent_tools_for_request(ts.reg, req, filter, sizeof filter);
        t->n++;
        if (k > 0) {
            const int ok = offers_expected(task, filter);
            if (!ok && getenv("TIERS_MISSES"))
                printf("miss [%s] %s -> %s\n", cat, req, filter);
            t->cut++;
            t->lost_cut += !ok;
            if (hx_agent_request_tier(ts.reg, req, filter, sizeof filter) == HX_TIER_SMALL) {
                t->small++;
                t->one += k == 1;
                t->lost_small += !ok;
            }
        }
        cJSON_Delete(task);
    }
    free(buf);
    fclose(f);
    printf("| category | n | tier small | of which one tool | tool list cut | small tier "
           "missing a needed tool | cut missing one |\n|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n_cat; i++) {
        line(&cats[i]);
        count(&all, &cats[i]);
    }
    if (cats[N_CAT - 1].n) line(&cats[N_CAT - 1]), count(&all, &cats[N_CAT - 1]);
    line(&all);
    close_tools(&ts);
    return 0;
}
