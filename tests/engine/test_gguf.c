/* test_gguf.c: the GGUF reader and writer: type traits, a writer->reader
 * round trip of every value type, the real shared files, and broken files. */
#include <stdint.h>
#include <unistd.h>

#include "engine/engine.h"
#include "test.h"

/* ---- helpers ---- */

static const char *tmp_path(const char *name)
{
    static char path[512];
    const char *dir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/hx_test_gguf_%ld_%s",
             dir && *dir ? dir : "/tmp", (long)getpid(), name);
    return path;
}

/* Reads a whole file; caller frees. */
static uint8_t *slurp(const char *path, size_t *len)
{
    char *data = NULL;
    hx_err err = {0};
    if (hx_read_file(path, 0, &data, len, &err) != HX_OK) return NULL;
    return (uint8_t *)data;
}

/* Opens size bytes of data from an exact-size heap copy, so that a read
 * past the end is caught by ASan. Returns the rc; message in err. */
static int open_copy(const uint8_t *data, size_t size, hx_err *err)
{
    uint8_t *copy = calloc(1, size ? size : 1);
    hx_gguf *g = NULL;
    if (!copy) return HX_ERR_NOMEM;
    if (size) memcpy(copy, data, size);
    int rc = hx_gguf_open_buffer(copy, size, &g, err);
    hx_gguf_close(g);
    free(copy);
    return rc;
}

/* ---- type traits ---- */

static void test_type_traits(void)
{
    static const struct { int t, be, bb; const char *name; } k[] = {
        {HX_TYPE_F32, 1, 4, "F32"},       {HX_TYPE_F16, 1, 2, "F16"},
        {HX_TYPE_BF16, 1, 2, "BF16"},     {HX_TYPE_Q4_0, 32, 18, "Q4_0"},
        {HX_TYPE_Q4_1, 32, 20, "Q4_1"},   {HX_TYPE_Q5_0, 32, 22, "Q5_0"},
        {HX_TYPE_Q5_1, 32, 24, "Q5_1"},   {HX_TYPE_Q8_0, 32, 34, "Q8_0"},
        {HX_TYPE_Q8_1, 32, 36, "Q8_1"},   {HX_TYPE_Q2_K, 256, 84, "Q2_K"},
        {HX_TYPE_Q3_K, 256, 110, "Q3_K"}, {HX_TYPE_Q4_K, 256, 144, "Q4_K"},
        {HX_TYPE_Q5_K, 256, 176, "Q5_K"}, {HX_TYPE_Q6_K, 256, 210, "Q6_K"},
        {HX_TYPE_Q8_K, 256, 292, "Q8_K"}, {HX_TYPE_I8, 1, 1, "I8"},
        {HX_TYPE_I16, 1, 2, "I16"},       {HX_TYPE_I32, 1, 4, "I32"},
        {HX_TYPE_I64, 1, 8, "I64"},       {HX_TYPE_F64, 1, 8, "F64"},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        EXPECT_EQ_INT(hx_type_block_elems(k[i].t), k[i].be);
        EXPECT_EQ_INT(hx_type_block_bytes(k[i].t), k[i].bb);
        EXPECT_STR_EQ(hx_type_name(k[i].t), k[i].name);
    }
    EXPECT_EQ_INT(hx_type_row_bytes(HX_TYPE_Q4_K, 512), 288);
    EXPECT_EQ_INT(hx_type_row_bytes(HX_TYPE_Q4_K, 300), 0);
    EXPECT_EQ_INT(hx_type_row_bytes(HX_TYPE_F16, 7), 14);
    EXPECT_EQ_INT(hx_type_block_elems(19), 0); /* IQ1_S: not implemented */
    EXPECT_STR_EQ(hx_type_name(19), "?");
    EXPECT_STR_EQ(hx_type_ggml_name(19), "IQ1_S");
    EXPECT_STR_EQ(hx_type_name(-1), "?");
    EXPECT_STR_EQ(hx_type_name(1000), "?");
    EXPECT_STR_EQ(hx_gguf_vtype_name(HX_GGUF_F64), "f64");
    EXPECT_EQ_INT(hx_gguf_vtype_size(HX_GGUF_U16), 2);
    EXPECT_EQ_INT(hx_gguf_vtype_size(HX_GGUF_STRING), 0);
}

/* ---- round trip ---- */

static int fill_q8(void *user, const hx_gguf_tensor *t, void *buf)
{
    (void)user;
    for (size_t i = 0; i < t->nbytes; i++) ((uint8_t *)buf)[i] = (uint8_t)(i * 7 + 3);
    return 0;
}

static int fill_fail(void *user, const hx_gguf_tensor *t, void *buf)
{
    (void)user, (void)t, (void)buf;
    return HX_ERR_IO;
}

static float g_f32_data[3 * 5];
static uint16_t g_f16_data[2 * 3 * 4];

