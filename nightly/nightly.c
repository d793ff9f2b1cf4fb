/* nightly.c: the nightly fine-tuning job: a dataset from the user's judged
 * episodes (accepted as they were, corrected with the correction as the
 * target, rejected left out; the latest held out), a LoRA adapter trained
 * over the frozen base in governor-checked chunks with checkpoints, an
 * evaluation gate on held-out loss, and adoption through the store. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "nightly/nightly.h"

#define MAX_EP_TOKENS 16384 /* ChatML fallback: an episode longer than this is cut */
/* The mask value of a replay target learned as the base's distribution
 * (replay_soft); the user's targets are 1. */
#define MASK_SOFT 2

hx_nightly_params hx_nightly_default_params(void)
{
    hx_nightly_params p;
    memset(&p, 0, sizeof p);
    p.lora = hx_lora_default_params();
    p.lora.rank = 16;
    p.lora.alpha = 16;
    /* the feed-forward matrices, not attention: on hearth-tiny an adapter
     * on q, k, v, o also broke the copying of made-up words, which is
     * attention's work. Measured (make bench-persona): the same habits
     * (16 of 20 held-out requests over four personas) and, on 300
     * generic tasks, the same net drop as q, k, v, o at 2e-3 with fewer
     * tasks lost (17 against 22); the 100-task gates had suggested more.
     * A large base may want less (--lr); the gates discard an adapter
     * that got worse. */
    p.lora.targets = HX_LORA_UP | HX_LORA_DOWN;
    /* the later half of the layers: on hearth-tiny (layers 3-5 of 6) the
     * habits were learned as well and the generic suite lost less
     * (make bench-persona) */
    p.lora.first_layer = HX_LORA_LATER_HALF;
    p.train = hx_train_default_params();
    p.train.opt.lr = 1e-3f;
    p.train.opt.warmup = 2;
    p.train.opt.wd = 0.0f;
    p.train.seq_len = 256;
    p.train.n_seq = 4;
    /* replay: three generic conversations per episode of the user's, so
     * that the adapter learns the user's habits without forgetting the
     * rest (without replay the persona adapter lost 14 points of the
     * generic suite, with one per episode 12, with three 5; six did no
     * better) */
    p.replay_ratio = 3.0;
    p.replay_seed = 1;
    /* 300 steps (of 4 conversations): what the persona's proof passes
     * with (bench/README.md, Personalization); epochs count only where
     * n_steps is 0 */
    p.train.opt.n_steps = 300;
    p.epochs = 2;
    p.heldout_frac = 0.2;
    p.min_train = 4;
    p.min_gain = 0.01;
    p.chunk = 8;
    /* 300 generic tasks: with 100 the drop's standard error is about 3
     * points against the 2-point margin, and the persona adapter that
     * passed at 0 there lost 4.7 points on 300 (make bench-persona) */
    p.eval_tasks = 300;
    p.eval_margin = 0.02;
    /* at 0.9 when 1 loses too much: the persona's adapter dropped 4.7
     * points at 1 and 2.0 at 0.9 (bench/README.md, Personalization) */
    p.scales[0] = 1.0f;
    p.scales[1] = 0.9f;
    p.n_scales = 2;
    return p;
}

/* ---- the dataset ---- */

void hx_nightly_data_free(hx_nightly_data *d)
{
    if (!d) return;
    free(d->tokens), free(d->mask), free(d->doc), free(d->ends);
    free(d->soft_id), free(d->soft_p);
    memset(d, 0, sizeof *d);
}

int hx_nightly_data_add(hx_nightly_data *d, const int32_t *t, const uint8_t *m,
                        size_t n)
{
    if (n < 2) return HX_OK; /* nothing to predict */
    size_t need = d->n + n;
    if (need > d->cap) {
        size_t cap = need > 2 * d->cap ? need : 2 * d->cap;
        int32_t *nt = hx_realloc(d->tokens, cap * sizeof *nt);
        if (nt) d->tokens = nt;
        uint8_t *nm = hx_realloc(d->mask, cap);
        if (nm) d->mask = nm;
        int32_t *nd = hx_realloc(d->doc, cap * sizeof *nd);
        if (nd) d->doc = nd;
        if (!nt || !nm || !nd) return HX_ERR_NOMEM;
        d->cap = cap;
    }
    size_t *ne = hx_realloc(d->ends, (size_t)(d->n_docs + 1) * sizeof *ne);
    if (!ne) return HX_ERR_NOMEM;
    d->ends = ne;
    memcpy(d->tokens + d->n, t, n * sizeof *t);
    memcpy(d->mask + d->n, m, n);
    for (size_t i = 0; i < n; i++) d->doc[d->n + i] = d->n_docs;
    d->n += n;
    d->ends[d->n_docs++] = d->n;
    return HX_OK;
}

/* One rendered episode: text pieces, each a target (assistant) or not. */
typedef struct render {
    hx_buf text;
    size_t spans[256][2]; /* byte ranges of targets */
    int n_spans;
} render;

static void put(render *r, const char *s, int target)
{
    size_t from = r->text.len;
    hx_buf_puts(&r->text, s);
    if (target && r->n_spans < 256 && r->text.len > from) {
        r->spans[r->n_spans][0] = from;
        r->spans[r->n_spans++][1] = r->text.len;
    }
}

/* An assistant message's text: its content, then its tool calls as Qwen3
 * writes them (<tool_call>{"name", "arguments"}</tool_call>). */
static void put_assistant(render *r, const cJSON *msg)
{
    put(r, "<|im_start|>assistant\n", 0);
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(msg, "content");
    if (cJSON_IsString(c)) put(r, c->valuestring, 1);
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(msg, "tool_calls"), *w;
    cJSON_ArrayForEach(w, tc) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(w, "function");
        char *js = fn ? cJSON_PrintUnformatted(fn) : NULL;
        if (!js) continue;
        put(r, HX_TOOL_CALL_OPEN "\n", 1);
        put(r, js, 1);
        put(r, "\n" HX_TOOL_CALL_CLOSE, 1);
        cJSON_free(js);
    }
    put(r, "<|im_end|>", 1); /* the model learns to stop */
    put(r, "\n", 0);
}

/* The conversation to learn from: the episode's messages (or its request
 * and answer when it has none); for a corrected episode the last assistant
 * turn is replaced by the correction, which ends it. Caller frees. */
static cJSON *episode_messages(const hx_episode *ep)
{
    cJSON *msgs = ep->messages ? cJSON_Parse(ep->messages) : NULL;
    const int corrected = ep->verdict == HX_VERDICT_CORRECTED && ep->corrected;
    if (!cJSON_IsArray(msgs) || !cJSON_GetArraySize(msgs)) {
        cJSON_Delete(msgs);
        msgs = cJSON_CreateArray();
        cJSON *u = cJSON_CreateObject(), *a = cJSON_CreateObject();
        cJSON_AddItemToArray(msgs, u), cJSON_AddItemToArray(msgs, a);
        cJSON_AddStringToObject(u, "role", "user");
        cJSON_AddStringToObject(u, "content", ep->request ? ep->request : "");
        cJSON_AddStringToObject(a, "role", "assistant");
        cJSON_AddStringToObject(a, "content", corrected ? ep->corrected
                                : ep->outcome ? ep->outcome : "");
        return msgs;
    }
    if (!corrected) return msgs;
    int last = -1, i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (cJSON_IsString(role) && !strcmp(role->valuestring, "assistant")) last = i;
        i++;
    }
    while (cJSON_GetArraySize(msgs) > last + 1) cJSON_DeleteItemFromArray(msgs, last + 1);
    cJSON *fix = cJSON_CreateObject();
    cJSON_AddStringToObject(fix, "role", "assistant");
    cJSON_AddStringToObject(fix, "content", ep->corrected);
    if (last >= 0) cJSON_ReplaceItemInArray(msgs, last, fix);
    else cJSON_AddItemToArray(msgs, fix);
    return msgs;
}

