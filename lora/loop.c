/* loop.c: the training loop (random windows of a token stream, gradient
 * accumulation, AdamW, checkpoints, progress) and the loss-curve SVG. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lora/train_int.h"

hx_train_params hx_train_default_params(void)
{
    hx_train_params p;
    memset(&p, 0, sizeof p);
    p.opt = hx_opt_default_params();
    p.seq_len = 64;
    p.n_seq = 4;
    p.accum = 1;
    p.seed = 1;
    return p;
}

/* The micro-batches of one step: windows drawn with the trainer's RNG. */
typedef struct step_data {
    int32_t *tok, *tgt, *doc, *pre;
    uint8_t *mask;  /* each row's target weight (0: no target) */
    int32_t *sid;   /* soft targets of the rows (n_win * T * k), or NULL */
    float *sp;
    int k;
    int n_win, T;
    int ctx;        /* the model's context: no position reaches it */
    size_t *starts; /* packed documents: where those a window can start at
                     * begin (so no window cuts a document's head off) */
    size_t n_starts;
} step_data;

/* The document starts a window of T + 1 tokens fits after; 0 when memory
 * is short or none fits (windows then start anywhere). */
static void find_starts(const hx_train_data *d, step_data *s)
{
    const size_t span = d->n - (size_t)s->T;
    size_t n = 0;
    for (size_t i = 0; i < span; i++) n += i == 0 || d->doc[i] != d->doc[i - 1];
    s->starts = hx_malloc_array(n ? n : 1, sizeof(size_t));
    if (!s->starts) return;
    for (size_t i = 0; i < span; i++)
        if (i == 0 || d->doc[i] != d->doc[i - 1]) s->starts[s->n_starts++] = i;
}

/* What data token x counts for as a target: 0 (none: last says it
 * starts the next document, or it is masked out) or its weight. */
static uint8_t target_weight(const hx_train_data *d, size_t x, int last)
{
    if (last || (d->mask && !d->mask[x])) return 0;
    return d->weight && d->weight[x] > 1 ? d->weight[x] : 1;
}

/* Row r's soft target: that of data token x (its target), or none. */
static void put_soft(const hx_train_data *d, step_data *s, size_t r, size_t x, int on)
{
    if (!s->sp) return;
    const size_t k = (size_t)s->k;
    if (!on) {
        s->sp[r * k] = 0.0f;
        return;
    }
    memcpy(s->sid + r * k, d->soft_id + x * k, k * sizeof *s->sid);
    memcpy(s->sp + r * k, d->soft_p + x * k, k * sizeof *s->sp);
}

/* One past the last token of the document holding token x. */
static size_t doc_end(const hx_train_data *d, size_t x)
{
    while (x + 1 < d->n && d->doc[x + 1] == d->doc[x]) x++;
    return x + 1;
}

/* How many leading tokens the documents at a and b (a's ends at a_end)
 * share, if at least min and short of b's end; else 0. */
static size_t shared_len(const hx_train_data *d, size_t a, size_t a_end, size_t b,
                         int min)
{
    const size_t b_end = doc_end(d, b);
    size_t n = 0;
    while (a + n < a_end && b + n < b_end && d->tokens[a + n] == d->tokens[b + n]) n++;
    return n >= (size_t)min && b + n < b_end ? n : 0;
}

/* Window w from the document at off and those after it, each with its
 * positions from 0; with min > 0 a later document that shares min or more
 * leading tokens with the first is packed without them and sees the
 * first's copy. A document that would reach the context is cut there and
 * the rest skipped (a window may be longer than the context). Returns the
 * count of masked targets (weighted). */
static long draw_docs(const hx_train_data *d, step_data *s, int min, int w, size_t off)
{
    long cnt = 0;
    const size_t head_end = doc_end(d, off);
    size_t x = off;
    int32_t seg = 0, pre = 0, pos = 0;
    for (int i = 0; i < s->T; i++) {
        const size_t k = (size_t)w * s->T + i;
        if (x + 1 >= d->n) { /* out of data: padding that predicts nothing */
            s->tok[k] = s->tgt[k] = d->tokens[d->n - 1];
            s->mask[k] = 0, s->doc[k] = seg + 1, s->pre[k] = 0;
            put_soft(d, s, k, 0, 0);
            continue;
        }
        s->tok[k] = d->tokens[x];
        s->tgt[k] = d->tokens[x + 1];
        s->doc[k] = seg, s->pre[k] = pre;
        const int last = d->doc[x + 1] != d->doc[x];
        s->mask[k] = target_weight(d, x + 1, last);
        put_soft(d, s, k, x + 1, s->mask[k]);
        cnt += s->mask[k];
        x++;
        if (!last && ++pos < s->ctx) continue;
        if (!last) x = doc_end(d, x);
        seg++;
        const size_t n = min > 0 && i + 1 >= (int)(head_end - off)
                             ? shared_len(d, off, head_end, x, min) : 0;
        x += n, pre = pos = (int32_t)n;
    }
    return cnt;
}

