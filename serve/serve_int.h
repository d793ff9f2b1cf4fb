/* serve_int.h: internal header of the serve module: listeners, requests,
 * jobs (a generation and the response it streams), the slots that run
 * them in turn, and the handlers of each surface. Not public. */
#ifndef HX_SERVE_INT_H
#define HX_SERVE_INT_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include <microhttpd.h>

#include "serve/serve.h"

/* ---- listeners and the token (serve/listen.c) ---- */
#define SV_TOKEN_HEX 64 /* 32 random bytes */
#define SV_MAX_HOSTS 3
typedef struct sv_listener {
    int fd;
    int tcp;                 /* 0: the UNIX socket */
    int port;
    char hosts[SV_MAX_HOSTS][64]; /* TCP: the Host values that name it */
    int n_hosts;
    struct MHD_Daemon *mhd;
    struct hx_server *srv;
} sv_listener;

/* A loopback address as --listen takes it into *ss (port 0: any); 0, or
 * -1 with err saying why it is refused. */
int hx_sv_parse_listen(const char *spec, struct sockaddr_storage *ss, socklen_t *len,
                    hx_err *err);
int hx_sv_listen_tcp(const char *spec, sv_listener *l, hx_err *err);
/* The UNIX socket at path (NULL: the default), its folder 0700; *ino
 * gets the socket's inode, to remove only that at the end. */
int hx_sv_listen_unix(const char *path, sv_listener *l, char **path_out, ino_t *ino,
                   hx_err *err);
void hx_sv_unlink_unix(const char *path, ino_t ino);
/* The token at path (NULL: the config folder's serve-token), created on
 * first use (0600); a file others may read is refused. */
int hx_sv_token_load(const char *path, char *token, size_t n, char **path_out, hx_err *err);
/* Whether a equals the token, in time independent of where they differ. */
int hx_sv_token_equal(const char *token, const char *a, size_t n);
/* n random bytes as 2n hex digits and a NUL into out (ids, tokens: never
 * the pinned clock's names of hx_unique_bytes). HX_OK or HX_ERR_IO. */
int hx_sv_random_hex(char *out, size_t n_bytes);

/* ---- jobs: one generation and its response (serve/stream.c) ---- */
enum { SV_JOB_CHAT = 1, SV_JOB_ASK = 2 };
#define SV_PROMPT_HEAD 4096 /* bytes of a prompt compared for a slot */
typedef struct sv_job {
    pthread_mutex_t mu;
    int refs;
    int kind;
    int sse;                  /* the response is an event stream */
    /* the connection, while MHD has it (NULL once it completed) */
    struct MHD_Connection *conn;
    int fd;
    int suspended;            /* waiting for output, resumed by the job */
    int gone;                 /* the client went away or the request ended */
    /* the response */
    int started;              /* status and kind decided: may be queued */
    int status;
    hx_buf out;               /* bytes not yet sent */
    size_t sent;
    int finished;             /* nothing more will be written */
    double queued_at;
    /* the work */
    void *work;               /* sv_chat_req or sv_ask_req */
    void (*free_work)(void *work);
    struct sv_job *next;      /* the queue */
    char prompt_head[SV_PROMPT_HEAD]; /* the start of its prompt, for the
                                 slot whose KV cache shares most of it */
} sv_job;

sv_job *hx_sv_job_new(int kind, struct MHD_Connection *conn);
void hx_sv_job_unref(sv_job *j);
/* The job's answer as one response (status, a JSON body, copied). */
void hx_sv_job_respond(sv_job *j, int status, const char *json);
/* Starts an event stream (200, text/event-stream). */
void hx_sv_job_start_stream(sv_job *j);
/* Appends SSE bytes ("data: ...\n\n") to a started stream. */
void hx_sv_job_send_data(sv_job *j, const char *json);
void hx_sv_job_send_event(sv_job *j, const char *event, const char *json);
/* An error in OpenAI's shape: the response (status), or once streaming
 * its last data event (OpenAI streams errors so). */
