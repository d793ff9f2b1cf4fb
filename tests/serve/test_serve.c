/* test_serve.c: `hearth serve` end to end, with Hearth's own small model
 * in the fixture world: the OpenAI surface's shapes, the token, Host and
 * Origin checks, bad clients (each a clear HTTP error, the server serving
 * on), the assistant's consent and taint rule over HTTP, memory and audit,
 * a client's leaving cancelling its generation, and the process's
 * confinement while it serves. */
#include <sys/stat.h>
#include <sys/syscall.h>

#include <cjson/cJSON.h>

#include "serve/serve_int.h"
#include "serve_test.h"
#include "test.h"

static sv_server g;
static int g_up = -1;

/* The shared server: 2 slots, small bodies, a short idle timeout. */
static int up(void)
{
    static const char *const args[] = {"--max-body", "64K", "--idle-timeout", "2", NULL};
    if (g_up < 0) {
        if (!sv_hearth()) return test_skip("hearth is not built"), 0;
        g_up = sv_world(&g) && sv_start(&g, args);
    }
    if (!g_up) test_fail_at(__FILE__, __LINE__, "hearth serve did not start");
    return g_up;
}

static int unix_fd(void) { return sv_connect_unix(g.sock); }

static void get_unix(const char *path, sv_resp *r) { sv_request(unix_fd(), "GET", path, NULL, NULL, r); }

static void post_unix(const char *path, const char *body, sv_resp *r)
{
    sv_request(unix_fd(), "POST", path, NULL, body, r);
}

/* A TCP request with the right Host and token, and extra headers. */
static void tcp(const char *method, const char *path, const char *extra, const char *body,
                sv_resp *r)
{
    char h[1024];
    snprintf(h, sizeof h, "Host: 127.0.0.1:%d\r\nAuthorization: Bearer %s\r\n%s", g.port,
             g.token, extra ? extra : "");
    sv_request(sv_connect_tcp(g.port), method, path, h, body, r);
}

static cJSON *json_of(const sv_resp *r) { return cJSON_Parse(r->body ? r->body : ""); }

/* An OpenAI error of this status whose code (or param) is as given. */
static void expect_error(const sv_resp *r, int status, const char *code, const char *param)
{
    EXPECT_EQ_INT(r->status, status);
    cJSON *j = json_of(r);
    const cJSON *e = cJSON_GetObjectItem(j, "error");
    EXPECT(cJSON_IsString(cJSON_GetObjectItem(e, "message")));
    EXPECT(cJSON_IsString(cJSON_GetObjectItem(e, "type")));
    if (code) EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(e, "code")), code);
    if (param) EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(e, "param")), param);
    if (!e) printf("# body: %.300s\n", r->body ? r->body : "");
    cJSON_Delete(j);
}

/* A POST over the UNIX socket that must get this error. */
static void post_refused(const char *path, const char *body, int status, const char *param)
{
    sv_resp r;
    post_unix(path, body, &r);
    expect_error(&r, status, NULL, param);
    free(r.body);
}

static void still_serving(void)
{
    sv_resp r;
    get_unix("/v1/models", &r);
    EXPECT_EQ_INT(r.status, 200);
    free(r.body);
}

static void test_models(void)
{
    if (!up()) return;
    sv_resp r;
    get_unix("/v1/models", &r);
    EXPECT_EQ_INT(r.status, 200);
    EXPECT(strcasestr(r.head, "content-type: application/json") != NULL);
    cJSON *j = json_of(&r), *m = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "data"), 0);
    EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(j, "object")), "list");
    EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(m, "id")), "hearth-tiny.gguf");
    EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(m, "object")), "model");
    cJSON_Delete(j);
    free(r.body);
}

/* TCP wants the token; the UNIX socket's mode is its door. */
static void test_token(void)
{
    if (!up()) return;
    char h[256];
    sv_resp r;
    snprintf(h, sizeof h, "Host: 127.0.0.1:%d\r\n", g.port);
    sv_request(sv_connect_tcp(g.port), "GET", "/v1/models", h, NULL, &r);
    expect_error(&r, 401, "invalid_api_key", NULL);
    EXPECT(strcasestr(r.head, "www-authenticate: bearer") != NULL);
    free(r.body);
    snprintf(h, sizeof h, "Host: 127.0.0.1:%d\r\nAuthorization: Bearer %.63sx\r\n", g.port, g.token);
    sv_request(sv_connect_tcp(g.port), "GET", "/v1/models", h, NULL, &r);
    expect_error(&r, 401, "invalid_api_key", NULL); /* one character off */
    free(r.body);
    snprintf(h, sizeof h, "Host: 127.0.0.1:%d\r\nAuthorization: Bearer %.32s\r\n", g.port, g.token);
    sv_request(sv_connect_tcp(g.port), "GET", "/v1/models", h, NULL, &r);
    expect_error(&r, 401, "invalid_api_key", NULL); /* a prefix */
    free(r.body);
    tcp("GET", "/v1/models", NULL, NULL, &r); /* control: the token */
    EXPECT_EQ_INT(r.status, 200);
    free(r.body);
}

/* The page needs no token to load (it asks for it), over TCP. */
static void test_page(void)
{
    if (!up()) return;
    char h[128];
    sv_resp r;
    snprintf(h, sizeof h, "Host: localhost:%d\r\n", g.port);
    sv_request(sv_connect_tcp(g.port), "GET", "/", h, NULL, &r);
    EXPECT_EQ_INT(r.status, 200);
    EXPECT(strcasestr(r.head, "content-type: text/html") != NULL);
    EXPECT(strcasestr(r.head, "content-security-policy: default-src 'none'; script-src 'self'") != NULL);
    EXPECT(strstr(r.body, "<script src=\"/app.js\"") != NULL);
    EXPECT(!strstr(r.body, "https://") && !strstr(r.body, "http://")); /* nothing from elsewhere */
    free(r.body);
    sv_request(sv_connect_tcp(g.port), "GET", "/app.js", h, NULL, &r);
    EXPECT_EQ_INT(r.status, 200);
    EXPECT(strstr(r.body, "textContent") != NULL);
    EXPECT(!strstr(r.body, "innerHTML"));
    free(r.body);
    sv_request(sv_connect_tcp(g.port), "GET", "/secret.txt", h, NULL, &r);
    expect_error(&r, 404, "unknown_url", NULL);
    free(r.body);
}

