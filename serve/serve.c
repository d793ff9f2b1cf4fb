/* serve.c: a server's life: the listeners opened before Hearth confines
 * itself, then the slots and the HTTP daemons, then the stop in order
 * (nothing taken, questions answered no, generations ended, connections
 * closed, the socket removed). */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "serve/serve_int.h"

hx_serve_params hx_serve_default_params(void)
{
    hx_serve_params p = {
        .slots = 2,
        .max_queue = 64,
        .max_body = (size_t)4 << 20,
        .idle_timeout_s = 30,
        .body_timeout_s = 30,
        .consent_timeout_s = 300,
        .max_connections = 4096,
    };
    return p;
}

static int init_server(hx_server *s, const hx_serve_params *p)
{
    pthread_condattr_t ca;
    s->p = *p;
    s->lis[0].fd = s->lis[1].fd = -1;
    s->created = (int64_t)time(NULL);
    pthread_mutex_init(&s->mem_mu, NULL);
    pthread_mutex_init(&s->consent_mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the consent wait's clock */
    int rc = pthread_cond_init(&s->consent_cv, &ca);
    pthread_condattr_destroy(&ca);
    return rc ? HX_ERR_INTERNAL : HX_OK;
}

int hx_serve_listen(const hx_serve_params *p, hx_server **out, hx_err *err)
{
    hx_serve_params d = hx_serve_default_params();
    hx_server *s = hx_calloc(1, sizeof *s);
    *out = s;
    if (!s || init_server(s, p ? p : &d)) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    if (s->p.slots < 1 || s->p.slots > SV_MAX_SLOTS || s->p.max_queue < 1)
        return hx_err_set(err, HX_ERR_INVALID, "slots is 1 to 64 and the queue at least 1");
    int rc = HX_OK;
    const char *sock = s->p.socket_path;
    if (!sock || *sock)
        rc = hx_sv_listen_unix(sock, &s->lis[s->n_lis++], &s->socket_path, &s->socket_ino, err);
    if (!rc && s->p.listen) {
        rc = hx_sv_token_load(s->p.token_path, s->token, sizeof s->token, &s->token_path, err);
        if (!rc) rc = hx_sv_listen_tcp(s->p.listen, &s->lis[s->n_lis++], err);
    }
    if (!rc && !s->n_lis) rc = hx_err_set(err, HX_ERR_INVALID, "no UNIX socket and no --listen: "
                                          "nowhere to listen");
    return rc;
}

int hx_serve_start(hx_server *s, const hx_serve_deps *d, hx_err *err)
{
    s->d = *d;
    if (d->mem) {
        hx_memory_params mp = hx_memory_default_params();
        mp.path = hx_memory_path(d->mem);
        int rc = hx_memory_open(&mp, &s->mem_http, err);
        if (rc) return rc;
    }
    int rc = hx_sv_sched_new(s, s->p.slots, s->p.max_queue, &s->sched, err);
    for (int i = 0; !rc && i < s->n_lis; i++) rc = hx_sv_http_start(s, &s->lis[i], err);
    s->started = !rc;
    return rc;
}

void hx_serve_describe(const hx_server *s, hx_buf *out)
{
    for (int i = 0; i < s->n_lis; i++) {
        const sv_listener *l = &s->lis[i];
        if (!l->tcp) hx_buf_printf(out, "unix:%s\n", s->socket_path);
        else hx_buf_printf(out, "http://%s/ (the token is in %s)\n", l->hosts[0], s->token_path);
    }
}

int hx_serve_port(const hx_server *s)
{
    for (int i = 0; i < s->n_lis; i++)
        if (s->lis[i].tcp) return s->lis[i].port;
    return 0;
}

void hx_serve_free(hx_server *s)
{
    if (!s) return;
    for (int i = 0; i < s->n_lis; i++) hx_sv_http_quiesce(&s->lis[i]);
    hx_sv_consent_stop(s);
    hx_sv_sched_stop(s->sched); /* every job answered: no connection stays suspended */
    for (int i = 0; i < s->n_lis; i++) {
        hx_sv_http_stop(&s->lis[i]);
        if (s->lis[i].fd >= 0) close(s->lis[i].fd);
    }
    hx_sv_sched_free(s->sched); /* no request can reach it any more */
    hx_sv_unlink_unix(s->socket_path, s->socket_ino);
    hx_memory_close(s->mem_http);
    pthread_mutex_destroy(&s->mem_mu);
    pthread_mutex_destroy(&s->consent_mu);
    pthread_cond_destroy(&s->consent_cv);
    free(s->socket_path);
    free(s->token_path);
    free(s);
}
