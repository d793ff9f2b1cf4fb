/* wcache.c: the weight cache of a context capped below its model's weights
 * (wcache_int.h): the plan, resident copies, slots filled by I/O threads. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/ctx_int.h"
#include "engine/wcache_int.h"

#define WC_PAGE 4096       /* O_DIRECT alignment of offsets, sizes, buffers */
#define WC_MAX_SEG 8       /* matrices of one item */
#define WC_IO_THREADS 2    /* reads in flight: a disk wants more than one */
#define WC_RING 3          /* dense: slots of the streamed ring */
#define WC_HEAD_ROWS 256   /* head runs are multiples of this many rows */

enum { WS_EMPTY, WS_LOADING, WS_READY, WS_FAILED };

/* One matrix of an item: where it is in the file, how long. */
typedef struct wc_seg {
    uint64_t off;
    size_t len;
} wc_seg;

typedef struct wc_slot {
    char *mem;       /* pool's slot_bytes, WC_PAGE aligned */
    int item;        /* -1: empty */
    int state;       /* WS_* */
    int pins;        /* computations using it: never evicted while > 0 */
    uint64_t stamp;  /* last use, for LRU */
} wc_slot;

typedef struct wc_pool {
    wc_slot *slot;
    int n;
    size_t slot_bytes;
    char *mem;       /* n * slot_bytes */
} wc_pool;

struct hx_wcache {
    const hx_model *m;
    int moe;
    int fd;                 /* -1: the model is a buffer, read by memcpy */
    const char *base;       /* start of the file image (mapping or buffer) */
    hx_layer *L;            /* shadow layers: data pointers of the copies */
    hx_wmat output;         /* shadow head (data NULL when streamed) */
    char *resident;         /* owned copies */
    size_t resident_bytes;
    wc_pool *pool;          /* MoE: one per size of an expert, shared by the
                               layers whose experts have it; dense: one */
    int n_pool;
    int *layer_pool;        /* MoE: (n_layer) the pool of a layer's experts */
    int n_items, n_pinned;  /* dense: items [0, n_pinned) are resident */
    int n_layer_items;      /* dense: layers; then head runs */
    int head_rows;          /* dense: rows per head run */
    int *item_slot;         /* (n_items) slot in its pool, -1 */
    int *wave_x;            /* MoE: (2 * n_expert) experts of a wave */
    const void *(*wave_ptr)[3]; /* and their matrices */
    uint64_t clock;
    /* I/O: a queue of items to read, threads, one lock for all state */
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    int *queue, q_head, q_len;
    pthread_t io[WC_IO_THREADS];
    int n_io, stop;
    hx_wc_stats st;
    int failed;             /* HX_ERR_IO since the last clear */
    hx_err err;
};

/* ---- geometry ---- */

static size_t round_page(size_t n) { return (n + WC_PAGE - 1) / WC_PAGE * WC_PAGE; }

/* Bytes a segment takes in a slot: whole pages around it, wherever it
 * starts in a page. */
static size_t seg_span(size_t len) { return round_page(len) + WC_PAGE; }

static uint64_t file_off(const hx_wcache *wc, const void *p)
{
    return (uint64_t)((const char *)p - wc->base);
}

/* The matrices of a dense layer, in slot order. */
static int layer_mats(const hx_layer *L, const hx_wmat **w)
{
    const hx_wmat *all[7] = {&L->wq, &L->wk, &L->wv, &L->wo,
                             &L->ffn_gate, &L->ffn_up, &L->ffn_down};
    int n = 0;
    for (int i = 0; i < 7; i++)
        if (all[i]->data) w[n++] = all[i];
    return n;
}

static size_t wmat_bytes(const hx_wmat *w)
{
    return (size_t)w->n_mat * (size_t)w->rows * w->row_bytes;
}

/* Dense: the head's runs of rows, each at most `bytes` and a multiple of
 * WC_HEAD_ROWS rows (so each row meets the kernels as in one matmul). */
static int head_rows_for(const hx_wmat *o, size_t bytes)
{
    int64_t r = (int64_t)(bytes / o->row_bytes) / WC_HEAD_ROWS * WC_HEAD_ROWS;
    return (int)(r < WC_HEAD_ROWS ? WC_HEAD_ROWS : r > o->rows ? o->rows : r);
}

/* The segments of an item (into seg), their count. */
static int item_segs(const hx_wcache *wc, int item, wc_seg *seg)
{
    const hx_model *m = wc->m;
    if (wc->moe) {
        const int ne = m->hp.n_expert;
        const hx_layer *L = &m->layers[item / ne];
        const hx_wmat *w[3] = {&L->gate_exps, &L->up_exps, &L->down_exps};
        for (int k = 0; k < 3; k++) {
            seg[k].off = file_off(wc, hx_wmat_at(w[k], item % ne));
            seg[k].len = (size_t)w[k]->rows * w[k]->row_bytes;
        }
        return 3;
    }
    if (item < wc->n_layer_items) {
        const hx_wmat *w[WC_MAX_SEG];
        int n = layer_mats(&m->layers[item], w);
        for (int k = 0; k < n; k++) {
            seg[k].off = file_off(wc, w[k]->data);
            seg[k].len = wmat_bytes(w[k]);
        }
        return n;
    }
    const hx_wmat *o = &m->output;
    int64_t r0 = (int64_t)(item - wc->n_layer_items) * wc->head_rows;
    int64_t r1 = r0 + wc->head_rows < o->rows ? r0 + wc->head_rows : o->rows;
    seg[0].off = file_off(wc, o->data) + (uint64_t)r0 * o->row_bytes;
    seg[0].len = (size_t)(r1 - r0) * o->row_bytes;
    return 1;
}

