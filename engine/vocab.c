/* vocab.c: loading a tokenizer from GGUF metadata as llama.cpp does
 * (special token ids, attribute fix-ups, EOG set) and the accessors. */
#include <stdlib.h>
#include <string.h>

#include "engine/vocab_int.h"

#define KP "tokenizer.ggml."

/* ---- hashing and maps ---- */

int hx_vmap_init(vmap *m, size_t n_keys)
{
    size_t cap = 16;
    while (cap < n_keys * 2) cap <<= 1;
    m->slots = hx_calloc(cap, sizeof *m->slots);
    m->mask = (uint32_t)(cap - 1);
    return m->slots ? HX_OK : HX_ERR_NOMEM;
}

void hx_vmap_free(vmap *m)
{
    free(m->slots);
    m->slots = NULL;
}

static int span_eq(const char *blob, vspan s, const char *p, size_t n)
{
    return s.len == n && memcmp(blob + s.off, p, n) == 0;
}

/* Slot of text in the token map: its slot, or the empty one to fill. */
static uint32_t tok_slot(const hx_vocab *v, const char *p, size_t n)
{
    uint32_t i = (uint32_t)hx_fnv1a(HX_FNV1A_BASIS, p, n) & v->tok_map.mask;
    for (;;) {
        uint32_t s = v->tok_map.slots[i];
        if (!s || span_eq(v->text, v->texts[s - 1], p, n)) return i;
        i = (i + 1) & v->tok_map.mask;
    }
}

int32_t hx_vocab_find(const hx_vocab *v, const char *text, size_t len)
{
    if (!v || (!text && len)) return -1;
    uint32_t s = v->tok_map.slots[tok_slot(v, text ? text : "", len)];
    return s ? (int32_t)(s - 1) : -1;
}

static uint64_t pair_hash(const char *a, size_t na, const char *b, size_t nb)
{
    uint64_t h = hx_fnv1a(HX_FNV1A_BASIS, a, na);
    h = hx_fnv1a(h ^ 0xff, "\x01", 1);
    return hx_fnv1a(h, b, nb);
}

static uint32_t merge_slot(const hx_vocab *v, const char *a, size_t na,
                           const char *b, size_t nb)
{
    uint32_t i = (uint32_t)pair_hash(a, na, b, nb) & v->merge_map.mask;
    for (;;) {
        uint32_t s = v->merge_map.slots[i];
        if (!s || (span_eq(v->merge_text, v->merge_a[s - 1], a, na) &&
                   span_eq(v->merge_text, v->merge_b[s - 1], b, nb)))
            return i;
        i = (i + 1) & v->merge_map.mask;
    }
}

int32_t hx_vocab_merge_rank(const hx_vocab *v, const char *a, size_t na,
                            const char *b, size_t nb)
{
    if (!v->n_merges) return -1;
    uint32_t s = v->merge_map.slots[merge_slot(v, a, na, b, nb)];
    return s ? (int32_t)(s - 1) : -1;
}

/* ---- loading: tokens ---- */

static int load_tokens(hx_vocab *v, const hx_gguf *g, hx_err *err)
{
    int et;
    uint64_t n;
    if (hx_gguf_get_arr(g, KP "tokens", &et, &n) != HX_OK || et != HX_GGUF_STRING)
        return hx_err_set(err, HX_ERR_FORMAT,
                          "vocab: no string array " KP "tokens");
    if (n == 0 || n >= (1u << 30))
        return hx_err_set(err, HX_ERR_FORMAT, "vocab: %llu tokens",
                          (unsigned long long)n);
    v->n_tokens = (int32_t)n;
    hx_buf b;
    hx_buf_init(&b);
    v->texts = hx_calloc(n, sizeof *v->texts);
    if (!v->texts) return hx_err_set(err, HX_ERR_NOMEM, "vocab: out of memory");
    hx_buf_reserve(&b, (size_t)n * 8); /* a guess; it grows if needed */
    for (uint64_t i = 0; i < n; i++) {
        size_t len = 0;
        const char *s = hx_gguf_arr_str(g, KP "tokens", i, &len);
        v->texts[i].off = (uint32_t)b.len;
        if (!s || len == 0) /* llama.cpp names empty pieces so */
            hx_buf_printf(&b, "[EMPTY_%llu]", (unsigned long long)i);
        else
            hx_buf_append(&b, s, len);
        v->texts[i].len = (uint32_t)(b.len - v->texts[i].off);
        if (b.len >= UINT32_MAX / 2) b.oom = 1;
    }
    if (b.oom) {
        hx_buf_free(&b);
        return hx_err_set(err, HX_ERR_NOMEM, "vocab: token texts too large");
    }
    v->text = b.data ? b.data : hx_strdup("");
    return v->text ? HX_OK : hx_err_set(err, HX_ERR_NOMEM, "vocab: out of memory");
}

