/* threadpool.c: persistent workers that spin briefly, then sleep on a
 * condition variable; tasks are handed out by an atomic counter. */
#include "engine/threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

/* Spin iterations before sleeping (each a pause, about 10-60 ns): long
 * enough to bridge the gap between runs within one token. */
#define SPIN_ITERS 20000

struct hx_threadpool {
    int n;                       /* threads including the caller */
    pthread_t *th;
    pthread_mutex_t mu;
    pthread_cond_t cv_work;      /* workers wait for a new run */
    pthread_cond_t cv_done;      /* the caller waits for the last task */
    /* Run number, task count and next task in one word (see ST_*): a
     * worker claims a task with one compare-and-swap that fails if the run
     * has changed, so a worker that was descheduled never runs a task of
     * the wrong run, and the caller never waits for idle workers. */
    _Alignas(64) _Atomic uint64_t state;
    _Alignas(64) atomic_int done; /* tasks finished in this run */
    atomic_int sleepers;          /* workers blocked on cv_work */
    atomic_int caller_sleeping;
    atomic_int stop;
    atomic_int active;            /* threads that take tasks (the caller too) */
    _Alignas(64) _Atomic(hx_task_fn) fn; /* set before a run is published */
    _Atomic(void *) ctx;
};

/* state = run << 40 | n_tasks << 20 | next */
#define ST_BITS 20
#define ST_MAX_TASKS ((1 << ST_BITS) - 1)
#define ST_MASK ((uint64_t)ST_MAX_TASKS)
#define ST_RUN(st) ((uint32_t)((st) >> (2 * ST_BITS)))

typedef struct worker_arg {
    hx_threadpool *tp;
    int id;
} worker_arg;

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void signal_caller(hx_threadpool *tp)
{
    if (atomic_load(&tp->caller_sleeping)) {
        pthread_mutex_lock(&tp->mu);
        pthread_cond_signal(&tp->cv_done);
        pthread_mutex_unlock(&tp->mu);
    }
}

/* Claims and runs tasks of run `run` until none is left or the run has
 * changed. */
static void do_tasks(hx_threadpool *tp, uint32_t run, int thread)
{
    hx_task_fn fn = atomic_load_explicit(&tp->fn, memory_order_relaxed);
    void *ctx = atomic_load_explicit(&tp->ctx, memory_order_relaxed);
    uint64_t st = atomic_load(&tp->state);
    for (;;) {
        int t = (int)(st & ST_MASK), n_tasks = (int)((st >> ST_BITS) & ST_MASK);
        if (ST_RUN(st) != run || t >= n_tasks) return;
        /* Succeeds only while this run is unfinished, hence fn and ctx,
         * read after the run was published, are this run's. */
        if (!atomic_compare_exchange_weak(&tp->state, &st, st + 1)) continue;
        fn(ctx, t, thread);
        if (atomic_fetch_add(&tp->done, 1) == n_tasks - 1) signal_caller(tp);
        st = atomic_load(&tp->state);
    }
}

/* Waits until the run number differs from seen (or stop); returns it. A
 * worker set aside (id >= active) sleeps at once. */
static uint32_t wait_work(hx_threadpool *tp, uint32_t seen, int id)
{
    for (int i = 0; id < atomic_load(&tp->active) && i < SPIN_ITERS; i++) {
        uint32_t r = ST_RUN(atomic_load(&tp->state));
        if (r != seen || atomic_load(&tp->stop)) return r;
        cpu_relax();
    }
    pthread_mutex_lock(&tp->mu);
    atomic_fetch_add(&tp->sleepers, 1);
    while (ST_RUN(atomic_load(&tp->state)) == seen &&
           !atomic_load(&tp->stop))
        pthread_cond_wait(&tp->cv_work, &tp->mu);
    atomic_fetch_sub(&tp->sleepers, 1);
    pthread_mutex_unlock(&tp->mu);
    return ST_RUN(atomic_load(&tp->state));
}

static void *worker_main(void *p)
{
    worker_arg *a = p;
    hx_threadpool *tp = a->tp;
    int id = a->id;
    free(a);
    uint32_t seen = 0;
    for (;;) {
        seen = wait_work(tp, seen, id);
        if (atomic_load(&tp->stop)) break;
        if (id < atomic_load(&tp->active)) do_tasks(tp, seen, id);
    }
    return NULL;
}

