/* test_out.c: the output writer (base/out.c): new and regular files written
 * atomically, devices, FIFOs and descriptors written through, inputs and
 * planted links refused, temporaries removed on abort and on signals. */
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"
#include "test.h"

static char g_dir[64];

/* g_dir/name into buf (HX_PATH_MAX). */
static char *at(char *buf, const char *name)
{
    snprintf(buf, HX_PATH_MAX, "%s/%s", g_dir, name);
    return buf;
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f) fputs(text, f), fclose(f);
}

/* The file's text (static buffer), "" when unreadable. */
static const char *get(const char *path)
{
    static char buf[256];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = 0;
    if (f) fclose(f);
    return buf;
}

/* Names in dir holding ".tmp." (the writer's temporaries). */
static int count_tmp(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += strstr(e->d_name, ".tmp.") != NULL;
    if (d) closedir(d);
    return n;
}

static int write_text(const char *path, const char *const *inputs, const char *text)
{
    hx_err e = {0};
    return hx_out_write_file(path, inputs, text, strlen(text), 0666, &e);
}

static void test_new_file(void)
{
    char p[HX_PATH_MAX];
    hx_out o;
    hx_err e = {0};
    ASSERT(hx_out_open(&o, at(p, "new.txt"), NULL, 0666, &e) == HX_OK);
    EXPECT(access(p, F_OK) != 0); /* nothing at the path before commit */
    EXPECT_EQ_INT(count_tmp(g_dir), 1);
    EXPECT_EQ_INT(hx_out_write(&o, "hello", 5, &e), HX_OK);
    EXPECT_EQ_INT(hx_out_commit(&o, &e), HX_OK);
    EXPECT_STR_EQ(get(p), "hello");
    EXPECT_EQ_INT(count_tmp(g_dir), 0);
    mode_t um = umask(022);
    umask(um);
    struct stat st;
    EXPECT(stat(p, &st) == 0 && (st.st_mode & 0777) == (0666 & ~um));
    EXPECT_EQ_INT(hx_out_kind(p), HX_OUT_FILE);
}

static void test_replace_keeps_old_until_commit(void)
{
    char p[HX_PATH_MAX];
    struct stat before, after;
    hx_out o;
    hx_err e = {0};
    put(at(p, "old.txt"), "old");
    chmod(p, 0640);
    stat(p, &before);
    ASSERT(hx_out_open(&o, p, NULL, 0666, &e) == HX_OK);
    EXPECT_EQ_INT(hx_out_write(&o, "new", 3, &e), HX_OK);
    EXPECT_STR_EQ(get(p), "old");
    EXPECT_EQ_INT(hx_out_commit(&o, &e), HX_OK);
    EXPECT_STR_EQ(get(p), "new");
    ASSERT(stat(p, &after) == 0);
    EXPECT_EQ_INT(after.st_mode & 0777, 0640); /* the replaced file's mode */
    EXPECT(after.st_ino != before.st_ino);     /* renamed over, not rewritten */
    /* abort: the old file stays, no temporary is left */
    ASSERT(hx_out_open(&o, p, NULL, 0666, &e) == HX_OK);
    hx_out_write(&o, "lost", 4, &e);
    hx_out_abort(&o);
    EXPECT_STR_EQ(get(p), "new");
    EXPECT_EQ_INT(count_tmp(g_dir), 0);
}

static void test_input_is_refused(void)
{
    char in[HX_PATH_MAX], hard[HX_PATH_MAX], sym[HX_PATH_MAX], other[HX_PATH_MAX];
    hx_err e = {0};
    put(at(in, "in.gguf"), "model");
    const char *inputs[] = {in, NULL};
    EXPECT_EQ_INT(hx_out_write_file(in, inputs, "x", 1, 0666, &e), HX_ERR_INVALID);
    EXPECT(strstr(e.msg, "is the input") != NULL);
    link(in, at(hard, "hard.gguf")); /* another name of the same file */
    EXPECT_EQ_INT(write_text(hard, inputs, "x"), HX_ERR_INVALID);
    symlink("in.gguf", at(sym, "sym.gguf"));
    EXPECT_EQ_INT(write_text(sym, inputs, "x"), HX_ERR_INVALID);
    EXPECT_EQ_INT(hx_out_check(sym, inputs, &e), HX_ERR_INVALID);
    EXPECT_STR_EQ(get(in), "model");
    EXPECT_EQ_INT(count_tmp(g_dir), 0);
    /* control: another path with the same inputs is written */
    EXPECT_EQ_INT(write_text(at(other, "other.gguf"), inputs, "x"), HX_OK);
    EXPECT_STR_EQ(get(other), "x");
}

