/* cli_session.c: the assistant's session shared by `hearth ask`, `chat` and
 * `serve`: their options, and the configuration, tools, memory, policy,
 * model, source and planner opened once. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli_session.h"

/* ---- option parsing ---- */
static int size_opt(const char *verb, const char *name, const char *v, size_t *out)
{
    if (!hx_cli_parse_size(v, out)) return 1;
    fprintf(stderr, "hearth %s: %s: '%s' is not a size such as 2G or 1500M\n", verb, name, v);
    return 0;
}

static int kv_opt(const char *verb, const char *v, int *q8)
{
    *q8 = !strcmp(v, "q8") || !strcmp(v, "q8_0");
    if (*q8 || !strcmp(v, "f16")) return 1;
    fprintf(stderr, "hearth %s: --kv: '%s' is not f16 or q8\n", verb, v);
    return 0;
}

/* A numeric option: which, its names and range. */
enum { N_STEPS, N_TOKENS, N_TIMEOUT, N_TEMP, N_BIAS, N_SEED, N_CTX, N_THREADS };
typedef struct num_spec {
    int which;
    const char *name, *alt;
    double lo, hi;
    int integer;
} num_spec;

static const num_spec num_specs[] = {
    {N_STEPS, "--max-steps", NULL, 1, 1000, 1}, {N_TOKENS, "--max-tokens", NULL, 1, 1e7, 1},
    {N_TIMEOUT, "--timeout", NULL, 0, 1e6, 0},  {N_TEMP, "--temp", NULL, 0, 100, 0},
    {N_BIAS, "--copy-bias", NULL, 0, 100, 0},   {N_SEED, "--seed", NULL, 0, 1.8e19, 0},
    {N_CTX, "--ctx", "-c", 16, 1 << 20, 1},     {N_THREADS, "--threads", "-t", 0, 1024, 1},
};

static void set_num(cli_ask_opts *o, int which, double d)
{
    switch (which) {
    case N_STEPS: o->pp.max_steps = (int)d; break;
    case N_TOKENS: o->pp.max_tokens = (int)d; break;
    case N_TIMEOUT: o->pp.timeout_s = d; break;
    case N_TEMP: o->ep.sp.temp = (float)d; break;
    case N_BIAS: o->ep.copy_bias = (float)d; break;
    case N_SEED: o->ep.sp.seed = (uint64_t)d; break;
    case N_CTX: o->n_ctx = (int)d; break;
    default: o->n_threads = (int)d; break;
    }
}

/* The numeric options: 1 if a is one (its value checked, ok 0 when bad). */
static int num_opt(cli_ask_opts *o, const char *verb, const char *a, const char *v, int *ok)
{
    for (int k = 0; k < (int)(sizeof num_specs / sizeof *num_specs); k++) {
        const num_spec *n = &num_specs[k];
        double d;
        long l;
        if (strcmp(a, n->name) && (!n->alt || strcmp(a, n->alt))) continue;
        *ok = n->integer ? !hx_cli_opt_long(verb, a, v, (long)n->lo, (long)n->hi, &l)
                         : !hx_cli_opt_double(verb, a, v, n->lo, n->hi, &d);
        if (*ok) set_num(o, n->which, n->integer ? (double)l : d);
        return 1;
    }
    return 0;
}

/* Options that take a value (v, not NULL); returns 1 if matched (ok set to
 * 0 on a bad value, said on stderr). */
