/* source.c: the engine as the planner's token source: tokenizes the prompt,
 * reuses the KV cache's common prefix, samples under the tool-call grammar. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"

typedef struct eng_src {
    hx_model *m;
    const hx_vocab *v;
    hx_ctx *ctx;
    hx_gvocab *gv;
    hx_grammar *g[2];     /* [0] lazy, [1] required; compiled on first use */
    hx_grammar *g_schema; /* HX_CHOICE_SCHEMA's, compiled on first use */
    char *schema;         /* its JSON Schema (owned), or NULL */
    hx_tool_spec *specs;  /* owned copies */
    int n_specs;
    hx_sampler_params sp;
    hx_sampler *s;        /* the current turn's */
    int32_t *cache;       /* tokens whose keys/values are in ctx */
    int n_cache, cap;
    hx_detok dt;
    int ended;
    int compact;
    int line_turn;
    int call_style;       /* HX_CALLS_* */
    int max_calls;        /* per turn */
    hx_spec *spec;        /* batched forced runs and drafts (engine/spec.h) */
    uint32_t *ws;         /* whitespace-only tokens (bitset) */
    uint32_t *ws_long;    /* those longer than MAX_WS_BYTES */
    uint32_t *quote_lead; /* tokens whose first byte is '"' (bitset) */
    int32_t n_ws;
    /* prefill in slices with a cancel check; prefix caches on disk */
    int slice;
    int limit;            /* positions the context holds: n_ctx, or fewer
                             when the memory cap leaves less KV cache */
    int (*cancelled)(void *user);
    void *cancel_user;
    int prefix_cache;
    char *prefix_dir;     /* owned; NULL: the default */
    size_t prefix_max;
    int save_head;        /* the prompt's head a completed prefill leaves to
                             save there when the turn ends; 0: none */
    int64_t gen_tokens;   /* generated, and the seconds it took */
    double gen_seconds;
    int64_t call_tokens;  /* of which in turns that called a tool */
    double call_seconds;
    int64_t turn_tokens;  /* the current turn's */
    double turn_seconds;
    const struct guard *guard; /* the current turn's loop guard (a stage
                                  of s, which owns it), or NULL */
    float copy_bias;      /* hx_copy_stage_new's bonus; 0: no such stage */
    char *copy_text;      /* what arguments are copied from (owned) */
    char *known_addrs;    /* addresses the user knows, one a line (owned) */
    char *request;        /* the user's latest message (owned) */
    /* the closed loop (NULL: none) and the current turn's timing */
    hx_loop *loop;
    double turn_t0;       /* when the turn's prompt began */
    double ttft_ms;       /* its time to first token; < 0 before it */
    int turn_prefilled, turn_reused; /* prompt tokens run, and reused */
    double prefill_s;
    hx_turn_timing timing; /* where the turn's time to first token went */
    int ground;           /* answers are held to the conversation */
    char *ground_text;    /* what their facts are copied from (owned) */
    char *claims;         /* the claim words licensed (owned) */
    hx_arg_check_fn arg_check; /* the tools' argument checks, or NULL */
    void *arg_check_user;
    /* what the loop's choices are applied to: the context as asked for
     * (the loop caps n_ctx and may choose the 8-bit KV cache), the
     * decoder's parameters, the adapters the context carries, and the
     * counters of decoders replaced */
    hx_ctx_params cp;
    hx_spec_params spec_p;
    hx_spec_memo *spec_memo;
    int plain_decode;
    hx_adapter *const *ads;
    const float *ascales;
    int n_ads;
    hx_spec_stats spec_done;
    int cur_kv_q8, cur_draft; /* the context's KV type, the decoder's depth */
    double slice_ms;
    char *refused;        /* failed calls not to write again, or NULL (owned) */
} eng_src;

void hx_source_free(hx_source *s)
{
    if (s && s->free) s->free(s->ctx);
    if (s) s->ctx = NULL;
}

void hx_source_engine_style(hx_source_engine_params *ep, int family, const hx_model *m)
{
    ep->call_style = hx_agent_call_style(family);
    ep->line_turn = hx_tpl_compact(family);
    ep->compact_json = ep->line_turn && !hx_tpl_declared(hx_model_gguf(m));
    if (ep->compact_json && ep->sp.repeat_penalty == 1.0f) ep->sp.repeat_penalty = 1.3f;
    if (ep->compact_json && !ep->n_ctx) ep->n_ctx = 8192;
    if (ep->copy_bias < 0) ep->copy_bias = ep->line_turn ? HX_COPY_BIAS : 0;
}

int hx_agent_answer_for(int family, const hx_model *m)
{
    return m && hx_tpl_compact(family) ? HX_ANSWER_RESULTS : HX_ANSWER_MODEL;
}

hx_source_engine_params hx_source_engine_default_params(void)
{
    hx_source_engine_params p;
    memset(&p, 0, sizeof p);
    p.sp = hx_sampler_default_params();
    p.sp.temp = 0;
    p.copy_bias = -1;
    return p;
}

/* The tool specs and every grammar compiled from them or the schema. The
 * drafts' matcher goes first: a grammar compiled later may take a freed
 * one's address, and would pass for it. */
static void free_grammars(eng_src *e)
{
    if (e->spec) hx_spec_set_grammar(e->spec, NULL, NULL);
    hx_grammar_free(e->g[0]);
    hx_grammar_free(e->g[1]);
    hx_grammar_free(e->g_schema);
    e->g[0] = e->g[1] = e->g_schema = NULL;
    for (int i = 0; i < e->n_specs; i++) {
        free((char *)e->specs[i].name);
        free((char *)e->specs[i].schema_json);
    }
    free(e->specs);
    e->specs = NULL;
    e->n_specs = 0;
    free(e->schema);
    e->schema = NULL;
}

static void save_prefix(eng_src *e);

static void eng_free(void *ctx)
{
    eng_src *e = ctx;
    if (!e) return;
    save_prefix(e);
    hx_sampler_free(e->s);
    free_grammars(e);
    hx_spec_free(e->spec);
    hx_gvocab_free(e->gv);
    hx_ctx_free(e->ctx);
    free(e->cache);
    free(e->ws);
    free(e->ws_long);
    free(e->quote_lead);
    free(e->prefix_dir);
    free(e->copy_text);
    free(e->refused);
    free(e->known_addrs);
    free(e->request);
    free(e->ground_text);
    free(e->claims);
    free(e);
}

static int eng_limit(void *ctx) { return ((const eng_src *)ctx)->limit; }

static int eng_count(void *ctx, const char *text)
{
    eng_src *e = ctx;
    int32_t n = hx_tokenize(e->v, text, strlen(text), NULL, 0, 0, 1);
    return n < 0 && n != INT32_MIN ? -n : (int)(strlen(text) / 4);
}