void hx_sv_job_fail(sv_job *j, int status, const char *param, const char *code, const char *msg);
/* No more output: the stream (or the response) ends. */
void hx_sv_job_finish(sv_job *j);
/* Whether the client went away (checked on its socket: a suspended
 * connection is not watched by MHD). */
int hx_sv_job_gone(sv_job *j);
/* The SSE framing of one field's value: "name: line\n" per line of
 * value (a line break in it starts a new field line, never a new event),
 * and the blank line that ends the event with end. */
void hx_sv_sse_field(hx_buf *out, const char *name, const char *value, int end);

/* MHD glue: the response a resumed request queues, and the event
 * stream's reader. */
enum MHD_Result hx_sv_job_queue(sv_job *j, struct MHD_Connection *conn);

/* ---- the slots and the turn queue (serve/sched.c) ---- */
#define SV_MAX_SLOTS 64
typedef struct sv_slot sv_slot;
typedef struct sv_sched sv_sched;
/* Makes n slots (their sources and threads). */
int hx_sv_sched_new(struct hx_server *srv, int n, int max_queue, sv_sched **out, hx_err *err);
/* Queues j (the caller gives the queue a reference; the slot that runs
 * it drops it); HX_ERR_FULL when max_queue requests wait already,
 * HX_ERR_STATE when stopping. */
int hx_sv_sched_submit(sv_sched *sc, sv_job *j);
/* Cancels what waits (503) and what runs, and joins the threads; later
 * submissions are refused (HX_ERR_STATE) until it is freed. */
void hx_sv_sched_stop(sv_sched *sc);
/* Stops it if running, frees the slots' sources and it. */
void hx_sv_sched_free(sv_sched *sc);
/* The server a slot serves. */
struct hx_server *hx_sv_slot_server(sv_slot *s);
/* The slot's source configured for a request (hx_source_engine_configure),
 * its turn begun and its tokens taken; begin and next take the turn (one
 * decode at a time, in turn with the other slots). */
int hx_sv_slot_configure(sv_slot *s, const hx_engine_turn *t, hx_err *err);
int hx_sv_slot_begin(sv_slot *s, const char *prompt, const hx_tpl_marks *marks, int choice,
                  int *n_prompt, hx_err *err);
int hx_sv_slot_next(sv_slot *s, hx_buf *piece, int *end, hx_err *err);
/* The slot's source as the planner drives it: every begin and next takes
 * the turn. Borrowed from the slot. */
hx_source *hx_sv_slot_planner_source(sv_slot *s);
/* Whether the slot's request should stop: its client went away, or the
 * server stops. */
int hx_sv_slot_cancelled(sv_slot *s);

/* ---- the server ---- */
typedef struct sv_consent sv_consent;
struct hx_server {
    hx_serve_params p;
    sv_listener lis[2];
    int n_lis;
    char token[SV_TOKEN_HEX + 1];
    char *token_path;
    char *socket_path;        /* the UNIX socket made, to remove at the end */
    ino_t socket_ino;
    hx_serve_deps d;
    int started;
    sv_sched *sched;
    hx_memory *mem_http;      /* memory for the HTTP side's views */
    pthread_mutex_t mem_mu;
    pthread_mutex_t consent_mu;
    pthread_cond_t consent_cv;
    sv_consent *consents;     /* questions waiting for an answer */
    int stopping;
    int64_t created;          /* /v1/models' "created" */
};

/* ---- the HTTP side (serve/http.c) ---- */
/* A daemon on l (its socket made already); quiesce stops taking
 * connections, stop closes those left. */
