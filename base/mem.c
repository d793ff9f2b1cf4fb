/* mem.c: checked allocation, strings, the bump arena and the growable
 * buffer. */
#include "base.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* ---- failure injection (hx_fault_alloc) ---- */

static atomic_long fault_at;    /* the allocation number that fails; 0: off */
static atomic_long fault_count; /* allocations since hx_fault_alloc */
static atomic_int fault_sticky;

void hx_fault_alloc(long n, int sticky)
{
    atomic_store(&fault_count, 0);
    atomic_store(&fault_sticky, sticky);
    atomic_store(&fault_at, n > 0 ? n : 0);
}

long hx_fault_alloc_count(void)
{
    return atomic_load(&fault_count);
}

/* Counts one allocation; 1 if it is to fail. */
static int fault(void)
{
    const long at = atomic_load_explicit(&fault_at, memory_order_relaxed);
    const long k = atomic_fetch_add(&fault_count, 1) + 1;
    return at && (k == at || (k > at && atomic_load(&fault_sticky)));
}

void *hx_malloc(size_t size)
{
    return fault() ? NULL : malloc(size ? size : 1);
}

void *hx_realloc(void *p, size_t size)
{
    return fault() ? NULL : realloc(p, size ? size : 1);
}

int hx_mul_size(size_t a, size_t b, size_t *out)
{
    if (b && a > SIZE_MAX / b) return -1;
    *out = a * b;
    return 0;
}

int hx_add_size(size_t a, size_t b, size_t *out)
{
    if (a > SIZE_MAX - b) return -1;
    *out = a + b;
    return 0;
}

void *hx_calloc(size_t n, size_t size)
{
    size_t t;
    if (hx_mul_size(n, size, &t) || fault()) return NULL;
    return calloc(n ? n : 1, size ? size : 1);
}

void *hx_malloc_array(size_t n, size_t size)
{
    size_t t;
    if (hx_mul_size(n, size, &t) || fault()) return NULL;
    return malloc(t ? t : 1);
}

void *hx_aligned_alloc(size_t align, size_t size)
{
    void *p = NULL;
    if (fault() || posix_memalign(&p, align, size ? size : 1)) return NULL;
    return p;
}

void *hx_huge_alloc(size_t n, size_t size)
{
    const size_t huge = (size_t)2 << 20;
    size_t bytes;
    if (hx_mul_size(n, size, &bytes)) return NULL;
    if (bytes < huge) return hx_aligned_alloc(64, bytes);
    void *p = hx_aligned_alloc(huge, bytes);
#ifdef MADV_HUGEPAGE
    if (p) (void)madvise(p, bytes / huge * huge, MADV_HUGEPAGE);
#endif
    return p;
}

char *hx_strdup(const char *s)
{
    return s ? hx_strndup(s, strlen(s)) : NULL;
}

const char *hx_find_control(const char *s, int allow_space)
{
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (allow_space && (*c == '\t' || *c == '\n' || *c == '\r')) continue;
        if (*c < 0x20 || *c == 0x7f || (*c == 0xc2 && c[1] >= 0x80 && c[1] <= 0x9f))
            return (const char *)c;
    }
    return NULL;
}

char *hx_strndup(const char *s, size_t n)
{
    if (!s) return NULL;
    char *d = hx_malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

/* ---- arena ---- */

typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t size; /* usable bytes after the header */
    size_t used;
    _Alignas(16) unsigned char mem[];
} arena_chunk;

struct hx_arena {
    arena_chunk *head; /* current chunk; older ones follow */
    size_t chunk_size;
    size_t total_used;
};

static arena_chunk *chunk_new(size_t size)
{
    arena_chunk *c = hx_malloc(sizeof *c + size);
    if (!c) return NULL;
    c->next = NULL;
    c->size = size;
    c->used = 0;
    return c;
}

hx_arena *hx_arena_new(size_t chunk_size)
{
    hx_arena *a = hx_calloc(1, sizeof *a);
    if (!a) return NULL;
    a->chunk_size = chunk_size ? chunk_size : 64 * 1024;
    return a;
}

void hx_arena_free(hx_arena *a)
{
    if (!a) return;
    while (a->head) {
        arena_chunk *n = a->head->next;
        free(a->head);
        a->head = n;
    }
    free(a);
}

void *hx_arena_alloc(hx_arena *a, size_t size)
{
    size = (size + 15) & ~(size_t)15;
    if (!size) size = 16;
    arena_chunk *c = a->head;
    if (!c || c->size - c->used < size) {
        size_t want = size > a->chunk_size ? size : a->chunk_size;
        c = chunk_new(want);
        if (!c) return NULL;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->mem + c->used;
    c->used += size;
    a->total_used += size;
    return p;
}

void *hx_arena_calloc(hx_arena *a, size_t n, size_t size)
{
    size_t t;
    if (hx_mul_size(n, size, &t)) return NULL;
    void *p = hx_arena_alloc(a, t);
    if (p) memset(p, 0, t);
    return p;
}

char *hx_arena_strndup(hx_arena *a, const char *s, size_t n)
{
    char *d = hx_arena_alloc(a, n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *hx_arena_strdup(hx_arena *a, const char *s)
{
    return hx_arena_strndup(a, s, strlen(s));
}

void hx_arena_reset(hx_arena *a)
{
    if (!a->head) return;
    arena_chunk *last = a->head;
    while (last->next) {
        arena_chunk *n = last->next;
        free(last);
        last = n;
    }
    /* keep the oldest (usually the default-sized) chunk */
    last->used = 0;
    a->head = last;
    a->total_used = 0;
}

size_t hx_arena_used(const hx_arena *a) { return a->total_used; }

/* ---- buffer ---- */

void hx_buf_init(hx_buf *b) { memset(b, 0, sizeof *b); }

void hx_buf_free(hx_buf *b)
{
    free(b->data);
    hx_buf_init(b);
}

int hx_buf_reserve(hx_buf *b, size_t extra)
{
    if (b->oom) return HX_ERR_NOMEM;
    size_t need;
    if (hx_add_size(b->len, extra + 1, &need)) return b->oom = 1, HX_ERR_NOMEM;
    if (need <= b->cap) return HX_OK;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    char *p = hx_realloc(b->data, cap);
    if (!p) return b->oom = 1, HX_ERR_NOMEM;
    b->data = p;
    b->cap = cap;
    b->data[b->len] = '\0';
    return HX_OK;
}

int hx_buf_append(hx_buf *b, const void *p, size_t n)
{
    if (hx_buf_reserve(b, n)) return HX_ERR_NOMEM;
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return HX_OK;
}

int hx_buf_puts(hx_buf *b, const char *s) { return hx_buf_append(b, s, strlen(s)); }

int hx_buf_putc(hx_buf *b, char c) { return hx_buf_append(b, &c, 1); }

int hx_buf_printf(hx_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || hx_buf_reserve(b, (size_t)n)) return HX_ERR_NOMEM;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return HX_OK;
}

char *hx_buf_steal(hx_buf *b, size_t *len)
{
    if (!b->data && hx_buf_reserve(b, 0)) return NULL;
    char *d = b->data;
    if (len) *len = b->len;
    hx_buf_init(b);
    return d;
}
