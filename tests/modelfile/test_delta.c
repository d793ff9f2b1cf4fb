/* test_delta.c: model updates by tensor: a delta carries only the changed
 * tensors and header bytes, rebuilds the new file bit for bit, and refuses
 * another base or a corrupted delta without touching anything. */
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/engine.h"
#include "modelfile/modelfile.h"
#include "test.h"

static char dir[PATH_MAX], p_old[PATH_MAX + 16], p_new[PATH_MAX + 16], p_delta[PATH_MAX + 16],
    p_out[PATH_MAX + 16];

#define N_BIG (256 * 1024) /* floats in each large tensor: 1 MiB */

static float *big_a, *big_b, *big_c;

static void fill(float *x, int n, unsigned seed)
{
    for (int i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        x[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
    }
}

/* A model-like file: version string, three 1 MiB tensors, a small one. */
static int write_model(const char *path, const char *version, int change_a, int add_d)
{
    hx_gguf_writer *w = hx_gguf_writer_new();
    hx_err e;
    int64_t ne_big[2] = {1024, N_BIG / 1024}, ne_small[1] = {64};
    static float small[64], d[4096];
    fill(small, 64, 7);
    fill(d, 4096, 9);
    hx_gguf_set_str(w, "general.architecture", "llama");
    hx_gguf_set_str(w, "general.name", version);
    hx_gguf_set_u32(w, "llama.block_count", 2);
    if (change_a) big_a[12345] += 1.0f;
    hx_gguf_add_tensor(w, "blk.0.attn_q.weight", HX_TYPE_F32, 2, ne_big, big_a, NULL, NULL);
    hx_gguf_add_tensor(w, "blk.0.attn_k.weight", HX_TYPE_F32, 2, ne_big, big_b, NULL, NULL);
    hx_gguf_add_tensor(w, "output_norm.weight", HX_TYPE_F32, 1, ne_small, small, NULL, NULL);
    hx_gguf_add_tensor(w, "blk.1.attn_q.weight", HX_TYPE_F32, 2, ne_big, big_c, NULL, NULL);
    if (add_d) {
        int64_t ne_d[1] = {4096};
        hx_gguf_add_tensor(w, "blk.1.ffn_norm.weight", HX_TYPE_F32, 1, ne_d, d, NULL, NULL);
    }
    int rc = hx_gguf_writer_write(w, path, &e);
    if (change_a) big_a[12345] -= 1.0f;
    hx_gguf_writer_free(w);
    return rc;
}

static int same_file(const char *a, const char *b)
{
    char cmd[3 * PATH_MAX];
    snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", a, b);
    return system(cmd) == 0;
}

static void sha(const char *path, char out[65])
{
    hx_err e;
    if (hx_sha256_file(path, NULL, out, &e)) out[0] = '\0';
}

static void test_roundtrip_small_delta(void)
{
    hx_delta_stats st;
    hx_err e;
    ASSERT(hx_model_diff(p_old, p_new, p_delta, &st, &e) == HX_OK);
    EXPECT_EQ_INT(st.n_tensors, 5);
    EXPECT_EQ_INT(st.n_changed, 2); /* attn_q changed, ffn_norm added */
    EXPECT_EQ_INT(st.changed_bytes, N_BIG * 4 + 4096 * 4);
    /* close to the changed tensors' size: header middle plus the layout */
    EXPECT(st.delta_bytes < st.changed_bytes + 4096);
    printf("     delta %llu bytes for %llu changed bytes (header middle %llu)\n",
           (unsigned long long)st.delta_bytes, (unsigned long long)st.changed_bytes,
           (unsigned long long)st.header_bytes);
    ASSERT(hx_model_patch(p_old, p_delta, p_out, &e) == HX_OK);
    EXPECT(same_file(p_out, p_new));
    unlink(p_out);
}

static void test_patch_in_place(void)
{
    char copy[PATH_MAX + 16], cmd[3 * PATH_MAX];
    snprintf(copy, sizeof copy, "%s/inplace.gguf", dir);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", p_old, copy);
    ASSERT(system(cmd) == 0);
    hx_err e;
    ASSERT(hx_model_patch(copy, p_delta, copy, &e) == HX_OK);
    EXPECT(same_file(copy, p_new));
    unlink(copy);
}

static void test_refuses_other_base(void)
{
    hx_err e;
    char before[65], after[65];
    sha(p_new, before);
    EXPECT_EQ_INT(hx_model_patch(p_new, p_delta, p_out, &e), HX_ERR_UNSUPPORTED);
    EXPECT(strstr(e.msg, "another base") != NULL);
    EXPECT(access(p_out, F_OK) != 0);
    sha(p_new, after);
    EXPECT_STR_EQ(before, after);
}

static void flip_byte_of_tensor(const char *path, const char *tensor)
{
    hx_gguf *g;
    hx_err e;
    if (hx_gguf_open(path, &g, &e)) return;
    const hx_gguf_tensor *t = hx_gguf_find_tensor(g, tensor);
    off_t at = (off_t)(hx_gguf_data_offset(g) + t->offset + 100);
    hx_gguf_close(g);
    int fd = open(path, O_RDWR);
    unsigned char c;
    if (pread(fd, &c, 1, at) == 1) {
        c ^= 0x40;
        if (pwrite(fd, &c, 1, at) != 1) c = 0;
    }
    close(fd);
}

static void test_corrupt_delta_changes_nothing(void)
{
    char bad[PATH_MAX + 16], cmd[3 * PATH_MAX], before[65], after[65];
    snprintf(bad, sizeof bad, "%s/bad.delta", dir);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", p_delta, bad);
    ASSERT(system(cmd) == 0);
    flip_byte_of_tensor(bad, "blk.0.attn_q.weight");
    sha(p_old, before);
    hx_err e;
    EXPECT_EQ_INT(hx_model_patch(p_old, bad, p_out, &e), HX_ERR_FORMAT);
    EXPECT(strstr(e.msg, "checksum") != NULL);
    EXPECT(access(p_out, F_OK) != 0);
    sha(p_old, after);
    EXPECT_STR_EQ(before, after);
    /* no temporary file left behind either */
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -q tmp", dir);
    EXPECT(system(cmd) != 0);
    /* a truncated delta is a clear GGUF error */
    ASSERT(truncate(bad, 200) == 0);
    EXPECT(hx_model_patch(p_old, bad, p_out, &e) == HX_ERR_FORMAT);
    EXPECT(strstr(e.msg, "bad.delta") != NULL || strstr(e.msg, "truncated") != NULL);
    unlink(bad);
}

static void test_not_a_delta(void)
{
    hx_err e;
    EXPECT_EQ_INT(hx_model_patch(p_old, p_new, p_out, &e), HX_ERR_FORMAT);
    EXPECT(strstr(e.msg, "not a Hearth model delta") != NULL);
    EXPECT(hx_model_diff(p_old, "/nonexistent.gguf", p_delta, NULL, &e) != HX_OK);
}

static void test_identical_files(void)
{
    char d2[PATH_MAX + 16];
    snprintf(d2, sizeof d2, "%s/same.delta", dir);
    hx_delta_stats st;
    hx_err e;
    ASSERT(hx_model_diff(p_old, p_old, d2, &st, &e) == HX_OK);
    EXPECT_EQ_INT(st.n_changed, 0);
    EXPECT_EQ_INT(st.header_bytes, 0);
    ASSERT(hx_model_patch(p_old, d2, p_out, &e) == HX_OK);
    EXPECT(same_file(p_out, p_old));
    unlink(p_out);
    unlink(d2);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/hx-delta-XXXXXX");
    if (!mkdtemp(dir)) return 1;
    snprintf(p_old, sizeof p_old, "%s/v1.gguf", dir);
    snprintf(p_new, sizeof p_new, "%s/v2.gguf", dir);
    snprintf(p_delta, sizeof p_delta, "%s/v1-v2.delta", dir);
    snprintf(p_out, sizeof p_out, "%s/out.gguf", dir);
    big_a = malloc(N_BIG * 4), big_b = malloc(N_BIG * 4), big_c = malloc(N_BIG * 4);
    fill(big_a, N_BIG, 1), fill(big_b, N_BIG, 2), fill(big_c, N_BIG, 3);
    if (write_model(p_old, "hearth-test v1", 0, 0) || write_model(p_new, "hearth-test v2", 1, 1)) {
        printf("FAIL setup: cannot write models\n");
        return 1;
    }
    RUN(test_roundtrip_small_delta);
    RUN(test_patch_in_place);
    RUN(test_refuses_other_base);
    RUN(test_corrupt_delta_changes_nothing);
    RUN(test_not_a_delta);
    RUN(test_identical_files);
    free(big_a), free(big_b), free(big_c);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) return 1;
    return test_summary();
}
