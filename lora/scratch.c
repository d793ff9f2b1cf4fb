/* scratch.c: the working buffer a product keeps between calls (packed
 * operands, dequantized blocks), grown under its lock. */
#include <stdint.h>
#include <stdlib.h>

#include "lora/train_int.h"

void *hx_tr_scratch_lock(tr_scratch *s, size_t bytes)
{
    if (bytes == 0) bytes = 1;
    pthread_mutex_lock(&s->mu);
    if (bytes > s->cap) {
        free(s->buf);
        s->buf = bytes <= SIZE_MAX - 63 ? aligned_alloc(64, (bytes + 63) / 64 * 64) : NULL;
        s->cap = s->buf ? bytes : 0;
    }
    if (!s->buf) pthread_mutex_unlock(&s->mu);
    return s->buf;
}

void hx_tr_scratch_unlock(tr_scratch *s) { pthread_mutex_unlock(&s->mu); }

void hx_tr_scratch_release(tr_scratch *s)
{
    pthread_mutex_lock(&s->mu);
    free(s->buf);
    s->buf = NULL;
    s->cap = 0;
    pthread_mutex_unlock(&s->mu);
}
