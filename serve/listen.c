/* listen.c: where `hearth serve` listens: a UNIX socket the user alone can
 * reach, loopback TCP only, and the TCP listener's bearer token. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "serve/serve_int.h"

#define BACKLOG 1024

int hx_sv_random_hex(char *out, size_t n_bytes)
{
    unsigned char b[64];
    if (n_bytes > sizeof b || getrandom(b, n_bytes, 0) != (ssize_t)n_bytes) return HX_ERR_IO;
    for (size_t i = 0; i < n_bytes; i++) snprintf(out + 2 * i, 3, "%02x", b[i]);
    return HX_OK;
}

/* ---- TCP: 127.0.0.1 or ::1, nothing else ---- */
static int parse_port(const char *s, int *port)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < 0 || v > 65535 || *s == '-' || *s == '+') return -1;
    *port = (int)v;
    return 0;
}

/* Splits "HOST:PORT" ("[::1]:PORT" with brackets; "PORT" alone: host "")
 * into host (n bytes) and *port. */
static int split_host_port(const char *spec, char *host, size_t n, int *port)
{
    const char *colon = strrchr(spec, ':');
    if (!colon) return snprintf(host, n, "%s", ""), parse_port(spec, port);
    size_t hl = (size_t)(colon - spec);
    if (hl >= 2 && spec[0] == '[' && spec[hl - 1] == ']') spec++, hl -= 2;
    if (hl >= n) return -1;
    memcpy(host, spec, hl);
    host[hl] = 0;
    return parse_port(colon + 1, port);
}

int hx_sv_parse_listen(const char *spec, struct sockaddr_storage *ss, socklen_t *len, hx_err *err)
{
    char host[64];
    int port;
    memset(ss, 0, sizeof *ss);
    if (split_host_port(spec, host, sizeof host, &port))
        return hx_err_set(err, HX_ERR_INVALID, "--listen %s: give 127.0.0.1:PORT, [::1]:PORT, "
                          "localhost:PORT or PORT", spec), -1;
    struct sockaddr_in *in = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
    if (!*host || !strcmp(host, "127.0.0.1") || !strcmp(host, "localhost")) {
        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)port);
        in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        *len = sizeof *in;
        return 0;
    }
    if (!strcmp(host, "::1")) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        in6->sin6_addr = in6addr_loopback;
        *len = sizeof *in6;
        return 0;
    }
    hx_err_set(err, HX_ERR_DENIED, "--listen %s: not 127.0.0.1 or ::1; hearth serve listens "
               "on this device's loopback only (other names are not resolved), never on "
               "the network", spec);
    return -1;
}

/* The Host values a browser or client sends for this listener. */
static void tcp_hosts(sv_listener *l, int family)
{
    snprintf(l->hosts[0], sizeof l->hosts[0], "%s:%d", family == AF_INET6 ? "[::1]" : "127.0.0.1",
             l->port);
    snprintf(l->hosts[1], sizeof l->hosts[1], "localhost:%d", l->port);
    l->n_hosts = 2;
}

static int fail_errno(hx_err *err, int fd, const char *what, const char *where)
{
    int e = errno;
    if (fd >= 0) close(fd);
    return hx_err_set(err, HX_ERR_IO, "%s %s: %s", what, where, strerror(e));
}

int hx_sv_listen_tcp(const char *spec, sv_listener *l, hx_err *err)
{
    struct sockaddr_storage ss;
    socklen_t len;
    if (hx_sv_parse_listen(spec, &ss, &len, err)) return err->rc;
    int one = 1, fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return fail_errno(err, fd, "socket for", spec);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ss.ss_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&ss, len) || listen(fd, BACKLOG))
        return fail_errno(err, fd, "listen on", spec);
    len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len)) return fail_errno(err, fd, "address of", spec);
    l->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                             : ((struct sockaddr_in *)&ss)->sin_port);
    l->fd = fd;
    l->tcp = 1;
    tcp_hosts(l, ss.ss_family);
    return HX_OK;
}

/* ---- the UNIX socket ---- */
/* The folder must be this user's alone: a folder, not a link, owned by
 * the user, closed to group and others. */