static int build_tok_map(hx_vocab *v, hx_err *err)
{
    if (hx_vmap_init(&v->tok_map, (size_t)v->n_tokens))
        return hx_err_set(err, HX_ERR_NOMEM, "vocab: out of memory");
    for (int32_t i = 0; i < v->n_tokens; i++) {
        vspan s = v->texts[i];
        v->tok_map.slots[tok_slot(v, v->text + s.off, s.len)] = (uint32_t)i + 1;
    }
    return HX_OK;
}

/* Maps a token_type value (llama_token_type) to attribute flags. */
static uint16_t attr_of_type(int64_t t)
{
    switch (t) {
    case 1: return HX_TOKEN_NORMAL;
    case 2: return HX_TOKEN_UNKNOWN;
    case 3: return HX_TOKEN_CONTROL;
    case 4: return HX_TOKEN_USER_DEFINED;
    case 5: return HX_TOKEN_UNUSED;
    case 6: return HX_TOKEN_BYTE;
    default: return HX_TOKEN_UNDEFINED;
    }
}

/* Optional per-token array: absent is fine, a wrong length is not. */
static int check_arr(const hx_gguf *g, const char *key, int32_t n, int *has,
                     hx_err *err)
{
    int et;
    uint64_t m;
    *has = 0;
    if (hx_gguf_find_key(g, key) < 0) return HX_OK;
    if (hx_gguf_get_arr(g, key, &et, &m) != HX_OK || et == HX_GGUF_STRING)
        return hx_err_set(err, HX_ERR_FORMAT, "vocab: %s is not a numeric array", key);
    if (m != (uint64_t)n)
        return hx_err_set(err, HX_ERR_FORMAT,
                          "vocab: %s has %llu entries for %d tokens", key,
                          (unsigned long long)m, n);
    *has = 1;
    return HX_OK;
}

static int load_attrs(hx_vocab *v, const hx_gguf *g, hx_err *err)
{
    int has_scores, has_types, rc;
    int32_t n = v->n_tokens;
    if ((rc = check_arr(g, KP "scores", n, &has_scores, err))) return rc;
    if ((rc = check_arr(g, KP "token_type", n, &has_types, err))) return rc;
    v->scores = hx_calloc((size_t)n, sizeof *v->scores);
    v->attr = hx_calloc((size_t)n, sizeof *v->attr);
    v->eog = hx_calloc((size_t)n, 1);
    if (!v->scores || !v->attr || !v->eog)
        return hx_err_set(err, HX_ERR_NOMEM, "vocab: out of memory");
    for (int32_t i = 0; i < n; i++) {
        if (has_scores) v->scores[i] = hx_gguf_arr_f32(g, KP "scores", (uint64_t)i);
        v->attr[i] = has_types
            ? attr_of_type(hx_gguf_arr_i64(g, KP "token_type", (uint64_t)i))
            : HX_TOKEN_NORMAL;
    }
    return HX_OK;
}

/* ---- loading: merges ---- */

static int add_merge(hx_vocab *v, hx_buf *b, const char *s, size_t len,
                     uint32_t i)
{
    const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
    size_t na = sp ? (size_t)(sp - s) : 0; /* no space: an empty pair */
    v->merge_a[i] = (vspan){(uint32_t)b->len, (uint32_t)na};
    hx_buf_append(b, s, na);
    size_t nb = sp ? len - na - 1 : 0;
    v->merge_b[i] = (vspan){(uint32_t)b->len, (uint32_t)nb};
    hx_buf_append(b, sp ? sp + 1 : "", nb);
    return b->oom || b->len >= UINT32_MAX / 2 ? HX_ERR_NOMEM : HX_OK;
}