/* DNS rebinding and cross-site requests, each with its control. */
static void test_host_and_origin(void)
{
    if (!up()) return;
    char h[512];
    sv_resp r;
    snprintf(h, sizeof h, "Host: evil.example:%d\r\nAuthorization: Bearer %s\r\n", g.port, g.token);
    sv_request(sv_connect_tcp(g.port), "GET", "/v1/models", h, NULL, &r);
    expect_error(&r, 403, "foreign_host", NULL);
    free(r.body);
    snprintf(h, sizeof h, "Host: evil.example:%d\r\n", g.port); /* the page, rebound */
    sv_request(sv_connect_tcp(g.port), "GET", "/", h, NULL, &r);
    expect_error(&r, 403, "foreign_host", NULL);
    free(r.body);
    tcp("GET", "/v1/models", "Origin: http://evil.example\r\n", NULL, &r);
    expect_error(&r, 403, "foreign_origin", NULL);
    free(r.body);
    tcp("GET", "/v1/models", "Origin: null\r\n", NULL, &r);
    expect_error(&r, 403, "foreign_origin", NULL);
    free(r.body);
    tcp("GET", "/v1/models", "Sec-Fetch-Site: cross-site\r\n", NULL, &r);
    expect_error(&r, 403, "foreign_origin", NULL);
    free(r.body);
    tcp("OPTIONS", "/v1/models", "Origin: http://evil.example\r\nAccess-Control-Request-Method: POST\r\n",
        NULL, &r);
    EXPECT_EQ_INT(r.status, 403);
    EXPECT(!strcasestr(r.head, "access-control-"));
    free(r.body);
    snprintf(h, sizeof h, "Origin: http://127.0.0.1:%d\r\nSec-Fetch-Site: same-origin\r\n", g.port);
    tcp("GET", "/v1/models", h, NULL, &r); /* control: the page's own origin */
    EXPECT_EQ_INT(r.status, 200);
    EXPECT(!strcasestr(r.head, "access-control-"));
    free(r.body);
    sv_request(unix_fd(), "GET", "/v1/models", "Origin: http://localhost\r\n", NULL, &r);
    expect_error(&r, 403, "foreign_origin", NULL); /* no browser speaks UNIX */
    free(r.body);
}

/* Bad requests: each a clear HTTP error in OpenAI's shape. */
static void test_bad_requests(void)
{
    if (!up()) return;
    sv_resp r;
    post_unix("/v1/chat/completions", "{\"messages\": [", &r);
    expect_error(&r, 400, NULL, NULL);
    EXPECT(strstr(r.body, "not valid JSON") != NULL);
    free(r.body);
    const char *chat = "/v1/chat/completions";
    post_refused(chat, "[1,2]", 400, NULL);
    post_refused(chat, "{\"model\": \"x\"}", 400, "messages");
    post_refused(chat, "{\"messages\": [{\"role\": \"wizard\", \"content\": \"hi\"}]}", 400,
                 "messages[0]");
    post_refused(chat, "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": "
                 "\"image_url\", \"image_url\": {\"url\": \"x\"}}]}]}", 400, "messages[0].content");
    post_refused(chat, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"n\": 2}",
                 400, "n");
    post_refused(chat, "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], "
                 "\"temperature\": \"hot\"}", 400, "temperature");
    sv_request(unix_fd(), "POST", "/v1/chat/completions", "Content-Type: text/plain\r\n"
               "Content-Length: 2\r\n", NULL, &r);
    EXPECT(r.status == 415 || r.status == 400);
    free(r.body);
    get_unix("/v1/nothing", &r);
    expect_error(&r, 404, "unknown_url", NULL);
    free(r.body);
    get_unix("/v1/chat/completions", &r);
    expect_error(&r, 405, NULL, NULL);
    free(r.body);
    still_serving();
}

/* Bodies past the cap: refused on the declared length before any of it
 * is read, or once a chunked one grows past it. */
static void test_oversized_bodies(void)
{
    if (!up()) return;
    sv_resp r;
    const char *big = "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n"
                      "Content-Type: application/json\r\nContent-Length: 100000000\r\n"
                      "Connection: close\r\n\r\n{";
    sv_raw(unix_fd(), big, strlen(big), &r, 20000);
    expect_error(&r, 413, "body_too_large", NULL);
    free(r.body);
    size_t n = 200 * 1024;
    char *raw = malloc(n + 8192), chunk[4200];
    int k = snprintf(raw, 512, "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n"
                               "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                               "Connection: close\r\n\r\n");
    memset(chunk, 'a', sizeof chunk);
    size_t len = (size_t)k;
    while (len < n) len += (size_t)sprintf(raw + len, "1000\r\n%.4096s\r\n", chunk);
    len += (size_t)sprintf(raw + len, "0\r\n\r\n");
    sv_raw(unix_fd(), raw, len, &r, 20000);
    expect_error(&r, 413, "body_too_large", NULL);
    free(r.body);
    free(raw);
    /* headers past the connection's memory: MHD refuses them */
    char *hdr = malloc(100 * 1024);
    k = sprintf(hdr, "GET /v1/models HTTP/1.1\r\nHost: localhost\r\nX-Big: ");
    memset(hdr + k, 'b', 90 * 1024);
    strcpy(hdr + k + 90 * 1024, "\r\nConnection: close\r\n\r\n");
    sv_raw(unix_fd(), hdr, strlen(hdr), &r, 20000);
    EXPECT(r.status == 431 || r.status == 413 || r.status == 400);
    free(r.body);
    free(hdr);
    still_serving();
}

/* A sender that stops half-way is cut off after the idle timeout (2 s
 * here) and the server serves on. */
static void test_slow_senders(void)
{
    if (!up()) return;
    const char *parts[] = {"GET /v1/models HTTP/1.1\r\nHo",
                           "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: "
                           "application/json\r\nContent-Length: 100\r\n\r\n{\"messa"};
    for (int i = 0; i < 2; i++) {
        int fd = unix_fd();
        ASSERT(fd >= 0);
        ASSERT(!sv_send_all(fd, parts[i], strlen(parts[i])));
        size_t n;
        char *got = sv_read_all(fd, &n, 30000); /* returns at EOF */
        struct pollfd p = {fd, POLLIN, 0};
        EXPECT(poll(&p, 1, 0) == 1 && recv(fd, got, 1, MSG_DONTWAIT) == 0); /* closed */
        free(got);
        close(fd);
    }
    still_serving();
}

static void chat(const char *body, sv_resp *r) { post_unix("/v1/chat/completions", body, r); }

static void test_chat(void)
{
    if (!up()) return;
    sv_resp r;
    chat("{\"model\": \"hearth-tiny.gguf\", \"messages\": [{\"role\": \"system\", \"content\": "
         "\"Be brief.\"}, {\"role\": \"user\", \"content\": \"What is on my calendar tomorrow?\"}], "
         "\"max_tokens\": 8, \"temperature\": 0}", &r);
    EXPECT_EQ_INT(r.status, 200);
    cJSON *j = json_of(&r), *c = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
    cJSON *m = cJSON_GetObjectItem(c, "message"), *u = cJSON_GetObjectItem(j, "usage");
    EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(j, "object")), "chat.completion");
    EXPECT(!strncmp(cJSON_GetStringValue(cJSON_GetObjectItem(j, "id")), "chatcmpl-", 9));
    EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(m, "role")), "assistant");
    EXPECT(cJSON_IsString(cJSON_GetObjectItem(m, "content")));
    EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(c, "finish_reason")), "length");
    EXPECT_EQ_INT(cJSON_GetNumberValue(cJSON_GetObjectItem(u, "completion_tokens")), 8);
    EXPECT(cJSON_GetNumberValue(cJSON_GetObjectItem(u, "prompt_tokens")) > 5);
    cJSON_Delete(j);
    free(r.body);
}