static void test_link_updates_its_file(void)
{
    char target[HX_PATH_MAX], link1[HX_PATH_MAX], link2[HX_PATH_MAX], to[256];
    char dangling[HX_PATH_MAX], made[HX_PATH_MAX];
    put(at(target, "target.txt"), "old");
    symlink("target.txt", at(link1, "link1"));
    symlink("link1", at(link2, "link2")); /* a chain of two */
    EXPECT_EQ_INT(write_text(link2, NULL, "new"), HX_OK);
    EXPECT_STR_EQ(get(target), "new");
    struct stat st;
    EXPECT(lstat(link1, &st) == 0 && S_ISLNK(st.st_mode));
    EXPECT(lstat(link2, &st) == 0 && S_ISLNK(st.st_mode));
    ssize_t n = readlink(link1, to, sizeof to - 1);
    EXPECT(n == 10 && !memcmp(to, "target.txt", 10));
    /* a link to a file not there yet: the file is made, the link kept */
    symlink("made.txt", at(dangling, "dangling"));
    EXPECT_EQ_INT(write_text(dangling, NULL, "made"), HX_OK);
    EXPECT_STR_EQ(get(at(made, "made.txt")), "made");
    EXPECT(lstat(dangling, &st) == 0 && S_ISLNK(st.st_mode));
    EXPECT_EQ_INT(count_tmp(g_dir), 0);
}

static void test_device_written_through(void)
{
    char dev[HX_PATH_MAX];
    struct stat st;
    if (mknod(at(dev, "null"), S_IFCHR | 0666, makedev(1, 3)))
        SKIP("mknod needs CAP_MKNOD (root)");
    static char big[1 << 20];
    hx_out o;
    hx_err e = {0};
    ASSERT(hx_out_open(&o, dev, NULL, 0666, &e) == HX_OK);
    EXPECT(o.tmp[0] == 0);
    EXPECT_EQ_INT(hx_out_write(&o, big, sizeof big, &e), HX_OK);
    EXPECT_EQ_INT(hx_out_commit(&o, &e), HX_OK);
    EXPECT(stat(dev, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3));
    EXPECT_EQ_INT(hx_out_kind(dev), HX_OUT_DEVICE);
    EXPECT_EQ_INT(count_tmp(g_dir), 0);
    unlink(dev);
}

static void test_fifo_written_through(void)
{
    char fifo[HX_PATH_MAX], buf[16] = {0};
    struct stat st;
    ASSERT(mkfifo(at(fifo, "fifo"), 0600) == 0);
    int rd = open(fifo, O_RDONLY | O_NONBLOCK); /* a reader, so the writer's open returns */
    ASSERT(rd >= 0);
    EXPECT_EQ_INT(write_text(fifo, NULL, "through"), HX_OK);
    EXPECT_EQ_INT(read(rd, buf, sizeof buf - 1), 7);
    EXPECT_STR_EQ(buf, "through");
    EXPECT(stat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));
    close(rd);
    unlink(fifo);
}