static int load_merges(hx_vocab *v, const hx_gguf *g, hx_err *err)
{
    int et;
    uint64_t n;
    if (hx_gguf_get_arr(g, KP "merges", &et, &n) != HX_OK || et != HX_GGUF_STRING)
        return hx_err_set(err, HX_ERR_FORMAT,
                          "vocab: byte-level BPE without string array " KP "merges");
    if (n >= (1u << 30))
        return hx_err_set(err, HX_ERR_FORMAT, "vocab: %llu merges",
                          (unsigned long long)n);
    hx_buf b;
    hx_buf_init(&b);
    v->merge_a = hx_calloc(n + 1, sizeof *v->merge_a);
    v->merge_b = hx_calloc(n + 1, sizeof *v->merge_b);
    if (!v->merge_a || !v->merge_b || hx_vmap_init(&v->merge_map, n))
        return hx_err_set(err, HX_ERR_NOMEM, "vocab: out of memory");
    hx_buf_reserve(&b, (size_t)n * 8);
    for (uint64_t i = 0; i < n; i++) {
        size_t len = 0;
        const char *s = hx_gguf_arr_str(g, KP "merges", i, &len);
        if (add_merge(v, &b, s ? s : "", s ? len : 0, (uint32_t)i)) {
            hx_buf_free(&b);
            return hx_err_set(err, HX_ERR_NOMEM, "vocab: merges too large");
        }
    }
    v->merge_text = b.data ? b.data : hx_strdup("");
    v->n_merges = (uint32_t)n;
    for (uint32_t i = 0; i < v->n_merges; i++) {
        vspan a = v->merge_a[i], c = v->merge_b[i];
        uint32_t s = merge_slot(v, v->merge_text + a.off, a.len,
                                v->merge_text + c.off, c.len);
        if (!v->merge_map.slots[s]) v->merge_map.slots[s] = i + 1;
    }
    return v->merge_text ? HX_OK : hx_err_set(err, HX_ERR_NOMEM, "vocab: out of memory");
}

/* ---- loading: model kind and defaults ---- */

static int pre_type_of(const char *pre)
{
    static const char *const qwen2[] = {"qwen2", "deepseek-r1-qwen", NULL};
    static const char *const llama3[] = {"llama3", "llama-v3", "llama-bpe",
                                         "falcon3", "falcon-h1", "pixtral",
                                         "midm-2.0", "lfm2", NULL};
    for (int i = 0; qwen2[i]; i++)
        if (!strcmp(pre, qwen2[i])) return HX_PRE_QWEN2;
    for (int i = 0; llama3[i]; i++)
        if (!strcmp(pre, llama3[i])) return HX_PRE_LLAMA3;
    return 0;
}

static int load_kind(hx_vocab *v, const hx_gguf *g, hx_err *err)
{
    const char *model = NULL, *pre = NULL;
    if (hx_gguf_get_str(g, KP "model", &model) != HX_OK)
        return hx_err_set(err, HX_ERR_FORMAT, "vocab: no " KP "model string");
    v->bos = v->eos = v->eot = v->eom = v->unk = v->pad = v->sep = v->mask = -1;
    v->fim_pre = v->fim_suf = v->fim_mid = v->fim_pad = v->fim_rep = v->fim_sep = -1;
    if (!strcmp(model, "llama")) {
        v->type = HX_VOCAB_SPM;
        v->unk = 0, v->bos = 1, v->eos = 2;
        v->add_space_prefix = v->add_bos = 1;
        return HX_OK;
    }
    if (strcmp(model, "gpt2"))
        return hx_err_set(err, HX_ERR_UNSUPPORTED,
                          "vocab: tokenizer model '%.64s' is not supported "
                          "(supported: llama, gpt2)", model);
    v->type = HX_VOCAB_BPE;
    v->bos = v->eos = 11; /* llama.cpp's defaults for gpt2 vocabularies */
    if (hx_gguf_get_str(g, KP "pre", &pre) != HX_OK) pre = "";
    snprintf(v->pre, sizeof v->pre, "%s", pre);
    v->pre_type = pre_type_of(pre);
    if (!v->pre_type)
        return hx_err_set(err, HX_ERR_UNSUPPORTED,
                          "vocab: pre-tokenizer '%.64s' is not supported "
                          "(supported: qwen2, llama-bpe)", pre);
    if (v->pre_type == HX_PRE_LLAMA3) v->ignore_merges = v->add_bos = 1;
    return HX_OK;
}