int hx_sv_http_start(struct hx_server *s, sv_listener *l, hx_err *err);
void hx_sv_http_quiesce(sv_listener *l);
void hx_sv_http_stop(sv_listener *l);
/* A request as the handlers see it. */
typedef struct sv_req {
    hx_server *srv;
    sv_listener *lis;
    struct MHD_Connection *conn;
    const char *method, *url;
    char *body;               /* NUL-terminated, or NULL */
    size_t body_len;
    sv_job **job;             /* where hx_sv_submit keeps the request's job */
} sv_req;
/* The error object (caller frees). */
cJSON *hx_sv_error_json(int status, const char *param, const char *code, const char *msg);
/* An error in OpenAI's shape: {"error": {"message", "type", "param",
 * "code"}}; type from the status. Queues it. */
enum MHD_Result hx_sv_error(struct MHD_Connection *c, int status, const char *param,
                         const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* A JSON response (takes j; NULL: out of memory). */
enum MHD_Result hx_sv_json(struct MHD_Connection *c, int status, cJSON *j);
/* Queues a response of bytes copied, with the headers every response
 * carries. */
enum MHD_Result hx_sv_bytes(struct MHD_Connection *c, int status, const char *type,
                         const void *data, size_t n);
/* Adds the headers every response carries (no caching, no sniffing). */
void hx_sv_common_headers(struct MHD_Response *r);

/* ---- the surfaces: each returns MHD_YES when it queued a response or
 * suspended the connection for a job ---- */
/* serve/openai.c: GET /v1/models, POST /v1/chat/completions */
enum MHD_Result hx_sv_models(sv_req *r);
enum MHD_Result hx_sv_chat_completions(sv_req *r);
void hx_sv_chat_run(sv_slot *slot, sv_job *j);
/* serve/assist.c: the assistant, consent, memory and audit */
enum MHD_Result hx_sv_ask(sv_req *r);
void hx_sv_ask_run(sv_slot *slot, sv_job *j);
enum MHD_Result hx_sv_consent_answer(sv_req *r, const char *id);
enum MHD_Result hx_sv_memory(sv_req *r, const char *id);
enum MHD_Result hx_sv_audit(sv_req *r);
/* Answers every waiting question no (the server stops). */
void hx_sv_consent_stop(hx_server *srv);
/* serve/page.c: the page's files, built into the binary */
enum MHD_Result hx_sv_page(sv_req *r);
/* A job of kind for r's connection doing work (taken: freed with
 * free_work, also on failure), queued, the connection suspended until it
 * answers; or an error queued (503 when the queue is full). prompt (or
 * NULL) is its prompt's start, for the slot whose cache holds most. */
enum MHD_Result hx_sv_submit(sv_req *r, int kind, void *work, void (*free_work)(void *),
                          const char *prompt);

/* ---- request bodies (serve/body.c): the parsing the fuzz target
 * exercises ---- */
/* Parses body as a JSON object (at most depth levels of nesting); NULL
 * with why when it is not one. */
cJSON *hx_sv_parse_object(const char *body, size_t n, char *why, size_t why_n);
/* A chat completion request, validated and rendered: what the job
 * runs. */
typedef struct sv_chat_req {
    cJSON *messages;          /* the template's shape */
    cJSON *tools;             /* the OpenAI tool list, or NULL */
    hx_tool_spec *specs;      /* names and schemas, owned */
    int n_specs;
    char *schema;             /* response_format's JSON Schema, or NULL */
    int choice;               /* HX_CHOICE_* */
    int stream, include_usage;
    int max_tokens;           /* 0: until the context is full */
    hx_sampler_params sp;
    char *stops[4];
    int n_stops;
    char *prompt;             /* rendered */
    hx_tpl_marks marks;
    char id[48];
    int64_t created;
} sv_chat_req;
/* Reads a /v1/chat/completions body into *q for prompt style family:
 * HX_OK, or an error whose message says what is wrong and *param (static
 * or pointing into param_buf) names the field. */
int hx_sv_chat_parse(const char *body, size_t n, int family, sv_chat_req *q, char *param_buf,
                  size_t param_n, const char **param, hx_err *err);
void hx_sv_chat_req_free(sv_chat_req *q);

#endif /* HX_SERVE_INT_H */