/* hx_tokenize of the whole prompt, or with marks hx_tokenize_marked. */
static int32_t tokenize_prompt(const hx_vocab *v, const char *prompt, size_t len,
                               const hx_tpl_marks *marks, int add_bos, int32_t *out,
                               int32_t n_max)
{
    return marks ? hx_tokenize_marked(v, prompt, len, marks->s, marks->n, out, n_max, add_bos)
                 : hx_tokenize(v, prompt, len, out, n_max, add_bos, 1);
}

int hx_source_tokenize_marked(const hx_vocab *v, const char *prompt,
                              const hx_tpl_marks *marks, int32_t **out, hx_err *err)
{
    size_t len = strlen(prompt);
    int add_bos = hx_vocab_add_bos(v) && strncmp(prompt, "<|begin_of_text|>", 17);
    int32_t n = tokenize_prompt(v, prompt, len, marks, add_bos, NULL, 0);
    if (n == INT32_MIN) return -hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    n = n < 0 ? -n : n;
    int32_t *t = hx_malloc_array((size_t)n + 1, sizeof *t);
    if (!t) return -hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    n = tokenize_prompt(v, prompt, len, marks, add_bos, t, n);
    *out = t;
    return n;
}

int hx_source_tokenize(const hx_vocab *v, const char *prompt, int32_t **out,
                       hx_err *err)
{
    return hx_source_tokenize_marked(v, prompt, NULL, out, err);
}

/* The response format's grammar, compiled once. */
static int schema_grammar(eng_src *e, hx_grammar **g, hx_err *err)
{
    if (!e->schema) return hx_err_set(err, HX_ERR_STATE, "no response schema is set");
    if (!e->g_schema) {
        hx_grammar_params gp = hx_grammar_default_params();
        gp.generation = 1;
        int rc = hx_grammar_from_schema(e->schema, strlen(e->schema), &gp, &e->g_schema, err);
        if (rc) return rc;
    }
    *g = e->g_schema;
    return HX_OK;
}

/* The grammar for a turn's choice, compiled once (NULL for NONE). */
static int turn_grammar(eng_src *e, int choice, hx_grammar **g, hx_err *err)
{
    *g = NULL;
    if (choice == HX_CHOICE_SCHEMA) return schema_grammar(e, g, err);
    if (choice == HX_CHOICE_NONE || e->n_specs == 0) return HX_OK;
    int k = choice == HX_CHOICE_REQUIRED;
    if (!e->g[k]) {
        hx_grammar_params gp = hx_grammar_default_params();
        gp.compact = e->compact;
        gp.line_turn = e->line_turn;
        gp.generation = 1;
        gp.max_calls = e->max_calls;
        gp.call_style = e->call_style;
        int rc = hx_grammar_tool_calls(e->specs, e->n_specs,
                                       k ? HX_TOOLS_REQUIRED : HX_TOOLS_LAZY,
                                       &gp, &e->g[k], err);
        if (rc) return rc;
    }
    *g = e->g[k];
    return HX_OK;
}

/* The loop guard, a stage after the grammar. Models loop where JSON lets
 * them: the grammar's generation bounds stop "5.0000..." and long
 * whitespace runs, but not a run of whitespace tokens between JSON tokens
 * of a long value, nor one token repeated in a string. Inside a call it
 * allows at most MAX_WS_RUN whitespace-only tokens in a row, none longer
 * than MAX_WS_BYTES (Qwen writes one "\n" after <tool_call>); in the
 * compact style (small models) no run of one, two or three tokens
 * repeated MAX_REPEAT times in a row, nor of four to REPEAT_PERIOD tokens
 * repeated MAX_REPEAT_LONG times, gets one more repetition
 * (hx_repeat_ban), in calls and answers alike (hearth-tiny, whose
 * template is declared, had no such rule and answered " string string
 * string ..." until the token budget; with the short rule alone a model
 * escapes into a longer loop, " the the the the the" with the last word
 * spelled without its space, and writes a string until the context is
 * full). A call starts at
 * "<tool_call>" or, in the Llama style, at a leading "{" or at
 * "<|python_tag|>", and ends at "</tool_call>" outside its JSON strings.
 * In every style, a string in a call whose last VAL_WINDOW tokens hold no
 * more than VAL_DISTINCT different ones is a loop the rules above did not
 * stop (a model escapes each ban into a longer loop): the string is closed
 * (only tokens that begin with its closing quote are left, where the
 * grammar allows one), so that a forced call ends instead of writing one
 * value until the context is full. */
#define MAX_REPEAT 4      /* runs of one to three tokens */
#define MAX_REPEAT_LONG 3 /* longer runs */
#define REPEAT_PERIOD 8   /* the longest repeated run the guard sees */
#define REPEAT_HIST (REPEAT_PERIOD * MAX_REPEAT_LONG)
#define MAX_WS_RUN 2
#define MAX_WS_BYTES 2
#define VAL_WINDOW 32
#define VAL_DISTINCT 8
typedef struct guard {
    const uint32_t *ws;  /* bitset of whitespace-only tokens (the source's) */
    const uint32_t *ws_long; /* those longer than MAX_WS_BYTES */
    const uint32_t *quote_lead; /* those beginning with '"' */
    int32_t n_ws;        /* tokens covered by ws */
    int32_t val[VAL_WINDOW]; /* the current string's last tokens (a ring) */
    int n_val;           /* tokens of the current string in a call so far */
    int compact;         /* the compact style: the repeat rule applies */
    int32_t hist[REPEAT_HIST]; /* the last tokens, oldest first */
    int n_hist;
    int ws_run;
    int called;          /* a call began this turn */
    hx_calltrack ct;     /* where calls are; ct.in_call: one is written */
    const hx_vocab *v;
} guard;

static int bit(const uint32_t *set, int32_t n, int32_t t)
{
    return t >= 0 && t < n && (set[t >> 5] >> (t & 31) & 1);
}

static int is_ws_tok(const guard *g, int32_t t) { return bit(g->ws, g->n_ws, t); }

int32_t hx_repeat_ban(const int32_t *hist, int n, int period, int times)
{
    const int span = period * times;
    if (period < 1 || times < 1 || n < span) return -1;
    for (int i = n - span; i < n - period; i++)
        if (hist[i] != hist[i + period]) return -1;
    return hist[n - period];
}

int hx_value_loops(const int32_t *last, int n_val)
{
    if (n_val < VAL_WINDOW) return 0;
    int kinds = 0;
    for (int i = 0; i < VAL_WINDOW; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) seen = last[j] == last[i];
        if (!seen && ++kinds > VAL_DISTINCT) return 0;
    }
    return 1;
}