/* "-", /dev/stdout and /dev/fd/N write through the open descriptor. */
static void test_descriptors_written_through(void)
{
    int p[2];
    char name[64], buf[64] = {0};
    ASSERT(pipe(p) == 0);
    snprintf(name, sizeof name, "/dev/fd/%d", p[1]);
    EXPECT_EQ_INT(hx_out_kind(name), HX_OUT_DEVICE);
    EXPECT_EQ_INT(write_text(name, NULL, "fd "), HX_OK);
    fflush(stdout);
    int saved = dup(1);
    dup2(p[1], 1);
    int kind = hx_out_kind("-"), kind2 = hx_out_kind("/dev/stdout");
    int r1 = write_text("-", NULL, "dash "), r2 = write_text("/dev/stdout", NULL, "stdout");
    dup2(saved, 1);
    close(saved);
    close(p[1]);
    EXPECT_EQ_INT(kind, HX_OUT_STDOUT);
    EXPECT_EQ_INT(kind2, HX_OUT_STDOUT);
    EXPECT_EQ_INT(r1, HX_OK);
    EXPECT_EQ_INT(r2, HX_OK);
    EXPECT(read(p[0], buf, sizeof buf - 1) > 0);
    EXPECT_STR_EQ(buf, "fd dash stdout");
    close(p[0]);
}

static void test_refusals(void)
{
    char p[HX_PATH_MAX], sub[HX_PATH_MAX];
    hx_err e = {0};
    EXPECT_EQ_INT(write_text(g_dir, NULL, "x"), HX_ERR_INVALID); /* a folder */
    EXPECT_EQ_INT(write_text(at(p, "nofolder/x.gguf"), NULL, "x"), HX_ERR_IO);
    EXPECT_EQ_INT(hx_out_check(p, NULL, &e), HX_ERR_IO);
    EXPECT(strstr(e.msg, "no such folder") != NULL);
    EXPECT(access(at(sub, "nofolder"), F_OK) != 0); /* not created */
    EXPECT_EQ_INT(write_text("", NULL, "x"), HX_ERR_INVALID);
    EXPECT_EQ_INT(hx_out_kind(g_dir), 0);
}

/* A file the user made read-only is refused, not replaced by the rename
 * (which the folder would allow); made writable, it is written. */
static void test_read_only_file_refused(void)
{
    char p[HX_PATH_MAX];
    if (geteuid() == 0) SKIP("root may write any file");
    put(at(p, "ro.txt"), "keep");
    chmod(p, 0444);
    EXPECT_EQ_INT(write_text(p, NULL, "x"), HX_ERR_DENIED);
    EXPECT_STR_EQ(get(p), "keep");
    chmod(p, 0644);
    EXPECT_EQ_INT(write_text(p, NULL, "x"), HX_OK);
}