/* ChatML text of a conversation (the fallback without a render callback). */
static int render_chatml(const cJSON *msgs, render *r)
{
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
        const char *rs = cJSON_IsString(role) ? role->valuestring : "user";
        if (!strcmp(rs, "assistant")) {
            put_assistant(r, m);
        } else if (strcmp(rs, "system")) { /* the system text changes; not learnt */
            put(r, "<|im_start|>", 0);
            put(r, !strcmp(rs, "tool") ? "user\n<tool_response>\n" : "user\n", 0);
            char *js = cJSON_IsString(c) ? NULL : cJSON_PrintUnformatted(c);
            put(r, cJSON_IsString(c) ? c->valuestring : js ? js : "", 0);
            cJSON_free(js);
            put(r, !strcmp(rs, "tool") ? "\n</tool_response><|im_end|>\n" : "<|im_end|>\n", 0);
        }
    }
    return r->text.oom ? HX_ERR_NOMEM : HX_OK;
}

/* Tokenizes r piece by piece so that target spans map to tokens. */
static int tokenize_render(const hx_vocab *v, const render *r, hx_nightly_data *d)
{
    int32_t *tok = hx_malloc_array(MAX_EP_TOKENS, sizeof *tok);
    uint8_t *mask = hx_calloc(MAX_EP_TOKENS, 1);
    size_t n = 0, pos = 0;
    int rc = tok && mask ? HX_OK : HX_ERR_NOMEM;
    for (int s = 0; !rc && s <= r->n_spans && n < MAX_EP_TOKENS; s++) {
        /* the text before span s (not a target), then span s (a target) */
        size_t cut[2] = {s < r->n_spans ? r->spans[s][0] : r->text.len,
                         s < r->n_spans ? r->spans[s][1] : r->text.len};
        for (int k = 0; k < 2 && n < MAX_EP_TOKENS; k++) {
            size_t len = cut[k] - pos;
            if (!len) continue;
            int32_t got = hx_tokenize(v, r->text.data + pos, len, tok + n,
                                      (int32_t)(MAX_EP_TOKENS - n), 0, 1);
            if (got < 0) got = 0; /* cut: the episode is too long */
            memset(mask + n, k, (size_t)got);
            n += (size_t)got;
            pos = cut[k];
        }
    }
    if (!rc && n > 1) rc = hx_nightly_data_add(d, tok, mask, n);
    free(tok), free(mask);
    return rc;
}

typedef struct collect {
    const hx_vocab *v;
    hx_nightly_render_fn render;
    void *render_user;
    hx_err *err_out;
    hx_nightly_data all;
    int *first_doc;    /* per episode: its first document */
    int64_t *finished; /* per episode */
    int n_ep;
    int err;
} collect;

/* One episode through the render callback, or ChatML and v. */
static int episode_tokens(collect *c, const hx_episode *ep)
{
    cJSON *msgs = episode_messages(ep);
    if (!msgs) return HX_ERR_NOMEM;
    int rc;
    if (c->render) {
        rc = c->render(c->render_user, msgs, &c->all, c->err_out);
    } else {
        render r;
        memset(&r, 0, sizeof r);
        hx_buf_init(&r.text);
        rc = render_chatml(msgs, &r);
        if (!rc) rc = tokenize_render(c->v, &r, &c->all);
        hx_buf_free(&r.text);
    }
    cJSON_Delete(msgs);
    return rc;
}

static int collect_cb(void *user, const hx_episode *ep, int heldout)
{
    collect *c = user;
    (void)heldout;
    int before = c->all.n_docs;
    int rc = episode_tokens(c, ep);
    if (!rc && c->all.n_docs > before) {
        int64_t *nf = hx_realloc(c->finished, (size_t)(c->n_ep + 1) * sizeof *nf);
        if (nf) c->finished = nf;
        int *nd = hx_realloc(c->first_doc, (size_t)(c->n_ep + 1) * sizeof *nd);
        if (nd) c->first_doc = nd;
        if (!nf || !nd) rc = HX_ERR_NOMEM;
        else c->finished[c->n_ep] = ep->finished_at, c->first_doc[c->n_ep++] = before;
    }
    return c->err = rc;
}

/* Documents [from, to) of src into dst, renumbered. */
static int copy_docs(const hx_nightly_data *src, int from, int to,
                     hx_nightly_data *dst)
{
    int rc = HX_OK;
    for (int i = from; !rc && i < to; i++) {
        size_t a = i ? src->ends[i - 1] : 0, b = src->ends[i];
        rc = hx_nightly_data_add(dst, src->tokens + a, src->mask + a, b - a);
    }
    return rc;
}

int hx_nightly_dataset(const hx_vocab *v, hx_memory *mem, double heldout_frac,
                       hx_nightly_render_fn render_fn, void *render_user,
                       hx_nightly_data *train, hx_nightly_data *held,
                       hx_err *err)
{
    memset(train, 0, sizeof *train);
    memset(held, 0, sizeof *held);
    collect c;
    memset(&c, 0, sizeof c);
    c.v = v;
    c.render = render_fn, c.render_user = render_user, c.err_out = err;
    hx_training_query q = {.since = 0};
    int rc = hx_memory_training_episodes(mem, &q, collect_cb, &c, err);
    if (rc && c.err && !err->msg[0])
        rc = hx_err_set(err, c.err, "building the dataset: %s", hx_rc_str(c.err));
    else if (rc && c.err) rc = c.err;
    /* episodes come oldest first: the latest heldout_frac are held out */
    int n = c.n_ep;
    int n_held = (int)ceil(heldout_frac * n);
    if (n_held > n) n_held = n;
    const int split = n_held ? c.first_doc[n - n_held] : c.all.n_docs;
    if (!rc) rc = copy_docs(&c.all, 0, split, train);
    if (!rc) rc = copy_docs(&c.all, split, c.all.n_docs, held);
    if (rc && !err->msg[0]) hx_err_set(err, rc, "building the dataset: out of memory");
    train->n_episodes = n - n_held, held->n_episodes = n_held;
    if (!rc && n_held > 0) held->split_at = c.finished[n - n_held];
    hx_nightly_data_free(&c.all);
    free(c.finished);
    free(c.first_doc);
    if (rc) hx_nightly_data_free(train), hx_nightly_data_free(held);
    return rc;
}

/* ---- replay ---- */