/* A writer holding one key of every value type and three tensors. */
static hx_gguf_writer *make_full_writer(void)
{
    hx_gguf_writer *w = hx_gguf_writer_new();
    uint8_t u8 = 200, b = 1;
    int8_t i8 = -100;
    uint16_t u16 = 60000;
    int16_t i16 = -30000;
    int64_t i64 = -(1ll << 40);
    double f64 = 3.25e100;
    static const int32_t ai32[] = {1, -2, 3, 2000000000};
    static const double af64[] = {0.5, -1e300};
    static const uint8_t au8[] = {0, 255, 7};
    const char *strs[] = {"a", "", "zh \xe4\xb8\xad", "nul\0inside"};
    const size_t lens[] = {1, 0, 6, 10};
    int64_t ne2[2] = {5, 3}, neq[1] = {64}, ne3[3] = {4, 3, 2};
    for (size_t i = 0; i < 15; i++) g_f32_data[i] = (float)i * 0.5f - 2.0f;
    for (size_t i = 0; i < 24; i++) g_f16_data[i] = hx_fp32_to_fp16((float)i);
    if (!w) return NULL;
    hx_gguf_set_str(w, "general.architecture", "test");
    hx_gguf_set_val(w, "k.u8", HX_GGUF_U8, &u8);
    hx_gguf_set_val(w, "k.i8", HX_GGUF_I8, &i8);
    hx_gguf_set_val(w, "k.u16", HX_GGUF_U16, &u16);
    hx_gguf_set_val(w, "k.i16", HX_GGUF_I16, &i16);
    hx_gguf_set_u32(w, "k.u32", 4000000000u);
    hx_gguf_set_i32(w, "k.i32", -7);
    hx_gguf_set_f32(w, "k.f32", 1.5f);
    hx_gguf_set_val(w, "k.bool", HX_GGUF_BOOL, &b);
    hx_gguf_set_bool(w, "k.false", 0);
    hx_gguf_set_u64(w, "k.u64", UINT64_MAX);
    hx_gguf_set_val(w, "k.i64", HX_GGUF_I64, &i64);
    hx_gguf_set_val(w, "k.f64", HX_GGUF_F64, &f64);
    hx_gguf_set_str(w, "k.str", "first");
    hx_gguf_set_str(w, "k.str", "hello, world"); /* replaces */
    hx_gguf_set_arr(w, "a.i32", HX_GGUF_I32, ai32, 4);
    hx_gguf_set_arr(w, "a.f64", HX_GGUF_F64, af64, 2);
    hx_gguf_set_arr(w, "a.u8", HX_GGUF_U8, au8, 3);
    hx_gguf_set_arr(w, "a.empty", HX_GGUF_F32, NULL, 0);
    hx_gguf_set_arr_str(w, "a.str", strs, lens, 4);
    hx_gguf_add_tensor(w, "t.f32", HX_TYPE_F32, 2, ne2, g_f32_data, NULL, NULL);
    hx_gguf_add_tensor(w, "t.q8", HX_TYPE_Q8_0, 1, neq, NULL, fill_q8, NULL);
    hx_gguf_add_tensor(w, "t.f16", HX_TYPE_F16, 3, ne3, g_f16_data, NULL, NULL);
    return w;
}

static void check_full_scalars(const hx_gguf *g)
{
    int64_t v = 0;
    uint32_t u = 0;
    float f = 0;
    int b = -1;
    const char *s = NULL;
    EXPECT_EQ_INT(hx_gguf_n_kv(g), 19 + (hx_gguf_alignment(g) != 32));
    EXPECT_EQ_INT(hx_gguf_get_str(g, "general.architecture", &s), HX_OK);
    EXPECT_STR_EQ(s, "test");
    EXPECT_EQ_INT(hx_gguf_get_i64(g, "k.u8", &v), HX_OK);
    EXPECT_EQ_INT(v, 200);
    EXPECT_EQ_INT(hx_gguf_get_i64(g, "k.i8", &v), HX_OK);
    EXPECT_EQ_INT(v, -100);
    EXPECT_EQ_INT(hx_gguf_get_i64(g, "k.u16", &v), HX_OK);
    EXPECT_EQ_INT(v, 60000);
    EXPECT_EQ_INT(hx_gguf_get_i64(g, "k.i16", &v), HX_OK);
    EXPECT_EQ_INT(v, -30000);
    EXPECT_EQ_INT(hx_gguf_get_u32(g, "k.u32", &u), HX_OK);
    EXPECT(u == 4000000000u);
    EXPECT_EQ_INT(hx_gguf_get_u32(g, "k.i32", &u), HX_ERR_RANGE);
    EXPECT_EQ_INT(hx_gguf_get_i64(g, "k.i32", &v), HX_OK);
    EXPECT_EQ_INT(v, -7);
    EXPECT_EQ_INT(hx_gguf_get_f32(g, "k.f32", &f), HX_OK);
    EXPECT(f == 1.5f);
    EXPECT_EQ_INT(hx_gguf_get_bool(g, "k.bool", &b), HX_OK);
    EXPECT_EQ_INT(b, 1);
    EXPECT_EQ_INT(hx_gguf_get_bool(g, "k.false", &b), HX_OK);
    EXPECT_EQ_INT(b, 0);
    EXPECT_EQ_INT(hx_gguf_get_i64(g, "k.u64", &v), HX_ERR_RANGE);
    EXPECT_EQ_INT(hx_gguf_get_i64(g, "k.i64", &v), HX_OK);
    EXPECT_EQ_INT(v, -(1ll << 40));
    EXPECT_EQ_INT(hx_gguf_get_f32(g, "k.f64", &f), HX_ERR_RANGE); /* > FLT_MAX */
    double d = 0;
    EXPECT_EQ_INT(hx_gguf_get_f64(g, "k.f64", &d), HX_OK);
    EXPECT(d == 3.25e100);
    EXPECT_EQ_INT(hx_gguf_get_f64(g, "k.f32", &d), HX_OK);
    EXPECT(d == 1.5);
    EXPECT(hx_gguf_arr_f32(g, "a.f64", 1) == -INFINITY);
    EXPECT_EQ_INT(hx_gguf_get_str(g, "k.str", &s), HX_OK);
    EXPECT_STR_EQ(s, "hello, world");
    EXPECT_EQ_INT(hx_gguf_get_str(g, "k.u8", &s), HX_ERR_FORMAT);
    EXPECT_EQ_INT(hx_gguf_get_i64(g, "k.str", &v), HX_ERR_FORMAT);
    EXPECT_EQ_INT(hx_gguf_get_i64(g, "no.such", &v), HX_ERR_NOTFOUND);
    EXPECT_EQ_INT(hx_gguf_find_key(g, "no.such"), -1);
    EXPECT_EQ_INT(hx_gguf_kv_type(g, hx_gguf_find_key(g, "k.i16")), HX_GGUF_I16);
    EXPECT_STR_EQ(hx_gguf_key_at(g, 0), "general.architecture");
}

