/* toolcheck.c: whether a tool's JSON Schema can drive constrained decoding
 * (a tool the grammar cannot enforce is left out of the model's tool list,
 * and reported, never allowed to take the other tools down); the tools'
 * own checks of argument values, and the sampler stage that holds calls
 * to them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agent/agent.h"
#include "engine/engine.h"

int hx_agent_schema_usable(const char *schema_json, hx_err *err)
{
    if (!schema_json) return HX_OK; /* any JSON object */
    hx_grammar *g = NULL;
    int rc = hx_grammar_from_schema(schema_json, strlen(schema_json), NULL, &g, err);
    hx_grammar_free(g);
    return rc;
}

int hx_agent_tool_specs(const hx_tools *reg, const char *filter, FILE *warn,
                        hx_tool_spec **out)
{
    int n = hx_tools_count(reg), k = 0;
    hx_tool_spec *specs = hx_calloc((size_t)n + 1, sizeof *specs);
    *out = specs;
    if (!specs) return -1;
    for (int i = 0; i < n; i++) {
        const hx_tool_def *d = hx_tools_at(reg, i);
        hx_err e = {0};
        if (!hx_agent_tool_offered(filter, d->name)) continue;
        if (hx_agent_schema_usable(d->schema_json, &e)) {
            if (warn)
                fprintf(warn, "hearth: tool %s left out: the grammar cannot use its "
                              "schema: %s\n", d->name, e.msg);
            continue;
        }
        specs[k++] = (hx_tool_spec){d->name, d->schema_json};
    }
    return k;
}

/* ---- the tools' own argument checks ---- */
static int time_key(const char *key)
{
    return !strcmp(key, "range") || !strcmp(key, "start") || !strcmp(key, "end") ||
           !strcmp(key, "occurrence");
}

int hx_agent_arg_check(void *user, const char *tool, const char *key, const char *value)
{
    const hx_tools *reg = user;
    const hx_tool_def *d = reg && tool ? hx_tools_find(reg, tool) : NULL;
    if (!d || !(d->flags & HX_TOOL_BUILTIN) || strncmp(tool, "calendar.", 9) || !key ||
        !time_key(key))
        return -1;
    const hx_config *cfg = hx_tools_config(reg);
    hx_when_range r;
    hx_err e = {0};
    const int rc = hx_when_parse(value ? value : "", hx_now(NULL), cfg ? cfg->timezone : NULL, &r, &e);
    return rc == HX_OK || rc == HX_ERR_RANGE; /* "april 31": the tool says there is none */
}

/* ---- the argument check stage ----
 * Tracks the call being written (its tool's name, the key and the bytes
 * of the string value open) and, where the tool checks that key: masks
 * every token that would close the value while the check refuses it (a
 * range "the" of "the 24th": the tool would only say it cannot read it),
 * unless no token is left or the value is HOLD_MAX bytes long; and tells the copy stage (*defer) when the
 * model's own best token makes a value the check accepts ("on Thursday"),
 * which the bias must then not replace ("on my", words of the request). */
#define CALL_HEAD 160 /* bytes of a call kept to read its tool's name */
#define CALL_NORM 1024 /* bytes of a call kept, blanks outside strings left out */
#define VALUE_MAX 256
#define HOLD_MAX 40   /* a value this long may close whatever the check says:
                         a model that cannot write one the tool reads
                         would write on to the token budget */

typedef struct argcheck {
    const hx_vocab *v;
    const int *in_call;
    hx_arg_check_fn check;
    void *user;
    int was_in_call;
    hx_jscan js;
    char head[CALL_HEAD]; /* the call's first bytes */
    size_t n_head;
    char name[96];        /* its tool's name, once read */
    char val[VALUE_MAX];  /* the string value open */
    size_t n_val;
    int checked;          /* the check knows this value's key: -1 unknown yet */
    int defer;            /* read by the copy stage */
    char norm[CALL_NORM]; /* the call so far, blanks outside strings left out */
    size_t n_norm;        /* CALL_NORM: too long to compare */
    hx_jscan nj;          /* norm's scanner */
    char *refused;        /* calls not to write again: "tool\targs" lines (owned) */
    char *request, *text; /* what checked values are held to (owned; NULL: none) */
    hx_buf held;          /* the values the check accepts there, NUL-separated */
} argcheck;

