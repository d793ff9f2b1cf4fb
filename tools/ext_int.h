/* ext_int.h: tools-internal structures of registered tools: parsed
 * manifests, the tools they register, and MCP server connections. */
#ifndef HX_EXT_INT_H
#define HX_EXT_INT_H

#include "sandbox/sandbox.h"
#include "tools/tools.h"

typedef struct ext_manifest {
    char name[96];
    char *description;
    char *schema_json;        /* command tools only */
    char **command;           /* NULL-terminated argv; command[0] absolute */
    char *read_paths[HX_SANDBOX_MAX_PATHS];
    int n_read;
    char *write_paths[HX_SANDBOX_MAX_PATHS];
    int n_write;
    int effect;               /* hx_effect */
    double timeout_s;
    double max_memory_mb;     /* address-space limit */
    int is_mcp;
} ext_manifest;

typedef struct mcp_conn mcp_conn;

/* One tool registered from a manifest; its address is the registry's
 * `user` pointer, so it never moves. */
typedef struct ext_tool {
    char name[160];
    ext_manifest *m;
    mcp_conn *conn;           /* NULL for plain command tools */
    char remote[128];         /* the tool's name on its MCP server */
    unsigned last_sandbox;
    hx_extools *owner;
} ext_tool;

struct hx_extools {
    hx_tools *reg;
    ext_manifest **mans;
    int n_mans;
    ext_tool **tools;
    int n_tools;
    mcp_conn **conns;
    int n_conns;
};

/* The effect a manifest's tool is given: the manifest's effect is the
 * ceiling, and a tool's own read_only_hint (MCP's readOnlyHint) lowers it
 * to read only where the sandbox enforces reading (no write paths); write
 * paths make it at least a write, whatever the manifest claims. */
int hx_ext_effect(const ext_manifest *m, int read_only_hint);
/* Sandbox parameters for a manifest (its paths, timeout, limits). */
hx_sandbox_params hx_ext_sandbox_params(const ext_manifest *m);
/* Adds a tool to x and registers it in x->reg with call as its function. */
int hx_ext_add_tool(hx_extools *x, ext_manifest *m, mcp_conn *conn,
                    const char *name, const char *remote, const char *description,
                    const char *schema_json, int effect, hx_tool_fn call,
                    hx_err *err);

/* ---- MCP client (tools/mcp.c) ---- */
/* Starts the server of manifest m confined, initializes the session and
 * registers the tools it lists (all pages), its first ones only past the
 * caps of mcp.c, which are then reported as a line in problems (may be
 * NULL; borrowed during the call). */
int hx_mcp_connect(hx_extools *x, ext_manifest *m, hx_buf *problems, mcp_conn **out,
                   hx_err *err);
void hx_mcp_close(mcp_conn *c);

#endif /* HX_EXT_INT_H */