hx_threadpool *hx_threadpool_new(int n)
{
    hx_threadpool *tp = hx_aligned_alloc(64, sizeof *tp);
    if (!tp) return NULL;
    memset(tp, 0, sizeof *tp);
    tp->n = n < 1 ? 1 : n;
    atomic_store(&tp->active, tp->n);
    pthread_mutex_init(&tp->mu, NULL);
    pthread_cond_init(&tp->cv_work, NULL);
    pthread_cond_init(&tp->cv_done, NULL);
    tp->th = hx_calloc((size_t)tp->n, sizeof *tp->th);
    if (!tp->th) {
        hx_threadpool_free(tp);
        return NULL;
    }
    for (int i = 1; i < tp->n; i++) {
        worker_arg *a = hx_malloc(sizeof *a);
        if (a) *a = (worker_arg){tp, i};
        if (!a || pthread_create(&tp->th[i], NULL, worker_main, a) != 0) {
            free(a);
            tp->n = i; /* join only the ones started */
            hx_threadpool_free(tp);
            return NULL;
        }
    }
    return tp;
}

void hx_threadpool_free(hx_threadpool *tp)
{
    if (!tp) return;
    pthread_mutex_lock(&tp->mu);
    atomic_store(&tp->stop, 1);
    pthread_cond_broadcast(&tp->cv_work);
    pthread_mutex_unlock(&tp->mu);
    for (int i = 1; tp->th && i < tp->n; i++) pthread_join(tp->th[i], NULL);
    pthread_cond_destroy(&tp->cv_work);
    pthread_cond_destroy(&tp->cv_done);
    pthread_mutex_destroy(&tp->mu);
    free(tp->th);
    free(tp);
}

int hx_threadpool_n_threads(const hx_threadpool *tp)
{
    return tp ? tp->n : 1;
}

void hx_threadpool_set_active(hx_threadpool *tp, int n)
{
    if (tp) atomic_store(&tp->active, n < 1 ? 1 : n > tp->n ? tp->n : n);
}

static void wait_done(hx_threadpool *tp, int n_tasks)
{
    for (int i = 0; i < SPIN_ITERS; i++) {
        if (atomic_load(&tp->done) == n_tasks) return;
        cpu_relax();
    }
    pthread_mutex_lock(&tp->mu);
    atomic_store(&tp->caller_sleeping, 1);
    while (atomic_load(&tp->done) != n_tasks)
        pthread_cond_wait(&tp->cv_done, &tp->mu);
    atomic_store(&tp->caller_sleeping, 0);
    pthread_mutex_unlock(&tp->mu);
}

/* Runs tasks [0, n_tasks) with n_tasks <= ST_MAX_TASKS. */
static void run_batch(hx_threadpool *tp, int n_tasks, hx_task_fn fn, void *ctx)
{
    /* The previous run is complete, so no worker can claim a task until
     * the new state is published below. */
    atomic_store_explicit(&tp->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&tp->ctx, ctx, memory_order_relaxed);
    atomic_store(&tp->done, 0);
    uint32_t run = (ST_RUN(atomic_load(&tp->state)) + 1) & 0xffffff;
    atomic_store(&tp->state, (uint64_t)run << (2 * ST_BITS) |
                                 (uint64_t)n_tasks << ST_BITS);
    if (atomic_load(&tp->sleepers) > 0) {
        pthread_mutex_lock(&tp->mu);
        pthread_cond_broadcast(&tp->cv_work);
        pthread_mutex_unlock(&tp->mu);
    }
    do_tasks(tp, run, 0);
    wait_done(tp, n_tasks);
}

typedef struct offset_ctx {
    hx_task_fn fn;
    void *ctx;
    int base;
} offset_ctx;

static void offset_task(void *p, int task, int thread)
{
    offset_ctx *o = p;
    o->fn(o->ctx, o->base + task, thread);
}

void hx_threadpool_run(hx_threadpool *tp, int n_tasks, hx_task_fn fn,
                       void *ctx)
{
    if (n_tasks <= 0) return;
    if (!tp || tp->n == 1 || n_tasks == 1 || atomic_load(&tp->active) == 1) {
        for (int t = 0; t < n_tasks; t++) fn(ctx, t, 0);
        return;
    }
    if (n_tasks <= ST_MAX_TASKS) {
        run_batch(tp, n_tasks, fn, ctx);
        return;
    }
    for (int base = 0; base < n_tasks; base += ST_MAX_TASKS) {
        offset_ctx o = {fn, ctx, base};
        int n = n_tasks - base < ST_MAX_TASKS ? n_tasks - base : ST_MAX_TASKS;
        run_batch(tp, n, offset_task, &o);
    }
}
