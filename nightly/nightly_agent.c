/* nightly_agent.c: the agent's side of the nightly run: episodes rendered
 * and masked as `hearth train --chat` does (nightly/chatdata.c), generic
 * replay conversations from hearth datagen's generator rendered alike, and
 * the generic evaluation (sim/evalrun.c's runs) with and without a
 * candidate adapter. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nightly/nightly.h"
#include "nightly/chatdata.h"
#include "lora/lora.h"

/* ---- rendering ---- */

/* The first n messages (references) in ar's style; gen: with the
 * generation prompt, as planner.c's step() renders a turn's prompt. */
static int render_upto(const hx_agent_render *ar, const cJSON *msgs, int n, int gen,
                       hx_buf *out, hx_tpl_marks *marks)
{
    cJSON *a = cJSON_CreateArray();
    if (!a) return HX_ERR_NOMEM;
    const cJSON *m = msgs->child;
    for (int i = 0; i < n && m; i++, m = m->next) cJSON_AddItemReferenceToArray(a, (cJSON *)m);
    hx_tpl_opts o = hx_tpl_default_opts();
    o.add_generation_prompt = gen;
    o.no_think = hx_planner_default_params().no_think;
    int rc = hx_tpl_render_marked(ar->family, a, ar->tools, &o, out, marks);
    cJSON_Delete(a);
    return rc;
}

/* A document in the making: its text, the assistant's spans in it, and
 * the ranges its template wrote (the text is always the rendering that
 * ends with its last turn, so those are that rendering's). */
typedef struct episode_doc {
    hx_buf text;
    hx_chat_span *spans;
    int n_spans, cap;
    hx_tpl_marks marks;
} episode_doc;

/* Tokenizes the document into out and starts the next one empty. */
static int doc_flush(const hx_agent_render *ar, episode_doc *d, hx_nightly_data *out,
                     hx_err *err)
{
    hx_chat_tokens t;
    memset(&t, 0, sizeof t);
    int rc = d->n_spans ? hx_chat_tokens_add_marked(&t, ar->v, d->text.data, d->text.len,
                                                    &d->marks, d->spans, d->n_spans, err)
                        : HX_OK;
    if (!rc && t.n > 1 && hx_nightly_data_add(out, t.tokens, t.mask, t.n))
        rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    hx_chat_tokens_free(&t);
    d->n_spans = 0;
    d->marks.n = 0;
    d->text.len = 0;
    if (d->text.data) d->text.data[0] = '\0';
    return rc;
}

/* Assistant message i: the prompt the planner fed for it, then what it
 * wrote (to the end of its turn in the rendering that ends with it). The
 * document goes on when that prompt extends it; else (Qwen3 renders an
 * earlier turn without the empty think block it was written after) the
 * document is closed and the turn starts the next one. */
static int add_turn(const hx_agent_render *ar, const cJSON *msgs, int i, episode_doc *d,
                    hx_nightly_data *out, hx_err *err)
{
    hx_buf p, f;
    hx_tpl_marks fm = {0};
    hx_buf_init(&p), hx_buf_init(&f);
    int rc = render_upto(ar, msgs, i, 1, &p, NULL);
    if (!rc) rc = render_upto(ar, msgs, i + 1, 0, &f, &fm);
    if (rc) rc = hx_err_set(err, rc, "episode: cannot render in style %s", hx_tpl_name(ar->family));
    else if (f.len < p.len || (p.len && memcmp(f.data, p.data, p.len)))
        rc = hx_err_set(err, HX_ERR_FORMAT, "episode: message %d does not continue its "
                        "prompt in style %s", i, hx_tpl_name(ar->family));
    if (!rc && (d->text.len > p.len || (d->text.len && memcmp(d->text.data, p.data, d->text.len))))
        rc = doc_flush(ar, d, out, err);
    if (!rc && d->n_spans == d->cap) {
        hx_chat_span *ns = hx_realloc(d->spans, (size_t)(d->cap * 2 + 4) * sizeof *ns);
        if (!ns) rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
        else d->spans = ns, d->cap = d->cap * 2 + 4;
    }
    if (!rc) {
        hx_buf_append(&d->text, p.data + d->text.len, p.len - d->text.len);
        hx_buf_append(&d->text, f.data + p.len, f.len - p.len);
        d->spans[d->n_spans++] = (hx_chat_span){p.len, f.len};
        if (d->text.oom) rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
        hx_tpl_marks t = d->marks; /* the document is now f: its marks are f's */
        d->marks = fm, fm = t;
    }
    hx_tpl_marks_free(&fm);
    hx_buf_free(&p), hx_buf_free(&f);
    return rc;
}