static int value_opt(cli_ask_opts *o, const char *verb, const char *a, const char *v, int *ok)
{
    if (!strcmp(a, "-m") || !strcmp(a, "--model")) o->model = v;
    else if (!strcmp(a, "--config")) o->config = v;
    else if (!strcmp(a, "--style")) o->style = v;
    else if (!strcmp(a, "--tool-choice")) o->choice = v;
    else if (!strcmp(a, "--tools")) o->tools = v;
    else if (!strcmp(a, "--answer")) o->answer = v;
    else if (!strcmp(a, "--adapter")) {
        if ((*ok = o->n_adapters < HX_ADAPTER_MAX)) o->adapters[o->n_adapters++] = v;
        else fprintf(stderr, "hearth %s: at most %d --adapter\n", verb, HX_ADAPTER_MAX);
    } else if (!strcmp(a, "--max-memory")) *ok = size_opt(verb, a, v, &o->ep.max_bytes);
    else if (!strcmp(a, "--kv")) *ok = kv_opt(verb, v, &o->ep.kv_q8);
    else return num_opt(o, verb, a, v, ok);
    return 1;
}

/* Whether a is an option that takes a value. */
static int takes_value(const char *a)
{
    static const char *const names[] = {"-m", "--model", "--config", "--style",
                                        "--tool-choice", "--tools", "--answer", "--adapter",
                                        "--max-memory", "--kv"};
    for (size_t k = 0; k < sizeof names / sizeof *names; k++)
        if (!strcmp(a, names[k])) return 1;
    for (size_t k = 0; k < sizeof num_specs / sizeof *num_specs; k++)
        if (!strcmp(a, num_specs[k].name) || (num_specs[k].alt && !strcmp(a, num_specs[k].alt)))
            return 1;
    return 0;
}

static int flag_opt(cli_ask_opts *o, const char *a)
{
    if (!strcmp(a, "-y") || !strcmp(a, "--yes")) o->yes = 1;
    else if (!strcmp(a, "--no")) o->no = 1;
    else if (!strcmp(a, "--allow-tainted-send")) o->allow_tainted = 1;
    else if (!strcmp(a, "--json")) o->json = 1;
    else if (!strcmp(a, "--no-memory")) o->no_memory = 1;
    else if (!strcmp(a, "--no-adapter")) o->no_adapter = 1;
    else if (!strcmp(a, "--no-prefix-cache")) o->ep.prefix_cache = 0;
    else return 0;
    return 1;
}

int hx_cli_ask_parse(int argc, char **argv, cli_ask_opts *o)
{
    const char *verb = argv[0];
    memset(o, 0, sizeof *o);
    o->pp = hx_planner_default_params();
    o->ep = hx_source_engine_default_params();
    o->ep.prefix_cache = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int ok = 1;
        if (flag_opt(o, a)) continue;
        if (takes_value(a)) {
            if (i + 1 >= argc) {
                fprintf(stderr, "hearth %s: %s needs a value\n", verb, a);
                return HX_EXIT_USAGE;
            }
            value_opt(o, verb, a, argv[++i], &ok);
            if (!ok) return HX_EXIT_USAGE;
        } else if (a[0] == '-' && a[1]) {
            return hx_cli_bad_word(verb, "option", a);
        } else if (!strcmp(verb, "ask") && !o->text) {
            o->text = a;
        } else {
            fprintf(stderr, "hearth %s: unexpected argument '%s'\n", verb, a);
            return HX_EXIT_USAGE;
        }
    }
    if (!strcmp(verb, "ask") && (!o->text || !*o->text)) {
        fprintf(stderr, "hearth ask: what should I do? usage: hearth ask TEXT\n");
        return HX_EXIT_USAGE;
    }
    if (o->yes && o->no) {
        fprintf(stderr, "hearth %s: --yes and --no contradict each other\n", verb);
        return HX_EXIT_USAGE;
    }
    o->pp.tool_choice = !o->choice || !strcmp(o->choice, "auto") ? HX_CHOICE_AUTO
                        : !strcmp(o->choice, "required")         ? HX_CHOICE_REQUIRED
                        : !strcmp(o->choice, "none")             ? HX_CHOICE_NONE : -1;
    if (o->pp.tool_choice < 0) {
        fprintf(stderr, "hearth %s: --tool-choice is auto, required or none\n", verb);
        return HX_EXIT_USAGE;
    }
    if (o->answer && strcmp(o->answer, "model") && strcmp(o->answer, "results") &&
        strcmp(o->answer, "auto")) {
        fprintf(stderr, "hearth %s: --answer is model, results or auto\n", verb);
        return HX_EXIT_USAGE;
    }
    if (o->style && hx_tpl_parse_name(o->style) < 0) {
        fprintf(stderr, "hearth %s: --style is qwen3, chatml, llama3, compact or brief\n", verb);
        return HX_EXIT_USAGE;
    }
    return HX_EXIT_OK;
}

