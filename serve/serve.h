/* serve.h: the serve module's public API: Hearth as the device's assistant
 * over HTTP (`hearth serve`), for other apps and for a person in a browser:
 * an OpenAI-compatible API on the one loaded model, the assistant with its
 * own tools, policy, consent, memory and audit trail, and a page. It
 * listens on a UNIX socket and, on request, on loopback TCP with a bearer
 * token; never on the network. */
#ifndef HX_SERVE_H
#define HX_SERVE_H

#include "agent/agent.h"

typedef struct hx_serve_params {
    const char *socket_path;  /* NULL: $XDG_RUNTIME_DIR/hearth/hearth.sock;
                                 "": no UNIX socket */
    const char *listen;       /* NULL: no TCP; else "127.0.0.1:PORT",
                                 "[::1]:PORT", "localhost:PORT" or "PORT"
                                 (0: any free port); nothing else */
    const char *token_path;   /* NULL: serve-token in the config folder */
    int slots;                /* conversations decoding in turn, each with
                                 its own KV cache; default 2 */
    int max_queue;            /* requests waiting for a slot; more get 503;
                                 default 64 */
    size_t max_body;          /* request bodies; larger get 413; default
                                 4 MiB */
    unsigned idle_timeout_s;  /* a connection silent this long is closed;
                                 default 30 */
    double body_timeout_s;    /* a request body not complete this long
                                 after its headers is cut off; default 30 */
    double consent_timeout_s; /* an unanswered consent question is a no
                                 after this; default 300 */
    unsigned max_connections; /* default 4096, at most what the open-file
                                 limit leaves */
} hx_serve_params;
hx_serve_params hx_serve_default_params(void);

/* What the server works with, all borrowed: they must outlive it. */
typedef struct hx_serve_deps {
    hx_model *model;            /* the one model, loaded and mapped once */
    const char *model_name;     /* its id in /v1/models */
    int family;                 /* its prompt style, HX_TPL_* */
    hx_source_engine_params ep; /* how each slot's source is made; its
                                   cancelled callback must be
                                   hx_serve_prefill_check */
    hx_source *first_src;       /* NULL, or an engine source made with ep
                                   that becomes the first slot's */
    hx_planner_params pp;       /* the assistant's defaults */
    hx_tools *reg;
    const hx_extools *x;        /* may be NULL */
    struct hx_policy *policy;
    struct hx_audit *audit;     /* may be NULL */
    hx_memory *mem;             /* NULL: no memory (recall, episodes and
                                   the memory and audit views are off) */
} hx_serve_deps;

typedef struct hx_server hx_server;

/* Opens the listening sockets (and the token of the TCP listener,
 * created on first use, 0600) and nothing else: call it before Hearth
 * confines itself from the network (hx_sandbox_confine_self_no_network refuses socket()),
 * since accepted connections come from these. The UNIX socket's folder is
 * made 0700 and the socket 0600; a path that exists is replaced only when
 * it is a stale socket of this user's (nothing listens on it); anything
 * else there is refused and left alone. TCP only on 127.0.0.1 or ::1.
 * *out is the caller's to free with hx_serve_free, also on failure. */
int hx_serve_listen(const hx_serve_params *p, hx_server **out, hx_err *err);
/* Starts serving with d: the slots' sources, their threads and the HTTP
 * daemons on the listeners. */
int hx_serve_start(hx_server *s, const hx_serve_deps *d, hx_err *err);
/* Where it listens, one line each ("unix:PATH", "http://127.0.0.1:PORT"),
 * with the token file's path; appended to out. */
void hx_serve_describe(const hx_server *s, hx_buf *out);
/* The TCP port (0 when there is no TCP listener). */
int hx_serve_port(const hx_server *s);
/* Stops (generations cancelled, consent questions answered no,
 * connections closed), removes the UNIX socket it made, frees s. NULL is
 * a no-op. */
void hx_serve_free(hx_server *s);

/* The engine sources' cancel check for the servers' slots (set as
 * hx_source_engine_params.cancelled before the first source is made):
 * nonzero when the client of the request being prefilled went away;
 * between two slices of a prefill it lets the other slots decode a turn
 * (prefills and the decoding conversations' passes take turns). Outside
 * a slot's thread: 0. */
int hx_serve_prefill_check(void *user);

#endif /* HX_SERVE_H */
