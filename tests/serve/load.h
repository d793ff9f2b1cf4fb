/* load.h: a load on hearth serve's loopback listener, shared by the test
 * (tests/serve/test_load.c, bounded) and the benchmark (bench/serve_load.c):
 * a number of concurrent connections driven by one epoll loop, most of
 * them asking GET /v1/models again and again over keep-alive, the others
 * bad clients in turn: malformed JSON, a body too large, no token, a wrong
 * token, a foreign Host, a foreign Origin, a sender that stops half-way.
 * Each reply is checked against the status that client must get. */
#ifndef HX_TEST_SERVE_LOAD_H
#define HX_TEST_SERVE_LOAD_H

#include <fcntl.h>
#include <sys/epoll.h>

#include "serve_test.h"

enum { LD_MODELS, LD_MALFORMED, LD_OVERSIZE, LD_NO_TOKEN, LD_WRONG_TOKEN, LD_HOST, LD_ORIGIN,
       LD_SLOW, LD_KINDS };
static const char *const ld_kind_names[LD_KINDS] = {
    "GET /v1/models", "malformed JSON", "body too large", "no token", "wrong token",
    "foreign Host", "foreign Origin", "slow sender"};
static const int ld_expect[LD_KINDS] = {200, 400, 413, 401, 401, 403, 403, 0 /* closed */};

typedef struct ld_params {
    int port;
    const char *token;
    int conns;        /* concurrent connections */
    double seconds;
    int bad_pct;      /* of the connections, bad clients */
} ld_params;

typedef struct ld_stats {
    long sent[LD_KINDS], as_expected[LD_KINDS], wrong[LD_KINDS];
    int wrong_status[LD_KINDS]; /* the last unexpected one, for the message */
    long connect_failed;
    double *lat_ms;   /* of each GET /v1/models */
    long n_lat, cap_lat;
    double seconds;
} ld_stats;

typedef struct ld_conn {
    int fd, kind;
    char out[1024];
    size_t out_len, out_sent;
    char in[8192];
    size_t in_len;
    double t0;
} ld_conn;

__attribute__((unused)) static double ld_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

__attribute__((unused)) static void ld_request(const ld_params *p, ld_conn *c)
{
    char host[64], auth[160];
    snprintf(host, sizeof host, "Host: 127.0.0.1:%d\r\n", p->port);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s\r\n", p->token);
    const char *body = "{\"messages\": [{\"role\": \"user\"";
    switch (c->kind) {
    case LD_MODELS: snprintf(c->out, sizeof c->out, "GET /v1/models HTTP/1.1\r\n%s%s\r\n", host, auth); break;
    case LD_MALFORMED:
        snprintf(c->out, sizeof c->out, "POST /v1/chat/completions HTTP/1.1\r\n%s%sContent-Type: "
                 "application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s", host,
                 auth, strlen(body), body);
        break;
    case LD_OVERSIZE:
        snprintf(c->out, sizeof c->out, "POST /v1/chat/completions HTTP/1.1\r\n%s%sContent-Type: "
                 "application/json\r\nContent-Length: 999999999\r\nConnection: close\r\n\r\n{", host, auth);
        break;
    case LD_NO_TOKEN: snprintf(c->out, sizeof c->out, "GET /v1/models HTTP/1.1\r\n%sConnection: close\r\n\r\n", host); break;
    case LD_WRONG_TOKEN:
        snprintf(c->out, sizeof c->out, "GET /v1/models HTTP/1.1\r\n%sAuthorization: Bearer %064d\r\n"
                 "Connection: close\r\n\r\n", host, 7);
        break;
    case LD_HOST:
        snprintf(c->out, sizeof c->out, "GET /v1/models HTTP/1.1\r\nHost: attacker.example:%d\r\n%s"
                 "Connection: close\r\n\r\n", p->port, auth);
        break;
    case LD_ORIGIN:
        snprintf(c->out, sizeof c->out, "GET /v1/models HTTP/1.1\r\n%s%sOrigin: http://attacker.example"
                 "\r\nConnection: close\r\n\r\n", host, auth);
        break;
    default: snprintf(c->out, sizeof c->out, "POST /v1/chat/completions HTTP/1.1\r\n%sContent-Le", host);
    }
    c->out_len = strlen(c->out);
    c->out_sent = c->in_len = 0;
}

__attribute__((unused)) static int ld_open(const ld_params *p, int ep, ld_conn *c, ld_stats *st)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p->port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0 || (connect(c->fd, (struct sockaddr *)&a, sizeof a) && errno != EINPROGRESS)) {
        if (c->fd >= 0) close(c->fd);
        c->fd = -1;
        st->connect_failed++;
        return -1;
    }
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ld_request(p, c);
    struct epoll_event e = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
    return epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &e);
}

__attribute__((unused)) static void ld_watch(int ep, ld_conn *c, int op);

__attribute__((unused)) static void ld_lat(ld_stats *st, double ms)
{
    if (st->n_lat == st->cap_lat) {
        st->cap_lat = st->cap_lat ? st->cap_lat * 2 : 4096;
        st->lat_ms = realloc(st->lat_ms, (size_t)st->cap_lat * sizeof *st->lat_ms);
    }
    st->lat_ms[st->n_lat++] = ms;
}

__attribute__((unused)) static void ld_verdict(ld_stats *st, int kind, int status)
{
    if (status == ld_expect[kind]) st->as_expected[kind]++;
    else st->wrong[kind]++, st->wrong_status[kind] = status;
}

