/* http.c: the HTTP side: libmicrohttpd daemons on the listeners, the
 * checks every request passes (Host, Origin, token, method, type, size),
 * request bodies, routing, and the error shape every client reads. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <unistd.h>

#include "serve/serve_int.h"

/* One request's state between MHD's calls (its con_cls). */
typedef struct rq {
    hx_buf body;
    int too_big;
    double t0;
    int route;
    const char *id;  /* the route's id (into the url, which MHD keeps) */
    sv_job *job;     /* set once a job answers it */
} rq;

enum { R_PAGE, R_MODELS, R_CHAT, R_ASK, R_CONSENT, R_MEMORY, R_AUDIT };
typedef struct route {
    const char *path;
    int prefix;          /* path is a prefix followed by an id */
    int id;
    const char *methods; /* allowed, space-separated */
} route;
static const route routes[] = {
    {"/v1/models", 0, R_MODELS, "GET"},
    {"/v1/chat/completions", 0, R_CHAT, "POST"},
    {"/v1/hearth/ask", 0, R_ASK, "POST"},
    {"/v1/hearth/consent/", 1, R_CONSENT, "POST"},
    {"/v1/hearth/memory", 0, R_MEMORY, "GET"},
    {"/v1/hearth/memory/", 1, R_MEMORY, "GET DELETE"},
    {"/v1/hearth/audit", 0, R_AUDIT, "GET"},
};

/* ---- responses ---- */
void hx_sv_common_headers(struct MHD_Response *r)
{
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
    MHD_add_response_header(r, "Cross-Origin-Resource-Policy", "same-origin");
}

static enum MHD_Result queue(struct MHD_Connection *c, int status, struct MHD_Response *r)
{
    if (!r) return MHD_NO;
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ok;
}

enum MHD_Result hx_sv_bytes(struct MHD_Connection *c, int status, const char *type,
                         const void *data, size_t n)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(n, (void *)(n ? data : ""), MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    hx_sv_common_headers(r);
    if (status == MHD_HTTP_UNAUTHORIZED)
        MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    if (!strcmp(type, "application/json"))
        MHD_add_response_header(r, "Content-Security-Policy", "default-src 'none'");
    return queue(c, status, r);
}

enum MHD_Result hx_sv_json(struct MHD_Connection *c, int status, cJSON *j)
{
    char *s = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    if (!s) return hx_sv_bytes(c, 500, "application/json", "{\"error\":{\"message\":\"out of memory\","
                            "\"type\":\"server_error\",\"param\":null,\"code\":null}}", 85);
    enum MHD_Result ok = hx_sv_bytes(c, status, "application/json", s, strlen(s));
    cJSON_free(s);
    return ok;
}

/* OpenAI's error types by status. */
static const char *error_type(int status)
{
    switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 503: return "server_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
    }
}

cJSON *hx_sv_error_json(int status, const char *param, const char *code, const char *msg)
{
    cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(e, "message", msg);
    cJSON_AddStringToObject(e, "type", error_type(status));
    cJSON_AddItemToObject(e, "param", param ? cJSON_CreateString(param) : cJSON_CreateNull());
    cJSON_AddItemToObject(e, "code", code ? cJSON_CreateString(code) : cJSON_CreateNull());
    return o;
}

enum MHD_Result hx_sv_error(struct MHD_Connection *c, int status, const char *param,
                         const char *code, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return hx_sv_json(c, status, hx_sv_error_json(status, param, code, msg));
}

