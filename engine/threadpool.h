/* threadpool.h: a persistent pool of worker threads for the engine's
 * kernels (part of engine_ext.h: the trainer and the quantizer run on it
 * too). One run hands out n_tasks task numbers to the caller and the
 * workers and returns when all are done. */
#ifndef HX_THREADPOOL_H
#define HX_THREADPOOL_H

typedef struct hx_threadpool hx_threadpool;

/* The work function: called once per task number in [0, n_tasks), on some
 * thread numbered in [0, n_threads) (0 is the calling thread). Tasks of one
 * run may execute concurrently and in any order. */
typedef void (*hx_task_fn)(void *ctx, int task, int thread);

/* A pool of n threads in all: the caller plus n - 1 workers (n < 1 is taken
 * as 1; n = 1 starts no thread). Returns NULL when out of memory or when a
 * thread cannot be started. Free with hx_threadpool_free. */
hx_threadpool *hx_threadpool_new(int n);
/* Stops and joins the workers. NULL is a no-op. */
void hx_threadpool_free(hx_threadpool *tp);
/* Number of threads (caller included); 1 for a NULL pool. */
int hx_threadpool_n_threads(const hx_threadpool *tp);
/* Lets only threads [0, n) take tasks from the next run on (clamped to
 * [1, n_threads]; at first all): the others sleep. Task and thread
 * numbers, and so any result, stay the same. Not during a run. */
void hx_threadpool_set_active(hx_threadpool *tp, int n);
/* Runs fn(ctx, task, thread) for every task in [0, n_tasks) and returns
 * when all have finished. Idle workers spin briefly, then sleep, so runs in
 * quick succession (several per layer per token) are cheap. A NULL pool, a
 * one-thread pool or n_tasks == 1 runs everything on the caller. Not
 * reentrant: one run at a time per pool, from one thread at a time. */
void hx_threadpool_run(hx_threadpool *tp, int n_tasks, hx_task_fn fn,
                       void *ctx);

#endif /* HX_THREADPOOL_H */
