/* scripted.h: the agent tests' scripted token source (a test double
 * standing in for the model: it plays back scripted assistant turns and
 * records the prompts it was given) and what the planner reports, over
 * the fixture world (agent_world.h). Header-only; include after test.h. */
#ifndef HX_TESTS_SCRIPTED_H
#define HX_TESTS_SCRIPTED_H

#include "agent_world.h"

/* ---- the test double: plays back scripted assistant turns ---- */
typedef struct scripted_source {
    const char *const *turns; /* one per assistant turn */
    int n_turns, turn;
    const char *cur;          /* what is left of the current turn */
    int chunk;                /* bytes per "token" */
    char *prompts[16];        /* the prompts it was given */
    int n_prompts;
    char *copy_texts[16];     /* what the planner said arguments copy from */
    int n_copy;
    int infinite;             /* never ends a turn (for the limits); 1 + words
                                 written */
    int choices[16];          /* the tool choice of each turn */
    int repair;               /* mends calls as the engine's source does */
    char *known;              /* the known addresses it was told, last */
    int n_known;              /* how many times */
    char *request;            /* the user's latest message it was told, last */
    char *ground;             /* what answers' facts copy from, last told */
    char *claims;             /* the claim words licensed, last told */
    hx_arg_check_fn check;    /* the argument check it was given */
    char *refused;            /* the failed calls not to write again, last told */
    char *refused_at[16];     /* what it was told before each turn began */
    int grounds;              /* a cut answer ends where the engine's
                                 grounded answers may (hx_ground_end) */
} scripted_source;

__attribute__((unused))
static int scripted_begin(void *ctx, const char *prompt, int choice, int *n_prompt,
                          hx_err *err)
{
    scripted_source *s = ctx;
    (void)err;
    if (s->n_prompts < 16) {
        s->refused_at[s->n_prompts] = hx_strdup(s->refused ? s->refused : "");
        s->choices[s->n_prompts] = choice, s->prompts[s->n_prompts++] = hx_strdup(prompt);
    }
    s->cur = s->turn < s->n_turns ? s->turns[s->turn] : "(script ended)";
    s->turn++;
    *n_prompt = (int)strlen(prompt) / 4;
    return HX_OK;
}

__attribute__((unused))
static int scripted_next(void *ctx, hx_buf *piece, int *end, hx_err *err)
{
    scripted_source *s = ctx;
    (void)err;
    if (s->infinite) /* words that never repeat (the repeat guard ends a loop) */
        return *end = 0, hx_buf_printf(piece, "la%d ", s->infinite++);
    size_t n = strlen(s->cur);
    *end = n == 0;
    if ((size_t)s->chunk < n) n = (size_t)s->chunk;
    hx_buf_append(piece, s->cur, n);
    s->cur += n;
    return HX_OK;
}

__attribute__((unused))
static int scripted_copy_text(void *ctx, const char *text)
{
    scripted_source *s = ctx;
    if (s->n_copy < 16) s->copy_texts[s->n_copy++] = hx_strdup(text);
    return HX_OK;
}

__attribute__((unused))
static int scripted_request(void *ctx, const char *text)
{
    scripted_source *s = ctx;
    free(s->request);
    s->request = hx_strdup(text);
    return HX_OK;
}

__attribute__((unused))
static int scripted_known(void *ctx, const char *list)
{
    scripted_source *s = ctx;
    free(s->known);
    s->known = hx_strdup(list);
    s->n_known++;
    return HX_OK;
}

__attribute__((unused))
static int scripted_ground(void *ctx, const char *text, const char *claims)
{
    scripted_source *s = ctx;
    free(s->ground);
    free(s->claims);
    s->ground = hx_strdup(text);
    s->claims = hx_strdup(claims);
    return HX_OK;
}

__attribute__((unused))
static int scripted_answer_end(void *ctx, const char *text, size_t n, size_t *end)
{
    scripted_source *s = ctx;
    if (!s->grounds) return *end = n, HX_OK;
    return hx_ground_end(s->ground ? s->ground : "", s->claims, text, n, end);
}

__attribute__((unused))
static void scripted_arg_check(void *ctx, hx_arg_check_fn check, void *user)
{
    (void)user;
    ((scripted_source *)ctx)->check = check;
}

__attribute__((unused))
static int scripted_refused(void *ctx, const char *calls)
{
    scripted_source *s = ctx;
    free(s->refused);
    s->refused = hx_strdup(calls);
    return HX_OK;
}

__attribute__((unused))
static int scripted_repair(void *ctx, cJSON *args)
{
    scripted_source *s = ctx;
    return s->repair && s->n_copy ? hx_copy_repair(s->copy_texts[s->n_copy - 1], args) : 0;
}