static size_t item_bytes(const hx_wcache *wc, int item)
{
    wc_seg seg[WC_MAX_SEG];
    size_t b = 0;
    for (int k = 0, n = item_segs(wc, item, seg); k < n; k++) b += seg_span(seg[k].len);
    return b;
}

/* Where segment k of item sits in memory mem laid out by item_segs. */
static const void *seg_ptr(const hx_wcache *wc, int item, char *mem, int k)
{
    wc_seg seg[WC_MAX_SEG];
    item_segs(wc, item, seg);
    size_t at = 0;
    for (int j = 0; j < k; j++) at += seg_span(seg[j].len);
    return mem + at + seg[k].off % WC_PAGE;
}

/* ---- reading ---- */

/* Reads [off, off + len) of the file into dst + off % WC_PAGE (dst page
 * aligned, seg_span(len) bytes): whole pages with O_DIRECT, or a buffered
 * read whose pages are then dropped from the page cache. HX_ERR_IO with
 * the offset and what came back on a short read or an error. */
static int read_span(hx_wcache *wc, char *dst, uint64_t off, size_t len, hx_err *err)
{
    if (wc->fd < 0) {
        memcpy(dst + off % WC_PAGE, wc->base + off, len);
        return HX_OK;
    }
    const uint64_t a = off / WC_PAGE * WC_PAGE;
    const size_t want = (size_t)(off + len - a), n = round_page(want);
    size_t got = 0;
    while (got < want) {
        ssize_t r = pread(wc->fd, dst + got, n - got, (off_t)(a + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && errno == EINVAL && (fcntl(wc->fd, F_GETFL) & O_DIRECT)) {
            /* the file system refuses direct reads after all: buffered */
            (void)fcntl(wc->fd, F_SETFL, fcntl(wc->fd, F_GETFL) & ~O_DIRECT);
            continue;
        }
        if (r <= 0)
            return hx_err_set(err, HX_ERR_IO, "model file: %s reading %zu bytes at offset "
                              "%llu (got %zu; was the file changed or truncated?)",
                              r < 0 ? strerror(errno) : "short read", want,
                              (unsigned long long)a, got);
        got += (size_t)r;
    }
    if (!(fcntl(wc->fd, F_GETFL) & O_DIRECT))
        (void)posix_fadvise(wc->fd, (off_t)a, (off_t)n, POSIX_FADV_DONTNEED);
    return HX_OK;
}

/* Reads every segment of item into mem. */
static int read_item(hx_wcache *wc, int item, char *mem, uint64_t *bytes, hx_err *err)
{
    wc_seg seg[WC_MAX_SEG];
    size_t at = 0;
    for (int k = 0, n = item_segs(wc, item, seg); k < n; k++) {
        int rc = read_span(wc, mem + at, seg[k].off, seg[k].len, err);
        if (rc) return rc;
        *bytes += round_page(seg[k].off % WC_PAGE + seg[k].len);
        at += seg_span(seg[k].len);
    }
    return HX_OK;
}

static wc_pool *pool_of(hx_wcache *wc, int item)
{
    return &wc->pool[wc->moe ? wc->layer_pool[item / wc->m->hp.n_expert] : 0];
}

/* An I/O thread: reads queued items into their slots. */
static void *io_main(void *arg)
{
    hx_wcache *wc = arg;
    pthread_mutex_lock(&wc->mu);
    for (;;) {
        while (!wc->stop && wc->q_len == 0) pthread_cond_wait(&wc->work, &wc->mu);
        if (wc->stop) break;
        int item = wc->queue[wc->q_head];
        wc->q_head = (wc->q_head + 1) % wc->n_items;
        wc->q_len--;
        wc_slot *s = &pool_of(wc, item)->slot[wc->item_slot[item]];
        pthread_mutex_unlock(&wc->mu);
        hx_err e = {0};
        uint64_t bytes = 0;
        int rc = read_item(wc, item, s->mem, &bytes, &e);
        pthread_mutex_lock(&wc->mu);
        s->state = rc ? WS_FAILED : WS_READY;
        wc->st.bytes_read += bytes;
        wc->st.items_read++;
        if (rc && !wc->failed) {
            wc->failed = rc;
            wc->err = e;
        }
        pthread_cond_broadcast(&wc->done);
    }
    pthread_mutex_unlock(&wc->mu);
    return NULL;
}

/* ---- slots (the caller holds wc->mu) ---- */

/* The least recently used slot of p that no one uses or reads, or -1. */
static int victim(const wc_pool *p)
{
    int v = -1;
    for (int i = 0; i < p->n; i++) {
        const wc_slot *s = &p->slot[i];
        if (s->pins || s->state == WS_LOADING) continue;
        if (s->item < 0) return i;
        if (v < 0 || s->stamp < p->slot[v].stamp) v = i;
    }
    return v;
}

/* Starts the read of item into slot i of p (the caller set the slot's
 * item). */
static void enqueue(hx_wcache *wc, wc_slot *s, int item)
{
    s->state = WS_LOADING;
    wc->st.misses++;
    wc->queue[(wc->q_head + wc->q_len++) % wc->n_items] = item;
    pthread_cond_signal(&wc->work);
}

/* Finds item in a slot or starts its read into one (pinned when pin);
 * the slot, or -1 when every slot of its pool is busy. A slot whose read
 * failed is read again: its bytes are never used as if it had not. */
static int lookup(hx_wcache *wc, int item, int pin)
{
    wc_pool *p = pool_of(wc, item);
    int i = wc->item_slot[item];
    if (i >= 0 && p->slot[i].state == WS_FAILED && !p->slot[i].pins)
        enqueue(wc, &p->slot[i], item);
    if (i < 0) {
        if ((i = victim(p)) < 0) return -1;
        wc_slot *s = &p->slot[i];
        if (s->item >= 0) wc->item_slot[s->item] = -1;
        else wc->st.held += p->slot_bytes;
        HX_CHECK(wc->st.held <= wc->st.budget);
        if (wc->st.held > wc->st.held_peak) wc->st.held_peak = wc->st.held;
        s->item = item;
        wc->item_slot[item] = i;
        enqueue(wc, s, item);
    }
    wc_slot *s = &p->slot[i];
    s->stamp = ++wc->clock;
    s->pins += pin;
    return i;
}

/* Waits until the slot of a pinned item is read (or failed). */
static wc_slot *wait_ready(hx_wcache *wc, int item)
{
    wc_slot *s = &pool_of(wc, item)->slot[wc->item_slot[item]];
    if (s->state == WS_LOADING) {
        double t0 = hx_time_mono();
        while (s->state == WS_LOADING) pthread_cond_wait(&wc->done, &wc->mu);
        wc->st.wait_s += hx_time_mono() - t0;
    }
    return s;
}

/* Unpins item; a slot whose read failed is emptied, to be read again. */
static void unpin(hx_wcache *wc, int item)
{
    wc_pool *p = pool_of(wc, item);
    wc_slot *s = &p->slot[wc->item_slot[item]];
    HX_CHECK(s->pins > 0);
    if (--s->pins || s->state != WS_FAILED) return;
    wc->item_slot[item] = -1;
    s->item = -1;
    s->state = WS_EMPTY;
    wc->st.held -= p->slot_bytes;
}

/* ---- the plan ---- */

/* The always-used matrices of a MoE layer. */
static int moe_resident_mats(const hx_layer *L, const hx_wmat **w)
{
    const hx_wmat *all[5] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->ffn_gate_inp};
    int n = 0;
    for (int i = 0; i < 5; i++)
        if (all[i]->data) w[n++] = all[i];
    return n;
}