/* Draws the step's windows; returns the count of masked targets
 * (weighted: the step's loss is their weighted mean). */
static long draw_step(hx_trainer *tr, const hx_train_data *d, step_data *s, int share)
{
    long cnt = 0;
    const size_t span = d->n - (size_t)s->T;
    for (int w = 0; w < s->n_win; w++) {
        const uint64_t r = hx_splitmix64(&tr->rng);
        const size_t off = s->n_starts ? s->starts[r % s->n_starts] : (size_t)(r % span);
        tr->data_pos++;
        if (d->doc) {
            cnt += draw_docs(d, s, share, w, off);
            continue;
        }
        for (int i = 0; i < s->T; i++) {
            const size_t k = (size_t)w * s->T + i;
            s->tok[k] = d->tokens[off + i];
            s->tgt[k] = d->tokens[off + i + 1];
            s->mask[k] = target_weight(d, off + i + 1, 0);
            s->doc[k] = 0;
            put_soft(d, s, k, off + i + 1, s->mask[k]);
            cnt += s->mask[k];
        }
    }
    return cnt;
}

static int one_step(hx_trainer *tr, const hx_train_data *d,
                    const hx_train_params *p, const hx_opt_params *o,
                    step_data *s, double *loss, double *gnorm, long *targets,
                    hx_err *err)
{
    const int share = p->share_prefix > 0 && d->doc ? p->share_prefix : 0;
    const long cnt = draw_step(tr, d, s, share);
    *targets = cnt;
    const double norm = cnt > 0 ? (double)cnt : 1.0;
    const size_t per = (size_t)p->n_seq * s->T;
    double total = 0.0;
    hx_trainer_zero_grad(tr);
    for (int a = 0; a < p->accum; a++) {
        hx_batch b = {p->n_seq, s->T, s->tok + a * per, s->tgt + a * per,
                      s->mask + a * per, d->doc ? s->doc + a * per : NULL,
                      share ? s->pre + a * per : NULL,
                      s->sp ? s->sid + a * per * (size_t)s->k : NULL,
                      s->sp ? s->sp + a * per * (size_t)s->k : NULL, s->k,
                      d->weight ? s->mask + a * per : NULL};
        double l = 0.0;
        int rc = hx_trainer_grad(tr, &b, norm, &l, err);
        if (rc) return rc;
        total += l;
    }
    *loss = total / norm;
    int rc = hx_trainer_step(tr, o, gnorm);
    if (rc && rc != HX_ERR_RANGE) return hx_err_set(err, rc, "train: optimizer step failed");
    if (rc == HX_ERR_RANGE && p->log)
        fprintf(p->log, "step %d: non-finite gradient norm, update skipped\n", tr->step);
    if (hx_tr_push_loss(tr, (float)*loss))
        return hx_err_set(err, HX_ERR_NOMEM, "train: out of memory");
    return HX_OK;
}

/* With packed documents: the smallest offset in its document of a token
 * that has a target (SIZE_MAX: none). A window holds a document's tokens
 * only below the context and the window's length. */
static size_t first_target(const hx_train_data *d)
{
    size_t best = SIZE_MAX, start = 0;
    for (size_t x = 0; x + 1 < d->n; x++) {
        if (x > 0 && d->doc[x] != d->doc[x - 1]) start = x;
        if (d->doc[x + 1] == d->doc[x] && (!d->mask || d->mask[x + 1]) && x - start < best)
            best = x - start;
    }
    return best;
}