__attribute__((unused))
static void scripted_free(void *ctx)
{
    scripted_source *s = ctx;
    for (int i = 0; i < s->n_prompts; i++) free(s->prompts[i]), free(s->refused_at[i]);
    free(s->refused);
    for (int i = 0; i < s->n_copy; i++) free(s->copy_texts[i]);
    free(s->known);
    free(s->request);
    free(s->ground);
    free(s->claims);
}

__attribute__((unused))
static hx_source scripted(scripted_source *s, const char *const *turns, int n)
{
    memset(s, 0, sizeof *s);
    s->turns = turns;
    s->n_turns = n;
    s->chunk = 3;
    return (hx_source){.api_version = HX_SOURCE_API, .name = "scripted (test double)",
                       .ctx = s, .begin = scripted_begin, .next = scripted_next,
                       .free = scripted_free, .set_copy_text = scripted_copy_text,
                       .repair_args = scripted_repair, .set_known_addresses = scripted_known,
                       .set_request = scripted_request, .set_ground = scripted_ground,
                       .set_arg_check = scripted_arg_check,
                       .set_refused_calls = scripted_refused,
                       .answer_end = scripted_answer_end};
}

/* ---- what the planner reports ---- */
typedef struct seen {
    hx_buf text;
    char calls[1024];
    int n_results;
    int cancel_after; /* cancelled() says yes after this many checks (0: never) */
    int checks;
    int split_cp;     /* pieces of text that ended inside a UTF-8 code point */
} seen;

/* Whether s[0, n) ends inside a UTF-8 code point. */
static int ends_inside_cp(const char *s, size_t n)
{
    size_t cont = 0;
    while (cont < n && ((unsigned char)s[n - 1 - cont] & 0xC0) == 0x80) cont++;
    if (cont == n) return cont > 0;
    const unsigned char lead = (unsigned char)s[n - 1 - cont];
    const size_t need = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : lead >= 0xC0 ? 1 : 0;
    return cont != need;
}

__attribute__((unused))
static void on_text(void *u, const char *s, size_t n)
{
    hx_buf_append(&((seen *)u)->text, s, n);
    ((seen *)u)->split_cp += ends_inside_cp(s, n);
}
__attribute__((unused))
static void on_call(void *u, const char *name, const char *args)
{
    seen *s = u;
    size_t l = strlen(s->calls);
    snprintf(s->calls + l, sizeof s->calls - l, "%s %s;", name, args);
}
__attribute__((unused))
static void on_result(void *u, const char *name, const char *status, const char *detail)
{
    (void)name, (void)status, (void)detail;
    ((seen *)u)->n_results++;
}
__attribute__((unused))
static int cancelled(void *u)
{
    seen *s = u;
    return s->cancel_after && ++s->checks > s->cancel_after;
}

__attribute__((unused))
static hx_planner_io io_for(seen *s)
{
    memset(s, 0, sizeof *s);
    hx_buf_init(&s->text);
    return (hx_planner_io){s, on_text, on_call, on_result, cancelled};
}

__attribute__((unused))
static const char *call_status(const cJSON *trace, int i)
{
    return cJSON_GetStringValue(cJSON_GetObjectItem(
        cJSON_GetArrayItem(cJSON_GetObjectItem(trace, "calls"), i), "status"));
}

__attribute__((unused))
static const char *tstr(const cJSON *t, const char *k)
{
    return cJSON_GetStringValue(cJSON_GetObjectItem(t, k));
}

/* Runs one request through a fresh planner; returns the rc. */
__attribute__((unused))
static int run_source(world *w, hx_source *src, const char *request, hx_planner_params *pp,
                      seen *s, cJSON **trace)
{
    hx_planner_deps d = world_deps(w, src);
    hx_planner_params p = pp ? *pp : hx_planner_default_params();
    hx_planner *pl = hx_planner_new(&d, &p);
    hx_planner_io io = io_for(s);
    hx_err err = {0};
    int rc = pl ? hx_planner_run(pl, request, &io, trace, &err) : HX_ERR_NOMEM;
    hx_planner_free(pl);
    return rc;
}

__attribute__((unused))
static int run_script(world *w, const char *const *turns, int n, const char *request,
                      hx_planner_params *pp, seen *s, cJSON **trace,
                      scripted_source *ss)
{
    hx_source src = scripted(ss, turns, n);
    return run_source(w, &src, request, pp, s, trace);
}

__attribute__((unused))
static void done(seen *s, cJSON *trace, scripted_source *ss)
{
    hx_buf_free(&s->text);
    cJSON_Delete(trace);
    scripted_free(ss);
}

#endif