/* Where token piece p[0, n) closes the value open (bytes before its
 * quote), or -1 when it does not close it. */
static long closes_at(const argcheck *a, const char *p, size_t n)
{
    hx_jscan s = a->js;
    for (size_t i = 0; i < n; i++)
        if (hx_jscan_byte(&s, p[i]) == HX_JSCAN_CLOSE) return (long)i;
    return -1;
}

/* The check of the value so far with p[0, n) after it. */
static int check_with(const argcheck *a, const char *p, size_t n)
{
    char cand[VALUE_MAX + 64];
    if (a->n_val + n >= sizeof cand) return -1;
    memcpy(cand, a->val, a->n_val);
    memcpy(cand + a->n_val, p, n);
    cand[a->n_val + n] = 0;
    return a->check(a->user, a->name, a->js.key, cand);
}

/* ---- checked values held to the conversation's ----
 * A small model that cannot write a range the check accepts writes on
 * ("invite 30 in this morning, so I booked nothing") to HOLD_MAX bytes,
 * and the tool refuses it. With the texts given (the copy stage's switch:
 * small models), a range is held to the values the conversation has that
 * the check accepts: the request's phrases of up to HELD_WORDS words
 * ("tomorrow morning" of "set up 30 minutes with Dana tomorrow morning")
 * and the results' string values (a date a result gives), while any is
 * the value's continuation. */
#define HELD_WORDS 6
#define HELD_MAX 4096 /* bytes of accepted values kept */

/* Adds t[0, n) to the held values when the check accepts it for the
 * value open. */
static void hold_if_accepted(argcheck *a, const char *t, size_t n)
{
    char v[VALUE_MAX];
    if (!n || n >= sizeof v || a->held.len + n + 1 > HELD_MAX) return;
    memcpy(v, t, n), v[n] = 0;
    if (a->check(a->user, a->name, a->js.key, v) != 1) return;
    hx_buf_append(&a->held, v, n + 1);
}

/* The request's phrases: runs of up to HELD_WORDS words, less the
 * punctuation that ends a sentence or a clause, that do not end with a
 * word the time reader reads past ("next week before the": it reads "next
 * week"), nor go on past the "to" of a move: it names where to, not a
 * period's end ("shift my lunch on 2028-12-22 to Dec 22 at 12:00": the
 * lunch is read on the 22nd, not up to noon). */
static void hold_phrases(argcheck *a, const char *r)
{
    const int move = hx_agent_asks_move(r);
    for (const char *w = r; *w; w += strspn(w, " \t\n")) {
        const char *e = w;
        for (int k = 0; k < HELD_WORDS && *e; k++) {
            const char *last = e;
            e += strcspn(e, " \t\n");
            if (move && k > 0 && e - last == 2 && !strncasecmp(last, "to", 2)) break;
            size_t n = (size_t)(e - w);
            while (n && strchr(".,;!?", w[n - 1])) n--;
            if (w + n > last && !hx_when_dangles(last, (size_t)(w + n - last))) hold_if_accepted(a, w, n);
            e += strspn(e, " \t\n");
        }
        w += strcspn(w, " \t\n");
    }
}

/* The text's JSON string values ("key": "value") with no escape in them. */
static void hold_values(argcheck *a, const char *t)
{
    hx_jstr s = {.t = t, .n = strlen(t)};
    while (hx_jstr_next(&s))
        if (s.is_value && !s.escaped) hold_if_accepted(a, t + s.start, s.end - s.start);
}

/* The keys whose values name an item the tools gave (an event's uid, a
 * mail's id): a model can only copy them, and one cut short
 * ("f6aec107-0") names no item. */
static int id_key(const char *key) { return !strcmp(key, "uid") || !strcmp(key, "id"); }

