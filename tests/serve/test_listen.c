/* test_listen.c: where hearth serve listens: loopback addresses only, the
 * UNIX socket's folder and mode, what it replaces at its path (a stale
 * socket of ours) and what it leaves alone, and the token file. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "serve/serve_int.h"
#include "test.h"

static char g_dir[64];

static const char *in_dir(const char *name)
{
    static char p[200];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    return p;
}

static void test_loopback_only(void)
{
    static const char *const ok[] = {"127.0.0.1:0", "localhost:8080", "[::1]:65535", "8080"};
    static const char *const refused[] = {"0.0.0.0:80", "192.168.1.2:80", "[::]:80",
                                          "example.com:80", "127.0.0.2:80", "10.0.0.1:443",
                                          "[::ffff:127.0.0.1]:80", "localhost.:80"};
    static const char *const malformed[] = {"127.0.0.1:99999", "127.0.0.1:-1", "127.0.0.1:",
                                            "", "127.0.0.1:80x", "[::1:80"};
    struct sockaddr_storage ss;
    socklen_t len;
    hx_err err = {0};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) EXPECT_EQ_INT(hx_sv_parse_listen(ok[i], &ss, &len, &err), 0);
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        err.rc = 0;
        EXPECT_EQ_INT(hx_sv_parse_listen(refused[i], &ss, &len, &err), -1);
        EXPECT_EQ_INT(err.rc, HX_ERR_DENIED);
        EXPECT(strstr(err.msg, "loopback") != NULL);
    }
    for (size_t i = 0; i < sizeof malformed / sizeof *malformed; i++)
        EXPECT_EQ_INT(hx_sv_parse_listen(malformed[i], &ss, &len, &err), -1);
    EXPECT_EQ_INT(hx_sv_parse_listen("[::1]:80", &ss, &len, &err), 0);
    EXPECT_EQ_INT(ss.ss_family, AF_INET6);
}

/* The TCP listener binds loopback and names the Host values it takes. */
static void test_tcp_listener(void)
{
    sv_listener l = {.fd = -1};
    hx_err err = {0};
    ASSERT(hx_sv_listen_tcp("127.0.0.1:0", &l, &err) == HX_OK);
    struct sockaddr_in a;
    socklen_t n = sizeof a;
    EXPECT(!getsockname(l.fd, (struct sockaddr *)&a, &n));
    EXPECT_EQ_INT(ntohl(a.sin_addr.s_addr), INADDR_LOOPBACK);
    EXPECT(l.port > 0);
    char want[32];
    snprintf(want, sizeof want, "127.0.0.1:%d", l.port);
    EXPECT_STR_EQ(l.hosts[0], want);
    snprintf(want, sizeof want, "localhost:%d", l.port);
    EXPECT_STR_EQ(l.hosts[1], want);
    close(l.fd);
    EXPECT(hx_sv_listen_tcp("0.0.0.0:0", &l, &err) == HX_ERR_DENIED);
}

static int mode_of(const char *p)
{
    struct stat st;
    return lstat(p, &st) ? -1 : (int)(st.st_mode & 07777);
}

/* The socket is 0600 in a 0700 folder; a stale one of ours is replaced;
 * one that is listening is not. */