static int check_params(const hx_trainer *tr, const hx_train_data *d,
                        const hx_train_params *p, hx_err *err)
{
    if (p->seq_len < 1 || p->n_seq < 1 || p->accum < 1 || p->opt.n_steps < 1)
        return hx_err_set(err, HX_ERR_INVALID, "train: seq_len %d, n_seq %d, "
                          "accum %d, steps %d", p->seq_len, p->n_seq, p->accum,
                          p->opt.n_steps);
    if (p->seq_len > tr->hp.n_ctx_train && !(d && d->doc))
        return hx_err_set(err, HX_ERR_RANGE, "train: seq_len %d beyond the "
                          "context of %d (only packed documents may be longer)",
                          p->seq_len, tr->hp.n_ctx_train);
    if (!d || !d->tokens || d->n < (size_t)p->seq_len + 2)
        return hx_err_set(err, HX_ERR_INVALID, "train: %zu tokens of data is "
                          "too few for windows of %d", d ? d->n : 0, p->seq_len + 1);
    for (size_t i = 0; i < d->n; i++)
        if (d->tokens[i] < 0 || d->tokens[i] >= tr->hp.n_vocab)
            return hx_err_set(err, HX_ERR_RANGE, "train: data token %d at %zu "
                              "outside the vocabulary of %d", d->tokens[i], i,
                              tr->hp.n_vocab);
    const int reach = p->seq_len < tr->hp.n_ctx_train ? p->seq_len : tr->hp.n_ctx_train;
    const size_t first = d->doc ? first_target(d) : 0;
    if (first != SIZE_MAX && first >= (size_t)reach)
        return hx_err_set(err, HX_ERR_RANGE, "train: no document has a target in its "
                          "first %d tokens (the earliest is at token %zu): the context "
                          "or the windows are too short for this data", reach, first);
    return HX_OK;
}

static void report(hx_trainer *tr, const hx_train_params *p,
                   const hx_opt_params *o, hx_progress *pg, double loss,
                   double gnorm, long targets, double tps)
{
    char extra[96];
    snprintf(extra, sizeof extra, "loss %.4f  %.0f tok/s", loss, tps);
    if (p->progress) hx_progress_update(pg, tr->step, extra);
    if (!p->log) return;
    char keep[32] = "";
    if (tr->keep_lambda > 0) snprintf(keep, sizeof keep, " keep %.6f", tr->keep_value);
    fprintf(p->log, "step %d loss %.6f%s lr %.3g gnorm %.4f targets %ld tok/s %.0f\n", tr->step,
            loss, keep, hx_opt_lr(o, tr->step - 1), gnorm, targets, tps);
}

/* The schedule length: opt.n_steps, or the steps a time budget allows at
 * the rate measured in this call (done steps in el seconds), fixed in
 * the trainer (and so in checkpoints) once steps already taken depend on
 * it: when a WSD decay starts, or after the warmup (at least 5 steps) of
 * a cosine schedule. */
static int sched_len(hx_trainer *tr, const hx_train_params *p, int done,
                     double el)
{
    if (tr->sched_steps > 0) return tr->sched_steps;
    if (p->time_budget <= 0 || done == 0) return p->opt.n_steps;
    const double left = p->time_budget - tr->train_seconds;
    const double fit = left > 0 ? left / (el / done) : 0;
    hx_opt_params o = p->opt;
    o.n_steps = fit < (double)(p->opt.n_steps - tr->step) ? tr->step + (int)fit : p->opt.n_steps;
    if (o.n_steps < 1) o.n_steps = 1;
    const int fixed_at = o.wsd ? hx_tr_wsd_decay_start(&o) : (o.warmup > 5 ? o.warmup : 5);
    if (tr->step >= fixed_at) tr->sched_steps = o.n_steps;
    return o.n_steps;
}