static size_t moe_resident(const hx_model *m)
{
    size_t b = seg_span(wmat_bytes(&m->output));
    for (int l = 0; l < m->hp.n_layer; l++) {
        const hx_wmat *w[5];
        for (int k = 0, n = moe_resident_mats(&m->layers[l], w); k < n; k++)
            b += seg_span(wmat_bytes(w[k]));
    }
    return b;
}

/* A throwaway cache header for item geometry during planning. */
static void geometry(hx_wcache *g, const hx_model *m, int head_rows)
{
    memset(g, 0, sizeof *g);
    g->m = m;
    g->moe = m->hp.n_expert > 0;
    const hx_gguf_tensor *t = hx_gguf_tensor_at(m->gguf, 0);
    g->base = (const char *)t->data - hx_gguf_data_offset(m->gguf) - t->offset;
    g->n_layer_items = m->hp.n_layer;
    g->head_rows = head_rows;
    g->n_items = g->moe ? m->hp.n_layer * m->hp.n_expert
                        : m->hp.n_layer + (int)((m->output.rows + head_rows - 1) / head_rows);
}

static size_t moe_slot_bytes(const hx_wcache *g, int l)
{
    return item_bytes(g, l * g->m->hp.n_expert);
}

/* MoE: as many slots as n a layer, at least 2, at most n_expert: each
 * layer sees n_expert_used per token. The slots of layers whose experts
 * are of one size form one pool (alloc_pools), so a layer that uses few
 * experts leaves room to one that uses many. */
static int plan_moe(const hx_model *m, size_t budget, hx_wc_plan *out)
{
    hx_wcache g;
    geometry(&g, m, 0);
    size_t per_slot_all = 0;
    for (int l = 0; l < m->hp.n_layer; l++) per_slot_all += moe_slot_bytes(&g, l);
    out->resident = moe_resident(m) + m->small_cap * sizeof(float);
    out->n_items = g.n_items;
    out->min_cache = 2 * per_slot_all;
    if (budget < out->resident + out->min_cache) return HX_ERR_RANGE;
    size_t n = (budget - out->resident) / per_slot_all;
    if (n > (size_t)m->hp.n_expert) n = (size_t)m->hp.n_expert;
    out->slots_min = (int)n;
    out->n_slots = (int)n * m->hp.n_layer;
    out->cache = n * per_slot_all;
    return HX_OK;
}

