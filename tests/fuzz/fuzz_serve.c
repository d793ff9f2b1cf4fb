/* fuzz_serve.c: fuzz target for hearth serve's own request handling
 * beyond libmicrohttpd (serve/body.c, serve/stream.c): any bytes as a chat
 * completion body, under every prompt style, give a request whose fields
 * hold and whose prompt renders, or an error naming what is wrong; any
 * text through the event-stream writer stays one event whose data lines
 * give the text back. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/serve_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void chat_body(const char *body, size_t n, int family)
{
    sv_chat_req q;
    char pbuf[64];
    const char *param = NULL;
    hx_err err = {0};
    int rc = hx_sv_chat_parse(body, n, family, &q, pbuf, sizeof pbuf, &param, &err);
    if (rc) {
        HX_CHECK(err.msg[0] != 0);
        HX_CHECK(!param || (param == pbuf && strlen(param) < sizeof pbuf));
    } else {
        HX_CHECK(q.prompt && q.messages && cJSON_GetArraySize(q.messages) >= 1);
        HX_CHECK(q.n_stops >= 0 && q.n_stops <= 4 && q.max_tokens >= 0);
        HX_CHECK(q.choice >= HX_CHOICE_AUTO && q.choice <= HX_CHOICE_SCHEMA);
        HX_CHECK((q.choice == HX_CHOICE_SCHEMA) == (q.schema != NULL));
        HX_CHECK(q.choice == HX_CHOICE_NONE || q.choice == HX_CHOICE_SCHEMA || q.n_specs > 0);
        HX_CHECK(!strncmp(q.id, "chatcmpl-", 9) && strlen(q.id) == 33);
        for (int i = 0; i < q.n_specs; i++) HX_CHECK(q.specs[i].name && q.specs[i].schema_json);
    }
    hx_sv_chat_req_free(&q);
}

/* The writer's event: "data: " lines ended by a blank line; joined with
 * newlines they are the text with its line breaks (CR, LF, CRLF) as LF. */
static void sse_round_trip(const char *text)
{
    hx_buf b, want;
    hx_buf_init(&b);
    hx_buf_init(&want);
    hx_sv_sse_field(&b, "data", text, 1);
    for (const char *p = text; *p; p++) {
        if (*p == '\r' && p[1] == '\n') continue;
        hx_buf_putc(&want, *p == '\r' ? '\n' : *p);
    }
    HX_CHECK(b.len >= 8 && !memcmp(b.data + b.len - 2, "\n\n", 2));
    HX_CHECK(!memmem(b.data, b.len - 2, "\n\n", 2) && !memchr(b.data, '\r', b.len));
    hx_buf got;
    hx_buf_init(&got);
    for (char *l = b.data; l < b.data + b.len - 1;) {
        char *nl = memchr(l, '\n', (size_t)(b.data + b.len - l));
        HX_CHECK(nl && !strncmp(l, "data: ", 6));
        if (l != b.data) hx_buf_putc(&got, '\n');
        hx_buf_append(&got, l + 6, (size_t)(nl - l - 6));
        l = nl + 1;
    }
    HX_CHECK(got.len == want.len && (!got.len || !memcmp(got.data, want.data, got.len)));
    hx_buf_free(&b);
    hx_buf_free(&want);
    hx_buf_free(&got);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = hx_strndup((const char *)data, size);
    if (!s) return 0;
    static const int families[] = {HX_TPL_QWEN3, HX_TPL_CHATML, HX_TPL_LLAMA3, HX_TPL_COMPACT,
                                   HX_TPL_BRIEF};
    chat_body((const char *)data, size, families[size % 5]);
    char why[96];
    cJSON *o = hx_sv_parse_object((const char *)data, size, why, sizeof why);
    HX_CHECK(o ? cJSON_IsObject(o) : why[0] != 0);
    cJSON_Delete(o);
    sse_round_trip(s);
    free(s);
    return 0;
}
