/* cmd_ask.c: the assistant's verbs: `hearth ask TEXT` (one request),
 * `hearth chat` (a session with history) and `hearth feedback`. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent.h"
#include "cli/cli.h"

typedef struct ask_opts {
    const char *model, *config, *style, *choice, *tools;
    int yes, no, allow_tainted, json, n_ctx, n_threads, no_memory;
    const char *adapters[HX_ADAPTER_MAX]; /* --adapter FILE[:SCALE] */
    int n_adapters, no_adapter;
    hx_planner_params pp;
    hx_source_engine_params ep;
    const char *text; /* ask: the request */
} ask_opts;

static void ask_usage(FILE *f, const char *verb)
{
    if (!strcmp(verb, "chat"))
        fprintf(f, "usage: hearth chat [options]\n\n"
                   "A session with history: type a request per line. Commands: /tools\n"
                   "(the tools), /memory (what is remembered), /undo (forget the last\n"
                   "exchange), /quit.\n\n");
    else
        fprintf(f, "usage: hearth ask TEXT [options]\n\n"
                   "Plans with the local model, calls tools (each shown as\n"
                   "'-> name {arguments}' with its result status on stderr) and streams\n"
                   "the answer to stdout. The run is recorded in memory as an episode\n"
                   "(see 'hearth feedback').\n\n");
    fprintf(f,
        "  -m, --model FILE        GGUF model (default: the config's \"model\", then\n"
        "                          " CLI_DEFAULT_MODEL ")\n"
        "                          (on low battery or heat the governor may load\n"
        "                          the config's governor.small_model instead)\n"
        "      --config FILE       config.json (default: the standard location)\n"
        "  -y, --yes               answer yes where the policy asks (not for sends\n"
        "                          after untrusted content: see below)\n"
        "      --no                answer no to every question\n"
        "      --allow-tainted-send  allow sends (and memories kept) after\n"
        "                          untrusted content entered the conversation: a\n"
        "                          mail, an invitation, a file or its name, a tool's\n"
        "                          output or error, a memory that is not yours\n"
        "      --json              print the whole trace as JSON (no streaming)\n"
        "      --max-steps N       model turns per request (default 8)\n"
        "      --max-tokens N      generated tokens per request (default 1024)\n"
        "      --timeout S         wall-clock seconds per request (default 300)\n"
        "      --temp T            sampling temperature; 0 = greedy (default 0)\n"
        "      --seed S            sampling seed\n"
        "      --copy-bias B       logit bonus for call arguments copied from the\n"
        "                          conversation; 0 = none (default 6 in the\n"
        "                          compact and brief styles of small models,\n"
        "                          else 0)\n"
        "      --tool-choice C     auto (default), required (the first turn must\n"
        "                          call a tool) or none\n"
        "      --tools LIST        offer only these tools: names or prefix.*,\n"
        "                          comma-separated (default: all)\n"
        "      --style S           prompt style: qwen3, chatml, llama3, compact,\n"
        "                          brief\n"
        "                          (default: from the model)\n"
        "  -c, --ctx N             context size (default min(trained, 4096))\n"
        "  -t, --threads N         0 = all cores (default)\n"
        "      --adapter FILE[:SCALE]  apply this LoRA adapter (repeatable)\n"
        "                          instead of the active ones (hearth lora)\n"
        "      --no-adapter        apply no adapter\n"
        "      --no-memory         neither recall nor record\n"
        "      --max-memory SIZE   bound on weights (mapped) + KV cache + scratch,\n"
        "                          e.g. 2G; beyond it the oldest KV pages go to a\n"
        "                          file in $XDG_CACHE_HOME/hearth/spill and are read\n"
        "                          back, so the conversation keeps its history up to\n"
        "                          the context size; past that (or when no spill file\n"
        "                          can be written) the oldest exchanges are dropped\n"
        "      --kv q8             8-bit KV cache (half the memory of f16)\n"
        "      --no-prefix-cache   do not keep the system prompt's and tool list's\n"
        "                          KV cache on disk ($XDG_CACHE_HOME/hearth/prefix)\n\n"
        "Hearth confines itself before it starts: it can open no network socket.\n"
        "After the answer, on stderr, from what the tools returned and not from\n"
        "the model's words: 'read:' lines (the events, messages and file lines\n"
        "the answer names) and one line for each write or send: what it did\n"
        "('added: ...', 'queued: ...'), or that it did not happen, and why.\n"
        "Facts in the answer are copies of what the request and the tools said.\n"
        "Exit codes: 0 answered, 1 failed (a call that did not\n"
        "get done, or a limit reached), 2 bad command line, 3 bad input (no model\n"
        "file, a configuration that is missing or names folders that are not\n"
        "there: hearth doctor), 4 a write or send was refused, 130 interrupted.\n");
}

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

