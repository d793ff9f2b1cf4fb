/* spec.c: batched forced runs and speculative decoding with n-gram and
 * copy drafts, verified by the sampler itself on the logits of one batched
 * pass. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ctx_int.h"
#include "engine/grammar/grammar.h"
#include "engine/sample.h"
#include "engine/spec.h"
#include "engine/spec_int.h"
#include "engine/vocab.h"

/* A pass of at most this many tokens stays on attention's one-query path
 * (below FA_TILE_Q), whose rows (with split_rows) match one-token passes. */
#define SPEC_MAX_BATCH 48
_Static_assert(SPEC_MAX_BATCH < FA_TILE_Q, "spec passes must stay on the one-query path");

/* Draft sources, each with its own acceptance rate: the context's
 * n-grams, the grammar's forced runs, copies of a string (a token that
 * starts a new word, where the model may end the string instead; one
 * inside a word, which it mostly goes on with; the first of a copy
 * looked up by the string's first byte alone, a guess at the word), the
 * memo of the model's own output. */
enum { SRC_NGRAM, SRC_GRAMMAR, SRC_COPY_WORD, SRC_MEMO, SRC_COPY_IN, SRC_COPY_1, N_SRC };
_Static_assert(2 * N_SRC <= HX_SPEC_N_RATES, "a rate per source, apart at a string's first byte");

struct hx_spec {
    hx_ctx *c;
    const hx_vocab *v;
    hx_spec_params p;
    int32_t n_vocab;
    float *zeros;    /* (n_vocab) logits that prefer nothing */
    int32_t *batch;  /* (max_batch) tokens of the next pass */
    int32_t *seq;    /* hist followed by the batch, for the lookup */
    int32_t *q;      /* (max_batch + 1) the last step's output ... */
    int qn, qi;      /* ... its count, and how many hx_spec_next gave */
    int seq_cap;
    hx_spec_stats st;
    /* the memo's record (spec_int.h), per draft source (+ N_SRC at a
     * string's first byte, where the model chooses a value: a guess there
     * is often wrong where the same source is right elsewhere): drafts
     * reached and accepted (those after a rejected one are not reached);
     * and the pass times */
    hx_spec_learned *lr;
    uint8_t dsrc[SPEC_MAX_BATCH]; /* the source of each draft of the pass */
    int copy_from; /* the bytes of the string the last copy draft followed */
    hx_spec_memo *own, *memo; /* the memo kept, and the one in use */
    char *text;  /* the context's bytes, for copy drafts */
    size_t text_cap;
    /* optional grammar drafts: a shadow matcher fed every produced token,
     * and the vocabulary's pieces by first byte, longest first */
    hx_matcher *gm;
    const hx_gvocab *gv;
    const char *const *tpiece; /* gv's token table (hx_gvocab_tokens) */
    const uint32_t *tlen;
    const uint8_t *tflags;
    int g_off;           /* the shadow lost track this turn */
    int32_t *by_byte;    /* token ids grouped by first byte ... */
    int32_t first[257];  /* ... group b is by_byte[first[b], first[b+1]) */
    /* the model's whitespace style, for grammar drafts where JSON allows
     * optional whitespace: ws_next[b2 << 8 | b1] is the whitespace byte that
     * last followed the bytes b2 b1 in the context (WS_NONE: another byte
     * did; 0: never seen); last2 the context's last two bytes */
    uint8_t ws_next[1 << 16];
    unsigned last2;
};
#define WS_NONE 0xff

hx_spec_params hx_spec_default_params(void)
{
    hx_spec_params p = {16, 8, 2, 4, 0.3};
    return p;
}

static int clamp(int x, int lo, int hi) { return x < lo ? lo : x > hi ? hi : x; }

hx_spec *hx_spec_new(hx_ctx *c, const hx_vocab *v, const hx_spec_params *p)
{
    hx_spec_params d = hx_spec_default_params();
    hx_spec *sp = c && v ? hx_calloc(1, sizeof *sp) : NULL;
    if (!sp) return NULL;
    sp->c = c;
    sp->v = v;
    sp->p = p ? *p : d;
    sp->p.max_batch = clamp(sp->p.max_batch, 1, SPEC_MAX_BATCH);
    sp->p.max_draft = clamp(sp->p.max_draft, 0, sp->p.max_batch - 1);
    sp->p.ngram_min = clamp(sp->p.ngram_min, 1, 16);
    sp->p.ngram_max = clamp(sp->p.ngram_max, sp->p.ngram_min, 16);
    sp->n_vocab = hx_model_hparams(hx_ctx_model(c))->n_vocab;
    sp->zeros = hx_calloc((size_t)sp->n_vocab, sizeof *sp->zeros);
    sp->batch = hx_malloc_array((size_t)sp->p.max_batch, sizeof *sp->batch);
    sp->q = hx_malloc_array((size_t)sp->p.max_batch + 1, sizeof *sp->q);
    sp->own = hx_spec_memo_new();
    if (!sp->zeros || !sp->batch || !sp->q || !sp->own) {
        hx_spec_free(sp);
        return NULL;
    }
    hx_spec_set_memo(sp, NULL);
    return sp;
}