int hx_nightly_replay_count(double ratio, int n_episodes)
{
    if (!(ratio > 0) || n_episodes <= 0) return 0;
    const double n = floor(ratio * n_episodes + 0.5);
    return n > 1e6 ? 1000000 : (int)n;
}

int hx_nightly_mix(hx_nightly_data *train, const hx_nightly_data *replay, hx_err *err)
{
    if (!replay->n_docs) return HX_OK;
    hx_nightly_data out;
    memset(&out, 0, sizeof out);
    const long nu = train->n_docs, nr = replay->n_docs;
    long iu = 0, ir = 0;
    int rc = HX_OK;
    /* the next document is the replay's when it is behind its share */
    while (!rc && (iu < nu || ir < nr)) {
        const int from_replay = iu == nu || (ir < nr && (ir + 1) * (nu + nr) <= (iu + ir + 1) * nr);
        rc = from_replay ? copy_docs(replay, (int)ir, (int)ir + 1, &out)
                         : copy_docs(train, (int)iu, (int)iu + 1, &out);
        from_replay ? ir++ : iu++;
    }
    if (rc) {
        hx_nightly_data_free(&out);
        return hx_err_set(err, rc, "nightly: mixing the replay: out of memory");
    }
    out.n_episodes = train->n_episodes, out.split_at = train->split_at;
    out.n_replay = train->n_replay + replay->n_episodes;
    hx_nightly_data_free(train);
    *train = out;
    return HX_OK;
}

/* Asks p->replay for the conversations the ratio gives and mixes them in;
 * *rep keeps them (the caller frees it). */
static int add_replay(const hx_nightly_params *p, hx_nightly_data *train,
                      hx_nightly_data *rep_out, hx_nightly_report *r, hx_err *err)
{
    const int n = p->replay ? hx_nightly_replay_count(p->replay_ratio, train->n_episodes) : 0;
    if (!n) return HX_OK;
    hx_nightly_data rep;
    memset(&rep, 0, sizeof rep);
    int rc = p->replay(p->replay_user, n, p->replay_seed, &rep, err);
    for (size_t i = 0; !rc && p->replay_soft > 0 && i < rep.n; i++)
        rep.mask[i] = rep.mask[i] ? MASK_SOFT : 0;
    if (!rc) rc = hx_nightly_mix(train, &rep, err);
    r->n_replay = rep.n_episodes, r->replay_tokens = (int64_t)rep.n;
    if (!rc && p->log)
        fprintf(p->log, "nightly: replay: %d generic conversations (%zu tokens) mixed "
                "into %d training episodes (%zu tokens), %.2f per episode\n",
                rep.n_episodes, rep.n, train->n_episodes, train->n - rep.n,
                p->replay_ratio);
    *rep_out = rep;
    return rc;
}

/* ---- what the base does not know ---- */

/* Document i of d as one sequence, each token predicting the next (the
 * start of a document longer than the model's context, n_ctx tokens);
 * its mask is d's, at d->mask + (tokens - d->tokens) + 1. */
static hx_batch doc_batch(const hx_nightly_data *d, int i, size_t n_ctx)
{
    size_t a = i ? d->ends[i - 1] : 0, n = d->ends[i] - a - 1;
    if (n > n_ctx) n = n_ctx;
    const int32_t *t = d->tokens + a;
    return (hx_batch){.n_seq = 1, .n_tok = (int)n, .tokens = t, .targets = t + 1,
                      .mask = d->mask + a + 1};
}

/* The longest of d's documents, cut to n_ctx tokens. */
static size_t longest_doc(const hx_nightly_data *d, size_t n_ctx)
{
    size_t n = 0;
    for (int i = 0; i < d->n_docs; i++) {
        size_t len = d->ends[i] - (i ? d->ends[i - 1] : 0);
        if (len > n_ctx) len = n_ctx;
        if (len > n) n = len;
    }
    return n;
}

/* Clears the targets of d's documents that the base predicts (its greedy
 * token after the document's earlier tokens is the target), counting them
 * into r; targets past the model's context stay. The greedy tokens come
 * from hx_trainer_topk, which holds a few rows of logits at a time. */
static int unmask_known(hx_trainer *tr, hx_nightly_data *d, hx_nightly_report *r,
                        hx_err *err)
{
    const size_t n_ctx = (size_t)hx_trainer_hparams(tr)->n_ctx_train;
    const size_t most = longest_doc(d, n_ctx);
    int32_t *top = hx_calloc(most ? most : 1, sizeof *top);
    float *p = hx_calloc(most ? most : 1, sizeof *p);
    int rc = top && p ? HX_OK : hx_err_set(err, HX_ERR_NOMEM, "nightly: out of memory");
    for (int i = 0; !rc && i < d->n_docs; i++) {
        const hx_batch b = doc_batch(d, i, n_ctx);
        uint8_t *m = d->mask + (b.tokens - d->tokens) + 1;
        rc = hx_trainer_topk(tr, &b, 1, top, p, err);
        for (int j = 0; !rc && j < b.n_tok; j++) {
            if (!m[j]) continue;
            r->all_targets++;
            if (top[j] == b.targets[j]) m[j] = 0, r->known_targets++;
        }
    }
    free(top), free(p);
    return rc;
}

/* The base's distribution (its k most likely tokens) at each target of
 * d marked MASK_SOFT (the replay's), into d->soft_*: tr is the base
 * (B = 0). */
static int soft_targets(hx_trainer *tr, hx_nightly_data *d, int k, hx_nightly_report *r,
                        hx_err *err)
{
    const size_t n_ctx = (size_t)hx_trainer_hparams(tr)->n_ctx_train;
    d->soft_id = hx_calloc(d->n * (size_t)k, sizeof *d->soft_id);
    d->soft_p = hx_calloc(d->n * (size_t)k, sizeof *d->soft_p);
    if (!d->soft_id || !d->soft_p)
        return hx_err_set(err, HX_ERR_NOMEM, "nightly: out of memory for the base's "
                          "distributions (%zu tokens x %d)", d->n, k);
    d->soft_k = k;
    int rc = HX_OK;
    for (int i = 0; !rc && i < d->n_docs; i++) {
        const hx_batch b = doc_batch(d, i, n_ctx);
        const size_t at = (size_t)(b.tokens - d->tokens) + 1, n = (size_t)b.n_tok;
        int any = 0;
        for (size_t j = 0; j < n; j++) any |= b.mask[j] == MASK_SOFT;
        if (!any) continue;
        rc = hx_trainer_topk(tr, &b, k, d->soft_id + at * k, d->soft_p + at * k, err);
        for (size_t j = 0; !rc && j < n; j++) {
            if (b.mask[j] != MASK_SOFT) d->soft_p[(at + j) * k] = 0.0f; /* the user's: the token */
            else r->soft_targets++;
        }
    }
    return rc;
}

int hx_nightly_trainer(const hx_nightly_params *p, const char *model, hx_trainer **tr,
                       hx_err *err)
{
    const char *path = model ? model : p->model;
    hx_lora_params lp = p->lora;
    int moved = 0;
    lp.targets = hx_lora_targets_for(path, lp.targets, &moved);
    if (moved && p->log)
        fprintf(p->log, "nightly: %s is a MoE model, whose experts take no adapter: "
                "adapting its attention (q, k, v, o) instead of the FFN\n", path);
    return hx_trainer_new_gguf(path, &lp, p->n_threads, tr, err);
}