/* ---- the checks ---- */
static const char *header(struct MHD_Connection *c, const char *name)
{
    return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

static int host_ok(const sv_listener *l, const char *host)
{
    for (int i = 0; host && i < l->n_hosts; i++)
        if (!strcasecmp(host, l->hosts[i])) return 1;
    return 0;
}

/* DNS rebinding and cross-site requests: on TCP the Host must name this
 * listener and an Origin must be its own page's; on the UNIX socket no
 * browser speaks directly, so a request with an Origin came through
 * something else and is refused. 0, or the refusal queued. */
static int site_refused(const sv_listener *l, struct MHD_Connection *c, int api,
                        enum MHD_Result *res)
{
    const char *host = header(c, MHD_HTTP_HEADER_HOST);
    const char *origin = header(c, "Origin");
    const char *site = header(c, "Sec-Fetch-Site");
    char own[80];
    if (l->tcp && !host_ok(l, host))
        return *res = hx_sv_error(c, 403, NULL, "foreign_host", "Host '%.60s' is not this server "
                               "(%s): refused (DNS rebinding)", host ? host : "", l->hosts[0]), 1;
    snprintf(own, sizeof own, "http://%s", host ? host : "");
    if (origin && (!l->tcp || strcasecmp(origin, own)))
        return *res = hx_sv_error(c, 403, NULL, "foreign_origin", "Origin '%.60s' is not this "
                               "server's page: cross-site requests are refused", origin), 1;
    if (api && site && strcmp(site, "same-origin") && strcmp(site, "none"))
        return *res = hx_sv_error(c, 403, NULL, "foreign_origin", "a %.20s request: cross-site "
                               "requests are refused", site), 1;
    return 0;
}

/* The TCP listener wants the bearer token on the API. */
static int token_refused(const hx_server *s, const sv_listener *l, struct MHD_Connection *c,
                         enum MHD_Result *res)
{
    if (!l->tcp) return 0;
    const char *a = header(c, MHD_HTTP_HEADER_AUTHORIZATION);
    if (a && !strncasecmp(a, "Bearer ", 7) && hx_sv_token_equal(s->token, a + 7, strlen(a + 7)))
        return 0;
    *res = hx_sv_error(c, 401, NULL, "invalid_api_key", "%s: give 'Authorization: Bearer TOKEN' "
                    "with the token in %s", a ? "wrong token" : "no token", s->token_path);
    return 1;
}

static int method_in(const char *method, const char *list)
{
    size_t n = strlen(method);
    for (const char *p = list; *p;) {
        size_t k = strcspn(p, " ");
        if (k == n && !strncmp(p, method, n)) return 1;
        p += k + (p[k] == ' ');
    }
    return 0;
}

/* The route of url, or -1 (404 queued, or 405 for a known path). */
static int find_route(struct MHD_Connection *c, const char *url, const char *method,
                      const char **id, enum MHD_Result *res)
{
    if (strncmp(url, "/v1/", 4)) {
        if (!strcmp(method, "GET") || !strcmp(method, "HEAD")) return R_PAGE;
        return *res = hx_sv_error(c, 405, NULL, NULL, "%s %.100s: the page takes GET", method, url), -1;
    }
    for (size_t i = 0; i < sizeof routes / sizeof *routes; i++) {
        const route *r = &routes[i];
        size_t n = strlen(r->path);
        if (r->prefix ? strncmp(url, r->path, n) || !url[n] || strchr(url + n, '/')
                      : strcmp(url, r->path))
            continue;
        *id = r->prefix ? url + n : NULL;
        if (method_in(!strcmp(method, "HEAD") ? "GET" : method, r->methods)) return r->id;
        return *res = hx_sv_error(c, 405, NULL, NULL, "%s %.100s: use %s", method, url, r->methods), -1;
    }
    return *res = hx_sv_error(c, 404, NULL, "unknown_url", "no such endpoint: %.100s %.100s", method,
                           url), -1;
}

/* A body must be JSON, and small enough (a declared length is checked
 * before any of it is read). */
static int body_refused(const hx_server *s, struct MHD_Connection *c, const char *method,
                        enum MHD_Result *res)
{
    if (strcmp(method, "POST")) return 0;
    const char *type = header(c, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (!type || strncasecmp(type, "application/json", 16) || (type[16] && type[16] != ';'))
        return *res = hx_sv_error(c, 415, NULL, "unsupported_media_type", "the body must be "
                               "application/json, not '%.60s'", type ? type : "(none)"), 1;
    const char *len = header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (len && strtoull(len, NULL, 10) > s->p.max_body)
        return *res = hx_sv_error(c, 413, NULL, "body_too_large", "a body of %.20s bytes: at most "
                               "%zu", len, s->p.max_body), 1;
    return 0;
}

/* Everything decided from the headers alone: 0 and the route, or the
 * refusal queued. */
static int check_headers(sv_listener *l, struct MHD_Connection *c, const char *url,
                         const char *method, rq *q, enum MHD_Result *res)
{
    int api = !strncmp(url, "/v1/", 4);
    if (site_refused(l, c, api, res)) return 1;
    if (api && token_refused(l->srv, l, c, res)) return 1;
    if ((q->route = find_route(c, url, method, &q->id, res)) < 0) return 1;
    return body_refused(l->srv, c, method, res);
}

/* ---- a request's body ---- */
static enum MHD_Result take_body(hx_server *s, rq *q, const char *data, size_t *n)
{
    if (hx_time_mono() - q->t0 > s->p.body_timeout_s) return MHD_NO; /* a slow sender */
    if (!q->too_big && q->body.len + *n <= s->p.max_body) hx_buf_append(&q->body, data, *n);
    else q->too_big = 1, hx_buf_free(&q->body);
    *n = 0;
    return MHD_YES;
}

static enum MHD_Result dispatch(sv_listener *l, struct MHD_Connection *c, const char *url,
                                const char *method, rq *q)
{
    sv_req r = {l->srv, l, c, method, url, q->body.data, q->body.len, &q->job};
    if (q->too_big)
        return hx_sv_error(c, 413, NULL, "body_too_large", "the body is larger than %zu bytes",
                        l->srv->p.max_body);
    if (q->body.oom) return hx_sv_error(c, 500, NULL, NULL, "out of memory");
    switch (q->route) {
    case R_MODELS: return hx_sv_models(&r);
    case R_CHAT: return hx_sv_chat_completions(&r);
    case R_ASK: return hx_sv_ask(&r);
    case R_CONSENT: return hx_sv_consent_answer(&r, q->id);
    case R_MEMORY: return hx_sv_memory(&r, q->id);
    case R_AUDIT: return hx_sv_audit(&r);
    default: return hx_sv_page(&r);
    }
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload, size_t *upload_n, void **con_cls)
{
    (void)version;
    sv_listener *l = cls;
    rq *q = *con_cls;
    enum MHD_Result res = MHD_YES;
    if (!q) {
        if (!(q = hx_calloc(1, sizeof *q))) return MHD_NO;
        hx_buf_init(&q->body);
        q->t0 = hx_time_mono();
        *con_cls = q;
        if (check_headers(l, c, url, method, q, &res)) q->route = -1;
        return res;
    }
    if (q->job) return hx_sv_job_queue(q->job, c); /* resumed: the job answered */
    if (*upload_n) return take_body(l->srv, q, upload, upload_n);
    if (q->route < 0) return MHD_YES; /* refused: MHD sends the refusal */
    return dispatch(l, c, url, method, q);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    rq *q = *con_cls;
    if (!q) return;
    if (q->job) {
        pthread_mutex_lock(&q->job->mu);
        q->job->gone = 1;
        q->job->conn = NULL;
        q->job->fd = -1;
        pthread_mutex_unlock(&q->job->mu);
        hx_sv_job_unref(q->job);
    }
    hx_buf_free(&q->body);
    free(q);
    *con_cls = NULL;
}

enum MHD_Result hx_sv_submit(sv_req *r, int kind, void *work, void (*free_work)(void *),
                          const char *prompt)
{
    sv_job *j = hx_sv_job_new(kind, r->conn);
    if (!j) {
        free_work(work);
        return hx_sv_error(r->conn, 500, NULL, NULL, "out of memory");
    }
    j->work = work;
    j->free_work = free_work;
    snprintf(j->prompt_head, sizeof j->prompt_head, "%s", prompt ? prompt : "");
    pthread_mutex_lock(&j->mu);
    j->refs++; /* the queue's */
    int rc = hx_sv_sched_submit(r->srv->sched, j);
    if (rc) {
        j->refs--;
        pthread_mutex_unlock(&j->mu);
        hx_sv_job_unref(j);
        return rc == HX_ERR_FULL
                   ? hx_sv_error(r->conn, 503, NULL, "overloaded", "%d requests are waiting "
                              "already: try again later", r->srv->p.max_queue)
                   : hx_sv_error(r->conn, 503, NULL, "shutting_down", "the server is stopping");
    }
    *r->job = j; /* the request's reference, dropped when it completes */
    j->suspended = 1;
    MHD_suspend_connection(r->conn);
    pthread_mutex_unlock(&j->mu);
    return MHD_YES;
}

/* ---- the daemons ---- */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    msg[strcspn(msg, "\n")] = 0;
    hx_log_debug("serve: http: %s", msg);
}

/* As many connections as asked, within the open-file limit (raised to
 * its hard limit first), with room for the model, tools and logs. */
static unsigned connection_limit(unsigned want)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl)) return 256;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    rlim_t room = rl.rlim_cur > 192 ? rl.rlim_cur - 128 : 64;
    return want < room ? want : (unsigned)room;
}

