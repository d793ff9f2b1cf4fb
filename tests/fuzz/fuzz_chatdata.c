/* fuzz_chatdata.c: arbitrary bytes as chat JSONL: reading, rendering with
 * the assistant spans and tokenizing with the mask never crash; spans lie
 * in the text, in order; a failure always says why. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent.h"
#include "nightly/chatdata.h"
#include "modelfile/modelfile.h"

static hx_vocab *g_v;

/* A small vocabulary trained once, on a compact-style sample. */
static void init_vocab(void)
{
    static const char sample[] = "User: hello\nAssistant: <tool_call>{\"name\": \"x\", "
                                 "\"arguments\": {}}</tool_call>\nTool: <tool_response>ok"
                                 "</tool_response>\nAssistant: done\n";
    char path[64];
    snprintf(path, sizeof path, "/tmp/hx_fuzz_chat_%d.gguf", (int)getpid());
    hx_bpe_params p = hx_bpe_default_params();
    p.vocab_size = 300;
    hx_bpe *b = NULL;
    hx_gguf *g = NULL;
    hx_err err = {0};
    if (hx_bpe_new(&p, &b, &err) || hx_bpe_add_text(b, sample, sizeof sample - 1, &err) ||
        hx_bpe_add_text(b, sample, sizeof sample - 1, &err) || hx_bpe_train(b, &err) ||
        hx_bpe_write_gguf(b, path, &err) || hx_gguf_open(path, &g, &err) ||
        hx_vocab_load(g, &g_v, &err))
        abort();
    hx_gguf_close(g);
    hx_bpe_free(b);
    unlink(path);
}

static int one(void *user, const hx_chat_doc *d, hx_err *err)
{
    hx_chat_tokens *t = user;
    hx_buf text;
    hx_buf_init(&text);
    hx_chat_span *sp = NULL;
    int n_sp = 0;
    int rc = hx_chat_render(d, &text, &sp, &n_sp, err);
    for (int i = 0; !rc && i < n_sp; i++)
        if (sp[i].start > sp[i].end || sp[i].end > text.len ||
            (i && sp[i].start < sp[i - 1].end))
            abort();
    size_t n0 = t->n, m0 = t->n_masked;
    if (!rc) rc = hx_chat_tokens_add(t, g_v, text.data ? text.data : "", text.len, sp, n_sp, err);
    if (!rc && (t->n_masked - m0 > t->n - n0)) abort();
    if (rc && !err->msg[0]) abort();
    free(sp);
    hx_buf_free(&text);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_v) init_vocab();
    if (size > 8192) return 0;
    hx_chat_tokens t;
    memset(&t, 0, sizeof t);
    hx_err err = {0};
    int rc = hx_chat_each_buf("fuzz", (const char *)data, size, 0, one, &t, &err);
    if (rc && !err.msg[0]) abort();
    hx_chat_tokens_free(&t);
    return 0;
}