/* Dense: a ring of WC_RING slots the size of the largest item; then as
 * many items pinned, in order, as the rest of the budget holds. */
static int plan_dense(const hx_model *m, size_t budget, hx_wc_plan *out)
{
    hx_wcache g;
    size_t slot = 0;
    geometry(&g, m, 1);
    for (int l = 0; l < m->hp.n_layer; l++)
        if (item_bytes(&g, l) > slot) slot = item_bytes(&g, l);
    out->head_rows = head_rows_for(&m->output, slot);
    geometry(&g, m, out->head_rows);
    for (int i = m->hp.n_layer; i < g.n_items; i++)
        if (item_bytes(&g, i) > slot) slot = item_bytes(&g, i);
    out->n_items = g.n_items;
    out->resident = m->small_cap * sizeof(float);
    out->min_cache = 2 * slot;
    if (budget < out->resident + out->min_cache) return HX_ERR_RANGE;
    int ring = budget >= out->resident + WC_RING * slot ? WC_RING : 2;
    size_t left = budget - out->resident - (size_t)ring * slot;
    int p = 0;
    while (p < g.n_items - ring && item_bytes(&g, p) <= left) {
        left -= item_bytes(&g, p);
        out->resident += item_bytes(&g, p++);
    }
    out->n_pinned = p;
    out->n_slots = ring < g.n_items - p ? ring : g.n_items - p;
    out->cache = (size_t)out->n_slots * slot;
    return HX_OK;
}

int hx_wc_plan_make(const hx_model *m, size_t budget, hx_wc_plan *out)
{
    memset(out, 0, sizeof *out);
    return m->hp.n_expert ? plan_moe(m, budget, out) : plan_dense(m, budget, out);
}

/* ---- building ---- */

/* Page-aligned memory in ordinary pages: huge pages would have the kernel
 * compact memory on first touch, which stalls badly near a memory limit
 * (measured: the first turn under phone-sim's 8 GiB took 2.7x the next). */
static void *alloc_pages(size_t bytes)
{
    return hx_aligned_alloc(WC_PAGE, bytes ? bytes : WC_PAGE);
}

/* Copies matrix w into the resident region at *at; points the shadow at
 * it. */
static int copy_resident(hx_wcache *wc, const hx_wmat *w, hx_wmat *shadow,
                         size_t *at, hx_err *err)
{
    const size_t len = wmat_bytes(w);
    const uint64_t off = file_off(wc, w->data);
    int rc = read_span(wc, wc->resident + *at, off, len, err);
    shadow->data = wc->resident + *at + off % WC_PAGE;
    *at += seg_span(len);
    return rc;
}

static int build_moe_resident(hx_wcache *wc, hx_err *err)
{
    size_t at = 0;
    int rc = copy_resident(wc, &wc->m->output, &wc->output, &at, err);
    for (int l = 0; l < wc->m->hp.n_layer && !rc; l++) {
        const hx_wmat *w[5];
        const hx_layer *L = &wc->m->layers[l];
        for (int k = 0, n = moe_resident_mats(L, w); k < n && !rc; k++)
            rc = copy_resident(wc, w[k], (hx_wmat *)((char *)&wc->L[l] +
                               ((const char *)w[k] - (const char *)L)), &at, err);
    }
    return rc;
}

/* Points the shadow of dense item i (a layer; head runs have none) at
 * memory mem laid out by item_segs, or at nothing (mem NULL). */
static void point_layer(hx_wcache *wc, int i, char *mem)
{
    if (i >= wc->n_layer_items) return;
    const hx_layer *L = &wc->m->layers[i];
    const hx_wmat *w[WC_MAX_SEG];
    for (int k = 0, n = layer_mats(L, w); k < n; k++) {
        hx_wmat *s = (hx_wmat *)((char *)&wc->L[i] + ((const char *)w[k] - (const char *)L));
        s->data = mem ? seg_ptr(wc, i, mem, k) : NULL;
    }
}

static int build_dense_resident(hx_wcache *wc, hx_err *err)
{
    size_t at = 0;
    uint64_t bytes = 0;
    for (int i = 0; i < wc->n_pinned; i++) {
        int rc = read_item(wc, i, wc->resident + at, &bytes, err);
        if (rc) return rc;
        point_layer(wc, i, wc->resident + at);
        at += item_bytes(wc, i);
    }
    return HX_OK;
}

/* MoE: a pool for each size of an expert, slots_min slots for each layer
 * whose experts have it, least recently used evicted over them all (a
 * trained router's layers differ in how many experts a pass uses; a
 * layer never uses more slots than it has experts). Dense: the ring. */
