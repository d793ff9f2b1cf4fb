/* fuzz_grammar_bytes.c: byte sequences fed to compiled grammars; the byte
 * matcher and the token mask (one token per byte value) must agree. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

static const char *const k_schemas[] = {
    "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\",\"minimum\":-5,\"maximum\":300},"
    "\"b\":{\"type\":\"string\",\"maxLength\":4}},\"required\":[\"a\"]}",
    "{\"type\":\"array\",\"items\":{\"enum\":[\"x\",1,null]},\"minItems\":1,\"maxItems\":3}",
    "{\"type\":\"string\",\"pattern\":\"^[a-c]+\\\\d?$\"}",
    "{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"c\":{\"$ref\":\"#/$defs/n\"}},"
    "\"additionalProperties\":false}},\"$ref\":\"#/$defs/n\"}",
    "{\"type\":\"string\",\"format\":\"date-time\"}",
    "{\"anyOf\":[{\"type\":\"number\",\"exclusiveMinimum\":0},{\"type\":\"boolean\"}]}",
    "{}",
};
#define N_SCHEMAS (int)(sizeof k_schemas / sizeof k_schemas[0])

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static hx_gvocab *v;
    static hx_grammar *g[N_SCHEMAS];
    static hx_matcher *m[N_SCHEMAS];
    hx_err err = {0};
    if (!v) {
        const char *p[256];
        size_t l[256];
        static char bytes[256];
        for (int i = 0; i < 256; i++) { bytes[i] = (char)i; p[i] = &bytes[i]; l[i] = 1; }
        if (hx_gvocab_new(256, p, l, NULL, &v, &err)) abort();
        for (int i = 0; i < N_SCHEMAS; i++) {
            if (hx_grammar_from_schema(k_schemas[i], strlen(k_schemas[i]), NULL, &g[i], &err)) abort();
            if (!(m[i] = hx_matcher_new(g[i], v))) abort();
        }
    }
    if (size == 0) return 0;
    hx_matcher *mm = m[data[0] % N_SCHEMAS];
    uint32_t mask[8];
    hx_matcher_reset(mm);
    for (size_t i = 1; i < size && i < 512; i++) {
        if (hx_matcher_mask(mm, mask)) abort();
        int allowed = (mask[data[i] >> 5] >> (data[i] & 31)) & 1;
        int fed = hx_matcher_accept(mm, data[i]) == HX_OK;
        if (allowed != fed) abort(); /* the mask says exactly what advances */
        if (!fed) break;
    }
    (void)hx_matcher_can_end(mm);
    return 0;
}
