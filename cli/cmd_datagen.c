/* cmd_datagen.c: `hearth datagen`: training trajectories (or evaluation
 * tasks) made by the real planner and tools over generated sample worlds. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"
#include "cli/cli.h"

static void datagen_usage(FILE *f)
{
    fprintf(f,
        "usage: hearth datagen [--split train|heldout] [--n N] [--seed S] [-o FILE.jsonl]\n"
        "                      [--tasks] [--category C] [--per-world K] [--dir DIR]\n"
        "                      [--phrasings train|heldout] [--busy-days]\n\n"
        "Generates sample worlds (a user, people, calendars with recurring meetings,\n"
        "a mailbox, files, memories) and requests in many phrasings, and runs each\n"
        "request through the real planner and tools with an oracle writing the\n"
        "assistant's turns, in the compact prompt style. Each verified run is one\n"
        "JSON line: {\"id\", \"split\", \"category\", \"kind\", \"messages\", \"tools\",\n"
        "\"style\"}. The held-out split uses names, topics, rooms, a year of dates and\n"
        "a fifth of the phrasings that training never sees.\n\n"
        "  --split S      train (default) or heldout\n"
        "  --n N          how many lines (default 1000)\n"
        "  --seed S       seed (default 1); the same seed gives the same data\n"
        "  -o FILE        output (default: standard output)\n"
        "  --tasks        evaluation tasks instead: each in a fresh world, with\n"
        "                 the world seed, the request and the expected calls\n"
        "  --category C   only single, multi, none, refusal, error or memory\n"
        "  --per-world K  requests per generated world (default 8)\n"
        "  --dir DIR      where the worlds are written (default: a temporary folder)\n"
        "  --phrasings S  the request phrasings of split S instead of --split's:\n"
        "                 held-out worlds asked in training's phrasings measure\n"
        "                 new names and topics apart from new phrasings\n"
        "  --busy-days    training worlds may get a busy day (two or three events\n"
        "                 moved to one day of the coming week) and a cancelled\n"
        "                 event; not with --tasks, whose worlds are made again\n"
        "                 from their seeds without it\n");
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = s ? strtoull(s, &end, 10) : 0;
    if (!s || errno || end == s || *end) return 0;
    *out = v;
    return 1;
}

static int parse_args(int argc, char **argv, hx_dg_params *p, const char **out_path)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t u = 0;
        if (!strcmp(a, "--tasks")) { p->tasks = 1; continue; }
        if (!strcmp(a, "--busy-days")) { p->world_flags |= HX_WORLD_BUSY_DAYS; continue; }
        static const char *const valued[] = {"--split", "--n", "--seed", "-o", "--output",
                                             "--category", "--per-world", "--dir",
                                             "--phrasings"};
        int known = 0;
        for (size_t k = 0; k < sizeof valued / sizeof *valued; k++) known |= !strcmp(a, valued[k]);
        if (!known) return hx_cli_bad_word("datagen", "option", a);
        if (!v) {
            fprintf(stderr, "hearth datagen: %s needs a value (see --help)\n", a);
            return HX_EXIT_USAGE;
        }
        i++;
        if (!strcmp(a, "--split") && (!strcmp(v, "train") || !strcmp(v, "heldout")))
            p->split = !strcmp(v, "train") ? HX_SPLIT_TRAIN : HX_SPLIT_HELDOUT;
        else if (!strcmp(a, "--n") && parse_u64(v, &u) && u > 0) p->n = (long)u;
        else if (!strcmp(a, "--seed") && parse_u64(v, &u)) p->seed = u;
        else if ((!strcmp(a, "-o") || !strcmp(a, "--output"))) *out_path = v;
        else if (!strcmp(a, "--category") && hx_dg_category_parse(v) >= 0) p->category = hx_dg_category_parse(v);
        else if (!strcmp(a, "--per-world") && parse_u64(v, &u) && u > 0 && u < 1000) p->per_world = (int)u;
        else if (!strcmp(a, "--dir")) p->home = v;
        else if (!strcmp(a, "--phrasings") && (!strcmp(v, "train") || !strcmp(v, "heldout")))
            p->phrasings = !strcmp(v, "train") ? HX_SPLIT_TRAIN : HX_SPLIT_HELDOUT;
        else {
            fprintf(stderr, "hearth datagen: %s: '%s' is not a valid value (see --help)\n", a, v);
            return HX_EXIT_USAGE;
        }
    }
    if (p->tasks && p->world_flags) {
        fprintf(stderr, "hearth datagen: --busy-days makes training conversations, not --tasks "
                        "(a task's world is made again from its seed without it)\n");
        return HX_EXIT_USAGE;
    }
    return HX_EXIT_OK;
}

int hx_cmd_datagen(int argc, char **argv)
{
    if (hx_cli_wants_help(argc, argv)) {
        datagen_usage(stdout);
        return HX_EXIT_OK;
    }
    hx_dg_params p = hx_dg_default_params();
    const char *out_path = NULL;
    int ex = parse_args(argc, argv, &p, &out_path);
    if (ex) return ex;
    hx_dg_stats st;
    hx_err err = {0};
    hx_out o;
    int rc = out_path ? hx_out_open(&o, out_path, NULL, 0666, &err) : HX_OK;
    FILE *out = rc || !out_path ? stdout : hx_out_stdio(&o);
    if (!out) rc = hx_err_set(&err, HX_ERR_NOMEM, "out of memory");
    if (!rc) rc = hx_datagen_run(&p, out, &st, &err);
    if (out_path) rc = hx_out_end(&o, rc, &err);
    if (rc) {
        fprintf(stderr, "hearth datagen: %s\n", err.msg);
        return hx_cli_exit_code(rc);
    }
    fprintf(stderr, "hearth datagen: %ld %s in %.1f s (%.0f per minute), %ld worlds, %ld rejected, "
                    "%.0f bytes per line\n",
            st.written, p.tasks ? "tasks" : "trajectories", st.seconds,
            st.seconds > 0 ? st.written * 60.0 / st.seconds : 0.0, st.worlds, st.rejected,
            st.written ? (double)st.chars / (double)st.written : 0.0);
    fprintf(stderr, "  by category:");
    for (int c = 0; c < HX_CAT_COUNT; c++) fprintf(stderr, " %s %ld", hx_dg_category_name(c), st.per_cat[c]);
    fprintf(stderr, "\n");
    if (st.rejected) fprintf(stderr, "  last rejected: %s\n", st.last_reject);
    return HX_EXIT_OK;
}