/* Leaves only the tokens that close the string, if the stages before left
 * one of them (a grammar may not yet allow the close). */
static void close_value(const guard *g, float *logits, int32_t n_vocab)
{
    const int32_t n = n_vocab < g->n_ws ? n_vocab : g->n_ws;
    int32_t t = 0;
    while (t < n && !(bit(g->quote_lead, g->n_ws, t) && logits[t] > -INFINITY)) t++;
    if (t == n) return;
    for (t = 0; t < n_vocab; t++)
        if (!bit(g->quote_lead, g->n_ws, t)) logits[t] = -INFINITY;
}

static int guard_apply(void *ctx, float *logits, int32_t n_vocab)
{
    guard *g = ctx;
    for (int p = 1; g->compact && p <= REPEAT_PERIOD; p++) {
        int32_t t = hx_repeat_ban(g->hist, g->n_hist, p, p <= 3 ? MAX_REPEAT : MAX_REPEAT_LONG);
        if (t >= 0 && t < n_vocab) logits[t] = -INFINITY;
    }
    if (!g->ct.in_call) return HX_OK;
    if (g->ct.in_str && !g->ct.esc && hx_value_loops(g->val, g->n_val)) close_value(g, logits, n_vocab);
    const uint32_t *ban = g->ws_run >= MAX_WS_RUN ? g->ws : g->ws_long;
    for (int32_t t = 0; t < n_vocab && t < g->n_ws; t++)
        if (bit(ban, g->n_ws, t)) logits[t] = -INFINITY;
    return HX_OK;
}

static int ends_with(const char *s, const char *t)
{
    const size_t n = strlen(s), k = strlen(t);
    return n >= k && !memcmp(s + n - k, t, k);
}

void hx_calltrack_byte(hx_calltrack *t, char c)
{
    size_t k = strlen(t->tail);
    if (k + 1 >= sizeof t->tail) memmove(t->tail, t->tail + 1, k--);
    t->tail[k] = c, t->tail[k + 1] = 0;
    if (!t->in_call) {
        const int lead = t->llama && !t->wrote && c == '{';
        t->wrote |= !strchr(" \n\t\r", c);
        if (lead || ends_with(t->tail, HX_TOOL_CALL_OPEN) ||
            (t->llama && ends_with(t->tail, HX_TOOL_CALL_PYTHON)))
            t->in_call = 1, t->depth = lead, t->in_str = t->esc = 0;
        return;
    }
    if (t->in_str) {
        if (t->esc) t->esc = 0;
        else if (c == '\\') t->esc = 1;
        else if (c == '"') t->in_str = 0;
    } else if (c == '"') {
        t->in_str = 1;
    } else if (c == '{' || c == '[') {
        t->depth++;
    } else if ((c == '}' || c == ']') && t->depth > 0) {
        t->depth--;
    } else if (c == '>' && t->depth == 0 && ends_with(t->tail, HX_TOOL_CALL_CLOSE)) {
        t->in_call = 0;
    }
}

static void guard_tail(guard *g, int32_t token)
{
    size_t n = 0;
    const char *p = hx_vocab_piece(g->v, token, &n);
    for (size_t i = 0; p && i < n; i++) hx_calltrack_byte(&g->ct, p[i]);
}

static int guard_accept(void *ctx, int32_t token)
{
    guard *g = ctx;
    if (g->n_hist == REPEAT_HIST) memmove(g->hist, g->hist + 1, sizeof g->hist - sizeof *g->hist);
    else g->n_hist++;
    g->hist[g->n_hist - 1] = token;
    g->ws_run = is_ws_tok(g, token) ? g->ws_run + 1 : 0;
    guard_tail(g, token);
    if (g->ct.in_call && g->ct.in_str) g->val[g->n_val++ % VAL_WINDOW] = token;
    else g->n_val = 0;
    g->called |= g->ct.in_call;
    return HX_OK;
}

static int add_guard(eng_src *e, hx_sampler *s)
{
    guard *g = hx_calloc(1, sizeof *g);
    if (!g) return HX_ERR_NOMEM;
    *g = (guard){.ws = e->ws, .ws_long = e->ws_long, .quote_lead = e->quote_lead, .n_ws = e->n_ws,
                 .compact = e->compact || e->line_turn, .v = e->v};
    g->ct.llama = e->call_style == HX_CALLS_LLAMA;
    hx_sampler_stage st = {HX_SAMPLER_STAGE_API, "loop guard", g, guard_apply,
                           guard_accept, NULL, NULL, free};
    int rc = hx_sampler_add_stage(s, &st);
    if (rc) free(g);
    else e->guard = g;
    return rc;
}

/* The tools' argument checks and the failed calls not to write again
 * (with the copy bias, checked values held to the conversation's), then
 * the copy bias (which defers to the checks), after the loop guard whose
 * in_call both read. */
static int add_copy(eng_src *e, hx_sampler *s)
{
    const int *defer = NULL;
    hx_sampler_stage st;
    int rc = HX_OK;
    if ((e->arg_check || e->refused) && e->guard &&
        !(rc = hx_argcheck_stage_new(e->v, e->arg_check, e->arg_check_user, &e->guard->ct.in_call,
                                     &st, &defer)) &&
        ((rc = hx_argcheck_stage_refuse(&st, e->refused)) ||
         (e->copy_bias > 0 && e->copy_text && (rc = hx_argcheck_stage_hold(&st, e->request, e->copy_text))) ||
         (rc = hx_sampler_add_stage(s, &st))))
        st.free(st.ctx);
    if (rc || e->copy_bias <= 0 || !e->copy_text || !e->guard) return rc;
    rc = hx_copy_stage_new(e->v, e->copy_text, e->request, e->known_addrs, e->copy_bias,
                           &e->guard->ct.in_call, &st);
    if (!rc) hx_copy_stage_defer(&st, defer);
    if (!rc && (rc = hx_sampler_add_stage(s, &st))) st.free(st.ctx);
    return rc;
}

static int eng_repair_args(void *ctx, cJSON *args)
{
    eng_src *e = ctx;
    return e->copy_bias > 0 && e->copy_text ? hx_copy_repair(e->copy_text, args) : 0;
}

/* *slot becomes a copy of text (when a copy stage will read it). */
static int keep_text(const eng_src *e, char **slot, const char *text)
{
    if (e->copy_bias <= 0) return HX_OK; /* no copy stage to read it */
    char *t = hx_strdup(text ? text : "");
    if (!t) return HX_ERR_NOMEM;
    free(*slot);
    *slot = t;
    return HX_OK;
}