static int size_pools(hx_wcache *wc, const hx_wc_plan *p)
{
    const int nl = wc->m->hp.n_layer;
    wc->pool = hx_calloc((size_t)(wc->moe ? nl : 1), sizeof *wc->pool);
    wc->layer_pool = wc->moe ? hx_malloc_array((size_t)nl, sizeof(int)) : NULL;
    if (!wc->pool || (wc->moe && !wc->layer_pool)) return HX_ERR_NOMEM;
    if (!wc->moe) {
        wc->n_pool = 1;
        wc->pool[0].n = p->n_slots;
        wc->pool[0].slot_bytes = p->cache / (size_t)p->n_slots;
        return HX_OK;
    }
    for (int l = 0; l < nl; l++) {
        const size_t bytes = moe_slot_bytes(wc, l);
        int k = 0;
        while (k < wc->n_pool && wc->pool[k].slot_bytes != bytes) k++;
        if (k == wc->n_pool) wc->pool[wc->n_pool++].slot_bytes = bytes;
        wc->pool[k].n += p->slots_min;
        wc->layer_pool[l] = k;
    }
    return HX_OK;
}

static int alloc_pools(hx_wcache *wc, const hx_wc_plan *p)
{
    int rc = size_pools(wc, p);
    for (int i = 0; !rc && i < wc->n_pool; i++) {
        wc_pool *q = &wc->pool[i];
        q->mem = alloc_pages((size_t)q->n * q->slot_bytes);
        q->slot = hx_calloc((size_t)q->n, sizeof *q->slot);
        if (!q->mem || !q->slot) return HX_ERR_NOMEM;
        for (int j = 0; j < q->n; j++) {
            q->slot[j].mem = q->mem + (size_t)j * q->slot_bytes;
            q->slot[j].item = -1;
        }
        wc->st.budget += (size_t)q->n * q->slot_bytes;
    }
    return rc;
}

/* The file for reads: O_DIRECT where the file system takes it. */
static int open_reads(hx_wcache *wc, hx_err *err)
{
    const hx_gguf *g = wc->m->gguf;
    wc->fd = hx_gguf_fd(g);
    if (wc->fd < 0 && hx_gguf_path(g)[0])
        return hx_err_set(err, HX_ERR_UNSUPPORTED, "the model file is not open for reads");
    if (wc->fd >= 0) (void)fcntl(wc->fd, F_SETFL, fcntl(wc->fd, F_GETFL) | O_DIRECT);
    return HX_OK;
}

static int start_io(hx_wcache *wc)
{
    wc->queue = hx_malloc_array((size_t)wc->n_items, sizeof(int));
    wc->item_slot = hx_malloc_array((size_t)wc->n_items, sizeof(int));
    const size_t nw = 2 * (size_t)(wc->moe ? wc->m->hp.n_expert : 1);
    wc->wave_x = hx_malloc_array(nw, sizeof *wc->wave_x);
    wc->wave_ptr = hx_malloc_array(nw, sizeof *wc->wave_ptr);
    if (!wc->queue || !wc->item_slot || !wc->wave_x || !wc->wave_ptr) return HX_ERR_NOMEM;
    for (int i = 0; i < wc->n_items; i++) wc->item_slot[i] = -1;
    for (; wc->n_io < WC_IO_THREADS; wc->n_io++)
        if (pthread_create(&wc->io[wc->n_io], NULL, io_main, wc)) return HX_ERR_NOMEM;
    return HX_OK;
}

int hx_wc_new(const hx_model *m, const hx_wc_plan *p, hx_wcache **out, hx_err *err)
{
    *out = NULL;
    hx_wcache *wc = hx_calloc(1, sizeof *wc);
    if (!wc) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    hx_wcache g;
    geometry(&g, m, p->head_rows);
    *wc = g;
    pthread_mutex_init(&wc->mu, NULL);
    pthread_cond_init(&wc->work, NULL);
    pthread_cond_init(&wc->done, NULL);
    wc->n_pinned = p->n_pinned;
    wc->L = hx_malloc_array((size_t)m->hp.n_layer, sizeof(hx_layer));
    wc->resident_bytes = p->resident - m->small_cap * sizeof(float);
    wc->resident = alloc_pages(wc->resident_bytes);
    int rc = wc->L && wc->resident ? open_reads(wc, err) : HX_ERR_NOMEM;
    if (!rc) {
        memcpy(wc->L, m->layers, (size_t)m->hp.n_layer * sizeof(hx_layer));
        wc->output = m->output;
        if (!wc->moe) {
            wc->output.data = NULL;
            for (int i = 0; i < wc->n_layer_items; i++) point_layer(wc, i, NULL);
        }
        rc = wc->moe ? build_moe_resident(wc, err) : build_dense_resident(wc, err);
    }
    if (!rc) rc = alloc_pools(wc, p);
    if (!rc) rc = start_io(wc);
    if (rc) {
        if (rc == HX_ERR_NOMEM) hx_err_set(err, rc, "out of memory for the weight cache");
        hx_wc_free(wc);
        return rc;
    }
    hx_gguf_drop_pages(m->gguf);
    *out = wc;
    return HX_OK;
}

