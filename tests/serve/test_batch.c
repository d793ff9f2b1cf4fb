/* test_batch.c: `hearth serve` decoding several conversations in one
 * forward pass: concurrent clients, plain, streamed, JSON-schema and
 * tool-call requests together, get exactly the tokens each gets alone
 * (seeded sampling), a client leaving mid-batch cancels only its own,
 * and the server serves on. */
#include <pthread.h>

#include <cjson/cJSON.h>

#include "base/base.h"
#include "serve_test.h"
#include "test.h"

#define WEATHER_TOOL                                                                          \
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": "    \
    "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"days\": "   \
    "{\"type\": \"integer\", \"minimum\": 1, \"maximum\": 7}}, \"required\": [\"city\"], "  \
    "\"additionalProperties\": false}}}"

/* Plain, streamed (its own top_p and stop), JSON schema, tool call. */
#define N_REQ 4
static const char *const k_req[N_REQ] = {
    "{\"messages\": [{\"role\": \"user\", \"content\": \"Rivers run to the sea, tell me "
    "why.\"}], \"max_tokens\": 40, \"temperature\": 1, \"seed\": 11}",
    "{\"messages\": [{\"role\": \"user\", \"content\": \"Plan a week of dinners.\"}], "
    "\"stream\": true, \"max_tokens\": 40, \"temperature\": 0.8, \"top_p\": 0.9, "
    "\"stop\": [\"###\"], \"seed\": 12}",
    "{\"messages\": [{\"role\": \"user\", \"content\": \"Describe Bob, 30.\"}], "
    "\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"person\", "
    "\"schema\": {\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\", "
    "\"maxLength\": 20}, \"age\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 150}}, "
    "\"required\": [\"name\", \"age\"], \"additionalProperties\": false}}}, "
    "\"temperature\": 0.7, \"seed\": 13}",
    "{\"messages\": [{\"role\": \"user\", \"content\": \"Weather in Oslo?\"}], "
    "\"tools\": [" WEATHER_TOOL "], \"tool_choice\": \"required\", \"temperature\": 1, "
    "\"seed\": 14}",
};
/* A long story the client walks away from. */
static const char k_leaver[] =
    "{\"messages\": [{\"role\": \"user\", \"content\": \"Tell a long story\"}], "
    "\"stream\": true, \"max_tokens\": 1000000, \"temperature\": 1, \"seed\": 15}";

/* What a response generated, comparable across runs: a stream's content
 * deltas joined; an answer's message with the tool calls' random ids
 * taken out. Caller frees; NULL when the response is not one. */
static char *generated(const sv_resp *r)
{
    if (r->status != 200 || !r->body) return NULL;
    if (strncmp(r->body, "data: ", 6)) {
        cJSON *j = cJSON_Parse(r->body);
        cJSON *m = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0),
                                       "message");
        cJSON *tc;
        cJSON_ArrayForEach(tc, cJSON_GetObjectItem(m, "tool_calls")) cJSON_DeleteItemFromObject(tc, "id");
        char *s = m ? cJSON_PrintUnformatted(m) : NULL;
        cJSON_Delete(j);
        return s;
    }
    hx_buf b;
    hx_buf_init(&b);
    char *copy = strdup(r->body);
    for (char *save, *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        cJSON *c = cJSON_Parse(l + 6);
        const cJSON *d = cJSON_GetObjectItem(
            cJSON_GetArrayItem(cJSON_GetObjectItem(c, "choices"), 0), "delta");
        const char *t = cJSON_GetStringValue(cJSON_GetObjectItem(d, "content"));
        if (t) hx_buf_puts(&b, t);
        cJSON_Delete(c);
    }
    free(copy);
    char *out = hx_buf_steal(&b, NULL);
    return out ? out : strdup("");
}

static sv_server g_srv;

static void chat(const char *body, sv_resp *r)
{
    sv_request(sv_connect_unix(g_srv.sock), "POST", "/v1/chat/completions", NULL, body, r);
}

typedef struct client {
    const char *body;
    sv_resp r;
    int chunks; /* the leaver: chunks read before it left */
} client;

static void *client_main(void *arg)
{
    client *c = arg;
    chat(c->body, &c->r);
    return NULL;
}