void hx_spec_free(hx_spec *sp)
{
    if (!sp) return;
    free(sp->zeros);
    free(sp->batch);
    free(sp->seq);
    free(sp->text);
    free(sp->q);
    hx_spec_memo_free(sp->own);
    hx_matcher_free(sp->gm);
    free(sp->by_byte);
    free(sp);
}

hx_spec_stats hx_spec_get_stats(const hx_spec *sp) { return sp->st; }

void hx_spec_set_memo(hx_spec *sp, hx_spec_memo *m)
{
    sp->memo = m ? m : sp->own;
    sp->lr = hx_spec_memo_learned(sp->memo);
    if (sp->lr->init) return;
    for (int i = 0; i < 2 * N_SRC; i++) sp->lr->tried[i] = 2, sp->lr->taken[i] = 1; /* 1 in 2 */
    sp->lr->tried[SRC_COPY_IN] = 10, sp->lr->taken[SRC_COPY_IN] = 9; /* a copied word goes on */
    sp->lr->init = 1;
}

/* The token the stages force next, or -1. The forced token is confirmed by
 * sampling it from logits that prefer nothing: every stage (a loop guard
 * may still ban it) and, when sampling, the one random draw a plain step
 * makes, so the generator's stream stays the same. */
static int32_t forced_next(hx_spec *sp, hx_sampler *s)
{
    int32_t t;
    if (hx_sampler_forced(s, &t, 1) != 1) return -1;
    int32_t x = hx_sampler_sample(s, sp->zeros, sp->n_vocab);
    return x == t ? t : -1;
}

/* Samples from logits and accepts; the token, or -rc. */
static int32_t choose(hx_sampler *s, const float *logits, int32_t nv,
                      hx_err *err)
{
    int32_t t = logits ? hx_sampler_sample(s, logits, nv) : -1;
    if (t < 0)
        return -hx_err_set(err, HX_ERR_STATE, "the sampler allows no next token");
    if (hx_sampler_accept(s, t))
        return -hx_err_set(err, HX_ERR_STATE, "the sampler rejected token %d", t);
    return t;
}

/* Up to max tokens that followed the most recent earlier occurrence of
 * the longest suffix of seq[0, n) (ngram_max down to ngram_min tokens)
 * into d; how many. */
static int ngram_draft(const hx_spec *sp, const int32_t *seq, int n,
                       int32_t *d, int max, int *klen)
{
    *klen = 0;
    for (int k = sp->p.ngram_max; k >= sp->p.ngram_min && max > 0; k--) {
        if (k >= n) continue;
        const int32_t *key = seq + n - k;
        for (int j = n - k - 1; j >= 0; j--) {
            if (seq[j] != key[0] || memcmp(seq + j, key, (size_t)k * sizeof *key))
                continue;
            int m = 0;
            while (m < max && j + k + m < n) d[m] = seq[j + k + m], m++;
            *klen = m ? k : 0;
            return m;
        }
    }
    return 0;
}

/* The fit of pass times t ~ a + b B measured so far (B rows): 0 until
 * known. */
static int pass_fit(const hx_spec *sp, double *a, double *b)
{
    const hx_spec_learned *l = sp->lr;
    double var = l->s1 * l->sBB - l->sB * l->sB;
    if (l->s1 < 8 || var <= 1e-9 * l->s1 * l->s1) return 0;
    *b = (l->s1 * l->sBT - l->sB * l->sT) / var;
    *a = (l->sT - *b * l->sB) / l->s1;
    return *b > 0;
}

/* The least chance of acceptance for which one more draft pays: the
 * share of a one-token pass that one more row costs, b / (a + b) (nearly a
 * pass on a small model whose passes are mostly attention; half of one
 * on a mixture of experts, where each token reads its own experts), at
 * least min_accept. Accepted, a draft saves a pass (a + b); rejected, it
 * cost a row (b). */