/* Special token ids and flags from the metadata, over the defaults. */
static void load_special_keys(hx_vocab *v, const hx_gguf *g)
{
    static const struct { const char *key; size_t off; } ids[] = {
        {KP "bos_token_id", offsetof(hx_vocab, bos)},
        {KP "eos_token_id", offsetof(hx_vocab, eos)},
        {KP "eot_token_id", offsetof(hx_vocab, eot)},
        {KP "eom_token_id", offsetof(hx_vocab, eom)},
        {KP "unknown_token_id", offsetof(hx_vocab, unk)},
        {KP "seperator_token_id", offsetof(hx_vocab, sep)},
        {KP "padding_token_id", offsetof(hx_vocab, pad)},
        {KP "mask_token_id", offsetof(hx_vocab, mask)},
        {KP "fim_pre_token_id", offsetof(hx_vocab, fim_pre)},
        {KP "fim_suf_token_id", offsetof(hx_vocab, fim_suf)},
        {KP "fim_mid_token_id", offsetof(hx_vocab, fim_mid)},
        {KP "fim_pad_token_id", offsetof(hx_vocab, fim_pad)},
        {KP "fim_rep_token_id", offsetof(hx_vocab, fim_rep)},
        {KP "fim_sep_token_id", offsetof(hx_vocab, fim_sep)},
    };
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        uint32_t id;
        if (hx_gguf_get_u32(g, ids[i].key, &id) != HX_OK) continue;
        if (id >= (uint32_t)v->n_tokens) continue; /* llama.cpp ignores it */
        *(int32_t *)((char *)v + ids[i].off) = (int32_t)id;
    }
    int b;
    if (hx_gguf_get_bool(g, KP "add_space_prefix", &b) == HX_OK) v->add_space_prefix = b;
    if (hx_gguf_get_bool(g, KP "add_bos_token", &b) == HX_OK) v->add_bos = b;
    if (hx_gguf_get_bool(g, KP "add_eos_token", &b) == HX_OK) v->add_eos = b;
}

/* ---- special tokens found by their text, as llama.cpp does ---- */

static int32_t find_str(const hx_vocab *v, const char *s)
{
    return hx_vocab_find(v, s, strlen(s));
}

/* If *id is unset, the first listed text present becomes it (CONTROL). */
static void detect(hx_vocab *v, int32_t *id, const char *const *names)
{
    if (*id >= 0) return;
    for (int i = 0; names[i]; i++) {
        int32_t t = find_str(v, names[i]);
        if (t < 0) continue;
        *id = t;
        if (!(v->attr[t] & HX_TOKEN_CONTROL)) v->attr[t] = HX_TOKEN_CONTROL;
        return;
    }
}

static void detect_special(hx_vocab *v)
{
    static const char *const eot[] = {
        "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
        "<|end_of_text|>", "<EOT>", "_<EOT>", "<\xef\xbd\x9c" "end\xe2\x96\x81"
        "of\xe2\x96\x81sentence\xef\xbd\x9c>", "<end_of_utterance>", NULL};
    static const char *const eom[] = {"<|eom_id|>", NULL};
    static const char *const pre[] = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
        "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>", "<PRE>",
        "\xe2\x96\x81<PRE>", NULL};
    static const char *const suf[] = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
        "<\xef\xbd\x9c" "fim\xe2\x96\x81" "hole\xef\xbd\x9c>", "<SUF>",
        "\xe2\x96\x81<SUF>", NULL};
    static const char *const mid[] = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
        "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>", "<MID>",
        "\xe2\x96\x81<MID>", NULL};
    static const char *const pad[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", NULL};
    static const char *const rep[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                      "<REPO>", "<reponame>", NULL};
    static const char *const sep[] = {"<|file_sep|>", "<file_sep>",
                                      "<|file_separator|>", NULL};
    detect(v, &v->eot, eot);
    detect(v, &v->eom, eom);
    detect(v, &v->fim_pre, pre);
    detect(v, &v->fim_suf, suf);
    detect(v, &v->fim_mid, mid);
    detect(v, &v->fim_pad, pad);
    detect(v, &v->fim_rep, rep);
    detect(v, &v->fim_sep, sep);
}

static void mark_eog(hx_vocab *v, int32_t id)
{
    if (id >= 0 && id < v->n_tokens) v->eog[id] = 1;
}