/* The text's string values under key (as is, no check), held. */
static void hold_ids(argcheck *a, const char *t, const char *key)
{
    hx_jstr s = {.t = t, .n = strlen(t)};
    while (hx_jstr_next(&s)) {
        const size_t n = s.end - s.start;
        if (s.is_value && !s.escaped && n && n < VALUE_MAX && hx_jstr_under(&s, key) &&
            a->held.len + n + 1 <= HELD_MAX) {
            hx_buf_append(&a->held, t + s.start, n);
            hx_buf_putc(&a->held, 0);
        }
    }
}

/* Finds the values to hold the value just opened to: a period to read
 * ("range"), not an event's time, where a phrase of the request cut short
 * ("at 3pm" of the model's own "at 3pm on saturday") would write the event
 * on another day; an item's uid or id, to those the results gave, when
 * they gave any. */
static void find_held(argcheck *a)
{
    a->held.len = 0;
    if (!a->request && !a->text) return;
    if (id_key(a->js.key)) return hold_ids(a, a->text ? a->text : "", a->js.key);
    if (strcmp(a->js.key, "range") || !a->checked) return;
    hold_phrases(a, a->request ? a->request : "");
    hold_values(a, a->text ? a->text : "");
}

/* Whether the value so far with p[0, n) after it is a held value that no
 * longer one goes on from ("tomorrow" of "tomorrow morning" is not: the
 * longest phrase the request gives is the one it means): 1; 0 when it is
 * none but begins one; -1 when it begins none. */
static int ends_held(const argcheck *a, const char *p, size_t n)
{
    const size_t len = a->n_val + n;
    int is = 0, begins = 0;
    for (const char *h = a->held.data; h && h < a->held.data + a->held.len; h += strlen(h) + 1) {
        if (strlen(h) < len || strncasecmp(h, a->val, a->n_val) || strncasecmp(h + a->n_val, p, n))
            continue;
        begins = 1;
        if (h[len] == ' ') return 0;
        is |= !h[len];
    }
    return is ? 1 : begins ? 0 : -1;
}

/* Whether token t keeps the value open a held one's beginning, or closes
 * it as a whole held one. */
static int keeps_held(const argcheck *a, int32_t t)
{
    size_t n = 0;
    const char *p = hx_vocab_piece(a->v, t, &n);
    if (!p || hx_vocab_is_special(a->v, t)) return 0;
    const long at = closes_at(a, p, n);
    const int held = ends_held(a, p, at >= 0 ? (size_t)at : n);
    return at >= 0 ? held == 1 : held >= 0;
}

/* Masks the tokens that leave every held value, unless none is left. */
static void hold_apply(const argcheck *a, float *logits, int32_t n_vocab)
{
    int32_t left = 0;
    for (int32_t t = 0; t < n_vocab && !left; t++) left = isfinite(logits[t]) && keeps_held(a, t);
    for (int32_t t = 0; left && t < n_vocab; t++)
        if (isfinite(logits[t]) && !keeps_held(a, t)) logits[t] = -INFINITY;
}

/* ---- calls not to write again ----
 * A refused line is "tool\targs": the arguments as compact JSON, cut after
 * the closing quote of a last string value (so that the quote which would
 * finish the same call is the token masked, and the value can still grow
 * into another) or whole. */

/* Appends p[0, n) to the compact call text, blanks outside strings left
 * out (s: the scanner before p, advanced); 0 when it does not fit. */
static int norm_add(char *buf, size_t *len, hx_jscan *s, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int in_str = s->in_str;
        hx_jscan_byte(s, p[i]);
        if (!in_str && !s->in_str && (p[i] == ' ' || p[i] == '\n' || p[i] == '\t' || p[i] == '\r'))
            continue;
        if (*len + 1 >= CALL_NORM) return 0;
        buf[(*len)++] = p[i];
    }
    buf[*len] = 0;
    return 1;
}

/* The arguments in the compact call text c: after "arguments": or
 * "parameters": (Llama's), or NULL. */