static double draft_floor(const hx_spec *sp)
{
    double a, b, lim = sp->p.min_accept;
    if (lim <= 0 || !pass_fit(sp, &a, &b)) return lim;
    double c = a <= 0 ? 1 : b / (a + b);
    return c > lim ? c : lim;
}

static void note_pass(hx_spec *sp, int B, double t)
{
    const double k = 0.98;
    hx_spec_learned *l = sp->lr;
    l->s1 = l->s1 * k + 1;
    l->sB = l->sB * k + B;
    l->sBB = l->sBB * k + (double)B * B;
    l->sT = l->sT * k + t;
    l->sBT = l->sBT * k + B * t;
}

/* How many of the n drafts (sources sp->dsrc) are worth a try: the
 * longest run whose last token is still reached and accepted with
 * probability >= min_accept (or the measured cost of a row, if larger),
 * each accepted at its source's observed rate once the one before was.
 * None when the first is too unlikely, but one every PROBE_EVERY steps
 * so its source's rate can recover. */
#define PROBE_EVERY 16
static int draft_budget(hx_spec *sp, int n)
{
    double lim = draft_floor(sp), q = 1;
    if (n > sp->p.max_draft) n = sp->p.max_draft;
    if (lim <= 0 || n <= 0) return n > 0 ? n : 0;
    hx_spec_learned *l = sp->lr;
    int k = 0, s0 = sp->dsrc[0];
    while (k < n && (q *= l->taken[sp->dsrc[k]] / l->tried[sp->dsrc[k]]) >= lim) k++;
    if (k == 0 && ++l->idle[s0] >= PROBE_EVERY) k = 1;
    if (k > 0) l->idle[s0] = 0;
    return k;
}

/* Feeds the outcome of nd drafts, i accepted, to the decaying rates of
 * their sources: drafts [0, i) accepted, draft i (if any) rejected, those
 * after it never reached. */
static void draft_outcome(hx_spec *sp, int nd, int i)
{
    double tr[2 * N_SRC] = {0}, tk[2 * N_SRC] = {0};
    for (int j = 0; j < nd && j <= i; j++) tr[sp->dsrc[j]] += 1, tk[sp->dsrc[j]] += j < i;
    for (int s = 0; s < 2 * N_SRC; s++) {
        if (tr[s] == 0) continue;
        sp->lr->tried[s] = sp->lr->tried[s] * 0.9 + tr[s];
        sp->lr->taken[s] = sp->lr->taken[s] * 0.9 + tk[s];
    }
}

/* ---- grammar drafts ---- */

static int is_ws(int b) { return b == ' ' || b == '\n' || b == '\t' || b == '\r'; }

/* Notes which byte followed each pair of bytes (the whitespace style). */
static void learn_bytes(hx_spec *sp, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int x = (uint8_t)p[i];
        sp->ws_next[sp->last2] = is_ws(x) ? (uint8_t)x : WS_NONE;
        sp->last2 = ((sp->last2 << 8) | (unsigned)x) & 0xffff;
    }
}

static void learn_token(hx_spec *sp, int32_t t)
{
    size_t len = 0;
    const char *p = hx_vocab_piece(sp->v, t, &len);
    if (p) learn_bytes(sp, p, len);
}

/* The style of the calls in the context (a turn starts): the bytes
 * between the "<tool_call>" and "</tool_call>" special tokens, where the
 * model's own earlier calls are (the tool list and results may be
 * written in another style). Without such tokens, nothing is learnt
 * before the turn's own tokens. */
static void learn_context(hx_spec *sp, const int32_t *hist, int n)
{
    int32_t open = sp->gv ? hx_gvocab_mark_token(sp->gv, HX_GMARK_OPEN) : -1;
    int32_t close = sp->gv ? hx_gvocab_mark_token(sp->gv, HX_GMARK_CLOSE) : -1;
    int inside = 0;
    for (int i = 0; open >= 0 && i < n; i++) {
        if (hist[i] == open || hist[i] == close) {
            inside = hist[i] == open;
            sp->last2 = 0;
        } else if (inside) {
            learn_token(sp, hist[i]);
        }
    }
    sp->last2 = 0;
}

/* The bytes the grammar allows next from config c when they are one byte
 * b, or b and optional whitespace (skipped: a guess, verified anyway);
 * -1 otherwise. */