static int eng_copy_text(void *ctx, const char *text)
{
    eng_src *e = ctx;
    return keep_text(e, &e->copy_text, text);
}

static int eng_known_addresses(void *ctx, const char *list)
{
    eng_src *e = ctx;
    return keep_text(e, &e->known_addrs, list);
}

static int eng_request(void *ctx, const char *text)
{
    eng_src *e = ctx;
    return keep_text(e, &e->request, text);
}

static int eng_ground(void *ctx, const char *text, const char *claims)
{
    eng_src *e = ctx;
    if (!e->ground) return HX_OK;
    char *t = hx_strdup(text ? text : ""), *c = hx_strdup(claims ? claims : "");
    if (!t || !c) {
        free(t);
        free(c);
        return HX_ERR_NOMEM;
    }
    free(e->ground_text);
    free(e->claims);
    e->ground_text = t, e->claims = c;
    hx_log_debug("source: answers held to %zu bytes of the conversation", strlen(t));
    return HX_OK;
}

static int eng_answer_end(void *ctx, const char *text, size_t n, size_t *end)
{
    eng_src *e = ctx;
    if (!e->ground || !e->ground_text) return *end = n, HX_OK;
    return hx_ground_end(e->ground_text, e->claims, text, n, end);
}

static void eng_arg_check(void *ctx, hx_arg_check_fn check, void *user)
{
    eng_src *e = ctx;
    e->arg_check = check, e->arg_check_user = user;
}

static int eng_refused(void *ctx, const char *calls)
{
    eng_src *e = ctx;
    char *c = calls && *calls ? hx_strdup(calls) : NULL;
    if (calls && *calls && !c) return HX_ERR_NOMEM;
    free(e->refused);
    e->refused = c;
    return HX_OK;
}

/* The answer's grounding, last: after the copy bias (which may lift a
 * token it then masks) and the loop guard, whose in_call it reads. What
 * begins a call is let through where the turn may call. */
static int add_ground(eng_src *e, hx_sampler *s, int may_call)
{
    if (!e->ground || !e->ground_text) return HX_OK;
    const char *trigger = !may_call ? NULL
                          : e->call_style == HX_CALLS_LLAMA ? HX_TOOL_CALL_PYTHON : HX_TOOL_CALL_OPEN;
    hx_sampler_stage st;
    int rc = hx_ground_stage_new(e->v, e->ground_text, e->claims, trigger,
                                 e->guard ? &e->guard->ct.in_call : NULL, &st);
    if (!rc && (rc = hx_sampler_add_stage(s, &st))) st.free(st.ctx);
    return rc;
}

/* The whitespace-only tokens of the vocabulary and those that begin with a
 * quote, as bitsets. */
static int find_ws_tokens(eng_src *e)
{
    int32_t n = hx_vocab_n_tokens(e->v);
    e->ws = hx_calloc((size_t)(n + 31) / 32, sizeof *e->ws);
    e->ws_long = hx_calloc((size_t)(n + 31) / 32, sizeof *e->ws);
    e->quote_lead = hx_calloc((size_t)(n + 31) / 32, sizeof *e->ws);
    if (!e->ws || !e->ws_long || !e->quote_lead) return HX_ERR_NOMEM;
    e->n_ws = n;
    for (int32_t t = 0; t < n; t++) {
        size_t len = 0;
        const char *p = hx_vocab_piece(e->v, t, &len);
        int ws = p && len > 0 && !hx_vocab_is_special(e->v, t);
        for (size_t i = 0; ws && i < len; i++)
            ws = p[i] == ' ' || p[i] == '\n' || p[i] == '\t' || p[i] == '\r';
        if (ws) e->ws[t >> 5] |= 1u << (t & 31);
        if (ws && len > MAX_WS_BYTES) e->ws_long[t >> 5] |= 1u << (t & 31);
        if (p && len > 0 && *p == '"' && !hx_vocab_is_special(e->v, t))
            e->quote_lead[t >> 5] |= 1u << (t & 31);
    }
    return HX_OK;
}

static int new_sampler(eng_src *e, int choice, hx_err *err)
{
    hx_grammar *g;
    int rc = turn_grammar(e, choice, &g, err);
    if (!rc && (rc = hx_spec_set_grammar(e->spec, g, e->gv))) /* drafts */
        hx_err_set(err, rc, "out of memory");
    if (rc) return rc;
    hx_sampler_free(e->s);
    e->guard = NULL;
    e->s = hx_sampler_new(&e->sp);
    if (!e->s) return hx_err_set(err, HX_ERR_INVALID, "bad sampler parameters");
    hx_sampler_stage st;
    if (g && ((rc = hx_grammar_stage(g, e->gv, &st)) || (rc = hx_sampler_add_stage(e->s, &st))))
        return hx_err_set(err, rc, "cannot set up the tool-call grammar");
    if ((rc = add_guard(e, e->s)) || (g && (rc = add_copy(e, e->s))) ||
        (rc = add_ground(e, e->s, g != NULL)))
        return hx_err_set(err, rc, "out of memory");
    return HX_OK;
}

/* Decodes t in slices, checking the cancel callback between them (a
 * long prompt stops at once on Ctrl-C; the slices done stay cached). A
 * full cache is a request too long, unless the KV spill failed (said so). */
static int decode(eng_src *e, const int32_t *t, int n, hx_err *err)
{
    hx_prefill_params pp = hx_prefill_default_params();
    pp.slice = e->slice;
    pp.cancel = e->cancelled;
    pp.cancel_user = e->cancel_user;
    pp.whole_prompt = 1; /* a reused prefix changes no number of the rest */
    const int before = hx_ctx_n_past(e->ctx);
    int done = 0, rc = hx_prefill(e->ctx, t, n, &pp, &done);
    if (rc == HX_ERR_FULL && before + n > e->limit)
        return hx_err_set(err, rc, "request too long: %d tokens, limit %d (%s); shorten it, "
                          "start a new conversation, or allow more (--ctx, --max-memory)",
                          before + n, e->limit,
                          e->limit < hx_ctx_n_ctx(e->ctx) ? "what --max-memory leaves for the "
                          "KV cache" : "the context size");
    if (rc == HX_ERR_CANCELLED) return hx_err_set(err, rc, "cancelled");
    if (rc) return hx_err_set(err, rc, "decode: %s", hx_ctx_errmsg(e->ctx));
    return HX_OK;
}

/* Decodes prompt t[keep, n); when a spilled KV page reads back damaged,
 * the positions from it on are gone from the cache, and are decoded again
 * once from the prompt's tokens. */
