/* fuzz_schema.c: arbitrary bytes as a JSON Schema: compiling never crashes;
 * a compiled grammar runs its matcher and masks over a small vocabulary. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

static const char *const k_pieces[] = {"{", "}", "[", "]", "\"", ",", ":", " ", "\"a\"", "1",
                                       "-", ".", "e", "true", "null", "x", "\\", "\\n", "\xc3\xa9", "\": "};
#define N_PIECES (int)(sizeof k_pieces / sizeof k_pieces[0])

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static hx_gvocab *v;
    hx_err err = {0};
    if (!v) {
        size_t lens[N_PIECES];
        for (int i = 0; i < N_PIECES; i++) lens[i] = strlen(k_pieces[i]);
        if (hx_gvocab_new(N_PIECES, k_pieces, lens, NULL, &v, &err)) abort();
    }
    if (size > 4096) return 0;
    hx_grammar *g = NULL;
    if (hx_grammar_from_schema((const char *)data, size, NULL, &g, &err)) {
        if (g || !err.msg[0]) abort(); /* an error always says why */
        return 0;
    }
    hx_matcher *m = hx_matcher_new(g, v);
    uint32_t mask[1];
    /* greedy walk: take the first allowed token, a few steps */
    for (int step = 0; m && step < 24; step++) {
        if (hx_matcher_mask(m, mask)) break;
        if (!mask[0]) break;
        int t = __builtin_ctz(mask[0]);
        if (hx_matcher_accept(m, t)) abort(); /* a masked-in token is accepted */
    }
    hx_matcher_free(m);
    hx_grammar_free(g);
    return 0;
}
