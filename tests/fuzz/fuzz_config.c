/* fuzz_config.c: fuzz target for config.json loading and checking
 * (tools/config.c): any bytes give a configuration whose fields hold (and
 * whose check says a line per problem) or a clean error naming the file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "tools/tools.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int count_lines(const hx_buf *b)
{
    int n = 0;
    for (size_t i = 0; i < b->len; i++) n += b->data[i] == '\n';
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[64];
    if (!path[0]) snprintf(path, sizeof path, "/tmp/hx_fuzz_config_%d.json", (int)getpid());
    hx_err err = {0};
    if (hx_write_file_atomic(path, data, size, &err)) return 0;
    hx_config *c = NULL;
    int rc = hx_config_load(path, &c, &err);
    if (rc != HX_OK) {
        HX_CHECK(c == NULL && strstr(err.msg, path) != NULL);
        unlink(path);
        return 0;
    }
    HX_CHECK(c && c->timezone && c->calendar_default && c->maildir && !c->missing);
    HX_CHECK(c->work_end_min > c->work_start_min);
    HX_CHECK(c->n_calendars <= HX_MAX_ROOTS && c->n_file_roots <= HX_MAX_ROOTS);
    hx_buf b;
    hx_buf_init(&b);
    int n = hx_config_check(c, &b); /* a path may hold a newline itself */
    HX_CHECK(n >= 0 && count_lines(&b) >= n && (n == 0) == (b.len == 0));
    hx_buf_free(&b);
    hx_config_free(c);
    unlink(path);
    return 0;
}