static int only_byte(hx_matcher *m, uint32_t c)
{
    int only = -1;
    for (int b = 0; b < 256; b++) {
        if (!hx_gm_step(m, c, b) || is_ws(b)) continue;
        if (only >= 0) return -1;
        only = b;
    }
    return only;
}

/* The grammar's one continuation from the shadow's state, up to max bytes
 * (stopping where it may end); where it allows optional whitespace, the
 * whitespace the context last wrote after the same two bytes. cfg[i] gets
 * the grammar's config before byte i. */
static int forced_bytes(hx_spec *sp, char *out, uint32_t *cfg, int max)
{
    hx_matcher *m = sp->gm;
    uint32_t c = hx_matcher_state(m), cw = 0;
    unsigned key = sp->last2;
    int n = 0, b;
    while (n < max && c && !hx_gm_can_end(m, c) && (b = only_byte(m, c)) >= 0) {
        int w = sp->ws_next[key];
        if (!w && ((key & 0xff) == ':' || (key & 0xff) == ',')) w = ' '; /* json.dumps */
        if (w && w != WS_NONE && (cw = hx_gm_step(m, c, w))) b = w;
        else cw = hx_gm_step(m, c, b);
        cfg[n] = c;
        out[n++] = (char)b;
        key = ((key << 8) | (unsigned)b) & 0xffff;
        c = cw;
    }
    return n;
}

/* The longest piece that starts bytes s[0, n), or -1. */
static int32_t longest_piece(const hx_spec *sp, const char *s, int n)
{
    int b = (uint8_t)s[0];
    for (int32_t i = sp->first[b]; i < sp->first[b + 1]; i++) {
        int32_t t = sp->by_byte[i];
        if ((int)sp->tlen[t] <= n && !memcmp(sp->tpiece[t], s, sp->tlen[t]))
            return t;
    }
    return -1;
}

static int shadow_on(const hx_spec *sp)
{
    return sp->gm && !sp->g_off && !hx_matcher_ended(sp->gm);
}

/* The special token whose mark text (<tool_call>, ...) starts bytes
 * s[0, n), or -1: the grammar matches those as one token. */
static int32_t mark_piece(const hx_spec *sp, const char *s, int n, int *len)
{
    for (int k = 0; k < HX_GMARK_COUNT; k++) {
        int l = (int)strlen(hx_gmark_text[k]);
        int32_t t = hx_gvocab_mark_token(sp->gv, k);
        if (t >= 0 && l <= n && !memcmp(s, hx_gmark_text[k], (size_t)l)) {
            *len = l;
            return t;
        }
    }
    return -1;
}

/* Whether a longer piece extends token t where the grammar allows it
 * from config c (before t): a tokenizer would likely have merged t with
 * what follows the forced run (".list", not "." then "list"; ' {"', not
 * ' {' then '"'). */
static int extends(hx_spec *sp, int32_t t, uint32_t c)
{
    const char *p = sp->tpiece[t];
    uint32_t n = sp->tlen[t];
    for (uint32_t j = 0; j < n && c; j++) c = hx_gm_step(sp->gm, c, (uint8_t)p[j]);
    int b = (uint8_t)p[0];
    for (int32_t i = sp->first[b]; c && i < sp->first[b + 1]; i++) {
        int32_t u = sp->by_byte[i];
        if (sp->tlen[u] <= n) break; /* longest first */
        const char *q = sp->tpiece[u];
        if (!memcmp(q, p, n) && hx_gm_step(sp->gm, c, (uint8_t)q[n]))
            return 1;
    }
    return 0;
}

/* Drafts the grammar's forced bytes, split greedily into the longest
 * vocabulary pieces (its marks as their special tokens), without a last
 * piece that a longer one would extend past the run; how many tokens (at
 * most max), *nbytes their bytes. */
static int grammar_draft(hx_spec *sp, int32_t *d, int max, int *nbytes)
{
    char bytes[128];
    uint32_t cfg[sizeof bytes];
    int k = 0, at = 0, len = 0, last_at = 0;
    if (!shadow_on(sp)) return *nbytes = 0;
    int n = forced_bytes(sp, bytes, cfg, (int)sizeof bytes);
    while (at < n && k < max) {
        int32_t t = mark_piece(sp, bytes + at, n - at, &len);
        if (t < 0 && (t = longest_piece(sp, bytes + at, n - at)) >= 0) len = (int)sp->tlen[t];
        if (t < 0) break;
        d[k++] = t;
        last_at = at;
        at += len;
    }
    if (k > 0 && at == n && !(sp->tflags[d[k - 1]] & HX_GTOK_SPECIAL) &&
        extends(sp, d[k - 1], cfg[last_at]))
        k--, at = last_at;
    *nbytes = at;
    return k;
}