void hx_wc_free(hx_wcache *wc)
{
    if (!wc) return;
    pthread_mutex_lock(&wc->mu);
    wc->stop = 1;
    pthread_cond_broadcast(&wc->work);
    pthread_mutex_unlock(&wc->mu);
    for (int i = 0; i < wc->n_io; i++) pthread_join(wc->io[i], NULL);
    for (int i = 0; wc->pool && i < wc->n_pool; i++) {
        free(wc->pool[i].mem);
        free(wc->pool[i].slot);
    }
    pthread_cond_destroy(&wc->work);
    pthread_cond_destroy(&wc->done);
    pthread_mutex_destroy(&wc->mu);
    free(wc->pool);
    free(wc->layer_pool);
    free(wc->queue);
    free(wc->item_slot);
    free(wc->wave_x);
    free(wc->wave_ptr);
    free(wc->resident);
    free(wc->L);
    free(wc);
}

/* ---- lookups ---- */

const void *hx_wc_data(const hx_wcache *wc, const hx_wmat *w)
{
    const hx_model *m = wc->m;
    if (w == &m->output) return wc->output.data;
    const char *p = (const char *)w, *l0 = (const char *)m->layers;
    if (p < l0 || p >= l0 + (size_t)m->hp.n_layer * sizeof(hx_layer)) return w->data;
    return ((const hx_wmat *)((const char *)wc->L + (p - l0)))->data;
}

int hx_wc_head_streamed(const hx_wcache *wc) { return wc->output.data == NULL; }

const hx_wmat *hx_wc_weight(const hx_wcache *wc, int il, int kind)
{
    const hx_wmat *w = hx_model_weight(wc->m, il, kind);
    if (!w || !w->data || kind == HX_WEIGHT_TOK_EMBD) return NULL;
    const hx_wmat *s = &wc->output;
    if (w != &wc->m->output)
        s = (const hx_wmat *)((const char *)wc->L + ((const char *)w - (const char *)wc->m->layers));
    const char *d = s->data;
    return d >= wc->resident && d < wc->resident + wc->resident_bytes ? s : NULL;
}

int hx_wc_error(const hx_wcache *wc, const char **msg)
{
    pthread_mutex_lock((pthread_mutex_t *)&wc->mu);
    int rc = wc->failed;
    *msg = wc->err.msg;
    pthread_mutex_unlock((pthread_mutex_t *)&wc->mu);
    return rc;
}

void hx_wc_clear_error(hx_wcache *wc)
{
    pthread_mutex_lock(&wc->mu);
    wc->failed = HX_OK;
    pthread_mutex_unlock(&wc->mu);
}

void hx_wc_stats_get(const hx_wcache *wc, hx_wc_stats *out)
{
    pthread_mutex_lock((pthread_mutex_t *)&wc->mu);
    *out = wc->st;
    pthread_mutex_unlock((pthread_mutex_t *)&wc->mu);
}

/* ---- dense: layers and head runs in order through the ring ---- */

/* The streamed item after item i in a token's walk (layers, then head
 * runs, then the next token's layers), or -1 when none is streamed. */
static int next_streamed(const hx_wcache *wc, int i)
{
    for (int k = 1; k <= wc->n_items; k++) {
        int j = (i + k) % wc->n_items;
        if (j >= wc->n_pinned) return j;
    }
    return -1;
}

/* Pins streamed item i (reading it if it is not on its way), starts the
 * reads of the items after it while slots are free, waits for i. */
static wc_slot *dense_enter(hx_wcache *wc, int i)
{
    pthread_mutex_lock(&wc->mu);
    HX_CHECK(lookup(wc, i, 1) >= 0);
    wc->st.uses++;
    for (int k = 1, j = i; k < wc->pool[0].n; k++) {
        j = next_streamed(wc, j);
        if (j == i || lookup(wc, j, 0) < 0) break;
    }
    wc_slot *s = wait_ready(wc, i);
    pthread_mutex_unlock(&wc->mu);
    return s;
}

static void dense_leave(hx_wcache *wc, int i)
{
    pthread_mutex_lock(&wc->mu);
    unpin(wc, i);
    pthread_mutex_unlock(&wc->mu);
}

void hx_wc_layer_begin(hx_ctx *c, int l)
{
    hx_wcache *wc = c->wc;
    if (wc->moe) return;
    if (l < wc->n_pinned) {
        pthread_mutex_lock(&wc->mu);
        wc->st.uses++;
        pthread_mutex_unlock(&wc->mu);
        return;
    }
    point_layer(wc, l, dense_enter(wc, l)->mem);
}

void hx_wc_layer_end(hx_ctx *c, int l)
{
    hx_wcache *wc = c->wc;
    if (wc->moe || l < wc->n_pinned) return;
    point_layer(wc, l, NULL);
    dense_leave(wc, l);
}

/* The head by runs of rows: logits (n, n_vocab) = x (n, n_embd) . head^T,
 * each run's columns from its slot (or its pinned copy). */