/* ---- windows ---- */

/* Window [0, h) + [s, e) of the document t, m (s <= h: [0, e), nothing
 * cut); the slice's first token is no target there, its predecessor
 * being cut off. tok, mask: scratch of the window's size. */
static int add_window(hx_nightly_data *dst, const int32_t *t, const uint8_t *m,
                      size_t h, size_t s, size_t e, int32_t *tok, uint8_t *mask)
{
    if (s <= h) s = h;
    memcpy(tok, t, h * sizeof *t), memcpy(mask, m, h);
    memcpy(tok + h, t + s, (e - s) * sizeof *t), memcpy(mask + h, m + s, e - s);
    if (s > h) mask[h] = 0;
    return hx_nightly_data_add(dst, tok, mask, h + (e - s));
}

/* The windows of a document of L > W tokens, from its last target back:
 * each ends on the last target not yet covered and reaches back as far as
 * W allows after the head. win gets (s, e) pairs, last window first. */
static int plan_windows(const uint8_t *m, size_t L, size_t W, size_t *h_out,
                        size_t (*win)[2])
{
    size_t H = 1, x = L - 1;
    while (H < L && !m[H]) H++;
    if (H == L) return 0; /* no target */
    const size_t hmax = W - (W / 4 > 2 ? W / 4 : 2);
    const size_t h = H < hmax ? H : hmax;
    int nw = 0;
    while (!m[x]) x--;
    for (;;) {
        const size_t e = x + 1, s = e > W - h ? e - (W - h) : 0;
        win[nw][0] = s, win[nw++][1] = e;
        if (s <= h) break; /* from the start: every earlier target is in */
        for (x = s; x >= H && !m[x];) x--;
        if (x < H) break;
    }
    *h_out = h;
    return nw;
}

int hx_nightly_windows(const hx_nightly_data *src, int window,
                       hx_nightly_data *dst, hx_err *err)
{
    memset(dst, 0, sizeof *dst);
    if (window < 3) return hx_err_set(err, HX_ERR_INVALID, "nightly: windows of %d tokens", window);
    const size_t W = (size_t)window;
    size_t longest = 0;
    for (int i = 0; i < src->n_docs; i++) {
        const size_t len = src->ends[i] - (i ? src->ends[i - 1] : 0);
        longest = len > longest ? len : longest;
    }
    size_t(*win)[2] = hx_malloc_array(longest ? longest : 1, sizeof *win);
    int32_t *tok = hx_malloc_array(W, sizeof *tok);
    uint8_t *mask = hx_malloc_array(W, 1);
    int rc = win && tok && mask ? HX_OK : HX_ERR_NOMEM;
    for (int i = 0; !rc && i < src->n_docs; i++) {
        const size_t a = i ? src->ends[i - 1] : 0, L = src->ends[i] - a;
        const int32_t *t = src->tokens + a;
        const uint8_t *m = src->mask + a;
        if (L <= W) {
            rc = hx_nightly_data_add(dst, t, m, L);
            continue;
        }
        size_t h = 0;
        for (int k = plan_windows(m, L, W, &h, win); !rc && k-- > 0;)
            rc = add_window(dst, t, m, h, win[k][0], win[k][1], tok, mask);
    }
    free(win), free(tok), free(mask);
    dst->n_episodes = src->n_episodes, dst->split_at = src->split_at;
    dst->n_replay = src->n_replay;
    if (rc) {
        hx_nightly_data_free(dst);
        return hx_err_set(err, rc, "nightly: windows: out of memory");
    }
    return HX_OK;
}

/* ---- evaluation ---- */

/* Mean loss per target token of the held-out documents. */
static int heldout_loss(hx_trainer *tr, const hx_nightly_data *d, double *out,
                        hx_err *err)
{
    double sum = 0;
    long count = 0;
    int rc = HX_OK;
    const size_t n_ctx = (size_t)hx_trainer_hparams(tr)->n_ctx_train;
    for (int i = 0; !rc && i < d->n_docs; i++) {
        const hx_batch b = doc_batch(d, i, n_ctx);
        double ls = 0;
        int nc = 0;
        rc = hx_trainer_forward(tr, &b, NULL, &ls, &nc, err);
        sum += ls, count += nc;
    }
    *out = count ? sum / (double)count : NAN;
    return rc;
}

/* ---- the run ---- */

/* 1 if the governor allows training now (or force); else the reason. */
static int may_run(const hx_nightly_params *p, char *why, size_t n)
{
    if (p->force) return 1;
    hx_power pw;
    hx_gov_decision d;
    hx_power_read(NULL, NULL, &pw);
    hx_governor *g = hx_governor_new(NULL);
    if (!g) return snprintf(why, n, "out of memory"), 0;
    hx_governor_update(g, &pw, &d);
    hx_governor_free(g);
    if (!d.nightly_ok) snprintf(why, n, "not now: %s (--force to override)", d.nightly_why);
    return d.nightly_ok;
}

/* The LoRA parameters into a run's key, field by field: a struct's
 * padding bytes hold whatever the stack held, and a key that hashed them
 * differed between a run and its rerun, which then started afresh. */
static void key_lora(hx_sha256 *s, const hx_lora_params *l)
{
    hx_sha256_update(s, &l->rank, sizeof l->rank);
    hx_sha256_update(s, &l->alpha, sizeof l->alpha);
    hx_sha256_update(s, &l->targets, sizeof l->targets);
    hx_sha256_update(s, &l->init_b, sizeof l->init_b);
    hx_sha256_update(s, &l->seed, sizeof l->seed);
    hx_sha256_update(s, &l->first_layer, sizeof l->first_layer);
}

/* The optimizer's parameters, likewise. */
static void key_opt(hx_sha256 *s, const hx_opt_params *o)
{
    const float f[] = {o->lr, o->lr_min_frac, o->beta1, o->beta2, o->eps, o->wd, o->clip,
                       o->decay_frac};
    const int i[] = {o->warmup, o->n_steps, o->wsd};
    hx_sha256_update(s, f, sizeof f);
    hx_sha256_update(s, i, sizeof i);
}

/* The key of a training run: base, data and parameters; a checkpoint
 * resumes only under the same key. */
static void run_key(const hx_nightly_params *p, const char *base_id,
                    const hx_nightly_data *d, char out[65])
{
    hx_sha256 s;
    unsigned char dig[32];
    hx_sha256_init(&s);
    hx_sha256_update(&s, base_id, 64);
    hx_sha256_update(&s, d->tokens, d->n * sizeof *d->tokens);
    hx_sha256_update(&s, d->mask, d->n);
    key_lora(&s, &p->lora);
    key_opt(&s, &p->train.opt);
    hx_sha256_update(&s, &p->replay_soft, sizeof p->replay_soft);
    hx_sha256_update(&s, &p->keep_generic, sizeof p->keep_generic);
    hx_sha256_update(&s, &p->keep_at_targets, sizeof p->keep_at_targets);
    hx_sha256_final(&s, dig);
    hx_sha256_hex(dig, out);
}