/* The bytes the grammar matches for token t (a mark's text for its
 * special token, as hx_matcher_accept does); NULL for another special or
 * end token. */
static const char *grammar_bytes(const hx_spec *sp, int32_t t, uint32_t *len)
{
    const char *mark = hx_gvocab_mark_of(sp->gv, t);
    if (mark) return *len = (uint32_t)strlen(mark), mark;
    if (sp->tflags[t] & (HX_GTOK_SPECIAL | HX_GTOK_EOG)) return NULL;
    *len = sp->tlen[t];
    return sp->tpiece[t];
}

/* How many of the drafts d[0, n) the grammar allows in a row from the
 * shadow's state (an end or unknown special token ends the check);
 * *nbytes the bytes of those checked. */
static int grammar_allows(hx_spec *sp, const int32_t *d, int n, int *nbytes)
{
    *nbytes = 0;
    if (!shadow_on(sp)) return n;
    hx_matcher *m = sp->gm;
    uint32_t c = hx_matcher_state(m), len = 0;
    for (int i = 0; i < n; i++) {
        const char *p = grammar_bytes(sp, d[i], &len);
        if (!p) return n;
        for (uint32_t j = 0; j < len; j++)
            if (!(c = hx_gm_step(m, c, (uint8_t)p[j]))) return i;
        *nbytes += (int)len;
    }
    return n;
}

static int cmp_len_desc(const void *a, const void *b, void *v)
{
    const uint32_t *len = v;
    uint32_t la = len[*(const int32_t *)a], lb = len[*(const int32_t *)b];
    /* equal bytes: the higher id, not a byte-fallback token (SPM's come first) */
    return la < lb ? 1 : la > lb ? -1 : *(const int32_t *)b - *(const int32_t *)a;
}

/* The text tokens of gv grouped by first byte, longest first. */
static int index_pieces(hx_spec *sp, const hx_gvocab *gv)
{
    int32_t n = hx_gvocab_tokens(gv, &sp->tpiece, &sp->tlen, &sp->tflags);
    const char *const *piece = sp->tpiece;
    const uint32_t *len = sp->tlen;
    const uint8_t *flags = sp->tflags;
    sp->by_byte = hx_malloc_array((size_t)n + 1, sizeof *sp->by_byte);
    if (!sp->by_byte) return HX_ERR_NOMEM;
    memset(sp->first, 0, sizeof sp->first);
    for (int32_t t = 0; t < n; t++)
        if (len[t] && !(flags[t] & (HX_GTOK_SPECIAL | HX_GTOK_EOG)))
            sp->first[(uint8_t)piece[t][0] + 1]++;
    for (int b = 0; b < 256; b++) sp->first[b + 1] += sp->first[b];
    int32_t fill[256];
    memcpy(fill, sp->first, sizeof fill);
    for (int32_t t = 0; t < n; t++)
        if (len[t] && !(flags[t] & (HX_GTOK_SPECIAL | HX_GTOK_EOG)))
            sp->by_byte[fill[(uint8_t)piece[t][0]]++] = t;
    for (int b = 0; b < 256; b++)
        qsort_r(sp->by_byte + sp->first[b], (size_t)(sp->first[b + 1] - sp->first[b]),
                sizeof *sp->by_byte, cmp_len_desc, (void *)len);
    return HX_OK;
}

int hx_spec_set_grammar(hx_spec *sp, hx_grammar *g, const hx_gvocab *gv)
{
    if (sp->gm && hx_matcher_grammar(sp->gm) == g && sp->gv == gv) return HX_OK;
    hx_matcher_free(sp->gm);
    sp->gm = NULL;
    if (!g) return HX_OK;
    if (!gv) return HX_ERR_INVALID;
    if (sp->gv != gv) {
        free(sp->by_byte);
        sp->by_byte = NULL;
        sp->gv = gv;
        int rc = index_pieces(sp, gv);
        if (rc) return rc;
    }
    return (sp->gm = hx_matcher_new(g, gv)) ? HX_OK : HX_ERR_NOMEM;
}

/* Keeps the shadow matcher and the whitespace style in step with the
 * produced tokens. */