#define WEATHER_TOOL                                                                          \
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": "    \
    "\"The weather of a city\", \"parameters\": {\"type\": \"object\", \"properties\": "     \
    "{\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\", \"minimum\": 1, "   \
    "\"maximum\": 7}}, \"required\": [\"city\"], \"additionalProperties\": false}}}"
#define TIME_TOOL                                                                             \
    "{\"type\": \"function\", \"function\": {\"name\": \"get_time\", \"parameters\": "       \
    "{\"type\": \"object\", \"properties\": {\"zone\": {\"type\": \"string\"}}, "            \
    "\"required\": [\"zone\"], \"additionalProperties\": false}}}"

/* get_weather with a schema that says nothing of other arguments */
#define OPEN_WEATHER_TOOL                                                                     \
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": "    \
    "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, "            \
    "\"required\": [\"city\"]}}}"

/* Calls come back as tool_calls whose arguments hold to the schema. A
 * schema that says nothing of other arguments gets only those it declares:
 * the call ends (a small model wrote key after key of its own until the
 * context was full) and carries no argument of the model's. */
static void test_chat_tools(void)
{
    if (!up()) return;
    static const struct { const char *tools, *choice, *want; } cases[] = {
        {WEATHER_TOOL ", " TIME_TOOL, "\"required\"", NULL},
        {WEATHER_TOOL ", " TIME_TOOL,
         "{\"type\": \"function\", \"function\": {\"name\": \"get_time\"}}", "get_time"},
        {OPEN_WEATHER_TOOL, "\"required\"", "get_weather"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char body[2048];
        snprintf(body, sizeof body, "{\"messages\": [{\"role\": \"user\", \"content\": \"What is the "
                 "weather in Paris?\"}], \"tools\": [%s], \"tool_choice\": %s, \"temperature\": 0}",
                 cases[i].tools, cases[i].choice);
        sv_resp r;
        chat(body, &r);
        EXPECT_EQ_INT(r.status, 200);
        cJSON *j = json_of(&r), *c = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
        cJSON *tc = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(c, "message"), "tool_calls"), 0);
        cJSON *fn = cJSON_GetObjectItem(tc, "function");
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(fn, "name"));
        EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(c, "finish_reason")), "tool_calls");
        EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(tc, "type")), "function");
        EXPECT(!strncmp(cJSON_GetStringValue(cJSON_GetObjectItem(tc, "id")), "call_", 5));
        cJSON *args = cJSON_Parse(cJSON_GetStringValue(cJSON_GetObjectItem(fn, "arguments")));
        ASSERT(name && cJSON_IsObject(args));
        if (cases[i].want) EXPECT_STR_EQ(name, cases[i].want);
        if (!strcmp(name, "get_weather")) {
            EXPECT(cJSON_IsString(cJSON_GetObjectItem(args, "city")));
            const cJSON *d = cJSON_GetObjectItem(args, "days");
            EXPECT(!d || (cJSON_IsNumber(d) && d->valuedouble >= 1 && d->valuedouble <= 7));
            EXPECT_EQ_INT(cJSON_GetArraySize(args), 1 + (d != NULL)); /* nothing undeclared */
        } else {
            EXPECT(cJSON_IsString(cJSON_GetObjectItem(args, "zone")));
            EXPECT_EQ_INT(cJSON_GetArraySize(args), 1);
        }
        cJSON_Delete(args);
        cJSON_Delete(j);
        free(r.body);
    }
}

/* response_format's JSON Schema is enforced. */
static void test_chat_json_schema(void)
{
    if (!up()) return;
    sv_resp r;
    chat("{\"messages\": [{\"role\": \"user\", \"content\": \"Describe Bob, 30.\"}], "
         "\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"person\", "
         "\"strict\": true, \"schema\": {\"type\": \"object\", \"properties\": {\"name\": {\"type\": "
         "\"string\", \"maxLength\": 20}, \"age\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": "
         "150}}, \"required\": [\"name\", \"age\"], \"additionalProperties\": false}}}, "
         "\"temperature\": 0.7, \"seed\": 11}", &r);
    EXPECT_EQ_INT(r.status, 200);
    cJSON *j = json_of(&r), *c = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
    cJSON *v = cJSON_Parse(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(c, "message"),
                                                                    "content")));
    EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(c, "finish_reason")), "stop");
    ASSERT(cJSON_IsObject(v));
    const cJSON *name = cJSON_GetObjectItem(v, "name"), *age = cJSON_GetObjectItem(v, "age");
    EXPECT(cJSON_IsString(name) && strlen(name->valuestring) <= 20);
    EXPECT(cJSON_IsNumber(age) && age->valuedouble >= 0 && age->valuedouble <= 150 &&
           age->valuedouble == (double)(int)age->valuedouble);
    EXPECT_EQ_INT(cJSON_GetArraySize(v), 2);
    cJSON_Delete(v);
    cJSON_Delete(j);
    free(r.body);
    chat("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"response_format\": "
         "{\"type\": \"json_schema\", \"json_schema\": {\"name\": \"n\", \"schema\": {\"not\": "
         "{\"type\": \"string\"}}}}}", &r);
    expect_error(&r, 400, NULL, "response_format.json_schema.schema");
    free(r.body);
    chat("{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": [" WEATHER_TOOL "], "
         "\"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"nope\"}}}", &r);
    expect_error(&r, 400, NULL, "tool_choice");
    free(r.body);
}

/* The event stream: OpenAI's chunk shapes, the role first, the finish,
 * the usage chunk, [DONE]. */