/* Who writes the answers (HX_ANSWER_*) of model m in prompt style family:
 * --answer's choice, or (auto) the model's kind (hx_agent_answer_for). */
static int answer_kind(const cli_ask_opts *o, int family, const hx_model *m)
{
    if (o->answer && !strcmp(o->answer, "model")) return HX_ANSWER_MODEL;
    if (o->answer && !strcmp(o->answer, "results")) return HX_ANSWER_RESULTS;
    return hx_agent_answer_for(family, m);
}

/* ---- the session: everything a run needs, opened once ---- */
void hx_cli_session_close(cli_session *s)
{
    hx_planner_free(s->pl);
    hx_source_free(&s->src);
    hx_cli_loop_save(s->loop);
    hx_loop_free(s->loop);
    for (int i = 0; i < s->n_ads; i++) hx_adapter_free(s->ads[i]);
    hx_model_free(s->model);
    free(s->specs);
    free(s->consent);
    hx_agent_policy_close(s->policy, s->audit);
    hx_memory_close(s->mem);
    hx_tools_free(s->reg);
    hx_extools_free(s->x);
    hx_config_free(s->cfg);
}

/* The configuration's first problem (hx_config_check) as the error, with
 * a pointer to `hearth doctor` when there are more. */
static int config_ready(const hx_config *cfg, hx_err *err)
{
    hx_buf b;
    hx_buf_init(&b);
    int n = hx_config_check(cfg, &b), rc = HX_OK;
    if (n) {
        size_t first = strcspn(b.data ? b.data : "", "\n");
        rc = hx_err_set(err, HX_ERR_NOTFOUND, "%.*s%s", (int)first, b.data ? b.data : "",
                        n > 1 ? " (and more: hearth doctor lists them)" : "");
    }
    hx_buf_free(&b);
    return rc;
}

static int open_tools(cli_session *s, const cli_ask_opts *o, hx_err *err)
{
    int rc = hx_config_load(o->config, &s->cfg, err);
    if (!rc) rc = config_ready(s->cfg, err);
    if (rc) return rc;
    if (!(s->reg = hx_tools_new(s->cfg))) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    if ((rc = hx_tools_register_builtins(s->reg, err))) return rc;
    if (!o->no_memory) {
        hx_memory_params mp = hx_memory_default_params();
        if ((rc = hx_memory_open(&mp, &s->mem, err))) {
            char why[sizeof err->msg];
            snprintf(why, sizeof why, "%s", err->msg); /* not formatted into itself */
            return hx_err_set(err, rc, "%s; --no-memory runs without it (move the file "
                              "away to start a new one; hearth doctor checks it)", why);
        }
        if ((rc = hx_agent_register_memory_tools(s->reg, s->mem, err))) return rc;
    }
    hx_buf problems;
    hx_buf_init(&problems);
    rc = hx_extools_load(s->reg, NULL, &s->x, &problems, err);
    if (problems.len) {
        fputs("hearth: registered tools skipped:\n", stderr);
        hx_term_fputs(stderr, problems.data, 1);
    }
    hx_buf_free(&problems);
    if (rc) return rc;
    rc = hx_agent_policy_open(cJSON_GetObjectItem(s->cfg->raw, "policy"), "", &s->policy, &s->audit, err);
    if (rc) return rc;
    int tty = isatty(0) && isatty(2) && !o->json;
    s->consent = hx_consent_new(o->yes, o->no, o->allow_tainted, tty ? hx_cli_ask_consent : NULL, NULL);
    return s->consent ? HX_OK : hx_err_set(err, HX_ERR_NOMEM, "out of memory");
}