static void produced(hx_spec *sp, int32_t t)
{
    learn_token(sp, t);
    hx_spec_memo_add(sp->memo, t);
    if (sp->gm && !sp->g_off && hx_matcher_accept(sp->gm, t)) sp->g_off = 1;
}

/* ---- copy drafts ----
 * A string the model writes is mostly copied from the context (a title
 * from the request, a uid from a tool's result), but the n-gram lookup
 * misses it: the model's tokens for it are not the context's ("Lunch"
 * after a quote, " Lunch" in the request; " Leadom" split otherwise). So
 * the bytes of the string so far are looked up in the context's bytes,
 * and what followed them there, tokenized as the model would write it,
 * is the draft. */
#define COPY_MIN 1  /* bytes of a string written before a lookup */
#define COPY_MAX 64 /* bytes of the string so far, and of a copy's draft */

static int word_byte(char c) { return isalnum((unsigned char)c) || (c & 0x80); }

/* The bytes of seq[0, n) into sp->text; their count, or -1. */
static long context_text(hx_spec *sp, const int32_t *seq, int n)
{
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        size_t l = 0;
        const char *p = hx_vocab_piece(sp->v, seq[i], &l);
        if (!p) continue;
        if (len + l > sp->text_cap) {
            size_t cap = (len + l) * 2 + 256;
            char *t = hx_realloc(sp->text, cap);
            if (!t) return -1;
            sp->text = t, sp->text_cap = cap;
        }
        memcpy(sp->text + len, p, l);
        len += l;
    }
    return (long)len;
}

/* Tokens of src[0, n) after the first nv bytes, where a token ends
 * exactly there, into d (at most max); the last dropped unless whole
 * (the copy ended at a quote or a line's end, not cut). */
static int copy_tokens(const hx_spec *sp, const char *src, size_t n, size_t nv, int whole,
                       int32_t *d, int max)
{
    int32_t tok[2 * COPY_MAX];
    int32_t nt = hx_tokenize(sp->v, src, n, tok, 2 * COPY_MAX, 0, 0);
    if (nt <= 0) return 0;
    size_t acc = 0;
    int i = 0;
    while (i < nt && acc < nv) {
        size_t l = 0;
        hx_vocab_piece(sp->v, tok[i++], &l);
        acc += l;
    }
    int end = whole ? nt : nt - 1, m = 0;
    if (acc != nv) return 0;
    while (m < max && i + m < end) d[m] = tok[i + m], m++;
    return m;
}

/* spec_int.h */
int hx_spec_copy_draft(hx_spec *sp, const int32_t *seq, int n, int32_t *d, int max)
{
    long len = context_text(sp, seq, n), q = len - 1;
    const char *t = sp->text;
    while (q >= 0 && len - q <= COPY_MAX && t[q] != '"' && t[q] != '\n') q--;
    if (q < 0 || t[q] != '"' || len - q - 1 < COPY_MIN) return 0;
    const char *v = t + q + 1;
    if (!word_byte(v[0]) && !strchr("/.+-@_(#~", v[0])) return 0; /* '}}' after a closing quote */
    const size_t nv = (size_t)(len - q - 1);
    sp->copy_from = (int)nv;
    for (long p = q - (long)nv; p >= 0; p--) {
        if (memcmp(t + p, v, nv) || (p > 0 && word_byte(t[p - 1]) && word_byte(v[0]))) continue;
        size_t nc = 0;
        const char *c = t + p + nv;
        while (nc < COPY_MAX && p + (long)(nv + nc) < q && c[nc] != '"' && c[nc] != '\n') nc++;
        int whole = p + (long)(nv + nc) < q && (c[nc] == '"' || c[nc] == '\n');
        return nc ? copy_tokens(sp, t + p, nv + nc, nv, whole, d, max) : 0;
    }
    return 0;
}

/* Whether the output is at a string's first byte (a key's or a value's):
 * after a quote where the grammar allows a letter. */
static int string_start(const hx_spec *sp)
{
    return shadow_on(sp) && (sp->last2 & 0xff) == '"' &&
           hx_gm_step(sp->gm, hx_matcher_state(sp->gm), 'a');
}

/* Whether token t starts a new word of a copied string (where the model
 * may end the string instead). */
static int word_start(const hx_spec *sp, int32_t t)
{
    size_t l = 0;
    const char *p = hx_vocab_piece(sp->v, t, &l);
    return p && l && strchr(" ,;<>()[]{}|!?\t\n", p[0]);
}

