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

#endif /* HX_SPEC_INT_H */