void hx_wc_head(hx_ctx *c, const float *x, int n, float *logits)
{
    hx_wcache *wc = c->wc;
    const hx_wmat *o = &c->m->output;
    hx_fwd_quantize(c, o->type, x, n, o->cols);
    for (int i = wc->n_layer_items; i < wc->n_items; i++) {
        int64_t r0 = (int64_t)(i - wc->n_layer_items) * wc->head_rows;
        int64_t r1 = r0 + wc->head_rows < o->rows ? r0 + wc->head_rows : o->rows;
        char *mem = i < wc->n_pinned ? NULL : dense_enter(wc, i)->mem;
        if (!mem) { /* pinned: its place in the resident region */
            size_t at = 0;
            for (int j = 0; j < i; j++) at += item_bytes(wc, j);
            mem = wc->resident + at;
            pthread_mutex_lock(&wc->mu);
            wc->st.uses++;
            pthread_mutex_unlock(&wc->mu);
        }
        hx_mm_job j = {seg_ptr(wc, i, mem, 0), o->type, o->cols, r1 - r0, c->act,
                       NULL, n, logits + r0, o->rows};
        hx_matmul_jobs(c->tp, &j, 1);
        if (i >= wc->n_pinned) dense_leave(wc, i);
    }
    if (c->lora) hx_adapter_apply(c, o, x, n, logits);
}

void hx_wc_embed_rows(hx_wcache *wc, const int32_t *tok, int n, float *x)
{
    const hx_wmat *w = &wc->m->tok_embd;
    const int tied = wc->m->hp.tied_output && wc->output.data;
    char *buf = tied ? NULL : alloc_pages(seg_span(w->row_bytes));
    for (int t = 0; t < n; t++) {
        const char *row = (const char *)wc->output.data + (size_t)tok[t] * w->row_bytes;
        if (!tied) {
            uint64_t off = file_off(wc, w->data) + (uint64_t)tok[t] * w->row_bytes;
            hx_err e = {0};
            int rc = buf ? read_span(wc, buf, off, w->row_bytes, &e)
                         : hx_err_set(&e, HX_ERR_NOMEM, "out of memory");
            if (rc) {
                pthread_mutex_lock(&wc->mu);
                if (!wc->failed) {
                    wc->failed = rc;
                    wc->err = e;
                }
                pthread_mutex_unlock(&wc->mu);
                continue;
            }
            row = buf + off % WC_PAGE;
        }
        hx_dequantize_row(w->type, row, x + (size_t)t * w->cols, w->cols);
    }
    free(buf);
}

/* Token rows of the embedding into the context's residual stream. */
void hx_wc_embed(hx_ctx *c, const int32_t *tok, int B)
{
    hx_wc_embed_rows(c->wc, tok, B, c->x);
}

/* ---- MoE: the experts of a layer, as many at a time as its slots ---- */

/* Gate and up, SwiGLU, down of the experts xs[0, n) of layer L, whose
 * matrices are at ptr[i][0..3). */
static void run_experts(hx_ctx *c, const hx_layer *L, int B, const int *xs, int n,
                        const void *const (*ptr)[3], const int *cnt, const int *first,
                        const int32_t *iota)
{
    if (n == 0) return;
    const hx_hparams *hp = &c->m->hp;
    const int fx = hp->n_ff_exp, same = hx_act_type(L->gate_exps.type) == hx_act_type(L->up_exps.type);
    const hx_wmat *gu[2] = {&L->gate_exps, &L->up_exps};
    float *out[2] = {c->hb, c->hb2};
    for (int k = 0; k < 2; k++) {
        if (!same) hx_fwd_quantize(c, gu[k]->type, c->xb, B, gu[k]->cols);
        int nj = 0;
        for (int i = 0; i < n; i++)
            for (int kk = same ? 0 : k; kk < (same ? 2 : k + 1); kk++)
                c->jobs[nj++] = hx_fwd_job(c, gu[kk], ptr[i][kk], c->ptok + first[xs[i]],
                                           cnt[xs[i]], out[kk] + (size_t)first[xs[i]] * fx);
        hx_matmul_jobs(c->tp, c->jobs, nj);
        if (same) break;
    }
    const hx_wmat *d = &L->down_exps;
    const size_t ab = hx_act_row_bytes(d->type, fx);
    int nj = 0;
    for (int i = 0; i < n; i++) {
        const size_t r0 = (size_t)first[xs[i]], nr = (size_t)cnt[xs[i]];
        hx_fwd_swiglu(c->tp, c->hb + r0 * fx, c->hb2 + r0 * fx, (int64_t)(nr * fx));
        if (hx_act_type(d->type) == HX_TYPE_F32)
            memcpy((char *)c->act2 + r0 * ab, c->hb + r0 * fx, nr * fx * sizeof(float));
        else
            hx_quantize_act_rows(c->tp, d->type, c->hb + r0 * fx, (int64_t)nr, fx,
                                 (char *)c->act2 + r0 * ab);
        hx_mm_job j = {ptr[i][2], d->type, d->cols, d->rows, c->act2, iota + r0, (int64_t)nr,
                       c->eo + r0 * (size_t)hp->n_embd, d->rows};
        c->jobs[nj++] = j;
    }
    hx_matmul_jobs(c->tp, c->jobs, nj);
}

static wc_slot *slot_of(hx_wcache *wc, int item)
{
    return &pool_of(wc, item)->slot[wc->item_slot[item]];
}

/* 1 when one of the experts xs[0, n) of the layer whose first item is
 * item0 is read (or failed). */
static int any_read(hx_wcache *wc, int item0, const int *xs, int n)
{
    for (int i = 0; i < n; i++)
        if (slot_of(wc, item0 + xs[i])->state != WS_LOADING) return 1;
    return 0;
}