/* Loads the checkpoint when its key file matches; writes the key. */
static int resume(hx_trainer *tr, const char *dir, const char *key,
                  hx_nightly_report *r, FILE *log, hx_err *err)
{
    char kp[4200], cp[4200], *old = NULL;
    size_t len = 0;
    hx_err e2 = {0};
    snprintf(kp, sizeof kp, "%s/nightly.key", dir);
    snprintf(cp, sizeof cp, "%s/nightly.ckpt", dir);
    if (!hx_read_file(kp, 4096, &old, &len, &e2) && len == 64 && !memcmp(old, key, 64) &&
        !hx_trainer_load(tr, cp, &e2)) {
        r->resumed_at = hx_trainer_steps_done(tr);
        if (log) fprintf(log, "nightly: resuming at step %d\n", r->resumed_at);
    } else {
        remove(cp);
    }
    free(old);
    return hx_write_file_atomic(kp, key, 64, err);
}

/* CPU time of the process (all threads), seconds. */
static double cpu_seconds(void)
{
    struct timespec ts;
    return clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) ? 0 : ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Early stopping after a chunk: the held-out loss into *last; 1 when
 * the chunk lowered it by less than stop_delta of the loss before
 * training (or raised it). */
static int curve_flat(hx_trainer *tr, const hx_nightly_params *p, const hx_nightly_data *ho,
                      hx_nightly_report *r, double *last, hx_err *err)
{
    double now = NAN;
    if (heldout_loss(tr, ho, &now, err)) return -1;
    const double gain = *last - now;
    if (p->log)
        fprintf(p->log, "nightly: step %d: held-out loss %.4f (%+.4f)\n",
                hx_trainer_steps_done(tr), now, -gain);
    *last = now;
    return !(gain >= p->stop_delta * r->loss_before);
}

static int train_chunks(hx_trainer *tr, const hx_nightly_params *p,
                        const hx_nightly_data *d, const hx_nightly_data *ho,
                        const char *ckpt, hx_nightly_report *r, hx_err *err)
{
    hx_train_data td = {.tokens = d->tokens, .mask = d->mask, .n = d->n, .doc = d->doc,
                        .soft_id = d->soft_id, .soft_p = d->soft_p, .soft_k = d->soft_k};
    hx_train_params tp = p->train;
    tp.ckpt_path = ckpt;
    tp.stop_after = p->chunk > 0 ? p->chunk : 0;
    tp.ckpt_every = tp.stop_after;
    tp.log = p->log;
    const int n_ctx = hx_trainer_hparams(tr)->n_ctx_train;
    if (tp.seq_len > n_ctx) tp.seq_len = n_ctx;
    if ((size_t)tp.seq_len + 1 > d->n) tp.seq_len = (int)d->n - 1;
    if (tp.opt.n_steps <= 0) {
        double per = (double)tp.seq_len * tp.n_seq * (tp.accum > 0 ? tp.accum : 1);
        tp.opt.n_steps = (int)ceil(p->epochs * (double)d->n / per);
        if (tp.opt.n_steps < 1) tp.opt.n_steps = 1;
    }
    int rc = HX_OK, chunks = 0;
    double last = r->loss_before; /* resumed: the first chunk is compared with this */
    const int from = hx_trainer_steps_done(tr);
    const double t0 = hx_time_mono(), c0 = cpu_seconds();
    while (!rc && hx_trainer_steps_done(tr) < tp.opt.n_steps) {
        if (p->stop_after_chunks > 0 && chunks == p->stop_after_chunks)
            snprintf(r->reason, sizeof r->reason, "stopped after %d chunks", chunks);
        else if (may_run(p, r->reason, sizeof r->reason))
            r->reason[0] = '\0';
        if (r->reason[0]) {
            r->steps = hx_trainer_steps_done(tr);
            return HX_ERR_CANCELLED; /* checkpointed: the next run resumes */
        }
        rc = hx_train_run(tr, &td, &tp, err);
        chunks++;
        r->train_seconds = hx_time_mono() - t0, r->train_cpu_seconds = cpu_seconds() - c0;
        r->trained_tokens = (int64_t)(hx_trainer_steps_done(tr) - from) * tp.seq_len *
                            tp.n_seq * (tp.accum > 0 ? tp.accum : 1);
        if (!rc && p->stop_delta > 0 && hx_trainer_steps_done(tr) < tp.opt.n_steps) {
            const int flat = curve_flat(tr, p, ho, r, &last, err);
            if (flat < 0) rc = err->rc ? err->rc : HX_ERR_INTERNAL;
            else if (flat) {
                r->stopped_early = 1;
                if (p->log)
                    fprintf(p->log, "nightly: early stop at step %d of %d: the held-out loss "
                            "fell by less than %.1f%% of %.4f in the last chunk\n",
                            hx_trainer_steps_done(tr), tp.opt.n_steps, 100 * p->stop_delta,
                            r->loss_before);
                break;
            }
        }
    }
    r->steps = hx_trainer_steps_done(tr);
    return rc;
}

/* What the user runs now, which the generic tasks compare against: the
 * store's active set when it loads on this base, else the base (ask and
 * chat leave out a set that does not load). Paths and scales into
 * paths/scales, *n of them; r->eval_ref names it, p->log says why. */
static void current_set(const hx_nightly_params *p, char (*paths)[4352], float *scales,
                        int *n, hx_nightly_report *r)
{
    hx_lora_use u[HX_ADAPTER_MAX];
    hx_adapter *ads[HX_ADAPTER_MAX];
    float sc[HX_ADAPTER_MAX];
    hx_model *m = NULL;
    hx_model_params mp = hx_model_default_params();
    hx_err e2 = {0};
    int na = 0, nl = 0;
    *n = 0;
    snprintf(r->eval_ref, sizeof r->eval_ref, "the base");
    mp.no_vocab = 1;
    int rc = hx_lora_store_active(p->store, u, &na, &e2);
    if (!rc && na) rc = hx_model_load(p->model, &mp, &m, &e2);
    if (!rc && na) rc = hx_lora_store_load_active(p->store, m, ads, sc, &nl, &e2);
    for (int i = 0; i < nl; i++) hx_adapter_free(ads[i]);
    hx_model_free(m);
    if (rc && p->log)
        fprintf(p->log, "nightly: the active adapters are not what ask and chat run "
                "(%s); the generic tasks compare against the base\n", e2.msg);
    if (rc || !na) return;
    size_t len = (size_t)snprintf(r->eval_ref, sizeof r->eval_ref, "the active %s ",
                                  na > 1 ? "set" : "adapter");
    for (int i = 0; i < na; i++) {
        hx_lora_store_path(p->store, u[i].name, paths[i], sizeof paths[i]);
        scales[i] = u[i].scale;
        if (len < sizeof r->eval_ref)
            len += (size_t)snprintf(r->eval_ref + len, sizeof r->eval_ref - len, "%s%s",
                                    i ? ", " : "", u[i].name);
    }
    *n = na;
}

