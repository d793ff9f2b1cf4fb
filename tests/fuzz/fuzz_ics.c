/* fuzz_ics.c: fuzz target for the .ics reader (tools/cal_store.c) and the
 * occurrence expansion (tools/cal_expand.c): any bytes must be rejected
 * with a message or read, expanded and turned into JSON without a crash. */
#include <stdint.h>
#include <stdlib.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "tools/calendar_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void expand(icalcomponent *root)
{
    static hx_config cfg;
    hx_cal *c = calloc(1, sizeof *c);
    hx_cal_file *f = calloc(1, sizeof *f);
    if (!c || !f) {
        free(c), free(f), icalcomponent_free(root);
        return;
    }
    cfg.user_email = "alice@example.org";
    c->cfg = &cfg;
    c->tz = hx_tz_find("Europe/Paris");
    c->problems = cJSON_CreateArray();
    f->path = hx_strdup("fuzz.ics");
    f->calendar = hx_strdup("fuzz");
    f->root = root;
    c->files = f;
    c->n_files = c->cap_files = 1;
    if (hx_cal_file_index(f)) {
        hx_cal_free(c);
        return;
    }
    hx_cal_occ *occ = NULL;
    int n = 0;
    hx_err err;
    int64_t known;
    /* 2026-11-01 .. 2027-01-01; a cut list is bounded and all before the cut */
    if (hx_cal_occurrences(c, 1793487600, 1798758000, &occ, &n, &known, &err) == HX_OK) {
        HX_CHECK(n <= HX_CAL_MAX_OCC && known <= 1798758000);
        for (int i = 0; i < n; i++) {
            HX_CHECK(occ[i].end >= occ[i].start && occ[i].start < known);
            HX_CHECK(i == 0 || occ[i - 1].start <= occ[i].start);
            cJSON_Delete(hx_cal_occ_json(c, &occ[i]));
        }
        if (known < 1798758000) cJSON_Delete(hx_cal_cut_json(c, known, "events"));
    }
    free(occ);
    hx_cal_free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = 0;
    icalcomponent *root = NULL;
    hx_err err;
    icalerror_set_errors_are_fatal(0);
    /* libical prints parser warnings on stderr; keep the test log readable */
    int saved = dup(2), null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, 2);
    int rc = hx_cal_parse(s, &root, &err);
    if (saved >= 0) dup2(saved, 2), close(saved);
    if (null >= 0) close(null);
    if (rc == HX_OK) expand(root);
    else HX_CHECK(err.msg[0] != 0);
    free(s);
    return 0;
}