/* The same as an ordinary user under root (the tests run as root). */
static void test_read_only_file_refused_as_a_user(void)
{
    char p[HX_PATH_MAX];
    if (geteuid() != 0) SKIP("test_read_only_file_refused covers it");
    put(at(p, "ro-user.txt"), "keep");
    ASSERT(chown(g_dir, 65534, 65534) == 0 && chown(p, 65534, 65534) == 0);
    chmod(p, 0444);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        if (setgid(65534) || setuid(65534)) _exit(9);
        int a = write_text(p, NULL, "x");
        chmod(p, 0644);
        int b = write_text(p, NULL, "user");
        _exit(a == HX_ERR_DENIED && b == HX_OK ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    EXPECT_STR_EQ(get(p), "user");
    chown(g_dir, 0, 0);
}

/* A link or file in a sticky world-writable folder that belongs to another
 * user is refused, as the kernel's protected_symlinks / protected_regular
 * refuse it to `>`; the same link owned by us is followed. */
static void test_planted_in_shared_folder(void)
{
    char shared[HX_PATH_MAX], link[HX_PATH_MAX], target[HX_PATH_MAX], file[HX_PATH_MAX];
    if (geteuid() != 0) SKIP("needs root to own a link as another user");
    ASSERT(mkdir(at(shared, "shared"), 0777) == 0 && chmod(shared, 01777) == 0);
    put(at(target, "victim.txt"), "precious");
    snprintf(link, sizeof link, "%s/out.gguf", shared);
    ASSERT(symlink(target, link) == 0);
    ASSERT(lchown(link, 65534, 65534) == 0);
    EXPECT_EQ_INT(write_text(link, NULL, "x"), HX_ERR_DENIED);
    EXPECT_STR_EQ(get(target), "precious");
    ASSERT(lchown(link, 0, 0) == 0); /* control: our own link is followed */
    EXPECT_EQ_INT(write_text(link, NULL, "ours"), HX_OK);
    EXPECT_STR_EQ(get(target), "ours");
    snprintf(file, sizeof file, "%s/theirs.gguf", shared);
    put(file, "theirs");
    ASSERT(chown(file, 65534, 65534) == 0);
    EXPECT_EQ_INT(write_text(file, NULL, "x"), HX_ERR_DENIED);
    EXPECT_STR_EQ(get(file), "theirs");
}

/* The temporary's name is never followed: a link planted there is skipped. */
static void test_planted_temporary_name(void)
{
    char p[HX_PATH_MAX], victim[HX_PATH_MAX], plant[HX_PATH_MAX];
    hx_err e = {0};
    put(at(victim, "victim2.txt"), "precious");
    snprintf(plant, sizeof plant, "%s/cache.bin.tmp.%ld", g_dir, (long)getpid());
    ASSERT(symlink(victim, plant) == 0);
    EXPECT_EQ_INT(hx_write_file_atomic(at(p, "cache.bin"), "data", 4, &e), HX_OK);
    EXPECT_STR_EQ(get(p), "data");
    EXPECT_STR_EQ(get(victim), "precious");
    snprintf(plant, sizeof plant, "%s/user.bin.tmp.%ld", g_dir, (long)getpid());
    ASSERT(symlink(victim, plant) == 0);
    EXPECT_EQ_INT(write_text(at(p, "user.bin"), NULL, "user"), HX_OK);
    EXPECT_STR_EQ(get(p), "user");
    EXPECT_STR_EQ(get(victim), "precious");
    struct stat st;
    EXPECT(lstat(plant, &st) == 0 && S_ISLNK(st.st_mode)); /* left alone */
    unlink(plant);
    snprintf(plant, sizeof plant, "%s/cache.bin.tmp.%ld", g_dir, (long)getpid());
    unlink(plant);
}

/* A child writes an output until a signal kills it: the temporary is gone,
 * the old file intact, and the child died of that signal. */
static void killed_by(int sig)
{
    char p[HX_PATH_MAX], dir[HX_PATH_MAX];
    snprintf(dir, sizeof dir, "%s/sig%d", g_dir, sig);
    ASSERT(mkdir(dir, 0700) == 0);
    snprintf(p, sizeof p, "%s/out.gguf", dir);
    put(p, "old");
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        hx_out o;
        hx_err e = {0};
        static char chunk[65536];
        if (hx_out_open(&o, p, NULL, 0666, &e)) _exit(3);
        for (;;) hx_out_write(&o, chunk, sizeof chunk, &e), o.written = 0, lseek(o.fd, 0, SEEK_SET);
    }
    for (int i = 0; i < 5000 && count_tmp(dir) == 0; i++) usleep(1000);
    EXPECT_EQ_INT(count_tmp(dir), 1);
    kill(pid, sig);
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT(WIFSIGNALED(status) && WTERMSIG(status) == sig);
    EXPECT_EQ_INT(count_tmp(dir), 0);
    EXPECT_STR_EQ(get(p), "old");
}

static void test_signal_removes_temporary(void)
{
    killed_by(SIGINT);
    killed_by(SIGTERM);
    killed_by(SIGHUP);
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st, (void)flag, (void)f;
    return remove(p);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/hx_out_XXXXXX");
    if (!mkdtemp(g_dir)) return 1;
    RUN(test_new_file);
    RUN(test_replace_keeps_old_until_commit);
    RUN(test_input_is_refused);
    RUN(test_link_updates_its_file);
    RUN(test_device_written_through);
    RUN(test_fifo_written_through);
    RUN(test_descriptors_written_through);
    RUN(test_refusals);
    RUN(test_read_only_file_refused);
    RUN(test_read_only_file_refused_as_a_user);
    RUN(test_planted_in_shared_folder);
    RUN(test_planted_temporary_name);
    RUN(test_signal_removes_temporary);
    nftw(g_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return test_summary();
}