static void check_full_arrays(const hx_gguf *g)
{
    int et = -1;
    uint64_t n = 0;
    size_t len = 0;
    const char *s;
    EXPECT_EQ_INT(hx_gguf_get_arr(g, "a.i32", &et, &n), HX_OK);
    EXPECT_EQ_INT(et, HX_GGUF_I32);
    EXPECT_EQ_INT(n, 4);
    EXPECT_EQ_INT(hx_gguf_arr_i64(g, "a.i32", 1), -2);
    EXPECT_EQ_INT(hx_gguf_arr_i64(g, "a.i32", 3), 2000000000);
    EXPECT_EQ_INT(hx_gguf_arr_i64(g, "a.i32", 4), 0); /* out of range */
    EXPECT(hx_gguf_arr_f32(g, "a.f64", 0) == 0.5f);
    EXPECT(hx_gguf_arr_f32(g, "a.i32", 2) == 3.0f);
    EXPECT_EQ_INT(hx_gguf_arr_i64(g, "a.u8", 1), 255);
    const uint8_t *p = hx_gguf_arr_data(g, "a.u8");
    ASSERT(p);
    EXPECT(p[0] == 0 && p[1] == 255 && p[2] == 7);
    EXPECT_EQ_INT(hx_gguf_get_arr(g, "a.empty", &et, &n), HX_OK);
    EXPECT_EQ_INT(n, 0);
    EXPECT_EQ_INT(et, HX_GGUF_F32);
    EXPECT_EQ_INT(hx_gguf_get_arr(g, "a.str", &et, &n), HX_OK);
    EXPECT_EQ_INT(et, HX_GGUF_STRING);
    EXPECT_EQ_INT(n, 4);
    EXPECT_STR_EQ(hx_gguf_arr_str(g, "a.str", 0, &len), "a");
    EXPECT_STR_EQ(hx_gguf_arr_str(g, "a.str", 1, &len), "");
    EXPECT_EQ_INT(len, 0);
    s = hx_gguf_arr_str(g, "a.str", 3, &len);
    EXPECT_EQ_INT(len, 10);
    EXPECT(s && memcmp(s, "nul\0inside", 10) == 0 && s[10] == '\0');
    EXPECT(hx_gguf_arr_str(g, "a.str", 4, &len) == NULL);
    EXPECT(hx_gguf_arr_str(g, "a.i32", 0, &len) == NULL);
    EXPECT(hx_gguf_arr_data(g, "a.str") == NULL);
    EXPECT_EQ_INT(hx_gguf_get_arr(g, "k.u8", &et, &n), HX_ERR_FORMAT);
}

static void check_full_tensors(const hx_gguf *g, size_t align)
{
    EXPECT_EQ_INT(hx_gguf_n_tensors(g), 3);
    EXPECT_EQ_INT(hx_gguf_alignment(g), align);
    EXPECT_EQ_INT(hx_gguf_data_offset(g) % align, 0);
    const hx_gguf_tensor *t = hx_gguf_find_tensor(g, "t.f32");
    ASSERT(t && t == hx_gguf_tensor_at(g, 0));
    EXPECT_EQ_INT(t->type, HX_TYPE_F32);
    EXPECT_EQ_INT(t->n_dims, 2);
    EXPECT(t->ne[0] == 5 && t->ne[1] == 3 && t->ne[2] == 1 && t->ne[3] == 1);
    EXPECT_EQ_INT(t->nbytes, 60);
    EXPECT(memcmp(t->data, g_f32_data, 60) == 0);
    t = hx_gguf_find_tensor(g, "t.q8");
    ASSERT(t);
    EXPECT_EQ_INT(t->nbytes, 68);
    EXPECT_EQ_INT(t->offset % align, 0);
    EXPECT(((const uint8_t *)t->data)[0] == 3 && ((const uint8_t *)t->data)[67] == (uint8_t)(67 * 7 + 3));
    t = hx_gguf_find_tensor(g, "t.f16");
    ASSERT(t);
    EXPECT_EQ_INT(t->n_dims, 3);
    EXPECT_EQ_INT(t->offset % align, 0);
    EXPECT(memcmp(t->data, g_f16_data, sizeof g_f16_data) == 0);
    EXPECT(hx_gguf_find_tensor(g, "t.none") == NULL);
    EXPECT(hx_gguf_tensor_at(g, 3) == NULL);
}

static void roundtrip(size_t align)
{
    hx_gguf_writer *w = make_full_writer();
    hx_gguf *g = NULL;
    hx_err err = {0};
    const char *path = tmp_path("rt.gguf");
    ASSERT(w);
    if (align != 32) hx_gguf_writer_set_alignment(w, align);
    EXPECT_EQ_INT(hx_gguf_writer_write(w, path, &err), HX_OK);
    hx_gguf_writer_free(w);
    ASSERT(hx_gguf_open(path, &g, &err) == HX_OK);
    EXPECT_EQ_INT(hx_gguf_version(g), 3);
    EXPECT_STR_EQ(hx_gguf_path(g), path);
    check_full_scalars(g);
    check_full_arrays(g);
    check_full_tensors(g, align);
    if (align != 32) {
        uint32_t a = 0;
        EXPECT_EQ_INT(hx_gguf_get_u32(g, "general.alignment", &a), HX_OK);
        EXPECT_EQ_INT(a, align);
    }
    hx_gguf_close(g);
    unlink(path);
}

static void test_roundtrip(void) { roundtrip(32); }
static void test_roundtrip_align64(void) { roundtrip(64); }

/* copy_kv + re-adding the tensors rewrites a file with the same content. */
static void test_copy_kv(void)
{
    hx_gguf_writer *w = make_full_writer(), *w2 = hx_gguf_writer_new();
    hx_gguf *g = NULL, *g2 = NULL;
    hx_err err = {0};
    char p1[512];
    snprintf(p1, sizeof p1, "%s", tmp_path("copy1.gguf"));
    const char *p2 = tmp_path("copy2.gguf");
    ASSERT(w && w2);
    ASSERT(hx_gguf_writer_write(w, p1, &err) == HX_OK);
    ASSERT(hx_gguf_open(p1, &g, &err) == HX_OK);
    EXPECT_EQ_INT(hx_gguf_copy_kv(w2, g), HX_OK);
    for (int64_t i = 0; i < hx_gguf_n_tensors(g); i++) {
        const hx_gguf_tensor *t = hx_gguf_tensor_at(g, i);
        EXPECT_EQ_INT(hx_gguf_add_tensor(w2, t->name, t->type, t->n_dims,
                                         t->ne, t->data, NULL, NULL), HX_OK);
    }
    EXPECT_EQ_INT(hx_gguf_writer_write(w2, p2, &err), HX_OK);
    size_t n1 = 0, n2 = 0;
    uint8_t *d1 = slurp(p1, &n1), *d2 = slurp(p2, &n2);
    EXPECT(d1 && d2 && n1 == n2 && memcmp(d1, d2, n1) == 0);
    ASSERT(hx_gguf_open(p2, &g2, &err) == HX_OK);
    check_full_scalars(g2);
    check_full_arrays(g2);
    free(d1);
    free(d2);
    hx_gguf_close(g);
    hx_gguf_close(g2);
    hx_gguf_writer_free(w);
    hx_gguf_writer_free(w2);
    unlink(p1);
    unlink(p2);
}

