/* spec_int.h: the speculative decoder's copy drafts (engine/spec.c),
 * exposed for its tests. Internal to the engine. */
#ifndef HX_SPEC_INT_H
#define HX_SPEC_INT_H

#include <stdint.h>

#include "engine/spec.h"

/* The copy draft after the context seq[0, n): when seq ends inside a
 * string (2 to 64 bytes after its opening quote, starting like a value),
 * the tokens that followed the string's bytes where they last occurred
 * in the context from a word's start, tokenized as the model would write
 * them (the last dropped unless the copy ended at a quote or a line's
 * end); at most max into d, their count. */
int hx_spec_copy_draft(hx_spec *sp, const int32_t *seq, int n, int32_t *d, int max);

/* The memo (engine/specmemo.c): a turn starts after the prompt hist[0, n)
 * (its last HX_MEMO_KEY tokens are kept as the key of the turn's first
 * tokens); t was produced. */
#define HX_MEMO_KEY 8
void hx_spec_memo_turn(hx_spec_memo *m, const int32_t *hist, int n);
void hx_spec_memo_add(hx_spec_memo *m, int32_t t);
/* What followed seq[0, n)'s end in the memo: token by token, what
 * followed the matches of the sequence so far (those at least L tokens
 * long, for the longest L of 1 to HX_MEMO_KEY where at least two of them
 * and three in four agree), while there is such a token; at most max into
 * d, their count; *key the first token's L (0: none). */
int hx_spec_memo_draft(hx_spec_memo *m, const int32_t *seq, int n, int32_t *d,
                       int max, int *key);

/* What decoding taught a decoder about drafting on its model
 * (engine/spec.c), kept with the memo so that the decoders sharing one
 * (a request's each) start where the last one left off instead of
 * guessing again: each draft source's decaying counts of drafts reached
 * and accepted, steps since its last draft, and the pass times t of B
 * rows as decaying sums for the fit t ~ a + b B. */
#define HX_SPEC_N_RATES 16
typedef struct hx_spec_learned {
    int init;  /* 0 until the decoder first sets the counts */
    double tried[HX_SPEC_N_RATES], taken[HX_SPEC_N_RATES];
    int idle[HX_SPEC_N_RATES];
    double s1, sB, sBB, sT, sBT;
} hx_spec_learned;
/* m's record (zeroed at hx_spec_memo_new), borrowed. */
hx_spec_learned *hx_spec_memo_learned(hx_spec_memo *m);

#endif /* HX_SPEC_INT_H */