/* The n-gram draft after hist[0, n_hist) followed by batch[pend, nb) into
 * d (at most max), cut where the grammar stops allowing it; *nbytes its
 * bytes the grammar checked. */
static int ngram_allowed(hx_spec *sp, const int32_t *hist, int n_hist, int pend, int nb,
                         int32_t *d, int max, int *nbytes)
{
    int n = n_hist + nb - pend;
    *nbytes = 0;
    if (n > sp->seq_cap) {
        int cap = n * 2 + 64;
        int32_t *q = hx_realloc(sp->seq, (size_t)cap * sizeof *q);
        if (!q) return 0; /* no drafts, still correct */
        sp->seq = q;
        sp->seq_cap = cap;
    }
    memcpy(sp->seq, hist, (size_t)n_hist * sizeof *hist);
    memcpy(sp->seq + n_hist, sp->batch + pend, (size_t)(nb - pend) * sizeof *hist);
    int k = hx_spec_copy_draft(sp, sp->seq, n, d, max);
    for (int i = 0; i < k; i++) sp->dsrc[i] = word_start(sp, d[i]) ? SRC_COPY_WORD : SRC_COPY_IN;
    if (k > 0 && sp->copy_from == 1) sp->dsrc[0] = SRC_COPY_1; /* which word: a guess */
    if (k > 0) return grammar_allows(sp, d, k, nbytes);
    /* the longer match of the context's and the memo's that the grammar
     * allows a token of */
    int32_t md[SPEC_MAX_BATCH];
    int lc, lm, mb = 0, src = SRC_NGRAM;
    int km = hx_spec_memo_draft(sp->memo, sp->seq, n, md, max, &lm);
    k = ngram_draft(sp, sp->seq, n, d, max, &lc);
    k = grammar_allows(sp, d, k, nbytes);
    km = grammar_allows(sp, md, km, &mb);
    if (km > 0 && (lm >= lc || k == 0)) {
        memcpy(d, md, (size_t)km * sizeof *md);
        src = SRC_MEMO, k = km, *nbytes = mb;
    }
    memset(sp->dsrc, src, (size_t)k);
    if (k && string_start(sp)) sp->dsrc[0] += N_SRC;
    return k;
}

/* Drafts after hist[0, n_hist) followed by batch[pend, nb) into
 * batch[nb..) (their sources into sp->dsrc): the grammar's forced run, or
 * the n-gram continuation where it covers that run (the context's own
 * tokens for the same bytes, and what followed them), cut to what the
 * grammar allows and to what their sources' rates are worth. */
static int draft(hx_spec *sp, const int32_t *hist, int n_hist, int pend,
                 int nb, int max)
{
    int32_t gd[SPEC_MAX_BATCH];
    int gb = 0, ngb = 0;
    if (max <= 0) return 0;
    int k = grammar_draft(sp, gd, max, &gb);
    int kn = ngram_allowed(sp, hist, n_hist, pend, nb, sp->batch + nb, max, &ngb);
    if (k > 0 && !(kn > 0 && ngb >= gb)) { /* the grammar's run */
        memcpy(sp->batch + nb, gd, (size_t)k * sizeof *gd);
        memset(sp->dsrc, SRC_GRAMMAR, (size_t)k);
        return draft_budget(sp, k);
    }
    /* an n-gram, a copy or the memo; where it covers the grammar's run,
     * its tokens over the run count as the grammar's */
    uint32_t len = 0;
    for (int i = 0, by = 0; i < kn && by < gb; i++) {
        by += grammar_bytes(sp, sp->batch[nb + i], &len) ? (int)len : gb;
        sp->dsrc[i] = SRC_GRAMMAR;
    }
    return draft_budget(sp, kn);
}

/* One pass over batch[0, n) keeping the logits of rows [out_from, n):
 * the forced rows before the first that is sampled need none. */
static int run(hx_spec *sp, int n, int out_from, hx_err *err)
{
    sp->c->split_rows = 1; /* each row as a one-token pass computes it */
    double t0 = hx_time_mono();
    int rc = hx_decode_rows(sp->c, sp->batch, n, out_from);
    double dt = hx_time_mono() - t0;
    note_pass(sp, n, dt);
    sp->st.pass_seconds += dt;
    sp->c->split_rows = 0;
    if (rc == HX_ERR_FULL)
        return hx_err_set(err, rc, "the context is full (%d tokens)",
                          hx_ctx_n_ctx(sp->c));
    if (rc) return hx_err_set(err, rc, "decode: %s", hx_ctx_errmsg(sp->c));
    sp->st.passes++;
    return HX_OK;
}