static void test_writer_rejects(void)
{
    hx_gguf_writer *w = hx_gguf_writer_new();
    hx_err err = {0};
    float d[64] = {0};
    int64_t ne[2] = {64, 1}, bad[2] = {33, 1}, zero[1] = {0};
    char longname[80];
    ASSERT(w);
    memset(longname, 'x', 64);
    longname[64] = '\0';
    EXPECT_EQ_INT(hx_gguf_add_tensor(w, "a", HX_TYPE_F32, 2, ne, d, NULL, NULL), HX_OK);
    EXPECT_EQ_INT(hx_gguf_add_tensor(w, "a", HX_TYPE_F32, 2, ne, d, NULL, NULL), HX_ERR_INVALID);
    EXPECT_EQ_INT(hx_gguf_add_tensor(w, "b", HX_TYPE_Q4_0, 2, bad, d, NULL, NULL), HX_ERR_INVALID);
    EXPECT_EQ_INT(hx_gguf_add_tensor(w, "c", HX_TYPE_F32, 1, zero, d, NULL, NULL), HX_ERR_INVALID);
    EXPECT_EQ_INT(hx_gguf_add_tensor(w, "d", 19, 2, ne, d, NULL, NULL), HX_ERR_INVALID);
    EXPECT_EQ_INT(hx_gguf_add_tensor(w, "e", HX_TYPE_F32, 5, ne, d, NULL, NULL), HX_ERR_INVALID);
    EXPECT_EQ_INT(hx_gguf_add_tensor(w, "f", HX_TYPE_F32, 2, ne, NULL, NULL, NULL), HX_ERR_INVALID);
    EXPECT_EQ_INT(hx_gguf_add_tensor(w, longname, HX_TYPE_F32, 2, ne, d, NULL, NULL), HX_ERR_INVALID);
    EXPECT_EQ_INT(hx_gguf_set_u32(w, "general.alignment", 48), HX_ERR_INVALID);
    EXPECT_EQ_INT(hx_gguf_set_f32(w, "general.alignment", 32), HX_ERR_INVALID);
    EXPECT_EQ_INT(hx_gguf_set_arr(w, "x", HX_GGUF_STRING, d, 1), HX_ERR_INVALID);
    /* A failing fill callback fails the write and leaves no file. */
    EXPECT_EQ_INT(hx_gguf_add_tensor(w, "g", HX_TYPE_F32, 2, ne, NULL, fill_fail, NULL), HX_OK);
    const char *path = tmp_path("fail.gguf");
    EXPECT_EQ_INT(hx_gguf_writer_write(w, path, &err), HX_ERR_IO);
    EXPECT(strstr(err.msg, "tensor 'g'") != NULL);
    EXPECT(access(path, F_OK) != 0);
    hx_gguf_writer_free(w);
    hx_gguf_writer_free(NULL);
    hx_gguf_close(NULL);
}

/* ---- the real files in ../shared/data ---- */

static void test_stories260k(void)
{
    const char *path = test_shared_file("models/stories260K.gguf");
    hx_gguf *g = NULL;
    hx_err err = {0};
    const char *s = NULL;
    uint32_t u = 0;
    float eps = 0;
    if (!path) return;
    ASSERT(hx_gguf_open(path, &g, &err) == HX_OK);
    EXPECT_EQ_INT(hx_gguf_version(g), 3);
    EXPECT_EQ_INT(hx_gguf_get_str(g, "general.architecture", &s), HX_OK);
    EXPECT_STR_EQ(s, "llama");
    EXPECT_EQ_INT(hx_gguf_get_str(g, "tokenizer.ggml.model", &s), HX_OK);
    EXPECT_STR_EQ(s, "llama");
    EXPECT_EQ_INT(hx_gguf_get_u32(g, "llama.embedding_length", &u), HX_OK);
    EXPECT_EQ_INT(u, 64);
    EXPECT_EQ_INT(hx_gguf_get_u32(g, "llama.block_count", &u), HX_OK);
    EXPECT_EQ_INT(u, 5);
    EXPECT_EQ_INT(hx_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &eps), HX_OK);
    EXPECT(fabsf(eps - 1e-5f) < 1e-9f);
    EXPECT_EQ_INT(hx_gguf_n_tensors(g), 48); /* 3 + 5 layers * 9 */
    const hx_gguf_tensor *t = hx_gguf_find_tensor(g, "token_embd.weight");
    ASSERT(t);
    EXPECT_EQ_INT(t->type, HX_TYPE_F32);
    EXPECT(t->ne[0] == 64 && t->ne[1] == 512);
    t = hx_gguf_find_tensor(g, "blk.4.ffn_down.weight");
    ASSERT(t);
    EXPECT(t->ne[0] == 172 && t->ne[1] == 64);
    int et;
    uint64_t n;
    EXPECT_EQ_INT(hx_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n), HX_OK);
    EXPECT_EQ_INT(n, 512);
    EXPECT_EQ_INT(hx_gguf_arr_i64(g, "tokenizer.ggml.token_type", 0), 2); /* <unk> */
    /* Tensor data lies inside the mapping and in file order. */
    const hx_gguf_tensor *last = hx_gguf_tensor_at(g, 47);
    EXPECT(hx_gguf_data_offset(g) + last->offset + last->nbytes <= hx_gguf_file_size(g));
    hx_gguf_close(g);
}