/* Pairs the two runs: counts into r; the drop in points. */
static double pair_runs(const uint8_t *ref, const uint8_t *cand, int n, hx_nightly_report *r)
{
    r->eval_n = n;
    r->eval_base = r->eval_adapter = r->eval_lost = r->eval_gained = 0;
    for (int i = 0; i < n; i++) {
        r->eval_base += ref[i], r->eval_adapter += cand[i];
        r->eval_lost += ref[i] && !cand[i], r->eval_gained += !ref[i] && cand[i];
    }
    return 100.0 * (r->eval_lost - r->eval_gained) / n;
}

/* The gate's second half. The rule: the generic suite (the same
 * eval_tasks held-out tasks every night) runs with what the user runs now
 * and with the candidate, and is compared task by task; the suite's drop
 * is (lost - gained) / eval_tasks, lost being the tasks the reference
 * passes and the candidate fails, gained the reverse; a drop of more than
 * eval_margin discards the candidate. One task is 100 / eval_tasks
 * points: 1 with the default 100 tasks, so the 2-point margin allows a
 * net loss of 2 tasks (a 20-task suite, 5 points a task, allowed none).
 * The candidate runs at each of p->scales in turn until one passes; r->scale
 * is that one (adopted at it), else the last tried. The log also gives the
 * standard error of the paired difference, how far the suite's drop may
 * stand from that on generic tasks at large. */
static int generic_gate(const hx_nightly_params *p, const char *cand,
                        hx_nightly_report *r, hx_err *err)
{
    const int ns = p->n_scales > 0 ? p->n_scales : 1;
    r->scale = p->n_scales > 0 ? p->scales[0] : 1.0f;
    if (!p->eval || p->eval_tasks <= 0) return HX_OK;
    char paths[HX_ADAPTER_MAX][4352];
    const char *cur[HX_ADAPTER_MAX];
    float sc[HX_ADAPTER_MAX];
    const int N = p->eval_tasks;
    int n = 0;
    current_set(p, paths, sc, &n, r);
    for (int i = 0; i < n; i++) cur[i] = paths[i];
    uint8_t *ref = hx_calloc((size_t)N, 2);
    if (!ref) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    if (p->log)
        fprintf(p->log, "nightly: generic tasks: %s against the new adapter on the same %d "
                "tasks; discarded if it loses more than %.1f points net (one task is %.2f "
                "points)%s\n", r->eval_ref, N, 100 * p->eval_margin, 100.0 / N,
                100.0 / N > 100 * p->eval_margin + 1e-9 ? ": too few tasks to resolve the "
                "margin, any net loss discards" : "");
    const double t0 = hx_time_mono();
    int rc = p->eval(p->eval_user, cur, sc, n, N, ref, err);
    double drop = 0;
    char tried[200] = "";
    for (int k = 0; !rc && k < ns; k++) {
        r->scale = p->n_scales > 0 ? p->scales[k] : 1.0f;
        rc = p->eval(p->eval_user, &cand, &r->scale, 1, N, ref + N, err);
        if (rc) break;
        drop = pair_runs(ref, ref + N, N, r);
        const double mean = drop / 100;
        const double var = (double)(r->eval_lost + r->eval_gained) / N - mean * mean;
        const double se = N > 1 && var > 0 ? 100 * sqrt(var / (N - 1)) : 0;
        if (p->log)
            fprintf(p->log, "nightly: generic tasks: %d/%d with %s, %d/%d with the new adapter "
                    "at scale %.2f: %d lost, %d gained, a drop of %.1f points (standard error "
                    "%.1f) after %.0f s\n", r->eval_base, N, r->eval_ref, r->eval_adapter, N,
                    r->scale, r->eval_lost, r->eval_gained, drop, se, hx_time_mono() - t0);
        const size_t len = strlen(tried);
        snprintf(tried + len, sizeof tried - len, "%s%.1f points at scale %.2f", k ? ", " : "",
                 drop, r->scale);
        if (drop <= 100 * p->eval_margin + 1e-9) break;
    }
    r->eval_seconds = hx_time_mono() - t0;
    free(ref);
    if (rc) return rc;
    if (drop > 100 * p->eval_margin + 1e-9)
        snprintf(r->reason, sizeof r->reason, "discarded: generic tasks %d/%d with %s "
                 "-> %d/%d with the new adapter at scale %.2f (%d lost, %d gained); %s "
                 "of %s, at most %.1f allowed", r->eval_base, N, r->eval_ref,
                 r->eval_adapter, N, r->scale, r->eval_lost, r->eval_gained, ns > 1 ? "drops" : "a drop",
                 tried,
                 100 * p->eval_margin);
    return HX_OK;
}

/* Copies the file src to dst, an output the user names (through hx_out). */
static int copy_file(const char *src, const char *dst, hx_err *err)
{
    char *data = NULL;
    size_t len = 0;
    const char *inputs[] = {src, NULL};
    int rc = hx_read_file(src, 0, &data, &len, err);
    if (!rc) rc = hx_out_write_file(dst, inputs, data, len, 0666, err);
    free(data);
    return rc;
}

/* Writes the candidate and adopts it when it passed the gate. */
static int gate_and_adopt(hx_trainer *tr, const hx_nightly_params *p,
                          const char *dir, hx_nightly_report *r, hx_err *err)
{
    const double gain = (r->loss_before - r->loss_after) / r->loss_before;
    if (isnan(r->loss_before)) {
        snprintf(r->reason, sizeof r->reason, "discarded: the held-out episodes have "
                 "no assistant token to measure the loss on");
        return HX_OK;
    }
    if (!(gain >= p->min_gain)) {
        snprintf(r->reason, sizeof r->reason, "discarded: held-out loss %.4f -> "
                 "%.4f (needs a drop of %.1f%%)", r->loss_before, r->loss_after,
                 100 * p->min_gain);
        return HX_OK;
    }
    char cand[4200];
    snprintf(cand, sizeof cand, "%s/candidate.gguf", dir);
    int rc = hx_trainer_write_gguf(tr, cand, NULL, err);
    if (!rc && p->keep_candidate) rc = copy_file(cand, p->keep_candidate, err);
    if (!rc) rc = generic_gate(p, cand, r, err);
    if (rc || r->reason[0]) {
        remove(cand);
        return rc;
    }
    int off = 0;
    int64_t now = hx_now(&off) + off;
    int64_t days = now >= 0 ? now / 86400 : (now - 86399) / 86400, sec = now - days * 86400;
    int y, mo, dd;
    hx_civil_from_days(days, &y, &mo, &dd);
    /* a second adoption within the same second gets -2, -3, ...: never the
     * name of an adapter the store already holds */
    for (int k = 1; k < 100; k++) {
        char suffix[8] = "", path[4352];
        if (k > 1) snprintf(suffix, sizeof suffix, "-%d", k);
        snprintf(r->adapter, sizeof r->adapter, "nightly-%04d%02d%02d-%02d%02d%02d%s.gguf", y,
                 mo, dd, (int)(sec / 3600), (int)(sec / 60 % 60), (int)(sec % 60), suffix);
        hx_lora_store_path(p->store, r->adapter, path, sizeof path);
        if (access(path, F_OK) != 0) break;
    }
    if (!rc) rc = hx_lora_store_adopt(p->store, cand, r->adapter, r->scale, err);
    if (rc) return rc;
    remove(cand);
    r->adopted = 1;
    snprintf(r->reason, sizeof r->reason, "adopted %s at scale %.2f: held-out loss %.4f "
             "-> %.4f", r->adapter, r->scale, r->loss_before, r->loss_after);
    size_t len = strlen(r->reason);
    if (r->eval_n)
        snprintf(r->reason + len, sizeof r->reason - len, "; generic tasks %d/%d with %s "
                 "-> %d/%d (%d lost, %d gained)", r->eval_base, r->eval_n, r->eval_ref,
                 r->eval_adapter, r->eval_n, r->eval_lost, r->eval_gained);
    return HX_OK;
}