static void set_num(ask_opts *o, int which, double d)
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
static int num_opt(ask_opts *o, const char *verb, const char *a, const char *v, int *ok)
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
static int value_opt(ask_opts *o, const char *verb, const char *a, const char *v, int *ok)
{
    if (!strcmp(a, "-m") || !strcmp(a, "--model")) o->model = v;
    else if (!strcmp(a, "--config")) o->config = v;
    else if (!strcmp(a, "--style")) o->style = v;
    else if (!strcmp(a, "--tool-choice")) o->choice = v;
    else if (!strcmp(a, "--tools")) o->tools = v;
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
                                        "--tool-choice", "--tools", "--adapter",
                                        "--max-memory", "--kv"};
    for (size_t k = 0; k < sizeof names / sizeof *names; k++)
        if (!strcmp(a, names[k])) return 1;
    for (size_t k = 0; k < sizeof num_specs / sizeof *num_specs; k++)
        if (!strcmp(a, num_specs[k].name) || (num_specs[k].alt && !strcmp(a, num_specs[k].alt)))
            return 1;
    return 0;
}

static int flag_opt(ask_opts *o, const char *a)
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

static int parse_ask(int argc, char **argv, ask_opts *o)
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
    if (o->style && hx_tpl_parse_name(o->style) < 0) {
        fprintf(stderr, "hearth %s: --style is qwen3, chatml, llama3, compact or brief\n", verb);
        return HX_EXIT_USAGE;
    }
    return HX_EXIT_OK;
}

/* ---- the session: everything a run needs, opened once ---- */
typedef struct session {
    hx_config *cfg;
    hx_tools *reg;
    hx_extools *x;
    hx_memory *mem;
    struct hx_policy *policy;
    struct hx_audit *audit;
    struct hx_consent *consent;
    hx_model *model;
    hx_source src;
    hx_planner *pl;
    hx_tool_spec *specs;
    char model_name[256];
    hx_adapter *ads[HX_ADAPTER_MAX]; /* attached to the source's context */
    float ascale[HX_ADAPTER_MAX];
    int n_ads;
} session;