static void test_chat_stream(void)
{
    if (!up()) return;
    sv_resp r;
    chat("{\"messages\": [{\"role\": \"user\", \"content\": \"Hello\"}], \"stream\": true, "
         "\"stream_options\": {\"include_usage\": true}, \"max_tokens\": 6, \"temperature\": 0}", &r);
    EXPECT_EQ_INT(r.status, 200);
    EXPECT(strcasestr(r.head, "content-type: text/event-stream") != NULL);
    int n = 0, finish = 0, usage = 0, done = 0, role = 0, bad = 0;
    for (char *l = strtok(r.body, "\n"); l; l = strtok(NULL, "\n")) {
        if (strncmp(l, "data: ", 6)) { bad++; continue; }
        if (!strcmp(l + 6, "[DONE]")) { done++; continue; }
        cJSON *c = cJSON_Parse(l + 6), *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(c, "choices"), 0);
        bad += done || !c || strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(c, "object")),
                                    "chat.completion.chunk");
        if (!n++) role = !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(
                                  cJSON_GetObjectItem(ch, "delta"), "role")), "assistant");
        finish += cJSON_IsString(cJSON_GetObjectItem(ch, "finish_reason"));
        if (cJSON_IsObject(cJSON_GetObjectItem(c, "usage"))) {
            usage++;
            EXPECT_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(c, "choices")), 0);
            EXPECT_EQ_INT(cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(c, "usage"),
                                                                   "completion_tokens")), 6);
        }
        cJSON_Delete(c);
    }
    EXPECT_EQ_INT(bad, 0);
    EXPECT(role);
    EXPECT_EQ_INT(finish, 1);
    EXPECT_EQ_INT(usage, 1);
    EXPECT_EQ_INT(done, 1);
    free(r.body);
}

/* A prompt longer than the context: 400 before anything is generated. */
static void test_context_full(void)
{
    if (!up()) return;
    size_t n = 60000;
    char *body = malloc(n + 200);
    int k = sprintf(body, "{\"messages\": [{\"role\": \"user\", \"content\": \"");
    for (size_t i = (size_t)k; i < n; i += 6) memcpy(body + i, "zq xv ", 6);
    strcpy(body + n, "\"}]}");
    sv_resp r;
    chat(body, &r);
    expect_error(&r, 400, "context_length_exceeded", "messages");
    free(r.body);
    free(body);
    still_serving();
}

/* Waits (up to 60 s) for text in the server's log. */
static int log_has(const sv_server *s, const char *text)
{
    static char buf[1 << 20];
    for (int i = 0; i < 600; i++) {
        if (strstr(sv_log(s, buf, sizeof buf), text)) return 1;
        struct timespec t = {0, 100 * 1000 * 1000};
        nanosleep(&t, NULL);
    }
    return 0;
}

/* A client that leaves stops its generation (and frees its slot). */
static void test_disconnect_cancels(void)
{
    if (!up()) return;
    const char *body = "{\"messages\": [{\"role\": \"user\", \"content\": \"Tell a long story\"}], "
                       "\"stream\": true, \"max_tokens\": 1000000, \"temperature\": 1, \"seed\": 3}";
    char raw[1024];
    int n = snprintf(raw, sizeof raw, "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                     strlen(body), body);
    int fd = unix_fd();
    ASSERT(fd >= 0 && !sv_send_all(fd, raw, (size_t)n));
    char buf[4096], id[64] = "";
    size_t got = 0;
    const char *p = NULL;
    while (!p && got < sizeof buf - 1) { /* the headers and the first chunk */
        struct pollfd pf = {fd, POLLIN, 0};
        ssize_t k = poll(&pf, 1, 60000) == 1 ? recv(fd, buf + got, sizeof buf - 1 - got, 0) : -1;
        if (k <= 0) break;
        got += (size_t)k;
        buf[got] = 0;
        p = strstr(buf, "chatcmpl-");
    }
    if (p) snprintf(id, sizeof id, "%.33s", p);
    close(fd);
    char want[128];
    snprintf(want, sizeof want, "%s: ", id);
    ASSERT(p && log_has(&g, want));
    snprintf(want, sizeof want, "generated, cancelled");
    static char log[1 << 20];
    EXPECT(log_has(&g, want));
    const char *line = strstr(sv_log(&g, log, sizeof log), id);
    EXPECT(line && strstr(line, "cancelled") && strstr(line, "cancelled") - line < 120);
    still_serving();
}


/* The tokens of a request's prompt its slot's cache held (the source's
 * debug line before the request's own line in the log). */
static int reused_for(const char *id)
{
    static char log[1 << 20];
    char want[64];
    snprintf(want, sizeof want, "%s: ", id);
    if (!log_has(&g, want)) return -1;
    sv_log(&g, log, sizeof log);
    char *at = strstr(log, want), *line = NULL;
    for (char *p = log; (p = strstr(p, " reused from the cache")) && p < at; p++) line = p;
    if (!line) return -1;
    while (line > log && line[-1] != ' ') line--;
    return atoi(line);
}

static int chat_id(const char *body, char *id, int *n_prompt)
{
    sv_resp r;
    chat(body, &r);
    cJSON *j = json_of(&r);
    const char *got = cJSON_GetStringValue(cJSON_GetObjectItem(j, "id"));
    snprintf(id, 48, "%s", got ? got : "");
    *n_prompt = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "usage"),
                                                              "prompt_tokens"));
    cJSON_Delete(j);
    free(r.body);
    return r.status;
}

/* Two conversations on two slots: each comes back to the slot whose KV
 * cache holds its prefix, not to the least recently used one. */
static void test_prefix_per_conversation(void)
{
    if (!up()) return;
    char a1[2048], b1[2048], a2[3072], id[48];
    const char *sys_a = "You keep the diary of the Alpha orchard: apples, pears, the weather and "
                        "the pickers' hours. Answer in one short line.";
    const char *sys_b = "Beta workshop assistant: you track bicycles waiting for repair, their "
                        "owners and parts on order. Answer briefly.";
    snprintf(a1, sizeof a1, "{\"messages\": [{\"role\": \"system\", \"content\": \"%s\"}, "
             "{\"role\": \"user\", \"content\": \"How many pickers today?\"}], \"max_tokens\": 2, "
             "\"temperature\": 0}", sys_a);
    snprintf(b1, sizeof b1, "{\"messages\": [{\"role\": \"system\", \"content\": \"%s\"}, "
             "{\"role\": \"user\", \"content\": \"Which bikes wait?\"}], \"max_tokens\": 2, "
             "\"temperature\": 0}", sys_b);
    snprintf(a2, sizeof a2, "{\"messages\": [{\"role\": \"system\", \"content\": \"%s\"}, "
             "{\"role\": \"user\", \"content\": \"How many pickers today?\"}, {\"role\": "
             "\"assistant\", \"content\": \"Twelve.\"}, {\"role\": \"user\", \"content\": "
             "\"And yesterday?\"}], \"max_tokens\": 2, \"temperature\": 0}", sys_a);
    int na = 0, nb = 0, n2 = 0;
    ASSERT(chat_id(a1, id, &na) == 200);
    ASSERT(chat_id(b1, id, &nb) == 200);
    ASSERT(chat_id(b1, id, &nb) == 200); /* B twice: the least recently used slot is A's */
    EXPECT(reused_for(id) >= nb - 1);
    ASSERT(chat_id(a2, id, &n2) == 200);
    int reused = reused_for(id);
    printf("# conversation A: %d prompt tokens, then %d of which %d came from its slot's cache\n",
           na, n2, reused);
    EXPECT(reused >= na - 2 && n2 > na);
}