/* A whole response in c->in: its status (0: not yet). */
__attribute__((unused)) static int ld_response(ld_conn *c)
{
    c->in[c->in_len < sizeof c->in ? c->in_len : sizeof c->in - 1] = 0;
    const char *end = strstr(c->in, "\r\n\r\n"), *cl = strcasestr(c->in, "\r\ncontent-length:");
    if (!end || !cl || cl > end) return 0;
    size_t need = (size_t)(end + 4 - c->in) + strtoul(cl + 17, NULL, 10);
    return c->in_len >= need ? atoi(c->in + 9) : 0;
}

__attribute__((unused)) static void ld_watch(int ep, ld_conn *c, int op)
{
    struct epoll_event e = {.events = EPOLLIN | (c->out_sent < c->out_len ? EPOLLOUT : 0),
                            .data.ptr = c};
    epoll_ctl(ep, op, c->fd, &e);
}

/* One connection's event; returns 1 when it should be reopened. */
__attribute__((unused)) static int ld_event(const ld_params *p, int ep, ld_conn *c, unsigned ev, double stop, ld_stats *st)
{
    if (ev & EPOLLOUT && c->out_sent < c->out_len) {
        if (!c->out_sent) st->sent[c->kind]++, c->t0 = ld_now();
        ssize_t w = send(c->fd, c->out + c->out_sent, c->out_len - c->out_sent, MSG_NOSIGNAL);
        if (w > 0) c->out_sent += (size_t)w;
        if (c->out_sent == c->out_len) ld_watch(ep, c, EPOLL_CTL_MOD); /* replies only */
    }
    if (!(ev & (EPOLLIN | EPOLLHUP | EPOLLERR))) return 0;
    ssize_t r = recv(c->fd, c->in + c->in_len, sizeof c->in - 1 - c->in_len, 0);
    if (r < 0 && errno == EAGAIN) return 0;
    if (r > 0) c->in_len += (size_t)r;
    int status = ld_response(c);
    if (r <= 0) { /* closed */
        if (c->kind == LD_SLOW) ld_verdict(st, c->kind, 0);
        else if (!status && c->out_sent) ld_verdict(st, c->kind, -1); /* closed, no answer */
        c->out_sent = c->out_len = 0;
        return 1;
    }
    if (!status) return 0;
    ld_verdict(st, c->kind, status);
    c->out_sent = c->out_len = 0;
    if (c->kind != LD_MODELS) return 1;
    ld_lat(st, (ld_now() - c->t0) * 1000);
    if (ld_now() >= stop) return 1;
    ld_request(p, c); /* keep-alive: the next one */
    ld_watch(ep, c, EPOLL_CTL_MOD);
    return 0;
}

/* Runs the load; 0, or -1 when epoll fails. Connections are reopened
 * until the time is up; then the answers still owed are waited for (at
 * most 30 s), and slow senders left as they are. */
__attribute__((unused)) static int ld_run(const ld_params *p, ld_stats *st)
{
    memset(st, 0, sizeof *st);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    ld_conn *cs = calloc((size_t)p->conns, sizeof *cs);
    if (ep < 0 || !cs) return -1;
    int n_bad = p->conns * p->bad_pct / 100;
    for (int i = 0; i < p->conns; i++) {
        cs[i].kind = i < n_bad ? 1 + i % (LD_KINDS - 1) : LD_MODELS;
        ld_open(p, ep, &cs[i], st);
    }
    double t0 = ld_now(), stop = t0 + p->seconds, hard = stop + 30;
    struct epoll_event evs[256];
    for (;;) {
        double now = ld_now();
        int owed = 0;
        for (int i = 0; i < p->conns && !owed; i++)
            owed = cs[i].fd >= 0 && cs[i].kind != LD_SLOW && cs[i].out_len > 0;
        if (now >= hard || (now >= stop && !owed)) break;
        int n = epoll_wait(ep, evs, 256, 100);
        for (int k = 0; k < n; k++) {
            ld_conn *c = evs[k].data.ptr;
            if (!ld_event(p, ep, c, evs[k].events, stop, st)) continue;
            epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
            close(c->fd);
            c->fd = -1;
            if (ld_now() < stop) ld_open(p, ep, c, st);
        }
    }
    st->seconds = ld_now() - t0;
    for (int i = 0; i < p->conns; i++)
        if (cs[i].fd >= 0) close(cs[i].fd);
    free(cs);
    close(ep);
    return 0;
}

__attribute__((unused)) static int ld_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The q-quantile (0..1) of the latencies, in ms. */
__attribute__((unused)) static double ld_quantile(ld_stats *st, double q)
{
    if (!st->n_lat) return 0;
    qsort(st->lat_ms, (size_t)st->n_lat, sizeof *st->lat_ms, ld_cmp);
    long i = (long)(q * (double)(st->n_lat - 1) + 0.5);
    return st->lat_ms[i];
}

/* VmRSS and VmHWM of pid, in MiB. */
__attribute__((unused)) static void ld_memory(pid_t pid, double *rss, double *peak)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    *rss = *peak = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (!strncmp(line, "VmRSS:", 6)) *rss = atof(line + 6) / 1024;
        if (!strncmp(line, "VmHWM:", 6)) *peak = atof(line + 6) / 1024;
    }
    if (f) fclose(f);
}

#endif /* HX_TEST_SERVE_LOAD_H */