static void build_eog(hx_vocab *v)
{
    static const char *const names[] = {
        "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>",
        "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>",
        "<|end_of_text|>", "<end_of_utterance>", NULL};
    for (int i = 0; names[i]; i++) {
        int32_t t = find_str(v, names[i]);
        if (t < 0) continue;
        mark_eog(v, t);
        if (!(v->attr[t] & HX_TOKEN_CONTROL)) v->attr[t] = HX_TOKEN_CONTROL;
    }
    mark_eog(v, v->eos);
    mark_eog(v, v->eot);
    mark_eog(v, v->eom);
    mark_eog(v, v->fim_pad);
    mark_eog(v, v->fim_rep);
    mark_eog(v, v->fim_sep);
}

/* ---- the special-token list and the output pieces ---- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The tokens matched in text: control, user-defined and unknown ones,
 * longest first (ties by id, so that the order is deterministic). */
static int build_special(hx_vocab *v, hx_err *err)
{
    const int want = HX_TOKEN_CONTROL | HX_TOKEN_USER_DEFINED | HX_TOKEN_UNKNOWN;
    uint64_t *keys = hx_calloc((size_t)v->n_tokens, sizeof *keys);
    v->special = hx_calloc((size_t)v->n_tokens, sizeof *v->special);
    if (!keys || !v->special) {
        free(keys);
        return hx_err_set(err, HX_ERR_NOMEM, "vocab: out of memory");
    }
    for (int32_t i = 0; i < v->n_tokens; i++)
        if (v->attr[i] & want)
            keys[v->n_special++] =
                ((uint64_t)(UINT32_MAX - v->texts[i].len) << 32) | (uint32_t)i;
    qsort(keys, (size_t)v->n_special, sizeof *keys, cmp_u64);
    for (int32_t i = 0; i < v->n_special; i++)
        v->special[i] = (int32_t)(keys[i] & 0xffffffffu);
    free(keys);
    return HX_OK;
}

/* SPM byte token <0xXX>: its byte value. */
static int spm_byte_of(const char *s, size_t n)
{
    if (n != 6 || memcmp(s, "<0x", 3) || s[5] != '>') return 0;
    char hex[3] = {s[3], s[4], 0};
    return (int)strtol(hex, NULL, 16);
}

/* The output bytes of token i, rendered with special = 1. */
static void render_piece(const hx_vocab *v, int32_t i, hx_buf *b)
{
    const char *s = v->text + v->texts[i].off;
    size_t n = v->texts[i].len;
    int a = v->attr[i];
    if (a & (HX_TOKEN_UNKNOWN | HX_TOKEN_CONTROL | HX_TOKEN_USER_DEFINED)) {
        hx_buf_append(b, s, n);
    } else if (a & HX_TOKEN_NORMAL) {
        if (v->type == HX_VOCAB_BPE) {
            hx_vocab_bpe_decode(s, n, b);
            return;
        }
        for (size_t k = 0; k < n; k++) {
            if (k + 2 < n && !memcmp(s + k, "\xe2\x96\x81", 3)) {
                hx_buf_putc(b, ' ');
                k += 2;
            } else {
                hx_buf_putc(b, s[k]);
            }
        }
    } else if ((a & HX_TOKEN_BYTE) && v->type == HX_VOCAB_SPM) {
        hx_buf_putc(b, (char)spm_byte_of(s, n));
    }
}

static int build_pieces(hx_vocab *v, hx_err *err)
{
    hx_buf b;
    hx_buf_init(&b);
    v->pieces = hx_calloc((size_t)v->n_tokens, sizeof *v->pieces);
    if (!v->pieces) return hx_err_set(err, HX_ERR_NOMEM, "vocab: out of memory");
    hx_buf_reserve(&b, (size_t)v->texts[v->n_tokens - 1].off + 64);
    for (int32_t i = 0; i < v->n_tokens; i++) {
        v->pieces[i].off = (uint32_t)b.len;
        render_piece(v, i, &b);
        v->pieces[i].len = (uint32_t)(b.len - v->pieces[i].off);
        if (b.len >= UINT32_MAX / 2) b.oom = 1;
    }
    if (b.oom) {
        hx_buf_free(&b);
        return hx_err_set(err, HX_ERR_NOMEM, "vocab: pieces too large");
    }
    v->piece = b.data ? b.data : hx_strdup("");
    return v->piece ? HX_OK : hx_err_set(err, HX_ERR_NOMEM, "vocab: out of memory");
}

