/* serve_test.h: shared by the serve tests and its load benchmark: a
 * `hearth serve` started in a copy of the fixture world (its UNIX socket,
 * a loopback port, its token), and a small HTTP/1.1 client that sends a
 * request as bytes and reads the whole response. */
#ifndef HX_TEST_SERVE_H
#define HX_TEST_SERVE_H

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct sv_server {
    pid_t pid;
    char dir[64];     /* everything of this run: home, run/, log */
    char sock[128];   /* the UNIX socket */
    char log[128];    /* its stderr */
    char token[80];
    int port;
} sv_server;

/* The hearth binary under test ($HEARTH_BUILD/hearth), or NULL. */
static const char *sv_hearth(void)
{
    static char path[4096];
    const char *b = getenv("HEARTH_BUILD");
    char rel[400];
    snprintf(rel, sizeof rel, "%s/hearth", b && *b ? b : "build");
    return realpath(rel, path) && !access(path, X_OK) ? path : NULL;
}

__attribute__((unused)) static int sv_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
__attribute__((unused)) static int sv_sh(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return system(cmd);
}

/* Reads the whole log into buf (n bytes); "" when none. */
static const char *sv_log(const sv_server *s, char *buf, size_t n)
{
    FILE *f = fopen(s->log, "r");
    size_t k = f ? fread(buf, 1, n - 1, f) : 0;
    if (f) fclose(f);
    buf[k] = 0;
    return buf;
}

/* A fresh world in a temporary folder (the fixture's config, calendar and
 * mail), with the folder the socket goes in (0700). */
__attribute__((unused)) static int sv_world(sv_server *s)
{
    snprintf(s->dir, sizeof s->dir, "/tmp/hx_serve_XXXXXX");
    if (!mkdtemp(s->dir)) return 0;
    snprintf(s->sock, sizeof s->sock, "%s/run/hearth.sock", s->dir);
    snprintf(s->log, sizeof s->log, "%s/serve.log", s->dir);
    return sv_sh("mkdir -p -m 700 '%s/run' && mkdir -p '%s/home/config/files' && "
                 "cp -r tests/fixtures/world/. '%s/home/config/'", s->dir, s->dir, s->dir) == 0;
}

/* Starts `hearth serve --socket S --listen 127.0.0.1:0 ARGS...` in s's
 * world and waits (up to 60 s) until it says where it listens. 1 on
 * success; 0 with the log's end printed. */
__attribute__((unused)) static int sv_start(sv_server *s, const char *const *args)
{
    const char *h = sv_hearth();
    char home[128], line[8192];
    if (!h) return 0;
    snprintf(home, sizeof home, "%s/home", s->dir);
    fflush(stdout);
    s->pid = fork();
    if (s->pid == 0) {
        const char *argv[48] = {h, "serve", "--socket", s->sock, "--listen", "127.0.0.1:0"};
        int n = 6;
        for (int i = 0; args && args[i] && n < 46; i++) argv[n++] = args[i];
        argv[n] = NULL;
        setenv("HEARTH_HOME", home, 1);
        setenv("HEARTH_NOW", "2026-12-01T09:00:00+01:00", 1);
        setenv("HEARTH_LOG", "debug", 1);
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* never outlives the test */
        if (!freopen(s->log, "w", stderr) || !freopen("/dev/null", "r", stdin) ||
            !freopen("/dev/null", "w", stdout))
            _exit(127);
        execv(h, (char *const *)argv);
        _exit(127);
    }
    for (int i = 0; i < 600; i++) {
        const char *p = strstr(sv_log(s, line, sizeof line), "http://127.0.0.1:");
        if (p) {
            s->port = atoi(p + 17);
            char tok[160];
            snprintf(tok, sizeof tok, "%s/home/config/serve-token", s->dir);
            FILE *f = fopen(tok, "r");
            if (!f || !fgets(s->token, sizeof s->token, f)) s->token[0] = 0;
            if (f) fclose(f);
            s->token[strcspn(s->token, "\n")] = 0;
            return s->port > 0;
        }
        int st;
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) break;
        struct timespec t = {0, 100 * 1000 * 1000};
        nanosleep(&t, NULL);
    }
    printf("# hearth serve did not start:\n%s\n", line);
    return 0;
}

/* SIGTERM, then its exit status (or -1). */
__attribute__((unused)) static int sv_stop(sv_server *s)
{
    int st = -1;
    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        if (waitpid(s->pid, &st, 0) != s->pid) st = -1;
    }
    s->pid = 0;
    return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