/* Tokens per forward: a micro-batch, or the longest held-out episode (cut
 * to the context as heldout_loss cuts it). */
static int peak_tokens(const hx_trainer *tr, const hx_nightly_params *p,
                       const hx_nightly_data *ho)
{
    const size_t n_ctx = (size_t)hx_trainer_hparams(tr)->n_ctx_train;
    const size_t n = (size_t)(p->train.seq_len < (int)n_ctx ? p->train.seq_len : (int)n_ctx) *
                     (size_t)(p->train.n_seq > 0 ? p->train.n_seq : 1);
    const size_t h = longest_doc(ho, n_ctx);
    return (int)(h > n ? h : n);
}

/* Fits training passes (forward: forward-only passes) of n_tok tokens over
 * tr with extra bytes beside within p->max_bytes, keeping in r the peak
 * estimate and the smallest weight cache of the run's passes: over it, a MoE base is read through a weight cache of
 * what the bound leaves (the same adapter, the experts read from the file
 * as they are used); else HX_ERR_RANGE, the reason saying what would fit. */
static int check_memory(hx_trainer *tr, const hx_nightly_params *p, int forward, int n_tok,
                        size_t extra, hx_nightly_report *r, hx_err *err)
{
    const size_t mapped = hx_trainer_weight_bytes(tr);
    size_t need = 0, budget = 0;
    int rc = (forward ? hx_trainer_fit_forward_memory : hx_trainer_fit_memory)(
        tr, n_tok, extra, p->max_bytes, &need, &budget, err);
    if (need > r->mem_estimate) r->mem_estimate = need;
    if (budget && (!r->weight_budget || budget < r->weight_budget)) r->weight_budget = budget;
    if (rc == HX_ERR_RANGE) {
        snprintf(r->reason, sizeof r->reason, "not started: %s", err->msg);
        return hx_err_set(err, rc, "nightly: %s", r->reason);
    }
    if (!rc && budget && p->log)
        fprintf(p->log, "nightly: the base (%.1f MiB) does not fit the bound of %.1f MiB with "
                "the rest: its experts are read from the file through a weight cache of "
                "%.1f MiB\n", mapped / 1048576.0, p->max_bytes / 1048576.0,
                budget / 1048576.0);
    return rc;
}

/* The training run's memory: its passes, the replay's soft targets and
 * keep_generic's sums. */
static int check_train_memory(hx_trainer *tr, const hx_nightly_params *p,
                              const hx_nightly_data *d, const hx_nightly_data *ho,
                              hx_nightly_report *r, hx_err *err)
{
    const size_t soft = p->replay_soft > 0 ? (size_t)p->replay_soft : 0;
    const size_t extra = d->n * soft * (sizeof *d->soft_id + sizeof *d->soft_p) +
                         (p->keep_generic > 0 ? hx_trainer_keep_bytes(tr) : 0);
    return check_memory(tr, p, 0, peak_tokens(tr, p, ho), extra, r, err);
}

/* keep_new's bound: forward passes over the longest of d's documents (cut
 * to the context), and unmask_known's greedy tokens beside. */
static int check_forward_memory(hx_trainer *tr, const hx_nightly_params *p,
                                const hx_nightly_data *d, hx_nightly_report *r, hx_err *err)
{
    const hx_hparams *hp = hx_trainer_hparams(tr);
    const size_t n = longest_doc(d, (size_t)hp->n_ctx_train);
    return check_memory(tr, p, 1, (int)n, n * (sizeof(int32_t) + sizeof(float)), r, err);
}

/* new_only: the user's training episodes keep the targets the base gets
 * wrong (before the replay is mixed in, which is trained whole); the base
 * is read within p->max_bytes as training reads it. */
static int keep_new(const hx_nightly_params *p, hx_nightly_data *train,
                    hx_nightly_report *r, hx_err *err)
{
    if (!p->new_only) return HX_OK;
    hx_trainer *tr = NULL;
    int rc = hx_nightly_trainer(p, NULL, &tr, err);
    if (!rc) rc = check_forward_memory(tr, p, train, r, err);
    if (!rc) rc = unmask_known(tr, train, r, err); /* B = 0: the base */
    hx_trainer_free(tr);
    if (!rc && p->log)
        fprintf(p->log, "nightly: %lld of %lld target tokens of the episodes are what the "
                "base writes already: left out (--train-on new)\n",
                (long long)r->known_targets, (long long)r->all_targets);
    if (!rc && r->known_targets == r->all_targets)
        rc = hx_err_set(err, HX_ERR_NOTFOUND, "nightly: the base already writes every "
                        "token of the training episodes: nothing to learn");
    return rc;
}

/* keep_generic: the sums of the replay's inputs at the adapted linears
 * (tr is the base: B = 0, and the adapter is off while collecting) and
 * the penalty's weight. */
static int keep_generic(hx_trainer *tr, const hx_nightly_params *p,
                        const hx_nightly_data *rep, hx_err *err)
{
    if (!(p->keep_generic > 0)) return HX_OK;
    if (!rep->n_docs)
        return hx_err_set(err, HX_ERR_INVALID, "nightly: --keep-generic needs the replay "
                          "(its conversations are what the adapter must keep)");
    const size_t n_ctx = (size_t)hx_trainer_hparams(tr)->n_ctx_train;
    int rc = HX_OK;
    size_t n = 0;
    for (int i = 0; !rc && i < rep->n_docs; i++) {
        const hx_batch b = doc_batch(rep, i, n_ctx);
        rc = hx_trainer_keep_collect(tr, &b, p->keep_at_targets, err);
        for (int t = 0; t < b.n_tok; t++) n += !p->keep_at_targets || b.mask[t];
    }
    hx_trainer_keep_set(tr, p->keep_generic);
    if (!rc && p->log)
        fprintf(p->log, "nightly: keep: the adapter's change on the replay's %zu %s "
                "costs %g times its relative size (sums: %.1f MiB)\n", n,
                p->keep_at_targets ? "positions of the assistant's tokens" : "tokens",
                p->keep_generic, hx_trainer_keep_bytes(tr) / 1048576.0);
    return rc;
}

