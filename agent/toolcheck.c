/* toolcheck.c: whether a tool's JSON Schema can drive constrained decoding:
 * a tool the grammar cannot enforce is left out of the model's tool list
 * (and reported), never allowed to take the other tools down. */
#include <string.h>

#include "agent/agent_int.h"
#include "engine/engine.h"

int hx_agent_schema_usable(const char *schema_json, hx_err *err)
{
    if (!schema_json) return HX_OK; /* any JSON object */
    hx_grammar *g = NULL;
    int rc = hx_grammar_from_schema(schema_json, strlen(schema_json), NULL, &g, err);
    hx_grammar_free(g);
    return rc;
}