/* Verifies drafts batch[nb, nb + nd) against the logits of the pass over
 * batch[0, nb + nd): row nb - 1 + i gives the token after draft i - 1.
 * Appends the chosen tokens to out; drops the cache rows of the drafts
 * that were not chosen. Returns the count appended, or -rc. */
static int verify(hx_spec *sp, hx_sampler *s, int n_past, int nb, int nd,
                  int32_t *out, hx_err *err)
{
    int i = 0, n = 0;
    for (;; i++) {
        const float *lg = hx_ctx_logits(sp->c, nd ? nb - 1 + i : -1);
        int32_t t = choose(s, lg, sp->n_vocab, err);
        if (t < 0) return t;
        out[n++] = t;
        produced(sp, t);
        if (i == nd || t != sp->batch[nb + i] || hx_vocab_is_eog(sp->v, t)) break;
    }
    sp->st.accepted += i;
    draft_outcome(sp, nd, i);
    hx_ctx_truncate(sp->c, n_past + nb + i);
    return n;
}

int hx_spec_step(hx_spec *sp, hx_sampler *s, const int32_t *hist, int n_hist,
                 int32_t *out, hx_err *err)
{
    const int n_past = hx_ctx_n_past(sp->c), pend = n_hist - n_past;
    if (pend < 0 || pend > sp->p.max_batch)
        return -hx_err_set(err, HX_ERR_INVALID, "the context holds %d tokens, "
                           "the history %d", n_past, n_hist);
    memcpy(sp->batch, hist + n_past, (size_t)pend * sizeof *hist);
    int nb = pend, n_out = 0;
    int32_t t = 0;
    if (pend == 0) { /* a turn starts: the context's last logits are next */
        if (sp->gm) hx_matcher_reset(sp->gm);
        sp->g_off = 0;
        learn_context(sp, hist, n_hist);
        hx_spec_memo_turn(sp->memo, hist, n_hist);
        if ((t = choose(s, hx_ctx_logits(sp->c, -1), sp->n_vocab, err)) < 0) return t;
        out[n_out++] = t;
        produced(sp, t);
        /* alone, at once: the turn's first token waits for no pass; it
         * rides the next step's, with the forced run and drafts after it */
        return sp->st.tokens++, 1;
    }
    while (nb < sp->p.max_batch && (t = forced_next(sp, s)) >= 0) {
        if (hx_sampler_accept(s, t))
            return -hx_err_set(err, HX_ERR_STATE, "the sampler rejected forced token %d", t);
        out[n_out++] = t;
        produced(sp, t);
        sp->st.forced++;
        if (hx_vocab_is_eog(sp->v, t)) break;
        sp->batch[nb++] = t;
    }
    int ended = n_out > 0 && hx_vocab_is_eog(sp->v, out[n_out - 1]);
    int room = hx_ctx_n_ctx(sp->c) - n_past - nb, max = sp->p.max_batch - nb;
    if (max > room) max = room;
    int nd = ended ? 0 : draft(sp, hist, n_hist, pend, nb, max);
    sp->st.drafted += nd;
    /* logits needed: row nb - 1 (after the last forced or pending token)
     * and the drafts' rows; none once the output ended: the pass only
     * writes the batch's cache rows, as one-token passes would (left to
     * the next prompt's prefill they would differ in the last bits) */
    int from = ended ? nb + nd : nb > 0 ? nb - 1 : 0;
    int rc = nb + nd > 0 ? run(sp, nb + nd, from, err) : HX_OK;
    if (rc) return -rc;
    if (!ended) {
        int n = verify(sp, s, n_past, nb, nd, out + n_out, err);
        if (n < 0) return n;
        n_out += n;
    }
    sp->st.tokens += n_out;
    return n_out;
}

int hx_spec_next(hx_spec *sp, hx_sampler *s, const int32_t *hist, int n_hist,
                 int32_t *tok, hx_err *err)
{
    if (sp->qi == sp->qn) {
        int n = hx_spec_step(sp, s, hist, n_hist, sp->q, err);
        if (n < 0) return -n;
        sp->qn = n;
        sp->qi = 0;
    }
    *tok = sp->q[sp->qi++];
    return HX_OK;
}

void hx_spec_reset(hx_spec *sp)
{
    if (sp) sp->qn = sp->qi = 0;
}
