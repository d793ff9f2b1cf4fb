/* sched.c: the slots that run the jobs: each a thread with its own engine
 * source (its KV cache: a conversation's prefix stays there for its next
 * request), all on the one model. The conversations decoding advance
 * together, a token each per forward pass (hx_decode_seqs); prefills and
 * those passes take turns, a slice at a time. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve/serve_int.h"

/* A fair lock: tickets served in order. */
typedef struct turnstile {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t next, serving;
} turnstile;

struct sv_slot {
    sv_sched *sc;
    int id;
    pthread_t th;
    int started;
    hx_source src;
    int own_src;          /* made here (else the session's) */
    hx_source planner_src; /* src seen through the turn (the planner's) */
    int idle;
    sv_job *cur;
    char head[SV_PROMPT_HEAD]; /* the start of the prompt its cache holds */
    int last_kind;        /* SV_JOB_* it ran last */
    uint64_t last_used;   /* when it took its last job (sv_sched.clock) */
    /* decoding together (sv_sched.gmu): between its prompt and its turn's
     * end; a decode submitted and not yet run, and its result in step.rc */
    int decoding, pending;
    hx_seq_step step;
    int n_steps, n_shared; /* its job's decodes, those run with others' */
};

struct sv_sched {
    hx_server *srv;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    sv_job *head, *tail;
    int n_queued, max_queue;
    int ask_running;      /* the assistant runs one request at a time: its
                             tools, policy and memory are one user's */
    int stopping;
    uint64_t clock;       /* jobs taken so far */
    sv_slot *slots;
    int n_slots;
    turnstile ts;
    /* decoding together: slots decoding, decodes submitted, one slot
     * running them, since when the oldest waits */
    pthread_mutex_t gmu;
    pthread_cond_t gcv;
    int n_decoding, n_pending, leading;
    double first_at;
    double pass_s;        /* seconds of the last call run, 0 before one */
    /* seconds per token of decodes run one by one [0] and together [1]
     * lately (0: not yet measured), and the calls run */
    double tok_s[2];
    uint64_t calls;
};

static _Thread_local sv_slot *tl_slot; /* the slot this thread runs */

static void take_turn(turnstile *t)
{
    pthread_mutex_lock(&t->mu);
    uint64_t me = t->next++;
    while (t->serving != me) pthread_cond_wait(&t->cv, &t->mu);
    pthread_mutex_unlock(&t->mu);
}

