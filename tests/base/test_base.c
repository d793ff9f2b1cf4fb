/* test_base.c: unit tests of the base module. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "test.h"

static void test_err_messages(void)
{
    hx_err e;
    hx_err_clear(&e);
    EXPECT_EQ_INT(hx_err_set(&e, HX_ERR_FORMAT, "bad %d", 7), HX_ERR_FORMAT);
    EXPECT_STR_EQ(e.msg, "bad 7");
    EXPECT_STR_EQ(hx_rc_str(HX_ERR_NOMEM), "out of memory");
    EXPECT_STR_EQ(hx_rc_str(999), "unknown error");
}

static void test_arena(void)
{
    hx_arena *a = hx_arena_new(64);
    ASSERT(a);
    char *s = hx_arena_strdup(a, "hello");
    void *big = hx_arena_alloc(a, 1000); /* larger than a chunk */
    EXPECT(big != NULL);
    EXPECT(((uintptr_t)big & 15) == 0);
    EXPECT_STR_EQ(s, "hello");
    hx_arena_reset(a);
    EXPECT_EQ_INT(hx_arena_used(a), 0);
    hx_arena_free(a);
    hx_arena_free(NULL);
}

static void test_buf(void)
{
    hx_buf b;
    hx_buf_init(&b);
    for (int i = 0; i < 1000; i++) hx_buf_printf(&b, "%d,", i % 10);
    EXPECT_EQ_INT(b.len, 2000);
    size_t n;
    char *s = hx_buf_steal(&b, &n);
    EXPECT_EQ_INT(n, 2000);
    EXPECT(s[0] == '0' && s[1999] == ',');
    free(s);
    EXPECT(b.data == NULL);
}

/* Text from outside shown to a person: every escape sequence, hidden
 * control and reordering mark is made visible; ordinary text, accents and
 * emoji pass untouched (the control), line breaks only where asked. */
/* A streamed piece is cut at the start of a code point, never inside one,
 * and never before what was sent already. */
static void test_utf8_cut(void)
{
    const char *s = "L\xc3\xa9" "a \xe6\x9d\xb1 \xf0\x9f\x99\x82!";
    EXPECT_EQ_INT((int)hx_utf8_cut(s, 1, 0), 1);  /* before the é */
    EXPECT_EQ_INT((int)hx_utf8_cut(s, 2, 0), 1);  /* inside it */
    EXPECT_EQ_INT((int)hx_utf8_cut(s, 3, 0), 3);  /* after it */
    EXPECT_EQ_INT((int)hx_utf8_cut(s, 7, 0), 5);  /* inside 東 */
    EXPECT_EQ_INT((int)hx_utf8_cut(s, 12, 0), 9); /* inside the emoji */
    EXPECT_EQ_INT((int)hx_utf8_cut(s, 12, 10), 10); /* not before from */
    EXPECT_EQ_INT((int)hx_utf8_cut(s, strlen(s), 0), (int)strlen(s));
}

static void test_term_escape(void)
{
    static const struct {
        const char *in, *lines, *one_line;
    } cases[] = {
        {"Budget notes \xc3\xa9t\xc3\xa9 \xf0\x9f\x93\x85", "Budget notes \xc3\xa9t\xc3\xa9 \xf0\x9f\x93\x85",
         "Budget notes \xc3\xa9t\xc3\xa9 \xf0\x9f\x93\x85"},
        {"a\x1b]0;pwned\x07" "b\x1b[2J", "a\\x1b]0;pwned\\x07b\\x1b[2J", "a\\x1b]0;pwned\\x07b\\x1b[2J"},
        {"ok\rFAKE\x7f\x08", "ok\\x0dFAKE\\x7f\\x08", "ok\\x0dFAKE\\x7f\\x08"},
        {"x\xc2\x9b" "31mred", "x\\u009b31mred", "x\\u009b31mred"},
        {"to: \xe2\x80\xaegro.live@eve", "to: \\u202egro.live@eve", "to: \\u202egro.live@eve"},
        {"bad \xff\xc0\xaf \xed\xa0\x80 end", "bad \\xff\\xc0\\xaf \\xed\\xa0\\x80 end",
         "bad \\xff\\xc0\\xaf \\xed\\xa0\\x80 end"},
        {"line 1\n\tline 2", "line 1\n\tline 2", "line 1\\n\\tline 2"},
        {"cut \xe2\x80", "cut \\xe2\\x80", "cut \\xe2\\x80"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        for (int keep = 0; keep < 2; keep++) {
            hx_buf b;
            hx_buf_init(&b);
            EXPECT_EQ_INT(hx_term_escape(&b, cases[i].in, strlen(cases[i].in), keep), HX_OK);
            EXPECT_STR_EQ(b.data ? b.data : "", keep ? cases[i].lines : cases[i].one_line);
            hx_buf_free(&b);
        }
    }
}

static void test_checked_sizes(void)
{
    size_t out;
    EXPECT_EQ_INT(hx_mul_size(SIZE_MAX / 2, 3, &out), -1);
    EXPECT_EQ_INT(hx_add_size(SIZE_MAX, 1, &out), -1);
    EXPECT(hx_calloc(SIZE_MAX / 2, 4) == NULL);
    EXPECT(hx_huge_alloc(SIZE_MAX / 2, 4) == NULL);
}

/* hx_huge_alloc: small blocks 64-byte aligned, from 2 MiB on 2 MiB
 * aligned, every byte writable. */
static void test_huge_alloc(void)
{
    const size_t sizes[] = {1, 4096, (size_t)2 << 20, ((size_t)5 << 20) + 3};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        unsigned char *p = hx_huge_alloc(sizes[i], 1);
        ASSERT(p != NULL);
        EXPECT((uintptr_t)p % (sizes[i] >= ((size_t)2 << 20) ? (size_t)2 << 20 : 64) == 0);
        memset(p, 0xa5, sizes[i]);
        EXPECT(p[sizes[i] - 1] == 0xa5);
        free(p);
    }
}