static void check_vocab(const char *rel, const char *model, uint64_t n_tokens)
{
    const char *path = test_shared_file(rel);
    hx_gguf *g = NULL;
    hx_err err = {0};
    const char *s = NULL;
    int et;
    uint64_t n = 0;
    if (!path) return;
    ASSERT(hx_gguf_open(path, &g, &err) == HX_OK);
    EXPECT_EQ_INT(hx_gguf_n_tensors(g), 0);
    EXPECT_EQ_INT(hx_gguf_get_str(g, "tokenizer.ggml.model", &s), HX_OK);
    EXPECT_STR_EQ(s, model);
    EXPECT_EQ_INT(hx_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n), HX_OK);
    EXPECT_EQ_INT(et, HX_GGUF_STRING);
    EXPECT_EQ_INT(n, n_tokens);
    hx_gguf_close(g);
}

static void test_vocab_qwen2(void)
{
    check_vocab("vocab/ggml-vocab-qwen2.gguf", "gpt2", 151936);
}

static void test_vocab_llama_bpe(void)
{
    check_vocab("vocab/ggml-vocab-llama-bpe.gguf", "gpt2", 128256);
}

static void test_vocab_llama_spm(void)
{
    check_vocab("vocab/ggml-vocab-llama-spm.gguf", "llama", 32000);
}

/* ---- broken files ----
 * Built byte by byte so that each lie is exactly where the test says. */

typedef struct fb {
    uint8_t d[4096];
    size_t n;
} fb;

static void fb_bytes(fb *b, const void *p, size_t n)
{
    if (b->n + n > sizeof b->d) abort();
    memcpy(b->d + b->n, p, n);
    b->n += n;
}
static void fb_u32(fb *b, uint32_t v) { fb_bytes(b, &v, 4); }
static void fb_u64(fb *b, uint64_t v) { fb_bytes(b, &v, 8); }
static void fb_str(fb *b, const char *s)
{
    fb_u64(b, strlen(s));
    fb_bytes(b, s, strlen(s));
}
static void fb_header(fb *b, uint64_t n_tensors, uint64_t n_kv)
{
    b->n = 0;
    fb_bytes(b, "GGUF", 4);
    fb_u32(b, 3);
    fb_u64(b, n_tensors);
    fb_u64(b, n_kv);
}
static void fb_kv_u32(fb *b, const char *key, uint32_t v)
{
    fb_str(b, key);
    fb_u32(b, HX_GGUF_U32);
    fb_u32(b, v);
}
/* A tensor info with n_dims dims from ne. */
static void fb_tensor(fb *b, const char *name, uint32_t n_dims,
                      const uint64_t *ne, uint32_t type, uint64_t offset)
{
    fb_str(b, name);
    fb_u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) fb_u64(b, ne[d]);
    fb_u32(b, type);
    fb_u64(b, offset);
}
static void fb_pad(fb *b, size_t align)
{
    static const uint8_t z[64];
    fb_bytes(b, z, (align - b->n % align) % align);
}
static void fb_zeros(fb *b, size_t n)
{
    while (n--) fb_bytes(b, "", 1);
}

/* Expects the file in b to fail with rc and a message containing want. */
#define EXPECT_BROKEN(b, rc_, want)                                          \
    do {                                                                     \
        hx_err e_ = {0};                                                     \
        int r_ = open_copy((b)->d, (b)->n, &e_);                             \
        EXPECT_EQ_INT(r_, (rc_));                                            \
        if (!strstr(e_.msg, (want)))                                         \
            test_fail_at(__FILE__, __LINE__, "message \"%s\" lacks \"%s\"",  \
                         e_.msg, (want));                                    \
    } while (0)

static void test_broken_header(void)
{
    fb b;
    fb_header(&b, 0, 0);
    EXPECT_BROKEN(&(fb){.n = 0}, HX_ERR_FORMAT, "truncated file: magic");
    memcpy(b.d, "GGUX", 4);
    EXPECT_BROKEN(&b, HX_ERR_FORMAT, "bad magic 47 47 55 58");
    fb_header(&b, 0, 0);
    memcpy(b.d + 4, &(uint32_t){1}, 4);
    EXPECT_BROKEN(&b, HX_ERR_FORMAT, "unsupported version 1");
    memcpy(b.d + 4, &(uint32_t){4}, 4);
    EXPECT_BROKEN(&b, HX_ERR_FORMAT, "unsupported version 4");
    memcpy(b.d + 4, &(uint32_t){0x03000000}, 4);
    EXPECT_BROKEN(&b, HX_ERR_FORMAT, "big-endian");
    fb_header(&b, 0, 0);
    b.n = 20;
    EXPECT_BROKEN(&b, HX_ERR_FORMAT, "truncated file: key count of the header at byte 16");
    fb_header(&b, 0, 1000);
    EXPECT_BROKEN(&b, HX_ERR_FORMAT, "key count 1000 at byte 16 is larger than the file could hold");
    fb_header(&b, (uint64_t)1 << 60, 0);
    EXPECT_BROKEN(&b, HX_ERR_FORMAT, "tensor count 1152921504606846976 at byte 8 is larger");
    fb_header(&b, 0, 0); /* an empty but valid file */
    EXPECT_BROKEN(&b, HX_OK, "");
    fb_header(&b, 0, 0);
    memcpy(b.d + 4, &(uint32_t){2}, 4); /* version 2 has the same layout */
    EXPECT_BROKEN(&b, HX_OK, "");
}

