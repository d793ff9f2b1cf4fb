/* cmd_nightly.c: `hearth nightly`: fine-tunes a LoRA adapter on the
 * user's judged episodes when the governor allows (lora/nightly.c) and
 * adopts it if it lowers the held-out loss; --install prints a cron line. */
#include <stdlib.h>
#include <string.h>

#include "agent/cli.h"
#include "lora/lora.h"
#include "tools/tools.h"

static void nightly_usage(FILE *f)
{
    fprintf(f,
        "usage: hearth nightly [options]\n"
        "       hearth nightly --install\n\n"
        "Trains a LoRA adapter on the episodes you accepted (as they were) and\n"
        "corrected (with your correction), the latest 20%% held out, when the\n"
        "device is idle, charging and cool; adopts it (hearth lora) only if it\n"
        "lowers the held-out loss. Stopped runs resume from their checkpoint.\n\n"
        "  -m, --model FILE   base model (default: the config's \"model\")\n"
        "      --force        run whatever the governor says\n"
        "      --steps N      optimizer steps (default: 2 epochs)\n"
        "      --rank R       LoRA rank (default 16; alpha = rank)\n"
        "      --lr LR        learning rate (default 2e-4)\n"
        "  -t, --threads N    0 = all cores (default)\n"
        "      --install      print a crontab line that runs this every night\n");
}

static int parse(int argc, char **argv, hx_nightly_params *p, const char **model,
                 int *install)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--force")) p->force = 1;
        else if (!strcmp(a, "--install")) *install = 1;
        else if (!v) return -1;
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) *model = v, i++;
        else if (!strcmp(a, "--steps")) p->train.opt.n_steps = atoi(v), i++;
        else if (!strcmp(a, "--rank")) p->lora.rank = atoi(v), p->lora.alpha = (float)atoi(v), i++;
        else if (!strcmp(a, "--lr")) p->train.opt.lr = strtof(v, NULL), i++;
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) p->n_threads = atoi(v), i++;
        else return -1;
    }
    return p->lora.rank > 0 && p->train.opt.n_steps >= 0 && p->train.opt.lr > 0 ? 0 : -1;
}

static void print_report(const hx_nightly_report *r)
{
    printf("episodes: %d training (%lld tokens), %d held out (%lld tokens)\n",
           r->n_train, (long long)r->train_tokens, r->n_heldout,
           (long long)r->heldout_tokens);
    if (r->steps) printf("steps: %d; held-out loss %.4f -> %.4f\n", r->steps,
                         r->loss_before, r->loss_after);
    printf("%s\n", r->reason);
}

int cmd_nightly(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) return nightly_usage(stdout), HX_EXIT_OK;
    hx_nightly_params p = hx_nightly_default_params();
    const char *model = NULL;
    int install = 0;
    if (parse(argc, argv, &p, &model, &install)) return nightly_usage(stderr), HX_EXIT_USAGE;
    if (install) {
        printf("# hearth nightly at 03:15 (crontab -e); it waits for the governor\n"
               "15 3 * * * hearth nightly >> \"${XDG_STATE_HOME:-$HOME/.local/state}"
               "/hearth-nightly.log\" 2>&1\n");
        return HX_EXIT_OK;
    }
    hx_err err = {0};
    hx_config *cfg = NULL;
    hx_memory *mem = NULL;
    hx_lora_store *st = NULL;
    char work[4096];
    int rc = hx_config_load(NULL, &cfg, &err);
    if (!rc && !model) model = cfg->model;
    if (!rc && !model) rc = hx_err_set(&err, HX_ERR_INVALID, "no model: pass --model "
                                       "FILE or set \"model\" in config.json");
    if (!rc) rc = hx_memory_open(NULL, &mem, &err);
    if (!rc) rc = hx_lora_store_open(NULL, &st, &err);
    if (!rc && hx_path_cache(work, sizeof work - 16) < 0)
        rc = hx_err_set(&err, HX_ERR_RANGE, "cache path too long");
    hx_nightly_report r;
    memset(&r, 0, sizeof r);
    if (!rc) {
        strcat(work, "/nightly");
        p.model = model, p.memory = mem, p.store = st, p.work_dir = work;
        p.train.progress = 1;
        rc = hx_nightly_run(&p, &r, &err);
    }
    if (!rc || rc == HX_ERR_CANCELLED) print_report(&r);
    if (rc) fprintf(stderr, "hearth nightly: %s\n", err.msg[0] ? err.msg : hx_rc_str(rc));
    hx_lora_store_free(st);
    hx_memory_close(mem);
    hx_config_free(cfg);
    return rc == HX_ERR_STATE ? HX_EXIT_OK : cli_exit_code(rc); /* not now is no failure */
}