static const char *args_of(const char *c)
{
    const char *k = strstr(c, "\"arguments\":");
    if (k) return k + 12;
    k = strstr(c, "\"parameters\":");
    return k ? k + 13 : NULL;
}

/* Whether the call's compact arguments a (NUL-terminated) begin with a
 * refused line's arguments for this tool. */
static int refused_call(const argcheck *a, const char *args)
{
    size_t tool = strlen(a->name);
    for (const char *l = a->refused; l && *l; l += strcspn(l, "\n") + (l[strcspn(l, "\n")] != 0)) {
        size_t len = strcspn(l, "\n");
        if (len <= tool || l[tool] != '\t' || strncmp(l, a->name, tool)) continue;
        if (!strncmp(args, l + tool + 1, len - tool - 1)) return 1;
    }
    return 0;
}

/* Whether token t would finish a refused call (its arguments whole). */
static int finishes_refused(const argcheck *a, int32_t t)
{
    size_t n = 0, len = a->n_norm;
    const char *p = hx_vocab_piece(a->v, t, &n);
    char c[CALL_NORM];
    hx_jscan js = a->nj;
    memcpy(c, a->norm, a->n_norm + 1);
    const char *args = p && norm_add(c, &len, &js, p, n) ? args_of(c) : NULL;
    return args && refused_call(a, args);
}

/* Masks each token that would finish a refused call, unless no token
 * would be left (the planner then refuses to run it again). */
static void refuse_apply(const argcheck *a, float *logits, int32_t n_vocab)
{
    if (!a->refused || !a->name[0] || a->n_norm >= CALL_NORM) return;
    const char *so_far = args_of(a->norm);
    if (so_far && refused_call(a, so_far)) return; /* written already */
    int32_t left = 0;
    for (int32_t t = 0; t < n_vocab && !left; t++)
        left = isfinite(logits[t]) && !finishes_refused(a, t);
    for (int32_t t = 0; left && t < n_vocab; t++)
        if (isfinite(logits[t]) && finishes_refused(a, t)) logits[t] = -INFINITY;
}

int hx_argcheck_stage_refuse(hx_sampler_stage *st, const char *calls)
{
    argcheck *a = st->ctx;
    char *copy = calls && *calls ? hx_strdup(calls) : NULL;
    if (calls && *calls && !copy) return HX_ERR_NOMEM;
    free(a->refused);
    a->refused = copy;
    return HX_OK;
}

static int argcheck_apply(void *ctx, float *logits, int32_t n_vocab)
{
    argcheck *a = ctx;
    a->defer = 0;
    if (*a->in_call) refuse_apply(a, logits, n_vocab);
    if (!*a->in_call || !a->js.in_str || !a->js.is_val || !a->name[0]) return HX_OK;
    if (a->checked < 0) {
        a->checked = a->check && a->check(a->user, a->name, a->js.key, "") >= 0;
        find_held(a);
    }
    if (a->held.len) hold_apply(a, logits, n_vocab);
    if (!a->checked) return HX_OK;
    int32_t best = -1, left = 0;
    for (int32_t t = 0; t < n_vocab; t++)
        if (isfinite(logits[t]) && (best < 0 || logits[t] > logits[best])) best = t;
    if (best < 0) return HX_OK;
    size_t n = 0;
    const char *p = hx_vocab_piece(a->v, best, &n);
    long at = p ? closes_at(a, p, n) : -1;
    a->defer = p && check_with(a, p, at >= 0 ? (size_t)at : n) == 1;
    /* closing a value the check refuses */
    if (a->n_val >= HOLD_MAX) return HX_OK;
    for (int32_t t = 0; t < n_vocab && !left; t++) {
        p = isfinite(logits[t]) ? hx_vocab_piece(a->v, t, &n) : NULL;
        left = p && ((at = closes_at(a, p, n)) < 0 || check_with(a, p, (size_t)at) != 0);
    }
    for (int32_t t = 0; left && t < n_vocab; t++) {
        p = isfinite(logits[t]) ? hx_vocab_piece(a->v, t, &n) : NULL;
        if (p && (at = closes_at(a, p, n)) >= 0 && check_with(a, p, (size_t)at) == 0)
            logits[t] = -INFINITY;
    }
    return HX_OK;
}