static void test_unix_socket(void)
{
    sv_listener a = {.fd = -1}, b = {.fd = -1};
    char *path = NULL, *path2 = NULL;
    ino_t ino, ino2;
    hx_err err = {0};
    const char *sock = in_dir("s.sock");
    ASSERT(hx_sv_listen_unix(sock, &a, &path, &ino, &err) == HX_OK);
    EXPECT_EQ_INT(mode_of(sock), 0600);
    /* another server on the same path is refused while the first listens */
    EXPECT_EQ_INT(hx_sv_listen_unix(sock, &b, &path2, &ino2, &err), HX_ERR_STATE);
    EXPECT(strstr(err.msg, "listens") != NULL);
    close(a.fd); /* a crash: the socket file stays, nothing listens */
    EXPECT_EQ_INT(mode_of(sock) & 0777, 0600);
    ASSERT(hx_sv_listen_unix(sock, &b, &path2, &ino2, &err) == HX_OK);
    close(b.fd);
    hx_sv_unlink_unix(path2, ino2 + 1); /* another socket at the path: kept */
    EXPECT(mode_of(sock) >= 0);
    hx_sv_unlink_unix(path2, ino2);
    EXPECT_EQ_INT(mode_of(sock), -1);
    /* a file put there meanwhile is no socket: kept */
    FILE *f = fopen(sock, "w");
    ASSERT(f);
    fclose(f);
    struct stat st;
    ASSERT(!stat(sock, &st));
    hx_sv_unlink_unix(sock, st.st_ino);
    EXPECT(mode_of(sock) >= 0);
    unlink(sock);
    free(path);
    free(path2);
}

/* What is not a stale socket of ours stays where it is, untouched. */
static void test_unix_leaves_others_alone(void)
{
    sv_listener l = {.fd = -1};
    char *path = NULL;
    ino_t ino;
    hx_err err = {0};
    const char *file = in_dir("file.sock");
    FILE *f = fopen(file, "w");
    ASSERT(f);
    fputs("precious", f);
    fclose(f);
    EXPECT_EQ_INT(hx_sv_listen_unix(file, &l, &path, &ino, &err), HX_ERR_DENIED);
    EXPECT(strstr(err.msg, "not a socket") != NULL);
    char buf[16] = "";
    f = fopen(file, "r");
    ASSERT(f);
    EXPECT(fgets(buf, sizeof buf, f) != NULL);
    fclose(f);
    EXPECT_STR_EQ(buf, "precious");
    /* a link to it, too: never followed, never removed */
    const char *link = in_dir("link.sock");
    ASSERT(!symlink(file, link));
    EXPECT_EQ_INT(hx_sv_listen_unix(link, &l, &path, &ino, &err), HX_ERR_DENIED);
    struct stat st;
    EXPECT(!lstat(link, &st) && S_ISLNK(st.st_mode));
    /* a folder: refused too */
    const char *dir = in_dir("d.sock");
    ASSERT(!mkdir(dir, 0700));
    EXPECT_EQ_INT(hx_sv_listen_unix(dir, &l, &path, &ino, &err), HX_ERR_DENIED);
    EXPECT(!lstat(dir, &st) && S_ISDIR(st.st_mode));
}

/* The folder must be the user's alone. */
static void test_unix_folder(void)
{
    sv_listener l = {.fd = -1};
    char *path = NULL;
    ino_t ino;
    hx_err err = {0};
    const char *open_dir = in_dir("open");
    ASSERT(!mkdir(open_dir, 0755));
    char sock[256];
    snprintf(sock, sizeof sock, "%s/s.sock", open_dir);
    EXPECT_EQ_INT(hx_sv_listen_unix(sock, &l, &path, &ino, &err), HX_ERR_DENIED);
    EXPECT(strstr(err.msg, "chmod 700") != NULL);
    EXPECT_EQ_INT(mode_of(sock), -1);
    ASSERT(!chmod(open_dir, 0700)); /* control: the same folder, closed */
    EXPECT_EQ_INT(hx_sv_listen_unix(sock, &l, &path, &ino, &err), HX_OK);
    close(l.fd);
    hx_sv_unlink_unix(path, ino);
    free(path);
    /* the default folder under XDG_RUNTIME_DIR is made 0700 */
    setenv("XDG_RUNTIME_DIR", g_dir, 1);
    path = NULL;
    ASSERT(hx_sv_listen_unix(NULL, &l, &path, &ino, &err) == HX_OK);
    EXPECT_EQ_INT(mode_of(in_dir("hearth")), 0700);
    EXPECT_STR_EQ(path, in_dir("hearth/hearth.sock"));
    close(l.fd);
    hx_sv_unlink_unix(path, ino);
    free(path);
    unsetenv("XDG_RUNTIME_DIR");
    EXPECT_EQ_INT(hx_sv_listen_unix(NULL, &l, &path, &ino, &err), HX_ERR_NOTFOUND);
}