static void test_broken_metadata(void)
{
    fb b;
    fb_header(&b, 0, 1);
    fb_u64(&b, 100); /* key length past the end */
    fb_bytes(&b, "abc", 3);
    fb_zeros(&b, 10);
    EXPECT_BROKEN(&b, HX_ERR_FORMAT, "name of key #0 at byte 24 claims 100 bytes, past the end");
    fb_header(&b, 0, 1);
    fb_u64(&b, 70000); /* absurd key length inside a big enough file */
    b.n = 0;
    {
        static uint8_t big[70100];
        memcpy(big, "GGUF", 4);
        memcpy(big + 4, &(uint32_t){3}, 4);
        memcpy(big + 8, &(uint64_t){0}, 8);
        memcpy(big + 16, &(uint64_t){1}, 8);
        memcpy(big + 24, &(uint64_t){70000}, 8);
        hx_err e = {0};
        EXPECT_EQ_INT(open_copy(big, sizeof big, &e), HX_ERR_FORMAT);
        EXPECT(strstr(e.msg, "more than the limit of 65535") != NULL);
    }
    fb_header(&b, 0, 1);
    fb_str(&b, "k");
    fb_u32(&b, 13);
    fb_u32(&b, 0);
    EXPECT_BROKEN(&b, HX_ERR_FORMAT, "unknown value type 13 of key 'k' at byte 33");
    fb_header(&b, 0, 1);
    fb_str(&b, "s");
    fb_u32(&b, HX_GGUF_STRING);
    fb_u64(&b, 50);
    fb_str(&b, "short");
    EXPECT_BROKEN(&b, HX_ERR_FORMAT, "string value of key 's' at byte 37 claims 50 bytes");
    fb_header(&b, 0, 2);
    fb_kv_u32(&b, "dup", 1);
    fb_kv_u32(&b, "dup", 2);
    EXPECT_BROKEN(&b, HX_ERR_FORMAT, "duplicate key 'dup' (entries #0 and #1)");
    fb_header(&b, 0, 1);
    fb_str(&b, "u");
    fb_u32(&b, HX_GGUF_U64);
    fb_u32(&b, 5); /* u64 value cut short */
    EXPECT_BROKEN(&b, HX_ERR_FORMAT, "truncated file: value of key 'u' at byte 37 needs 8 bytes, only 4 left");
}

static void test_broken_arrays(void)
{
    fb b;
    fb_header(&b, 0, 1);
    fb_str(&b, "nest");
    fb_u32(&b, HX_GGUF_ARRAY);
    fb_u32(&b, HX_GGUF_ARRAY);
    fb_u64(&b, 1);
    fb_u32(&b, HX_GGUF_U8);
    fb_u64(&b, 1);
    fb_zeros(&b, 1);
    EXPECT_BROKEN(&b, HX_ERR_UNSUPPORTED, "key 'nest' is an array of arrays");
    fb_header(&b, 0, 1);
    fb_str(&b, "a");
    fb_u32(&b, HX_GGUF_ARRAY);
    fb_u32(&b, 99);
    fb_u64(&b, 0);
    EXPECT_BROKEN(&b, HX_ERR_FORMAT, "unknown array element type 99 of key 'a'");
    fb_header(&b, 0, 1);
    fb_str(&b, "a");
    fb_u32(&b, HX_GGUF_ARRAY);
    fb_u32(&b, HX_GGUF_U64);
    fb_u64(&b, (uint64_t)1 << 61); /* * 8 bytes overflows 64 bits */
    fb_zeros(&b, 16);
    EXPECT_BROKEN(&b, HX_ERR_FORMAT, "array length 2305843009213693952 at byte 41 is larger than the file could hold");
    fb_header(&b, 0, 1);
    fb_str(&b, "a");
    fb_u32(&b, HX_GGUF_ARRAY);
    fb_u32(&b, HX_GGUF_STRING);
    fb_u64(&b, UINT64_MAX);
    EXPECT_BROKEN(&b, HX_ERR_FORMAT, "string array length 18446744073709551615");
    fb_header(&b, 0, 1);
    fb_str(&b, "a");
    fb_u32(&b, HX_GGUF_ARRAY);
    fb_u32(&b, HX_GGUF_STRING);
    fb_u64(&b, 2);
    fb_str(&b, "ok");
    fb_u64(&b, 1000); /* second string lies */
    fb_zeros(&b, 8);
    EXPECT_BROKEN(&b, HX_ERR_FORMAT, "array string of key 'a' at byte 59 claims 1000 bytes");
}

static void test_broken_alignment(void)
{
    fb b;
    fb_header(&b, 0, 1);
    fb_kv_u32(&b, "general.alignment", 48);
    EXPECT_BROKEN(&b, HX_ERR_FORMAT, "general.alignment 48 is not a power of two");
    fb_header(&b, 0, 1);
    fb_kv_u32(&b, "general.alignment", 0);
    EXPECT_BROKEN(&b, HX_ERR_FORMAT, "general.alignment 0 is not a power of two");
    fb_header(&b, 0, 1);
    fb_str(&b, "general.alignment");
    fb_u32(&b, HX_GGUF_STRING);
    fb_str(&b, "32");
    EXPECT_BROKEN(&b, HX_ERR_FORMAT, "general.alignment has type string, expected u32");
}

/* One F32 tensor [8, 2] (64 bytes) with the given info, data and padding. */
static void fb_one_tensor(fb *b, uint32_t n_dims, const uint64_t *ne,
                          uint32_t type, uint64_t offset, size_t data)
{
    fb_header(b, 1, 0);
    fb_tensor(b, "w", n_dims, ne, type, offset);
    fb_pad(b, 32);
    fb_zeros(b, data);
}

