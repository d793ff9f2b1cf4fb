/* toolcheck.c: whether a tool's JSON Schema can drive constrained decoding:
 * a tool the grammar cannot enforce is left out of the model's tool list
 * (and reported), never allowed to take the other tools down. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "engine/engine.h"

int hx_agent_schema_usable(const char *schema_json, hx_err *err)
{
    if (!schema_json) return HX_OK; /* any JSON object */
    hx_grammar *g = NULL;
    int rc = hx_grammar_from_schema(schema_json, strlen(schema_json), NULL, &g, err);
    hx_grammar_free(g);
    return rc;
}

int hx_agent_tool_specs(const hx_tools *reg, const char *filter, FILE *warn,
                        hx_tool_spec **out)
{
    int n = hx_tools_count(reg), k = 0;
    hx_tool_spec *specs = hx_calloc((size_t)n + 1, sizeof *specs);
    *out = specs;
    if (!specs) return -1;
    for (int i = 0; i < n; i++) {
        const hx_tool_def *d = hx_tools_at(reg, i);
        hx_err e = {0};
        if (!hx_agent_tool_offered(filter, d->name)) continue;
        if (hx_agent_schema_usable(d->schema_json, &e)) {
            if (warn)
                fprintf(warn, "hearth: tool %s left out: the grammar cannot use its "
                              "schema: %s\n", d->name, e.msg);
            continue;
        }
        specs[k++] = (hx_tool_spec){d->name, d->schema_json};
    }
    return k;
}