int hx_agent_nightly_render(void *user, const cJSON *messages, hx_nightly_data *out,
                            hx_err *err)
{
    const hx_agent_render *ar = user;
    episode_doc d;
    memset(&d, 0, sizeof d);
    hx_buf_init(&d.text);
    int rc = HX_OK, i = 0;
    for (const cJSON *m = messages->child; !rc && m; m = m->next, i++)
        if (hx_chat_is_target(m)) rc = add_turn(ar, messages, i, &d, out, err);
    if (!rc) rc = doc_flush(ar, &d, out, err);
    hx_buf_free(&d.text);
    hx_tpl_marks_free(&d.marks);
    free(d.spans);
    return rc;
}

/* ---- replay ---- */

typedef struct replay_ctx {
    const hx_agent_render *ar;
    hx_nightly_data *out;
} replay_ctx;

/* One generated conversation rendered as an episode is, with the tools
 * its world offered (as the generic tasks' worlds offer theirs). */
static int replay_one(void *user, const hx_chat_doc *d, hx_err *err)
{
    replay_ctx *c = user;
    hx_agent_render ar = {c->ar->v, c->ar->family, d->tools};
    const int before = c->out->n_docs;
    int rc = hx_agent_nightly_render(&ar, d->messages, c->out, err);
    c->out->n_episodes += !rc && c->out->n_docs > before;
    return rc;
}

int hx_agent_nightly_replay(void *user, int n, uint64_t seed, hx_nightly_data *out,
                            hx_err *err)
{
    const hx_agent_render *ar = user;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    hx_dg_params p = hx_dg_default_params();
    hx_dg_stats st;
    p.split = HX_SPLIT_TRAIN; /* never the held-out pools the generic suite draws */
    p.n = n;
    p.seed = seed;
    /* each sample world puts the caller's HEARTH_HOME and HEARTH_NOW back
     * when it closes (hx_dg_world_close) */
    int rc = f ? hx_datagen_run(&p, f, &st, err) : hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    if (f) fclose(f);
    replay_ctx c = {ar, out};
    if (!rc) rc = hx_chat_each_buf("replay", text ? text : "", len, ar->family, replay_one, &c, err);
    free(text);
    return rc;
}

/* ---- the evaluation ---- */

/* The sample's tasks, generated once. */
static int eval_sample(hx_agent_eval *ae, int n_tasks, hx_err *err)
{
    if (ae->tasks && cJSON_GetArraySize(ae->tasks) == n_tasks) return HX_OK;
    cJSON_Delete(ae->tasks);
    ae->tasks = hx_dg_eval_tasks(n_tasks, ae->seed, -1, err);
    if (!ae->tasks) return err->rc ? err->rc : HX_ERR_INTERNAL;
    if (cJSON_GetArraySize(ae->tasks) != n_tasks)
        return hx_err_set(err, HX_ERR_INTERNAL, "generated %d of %d evaluation tasks",
                          cJSON_GetArraySize(ae->tasks), n_tasks);
    return HX_OK;
}

static int eval_run(hx_agent_eval *ae, const char *const *adapters, const float *scales,
                    int n_adapters, int n_tasks, uint8_t *pass, hx_err *err);

/* The base's results on the sample are the same every night while the
 * model, the tasks, the threads and Hearth itself are: kept in
 * ae->cache_dir under the key of those (the evaluation replays exactly: sim/evalhome.c,
 * hx_unique_bytes). path gets the cache file. */