int hx_sv_http_start(hx_server *s, sv_listener *l, hx_err *err)
{
    unsigned limit = connection_limit(s->p.max_connections);
    l->srv = s;
    l->mhd = MHD_start_daemon(
        MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG, 0, NULL,
        NULL, on_request, l, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
        MHD_OPTION_LISTEN_SOCKET, (MHD_socket)l->fd, MHD_OPTION_THREAD_POOL_SIZE, 2u,
        MHD_OPTION_CONNECTION_LIMIT, limit, MHD_OPTION_CONNECTION_TIMEOUT,
        s->p.idle_timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)64 * 1024,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, l, MHD_OPTION_STRICT_FOR_CLIENT, 1,
        MHD_OPTION_END);
    if (!l->mhd)
        return hx_err_set(err, HX_ERR_IO, "libmicrohttpd could not start on %s",
                          l->tcp ? l->hosts[0] : "the UNIX socket");
    return HX_OK;
}

/* Stops taking connections (the listening socket is closed here). */
void hx_sv_http_quiesce(sv_listener *l)
{
    if (!l->mhd) return;
    MHD_socket fd = MHD_quiesce_daemon(l->mhd);
    if (fd != MHD_INVALID_SOCKET) close(fd);
    l->fd = -1;
}

void hx_sv_http_stop(sv_listener *l)
{
    if (l->mhd) MHD_stop_daemon(l->mhd);
    l->mhd = NULL;
}