static int decode_prompt(eng_src *e, const int32_t *t, int n, int keep, hx_err *err)
{
    int rc = decode(e, t + keep, n - keep, err);
    const int at = hx_ctx_n_past(e->ctx);
    if (rc == HX_ERR_IO && at < n) {
        hx_log_warn("%s; decoding %d positions again", err->msg, n - at);
        rc = decode(e, t + at, n - at, err);
    }
    return rc;
}

/* The tokens of t that lie within the prompt's first head bytes: those
 * whose pieces end there or before (a leading BOS is no text). */
static int tokens_within(const eng_src *e, const int32_t *t, int n, size_t head)
{
    int i = n > 0 && t[0] == hx_vocab_bos(e->v) && hx_vocab_is_special(e->v, t[0]);
    for (size_t bytes = 0; i < n - 1; i++) {
        size_t len = 0;
        hx_vocab_piece(e->v, t[i], &len);
        if ((bytes += len) > head) break;
    }
    return i;
}

/* The prompt's stable head (the system message with the tool list): where
 * its template marks it, else up to and including its first end-of-turn
 * token; 0 if none. */
static int stable_head(const eng_src *e, const int32_t *t, int n, const hx_tpl_marks *marks)
{
    if (marks && marks->head) return tokens_within(e, t, n, marks->head);
    for (int i = 0; i < n - 1; i++)
        if (hx_vocab_is_eog(e->v, t[i])) return i + 1;
    return 0;
}

/* With nothing in memory, the longest prefix cached on disk. */
static int load_prefix(eng_src *e, const int32_t *t, int n)
{
    int got = 0;
    if (!e->prefix_cache) return 0;
    hx_ctx_truncate(e->ctx, 0);
    hx_ctx_prefix_load(e->ctx, e->prefix_dir, t, n, n - 1, &got);
    return got;
}

/* The stable head to save when the turn ends (after its first token):
 * where the disk had less of it; 0: none. */
static int head_to_save(const eng_src *e, const int32_t *t, int n, const hx_tpl_marks *marks,
                        int loaded)
{
    int head = e->prefix_cache ? stable_head(e, t, n, marks) : 0;
    return head <= loaded || head < 16 ? 0 : head;
}

/* Saves the head a completed prefill left pending (its positions are
 * still the prompt's: only a new turn or new adapters drop them, and both
 * save first), unless Ctrl-C came (the process ends at once); a failure
 * only costs the next process its warm start. */
static void save_prefix(eng_src *e)
{
    const int head = e->save_head;
    e->save_head = 0;
    if (!head || (e->cancelled && e->cancelled(e->cancel_user))) return;
    const double t0 = hx_time_mono();
    if (hx_ctx_prefix_save(e->ctx, e->prefix_dir, e->cache, head, e->prefix_max))
        hx_log_warn("prefix cache: %s", hx_ctx_errmsg(e->ctx));
    e->timing.save_ms = (hx_time_mono() - t0) * 1e3;
    hx_log_debug("source: prefix of %d positions saved in %.1f ms, after the first token",
                 head, e->timing.save_ms);
}

/* The loop's thread choice, from the next slice on. */
static void apply_threads(eng_src *e)
{
    hx_loop_choice ch;
    hx_loop_get(e->loop, &ch);
    hx_ctx_set_threads(e->ctx, ch.n_threads);
}

/* Between slices of a pass: the loop counts them, re-reads the device
 * every so many, and a new thread choice applies at once; Ctrl-C stops
 * the work within the slice. */
static int on_slice(void *user)
{
    eng_src *e = user;
    if (hx_loop_slice(e->loop)) apply_threads(e);
    return e->cancelled && e->cancelled(e->cancel_user);
}

/* Counts the turn just ended (its sampler still set) as a tool-call turn,
 * where its loop guard saw a call begin, or a text turn. */
static void end_turn(eng_src *e)
{
    save_prefix(e);
    if (e->guard && e->guard->called) {
        e->call_tokens += e->turn_tokens;
        e->call_seconds += e->turn_seconds;
    }
    if (e->loop && e->ttft_ms >= 0) {
        hx_turn_stats t = {e->ttft_ms, e->turn_reused > 0,
                           e->prefill_s > 0 ? e->turn_prefilled / e->prefill_s : 0,
                           e->turn_seconds > 0 ? e->turn_tokens / e->turn_seconds : 0};
        hx_log_debug("source: turn ttft %.1f ms warm %d decode %.1f tok/s", t.ttft_ms, t.warm, t.decode_tps);
        if (hx_loop_turn(e->loop, &t)) apply_threads(e);
        e->ttft_ms = -1;
    }
    e->turn_tokens = 0;
    e->turn_seconds = 0;
}

/* Notes a produced token and the time it took. */
static void count_token(eng_src *e, double dt)
{
    e->gen_tokens++;
    e->gen_seconds += dt;
    e->turn_tokens++;
    e->turn_seconds += dt;
}

/* Tokens go through the model in batches where the grammar forces them,
 * and drafts from the context are verified in one pass; the output is
 * that of one token per pass (engine/spec.h). plain_decode: one per pass.
 * The decoder over ctx, its drafts capped at max_draft (the loop's
 * speculation depth). */
static hx_spec *new_spec(const eng_src *e, hx_ctx *ctx, int max_draft)
{
    hx_spec_params sp = e->spec_p;
    if (max_draft < sp.max_draft) sp.max_draft = max_draft;
    hx_spec *s = hx_spec_new(ctx, e->v, &sp);
    if (s && !e->plain_decode) hx_spec_set_memo(s, e->spec_memo);
    return s;
}

/* The context the loop's choice ch asks for: the context as asked for
 * with the loop's cap, and the 8-bit KV cache when the loop chooses it
 * and the model's heads are whole Q8_0 blocks. */
static hx_ctx_params loop_ctx_params(const eng_src *e, const hx_loop_choice *ch)
{
    hx_ctx_params cp = e->cp;
    const hx_hparams *hp = hx_model_hparams(e->m);
    int train = hp->n_ctx_train > 0 && hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
    int want = cp.n_ctx > 0 ? cp.n_ctx : train;
    if (ch->ctx_cap > 0 && want > ch->ctx_cap) want = ch->ctx_cap;
    cp.n_ctx = want;
    if (ch->kv_q8 && hp->head_dim % 32 == 0) cp.kv_q8 = 1;
    return cp;
}

static void add_spec_stats(hx_spec_stats *to, const hx_spec_stats *st)
{
    to->passes += st->passes;
    to->tokens += st->tokens;
    to->forced += st->forced;
    to->drafted += st->drafted;
    to->accepted += st->accepted;
    to->pass_seconds += st->pass_seconds;
}

/* The source's context and decoder: a new context made with cp (ctx_too;
 * carrying the adapters, in slices with the loop; the old one's cached
 * positions are gone) and a decoder of max_draft over it, both made
 * before the old are freed (whose decoder's counters are kept): on
 * failure the source is as it was. */