static void test_broken_tensor_shapes(void)
{
    fb b;
    const uint64_t ok[2] = {8, 2}, zero[2] = {8, 0}, neg[2] = {(uint64_t)-1, 2};
    const uint64_t huge[2] = {(uint64_t)1 << 32, (uint64_t)1 << 32};
    const uint64_t bytes_ovf[2] = {(uint64_t)1 << 31, (uint64_t)1 << 31};
    const uint64_t q33[1] = {33};
    const uint64_t five[5] = {1, 1, 1, 1, 1};
    fb_one_tensor(&b, 2, ok, HX_TYPE_F32, 0, 64);
    EXPECT_BROKEN(&b, HX_OK, "");
    fb_one_tensor(&b, 0, ok, HX_TYPE_F32, 0, 64);
    EXPECT_BROKEN(&b, HX_ERR_FORMAT, "tensor 'w' has 0 dimensions at byte 33");
    fb_one_tensor(&b, 5, five, HX_TYPE_F32, 0, 64);
    EXPECT_BROKEN(&b, HX_ERR_FORMAT, "tensor 'w' has 5 dimensions");
    fb_one_tensor(&b, 2, zero, HX_TYPE_F32, 0, 64);
    EXPECT_BROKEN(&b, HX_ERR_FORMAT, "tensor 'w' has dimension 1 = 0");
    fb_one_tensor(&b, 2, neg, HX_TYPE_F32, 0, 64);
    EXPECT_BROKEN(&b, HX_ERR_FORMAT, "tensor 'w' has dimension 0 = -1");
    fb_one_tensor(&b, 2, huge, HX_TYPE_F32, 0, 64);
    EXPECT_BROKEN(&b, HX_ERR_FORMAT, "tensor 'w' element count overflows");
    fb_one_tensor(&b, 2, bytes_ovf, HX_TYPE_F64, 0, 64);
    EXPECT_BROKEN(&b, HX_ERR_FORMAT, "tensor 'w' byte size overflows");
    fb_one_tensor(&b, 2, ok, 19, 0, 64);
    EXPECT_BROKEN(&b, HX_ERR_UNSUPPORTED, "tensor 'w' has tensor type 19 (IQ1_S)");
    fb_one_tensor(&b, 2, ok, 1000, 0, 64);
    EXPECT_BROKEN(&b, HX_ERR_UNSUPPORTED, "type 1000 (unknown)");
    fb_one_tensor(&b, 1, q33, HX_TYPE_Q4_0, 0, 64);
    EXPECT_BROKEN(&b, HX_ERR_FORMAT, "33 elements per row, not a multiple of the Q4_0 block size 32");
    fb_header(&b, 1, 0);
    fb_tensor(&b, "a_name_that_is_far_too_long_for_ggml_which_allows_only_63_bytes_x",
              2, ok, HX_TYPE_F32, 0);
    EXPECT_BROKEN(&b, HX_ERR_FORMAT, "name of tensor #0 at byte 24 is 65 bytes long, more than the limit of 63");
}

static void test_broken_tensor_data(void)
{
    fb b;
    const uint64_t ok[2] = {8, 2};
    fb_one_tensor(&b, 2, ok, HX_TYPE_F32, 4, 64);
    EXPECT_BROKEN(&b, HX_ERR_FORMAT, "tensor 'w' data offset 4 (at byte 57) is not a multiple of the alignment 32");
    fb_one_tensor(&b, 2, ok, HX_TYPE_F32, 0, 63);
    EXPECT_BROKEN(&b, HX_ERR_FORMAT, "tensor 'w' data (64 bytes at data offset 0, file byte 96) runs past the end of the file (size 159)");
    fb_one_tensor(&b, 2, ok, HX_TYPE_F32, (uint64_t)1 << 63, 64);
    EXPECT_BROKEN(&b, HX_ERR_FORMAT, "runs past the end of the file");
    fb_header(&b, 1, 0);
    fb_tensor(&b, "w", 2, ok, HX_TYPE_F32, 0);
    EXPECT_BROKEN(&b, HX_ERR_FORMAT, "tensor data section would start at byte 96, past the end of the file (size 65)");
    fb_header(&b, 2, 0);
    fb_tensor(&b, "a", 2, ok, HX_TYPE_F32, 0);
    fb_tensor(&b, "b", 2, ok, HX_TYPE_F32, 32);
    fb_pad(&b, 32);
    fb_zeros(&b, 96);
    EXPECT_BROKEN(&b, HX_ERR_FORMAT, "tensors 'a' (data offset 0, 64 bytes) and 'b' (data offset 32) overlap");
    fb_header(&b, 2, 0);
    fb_tensor(&b, "a", 2, ok, HX_TYPE_F32, 0);
    fb_tensor(&b, "a", 2, ok, HX_TYPE_F32, 64);
    fb_pad(&b, 32);
    fb_zeros(&b, 128);
    EXPECT_BROKEN(&b, HX_ERR_FORMAT, "duplicate tensor name 'a' (tensors #0 and #1)");
    fb_header(&b, 2, 0); /* the same two tensors placed right: valid */
    fb_tensor(&b, "a", 2, ok, HX_TYPE_F32, 64);
    fb_tensor(&b, "b", 2, ok, HX_TYPE_F32, 0);
    fb_pad(&b, 32);
    fb_zeros(&b, 128);
    EXPECT_BROKEN(&b, HX_OK, "");
}

/* Every prefix of a valid file that cuts its header, metadata, tensor
 * infos or tensor data fails with a clear message, never a crash. */
static void test_broken_truncations(void)
{
    hx_gguf_writer *w = make_full_writer();
    hx_gguf *g = NULL;
    hx_err err = {0};
    const char *path = tmp_path("trunc.gguf");
    size_t size = 0, need;
    uint8_t *data;
    int bad = 0;
    ASSERT(w);
    ASSERT(hx_gguf_writer_write(w, path, &err) == HX_OK);
    hx_gguf_writer_free(w);
    data = slurp(path, &size);
    unlink(path);
    ASSERT(data);
    ASSERT(hx_gguf_open_buffer(data, size, &g, &err) == HX_OK);
    const hx_gguf_tensor *last = hx_gguf_tensor_at(g, 2);
    need = hx_gguf_data_offset(g) + last->offset + last->nbytes;
    hx_gguf_close(g);
    for (size_t n = 0; n < size; n++) {
        int rc = open_copy(data, n, &err);
        int want = n < need ? HX_ERR_FORMAT : HX_OK;
        int clear = rc == HX_OK || strstr(err.msg, "truncated file") ||
                    strstr(err.msg, "could hold") ||
                    strstr(err.msg, "past the end");
        if ((rc != want || !clear) && bad++ < 5)
            test_fail_at(__FILE__, __LINE__, "prefix %zu/%zu: rc %d: %s", n,
                         size, rc, err.msg);
    }
    free(data);
}

/* Flipping each header byte of a real file never crashes the reader and
 * gives either success or an error with a message. */