/* ---- the assistant ---- */
typedef struct ask_run {
    int fd;
    hx_buf in;   /* bytes read so far */
    size_t seen; /* events consumed */
} ask_run;

static int ask_open(ask_run *a, const sv_server *s, const char *body)
{
    char raw[2048];
    memset(a, 0, sizeof *a);
    hx_buf_init(&a->in);
    /* HTTP/1.0: the stream comes unchunked, as it is written */
    int n = snprintf(raw, sizeof raw, "POST /v1/hearth/ask HTTP/1.0\r\nHost: localhost\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                     strlen(body), body);
    a->fd = sv_connect_unix(s->sock);
    return a->fd >= 0 && !sv_send_all(a->fd, raw, (size_t)n);
}

/* The next event named name (others skipped), its data parsed; NULL at
 * the end of the stream. */
static cJSON *ask_next(ask_run *a, const char *name)
{
    for (;;) {
        char *start = a->in.data ? a->in.data + a->seen : NULL;
        char *ev = start ? strstr(start, "event: ") : NULL;
        char *end = ev ? strstr(ev, "\n\n") : NULL;
        if (ev && end) {
            a->seen = (size_t)(end + 2 - a->in.data);
            char *data = strstr(ev, "\ndata: ");
            if (data && data < end && !strncmp(ev + 7, name, strlen(name)) &&
                ev[7 + strlen(name)] == '\n') {
                *end = 0;
                cJSON *j = cJSON_Parse(data + 7);
                *end = '\n';
                return j;
            }
            continue;
        }
        char buf[4096];
        struct pollfd p = {a->fd, POLLIN, 0};
        if (poll(&p, 1, 120000) <= 0) return NULL;
        ssize_t r = recv(a->fd, buf, sizeof buf, 0);
        if (r <= 0) return NULL;
        hx_buf_append(&a->in, buf, (size_t)r);
    }
}

static void ask_close(ask_run *a)
{
    if (a->fd >= 0) close(a->fd);
    hx_buf_free(&a->in);
}

static void answer(const sv_server *s, const char *id, const char *ans, sv_resp *r)
{
    char path[128], body[64];
    snprintf(path, sizeof path, "/v1/hearth/consent/%s", id);
    snprintf(body, sizeof body, "{\"answer\": \"%s\"}", ans);
    sv_request(sv_connect_unix(s->sock), "POST", path, NULL, body, r);
}

/* "Remember ..." asks before memory.remember writes; the answer decides,
 * and what was not done is said. */
static void consent_round(const char *ans)
{
    ask_run a;
    ASSERT(ask_open(&a, &g, "{\"request\": \"Remember that Bob's email is bob@example.org\"}"));
    cJSON *q = ask_next(&a, "consent");
    ASSERT(q);
    EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(q, "tool")), "memory.remember");
    EXPECT(cJSON_IsObject(cJSON_GetObjectItem(q, "arguments")));
    const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(q, "id"));
    ASSERT(id && strlen(id) == 32);
    sv_resp r;
    answer(&g, "0123456789abcdef0123456789abcdef", "yes", &r); /* not a question */
    expect_error(&r, 404, "unknown_consent", NULL);
    free(r.body);
    answer(&g, id, "maybe", &r);
    expect_error(&r, 400, NULL, "answer");
    free(r.body);
    answer(&g, id, ans, &r);
    EXPECT_EQ_INT(r.status, 200);
    free(r.body);
    answer(&g, id, "yes", &r); /* once answered, never again */
    EXPECT(r.status == 409 || r.status == 404);
    free(r.body);
    cJSON *done = ask_next(&a, "done");
    ASSERT(done);
    const cJSON *nd = cJSON_GetObjectItem(done, "not_done");
    const cJSON *call = cJSON_GetArrayItem(cJSON_GetObjectItem(done, "calls"), 0);
    EXPECT(cJSON_GetNumberValue(cJSON_GetObjectItem(done, "episode")) > 0);
    if (!strcmp(ans, "yes")) {
        EXPECT_EQ_INT(cJSON_GetArraySize(nd), 0);
        EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(call, "status")), "ok");
        EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(call, "by")), "user");
    } else {
        const cJSON *u = cJSON_GetArrayItem(nd, 0);
        EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(u, "name")), "memory.remember");
        EXPECT(strstr(cJSON_GetStringValue(cJSON_GetObjectItem(u, "reason")), "declined") != NULL);
    }
    cJSON_Delete(done);
    cJSON_Delete(q);
    ask_close(&a);
}

static int memory_count(const sv_server *s, const char *query)
{
    char path[200];
    snprintf(path, sizeof path, "/v1/hearth/memory%s%s", query ? "?q=" : "", query ? query : "");
    sv_resp r;
    sv_request(sv_connect_unix(s->sock), "GET", path, NULL, NULL, &r);
    cJSON *j = json_of(&r);
    int n = r.status == 200 ? cJSON_GetArraySize(cJSON_GetObjectItem(j, "data")) : -1;
    cJSON_Delete(j);
    free(r.body);
    return n;
}

static void test_ask_consent(void)
{
    if (!up()) return;
    int before = memory_count(&g, NULL);
    consent_round("no");
    EXPECT_EQ_INT(memory_count(&g, NULL), before); /* declined: nothing kept */
    consent_round("yes");
    EXPECT_EQ_INT(memory_count(&g, NULL), before + 1);
    EXPECT_EQ_INT(memory_count(&g, "Bob"), 1);
    sv_resp r;
    get_unix("/v1/hearth/audit?limit=2", &r);
    cJSON *j = json_of(&r), *rec = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "data"), 0);
    EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(rec, "tool")), "memory.remember");
    EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(rec, "by")), "user");
    EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(rec, "status")), "ok");
    rec = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "data"), 1);
    EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(rec, "status")), "refused");
    cJSON_Delete(j);
    free(r.body);
}

/* How many audit records tool has; *status (may be NULL; caller frees)
 * gets the newest one's status, NULL when there is none. */
static int audit_of(const sv_server *s, const char *tool, char **status)
{
    sv_resp r;
    sv_request(sv_connect_unix(s->sock), "GET", "/v1/hearth/audit?limit=1000", NULL, NULL, &r);
    cJSON *j = json_of(&r), *rec;
    int n = 0;
    if (status) *status = NULL;
    cJSON_ArrayForEach(rec, cJSON_GetObjectItem(j, "data")) /* newest first */
    {
        const char *t = cJSON_GetStringValue(cJSON_GetObjectItem(rec, "tool"));
        if (!t || strcmp(t, tool)) continue;
        if (!n++ && status) *status = hx_strdup(cJSON_GetStringValue(cJSON_GetObjectItem(rec, "status")));
    }
    cJSON_Delete(j);
    free(r.body);
    return n;
}