static void test_token_file(void)
{
    char tok[SV_TOKEN_HEX + 1], again[SV_TOKEN_HEX + 1], *path = NULL;
    hx_err err = {0};
    const char *file = in_dir("token");
    ASSERT(hx_sv_token_load(file, tok, sizeof tok, &path, &err) == HX_OK);
    EXPECT_EQ_INT(strlen(tok), SV_TOKEN_HEX);
    EXPECT_EQ_INT(strspn(tok, "0123456789abcdef"), SV_TOKEN_HEX);
    EXPECT_EQ_INT(mode_of(file), 0600);
    free(path);
    ASSERT(hx_sv_token_load(file, again, sizeof again, &path, &err) == HX_OK);
    EXPECT_STR_EQ(again, tok); /* kept from the first start */
    free(path);
    /* others may read it: refused, left as it is */
    ASSERT(!chmod(file, 0644));
    EXPECT_EQ_INT(hx_sv_token_load(file, again, sizeof again, &path, &err), HX_ERR_DENIED);
    EXPECT(strstr(err.msg, "chmod 600") != NULL);
    EXPECT_EQ_INT(mode_of(file), 0644);
    free(path);
    /* through a link: refused */
    ASSERT(!chmod(file, 0600));
    const char *link = in_dir("token.link");
    ASSERT(!symlink(file, link));
    EXPECT(hx_sv_token_load(link, again, sizeof again, &path, &err) != HX_OK);
    free(path);
    /* too short to be a token */
    const char *weak = in_dir("weak");
    int fd = open(weak, O_WRONLY | O_CREAT | O_EXCL, 0600);
    ASSERT(fd >= 0);
    EXPECT(write(fd, "1234\n", 5) == 5);
    close(fd);
    EXPECT_EQ_INT(hx_sv_token_load(weak, again, sizeof again, &path, &err), HX_ERR_FORMAT);
    free(path);
}

static void test_token_compare(void)
{
    const char *t = "0123456789abcdef0123456789abcdef";
    EXPECT(hx_sv_token_equal(t, t, strlen(t)));
    EXPECT(!hx_sv_token_equal(t, "0123456789abcdef0123456789abcdeF", 32));
    EXPECT(!hx_sv_token_equal(t, t, 31));                    /* a prefix */
    EXPECT(!hx_sv_token_equal(t, "0123456789abcdef0123456789abcdef0", 33)); /* longer */
    EXPECT(!hx_sv_token_equal(t, "", 0));
}

static void test_random_ids(void)
{
    char a[33], b[33];
    ASSERT(hx_sv_random_hex(a, 16) == HX_OK && hx_sv_random_hex(b, 16) == HX_OK);
    EXPECT_EQ_INT(strlen(a), 32);
    EXPECT(strcmp(a, b) != 0);
    /* not the pinned names of HEARTH_NOW: a consent id must not be guessed */
    setenv("HEARTH_NOW", "2026-12-01T09:00:00+01:00", 1);
    ASSERT(hx_sv_random_hex(a, 16) == HX_OK && hx_sv_random_hex(b, 16) == HX_OK);
    EXPECT(strcmp(a, b) != 0);
    unsetenv("HEARTH_NOW");
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/hx_listen_XXXXXX");
    if (!mkdtemp(g_dir)) return 1;
    RUN(test_loopback_only);
    RUN(test_tcp_listener);
    RUN(test_unix_socket);
    RUN(test_unix_leaves_others_alone);
    RUN(test_unix_folder);
    RUN(test_token_file);
    RUN(test_token_compare);
    RUN(test_random_ids);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd)) {}
    return test_summary();
}
