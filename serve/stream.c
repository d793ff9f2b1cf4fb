/* stream.c: a job's response: decided once (a status and a body, or an
 * event stream), written by the slot that runs it, sent by MHD from a
 * connection suspended while nothing is there to send. */
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "serve/serve_int.h"

sv_job *hx_sv_job_new(int kind, struct MHD_Connection *conn)
{
    sv_job *j = hx_calloc(1, sizeof *j);
    if (!j) return NULL;
    pthread_mutex_init(&j->mu, NULL);
    j->refs = 1;
    j->kind = kind;
    j->conn = conn;
    const union MHD_ConnectionInfo *ci =
        conn ? MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD) : NULL;
    j->fd = ci ? ci->connect_fd : -1;
    hx_buf_init(&j->out);
    j->queued_at = hx_time_mono();
    return j;
}

void hx_sv_job_unref(sv_job *j)
{
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    int left = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (left) return;
    if (j->free_work) j->free_work(j->work);
    hx_buf_free(&j->out);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

/* With j->mu held: the connection goes on when MHD has it suspended. */
static void wake(sv_job *j)
{
    if (j->suspended && j->conn) {
        j->suspended = 0;
        MHD_resume_connection(j->conn);
    }
}

void hx_sv_job_respond(sv_job *j, int status, const char *json)
{
    pthread_mutex_lock(&j->mu);
    if (!j->started) {
        j->started = 1;
        j->status = status;
        j->sse = 0;
        hx_buf_puts(&j->out, json);
    }
    j->finished = 1;
    wake(j);
    pthread_mutex_unlock(&j->mu);
}

void hx_sv_job_start_stream(sv_job *j)
{
    pthread_mutex_lock(&j->mu);
    if (!j->started) {
        j->started = 1;
        j->status = MHD_HTTP_OK;
        j->sse = 1;
    }
    wake(j);
    pthread_mutex_unlock(&j->mu);
}

void hx_sv_sse_field(hx_buf *out, const char *name, const char *value, int end)
{
    for (const char *l = value;;) {
        size_t n = strcspn(l, "\r\n");
        hx_buf_printf(out, "%s: %.*s\n", name, (int)n, l);
        if (!l[n]) break;
        l += n + (l[n] == '\r' && l[n + 1] == '\n' ? 2 : 1);
    }
    if (end) hx_buf_putc(out, '\n');
}

/* A client reading none of its stream while it is written (it would
 * grow until the generation ends) is taken as gone. */
#define MAX_BACKLOG ((size_t)4 << 20)

static void send_sse(sv_job *j, const char *event, const char *json)
{
    pthread_mutex_lock(&j->mu);
    if (j->sse && !j->finished && !j->gone) {
        if (event) hx_sv_sse_field(&j->out, "event", event, 0);
        hx_sv_sse_field(&j->out, "data", json, 1);
        if (j->out.len - j->sent > MAX_BACKLOG) j->gone = 1;
        wake(j);
    }
    pthread_mutex_unlock(&j->mu);
}

void hx_sv_job_send_data(sv_job *j, const char *json) { send_sse(j, NULL, json); }
void hx_sv_job_send_event(sv_job *j, const char *event, const char *json) { send_sse(j, event, json); }

void hx_sv_job_fail(sv_job *j, int status, const char *param, const char *code, const char *msg)
{
    cJSON *e = hx_sv_error_json(status, param, code, msg);
    char *s = cJSON_PrintUnformatted(e);
    pthread_mutex_lock(&j->mu);
    int streaming = j->started && j->sse;
    pthread_mutex_unlock(&j->mu);
    if (streaming) hx_sv_job_send_data(j, s ? s : "{}");
    else hx_sv_job_respond(j, status, s ? s : "{}");
    cJSON_free(s);
    cJSON_Delete(e);
}

void hx_sv_job_finish(sv_job *j)
{
    pthread_mutex_lock(&j->mu);
    if (!j->started) { /* ended without an answer: cancelled, or stopping */
        j->started = 1;
        j->status = 503;
        hx_buf_puts(&j->out, "{\"error\":{\"message\":\"the request was cancelled (the "
                             "server is stopping or the client left)\",\"type\":"
                             "\"server_error\",\"param\":null,\"code\":\"cancelled\"}}");
    }
    j->finished = 1;
    wake(j);
    pthread_mutex_unlock(&j->mu);
}

int hx_sv_job_gone(sv_job *j)
{
    pthread_mutex_lock(&j->mu);
    if (!j->gone && j->fd >= 0) {
        /* the descriptor is still MHD's: the completion callback, which
         * comes before MHD closes it, sets gone under this lock */
        struct pollfd p = {.fd = j->fd, .events = POLLRDHUP};
        if (poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) j->gone = 1;
    }
    int gone = j->gone;
    pthread_mutex_unlock(&j->mu);
    return gone;
}

/* ---- MHD's side ---- */
/* The event stream's reader: what the job wrote so far; when there is
 * nothing, the connection is suspended until the job writes (returning
 * 0 without suspending would make MHD call again at once). */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    sv_job *j = cls;
    ssize_t n = 0;
    pthread_mutex_lock(&j->mu);
    if (j->out.len > j->sent) {
        size_t k = j->out.len - j->sent < max ? j->out.len - j->sent : max;
        memcpy(buf, j->out.data + j->sent, k);
        j->sent += k;
        if (j->sent == j->out.len) j->out.len = j->sent = 0;
        n = (ssize_t)k;
    } else if (j->finished || j->gone) {
        n = MHD_CONTENT_READER_END_OF_STREAM;
    } else if (j->conn) {
        j->suspended = 1;
        MHD_suspend_connection(j->conn);
    }
    pthread_mutex_unlock(&j->mu);
    return n;
}

static void stream_done(void *cls) { hx_sv_job_unref(cls); }

static struct MHD_Response *stream_response(sv_job *j)
{
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, j, stream_done);
    if (!r) return NULL;
    j->refs++; /* the response's, dropped by stream_done */
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r, "X-Accel-Buffering", "no");
    hx_sv_common_headers(r);
    return r;
}

enum MHD_Result hx_sv_job_queue(sv_job *j, struct MHD_Connection *conn)
{
    pthread_mutex_lock(&j->mu);
    if (!j->started) { /* woken before it had an answer: wait on */
        j->suspended = 1;
        MHD_suspend_connection(conn);
        pthread_mutex_unlock(&j->mu);
        return MHD_YES;
    }
    struct MHD_Response *r = NULL;
    int status = j->status;
    if (j->sse) {
        r = stream_response(j);
    } else {
        r = MHD_create_response_from_buffer(j->out.len, j->out.data ? j->out.data : (char *)"",
                                            MHD_RESPMEM_MUST_COPY);
        if (r) MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
        if (r) hx_sv_common_headers(r);
        j->out.len = 0;
    }
    pthread_mutex_unlock(&j->mu);
    if (!r) return MHD_NO;
    enum MHD_Result ok = MHD_queue_response(conn, (unsigned)status, r);
    MHD_destroy_response(r);
    return ok;
}