static int renew(eng_src *e, const hx_ctx_params *cp, int ctx_too, int max_draft, hx_err *err)
{
    hx_ctx_mem mem;
    hx_ctx *c = ctx_too ? NULL : e->ctx;
    int rc = ctx_too ? hx_ctx_memory(e->m, cp, &mem, err) : HX_OK;
    if (!rc && ctx_too) rc = hx_ctx_new(e->m, cp, &c, err);
    if (!rc && ctx_too && e->n_ads && (rc = hx_ctx_set_adapters(c, e->ads, e->ascales, e->n_ads)))
        hx_err_set(err, rc, "%s", hx_ctx_errmsg(c));
    hx_spec *s = rc ? NULL : new_spec(e, c, max_draft);
    if (!rc && !s) rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    if (rc) {
        if (ctx_too) hx_ctx_free(c);
        return rc;
    }
    if (e->spec) {
        hx_spec_stats st = hx_spec_get_stats(e->spec);
        add_spec_stats(&e->spec_done, &st);
    }
    hx_spec_free(e->spec);
    e->spec = s;
    e->cur_draft = max_draft;
    if (!ctx_too) return HX_OK;
    hx_ctx_free(e->ctx);
    e->ctx = c;
    e->limit = mem.n_ctx_fit;
    e->n_cache = 0;
    e->cur_kv_q8 = cp->kv_q8;
    if (e->loop) hx_ctx_set_slicer(c, e->slice_ms, on_slice, e);
    return HX_OK;
}

/* The loop's choices that wait for a turn's start, applied before the
 * next model turn: the context cap and the KV type (a new context when
 * either changed: the conversation is prefilled anew, its head from the
 * prefix cache where one was saved) and the speculation depth (a new
 * decoder). The thread count applies at once elsewhere. */
static int follow_loop(eng_src *e, hx_err *err)
{
    if (!e->loop) return HX_OK;
    hx_loop_choice ch;
    hx_loop_get(e->loop, &ch);
    hx_ctx_params cp = loop_ctx_params(e, &ch);
    const int remake = cp.n_ctx != hx_ctx_n_ctx(e->ctx) || cp.kv_q8 != e->cur_kv_q8;
    if (!remake && ch.spec_depth == e->cur_draft) return HX_OK;
    int rc = renew(e, &cp, remake, ch.spec_depth, err);
    if (rc) return rc;
    if (remake) hx_ctx_set_threads(e->ctx, ch.n_threads);
    hx_log_debug("source: from this turn: context %d, %s KV, drafts up to %d", cp.n_ctx,
                 cp.kv_q8 ? "8-bit" : "16-bit", ch.spec_depth);
    return HX_OK;
}

/* What fill did: positions reused (loaded of them from disk), seconds of
 * loading and of decoding. */
typedef struct fill_stats {
    int keep, loaded;
    double load_s, decode_s;
} fill_stats;

/* Prompt tokens t[0, n) into the cache (which takes t): keeps its common
 * prefix with what the cache holds (with nothing in memory, the longest
 * prefix on disk), decodes the rest. The head to save goes pending where
 * the disk had less of it. */
static int fill(eng_src *e, int32_t *t, int n, const hx_tpl_marks *marks, fill_stats *fs,
                hx_err *err)
{
    int k = 0, got = 0;
    end_turn(e); /* a turn the planner stopped reading (a one-line turn) */
    int rc = follow_loop(e, err);
    if (rc) {
        free(t);
        return rc;
    }
    const double t0 = hx_time_mono(); /* a context the loop remade counts in TTFT only */
    while (k < n && k < e->n_cache && e->cache[k] == t[k]) k++;
    if (k == n) k--;
    if (k > hx_ctx_n_past(e->ctx)) k = hx_ctx_n_past(e->ctx); /* a pending token */
    hx_spec_reset(e->spec);
    if (k == 0) k = got = load_prefix(e, t, n);
    hx_ctx_truncate(e->ctx, k);
    free(e->cache);
    e->cache = t;
    e->n_cache = k;
    e->cap = n + 1;
    *fs = (fill_stats){k, got, hx_time_mono() - t0, 0};
    const double t1 = hx_time_mono();
    rc = decode_prompt(e, t, n, k, err);
    e->n_cache = hx_ctx_n_past(e->ctx); /* what a cancelled prefill left */
    if (rc) return rc;
    fs->decode_s = hx_time_mono() - t1;
    if (k == got) e->save_head = head_to_save(e, t, n, marks, got);
    e->n_cache = n;
    return HX_OK;
}

/* Keeps the common prefix of the cache and the new prompt, decodes the
 * rest (at least the last token, for its logits). */
static int eng_begin_marked(void *ctx, const char *prompt, const hx_tpl_marks *marks,
                            int choice, int *n_prompt, hx_err *err)
{
    eng_src *e = ctx;
    int32_t *t = NULL;
    hx_turn_timing *tm = &e->timing;
    const double t0 = hx_time_mono();
    int n = hx_source_tokenize_marked(e->v, prompt, marks, &t, err);
    if (n < 0) return -n;
    if (n == 0) {
        free(t);
        return hx_err_set(err, HX_ERR_INVALID, "empty prompt");
    }
    fill_stats fs;
    *tm = (hx_turn_timing){.tokenize_ms = (hx_time_mono() - t0) * 1e3, .n_prompt = n};
    int rc = fill(e, t, n, marks, &fs, err);
    if (rc) return rc;
    const double t3 = hx_time_mono();
    e->turn_t0 = t0;
    e->ttft_ms = -1;
    e->turn_prefilled = n - fs.keep;
    e->turn_reused = fs.keep;
    e->prefill_s = fs.load_s + fs.decode_s;
    *n_prompt = n;
    e->ended = 0;
    hx_detok_init(&e->dt);
    hx_log_debug("source: prompt %d tokens, %d reused from the cache", n, fs.keep);
    rc = new_sampler(e, choice, err);
    tm->load_ms = fs.load_s * 1e3, tm->prefill_ms = fs.decode_s * 1e3;
    tm->sampler_ms = (hx_time_mono() - t3) * 1e3;
    tm->n_reused = fs.keep, tm->n_loaded = fs.loaded;
    return rc;
}

/* The start of the next turn's prompt decoded ahead, but its last token
 * (the text after it may join it into another); the head goes to the
 * prefix cache now, while nothing waits. */