__attribute__((unused)) static void sv_cleanup(sv_server *s)
{
    if (s->pid > 0) sv_stop(s);
    if (s->dir[0]) sv_sh("rm -rf '%s'", s->dir);
    s->dir[0] = 0;
}

/* ---- the client ---- */
__attribute__((unused)) static int sv_connect_unix(const char *path)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a)) close(fd), fd = -1;
    return fd;
}

__attribute__((unused)) static int sv_connect_tcp(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a)) close(fd), fd = -1;
    return fd;
}

typedef struct sv_resp {
    int status;
    char head[4096];
    char *body;       /* de-chunked, NUL-terminated (caller frees) */
    size_t body_len;
    int closed_early; /* the server closed without a status line */
} sv_resp;

__attribute__((unused)) static int sv_send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) return -1;
        p += w, n -= (size_t)w;
    }
    return 0;
}

/* Reads until the server closes (or timeout_ms passes). */
__attribute__((unused)) static char *sv_read_all(int fd, size_t *n, int timeout_ms)
{
    size_t cap = 1 << 16, len = 0;
    char *b = malloc(cap);
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, timeout_ms) <= 0) break;
        if (len + 4096 > cap) b = realloc(b, cap *= 2);
        ssize_t r = recv(fd, b + len, cap - len - 1, 0);
        if (r <= 0) break;
        len += (size_t)r;
    }
    b[len] = 0;
    *n = len;
    return b;
}

__attribute__((unused)) static void sv_dechunk(sv_resp *r, const char *p, size_t n)
{
    r->body = malloc(n + 1);
    r->body_len = 0;
    const char *end = p + n;
    while (p < end) {
        char *e;
        unsigned long k = strtoul(p, &e, 16);
        const char *data = strstr(e, "\r\n");
        if (!data || !k) break;
        data += 2;
        if (data + k > end) k = (unsigned long)(end - data);
        memcpy(r->body + r->body_len, data, k);
        r->body_len += k;
        p = data + k + 2;
    }
    r->body[r->body_len] = 0;
}

/* Parses a raw response into r. */
__attribute__((unused)) static void sv_parse(sv_resp *r, const char *raw, size_t n)
{
    memset(r, 0, sizeof *r);
    const char *sep = strstr(raw, "\r\n\r\n");
    if (strncmp(raw, "HTTP/1.", 7) || !sep) {
        r->closed_early = 1;
        r->body = calloc(1, 1);
        return;
    }
    r->status = atoi(raw + 9);
    size_t hl = (size_t)(sep - raw);
    snprintf(r->head, sizeof r->head, "%.*s", (int)(hl < sizeof r->head - 1 ? hl : sizeof r->head - 1), raw);
    const char *body = sep + 4;
    if (strcasestr(r->head, "transfer-encoding: chunked")) {
        sv_dechunk(r, body, n - (size_t)(body - raw));
    } else {
        r->body_len = n - (size_t)(body - raw);
        r->body = malloc(r->body_len + 1);
        memcpy(r->body, body, r->body_len);
        r->body[r->body_len] = 0;
    }
}

/* Sends raw on a new connection (fd from connect) and reads the response. */
__attribute__((unused)) static void sv_raw(int fd, const char *raw, size_t n, sv_resp *r, int timeout_ms)
{
    size_t len = 0;
    char *got = NULL;
    if (fd >= 0 && !sv_send_all(fd, raw, n)) got = sv_read_all(fd, &len, timeout_ms);
    sv_parse(r, got ? got : "", len);
    free(got);
    if (fd >= 0) close(fd);
}

/* A request: method, path, extra header lines ("Name: value\r\n"...), a
 * JSON body (or NULL); Host is localhost unless extra names one. */
__attribute__((unused)) static void sv_request(int fd, const char *method, const char *path, const char *extra,
                       const char *body, sv_resp *r)
{
    size_t bl = body ? strlen(body) : 0, cap = bl + 4096;
    char *raw = malloc(cap);
    int n = snprintf(raw, cap, "%s %s HTTP/1.1\r\n%s%sConnection: close\r\n", method, path,
                     extra && strcasestr(extra, "Host:") ? "" : "Host: localhost\r\n",
                     extra ? extra : "");
    if (body)
        n += snprintf(raw + n, cap - (size_t)n,
                      "Content-Type: application/json\r\nContent-Length: %zu\r\n", bl);
    n += snprintf(raw + n, cap - (size_t)n, "\r\n");
    if (body) memcpy(raw + n, body, bl);
    sv_raw(fd, raw, (size_t)n + bl, r, 120000);
    free(raw);
}

#endif /* HX_TEST_SERVE_H */