static void test_broken_flips(void)
{
    const char *path = test_shared_file("models/stories260K.gguf");
    size_t size = 0;
    uint8_t *data;
    hx_gguf *g = NULL;
    hx_err err = {0};
    int n_err = 0;
    if (!path) return;
    ASSERT((data = slurp(path, &size)));
    ASSERT(hx_gguf_open_buffer(data, size, &g, &err) == HX_OK);
    size_t head = hx_gguf_data_offset(g);
    hx_gguf_close(g);
    for (size_t i = 0; i < head; i += 7) {
        uint8_t old = data[i];
        data[i] ^= 0xa5;
        err.msg[0] = '\0';
        int rc = hx_gguf_open_buffer(data, size, &g, &err);
        if (rc) {
            n_err++;
            EXPECT(rc == HX_ERR_FORMAT || rc == HX_ERR_UNSUPPORTED);
            EXPECT(strncmp(err.msg, "gguf: ", 6) == 0);
        }
        hx_gguf_close(g);
        g = NULL;
        data[i] = old;
    }
    EXPECT(n_err > 0);
    free(data);
}

static void test_open_errors(void)
{
    hx_gguf *g = (hx_gguf *)1;
    hx_err err = {0};
    const char *path = tmp_path("empty.gguf");
    EXPECT_EQ_INT(hx_gguf_open("/nonexistent/x.gguf", &g, &err), HX_ERR_NOTFOUND);
    EXPECT(g == NULL);
    EXPECT(strstr(err.msg, "/nonexistent/x.gguf") != NULL);
    ASSERT(hx_write_file_atomic(path, "", 0, &err) == HX_OK);
    EXPECT_EQ_INT(hx_gguf_open(path, &g, &err), HX_ERR_FORMAT);
    EXPECT(strstr(err.msg, "is empty") != NULL);
    ASSERT(hx_write_file_atomic(path, "GGUF\3\0\0\0", 8, &err) == HX_OK);
    EXPECT_EQ_INT(hx_gguf_open(path, &g, &err), HX_ERR_FORMAT);
    EXPECT(strstr(err.msg, path) && strstr(err.msg, "truncated file: tensor count"));
    unlink(path);
}


/* ---- fuzz seeds: HX_GGUF_SEED_DIR=tests/fuzz/corpus/fuzz_gguf ./test_gguf
 * writes the small files the fuzz target starts from. ---- */

static int seed_vocab(const char *path, hx_err *err)
{
    hx_gguf_writer *w = hx_gguf_writer_new();
    const char *toks[] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81the", "a", "b", "ab", "\xf0\x9f\x98\x80"};
    const char *merges[] = {"a b", "\xc4\xa0 t"};
    float scores[8] = {0, 0, 0, -1, -2, -3, -4, -5};
    int32_t types[8] = {2, 3, 3, 1, 1, 1, 1, 6};
    hx_gguf_set_str(w, "general.architecture", "llama");
    hx_gguf_set_str(w, "tokenizer.ggml.model", "llama");
    hx_gguf_set_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, 8);
    hx_gguf_set_arr(w, "tokenizer.ggml.scores", HX_GGUF_F32, scores, 8);
    hx_gguf_set_arr(w, "tokenizer.ggml.token_type", HX_GGUF_I32, types, 8);
    hx_gguf_set_arr_str(w, "tokenizer.ggml.merges", merges, NULL, 2);
    hx_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    hx_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", 1);
    int rc = hx_gguf_writer_write(w, path, err);
    hx_gguf_writer_free(w);
    return rc;
}

static int seed_quant(const char *path, hx_err *err)
{
    hx_gguf_writer *w = hx_gguf_writer_new();
    int64_t nek[2] = {256, 1}, neq[2] = {32, 2};
    hx_gguf_writer_set_alignment(w, 64);
    hx_gguf_set_str(w, "general.architecture", "qwen3");
    hx_gguf_set_u32(w, "qwen3.block_count", 1);
    hx_gguf_add_tensor(w, "blk.0.ffn_up.weight", HX_TYPE_Q4_K, 2, nek, NULL, fill_q8, NULL);
    hx_gguf_add_tensor(w, "blk.0.attn_q.weight", HX_TYPE_Q8_0, 2, neq, NULL, fill_q8, NULL);
    int rc = hx_gguf_writer_write(w, path, err);
    hx_gguf_writer_free(w);
    return rc;
}

static int write_seeds(const char *dir)
{
    char path[1024];
    hx_err err = {0};
    hx_gguf_writer *w = make_full_writer(), *e = hx_gguf_writer_new();
    int rc;
    snprintf(path, sizeof path, "%s/full.gguf", dir);
    rc = hx_gguf_writer_write(w, path, &err);
    snprintf(path, sizeof path, "%s/empty.gguf", dir);
    if (!rc) rc = hx_gguf_writer_write(e, path, &err);
    snprintf(path, sizeof path, "%s/vocab.gguf", dir);
    if (!rc) rc = seed_vocab(path, &err);
    snprintf(path, sizeof path, "%s/quant.gguf", dir);
    if (!rc) rc = seed_quant(path, &err);
    hx_gguf_writer_free(w);
    hx_gguf_writer_free(e);
    if (rc) fprintf(stderr, "writing seeds: %s\n", err.msg);
    return rc ? 1 : 0;
}

int main(void)
{
    const char *seed_dir = getenv("HX_GGUF_SEED_DIR");
    if (seed_dir) return write_seeds(seed_dir);
    RUN(test_type_traits);
    RUN(test_roundtrip);
    RUN(test_roundtrip_align64);
    RUN(test_copy_kv);
    RUN(test_writer_rejects);
    RUN(test_stories260k);
    RUN(test_vocab_qwen2);
    RUN(test_vocab_llama_bpe);
    RUN(test_vocab_llama_spm);
    RUN(test_broken_header);
    RUN(test_broken_metadata);
    RUN(test_broken_arrays);
    RUN(test_broken_alignment);
    RUN(test_broken_tensor_shapes);
    RUN(test_broken_tensor_data);
    RUN(test_broken_truncations);
    RUN(test_broken_flips);
    RUN(test_open_errors);
    return test_summary();
}