static void base_cache_path(const hx_agent_eval *ae, int n_tasks, char *path, size_t n)
{
    char id[65], exe[65] = "", key[65];
    unsigned char dig[32];
    hx_sha256 s;
    hx_err e2 = {0};
    char *tasks = cJSON_PrintUnformatted(ae->tasks);
    hx_model_identity(ae->model, id);
    hx_sha256_file("/proc/self/exe", NULL, exe, &e2);
    hx_sha256_init(&s);
    hx_sha256_update(&s, id, 64);
    hx_sha256_update(&s, exe, strlen(exe));
    hx_sha256_update(&s, &n_tasks, sizeof n_tasks);
    hx_sha256_update(&s, &ae->n_threads, sizeof ae->n_threads);
    if (tasks) hx_sha256_update(&s, tasks, strlen(tasks));
    hx_sha256_final(&s, dig);
    hx_sha256_hex(dig, key);
    cJSON_free(tasks);
    snprintf(path, n, "%s/generic-base-%.16s.bin", ae->cache_dir, key);
    if (!exe[0] || !tasks) path[0] = '\0'; /* no key: no cache */
}

int hx_agent_nightly_eval(void *user, const char *const *adapters, const float *scales,
                          int n_adapters, int n_tasks, uint8_t *pass, hx_err *err)
{
    hx_agent_eval *ae = user;
    char cache[600] = "";
    if (ae->cache_dir && !ae->oracle && n_adapters == 0 && n_tasks > 0 &&
        !eval_sample(ae, n_tasks, err))
        base_cache_path(ae, n_tasks, cache, sizeof cache);
    char *old = NULL;
    size_t len = 0;
    if (cache[0] && !hx_read_file(cache, (size_t)n_tasks + 1, &old, &len, NULL) &&
        len == (size_t)n_tasks) {
        memcpy(pass, old, len);
        free(old);
        ae->base_cached = 1;
        return HX_OK;
    }
    free(old);
    int rc = eval_run(ae, adapters, scales, n_adapters, n_tasks, pass, err);
    if (!rc && cache[0] && !hx_mkdirs(ae->cache_dir, NULL))
        hx_write_file_atomic(cache, pass, (size_t)n_tasks, NULL);
    ae->base_cached = 0;
    return rc;
}

static int eval_run(hx_agent_eval *ae, const char *const *adapters, const float *scales,
                    int n_adapters, int n_tasks, uint8_t *pass, hx_err *err)
{
    hx_adapter *ads[HX_ADAPTER_MAX];
    int na = 0, i = 0;
    memset(pass, 0, (size_t)(n_tasks > 0 ? n_tasks : 0));
    int rc = n_adapters <= HX_ADAPTER_MAX ? eval_sample(ae, n_tasks, err)
             : hx_err_set(err, HX_ERR_INVALID, "at most %d adapters", HX_ADAPTER_MAX);
    for (; !rc && !ae->oracle && na < n_adapters; na++)
        if ((rc = hx_adapter_load(ae->model, adapters[na], &ads[na], err))) break;
    char base[300] = "", home[320];
    int fd = -1;
    if (!rc) rc = hx_eval_home_take(ae->dir, base, sizeof base, &fd, err);
    snprintf(home, sizeof home, "%s/world", base);
    hx_dg_eval_run o = {ae->model, ae->family, ae->n_threads, ae->oracle,
                        na ? ads : NULL, na ? scales : NULL, na, 0, NULL, 0, NULL, 0};
    hx_dg_validator *v = NULL;
    for (const cJSON *t = rc ? NULL : ae->tasks->child; t && !rc && i < n_tasks; t = t->next) {
        int ok = 0;
        rc = hx_dg_eval_task(&o, t, home, &v, &ok, NULL, NULL, NULL, err);
        pass[i++] = ok != 0;
    }
    hx_eval_home_give(base, fd);
    hx_dg_validator_free(v);
    for (int k = 0; k < na; k++) hx_adapter_free(ads[k]);
    return rc;
}

void hx_agent_eval_free_tasks(hx_agent_eval *ae)
{
    if (!ae) return;
    cJSON_Delete(ae->tasks);
    ae->tasks = NULL;
}