static int eng_prepare(void *ctx, const char *prompt, const hx_tpl_marks *marks, hx_err *err)
{
    eng_src *e = ctx;
    int32_t *t = NULL;
    int n = hx_source_tokenize_marked(e->v, prompt, marks, &t, err);
    if (n < 0) return -n;
    fill_stats fs = {0};
    int rc = HX_OK;
    if (n > 1) rc = fill(e, t, n - 1, marks, &fs, err);
    else free(t);
    if (!rc) save_prefix(e);
    hx_log_debug("source: %d prompt tokens prepared, %d of them reused", n - 1, fs.keep);
    return rc;
}

static int eng_begin(void *ctx, const char *prompt, int choice, int *n_prompt,
                     hx_err *err)
{
    return eng_begin_marked(ctx, prompt, NULL, choice, n_prompt, err);
}

static int push_cache(eng_src *e, int32_t tok)
{
    if (e->n_cache >= e->cap) {
        int cap = e->cap * 2 + 16;
        int32_t *c = hx_realloc(e->cache, (size_t)cap * sizeof *c);
        if (!c) return HX_ERR_NOMEM;
        e->cache = c;
        e->cap = cap;
    }
    e->cache[e->n_cache++] = tok;
    return HX_OK;
}

/* The turn's first token came, dt seconds after it was asked for. */
static void first_token(eng_src *e, double dt)
{
    const hx_turn_timing *t = &e->timing;
    e->ttft_ms = (hx_time_mono() - e->turn_t0) * 1e3;
    e->timing.first_ms = dt * 1e3;
    hx_log_debug("source: first token after %.1f ms: tokenize %.1f, prefix %.1f (%d positions "
                 "from disk), prefill of %d %.1f, sampler %.1f, first token %.1f",
                 e->ttft_ms, t->tokenize_ms, t->load_ms, t->n_loaded, t->n_prompt - t->n_reused,
                 t->prefill_ms, t->sampler_ms, t->first_ms);
}

static int eng_next(void *ctx, hx_buf *piece, int *end, hx_err *err)
{
    eng_src *e = ctx;
    *end = 0;
    if (e->ended) return *end = 1, HX_OK;
    int32_t tok;
    double t0 = hx_time_mono();
    int rc = hx_spec_next(e->spec, e->s, e->cache, e->n_cache, &tok, err);
    double dt = hx_time_mono() - t0;
    if (rc) return rc;
    if (e->ttft_ms < 0) first_token(e, dt);
    if (hx_vocab_is_eog(e->v, tok)) {
        e->ended = *end = 1;
        count_token(e, dt);
        end_turn(e);
        return hx_detok_flush(&e->dt, piece);
    }
    count_token(e, dt);
    rc = hx_detok_push(&e->dt, e->v, tok, 1, piece);
    if (!rc) rc = push_cache(e, tok);
    return rc ? hx_err_set(err, rc, "out of memory") : HX_OK;
}

/* Compact mode, for small models that rarely close a string and loop on
 * digits: every string gets maxLength <= COMPACT_MAX_STRING, every number
 * an enum of a few round values inside its bounds, every array at most
 * COMPACT_MAX_ITEMS items. A call is still valid
 * against the tool's real schema; it just has fewer ways to go on. */
#define COMPACT_MAX_STRING 40
#define COMPACT_MAX_ITEMS 3
/* Calls per turn in compact mode unless the caller asks for more: a small
 * model that may call again calls until the token budget ends (stories260K:
 * two calls of ~150 tokens each overrun `hearth ask --max-tokens 300`). */
#define COMPACT_MAX_CALLS 1
static const double round_values[] = {0, 1, 2, 3, 5, 10, 15, 20, 30, 45, 60, 90, 120};