/* A client that leaves while its question waits: the answer is no. The
 * request offers memory.remember alone (the consent is tested, not the
 * model's choice of tool); what the model does after the refusal is its
 * own. */
static void test_consent_client_leaves(void)
{
    if (!up()) return;
    int before = audit_of(&g, "memory.remember", NULL);
    ask_run a;
    ASSERT(ask_open(&a, &g, "{\"request\": \"Remember that Carol's email is carol@example.org\", "
                            "\"tools\": \"memory.remember\"}"));
    cJSON *q = ask_next(&a, "consent");
    ASSERT(q);
    ask_close(&a);
    cJSON_Delete(q);
    for (int i = 0; i < 600 && audit_of(&g, "memory.remember", NULL) == before; i++) usleep(100000);
    char *st = NULL;
    EXPECT(audit_of(&g, "memory.remember", &st) > before);
    EXPECT_STR_EQ(st ? st : "(none)", "refused");
    free(st);
    EXPECT_EQ_INT(memory_count(&g, "Carol"), 0);
}

/* The assistant over HTTP holds its answers to the conversation as on the
 * terminal: the planner's grounding reaches the slot's engine source. The
 * control: a chat completion on the same server holds nothing. */
static void test_ask_grounded(void)
{
    sv_server s = {0};
    static char log[1 << 20];
    ASSERT(sv_world(&s) && sv_start(&s, NULL));
    sv_resp r;
    sv_request(sv_connect_unix(s.sock), "POST", "/v1/chat/completions", NULL,
               "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], "
               "\"max_tokens\": 4}", &r);
    EXPECT_EQ_INT(r.status, 200);
    free(r.body);
    EXPECT(!strstr(sv_log(&s, log, sizeof log), "answers held to"));
    sv_request(sv_connect_unix(s.sock), "POST", "/v1/hearth/ask", NULL,
               "{\"request\": \"What is on my calendar tomorrow?\"}", &r);
    EXPECT_EQ_INT(r.status, 200);
    free(r.body);
    EXPECT(log_has(&s, "source: answers held to"));
    sv_cleanup(&s);
}

static void test_ask_options(void)
{
    if (!up()) return;
    sv_resp r;
    post_unix("/v1/hearth/ask", "{\"request\": \"hi\", \"allow_tainted_send\": true}", &r);
    expect_error(&r, 400, NULL, NULL);
    EXPECT(strstr(r.body, "consent question") != NULL);
    free(r.body);
    post_refused("/v1/hearth/ask", "{\"request\": \"\"}", 400, NULL);
    post_refused("/v1/hearth/ask", "{\"request\": \"hi\", \"tools\": \"nothing.*\"}", 400, NULL);
    post_refused("/v1/hearth/ask", "{\"request\": \"hi\", \"yes\": true, \"no\": true}", 400, NULL);
    post_refused("/v1/hearth/ask", "{\"request\": \"hi\", \"max_steps\": 0}", 400, NULL);
    post_refused("/v1/hearth/ask", "{\"request\": \"hi\", \"answer\": \"sometimes\"}", 400, NULL);
}

/* "answer": "results" over HTTP: the answer is written from the calls, in
 * fixed words (what was found, that a call failed, or that none ran). */
static void test_ask_results_answer(void)
{
    if (!up()) return;
    sv_resp r;
    post_unix("/v1/hearth/ask", "{\"request\": \"What is on my calendar tomorrow?\", \"stream\": "
              "false, \"max_steps\": 2, \"answer\": \"results\"}", &r);
    EXPECT_EQ_INT(r.status, 200);
    cJSON *j = json_of(&r);
    const char *a = cJSON_GetStringValue(cJSON_GetObjectItem(j, "answer"));
    const char *st = cJSON_GetStringValue(cJSON_GetObjectItem(j, "status"));
    if (st && !strcmp(st, "answered"))
        EXPECT(a && (strstr(a, " tomorrow") || strstr(a, " failed: ") || strstr(a, " did not run") ||
                     !strncmp(a, "No tool was called", 18) || strstr(a, "events")));
    cJSON_Delete(j);
    free(r.body);
}

/* The taint rule over HTTP: with untrusted content in the conversation (a
 * recalled memory a mail wrote), memory.remember asks whatever the client
 * says ("yes": true); the control, the same request without it, runs on
 * the client's yes. The request offers memory.remember alone, so that the
 * rule is tested and not the model's choice of tool. */
static void taint_round(int untrusted)
{
    sv_server s = {0};
    ASSERT(sv_world(&s));
    char db[160], data[160];
    snprintf(data, sizeof data, "%s/home/data", s.dir);
    snprintf(db, sizeof db, "%s/memory.db", data);
    mkdir(data, 0700);
    hx_memory_params mp = hx_memory_default_params();
    mp.path = db;
    hx_memory *m = NULL;
    hx_err err = {0};
    ASSERT(hx_memory_open(&mp, &m, &err) == HX_OK);
    hx_mem_new nm = {"person", "Bob's email is on the invitation from bob@example.org", 0, 0,
                     untrusted};
    EXPECT(hx_memory_remember(m, &nm, NULL, NULL, &err) == HX_OK);
    hx_memory_close(m);
    ASSERT(sv_start(&s, NULL));
    ask_run a;
    ASSERT(ask_open(&a, &s, "{\"request\": \"Remember that Bob's email is bob@example.org\", "
                            "\"tools\": \"memory.remember\", \"yes\": true}"));
    cJSON *q = untrusted ? ask_next(&a, "consent") : NULL;
    if (untrusted) {
        ASSERT(q);
        EXPECT(strstr(cJSON_GetStringValue(cJSON_GetObjectItem(q, "why")), "untrusted") != NULL);
        sv_resp r;
        answer(&s, cJSON_GetStringValue(cJSON_GetObjectItem(q, "id")), "no", &r);
        EXPECT_EQ_INT(r.status, 200);
        free(r.body);
    }
    cJSON *done = ask_next(&a, "done");
    ASSERT(done);
    const cJSON *call = cJSON_GetArrayItem(cJSON_GetObjectItem(done, "calls"), 0);
    EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(call, "name")), "memory.remember");
    EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(call, "status")), untrusted ? "refused" : "ok");
    EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(call, "by")), untrusted ? "user" : "--yes");
    cJSON_Delete(done);
    cJSON_Delete(q);
    ask_close(&a);
    sv_cleanup(&s);
}

static void test_taint_rule(void)
{
    if (!up()) return;
    taint_round(1);
    taint_round(0);
}

