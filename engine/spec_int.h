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

#endif /* HX_SPEC_INT_H */