/* run_experts on xs[0, n), whose slots are read: called and returns with
 * wc->mu held, released while computing. */
static void run_ready(hx_ctx *c, const hx_layer *L, int B, const int *xs, int n,
                      const int *cnt, const int *first, const int32_t *iota)
{
    hx_wcache *wc = c->wc;
    const int ne = c->m->hp.n_expert, l = (int)(L - c->m->layers);
    if (n == 0) return;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < 3; j++)
            wc->wave_ptr[i][j] = seg_ptr(wc, l * ne + xs[i], slot_of(wc, l * ne + xs[i])->mem, j);
    pthread_mutex_unlock(&wc->mu);
    run_experts(c, L, B, xs, n, (const void *const (*)[3])wc->wave_ptr, cnt, first, iota);
    pthread_mutex_lock(&wc->mu);
}

void hx_wc_moe(hx_ctx *c, const hx_layer *L, int B, const int *cnt, const int *first,
               const int32_t *iota)
{
    hx_wcache *wc = c->wc;
    const int ne = c->m->hp.n_expert, l = (int)(L - c->m->layers);
    const wc_pool *p = &wc->pool[wc->layer_pool[l]];
    const int wave = p->n < ne ? p->n : ne; /* experts pinned at once */
    int *xs[2] = {wc->wave_x, wc->wave_x + ne};
    const int same = hx_act_type(L->gate_exps.type) == hx_act_type(L->up_exps.type);
    if (same) hx_fwd_quantize(c, L->gate_exps.type, c->xb, B, L->gate_exps.cols);
    for (int x0 = 0; x0 < ne;) {
        /* the next experts that fit the layer's slots: those already there
         * run first, while the others are read */
        int n[2] = {0, 0}, x = x0;
        pthread_mutex_lock(&wc->mu);
        for (; x < ne && n[0] + n[1] < wave; x++) {
            if (!cnt[x]) continue;
            int s = lookup(wc, l * ne + x, 1);
            HX_CHECK(s >= 0);
            int ready = p->slot[s].state == WS_READY;
            wc->st.uses++;
            xs[!ready][n[!ready]++] = x;
        }
        /* the experts already there, then the others as their reads end */
        run_ready(c, L, B, xs[0], n[0], cnt, first, iota);
        for (int done = 0; done < n[1];) {
            while (!any_read(wc, l * ne, xs[1] + done, n[1] - done)) {
                double t0 = hx_time_mono();
                pthread_cond_wait(&wc->done, &wc->mu);
                wc->st.wait_s += hx_time_mono() - t0;
            }
            int k = done;
            for (int i = done; i < n[1]; i++) /* the read ones first, in order */
                if (slot_of(wc, l * ne + xs[1][i])->state != WS_LOADING) {
                    int t = xs[1][k];
                    xs[1][k++] = xs[1][i];
                    xs[1][i] = t;
                }
            run_ready(c, L, B, xs[1] + done, k - done, cnt, first, iota);
            done = k;
        }
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < n[k]; i++) unpin(wc, l * ne + xs[k][i]);
        pthread_mutex_unlock(&wc->mu);
        x0 = x;
    }
}

/* Starts reading the experts after e in direction dir (+1: up, -1: down)
 * with cnt[x] > 0 into the slots of layer l, as many as its slots hold
 * beside e's: those already there are marked used now first, so that the
 * reads evict only experts outside that window (caller holds wc->mu). */
static void read_ahead(hx_wcache *wc, int l, int e, const int32_t *cnt, int dir)
{
    const int ne = wc->m->hp.n_expert, room = wc->pool[wc->layer_pool[l]].n - 1;
    for (int k = 0, x = e + dir; k < room && x >= 0 && x < ne; x += dir) {
        if (cnt[x] <= 0) continue;
        const int i = wc->item_slot[l * ne + x];
        if (i >= 0) wc->pool[wc->layer_pool[l]].slot[i].stamp = ++wc->clock;
        k++;
    }
    for (int k = 0, x = e + dir; k < room && x >= 0 && x < ne; x += dir) {
        if (cnt[x] <= 0) continue;
        if (lookup(wc, l * ne + x, 0) < 0) break;
        k++;
    }
}

void hx_wc_expert_get(hx_wcache *wc, int il, int e, const int32_t *cnt, int dir,
                      const void *mats[3])
{
    const int item = il * wc->m->hp.n_expert + e;
    pthread_mutex_lock(&wc->mu);
    HX_CHECK(wc->moe && lookup(wc, item, 1) >= 0);
    wc->st.uses++;
    if (cnt) read_ahead(wc, il, e, cnt, dir < 0 ? -1 : 1);
    wc_slot *s = wait_ready(wc, item);
    pthread_mutex_unlock(&wc->mu);
    for (int k = 0; k < 3; k++) mats[k] = seg_ptr(wc, item, s->mem, k);
}

void hx_wc_expert_put(hx_wcache *wc, int il, int e)
{
    pthread_mutex_lock(&wc->mu);
    unpin(wc, il * wc->m->hp.n_expert + e);
    pthread_mutex_unlock(&wc->mu);
}