/* The tool's name of the call, from its first bytes: "name": "...". */
static void read_name(argcheck *a)
{
    a->head[a->n_head] = 0;
    const char *k = strstr(a->head, "\"name\"");
    const char *q = k ? strchr(k + 6, '"') : NULL;
    const char *e = q ? strchr(q + 1, '"') : NULL;
    if (e && (size_t)(e - q - 1) < sizeof a->name)
        snprintf(a->name, sizeof a->name, "%.*s", (int)(e - q - 1), q + 1);
}

static int argcheck_accept(void *ctx, int32_t token)
{
    argcheck *a = ctx;
    size_t n = 0;
    const char *p = hx_vocab_is_special(a->v, token) ? NULL : hx_vocab_piece(a->v, token, &n);
    if (!*a->in_call) {
        a->was_in_call = 0;
        return HX_OK;
    }
    if (!a->was_in_call) { /* a new call */
        memset(&a->js, 0, sizeof a->js);
        memset(&a->nj, 0, sizeof a->nj);
        a->n_head = a->n_val = a->n_norm = 0, a->name[0] = a->norm[0] = 0, a->checked = -1;
    }
    a->was_in_call = 1;
    if (p && a->n_norm < CALL_NORM && !norm_add(a->norm, &a->n_norm, &a->nj, p, n))
        a->n_norm = CALL_NORM;
    for (size_t i = 0; p && i < n; i++) {
        if (a->n_head + 1 < CALL_HEAD) a->head[a->n_head++] = p[i];
        const int what = hx_jscan_byte(&a->js, p[i]);
        if (what == HX_JSCAN_OPEN) a->n_val = 0, a->checked = -1;
        else if (what == HX_JSCAN_BYTE && a->n_val + 1 < VALUE_MAX) a->val[a->n_val++] = p[i];
    }
    if (!a->name[0]) read_name(a);
    return HX_OK;
}

static void argcheck_free(void *ctx)
{
    argcheck *a = ctx;
    if (a) free(a->refused), free(a->request), free(a->text), hx_buf_free(&a->held);
    free(a);
}

int hx_argcheck_stage_new(const hx_vocab *v, hx_arg_check_fn check, void *user,
                          const int *in_call, hx_sampler_stage *out, const int **defer)
{
    argcheck *a = hx_calloc(1, sizeof *a);
    if (!a) return HX_ERR_NOMEM;
    *a = (argcheck){.v = v, .in_call = in_call, .check = check, .user = user, .checked = -1};
    hx_buf_init(&a->held);
    *defer = &a->defer;
    *out = (hx_sampler_stage){HX_SAMPLER_STAGE_API, "argument check", a, argcheck_apply,
                              argcheck_accept, NULL, NULL, argcheck_free};
    return HX_OK;
}

int hx_argcheck_stage_hold(hx_sampler_stage *st, const char *request, const char *text)
{
    argcheck *a = st->ctx;
    char *r = request ? hx_strdup(request) : NULL, *t = text ? hx_strdup(text) : NULL;
    if ((request && !r) || (text && !t)) {
        free(r), free(t);
        return HX_ERR_NOMEM;
    }
    free(a->request), free(a->text);
    a->request = r, a->text = t;
    return HX_OK;
}

int hx_argcheck_refused_line(const char *tool, const cJSON *args, hx_buf *out)
{
    char *j = args ? cJSON_PrintUnformatted(args) : hx_strdup("{}");
    if (!j) return HX_ERR_NOMEM;
    size_t n = strlen(j);
    if (n >= 2 && j[n - 1] == '}' && j[n - 2] == '"') n--; /* up to the last value's quote */
    int rc = hx_buf_printf(out, "%s\t%.*s\n", tool, (int)n, j);
    free(j);
    return rc ? HX_ERR_NOMEM : HX_OK;
}