static void test_memory_api(void)
{
    if (!up()) return;
    sv_resp r;
    get_unix("/v1/hearth/memory?q=Bob", &r);
    cJSON *j = json_of(&r), *it = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "data"), 0);
    int id = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(it, "id"));
    EXPECT(id > 0);
    EXPECT_STR_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(it, "provenance")), "user");
    cJSON_Delete(j);
    free(r.body);
    char path[64];
    snprintf(path, sizeof path, "/v1/hearth/memory/%d", id);
    get_unix(path, &r);
    EXPECT_EQ_INT(r.status, 200);
    free(r.body);
    sv_request(unix_fd(), "DELETE", path, NULL, NULL, &r);
    EXPECT_EQ_INT(r.status, 200);
    EXPECT(strstr(r.body, "\"deleted\":true") != NULL);
    free(r.body);
    get_unix(path, &r);
    expect_error(&r, 404, NULL, NULL);
    free(r.body);
    sv_request(unix_fd(), "DELETE", "/v1/hearth/memory/abc", NULL, NULL, &r);
    expect_error(&r, 404, NULL, NULL);
    free(r.body);
    get_unix("/v1/hearth/audit?limit=0", &r);
    expect_error(&r, 400, NULL, "limit");
    free(r.body);
    sv_request(unix_fd(), "DELETE", "/v1/hearth/audit", NULL, NULL, &r); /* read only */
    expect_error(&r, 405, NULL, NULL);
    free(r.body);
}

/* The serving process runs under its seccomp filter. */
static void test_confined_process(void)
{
    if (!up()) return;
    char path[64], buf[8192];
    snprintf(path, sizeof path, "/proc/%d/status", (int)g.pid);
    FILE *f = fopen(path, "r");
    ASSERT(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    EXPECT(strstr(buf, "Seccomp:\t2") != NULL);
    EXPECT(strstr(buf, "NoNewPrivs:\t1") != NULL);
    const char *fl = strstr(buf, "Seccomp_filters:\t");
    EXPECT(fl && atoi(fl + 17) >= 1);
}

/* In a process serving as hearth serve does (listen, confine, serve): no
 * socket of any family opens and io_uring is refused, while the
 * connections its listener accepts are served; control: before the
 * filter, socket() works. */
static void test_filter_while_serving(void)
{
    char dir[] = "/tmp/hx_confine_XXXXXX", sock[128];
    ASSERT(mkdtemp(dir));
    snprintf(sock, sizeof sock, "%s/s.sock", dir);
    int pfd[2];
    ASSERT(!pipe(pfd));
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int res[4] = {0, 0, 0, 0};
        hx_serve_params p = hx_serve_default_params();
        p.socket_path = sock;
        p.slots = 1;
        hx_server *s = NULL;
        hx_err err = {0};
        hx_model *m = NULL;
        hx_model_params mp = hx_model_default_params();
        int before = socket(AF_INET, SOCK_STREAM, 0);
        res[0] = before >= 0;
        if (before >= 0) close(before);
        if (hx_serve_listen(&p, &s, &err) || hx_sandbox_confine_self_no_network(&err) ||
            hx_model_load("models/hearth-tiny.gguf", &mp, &m, &err))
            _exit(2);
        hx_serve_deps d = {.model = m, .model_name = "tiny", .family = HX_TPL_BRIEF,
                           .ep = hx_source_engine_default_params(),
                           .pp = hx_planner_default_params()};
        d.ep.cancelled = hx_serve_prefill_check;
        d.reg = hx_tools_new(NULL);
        if (hx_serve_start(s, &d, &err)) _exit(3);
        errno = 0;
        res[1] = socket(AF_INET, SOCK_STREAM, 0) < 0 && errno == EACCES;
        errno = 0;
        res[2] = socket(AF_UNIX, SOCK_STREAM, 0) < 0 && errno == EACCES;
#ifdef SYS_io_uring_setup
        errno = 0;
        res[3] = syscall(SYS_io_uring_setup, 1, NULL) < 0 && errno == EPERM;
#else
        res[3] = 1;
#endif
        if (write(pfd[1], res, sizeof res) != sizeof res) _exit(4);
        pause();
        _exit(0);
    }
    close(pfd[1]);
    int res[4] = {0};
    EXPECT(read(pfd[0], res, sizeof res) == sizeof res);
    close(pfd[0]);
    EXPECT(res[0]); /* control: sockets open before the filter */
    EXPECT(res[1]); /* AF_INET refused */
    EXPECT(res[2]); /* AF_UNIX refused */
    EXPECT(res[3]); /* io_uring refused */
    sv_resp r;
    sv_request(sv_connect_unix(sock), "GET", "/v1/models", NULL, NULL, &r);
    EXPECT_EQ_INT(r.status, 200); /* accepted connections are served */
    free(r.body);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    sv_sh("rm -rf '%s'", dir);
}

/* The tools hearth serve was started with bound every request: a request
 * narrows them, never widens them (control: test_ask_consent, where the
 * same request calls memory.remember). */
static void test_server_tools_bound(void)
{
    sv_server s = {0};
    static const char *const args[] = {"--tools", "calendar.*", NULL};
    ASSERT(sv_world(&s) && sv_start(&s, args));
    sv_resp r;
    sv_request(sv_connect_unix(s.sock), "POST", "/v1/hearth/ask", NULL,
               "{\"request\": \"hi\", \"tools\": \"memory.*\"}", &r);
    expect_error(&r, 400, NULL, NULL);
    EXPECT(strstr(r.body, "--tools") != NULL);
    free(r.body);
    sv_request(sv_connect_unix(s.sock), "POST", "/v1/hearth/ask", NULL,
               "{\"request\": \"Remember that Bob's email is bob@example.org\", \"stream\": false, "
               "\"max_steps\": 2}", &r);
    EXPECT_EQ_INT(r.status, 200);
    cJSON *j = json_of(&r);
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(j, "calls"))
        EXPECT(!strncmp(cJSON_GetStringValue(cJSON_GetObjectItem(c, "name")), "calendar.", 9));
    EXPECT(cJSON_IsNumber(cJSON_GetObjectItem(j, "episode")));
    cJSON_Delete(j);
    free(r.body);
    sv_cleanup(&s);
}

/* Queue full: 503; the server serves on. The one slot is held by a
 * question waiting for consent, which holds it for as long as its client
 * stays (a generation could end by itself and free it early); of two
 * requests after it, whichever the server took first waits in the one
 * place in the queue, and the other is refused. */