static void test_fp16_roundtrip(void)
{
    /* every finite half converts to float and back exactly */
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        if (((h >> 10) & 0x1f) == 0x1f) continue;
        if (hx_fp32_to_fp16(hx_fp16_to_fp32((uint16_t)h)) != h) bad++;
    }
    EXPECT_EQ_INT(bad, 0);
    EXPECT(hx_fp16_to_fp32(hx_fp32_to_fp16(1.0f)) == 1.0f);
    EXPECT(hx_fp32_to_fp16(65520.0f) == 0x7c00); /* rounds to infinity */
    EXPECT(hx_bf16_to_fp32(hx_fp32_to_bf16(3.0f)) == 3.0f);
}

static void test_now_override(void)
{
    setenv("HEARTH_NOW", "2026-12-01T09:00:00+01:00", 1);
    int off = 0;
    int64_t t = hx_now(&off);
    EXPECT_EQ_INT(t, 1796112000); /* 2026-12-01T08:00:00Z */
    EXPECT_EQ_INT(off, 3600);
    unsetenv("HEARTH_NOW");
}

static void test_atomic_write(void)
{
    char dir[] = "/tmp/hx-test-XXXXXX";
    ASSERT(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/a/b/file.txt", dir);
    char sub[256];
    snprintf(sub, sizeof sub, "%s/a/b", dir);
    hx_err e;
    EXPECT_EQ_INT(hx_mkdirs(sub, &e), HX_OK);
    EXPECT_EQ_INT(hx_write_file_atomic(path, "abc", 3, &e), HX_OK);
    char *data;
    size_t n;
    EXPECT_EQ_INT(hx_read_file(path, 0, &data, &n, &e), HX_OK);
    EXPECT_EQ_INT(n, 3);
    EXPECT_STR_EQ(data, "abc");
    free(data);
    EXPECT_EQ_INT(hx_read_file(path, 2, &data, &n, &e), HX_ERR_RANGE);
    snprintf(path, sizeof path, "rm -rf %s", dir);
    EXPECT(system(path) == 0);
}

static const char *sha_hex(const char *msg, size_t n)
{
    static char hex[65];
    unsigned char d[32];
    hx_sha256 s;
    hx_sha256_init(&s);
    for (size_t i = 0; i < n; i++) hx_sha256_update(&s, msg + i, 1); /* byte by byte */
    hx_sha256_final(&s, d);
    hx_sha256_hex(d, hex);
    return hex;
}

/* FIPS 180-4 test vectors, and a million 'a's through unaligned chunks. */
static void test_sha256(void)
{
    EXPECT_STR_EQ(sha_hex("", 0),
                  "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_STR_EQ(sha_hex("abc", 3),
                  "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    EXPECT_STR_EQ(sha_hex(m, strlen(m)),
                  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    static char a[1000000];
    memset(a, 'a', sizeof a);
    hx_sha256 s;
    unsigned char d[32];
    char hex[65];
    hx_sha256_init(&s);
    for (size_t i = 0; i < sizeof a;) {
        size_t k = (i * 7 + 13) % 997 + 1;
        if (k > sizeof a - i) k = sizeof a - i;
        hx_sha256_update(&s, a + i, k);
        i += k;
    }
    hx_sha256_final(&s, d);
    hx_sha256_hex(d, hex);
    EXPECT_STR_EQ(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

/* Names that must not repeat: random unpinned; under HEARTH_NOW a
 * function of the clock, the salt and k (a replayed run sees the same). */
static void test_unique_bytes(void)
{
    unsigned char a[16], b[16], c[16], d[16];
    setenv("HEARTH_NOW", "2026-12-01T09:00:00+01:00", 1);
    EXPECT(hx_unique_pinned());
    hx_unique_bytes("cal", 3, 0, a, sizeof a);
    hx_unique_bytes("cal", 3, 0, b, sizeof b);
    EXPECT(!memcmp(a, b, sizeof a));
    hx_unique_bytes("cal", 3, 1, c, sizeof c);
    EXPECT(memcmp(a, c, sizeof a) != 0);
    hx_unique_bytes("mail", 4, 0, c, sizeof c);
    EXPECT(memcmp(a, c, sizeof a) != 0);
    setenv("HEARTH_NOW", "2026-12-01T09:00:01+01:00", 1);
    hx_unique_bytes("cal", 3, 0, c, sizeof c);
    EXPECT(memcmp(a, c, sizeof a) != 0);
    unsetenv("HEARTH_NOW");
    EXPECT(!hx_unique_pinned());
    hx_unique_bytes("cal", 3, 0, c, sizeof c);
    hx_unique_bytes("cal", 3, 0, d, sizeof d);
    EXPECT(memcmp(c, d, sizeof c) != 0 && memcmp(a, c, sizeof a) != 0);
}

/* Runs the progress scene fn with stderr in a file; its text into out. */
static void capture_stderr(void (*fn)(void), char *out, size_t n)
{
    char path[] = "/tmp/hx_progress_XXXXXX";
    int fd = mkstemp(path);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    fn();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    ssize_t k = pread(fd, out, n - 1, 0);
    out[k > 0 ? k : 0] = 0;
    close(fd);
    unlink(path);
}

static int count_of(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)); p += strlen(what)) n++;
    return n;
}

static double g_spent;

/* Hundreds of thousands of updates in 0.6 s, total unknown, on a terminal. */
static void scene_flood(void)
{
    hx_progress p;
    hx_progress_start(&p, "counting", 0);
    p.tty = 1;
    double t0 = hx_time_mono();
    for (int i = 1; hx_time_mono() - t0 < 0.6; i++) hx_progress_update(&p, i, "items");
    g_spent = hx_time_mono() - t0;
    hx_progress_finish(&p);
}

/* A known total, drawn once (a quarter second in), then finished. */
static void scene_known(void)
{
    hx_progress p;
    hx_progress_start(&p, "known", 200);
    p.tty = 1;
    p.t_last -= 1;
    hx_progress_update(&p, 50, NULL);
    hx_progress_update(&p, 200, NULL);
    hx_progress_finish(&p);
}

/* On a pipe: nothing while working; quick work ends silent, long work
 * (3 s, as if) with one line. */
static void scene_pipe(void)
{
    hx_progress p;
    for (int k = 0; k < 2; k++) {
        hx_progress_start(&p, k ? "slow" : "quick", 10);
        p.tty = 0;
        for (int i = 1; i <= 10; i++) hx_progress_update(&p, i, NULL);
        if (k) p.t_start -= 3;
        hx_progress_finish(&p);
    }
}

static void test_progress(void)
{
    static char out[1 << 16];
    capture_stderr(scene_flood, out, sizeof out);
    int draws = count_of(out, "\r\033[K");
    EXPECT(draws >= 2);                       /* it did show progress */
    EXPECT(draws <= (int)(g_spent * 4) + 2);  /* at most 4 a second, and the last */
    EXPECT(strchr(out, '%') == NULL);         /* no percentage of an unknown total */
    EXPECT(strstr(out, "/0") == NULL);
    EXPECT(strstr(out, "counting  done in") == NULL && strstr(out, "done in") != NULL);
    EXPECT_EQ_INT(count_of(out, "\n"), 1);
    capture_stderr(scene_known, out, sizeof out);
    EXPECT(strstr(out, "known  50/200   25%") != NULL);
    EXPECT(strstr(out, "known  200/200  done in") != NULL);
    capture_stderr(scene_pipe, out, sizeof out);
    EXPECT_STR_EQ(out, "slow  10/10  done in 3s\n");
}

int main(void)
{
    RUN(test_err_messages);
    RUN(test_arena);
    RUN(test_buf);
    RUN(test_utf8_cut);
    RUN(test_term_escape);
    RUN(test_checked_sizes);
    RUN(test_huge_alloc);
    RUN(test_unique_bytes);
    RUN(test_fp16_roundtrip);
    RUN(test_now_override);
    RUN(test_atomic_write);
    RUN(test_sha256);
    RUN(test_progress);
    return test_summary();
}