/* Threads and context under the governor's decision d (battery, heat:
 * engine/governor.h). */
static void govern(cli_session *s, const hx_gov_decision *d, hx_source_engine_params *ep)
{
    int train = hx_model_hparams(s->model)->n_ctx_train;
    ep->n_threads = hx_gov_threads(d, ep->n_threads);
    ep->n_ctx = hx_gov_cap_ctx(d, ep->n_ctx, train < 4096 ? train : 4096);
    if (d->level != HX_GOV_NORMAL)
        fprintf(stderr, "hearth: %s: %d threads, context %d\n", d->why, ep->n_threads,
                ep->n_ctx);
}

/* --adapter's adapters (not for the governor's small model: they were
 * named for the other), else the active set when it fits the model. */
static int load_adapters(cli_session *s, const cli_ask_opts *o, int small,
                         hx_source_engine_params *ep, hx_err *err)
{
    int n_given = small ? 0 : o->n_adapters;
    if (n_given < o->n_adapters)
        fprintf(stderr, "hearth: governor: --adapter left out with the small model\n");
    int rc = hx_cli_load_adapters(s->model, o->adapters, n_given, !o->no_adapter, s->ads,
                               s->ascale, &s->n_ads, err);
    ep->adapters = s->ads;
    ep->adapter_scales = s->ascale;
    ep->n_adapters = s->n_ads;
    return rc;
}

/* The decision the model is chosen by: the governor's; with the loop's
 * latency level at the small model, or with config governor.small_tier a
 * request whose tools cut to reading ones (*tier HX_TIER_SMALL, the cut in
 * s->tool_cut), one that sends it to governor.small_model as the critical
 * level would. */
static hx_gov_decision model_decision(cli_session *s, const cli_ask_opts *o,
                                      const hx_gov_decision *gd, const hx_loop_choice *ch,
                                      int *tier)
{
    hx_gov_decision d = *gd;
    const cJSON *gov = cJSON_GetObjectItem(s->cfg->raw, "governor");
    *tier = HX_TIER_FULL;
    if (ch->latency_level >= 2) {
        d.level = HX_GOV_CRITICAL; /* at or above any governor.small_model_level */
        snprintf(d.why, sizeof d.why, "turns over the latency targets");
    }
    if (!o->text || o->tools || !cJSON_IsTrue(cJSON_GetObjectItem(gov, "small_tier"))) return d;
    *tier = hx_agent_request_tier(s->reg, o->text, s->tool_cut, sizeof s->tool_cut);
    if (*tier == HX_TIER_SMALL) {
        d.level = HX_GOV_CRITICAL;
        snprintf(d.why, sizeof d.why, "a plain read (governor.small_tier)");
    }
    return d;
}

/* The tools offered: --tools, else the request's cut for the small tier
 * or when the loop trims the prompt (a prompt that fits the critical
 * context), else all. */
static void choose_tools(cli_session *s, const cli_ask_opts *o, const hx_loop_choice *ch,
                         int tier, const char *why)
{
    s->tools = o->tools;
    s->small_tier = tier == HX_TIER_SMALL;
    s->tools_fixed = o->tools || s->small_tier;
    if (o->tools || !o->text) return;
    if (tier != HX_TIER_SMALL &&
        !(ch->trim_prompt &&
          hx_agent_tools_for_request(s->reg, o->text, s->tool_cut, sizeof s->tool_cut) > 0))
        return;
    s->tools = s->tool_cut;
    fprintf(stderr, "hearth: governor: %s: offering only %s\n", why, s->tool_cut);
}

/* The loop's opening choice (all 0 without a loop); its decisions so far
 * count as seen (govern() says the opening one). */
