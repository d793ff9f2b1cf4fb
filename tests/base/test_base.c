/* test_base.c: unit tests of the base module. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

int main(void)
{
    RUN(test_err_messages);
    RUN(test_arena);
    RUN(test_buf);
    RUN(test_term_escape);
    RUN(test_checked_sizes);
    RUN(test_huge_alloc);
    RUN(test_unique_bytes);
    RUN(test_fp16_roundtrip);
    RUN(test_now_override);
    RUN(test_atomic_write);
    RUN(test_sha256);
    return test_summary();
}