static void give_turn(turnstile *t)
{
    pthread_mutex_lock(&t->mu);
    t->serving++;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

int hx_sv_slot_cancelled(sv_slot *s)
{
    return s->sc->stopping || (s->cur && hx_sv_job_gone(s->cur));
}

int hx_serve_prefill_check(void *user)
{
    (void)user;
    sv_slot *s = tl_slot;
    if (!s) return 0;
    if (hx_sv_slot_cancelled(s)) return 1;
    give_turn(&s->sc->ts); /* the others decode while this prompt waits */
    take_turn(&s->sc->ts);
    return 0;
}

/* Waits on cv (its clock CLOCK_MONOTONIC), until `until` (monotonic
 * seconds) when not 0. */
static void wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, double until)
{
    if (!until) {
        pthread_cond_wait(cv, mu);
        return;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double d = until - hx_time_mono();
    long ns = d > 0 ? (long)(d * 1e9) : 0;
    ts.tv_sec += ns / 1000000000L + (ts.tv_nsec + ns % 1000000000L) / 1000000000L;
    ts.tv_nsec = (ts.tv_nsec + ns % 1000000000L) % 1000000000L;
    pthread_cond_timedwait(cv, mu, &ts);
}

/* ---- decoding together ----
 * The decodes of the slots' generations (their engine contexts' hook)
 * meet here. The first slot to find no pass running and every decoding
 * slot's tokens in (or half a call's time gone since the oldest came, at
 * most GATHER_WAIT_S: waiting longer than the pass a late one would share
 * costs more than it saves) runs them all in one hx_decode_seqs, taking
 * the turn for it: each weight read once for every conversation (or one
 * by one, where that has cost less: together_pays). Every slot waiting
 * is in each such call, so none waits more than one round. The numbers
 * are those of each conversation decoding alone, so who rides with whom
 * changes no token; each slot then samples with its own sampler,
 * grammar, stop rules and limits. A slot whose client left stops
 * submitting and leaves; the others wait for it no longer. */
#define GATHER_WAIT_S 0.002

/* Whether s counts as decoding: from its prompt to its turn's end. */
static void set_decoding(sv_slot *s, int on)
{
    sv_sched *sc = s->sc;
    pthread_mutex_lock(&sc->gmu);
    if (s->decoding != on) sc->n_decoding += on ? 1 : -1;
    s->decoding = on;
    pthread_cond_broadcast(&sc->gcv);
    pthread_mutex_unlock(&sc->gmu);
}

/* Whether decodes run together cost less per token than one by one, as
 * measured lately: on a model too small for its weights' reads to
 * matter, one pass per conversation is faster. Every PROBE_EVERY calls
 * the other way is measured again (and each until it has been). */
#define PROBE_EVERY 32
static int together_pays(sv_sched *sc)
{
    const int probe = sc->calls++ % PROBE_EVERY == 0;
    if (!sc->tok_s[0] || !sc->tok_s[1]) return !sc->tok_s[1];
    const int best = sc->tok_s[1] <= sc->tok_s[0];
    return probe ? !best : best;
}

/* Runs every decode submitted, in one call when that pays (else one call
 * each), with the turn (sc->gmu held, released meanwhile). A sequence
 * the call refuses (a context unlike the first's) decodes alone. */
static void lead(sv_sched *sc)
{
    sv_slot *in[SV_MAX_SLOTS];
    hx_seq_step q[SV_MAX_SLOTS];
    int n = 0;
    for (int i = 0; i < sc->n_slots; i++)
        if (sc->slots[i].pending) in[n] = &sc->slots[i], q[n++] = sc->slots[i].step;
    const int together = n > 1 && together_pays(sc);
    sc->leading = 1;
    pthread_mutex_unlock(&sc->gmu);
    take_turn(&sc->ts);
    const double t0 = hx_time_mono();
    if (!together || hx_decode_seqs(q, n))
        for (int i = 0; i < n; i++)
            if (!together || q[i].rc == HX_ERR_INVALID) hx_decode_seqs(&q[i], 1);
    const double dt = hx_time_mono() - t0;
    give_turn(&sc->ts);
    pthread_mutex_lock(&sc->gmu);
    sc->pass_s = dt;
    int tokens = 0;
    for (int i = 0; i < n; i++) tokens += q[i].n;
    double *est = &sc->tok_s[together];
    *est = *est > 0 ? 0.8 * *est + 0.2 * dt / tokens : dt / tokens;
    for (int i = 0; i < n; i++) {
        in[i]->step.rc = q[i].rc;
        in[i]->pending = 0;
        in[i]->n_steps++;
        in[i]->n_shared += together;
    }
    sc->n_pending -= n;
    sc->leading = 0;
    pthread_cond_broadcast(&sc->gcv);
}

/* The decode hook of each slot's context (hx_ctx_set_decode_hook): called
 * within hx_sv_slot_next, whose turn it lends to the others while the
 * decode waits to be run with theirs. */
static int gather_decode(void *user, hx_ctx *c, const int32_t *tok, int n, int out_from)
{
    sv_slot *s = user;
    sv_sched *sc = s->sc;
    give_turn(&sc->ts);
    pthread_mutex_lock(&sc->gmu);
    s->step = (hx_seq_step){c, tok, n, out_from, HX_OK};
    s->pending = 1;
    if (sc->n_pending++ == 0) sc->first_at = hx_time_mono();
    pthread_cond_broadcast(&sc->gcv);
    while (s->pending) {
        const double wait = sc->pass_s / 2 < GATHER_WAIT_S ? sc->pass_s / 2 : GATHER_WAIT_S;
        const double until = sc->first_at + wait;
        if (!sc->leading && (sc->n_pending >= sc->n_decoding || hx_time_mono() >= until))
            lead(sc);
        else
            wait_until(&sc->gcv, &sc->gmu, sc->leading ? 0 : until);
    }
    const int rc = s->step.rc;
    pthread_mutex_unlock(&sc->gmu);
    take_turn(&sc->ts);
    return rc;
}

/* ---- the slot's source through the turn ---- */
hx_server *hx_sv_slot_server(sv_slot *s) { return s->sc->srv; }

int hx_sv_slot_configure(sv_slot *s, const hx_engine_turn *t, hx_err *err)
{
    return hx_source_engine_configure(&s->src, t, err);
}

/* Remembers what the slot's KV cache now holds (its prompt's start; the
 * other slots read it choosing requests). */
static void note_prompt(sv_slot *s, const char *prompt)
{
    pthread_mutex_lock(&s->sc->mu);
    snprintf(s->head, sizeof s->head, "%s", prompt);
    pthread_mutex_unlock(&s->sc->mu);
}

int hx_sv_slot_begin(sv_slot *s, const char *prompt, const hx_tpl_marks *marks, int choice,
                  int *n_prompt, hx_err *err)
{
    set_decoding(s, 0);
    take_turn(&s->sc->ts);
    int rc = s->src.begin_marked(s->src.ctx, prompt, marks, choice, n_prompt, err);
    give_turn(&s->sc->ts);
    if (!rc) note_prompt(s, prompt);
    set_decoding(s, !rc);
    return rc;
}

int hx_sv_slot_next(sv_slot *s, hx_buf *piece, int *end, hx_err *err)
{
    take_turn(&s->sc->ts);
    int rc = s->src.next(s->src.ctx, piece, end, err);
    give_turn(&s->sc->ts);
    if (rc || *end) set_decoding(s, 0);
    return rc;
}


static int planner_begin(void *ctx, const char *prompt, const hx_tpl_marks *marks, int choice,
                         int *n_prompt, hx_err *err)
{
    return hx_sv_slot_begin(ctx, prompt, marks, choice, n_prompt, err);
}

static int planner_begin_plain(void *ctx, const char *prompt, int choice, int *n_prompt,
                               hx_err *err)
{
    return hx_sv_slot_begin(ctx, prompt, NULL, choice, n_prompt, err);
}

static int planner_next(void *ctx, hx_buf *piece, int *end, hx_err *err)
{
    return hx_sv_slot_next(ctx, piece, end, err);
}

#define FORWARD(name, args, call)                               \
    static int name args                                        \
    {                                                           \
        sv_slot *s = ctx;                                       \
        return s->src.call;                                     \
    }
FORWARD(planner_count, (void *ctx, const char *text), count(s->src.ctx, text))
FORWARD(planner_copy_text, (void *ctx, const char *text), set_copy_text(s->src.ctx, text))
FORWARD(planner_repair, (void *ctx, cJSON *args), repair_args(s->src.ctx, args))
FORWARD(planner_known, (void *ctx, const char *list), set_known_addresses(s->src.ctx, list))
FORWARD(planner_request, (void *ctx, const char *text), set_request(s->src.ctx, text))
FORWARD(planner_limit, (void *ctx), limit(s->src.ctx))
FORWARD(planner_ground, (void *ctx, const char *text, const char *claims),
        set_ground(s->src.ctx, text, claims))
FORWARD(planner_refused, (void *ctx, const char *calls), set_refused_calls(s->src.ctx, calls))
FORWARD(planner_answer_end, (void *ctx, const char *text, size_t n, size_t *end),
        answer_end(s->src.ctx, text, n, end))

static void planner_arg_check(void *ctx, hx_arg_check_fn check, void *user)
{
    sv_slot *s = ctx;
    s->src.set_arg_check(s->src.ctx, check, user);
}

hx_source *hx_sv_slot_planner_source(sv_slot *s) { return &s->planner_src; }

/* The planner's view of the slot's source: every call of the engine
 * source's table (the grounding, the argument checks, the refused calls
 * and the context's limit too), the turn taken around each begin and
 * next; the slot owns the source. */
static void make_planner_source(sv_slot *s)
{
    s->planner_src = (hx_source){.api_version = HX_SOURCE_API, .name = "serve slot", .ctx = s,
                                 .begin = planner_begin_plain, .next = planner_next,
                                 .count = planner_count, .set_copy_text = planner_copy_text,
                                 .repair_args = planner_repair,
                                 .set_known_addresses = planner_known,
                                 .set_request = planner_request,
                                 .begin_marked = planner_begin, .limit = planner_limit,
                                 .set_ground = planner_ground,
                                 .set_arg_check = planner_arg_check,
                                 .set_refused_calls = planner_refused,
                                 .answer_end = planner_answer_end};
}

/* ---- the queue ---- */
int hx_sv_sched_submit(sv_sched *sc, sv_job *j)
{
    pthread_mutex_lock(&sc->mu);
    int rc = sc->stopping ? HX_ERR_STATE : sc->n_queued >= sc->max_queue ? HX_ERR_FULL : HX_OK;
    if (!rc) {
        j->next = NULL;
        if (sc->tail) sc->tail->next = j;
        else sc->head = j;
        sc->tail = j;
        sc->n_queued++;
        pthread_cond_broadcast(&sc->cv);
    }
    pthread_mutex_unlock(&sc->mu);
    return rc;
}

static size_t common_prefix(const char *a, const char *b)
{
    size_t n = 0;
    while (a[n] && a[n] == b[n]) n++;
    return n;
}

/* How much of j's prompt o's cache holds when j continues o's
 * conversation: their common start, counted only when it is most of what
 * o holds (a shared template's first words are no conversation); for the
 * assistant (whose prompt the planner renders later), whether o ran the
 * assistant last (its system text and tool list). */
static size_t affinity(const sv_slot *o, const sv_job *j)
{
    if (j->kind == SV_JOB_ASK) return o->last_kind == SV_JOB_ASK;
    size_t n = common_prefix(o->head, j->prompt_head);
    return n && 2 * n >= strlen(o->head) ? n : 0;
}

/* The slot for j (s or another): the one whose cache holds most of its
 * prompt, busy or not, else the idle one least recently used (whose
 * cache is lost). */
static sv_slot *best_slot(sv_sched *sc, sv_slot *s, const sv_job *j)
{
    sv_slot *best = s, *lru = s;
    size_t best_n = affinity(s, j);
    for (int i = 0; i < sc->n_slots; i++) {
        sv_slot *o = &sc->slots[i];
        size_t n = affinity(o, j);
        if (n > best_n || (n == best_n && n && o->idle && !best->idle)) best = o, best_n = n;
        if (o->idle && o->last_used < lru->last_used) lru = o;
    }
    return best_n ? best : lru;
}

static void unlink_job(sv_sched *sc, sv_job *prev, sv_job *j)
{
    if (prev) prev->next = j->next;
    else sc->head = j->next;
    if (sc->tail == j) sc->tail = prev;
    sc->n_queued--;
    j->next = NULL;
}

/* A request waits this long for the busy slot whose cache holds its
 * conversation (often one that has just answered the request before it)
 * before another slot takes it and prefills it anew. */
#define AFFINITY_WAIT_S 0.25

/* The oldest job s may run now (an assistant request waits while
 * another runs), unless another slot should take it: an idle one, or a
 * busy one holding its conversation while the request may still wait
 * for it (then *retry is when to look again). With sc->mu held. */
static sv_job *pick(sv_sched *sc, sv_slot *s, double *retry)
{
    *retry = 0;
    for (sv_job *j = sc->head, *prev = NULL; j; prev = j, j = j->next) {
        if (j->kind == SV_JOB_ASK && sc->ask_running) continue;
        sv_slot *best = best_slot(sc, s, j);
        double waited = hx_time_mono() - j->queued_at;
        if (best != s && best->idle) {
            pthread_cond_broadcast(&sc->cv);
            return NULL;
        }
        if (best != s && waited < AFFINITY_WAIT_S) {
            *retry = j->queued_at + AFFINITY_WAIT_S;
            return NULL;
        }
        unlink_job(sc, prev, j);
        s->last_used = ++sc->clock;
        if (j->kind == SV_JOB_ASK) sc->ask_running = 1;
        return j;
    }
    return NULL;
}

static void run_job(sv_slot *s, sv_job *j)
{
    if (hx_sv_job_gone(j)) return; /* its client left while it waited */
    if (j->kind == SV_JOB_CHAT) hx_sv_chat_run(s, j);
    else hx_sv_ask_run(s, j);
}

static void *slot_main(void *arg)
{
    sv_slot *s = arg;
    sv_sched *sc = s->sc;
    tl_slot = s;
    pthread_mutex_lock(&sc->mu);
    for (;;) {
        sv_job *j = NULL;
        double retry = 0;
        s->idle = 1;
        while (!sc->stopping && !(j = pick(sc, s, &retry))) wait_until(&sc->cv, &sc->mu, retry);
        s->idle = 0;
        if (!j) break;
        s->cur = j;
        pthread_mutex_unlock(&sc->mu);
        run_job(s, j);
        set_decoding(s, 0);
        if (s->n_steps)
            hx_log_debug("serve: slot %d: %d decodes, %d of them with other conversations",
                         s->id, s->n_steps, s->n_shared);
        s->n_steps = s->n_shared = 0;
        hx_sv_job_finish(j);
        pthread_mutex_lock(&sc->mu);
        if (j->kind == SV_JOB_ASK) sc->ask_running = 0;
        s->last_kind = j->kind;
        s->cur = NULL;
        pthread_cond_broadcast(&sc->cv);
        pthread_mutex_unlock(&sc->mu);
        hx_sv_job_unref(j);
        pthread_mutex_lock(&sc->mu);
    }
    pthread_mutex_unlock(&sc->mu);
    return NULL;
}

/* ---- making and ending ---- */
static int slot_init(sv_sched *sc, sv_slot *s, int id, hx_err *err)
{
    const hx_serve_deps *d = &sc->srv->d;
    s->sc = sc;
    s->id = id;
    if (id == 0 && d->first_src) {
        s->src = *d->first_src;
    } else {
        int rc = hx_source_engine_new(d->model, NULL, 0, &d->ep, &s->src, err);
        if (rc) return rc;
        s->own_src = 1;
    }
    make_planner_source(s);
    hx_ctx *c = hx_source_engine_ctx(&s->src);
    if (c) hx_ctx_set_decode_hook(c, gather_decode, s);
    if (pthread_create(&s->th, NULL, slot_main, s))
        return hx_err_set(err, HX_ERR_INTERNAL, "cannot start a slot's thread");
    s->started = 1;
    return HX_OK;
}

int hx_sv_sched_new(hx_server *srv, int n, int max_queue, sv_sched **out, hx_err *err)
{
    sv_sched *sc = hx_calloc(1, sizeof *sc);
    if (!sc || !(sc->slots = hx_calloc((size_t)n, sizeof *sc->slots))) {
        free(sc);
        return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    }
    sc->srv = srv;
    sc->max_queue = max_queue;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* wait_work's clock */
    pthread_mutex_init(&sc->mu, NULL);
    pthread_cond_init(&sc->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&sc->ts.mu, NULL);
    pthread_cond_init(&sc->ts.cv, NULL);
    pthread_mutex_init(&sc->gmu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* gather_decode's clock */
    pthread_cond_init(&sc->gcv, &ca);
    pthread_condattr_destroy(&ca);
    *out = sc;
    for (; sc->n_slots < n; sc->n_slots++) {
        int rc = slot_init(sc, &sc->slots[sc->n_slots], sc->n_slots, err);
        if (rc) {
            /* a source made for a thread that did not start is freed
             * with the others */
            sc->n_slots += sc->slots[sc->n_slots].own_src;
            return rc;
        }
    }
    return HX_OK;
}

void hx_sv_sched_stop(sv_sched *sc)
{
    if (!sc) return;
    pthread_mutex_lock(&sc->mu);
    sc->stopping = 1;
    sv_job *q = sc->head;
    sc->head = sc->tail = NULL;
    sc->n_queued = 0;
    pthread_cond_broadcast(&sc->cv);
    pthread_mutex_unlock(&sc->mu);
    for (sv_job *j = q, *next; j; j = next) {
        next = j->next;
        hx_sv_job_finish(j); /* 503: stopping */
        hx_sv_job_unref(j);
    }
    for (int i = 0; i < sc->n_slots; i++) {
        sv_slot *s = &sc->slots[i];
        if (s->started) pthread_join(s->th, NULL);
        s->started = 0;
    }
}

void hx_sv_sched_free(sv_sched *sc)
{
    if (!sc) return;
    hx_sv_sched_stop(sc);
    for (int i = 0; i < sc->n_slots; i++) {
        hx_ctx *c = hx_source_engine_ctx(&sc->slots[i].src);
        if (c) hx_ctx_set_decode_hook(c, NULL, NULL); /* the session's outlives it */
        if (sc->slots[i].own_src) hx_source_free(&sc->slots[i].src);
    }
    pthread_mutex_destroy(&sc->mu);
    pthread_cond_destroy(&sc->cv);
    pthread_mutex_destroy(&sc->ts.mu);
    pthread_cond_destroy(&sc->ts.cv);
    pthread_mutex_destroy(&sc->gmu);
    pthread_cond_destroy(&sc->gcv);
    free(sc->slots);
    free(sc);
}