static hx_loop_choice open_loop(cli_session *s)
{
    hx_loop_choice ch = {0};
    s->loop = hx_cli_loop_new(cJSON_GetObjectItem(s->cfg->raw, "governor"));
    if (!s->loop) return ch;
    hx_loop_get(s->loop, &ch);
    int n;
    const hx_loop_event *ev = hx_loop_events(s->loop, &n);
    s->loop_seen = n ? ev[n - 1].seq : 0;
    return ch;
}

static int start_source(cli_session *s, const cli_ask_opts *o, const hx_gov_decision *gd,
                        const hx_loop_choice *ch, int small, int *family, hx_err *err);

static int open_model(cli_session *s, const cli_ask_opts *o, int *family, hx_err *err)
{
    char buf[PATH_MAX + 64];
    hx_gov_decision gd;
    int tier;
    hx_cli_governor(cJSON_GetObjectItem(s->cfg->raw, "governor"), &gd, NULL);
    hx_loop_choice ch = open_loop(s);
    const char *chosen = hx_cli_find_model(o->model, s->cfg, buf, sizeof buf);
    hx_gov_decision md = model_decision(s, o, &gd, &ch, &tier);
    const char *path = hx_cli_gov_model(s->cfg, &md, chosen);
    if (!path)
        return hx_err_set(err, HX_ERR_NOTFOUND, "%s", CLI_NO_MODEL);
    hx_model_params mp = hx_model_default_params();
    int rc = hx_model_load(path, &mp, &s->model, err);
    if (rc) return rc;
    const char *slash = strrchr(path, '/');
    snprintf(s->model_name, sizeof s->model_name, "%s", slash ? slash + 1 : path);
    snprintf(s->full_path, sizeof s->full_path, "%s", chosen ? chosen : "");
    s->small_chosen = path != chosen;
    choose_tools(s, o, &ch, tier, tier == HX_TIER_SMALL ? md.why : gd.why);
    int k = hx_agent_tool_specs(s->reg, s->tools, stderr, &s->specs);
    if (k < 0) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    if (!k) return hx_err_set(err, HX_ERR_INVALID, "--tools %s offers no tool", o->tools);
    s->n_specs = k;
    hx_cli_lower_priority(cJSON_GetObjectItem(s->cfg->raw, "governor"));
    return start_source(s, o, &gd, &ch, path != chosen, family, err);
}

/* The source of s->model for s->specs under the governor's decision gd
 * and the loop's choice ch: the prompt style (*family), threads, context
 * and KV type, the adapters (none of --adapter's with the small model),
 * into s->src, s->ep and s->ads. */
static int start_source(cli_session *s, const cli_ask_opts *o, const hx_gov_decision *gd,
                        const hx_loop_choice *ch, int small, int *family, hx_err *err)
{
    *family = o->style ? hx_tpl_parse_name(o->style)
                       : hx_tpl_detect(hx_model_gguf(s->model), hx_model_vocab(s->model));
    hx_source_engine_params ep = o->ep;
    hx_source_engine_style(&ep, *family, s->model);
    if (o->n_ctx) ep.n_ctx = o->n_ctx;
    ep.n_threads = o->n_threads;
    const int asked_ctx = ep.n_ctx, asked_q8 = ep.kv_q8;
    govern(s, gd, &ep);
    /* Q8_0 rows need heads of whole 32-value blocks; others keep F16 */
    if (ch->kv_q8 && hx_model_hparams(s->model)->head_dim % 32 == 0) ep.kv_q8 = 1;
    int arc = load_adapters(s, o, small, &ep, err);
    if (arc) return arc;
    s->ep = ep;
    if (s->loop) { /* the session's own source only: it applies the loop's
                      cap and KV type itself, turn by turn */
        ep.loop = s->loop;
        ep.n_ctx = asked_ctx;
        ep.kv_q8 = asked_q8;
    }
    return hx_source_engine_new(s->model, s->specs, s->n_specs, &ep, &s->src, err);
}

