/* test.h: Hearth's minimal unit-test harness. One test binary per file:
 * write `static void test_x(void)` functions, call RUN(test_x) from main and
 * end main with `return test_summary();`. The runner (tests/run.sh) reads
 * the lines "ok NAME", "FAIL NAME: ..." and "skip NAME: REASON". */
#ifndef HX_TEST_H
#define HX_TEST_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_n_pass, test_n_fail, test_n_skip;
static int test_cur_failed, test_cur_skipped;
static const char *test_cur_name;

/* Records a failure and goes on with the test. */
#define EXPECT(cond)                                                          \
    do {                                                                      \
        if (!(cond)) test_fail_at(__FILE__, __LINE__, "%s", #cond);           \
    } while (0)
/* Records a failure and returns from the test function. */
#define ASSERT(cond)                                                          \
    do {                                                                      \
        if (!(cond)) {                                                        \
            test_fail_at(__FILE__, __LINE__, "%s", #cond);                    \
            return;                                                           \
        }                                                                     \
    } while (0)
#define EXPECT_EQ_INT(a, b)                                                   \
    do {                                                                      \
        long long va_ = (long long)(a), vb_ = (long long)(b);                 \
        if (va_ != vb_)                                                       \
            test_fail_at(__FILE__, __LINE__, "%s == %s (%lld != %lld)", #a,   \
                         #b, va_, vb_);                                       \
    } while (0)
#define EXPECT_STR_EQ(a, b)                                                   \
    do {                                                                      \
        const char *sa_ = (a), *sb_ = (b);                                    \
        if (!sa_ || !sb_ || strcmp(sa_, sb_) != 0)                            \
            test_fail_at(__FILE__, __LINE__, "%s == %s (\"%s\" != \"%s\")",   \
                         #a, #b, sa_ ? sa_ : "(null)", sb_ ? sb_ : "(null)"); \
    } while (0)
/* Marks the current test skipped with a reason and returns from it. */
#define SKIP(...)                                                             \
    do {                                                                      \
        test_skip(__VA_ARGS__);                                               \
        return;                                                               \
    } while (0)
#define RUN(fn) test_run(#fn, fn)

__attribute__((unused, format(printf, 3, 4))) static void
test_fail_at(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    if (!test_cur_failed) printf("FAIL %s: ", test_cur_name);
    else printf("     %s: ", test_cur_name);
    printf("%s:%d: ", file, line);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    test_cur_failed = 1;
}

__attribute__((unused, format(printf, 1, 2))) static void
test_skip(const char *fmt, ...)
{
    va_list ap;
    printf("skip %s: ", test_cur_name);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    test_cur_skipped = 1;
}

/* 1 if name is one of the space-separated words of HX_TEST_SKIP (tests
 * too slow for a run under emulation, e.g. make test-aarch64). */
__attribute__((unused)) static int test_listed_skip(const char *name)
{
    const char *l = getenv("HX_TEST_SKIP");
    size_t n = strlen(name);
    for (; l && *l; l += strcspn(l, " ")) {
        l += strspn(l, " ");
        if (strncmp(l, name, n) == 0 && (l[n] == ' ' || l[n] == 0)) return 1;
    }
    return 0;
}

/* 1 under make asan / make ubsan (HX_TEST_SANITIZER set, e.g. "address"):
 * the heaviest tests then run the same code paths on fewer positions or
 * repetitions; plain make test always runs them in full. */
__attribute__((unused)) static int test_sanitized(void)
{
    const char *s = getenv("HX_TEST_SANITIZER");
    return s && *s;
}

__attribute__((unused)) static void test_run(const char *name, void (*fn)(void))
{
    test_cur_name = name;
    test_cur_failed = test_cur_skipped = 0;
    if (test_listed_skip(name)) test_skip("listed in HX_TEST_SKIP");
    else fn();
    if (test_cur_failed) test_n_fail++;
    else if (test_cur_skipped) test_n_skip++;
    else {
        test_n_pass++;
        printf("ok   %s\n", name);
    }
    fflush(stdout);
}

__attribute__((unused)) static int test_summary(void)
{
    printf("# %d passed, %d failed, %d skipped\n", test_n_pass, test_n_fail,
           test_n_skip);
    return test_n_fail ? 1 : 0;
}

/* Normalized mean squared error sum((a-b)^2) / sum(a^2), as llama.cpp's
 * test-backend-ops compares tensors. */
__attribute__((unused)) static double test_nmse(const float *ref,
                                                const float *got, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)ref[i] - (double)got[i];
        num += d * d;
        den += (double)ref[i] * (double)ref[i];
    }
    return den > 0 ? num / den : num;
}

/* dir/name in one of four rotating static buffers: a test's temporary
 * paths, a few in use at a time. */
__attribute__((unused)) static const char *test_path_in(const char *dir, const char *name)
{
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

/* Path of a file under the shared data directory, or NULL (with the test
 * skipped) if it is absent. Returns a static buffer. */
__attribute__((unused)) static const char *test_shared_file(const char *rel)
{
    static char path[4096];
    const char *dir = getenv("HEARTH_SHARED_DATA");
    if (!dir || !*dir) dir = "../shared/data";
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    FILE *f = fopen(path, "rb");
    if (!f) {
        test_skip("shared data %s not found (set HEARTH_SHARED_DATA)", path);
        return NULL;
    }
    fclose(f);
    return path;
}

#endif /* HX_TEST_H */