static double num_or(const cJSON *j, const char *k, double dflt)
{
    const cJSON *v = cJSON_GetObjectItem(j, k);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

static void bound_number(cJSON *j)
{
    double lo = num_or(j, "minimum", -1e300), hi = num_or(j, "maximum", 1e300);
    cJSON *e = cJSON_CreateArray();
    for (size_t i = 0; i < sizeof round_values / sizeof *round_values; i++)
        if (round_values[i] >= lo && round_values[i] <= hi)
            cJSON_AddItemToArray(e, cJSON_CreateNumber(round_values[i]));
    if (!e->child && lo > -1e300) cJSON_AddItemToArray(e, cJSON_CreateNumber(ceil(lo)));
    if (!e->child || cJSON_GetObjectItem(j, "multipleOf")) {
        cJSON_Delete(e);
        return;
    }
    cJSON_AddItemToObject(j, "enum", e);
}

static void bound_values(cJSON *j)
{
    if (!j) return;
    const char *t = cJSON_GetStringValue(cJSON_GetObjectItem(j, "type"));
    int free_value = cJSON_IsObject(j) && t && !cJSON_GetObjectItem(j, "enum") &&
                     !cJSON_GetObjectItem(j, "const");
    if (free_value && !strcmp(t, "string")) {
        double max = num_or(j, "maxLength", 1e300);
        if (max > COMPACT_MAX_STRING && num_or(j, "minLength", 0) <= COMPACT_MAX_STRING) {
            cJSON_DeleteItemFromObject(j, "maxLength");
            cJSON_AddNumberToObject(j, "maxLength", COMPACT_MAX_STRING);
        }
    } else if (free_value && (!strcmp(t, "integer") || !strcmp(t, "number"))) {
        bound_number(j);
    } else if (free_value && !strcmp(t, "array") &&
               num_or(j, "maxItems", 1e300) > COMPACT_MAX_ITEMS &&
               num_or(j, "minItems", 0) <= COMPACT_MAX_ITEMS) {
        cJSON_DeleteItemFromObject(j, "maxItems");
        cJSON_AddNumberToObject(j, "maxItems", COMPACT_MAX_ITEMS);
    }
    for (cJSON *c = j->child; c; c = c->next) bound_values(c);
}

static char *spec_schema(const char *schema, int compact)
{
    if (!compact || !schema) return hx_strdup(schema);
    cJSON *j = cJSON_Parse(schema);
    if (!j) return hx_strdup(schema);
    bound_values(j);
    char *s = cJSON_PrintUnformatted(j);
    char *r = hx_strdup(s);
    cJSON_free(s);
    cJSON_Delete(j);
    return r;
}

static int copy_specs(eng_src *e, const hx_tool_spec *tools, int n)
{
    e->specs = hx_calloc((size_t)(n ? n : 1), sizeof *e->specs);
    if (!e->specs) return HX_ERR_NOMEM;
    for (int i = 0; i < n; i++, e->n_specs++) {
        e->specs[i].name = hx_strdup(tools[i].name);
        e->specs[i].schema_json = spec_schema(tools[i].schema_json, e->compact);
        if (!e->specs[i].name) return HX_ERR_NOMEM;
    }
    return HX_OK;
}

int hx_source_engine_new(hx_model *m, const hx_tool_spec *tools, int n_tools,
                         const hx_source_engine_params *p, hx_source *out,
                         hx_err *err)
{
    hx_source_engine_params d = hx_source_engine_default_params();
    if (!p) p = &d;
    memset(out, 0, sizeof *out);
    if (!hx_model_vocab(m))
        return hx_err_set(err, HX_ERR_UNSUPPORTED, "the model has no tokenizer");
    eng_src *e = hx_calloc(1, sizeof *e);
    if (!e) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    e->m = m;
    e->v = hx_model_vocab(m);
    e->sp = p->sp;
    e->compact = p->compact_json;
    e->line_turn = p->line_turn;
    e->call_style = p->call_style;
    e->max_calls = p->max_calls > 0 && p->max_calls < HX_AGENT_MAX_CALLS ? p->max_calls
                   : e->compact ? COMPACT_MAX_CALLS : HX_AGENT_MAX_CALLS;
    e->cp = hx_ctx_default_params();
    e->cp.n_ctx = p->n_ctx;
    e->cp.n_threads = p->n_threads;
    e->cp.kv_q8 = p->kv_q8;
    e->cp.max_bytes = p->max_bytes;
    e->cp.kv_spill = !p->no_kv_spill; /* a conversation outgrowing memory keeps its history */
    e->slice = p->prefill_slice > 0 ? p->prefill_slice : 64;
    e->cancelled = p->cancelled;
    e->cancel_user = p->cancel_user;
    e->prefix_cache = p->prefix_cache;
    e->prefix_dir = hx_strdup(p->prefix_dir);
    e->prefix_max = p->prefix_max_bytes;
    e->copy_bias = p->copy_bias > 0 ? p->copy_bias : 0;
    e->ground = !p->no_ground;
    e->spec_p = hx_spec_default_params();
    if (p->plain_decode) e->spec_p.max_batch = 1;
    e->plain_decode = p->plain_decode;
    e->spec_memo = p->spec_memo;
    e->ads = p->adapters;
    e->ascales = p->adapter_scales;
    e->n_ads = p->n_adapters;
    e->loop = p->loop;
    e->slice_ms = p->slice_ms > 0 ? p->slice_ms : 10;
    e->ttft_ms = -1;
    hx_loop_choice ch = {.spec_depth = e->spec_p.max_draft};
    if (e->loop) hx_loop_get(e->loop, &ch);
    hx_ctx_params cp = e->loop ? loop_ctx_params(e, &ch) : e->cp;
    int rc = copy_specs(e, tools, n_tools);
    if (rc) hx_err_set(err, rc, "out of memory");
    if (!rc) rc = renew(e, &cp, 1, ch.spec_depth, err);
    if (!rc && e->loop) apply_threads(e);
    if (!rc) rc = hx_gvocab_from_vocab_cached(e->v, NULL, &e->gv, NULL, err);
    if (!rc && (rc = find_ws_tokens(e))) hx_err_set(err, rc, "out of memory");
    if (rc) {
        eng_free(e);
        return rc;
    }
    *out = (hx_source){.api_version = HX_SOURCE_API, .name = "engine", .ctx = e,
                       .begin = eng_begin, .next = eng_next, .count = eng_count,
                       .free = eng_free, .set_copy_text = eng_copy_text,
                       .repair_args = eng_repair_args,
                       .set_known_addresses = eng_known_addresses,
                       .set_request = eng_request, .begin_marked = eng_begin_marked,
                       .limit = eng_limit, .set_ground = eng_ground,
                       .set_arg_check = eng_arg_check, .set_refused_calls = eng_refused,
                       .prepare = eng_prepare, .answer_end = eng_answer_end};
    return HX_OK;
}

hx_ctx *hx_source_engine_ctx(hx_source *s)
{
    return s && s->begin == eng_begin && s->ctx ? ((eng_src *)s->ctx)->ctx : NULL;
}

void hx_source_engine_end_turn(hx_source *s)
{
    if (s && s->begin == eng_begin && s->ctx) end_turn(s->ctx);
}

int hx_source_engine_configure(hx_source *s, const hx_engine_turn *t, hx_err *err)
{
    if (!s || s->begin != eng_begin || !s->ctx)
        return hx_err_set(err, HX_ERR_INVALID, "not an engine source");
    eng_src *e = s->ctx;
    free_grammars(e);
    free(e->ground_text), free(e->claims); /* held to nothing until a planner says */
    e->ground_text = e->claims = NULL;
    eng_arg_check(e, NULL, NULL);
    eng_refused(e, NULL);
    e->sp = t->sp;
    e->copy_bias = t->copy_bias > 0 ? t->copy_bias : 0;
    int rc = copy_specs(e, t->tools, t->n_tools);
    if (!rc && t->schema_json && !(e->schema = hx_strdup(t->schema_json))) rc = HX_ERR_NOMEM;
    return rc ? hx_err_set(err, rc, "out of memory") : HX_OK;
}

void hx_source_engine_add_stats(hx_source *s, hx_gen_stats *acc)
{
    if (!s || s->begin != eng_begin || !s->ctx) return;
    eng_src *e = s->ctx;
    hx_spec_stats st = hx_spec_get_stats(e->spec);
    end_turn(e);
    acc->tokens += e->gen_tokens;
    acc->seconds += e->gen_seconds;
    acc->call_tokens += e->call_tokens;
    acc->call_seconds += e->call_seconds;
    add_spec_stats(&acc->spec, &st);
    add_spec_stats(&acc->spec, &e->spec_done);
}

int hx_source_engine_set_adapters(hx_source *s, hx_adapter *const *ads,
                                  const float *scales, int n, hx_err *err)
{
    if (!s || s->begin != eng_begin || !s->ctx)
        return hx_err_set(err, HX_ERR_INVALID, "not an engine source");
    eng_src *e = s->ctx;
    save_prefix(e); /* before the KV rows go */
    int rc = hx_ctx_set_adapters(e->ctx, ads, scales, n); /* drops the KV rows */
    if (rc) return hx_err_set(err, rc, "%s", hx_ctx_errmsg(e->ctx));
    e->ads = ads; /* a context the loop remakes carries them too */
    e->ascales = scales;
    e->n_ads = n;
    e->n_cache = 0; /* no token of the old set's is reused */
    e->ended = 1;   /* a turn begun under the old set is over */
    hx_spec_reset(e->spec);
    return HX_OK;
}

void hx_source_engine_timing(const hx_source *s, hx_turn_timing *t)
{
    memset(t, 0, sizeof *t);
    if (s && s->begin == eng_begin && s->ctx) *t = ((const eng_src *)s->ctx)->timing;
}
