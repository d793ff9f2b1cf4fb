/* test_load.c: hearth serve under a bounded load on loopback: a thousand
 * concurrent connections for a few seconds, a fifth of them bad clients
 * (malformed JSON, bodies too large, no or a wrong token, a foreign Host or
 * Origin, senders that stop half-way). Every good request is answered 200,
 * every bad one gets its own clear status (the slow senders are cut off),
 * and the server serves on. The figures are printed, never asserted. */
#include "load.h"
#include "test.h"

static void test_thousand_connections(void)
{
    static const char *const args[] = {"--idle-timeout", "2", NULL};
    sv_server s = {0};
    if (!sv_hearth()) SKIP("hearth is not built");
    ASSERT(sv_world(&s) && sv_start(&s, args));
    ld_params p = {s.port, s.token, 1000, test_sanitized() ? 3.0 : 4.0, 20};
    ld_stats st;
    double rss0, peak0, rss, peak;
    ld_memory(s.pid, &rss0, &peak0);
    ASSERT(ld_run(&p, &st) == 0);
    ld_memory(s.pid, &rss, &peak);
    EXPECT_EQ_INT(st.connect_failed, 0);
    for (int k = 0; k < LD_KINDS; k++) {
        printf("# %-15s %6ld sent, %6ld as expected (%d), %ld not", ld_kind_names[k], st.sent[k],
               st.as_expected[k], ld_expect[k], st.wrong[k]);
        printf(st.wrong[k] ? " (last: %d)\n" : "\n", st.wrong_status[k]);
        EXPECT_EQ_INT(st.wrong[k], 0);
        EXPECT(st.as_expected[k] > 0);
        if (k != LD_SLOW) EXPECT_EQ_INT(st.as_expected[k], st.sent[k]);
    }
    printf("# %d connections, %.1f s: %.0f requests/s of GET /v1/models, p50 %.1f ms, p99 %.1f ms;"
           " server RSS %.1f MiB (%.1f before), peak %.1f MiB\n", p.conns, st.seconds,
           (double)st.n_lat / st.seconds, ld_quantile(&st, 0.5), ld_quantile(&st, 0.99), rss,
           rss0, peak);
    free(st.lat_ms);
    sv_resp r;
    char h[256];
    snprintf(h, sizeof h, "Host: 127.0.0.1:%d\r\nAuthorization: Bearer %s\r\n", s.port, s.token);
    sv_request(sv_connect_tcp(s.port), "GET", "/v1/models", h, NULL, &r);
    EXPECT_EQ_INT(r.status, 200); /* serving on */
    free(r.body);
    EXPECT_EQ_INT(sv_stop(&s), 0);
    sv_cleanup(&s);
}

int main(void)
{
    RUN(test_thousand_connections);
    return test_summary();
}