static void test_queue_full(void)
{
    sv_server s = {0};
    static const char *const args[] = {"--slots", "1", "--queue", "1", NULL};
    ASSERT(sv_world(&s) && sv_start(&s, args));
    ask_run a;
    ASSERT(ask_open(&a, &s, "{\"request\": \"Remember that Dan's email is dan@example.org\"}"));
    cJSON *q = ask_next(&a, "consent");
    ASSERT(q);
    const char *body = "{\"messages\": [{\"role\": \"user\", \"content\": \"A story\"}], "
                       "\"stream\": true, \"max_tokens\": 4}";
    char raw[1024], buf[512];
    int n = snprintf(raw, sizeof raw, "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n"
                     "Connection: close\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s", strlen(body), body);
    struct pollfd two[2];
    for (int i = 0; i < 2; i++) {
        two[i] = (struct pollfd){sv_connect_unix(s.sock), POLLIN, 0};
        ASSERT(two[i].fd >= 0 && !sv_send_all(two[i].fd, raw, (size_t)n));
    }
    ASSERT(poll(two, 2, 60000) > 0);
    const int refused = two[0].revents ? two[0].fd : two[1].fd;
    const int waiting = refused == two[0].fd ? two[1].fd : two[0].fd;
    size_t len;
    char *got = sv_read_all(refused, &len, 10000);
    EXPECT(!strncmp(got, "HTTP/1.1 503", 12) && strstr(got, "overloaded"));
    free(got);
    close(refused);
    cJSON_Delete(q);
    ask_close(&a); /* leaves: its slot goes to the one waiting */
    struct pollfd p = {waiting, POLLIN, 0};
    n = poll(&p, 1, 60000) == 1 ? (int)recv(waiting, buf, sizeof buf - 1, 0) : -1;
    EXPECT(n > 0 && !strncmp(buf, "HTTP/1.1 200", 12));
    close(waiting);
    sv_resp r;
    sv_request(sv_connect_unix(s.sock), "GET", "/v1/models", NULL, NULL, &r);
    EXPECT_EQ_INT(r.status, 200);
    free(r.body);
    sv_cleanup(&s);
}

/* Stopping while a stream runs, a request waits and a question waits:
 * the stream ends, the waiting request gets 503, the question is
 * answered no, and the server exits 0 having closed them all. */
static void test_stop_while_busy(void)
{
    sv_server s = {0};
    static const char *const args[] = {"--slots", "1", NULL};
    ASSERT(sv_world(&s) && sv_start(&s, args));
    ask_run a;
    ASSERT(ask_open(&a, &s, "{\"request\": \"Remember that Dan's email is dan@example.org\"}"));
    cJSON *q = ask_next(&a, "consent"); /* the one slot waits on it */
    ASSERT(q);
    const char *body = "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], "
                       "\"max_tokens\": 5}";
    char raw[512];
    int n = snprintf(raw, sizeof raw, "POST /v1/chat/completions HTTP/1.0\r\nHost: localhost\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                     strlen(body), body);
    int waiting = sv_connect_unix(s.sock);
    ASSERT(waiting >= 0 && !sv_send_all(waiting, raw, (size_t)n));
    usleep(300000); /* queued behind the question */
    EXPECT_EQ_INT(sv_stop(&s), 0);
    cJSON *ans = ask_next(&a, "consent_answered");
    EXPECT(ans && !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(ans, "answer")), "no"));
    cJSON_Delete(ans);
    size_t len;
    char *got = sv_read_all(waiting, &len, 30000);
    EXPECT(!strncmp(got, "HTTP/1.1 503", 12) || !strncmp(got, "HTTP/1.0 503", 12));
    free(got);
    close(waiting);
    cJSON_Delete(q);
    ask_close(&a);
    sv_cleanup(&s);
}

/* Stopping removes the socket; a second server on a live socket is
 * refused and the first serves on. */
static void test_lifecycle(void)
{
    sv_server a = {0}, b = {0};
    ASSERT(sv_world(&a) && sv_start(&a, NULL));
    ASSERT(sv_world(&b));
    snprintf(b.sock, sizeof b.sock, "%s", a.sock);
    EXPECT(!sv_start(&b, NULL));
    char log[4096];
    EXPECT(strstr(sv_log(&b, log, sizeof log), "another server listens") != NULL);
    sv_stop(&b);
    sv_resp r;
    sv_request(sv_connect_unix(a.sock), "GET", "/v1/models", NULL, NULL, &r);
    EXPECT_EQ_INT(r.status, 200);
    free(r.body);
    EXPECT_EQ_INT(sv_stop(&a), 0);
    struct stat st;
    EXPECT(lstat(a.sock, &st) && errno == ENOENT);
    sv_cleanup(&a);
    sv_cleanup(&b);
}

/* --install writes the unit once; one changed by hand is left alone. */
static void test_install(void)
{
    const char *h = sv_hearth();
    if (!h) SKIP("hearth is not built");
    char dir[] = "/tmp/hx_unit_XXXXXX", unit[128], buf[4096];
    ASSERT(mkdtemp(dir));
    snprintf(unit, sizeof unit, "%s/systemd/user/hearth-serve.service", dir);
    EXPECT_EQ_INT(sv_sh("XDG_CONFIG_HOME='%s' '%s' serve --install --listen 127.0.0.1:8765 >/dev/null", dir, h), 0);
    FILE *f = fopen(unit, "r");
    ASSERT(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    EXPECT(strstr(buf, " serve \"--listen\" \"127.0.0.1:8765\"\n") != NULL);
    EXPECT(strstr(buf, "WantedBy=default.target") != NULL);
    EXPECT_EQ_INT(sv_sh("XDG_CONFIG_HOME='%s' '%s' serve --install --listen 127.0.0.1:8765 >/dev/null", dir, h), 0);
    EXPECT_EQ_INT(sv_sh("echo '# mine' >> '%s'", unit), 0);
    EXPECT(sv_sh("XDG_CONFIG_HOME='%s' '%s' serve --install 2>/dev/null >/dev/null", dir, h) != 0);
    EXPECT_EQ_INT(sv_sh("tail -n 1 '%s' | grep -qx '# mine'", unit), 0);
    EXPECT(sv_sh("'%s' serve --listen 0.0.0.0:80 --socket /nonexistent/s 2>/dev/null", h) != 0);
    sv_sh("rm -rf '%s'", dir);
}

int main(void)
{
    RUN(test_models);
    RUN(test_token);
    RUN(test_page);
    RUN(test_host_and_origin);
    RUN(test_bad_requests);
    RUN(test_oversized_bodies);
    RUN(test_slow_senders);
    RUN(test_chat);
    RUN(test_chat_tools);
    RUN(test_chat_json_schema);
    RUN(test_chat_stream);
    RUN(test_context_full);
    RUN(test_disconnect_cancels);
    RUN(test_prefix_per_conversation);
    RUN(test_ask_consent);
    RUN(test_consent_client_leaves);
    RUN(test_ask_options);
    RUN(test_ask_results_answer);
    RUN(test_ask_grounded);
    RUN(test_taint_rule);
    RUN(test_memory_api);
    RUN(test_confined_process);
    RUN(test_filter_while_serving);
    RUN(test_server_tools_bound);
    RUN(test_queue_full);
    RUN(test_stop_while_busy);
    RUN(test_lifecycle);
    RUN(test_install);
    if (g_up > 0) EXPECT_EQ_INT(sv_stop(&g), 0);
    sv_cleanup(&g);
    return test_summary();
}