/* The loop's latest decision (NULL: none kept). */
static const hx_loop_event *last_event(cli_session *s)
{
    int n;
    const hx_loop_event *ev = hx_loop_events(s->loop, &n);
    return n ? &ev[n - 1] : NULL;
}

/* Offers s->tools (the planner's list and the source's grammar) from the
 * next request on. */
static int offer_tools(cli_session *s, hx_err *err)
{
    hx_tool_spec *specs = NULL;
    int k = hx_agent_tool_specs(s->reg, s->tools, stderr, &specs);
    hx_engine_turn t = {s->ep.sp, specs, k > 0 ? k : 0, NULL, s->ep.copy_bias};
    int rc = k < 0 ? hx_err_set(err, HX_ERR_NOMEM, "out of memory")
                   : hx_source_engine_configure(&s->src, &t, err);
    if (!rc && hx_planner_set_tools(s->pl, s->tools))
        rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    free(rc ? specs : s->specs);
    if (!rc) s->specs = specs, s->n_specs = k;
    return rc;
}

/* The model the loop's choice ch asks for, between requests: the small
 * one while it chooses it, else the one asked for. The new model's
 * source takes the old one's place under the planner, which keeps the
 * conversation and writes it in the new model's prompt style; a model
 * that cannot be loaded or started keeps the old one (said). */
static void follow_model(cli_session *s, const hx_loop_choice *ch, const char *why)
{
    const char *small = s->cfg->small_model;
    const int want = ch->small_model && small && *small && strcmp(small, s->full_path);
    if (want == s->small_chosen || !s->full_path[0] || !s->opts) return;
    s->small_chosen = want; /* tried once per change */
    const char *path = want ? small : s->full_path;
    hx_model_params mp = hx_model_default_params();
    hx_err e = {0};
    hx_model *m = NULL;
    int family, rc = hx_model_load(path, &mp, &m, &e);
    cli_session old = *s;
    if (!rc) {
        s->model = m;
        memset(&s->src, 0, sizeof s->src);
        s->n_ads = 0;
        hx_gov_decision gd = {.level = ch->level, .n_threads = ch->n_threads,
                              .ctx_cap = ch->ctx_cap};
        snprintf(gd.why, sizeof gd.why, "%s", why);
        rc = start_source(s, s->opts, &gd, ch, want, &family, &e);
        cli_session *gone = rc ? s : &old; /* the new parts when they failed */
        hx_source_free(&gone->src);
        for (int i = 0; i < gone->n_ads; i++) hx_adapter_free(gone->ads[i]);
        hx_model_free(gone->model);
    }
    if (rc) {
        fprintf(stderr, "hearth: governor: %s: %s cannot be used (%s); keeping %s\n", why, path,
                e.msg, s->model_name);
        s->model = old.model, s->src = old.src, s->ep = old.ep, s->n_ads = old.n_ads;
        memcpy(s->ads, old.ads, sizeof s->ads);
        memcpy(s->ascale, old.ascale, sizeof s->ascale);
        return;
    }
    const char *slash = strrchr(path, '/');
    snprintf(s->model_name, sizeof s->model_name, "%s", slash ? slash + 1 : path);
    hx_planner_set_family(s->pl, family);
    hx_planner_set_answer(s->pl, answer_kind(s->opts, family, m));
    fprintf(stderr, "hearth: governor: %s: now %s%s\n", why, path,
            want ? " (config governor.small_model)" : "");
}