static int folder_private(const char *dir, hx_err *err)
{
    struct stat st;
    if (lstat(dir, &st)) return hx_err_set(err, HX_ERR_IO, "%s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return hx_err_set(err, HX_ERR_DENIED, "%s: not a folder (a link is not followed)", dir);
    if (st.st_uid != geteuid())
        return hx_err_set(err, HX_ERR_DENIED, "%s: belongs to another user", dir);
    if (st.st_mode & 077)
        return hx_err_set(err, HX_ERR_DENIED, "%s: group or others may enter it (mode %03o); "
                          "the socket's folder must be yours alone: chmod 700 it", dir,
                          (unsigned)(st.st_mode & 0777));
    return HX_OK;
}

/* The default path: $XDG_RUNTIME_DIR/hearth/hearth.sock, the folder made. */
static int default_path(char *buf, size_t n, hx_err *err)
{
    const char *rt = getenv("XDG_RUNTIME_DIR");
    if (!rt || rt[0] != '/')
        return hx_err_set(err, HX_ERR_NOTFOUND, "XDG_RUNTIME_DIR is not set (no login session?): "
                          "give the socket's path with --socket PATH");
    if ((size_t)snprintf(buf, n, "%s/hearth", rt) >= n)
        return hx_err_set(err, HX_ERR_RANGE, "XDG_RUNTIME_DIR is too long");
    if (mkdir(buf, 0700) && errno != EEXIST)
        return hx_err_set(err, HX_ERR_IO, "%s: %s", buf, strerror(errno));
    strncat(buf, "/hearth.sock", n - strlen(buf) - 1);
    return HX_OK;
}

/* What is at path: nothing (ok), or a stale socket of this user's
 * (removed); anything else is refused and left alone. */
static int clear_stale(const char *path, const struct sockaddr_un *sa, hx_err *err)
{
    struct stat st;
    if (lstat(path, &st)) return errno == ENOENT ? HX_OK : hx_err_set(err, HX_ERR_IO, "%s: %s",
                                                                    path, strerror(errno));
    if (!S_ISSOCK(st.st_mode))
        return hx_err_set(err, HX_ERR_DENIED, "%s exists and is not a socket; it is left alone: "
                          "move it away or give another --socket", path);
    if (st.st_uid != geteuid())
        return hx_err_set(err, HX_ERR_DENIED, "%s is another user's socket; left alone", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return fail_errno(err, fd, "socket for", path);
    int rc = connect(fd, (const struct sockaddr *)sa, sizeof *sa), e = errno;
    close(fd);
    if (!rc)
        return hx_err_set(err, HX_ERR_STATE, "%s: another server listens on it (is hearth "
                          "serve running already?)", path);
    if (e != ECONNREFUSED) return hx_err_set(err, HX_ERR_IO, "%s: %s", path, strerror(e));
    if (unlink(path)) return hx_err_set(err, HX_ERR_IO, "%s: %s", path, strerror(errno));
    return HX_OK;
}

/* Binds fd at sa as mode 0600 (the umask decides a socket file's mode;
 * no other thread runs yet) and listens. */
static int bind_private(int fd, const struct sockaddr_un *sa)
{
    mode_t old = umask(0177);
    int rc = bind(fd, (const struct sockaddr *)sa, sizeof *sa);
    umask(old);
    if (rc) return -1;
    if (chmod(sa->sun_path, 0600)) return -1;
    return listen(fd, BACKLOG);
}

int hx_sv_listen_unix(const char *path, sv_listener *l, char **path_out, ino_t *ino, hx_err *err)
{
    char buf[PATH_MAX], dir[PATH_MAX];
    int rc = path ? HX_OK : default_path(buf, sizeof buf, err);
    if (rc) return rc;
    if (!path) path = buf;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path)
        return hx_err_set(err, HX_ERR_RANGE, "%s: longer than a socket path may be (%zu bytes)",
                          path, sizeof sa.sun_path - 1);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    const char *slash = strrchr(path, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash == path ? 1 : slash - path) : 1,
             slash ? path : ".");
    if ((rc = folder_private(dir, err)) || (rc = clear_stale(path, &sa, err))) return rc;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return fail_errno(err, fd, "socket for", path);
    if (bind_private(fd, &sa)) return fail_errno(err, fd, "listen on", path);
    struct stat st;
    if (lstat(path, &st)) return fail_errno(err, fd, "stat", path);
    if (!(*path_out = hx_strdup(path))) {
        close(fd);
        return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    }
    *ino = st.st_ino;
    l->fd = fd;
    l->tcp = 0;
    return HX_OK;
}

