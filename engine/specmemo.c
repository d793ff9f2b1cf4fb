/* specmemo.c: the model's own recent output for speculative drafts: what
 * it wrote after the same tokens before. A call's frame (the tool's name
 * after its prefix, the first key, the end of a turn) is the model's
 * habit, not the context's: the prompt renders earlier calls in another
 * form, and a request's first call has none before it in its context. */
#include <stdlib.h>
#include <string.h>

#include "engine/spec.h"
#include "engine/spec_int.h"

#define MEMO_CAP (1 << 14) /* tokens kept; the older half goes when full */
#define MEMO_SEP (-1)      /* between turns: no key or draft crosses it */

struct hx_spec_memo {
    int32_t *tok; /* separator, the prompt's last tokens, the output; ... */
    uint8_t *out; /* 1 where tok is output (drafts come from there only:
                     a prompt's last tokens repeat the turn before's) */
    int n;
    int *cand;     /* scratch for a lookup: positions after a match ... */
    uint8_t *clen; /* ... and the match's length */
    hx_spec_learned learned;
};

hx_spec_memo *hx_spec_memo_new(void)
{
    hx_spec_memo *m = hx_calloc(1, sizeof *m);
    if (!m) return NULL;
    m->tok = hx_malloc_array(MEMO_CAP, sizeof *m->tok);
    m->out = hx_malloc_array(MEMO_CAP, sizeof *m->out);
    m->cand = hx_malloc_array(MEMO_CAP, sizeof *m->cand);
    m->clen = hx_malloc_array(MEMO_CAP, sizeof *m->clen);
    if (!m->tok || !m->out || !m->cand || !m->clen) {
        hx_spec_memo_free(m);
        return NULL;
    }
    return m;
}

void hx_spec_memo_free(hx_spec_memo *m)
{
    if (!m) return;
    free(m->tok);
    free(m->out);
    free(m->cand);
    free(m->clen);
    free(m);
}

static void add(hx_spec_memo *m, int32_t t, int out)
{
    if (m->n == MEMO_CAP) {
        int keep = MEMO_CAP / 2;
        memmove(m->tok, m->tok + m->n - keep, (size_t)keep * sizeof *m->tok);
        memmove(m->out, m->out + m->n - keep, (size_t)keep);
        m->n = keep;
    }
    m->out[m->n] = (uint8_t)out;
    m->tok[m->n++] = t;
}

void hx_spec_memo_turn(hx_spec_memo *m, const int32_t *hist, int n)
{
    int from = n > HX_MEMO_KEY ? n - HX_MEMO_KEY : 0;
    add(m, MEMO_SEP, 0);
    for (int i = from; i < n; i++) add(m, hist[i], 0);
}

void hx_spec_memo_add(hx_spec_memo *m, int32_t t) { add(m, t, 1); }

hx_spec_learned *hx_spec_memo_learned(hx_spec_memo *m) { return &m->learned; }

/* How many tokens before memo position j (exclusive) equal the last of
 * key[0, n), at most HX_MEMO_KEY. */
static int match_len(const hx_spec_memo *m, int j, const int32_t *key, int n)
{
    int l = 0;
    while (l < HX_MEMO_KEY && l < j && l < n && m->tok[j - 1 - l] == key[n - 1 - l]) l++;
    return l;
}

/* The token that followed the matches of key[0, n)'s end in the memo: of
 * the matches at least L tokens long, for the longest L where at least
 * MEMO_SUPPORT of them agree on one and no more than one in MEMO_DISSENT
 * says otherwise (*len = L); else -1. */
#define MEMO_SUPPORT 2
#define MEMO_DISSENT 4
static int32_t next_of(hx_spec_memo *m, const int32_t *key, int n, int *len)
{
    int nc = 0;
    for (int j = m->n - 1; j > 0; j--) /* candidates: the matches and their lengths */
        if (m->out[j] && m->tok[j - 1] == key[n - 1])
            m->cand[nc] = j, m->clen[nc++] = (uint8_t)match_len(m, j, key, n);
    for (int l = HX_MEMO_KEY; l >= 1; l--) {
        int32_t t = -1;
        int votes = 0, total = 0, agree = 0;
        for (int i = 0; i < nc; i++) { /* the majority's token, if any */
            if (m->clen[i] < l) continue;
            int32_t x = m->tok[m->cand[i]];
            total++;
            if (x == t) votes++;
            else if (votes == 0) t = x, votes = 1;
            else votes--;
        }
        for (int i = 0; i < nc; i++) agree += m->clen[i] >= l && m->tok[m->cand[i]] == t;
        if (agree >= MEMO_SUPPORT && (total - agree) * MEMO_DISSENT <= total) {
            *len = l;
            return t;
        }
    }
    *len = 0;
    return -1;
}

int hx_spec_memo_draft(hx_spec_memo *m, const int32_t *seq, int n, int32_t *d,
                       int max, int *key)
{
    int32_t buf[HX_MEMO_KEY + 64];
    int nk = n < HX_MEMO_KEY ? n : HX_MEMO_KEY, k = 0, len = 0;
    *key = 0;
    if (!m || n <= 0 || max <= 0) return 0;
    if (max > 64) max = 64;
    memcpy(buf, seq + n - nk, (size_t)nk * sizeof *buf);
    for (int32_t t; k < max && (t = next_of(m, buf, nk + k, &len)) >= 0; k++) {
        if (k == 0) *key = len;
        d[k] = buf[nk + k] = t;
    }
    return k;
}