static void spm_bytes(hx_vocab *v)
{
    for (int c = 0; c < 256; c++) {
        char buf[8];
        snprintf(buf, sizeof buf, "<0x%02X>", c);
        v->byte_tok[c] = find_str(v, buf);
        if (v->byte_tok[c] < 0) {
            buf[0] = (char)c;
            v->byte_tok[c] = hx_vocab_find(v, buf, 1);
        }
    }
}

static int load_all(hx_vocab *v, const hx_gguf *g, hx_err *err)
{
    int rc;
    if ((rc = load_kind(v, g, err)) || (rc = load_tokens(v, g, err)) ||
        (rc = load_attrs(v, g, err)) || (rc = build_tok_map(v, err)))
        return rc;
    if (v->type == HX_VOCAB_BPE &&
        ((rc = load_merges(v, g, err)) || (rc = hx_vocab_bpe_init(v, err))))
        return rc;
    load_special_keys(v, g);
    if (v->type == HX_VOCAB_SPM) spm_bytes(v);
    detect_special(v);
    build_eog(v);
    if ((rc = build_special(v, err)) || (rc = build_pieces(v, err))) return rc;
    return HX_OK;
}

int hx_vocab_load(const hx_gguf *g, hx_vocab **out, hx_err *err)
{
    *out = NULL;
    if (!g) return hx_err_set(err, HX_ERR_INVALID, "vocab: no file");
    hx_vocab *v = hx_calloc(1, sizeof *v);
    if (!v) return hx_err_set(err, HX_ERR_NOMEM, "vocab: out of memory");
    int rc = load_all(v, g, err);
    if (rc) {
        hx_vocab_free(v);
        return rc;
    }
    *out = v;
    return HX_OK;
}

void hx_vocab_free(hx_vocab *v)
{
    if (!v) return;
    hx_vocab_bpe_free(v);
    hx_vmap_free(&v->tok_map);
    hx_vmap_free(&v->merge_map);
    free(v->text);
    free(v->texts);
    free(v->piece);
    free(v->pieces);
    free(v->scores);
    free(v->attr);
    free(v->eog);
    free(v->merge_text);
    free(v->merge_a);
    free(v->merge_b);
    free(v->special);
    free(v);
}

/* ---- accessors ---- */

static int valid_id(const hx_vocab *v, int32_t id)
{
    return v && id >= 0 && id < v->n_tokens;
}

int hx_vocab_type(const hx_vocab *v) { return v ? v->type : 0; }
const char *hx_vocab_pre(const hx_vocab *v) { return v ? v->pre : ""; }
int32_t hx_vocab_n_tokens(const hx_vocab *v) { return v ? v->n_tokens : 0; }
int32_t hx_vocab_bos(const hx_vocab *v) { return v ? v->bos : -1; }
int32_t hx_vocab_eos(const hx_vocab *v) { return v ? v->eos : -1; }
int32_t hx_vocab_eot(const hx_vocab *v) { return v ? v->eot : -1; }
int32_t hx_vocab_pad(const hx_vocab *v) { return v ? v->pad : -1; }
int32_t hx_vocab_unk(const hx_vocab *v) { return v ? v->unk : -1; }
int hx_vocab_add_bos(const hx_vocab *v) { return v ? v->add_bos : 0; }
int hx_vocab_add_eos(const hx_vocab *v) { return v ? v->add_eos : 0; }

const char *hx_vocab_text(const hx_vocab *v, int32_t id, size_t *len)
{
    if (!valid_id(v, id)) return NULL;
    if (len) *len = v->texts[id].len;
    return v->text + v->texts[id].off;
}

int hx_vocab_attr(const hx_vocab *v, int32_t id)
{
    return valid_id(v, id) ? v->attr[id] : HX_TOKEN_UNDEFINED;
}

float hx_vocab_score(const hx_vocab *v, int32_t id)
{
    return valid_id(v, id) ? v->scores[id] : 0.0f;
}

int hx_vocab_is_eog(const hx_vocab *v, int32_t id)
{
    return valid_id(v, id) && v->eog[id];
}

int hx_vocab_is_special(const hx_vocab *v, int32_t id)
{
    return valid_id(v, id) &&
           (v->attr[id] & (HX_TOKEN_CONTROL | HX_TOKEN_UNKNOWN)) != 0;
}

const char *hx_vocab_piece(const hx_vocab *v, int32_t id, size_t *len)
{
    if (!valid_id(v, id)) return NULL;
    if (len) *len = v->pieces[id].len;
    return v->piece + v->pieces[id].off;
}