void hx_sv_unlink_unix(const char *path, ino_t ino)
{
    struct stat st;
    if (path && !lstat(path, &st) && S_ISSOCK(st.st_mode) && st.st_ino == ino) unlink(path);
}

/* ---- the token ---- */
static int token_chars(const char *t)
{
    size_t n = strspn(t, "0123456789abcdefABCDEFGHIJKLMNOPQRSTUVWXYZghijklmnopqrstuvwxyz-._~");
    return n == strlen(t) && n >= 32 && n <= SV_TOKEN_HEX;
}

/* Reads the token from an open file that must be the user's alone. */
static int token_read(int fd, const char *path, char *token, size_t n, hx_err *err)
{
    struct stat st;
    char *s = NULL;
    size_t len;
    if (fstat(fd, &st)) return hx_err_set(err, HX_ERR_IO, "%s: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode) || st.st_uid != geteuid())
        return hx_err_set(err, HX_ERR_DENIED, "%s: not a file of yours", path);
    if (st.st_mode & 077)
        return hx_err_set(err, HX_ERR_DENIED, "%s: group or others may read it (mode %03o): "
                          "chmod 600 it, or remove it for a new token", path,
                          (unsigned)(st.st_mode & 0777));
    int rc = hx_read_fd(fd, path, 1024, &s, &len, err);
    if (rc) return rc;
    s[strcspn(s, "\r\n")] = 0;
    if (!token_chars(s) || strlen(s) >= n)
        rc = hx_err_set(err, HX_ERR_FORMAT, "%s: not a token (32 to 64 letters, digits or "
                        "-._~); remove it for a new one", path);
    else snprintf(token, n, "%s", s);
    free(s);
    return rc;
}

/* A new token file: 32 random bytes in hex, mode 0600, never through a
 * file or link planted at its name; -1 when one exists already. */
static int token_create(const char *path, char *token, size_t n, hx_err *err)
{
    char t[SV_TOKEN_HEX + 2];
    if (n <= SV_TOKEN_HEX || hx_sv_random_hex(t, SV_TOKEN_HEX / 2))
        return hx_err_set(err, HX_ERR_IO, "no random bytes for a token");
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return errno == EEXIST ? -1 : hx_err_set(err, HX_ERR_IO, "%s: %s", path,
                                                         strerror(errno));
    strcat(t, "\n");
    int ok = write(fd, t, strlen(t)) == (ssize_t)strlen(t) && !fsync(fd);
    close(fd);
    if (!ok) {
        unlink(path);
        return hx_err_set(err, HX_ERR_IO, "%s: cannot write the token", path);
    }
    t[SV_TOKEN_HEX] = 0;
    snprintf(token, n, "%s", t);
    return HX_OK;
}

int hx_sv_token_load(const char *path, char *token, size_t n, char **path_out, hx_err *err)
{
    char buf[PATH_MAX];
    if (!path) {
        if (hx_path_config(buf, sizeof buf - 16) < 0)
            return hx_err_set(err, HX_ERR_NOTFOUND, "no config folder (HOME is not set)");
        int rc = hx_mkdirs(buf, err);
        if (rc) return rc;
        strcat(buf, "/serve-token");
        path = buf;
    }
    if (!(*path_out = hx_strdup(path))) return hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    for (int tries = 0; tries < 2; tries++) {
        int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0) {
            int rc = token_read(fd, path, token, n, err);
            close(fd);
            return rc;
        }
        if (errno != ENOENT) return hx_err_set(err, HX_ERR_IO, "%s: %s", path, strerror(errno));
        int rc = token_create(path, token, n, err);
        if (rc >= 0) return rc; /* else another start made it: read it */
    }
    return hx_err_set(err, HX_ERR_IO, "%s: cannot read or create the token", path);
}

int hx_sv_token_equal(const char *token, const char *a, size_t n)
{
    size_t tn = strlen(token);
    unsigned char diff = (unsigned char)(tn != n);
    for (size_t i = 0; i < tn; i++) diff |= (unsigned char)(token[i] ^ (i < n ? a[i] : 0));
    return diff == 0;
}
