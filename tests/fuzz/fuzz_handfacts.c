/* fuzz_handfacts.c: fuzz target for the hand-written evaluation's reader of
 * facts (sim/handfacts.c), which reads model answers and tool results
 * (text from outside) and a task's facts. The input is a task's JSON, a
 * NUL, the answer, a NUL, the sources (a missing part is empty; a task
 * that is not JSON is replaced by a fixed one). Checks: every mention's
 * span lies inside the folded text, and the answer check gives 0 or 1 with
 * a reason. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sim/handeval.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char fixed_task[] =
    "{\"facts\":[{\"text\":[\"dentist\",\"Zahnarzt\"],\"time\":\"11:30\",\"date\":\"2027-03-12\"},"
    "{\"addr\":\"a@b.org\"},{\"file\":\"x/notes.md\"},{\"number\":\"1,250.5\"},{\"say\":\"nothing\"}],"
    "\"forbid\":[{\"time\":\"12:30\"},{\"text\":\"Medisoft\",\"time\":\"13:00\"}],\"allow\":[{\"date\":\"2027-03-13\"}]}";

/* The next NUL-ended part of data[*at, size), copied and NUL-terminated. */
static char *part(const uint8_t *data, size_t size, size_t *at)
{
    size_t a = *at, e = a;
    while (e < size && data[e]) e++;
    char *s = malloc(e - a + 1);
    if (!s) return NULL;
    memcpy(s, data + a, e - a);
    s[e - a] = 0;
    *at = e < size ? e + 1 : e;
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t at = 0;
    char *tj = part(data, size, &at), *answer = part(data, size, &at), *src = part(data, size, &at);
    cJSON *task = tj ? cJSON_Parse(tj) : NULL;
    if (!task) task = cJSON_Parse(fixed_task);
    hx_he_text t;
    if (answer && hx_he_scan(answer, 20887, &t) == HX_OK) {
        for (int i = 0; i < t.n; i++)
            HX_CHECK(t.m[i].at >= 0 && t.m[i].at < t.m[i].end && (size_t)t.m[i].end <= t.len);
        hx_he_text_free(&t);
    }
    char why[600];
    if (answer && src && task) {
        int ok = hx_he_check_answer(task, answer, src, 20887, why, sizeof why);
        HX_CHECK((ok == 0 || ok == 1) && why[0] && memchr(why, 0, sizeof why));
        int found = 0, facts = 0;
        ok = hx_he_facts_in(task, src, 20887, &found, &facts, why, sizeof why);
        HX_CHECK((ok == 0 || ok == 1) && found <= facts);
    }
    cJSON_Delete(task);
    free(tj);
    free(answer);
    free(src);
    return 0;
}