/* Reads a few chunks of its stream, then closes the connection. */
static void *leaver_main(void *arg)
{
    client *c = arg;
    char raw[1024], buf[1 << 14];
    int n = snprintf(raw, sizeof raw, "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                     strlen(c->body), c->body);
    int fd = sv_connect_unix(g_srv.sock);
    if (fd < 0 || sv_send_all(fd, raw, (size_t)n)) return NULL;
    while (c->chunks < 6) {
        struct pollfd pf = {fd, POLLIN, 0};
        ssize_t k = poll(&pf, 1, 60000) == 1 ? recv(fd, buf, sizeof buf - 1, 0) : -1;
        if (k <= 0) break;
        buf[k] = 0;
        for (const char *p = buf; (p = strstr(p, "data: ")); p += 6) c->chunks++;
    }
    close(fd);
    return NULL;
}

/* A server of 5 slots in a fresh world (no cache shared with another). */
static int start(void)
{
    static const char *const args[] = {"--slots", "5", NULL};
    return sv_world(&g_srv) && sv_start(&g_srv, args);
}

/* The number of decodes the slots ran with other conversations. */
static int shared_decodes(void)
{
    static char log[1 << 20];
    int total = 0, steps, shared;
    for (const char *p = sv_log(&g_srv, log, sizeof log); (p = strstr(p, ": slot ")); p++)
        if (sscanf(p, ": slot %*d: %d decodes, %d of them", &steps, &shared) == 2) total += shared;
    return total;
}

static int log_has(const char *text)
{
    static char buf[1 << 20];
    for (int i = 0; i < 300; i++) {
        if (strstr(sv_log(&g_srv, buf, sizeof buf), text)) return 1;
        struct timespec t = {0, 100 * 1000 * 1000};
        nanosleep(&t, NULL);
    }
    return 0;
}

static void test_together_as_alone(void)
{
    if (!sv_hearth()) SKIP("hearth is not built");
    char *alone[N_REQ] = {0};
    ASSERT(start());
    for (int i = 0; i < N_REQ; i++) {
        sv_resp r;
        chat(k_req[i], &r);
        alone[i] = generated(&r);
        if (!alone[i]) printf("# request %d alone: %d %.300s\n", i, r.status, r.body ? r.body : "");
        free(r.body);
    }
    sv_cleanup(&g_srv);
    for (int i = 0; i < N_REQ; i++) ASSERT(alone[i] && *alone[i]);
    /* the JSON schema and the tool call held alone */
    cJSON *m = cJSON_Parse(alone[2]), *v = cJSON_Parse(cJSON_GetStringValue(cJSON_GetObjectItem(m, "content")));
    EXPECT(cJSON_IsNumber(cJSON_GetObjectItem(v, "age")));
    cJSON_Delete(v);
    cJSON_Delete(m);
    EXPECT(strstr(alone[3], "\"tool_calls\"") != NULL);

    ASSERT(start());
    client c[N_REQ + 1];
    pthread_t th[N_REQ + 1];
    for (int i = 0; i <= N_REQ; i++) {
        c[i] = (client){i < N_REQ ? k_req[i] : k_leaver, {0}, 0};
        ASSERT(!pthread_create(&th[i], NULL, i < N_REQ ? client_main : leaver_main, &c[i]));
    }
    for (int i = 0; i <= N_REQ; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < N_REQ; i++) {
        char *got = generated(&c[i].r);
        EXPECT(got && !strcmp(got, alone[i]));
        if (!got || strcmp(got, alone[i]))
            printf("# request %d together: %s\n#   alone: %s\n", i, got ? got : "(none)", alone[i]);
        free(got);
        free(c[i].r.body);
        free(alone[i]);
    }
    /* the leaver read some of its story and was cancelled; the others
     * rode in passes with other conversations */
    EXPECT(c[N_REQ].chunks >= 2);
    EXPECT(log_has("generated, cancelled"));
    int shared = shared_decodes();
    printf("# %d decodes ran with other conversations\n", shared);
    EXPECT(shared > 0);
    /* and it serves on */
    sv_resp r;
    sv_request(sv_connect_unix(g_srv.sock), "GET", "/v1/models", NULL, NULL, &r);
    EXPECT_EQ_INT(r.status, 200);
    free(r.body);
    chat(k_req[2], &r);
    char *again = generated(&r);
    EXPECT(again && strstr(again, "\"content\""));
    free(again);
    free(r.body);
    sv_cleanup(&g_srv);
}

int main(void)
{
    RUN(test_together_as_alone);
    return test_summary();
}