int hx_cli_session_request(cli_session *s, const char *text, hx_err *err)
{
    if (!s->loop) return HX_OK;
    hx_loop_poll(s->loop);
    const hx_loop_event *last = last_event(s);
    s->turn_from = last ? last->seq : 0;
    if (s->no_model) return HX_OK;
    hx_loop_choice ch;
    hx_loop_get(s->loop, &ch);
    if (!s->small_tier) follow_model(s, &ch, last ? last->why : "governor");
    if (s->tools_fixed) return HX_OK;
    char cut[sizeof s->tool_cut];
    const int trim = ch.trim_prompt &&
                     hx_agent_tools_for_request(s->reg, text, cut, sizeof cut) > 0;
    if (trim ? s->tools && !strcmp(s->tools, cut) : !s->tools) return HX_OK;
    if (trim) memcpy(s->tool_cut, cut, sizeof cut);
    s->tools = trim ? s->tool_cut : NULL;
    const char *why = last ? last->why : "governor";
    if (trim) fprintf(stderr, "hearth: governor: %s: offering only %s\n", why, cut);
    else fprintf(stderr, "hearth: governor: %s: offering every tool\n", why);
    return offer_tools(s, err);
}

int hx_cli_session_prepare(cli_session *s)
{
    if (s->no_model) return 0;
    if (s->loop && !s->tools_fixed) {
        hx_loop_choice ch;
        hx_loop_get(s->loop, &ch);
        if (ch.trim_prompt) return 0; /* the request picks the tools */
    }
    hx_err err = {0};
    if (hx_planner_prepare(s->pl, &err)) {
        hx_log_debug("session: nothing prepared: %s", err.msg);
        return 0;
    }
    return 1;
}

void hx_cli_session_record(cli_session *s, int64_t episode)
{
    if (!s->loop || !s->mem || episode <= 0) return;
    cJSON *arr = hx_cli_loop_since(s->loop, s->turn_from);
    char *text = cJSON_GetArraySize(arr) ? cJSON_PrintUnformatted(arr) : NULL;
    hx_err err = {0};
    if (text && hx_memory_episode_set_governor(s->mem, episode, text, &err))
        hx_log_warn("memory: the governor's decisions were not recorded: %s", err.msg);
    cJSON_free(text);
    cJSON_Delete(arr);
}

int hx_cli_session_tool_tier(const cli_session *s, const char *text, const char **tool,
                             cJSON **args)
{
    *args = NULL;
    const cJSON *gov = cJSON_GetObjectItem(s->cfg->raw, "governor");
    if (!cJSON_IsTrue(cJSON_GetObjectItem(gov, "tool_tier")) ||
        !hx_agent_tool_tier(s->reg, text, tool, args))
        return 0;
    if (hx_agent_tool_offered(s->tools, *tool)) return 1;
    cJSON_Delete(*args); /* --tools leaves it out: the model's */
    *args = NULL;
    return 0;
}

int hx_cli_session_open(cli_session *s, const cli_ask_opts *o, hx_err *err)
{
    memset(s, 0, sizeof *s);
    s->opts = o;
    int rc = hx_sandbox_confine_self_no_network(err);
    if (rc) return rc;
    if (hx_sandbox_mechanism_disabled("seccomp")) /* never silently: the user's privacy rests on it */
        fprintf(stderr, "hearth: warning: HEARTH_SANDBOX_DISABLE=seccomp: this process is not "
                        "confined from the network\n");
    hx_planner_params pp = o->pp;
    if ((rc = open_tools(s, o, err))) return rc;
    const char *tool;
    cJSON *args = NULL;
    s->tools = o->tools;
    if (o->text && hx_cli_session_tool_tier(s, o->text, &tool, &args)) {
        s->no_model = 1; /* the one request needs none: none is loaded */
        open_loop(s);
    } else if ((rc = open_model(s, o, &pp.family, err))) {
        return rc;
    }
    cJSON_Delete(args);
    pp.model = s->model_name;
    pp.tools = s->tools;
    pp.answer = answer_kind(o, pp.family, s->model);
    if (o->no_memory) pp.recall_budget = 0;
    s->pp = pp;
    hx_planner_deps d = {&s->src, s->reg, s->x, s->policy, s->audit, s->mem, s->consent};
    s->pl = hx_planner_new(&d, &pp);
    if (!s->pl) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    hx_log_debug("ask: model %s, prompt style %s", s->model_name, hx_tpl_name(pp.family));
    return HX_OK;
}