static void session_close(session *s)
{
    hx_planner_free(s->pl);
    hx_source_free(&s->src);
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

static int fail(hx_err *err, const char *what)
{
    fprintf(stderr, "hearth: %s%s", what ? what : "", what ? ": " : "");
    hx_term_fputs(stderr, err->msg, 0); /* may quote a tool or server */
    fputc('\n', stderr);
    return hx_cli_exit_code(err->rc ? err->rc : HX_ERR_INTERNAL);
}

int hx_cli_ask_consent(void *user, const char *tool, const char *args, const char *why)
{
    (void)user;
    FILE *tty = fopen("/dev/tty", "r+");
    if (!tty) return 'n';
    /* the arguments may carry a mail's words: shown, never obeyed */
    fputs("\nhearth wants to run ", tty);
    hx_term_fputs(tty, tool, 0);
    fputc(' ', tty);
    hx_term_fputs(tty, args, 0);
    fprintf(tty, "\n  (%s)\nallow? [y]es / [n]o / [a]lways: ", why);
    fflush(tty);
    char line[32] = "";
    if (!fgets(line, sizeof line, tty)) line[0] = 'n';
    fclose(tty);
    return line[0] == 'y' || line[0] == 'Y' ? 'y' : line[0] == 'a' || line[0] == 'A' ? 'a' : 'n';
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

static int open_tools(session *s, const ask_opts *o, hx_err *err)
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
    rc = hx_agent_policy_open(cJSON_GetObjectItem(s->cfg->raw, "policy"), "", &s->policy,
                              &s->audit, err);
    if (rc) return rc;
    int tty = isatty(0) && isatty(2) && !o->json;
    s->consent = hx_consent_new(o->yes, o->no, o->allow_tainted, tty ? hx_cli_ask_consent : NULL, NULL);
    return s->consent ? HX_OK : hx_err_set(err, HX_ERR_NOMEM, "out of memory");
}

static int cancelled(void *user);

/* Threads and context under the governor's decision d (battery, heat:
 * engine/governor.h). */
static void govern(session *s, const hx_gov_decision *d, hx_source_engine_params *ep)
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
static int load_adapters(session *s, const ask_opts *o, int small,
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

static int open_model(session *s, const ask_opts *o, int *family, hx_err *err)
{
    char buf[PATH_MAX + 64];
    hx_gov_decision gd;
    hx_cli_governor(cJSON_GetObjectItem(s->cfg->raw, "governor"), &gd, NULL);
    const char *chosen = hx_cli_find_model(o->model, s->cfg, buf, sizeof buf);
    const char *path = hx_cli_gov_model(s->cfg, &gd, chosen);
    if (!path)
        return hx_err_set(err, HX_ERR_NOTFOUND, "%s", CLI_NO_MODEL);
    hx_model_params mp = hx_model_default_params();
    int rc = hx_model_load(path, &mp, &s->model, err);
    if (rc) return rc;
    const char *slash = strrchr(path, '/');
    snprintf(s->model_name, sizeof s->model_name, "%s", slash ? slash + 1 : path);
    int k = hx_agent_tool_specs(s->reg, o->tools, stderr, &s->specs);
    if (k < 0) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    if (!k) return hx_err_set(err, HX_ERR_INVALID, "--tools %s offers no tool", o->tools);
    *family = o->style ? hx_tpl_parse_name(o->style)
                       : hx_tpl_detect(hx_model_gguf(s->model), hx_model_vocab(s->model));
    hx_source_engine_params ep = o->ep;
    hx_source_engine_style(&ep, *family, s->model);
    if (o->n_ctx) ep.n_ctx = o->n_ctx;
    ep.n_threads = o->n_threads;
    govern(s, &gd, &ep);
    ep.cancelled = cancelled; /* Ctrl-C during a long prefill */
    int arc = load_adapters(s, o, path != chosen, &ep, err);
    if (arc) return arc;
    return hx_source_engine_new(s->model, s->specs, k, &ep, &s->src, err);
}

static int session_open(session *s, const ask_opts *o, hx_err *err)
{
    memset(s, 0, sizeof *s);
    int rc = hx_sandbox_confine_self_no_network(err);
    if (rc) return rc;
    if (hx_sandbox_mechanism_disabled("seccomp")) /* never silently: the user's privacy rests on it */
        fprintf(stderr, "hearth: warning: HEARTH_SANDBOX_DISABLE=seccomp: this process is not "
                        "confined from the network\n");
    hx_planner_params pp = o->pp;
    if ((rc = open_tools(s, o, err)) || (rc = open_model(s, o, &pp.family, err))) return rc;
    pp.model = s->model_name;
    pp.tools = o->tools;
    if (o->no_memory) pp.recall_budget = 0;
    hx_planner_deps d = {&s->src, s->reg, s->x, s->policy, s->audit, s->mem, s->consent};
    s->pl = hx_planner_new(&d, &pp);
    if (!s->pl) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    hx_log_debug("ask: model %s, prompt style %s", s->model_name, hx_tpl_name(pp.family));
    return HX_OK;
}

/* ---- Ctrl-C: the first stops generation, the second kills ---- */
static volatile sig_atomic_t g_sigint;
static void on_sigint(int sig)
{
    (void)sig;
    g_sigint = 1;
}
static void catch_sigint(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_RESETHAND; /* the second Ctrl-C gets the default */
    sigaction(SIGINT, &sa, NULL);
    g_sigint = 0;
}
static int cancelled(void *user)
{
    (void)user;
    return g_sigint;
}

/* ---- what the user sees ---- */
/* What the model writes and what the tools say may quote a mail or a
 * tool's output: every piece is escaped (hx_term_escape) before it
 * reaches the terminal. */
static void show_text(void *user, const char *s, size_t n)
{
    (void)user;
    hx_buf b;
    hx_buf_init(&b);
    hx_term_escape(&b, s, n, 1);
    if (b.data) fputs(b.data, stdout);
    hx_buf_free(&b);
    fflush(stdout);
}
void hx_cli_show_call(FILE *f, const char *name, const char *args)
{
    fputs("-> ", f);
    hx_term_fputs(f, name, 0);
    fputc(' ', f);
    hx_term_fputs(f, args, 0);
    fputc('\n', f);
}

void hx_cli_show_result(FILE *f, const char *status, const char *detail)
{
    if (!strcmp(status, "ok")) {
        fprintf(f, "   ok (%zu bytes of result)\n", strlen(detail));
        return;
    }
    hx_buf b;
    hx_buf_init(&b);
    hx_term_escape(&b, detail, strnlen(detail, 300), 0);
    fprintf(f, "   %s: %s\n", status, b.data ? b.data : "");
    hx_buf_free(&b);
}

static void show_call(void *user, const char *name, const char *args)
{
    (void)user;
    fflush(stdout);
    hx_cli_show_call(stderr, name, args);
}
static void show_result(void *user, const char *name, const char *status, const char *detail)
{
    (void)user;
    (void)name;
    hx_cli_show_result(stderr, status, detail);
}

static void remember_last(int64_t id)
{
    char dir[4096], path[4200], txt[32];
    if (id <= 0 || hx_path_data(dir, sizeof dir) < 0) return;
    snprintf(path, sizeof path, "%s/last-episode", dir);
    int n = snprintf(txt, sizeof txt, "%lld\n", (long long)id);
    hx_err err = {0};
    if (!hx_mkdirs(dir, &err)) hx_write_file_atomic(path, txt, (size_t)n, &err);
}

/* Why the policy's refusal stopped a call, and what would let it run,
 * from the trace's "by" (who decided: sandbox/policy.c). */
static const char *refusal_reason(const char *by)
{
    if (!strcmp(by, "no terminal"))
        return "needs your consent and there is no terminal to ask; rerun in a terminal or "
               "with --yes";
    if (!strcmp(by, "taint rule (no terminal to ask)"))
        return "needs your consent (untrusted content, a mail, a file or a tool's output, "
               "is in this conversation) and there is no terminal to ask; rerun in a "
               "terminal, or with --allow-tainted-send if you trust that content";
    if (!strcmp(by, "--no")) return "was refused by --no";
    if (!strcmp(by, "policy")) return "is denied by your policy (\"policy\" in config.json)";
    if (!strcmp(by, "user")) return "was declined by you";
    return "was refused";
}

/* One line on stderr for a write or send that did not happen (an item of
 * the trace's "done"); the result code it stands for: HX_ERR_DENIED
 * (refused), HX_ERR_IO (failed). */
static int say_undone(const cJSON *d)
{
    const char *st = cJSON_GetStringValue(cJSON_GetObjectItem(d, "status"));
    const char *e = cJSON_GetStringValue(cJSON_GetObjectItem(d, "error"));
    char *args = cJSON_PrintUnformatted(cJSON_GetObjectItem(d, "arguments"));
    fprintf(stderr, "hearth: %s: %s %.200s ", cJSON_GetStringValue(cJSON_GetObjectItem(d, "action")),
            cJSON_GetStringValue(cJSON_GetObjectItem(d, "tool")), args ? args : "");
    free(args);
    if (!strcmp(st, "refused")) {
        fprintf(stderr, "%s\n", refusal_reason(cJSON_GetStringValue(cJSON_GetObjectItem(d, "by"))));
        return HX_ERR_DENIED;
    }
    fprintf(stderr, "failed: %.300s\n", e ? e : st);
    return HX_ERR_IO;
}

/* After the answer, from the trace and not from the model's words: what
 * the answer rests on (the items of the results it names, or the first
 * few when it names none), then a line for each write or send: what it
 * did ("added: ...", "queued: ..."), or that it did not happen and why;
 * with json (the trace printed holds the rest) only the last. Tools'
 * words are escaped. HX_ERR_DENIED when one was refused, else HX_ERR_IO
 * when one failed, else HX_OK. */
#define READ_SHOWN 5
static int report_trace(const cJSON *trace, int json)
{
    const cJSON *read = cJSON_GetObjectItem(trace, "read"), *it;
    int cited = 0, shown = 0, rc = HX_OK;
    cJSON_ArrayForEach(it, read) cited += cJSON_IsTrue(cJSON_GetObjectItem(it, "cited"));
    hx_buf b;
    hx_buf_init(&b);
    const cJSON *shown_list = json ? NULL : read;
    cJSON_ArrayForEach(it, shown_list)
    {
        if (cited ? !cJSON_IsTrue(cJSON_GetObjectItem(it, "cited")) : shown >= READ_SHOWN) continue;
        b.len = 0;
        hx_agent_read_line(it, &b);
        fputs("   read: ", stderr);
        hx_term_fputs(stderr, b.data ? b.data : "", 1);
        fputc('\n', stderr);
        shown++;
    }
    if (!json && !cited && cJSON_GetArraySize(read) > shown)
        fprintf(stderr, "   read: (%d more)\n", cJSON_GetArraySize(read) - shown);
    hx_buf_free(&b);
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(trace, "done"))
    {
        const char *st = cJSON_GetStringValue(cJSON_GetObjectItem(it, "status"));
        if (st && !strcmp(st, "ok")) {
            if (json) continue;
            fprintf(stderr, "hearth: %s: ", cJSON_GetStringValue(cJSON_GetObjectItem(it, "action")));
            hx_term_fputs(stderr, cJSON_GetStringValue(cJSON_GetObjectItem(it, "text")), 0);
            fputc('\n', stderr);
            continue;
        }
        const int r = say_undone(it);
        if (rc != HX_ERR_DENIED) rc = r;
    }
    return rc;
}

static int run_one(session *s, const ask_opts *o, const char *text)
{
    hx_planner_io io = {NULL, show_text, show_call, show_result, cancelled};
    hx_planner_io quiet = {NULL, NULL, NULL, NULL, cancelled};
    cJSON *trace = NULL;
    hx_err err = {0};
    catch_sigint();
    int rc = hx_planner_run(s->pl, text, o->json ? &quiet : &io, &trace, &err);
    signal(SIGINT, SIG_DFL);
    if (trace) remember_last((int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(trace, "episode")));
    if (o->json && trace) {
        char *j = cJSON_Print(trace);
        if (j) printf("%s\n", j);
        cJSON_free(j);
    } else {
        printf("\n");
    }
    fflush(stdout); /* the answer's end before what did not happen */
    if (rc) {
        fputs("hearth: ", stderr);
        hx_term_fputs(stderr, err.msg, 0);
        fputc('\n', stderr);
    }
    int undone = trace ? report_trace(trace, o->json) : HX_OK;
    cJSON_Delete(trace);
    return rc ? rc : undone;
}

/* The start `hearth ask` and `hearth chat` share: help, options, session.
 * Returns -1 with *s open (the caller closes it), else the exit code. */
static int ask_start(int argc, char **argv, const char *verb, ask_opts *o,
                     session *s)
{
    if (hx_cli_wants_help(argc, argv)) {
        ask_usage(stdout, verb);
        return HX_EXIT_OK;
    }
    int ex = parse_ask(argc, argv, o);
    if (ex) return ex;
    hx_err err = {0};
    if (session_open(s, o, &err)) {
        session_close(s);
        return fail(&err, NULL);
    }
    return -1;
}

int hx_cmd_ask(int argc, char **argv)
{
    ask_opts o;
    session s;
    int ex = ask_start(argc, argv, "ask", &o, &s);
    if (ex >= 0) return ex;
    int rc = run_one(&s, &o, o.text);
    session_close(&s);
    return hx_cli_exit_code(rc);
}

/* ---- chat ---- */
static void chat_memory(session *s)
{
    hx_mem_list *l = NULL;
    hx_err err = {0};
    if (!s->mem || hx_memory_list(s->mem, NULL, 20, 0, &l, &err)) {
        printf("(no memory%s%s)\n", err.msg[0] ? ": " : "", err.msg);
        return;
    }
    if (!l->n) printf("(nothing remembered yet)\n");
    for (int i = 0; i < l->n; i++) {
        const hx_mem_item *it = &l->items[i];
        printf("#%lld [", (long long)it->id);
        hx_term_fputs(stdout, it->kind, 0);
        printf("%s%s] ", hx_mem_untrusted(it) ? ", " : "",
               hx_mem_untrusted(it) ? hx_mem_provenance_name(it->provenance) : "");
        hx_term_fputs(stdout, it->text, 0);
        putchar('\n');
    }
    hx_mem_list_free(l);
}

static int chat_command(session *s, const char *line)
{
    if (!strcmp(line, "/quit") || !strcmp(line, "/exit")) return 1;
    if (!strcmp(line, "/tools"))
        hx_cli_print_tools(s->reg, NULL, 0);
    else if (!strcmp(line, "/memory")) chat_memory(s);
    else if (!strcmp(line, "/undo"))
        printf(hx_planner_undo(s->pl) ? "(forgot the last exchange)\n" : "(nothing to undo)\n");
    else printf("commands: /tools /memory /undo /quit\n");
    return 0;
}

int hx_cmd_chat(int argc, char **argv)
{
    ask_opts o;
    session s;
    int ex = ask_start(argc, argv, "chat", &o, &s);
    if (ex >= 0) return ex;
    int rc = 0, tty = isatty(0);
    char line[8192];
    for (;;) {
        if (tty) fputs("> ", stdout), fflush(stdout);
        if (!fgets(line, sizeof line, stdin)) break;
        line[strcspn(line, "\n")] = 0;
        if (!line[0]) continue;
        if (line[0] == '/') {
            if (chat_command(&s, line)) break;
            continue;
        }
        rc = run_one(&s, &o, line);
    }
    session_close(&s);
    return rc == HX_ERR_CANCELLED ? HX_EXIT_CANCEL : HX_EXIT_OK;
}

/* ---- feedback ---- */
static int64_t last_episode(void)
{
    char dir[4096], path[4200], *s = NULL;
    size_t n;
    if (hx_path_data(dir, sizeof dir) < 0) return 0;
    snprintf(path, sizeof path, "%s/last-episode", dir);
    if (hx_read_file(path, 64, &s, &n, NULL)) return 0;
    int64_t id = strtoll(s, NULL, 10);
    free(s);
    return id;
}

static void feedback_usage(FILE *f)
{
    fprintf(f, "usage: hearth feedback [EPISODE] --accept | --correct TEXT | --reject [--json]\n\n"
               "Marks the last episode (or the given one) accepted, corrected with the\n"
               "right answer, or rejected. Accepted and corrected episodes are what the\n"
               "nightly fine-tuning learns from. --json prints {\"episode\", \"verdict\",\n"
               "\"correction\"}.\n");
}

int hx_cmd_feedback(int argc, char **argv)
{
    int verdict = -1;
    const char *corrected = NULL;
    int64_t id = 0;
    if (hx_cli_wants_help(argc, argv)) return feedback_usage(stdout), HX_EXIT_OK;
    int json = 0, n_verdicts = 0;
    for (int i = 1; i < argc; i++) {
        char *end;
        const char *a = argv[i];
        if (!strcmp(a, "--accept")) verdict = HX_VERDICT_ACCEPTED, n_verdicts++;
        else if (!strcmp(a, "--reject")) verdict = HX_VERDICT_REJECTED, n_verdicts++;
        else if (!strcmp(a, "--correct") && i + 1 < argc)
            verdict = HX_VERDICT_CORRECTED, corrected = argv[++i], n_verdicts++;
        else if (!strcmp(a, "--json")) json = 1;
        else if (a[0] != '-' && !id && (id = strtoll(a, &end, 10)) > 0 && !*end) {}
        else if (a[0] == '-' && strcmp(a, "--correct")) return hx_cli_bad_word("feedback", "option", a);
        else return fprintf(stderr, "hearth feedback: %s: %s (see 'hearth feedback --help')\n", a,
                            a[0] == '-' ? "needs the right answer" : "not an episode number"),
                    HX_EXIT_USAGE;
    }
    if (n_verdicts != 1) {
        fprintf(stderr, "hearth feedback: give one of --accept, --correct TEXT, --reject%s\n",
                n_verdicts ? " (not several)" : "");
        return HX_EXIT_USAGE;
    }
    if (!id && !(id = last_episode())) {
        fprintf(stderr, "hearth feedback: no episode yet (run 'hearth ask' first)\n");
        return HX_EXIT_FAIL;
    }
    hx_memory *m = NULL;
    hx_memory_params mp = hx_memory_default_params();
    hx_err err = {0};
    int rc = hx_memory_open(&mp, &m, &err);
    if (!rc) rc = hx_memory_episode_set_verdict(m, id, verdict, corrected, &err);
    hx_memory_close(m);
    if (rc) return fail(&err, "feedback");
    if (!json) return printf("episode %lld: %s\n", (long long)id, hx_verdict_name(verdict)), 0;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "episode", (double)id);
    cJSON_AddStringToObject(o, "verdict", hx_verdict_name(verdict));
    if (corrected) cJSON_AddStringToObject(o, "correction", corrected);
    return hx_cli_json_out(o);
}