/* base_id: hx_model_identity of p->model, taken where it was loaded. */
static int train_and_gate(hx_trainer *tr, const hx_nightly_params *p, const char *base_id,
                          hx_nightly_data *tr_d, const hx_nightly_data *ho,
                          const hx_nightly_data *rep, hx_nightly_report *r, hx_err *err)
{
    char key[65], ckpt[4200];
    int rc = check_train_memory(tr, p, tr_d, ho, r, err);
    if (!rc) rc = hx_mkdirs(p->work_dir, err);
    snprintf(ckpt, sizeof ckpt, "%s/nightly.ckpt", p->work_dir);
    if (!rc) rc = heldout_loss(tr, ho, &r->loss_before, err); /* B = 0: the base */
    if (!rc && p->replay_soft > 0) { /* the base's too, before a checkpoint loads */
        rc = soft_targets(tr, tr_d, p->replay_soft, r, err);
        if (!rc && p->log)
            fprintf(p->log, "nightly: %lld replay targets learned as the base's %d most "
                    "likely tokens there\n", (long long)r->soft_targets, p->replay_soft);
    }
    if (!rc) rc = keep_generic(tr, p, rep, err);
    if (!rc) run_key(p, base_id, tr_d, key);
    if (!rc) rc = resume(tr, p->work_dir, key, r, p->log, err);
    if (!rc) rc = train_chunks(tr, p, tr_d, ho, ckpt, r, err);
    if (!rc) rc = heldout_loss(tr, ho, &r->loss_after, err);
    struct rusage ru;
    if (!getrusage(RUSAGE_SELF, &ru)) r->peak_rss_kb = ru.ru_maxrss;
    if (!rc) rc = gate_and_adopt(tr, p, p->work_dir, r, err);
    if (!rc) remove(ckpt); /* done: the next night starts afresh */
    return rc;
}

/* Documents of d longer than window tokens. */
static int count_longer(const hx_nightly_data *d, int window)
{
    int n = 0;
    for (int i = 0; i < d->n_docs; i++)
        n += d->ends[i] - (i ? d->ends[i - 1] : 0) > (size_t)window;
    return n;
}

/* The training sequence: as long as the longest document needs (rounded
 * up to 64 tokens), within p->train.seq_len and the model's context. A
 * conversation that fits is trained on whole, each turn after exactly the
 * prompt the planner fed for it; in a window its head is cut to 3/4 of
 * the window and the turn loses the request and the earlier calls (with
 * 1,024-token windows the persona's room, decided after its second call,
 * was learned without them and not used at inference). */
static int fit_seq_len(const hx_nightly_params *p, int n_ctx, const hx_nightly_data *a,
                       const hx_nightly_data *b)
{
    size_t longest = 0;
    for (int k = 0; k < 2; k++) {
        const hx_nightly_data *d = k ? b : a;
        for (int i = 0; i < d->n_docs; i++) {
            const size_t len = d->ends[i] - (i ? d->ends[i - 1] : 0);
            longest = len > longest ? len : longest;
        }
    }
    int seq = p->train.seq_len < n_ctx ? p->train.seq_len : n_ctx;
    const size_t need = longest > 1 ? (longest - 1 + 63) / 64 * 64 : 64;
    return need < (size_t)seq ? (int)need : seq;
}

/* Trains on the episodes fitted into the training windows (a long
 * episode's assistant turns each in a window with its head). */
static int run_with_data(const hx_nightly_params *p, const char *base_id,
                         const hx_nightly_data *tr_d, const hx_nightly_data *ho,
                         const hx_nightly_data *rep, hx_nightly_report *r, hx_err *err)
{
    hx_trainer *tr = NULL;
    hx_nightly_data wt, wh;
    memset(&wt, 0, sizeof wt), memset(&wh, 0, sizeof wh);
    int rc = hx_nightly_trainer(p, NULL, &tr, err);
    if (rc) return rc;
    hx_nightly_params q = *p;
    q.train.seq_len = fit_seq_len(p, hx_trainer_hparams(tr)->n_ctx_train, tr_d, ho);
    const int window = q.train.seq_len + 1;
    rc = hx_nightly_windows(tr_d, window, &wt, err);
    if (!rc) rc = hx_nightly_windows(ho, window, &wh, err);
    if (!rc && (wt.n < 2 || !wh.n_docs))
        rc = hx_err_set(err, HX_ERR_NOTFOUND, "nightly: no assistant turn to learn from "
                        "or to measure in the episodes");
    r->seq_len = q.train.seq_len;
    r->docs_cut = count_longer(tr_d, window) + count_longer(ho, window);
    if (!rc && p->log)
        fprintf(p->log, "nightly: sequences of %d tokens: %d + %d documents (training + "
                "held out), %d of them longer, cut into windows at their assistant turns "
                "(%d + %d)\n", q.train.seq_len, tr_d->n_docs, ho->n_docs, r->docs_cut,
                wt.n_docs, wh.n_docs);
    if (!rc) rc = train_and_gate(tr, &q, base_id, &wt, &wh, rep, r, err);
    hx_nightly_data_free(&wt), hx_nightly_data_free(&wh);
    hx_trainer_free(tr);
    return rc;
}

int hx_nightly_run(const hx_nightly_params *p, hx_nightly_report *r,
                   hx_err *err)
{
    memset(r, 0, sizeof *r);
    if (!p->model || !p->memory || !p->store || !p->work_dir)
        return hx_err_set(err, HX_ERR_INVALID, "nightly: model, memory, store "
                          "and work_dir are required");
    if (!may_run(p, r->reason, sizeof r->reason))
        return hx_err_set(err, HX_ERR_STATE, "%s", r->reason);
    hx_model *m = NULL;
    char base_id[65] = "";
    int rc = hx_model_load(p->model, NULL, &m, err);
    if (!rc) hx_model_identity(m, base_id);
    if (!rc && !hx_model_vocab(m))
        rc = hx_err_set(err, HX_ERR_FORMAT, "%s has no tokenizer", p->model);
    hx_nightly_data tr_d, ho, rep;
    memset(&tr_d, 0, sizeof tr_d), memset(&ho, 0, sizeof ho), memset(&rep, 0, sizeof rep);
    if (!rc) rc = hx_nightly_dataset(hx_model_vocab(m), p->memory, p->heldout_frac,
                                     p->render, p->render_user, &tr_d, &ho, err);
    hx_model_free(m);
    if (!rc) {
        r->n_train = tr_d.n_episodes, r->n_heldout = ho.n_episodes;
        r->train_tokens = (int64_t)tr_d.n, r->heldout_tokens = (int64_t)ho.n;
        if (tr_d.n_episodes < p->min_train || ho.n_episodes < 1)
            rc = hx_err_set(err, HX_ERR_NOTFOUND, "nightly: %d training and %d "
                            "held-out episodes; needs at least %d and 1", tr_d.n_episodes,
                            ho.n_episodes, p->min_train);
    }
    if (!rc) rc = keep_new(p, &tr_d, r, err);
    if (!rc) rc = add_replay(p, &tr_d, &rep, r, err);
    if (!rc) rc = run_with_data(p, base_id, &tr_d, &ho, &rep, r, err);
    if (rc == HX_ERR_CANCELLED) hx_err_set(err, rc, "nightly: paused, %s", r->reason);
    if (p->log && r->reason[0]) fprintf(p->log, "nightly: %s\n", r->reason);
    hx_nightly_data_free(&tr_d);
    hx_nightly_data_free(&ho);
    hx_nightly_data_free(&rep);
    return rc;
}