int hx_train_run(hx_trainer *tr, const hx_train_data *d,
                 const hx_train_params *p, hx_err *err)
{
    int rc = check_params(tr, d, p, err);
    if (rc) return rc;
    step_data s = {0};
    s.T = p->seq_len;
    s.ctx = tr->hp.n_ctx_train;
    s.n_win = p->n_seq * p->accum;
    const size_t n = (size_t)s.n_win * s.T;
    s.tok = hx_malloc_array(n, sizeof(int32_t));
    s.tgt = hx_malloc_array(n, sizeof(int32_t));
    s.mask = hx_malloc_array(n, 1);
    s.doc = hx_malloc_array(n, sizeof(int32_t));
    s.pre = hx_malloc_array(n, sizeof(int32_t));
    if (d->soft_p && d->soft_id && d->soft_k > 0) {
        s.k = d->soft_k;
        s.sid = hx_malloc_array(n * (size_t)s.k, sizeof(int32_t));
        s.sp = hx_malloc_array(n * (size_t)s.k, sizeof(float));
        if (!s.sid || !s.sp) rc = HX_ERR_NOMEM;
    }
    if (rc || !s.tok || !s.tgt || !s.mask || !s.doc || !s.pre) rc = hx_err_set(err, HX_ERR_NOMEM, "train: out of memory");
    if (!rc && d->doc) find_starts(d, &s);
    if (tr->step == 0 && tr->data_pos == 0) tr->rng ^= p->seed * 0x9e3779b97f4a7c15ull;
    const double t0 = hx_time_mono(), base = tr->train_seconds;
    int done_here = 0, end = sched_len(tr, p, 0, 0.0);
    hx_progress pg;
    if (p->progress) hx_progress_start(&pg, "train", end);
    while (!rc && tr->step < end) {
        hx_opt_params o = p->opt;
        o.n_steps = end;
        double loss = 0, gnorm = 0;
        long targets = 0;
        if ((rc = one_step(tr, d, p, &o, &s, &loss, &gnorm, &targets, err))) break;
        done_here++;
        const double el = hx_time_mono() - t0;
        tr->train_seconds = base + el;
        end = sched_len(tr, p, done_here, el);
        pg.total = end;
        report(tr, p, &o, &pg, loss, gnorm, targets, el > 0 ? (double)done_here * n / el : 0);
        const int last = tr->step >= end ||
                         (p->stop_after > 0 && done_here >= p->stop_after);
        if (p->ckpt_path && (last || (p->ckpt_every > 0 && tr->step % p->ckpt_every == 0)))
            rc = hx_trainer_save(tr, p->ckpt_path, err);
        if (last) break;
    }
    if (p->progress) hx_progress_finish(&pg);
    if (!rc && p->svg_path && tr->step >= end)
        rc = hx_write_loss_svg(p->svg_path, tr->losses, tr->step, err);
    free(s.tok);
    free(s.tgt);
    free(s.mask);
    free(s.doc);
    free(s.pre);
    free(s.sid);
    free(s.sp);
    free(s.starts);
    return rc;
}

/* ---- loss curve ---- */

int hx_write_loss_svg(const char *path, const float *loss, int n, hx_err *err)
{
    const double W = 640, H = 360, L = 60, R = 20, T = 20, B = 40;
    float lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < n; i++)
        if (isfinite(loss[i])) {
            lo = loss[i] < lo ? loss[i] : lo;
            hi = loss[i] > hi ? loss[i] : hi;
        }
    if (!(hi >= lo)) lo = 0, hi = 1;
    if (hi - lo < 1e-6f) hi = lo + 1e-6f;
    hx_buf b;
    hx_buf_init(&b);
    hx_buf_printf(&b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" "
                  "height=\"%g\" font-family=\"sans-serif\" font-size=\"12\">\n"
                  "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
                  "<path d=\"M%g %g V%g H%g\" stroke=\"black\" fill=\"none\"/>\n",
                  W, H, L, T, H - B, W - R);
    hx_buf_printf(&b, "<text x=\"%g\" y=\"%g\" text-anchor=\"end\">%.3f</text>\n"
                  "<text x=\"%g\" y=\"%g\" text-anchor=\"end\">%.3f</text>\n"
                  "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">step (%d)</text>\n"
                  "<text x=\"12\" y=\"%g\" transform=\"rotate(-90 12 %g)\" "
                  "text-anchor=\"middle\">loss</text>\n<polyline fill=\"none\" "
                  "stroke=\"#1f5fbf\" stroke-width=\"1.5\" points=\"",
                  L - 4, T + 4, hi, L - 4, H - B, lo, (L + W - R) / 2, H - 10, n,
                  (T + H - B) / 2, (T + H - B) / 2);
    for (int i = 0; i < n; i++) {
        if (!isfinite(loss[i])) continue;
        const double x = L + (n > 1 ? (double)i / (n - 1) : 0.5) * (W - L - R);
        const double y = T + (hi - loss[i]) / (hi - lo) * (H - T - B);
        hx_buf_printf(&b, "%.1f,%.1f ", x, y);
    }
    hx_buf_puts(&b, "\"/>\n</svg>\n");
    int rc = b.oom ? hx_err_set(err, HX_ERR_NOMEM, "svg: out of memory")
                   : hx_out_write_file(path, NULL, b.data, b.len, 0666, err);
    hx_buf_free(&b);
    return rc;
}
