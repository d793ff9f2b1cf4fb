/* cmd_nightly.c: `hearth nightly` (and `hearth lora train`, the same run
 * without the governor): fine-tunes a LoRA adapter on the user's judged
 * episodes rendered as the agent prompts the model (nightly/nightly.c,
 * nightly/nightly_agent.c) and adopts it if it lowers the held-out loss and
 * keeps the generic tasks' success; --install prints a cron line and a
 * systemd user timer. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "nightly/nightly.h"
#include "cli/cli.h"
#include "lora/lora.h"
#include "tools/tools.h"

/* The longest training sequence: a conversation longer than this (or the
 * model's context) is trained in windows, each turn after its head. */
#define NIGHTLY_MAX_SEQ 4096

static void nightly_usage(FILE *f, const char *verb)
{
    const int nightly = !strcmp(verb, "nightly");
    fprintf(f, "usage: hearth %s [options]\n", verb);
    if (nightly) fprintf(f, "       hearth nightly --install\n");
    fprintf(f,
        "\nTrains a LoRA adapter on the episodes you accepted (as they were) and\n"
        "corrected (with your correction), rendered as the agent prompts the\n"
        "model, the latest 20%% held out%s; adopts it (hearth lora) only if it\n"
        "lowers the held-out loss and does not lower the success on a sample\n"
        "of generic agent tasks by more than the margin, against the adapters\n"
        "active now (or the base model when none is). Episodes longer than the\n"
        "training window are trained on in windows that end on the assistant's\n"
        "turns. Stopped runs resume from their checkpoint.\n\n"
        "  -m, --model FILE     base model (default: the config's \"model\")\n",
        nightly ? ", when the device is idle, charging and cool" : "");
    if (nightly) fprintf(f, "      --force          run whatever the governor says\n");
    fprintf(f,
        "      --steps N        optimizer steps (default 300)\n"
        "      --rank R         LoRA rank (default 16; alpha = rank)\n"
        "      --lr LR          learning rate (default 1e-3)\n"
        "      --epochs N       instead of --steps: passes over the training data\n"
        "      --targets LIST   adapted matrices, of q,k,v,o,gate,up,down\n"
        "                       (default up,down; on a MoE model such as\n"
        "                       Qwen3-30B-A3B, whose router and experts stay\n"
        "                       frozen, gate, up and down mean q,k,v,o)\n"
        "      --first-layer N  adapt only layers N and up (default: the later\n"
        "                       half; 0: all. The later layers alone change less of\n"
        "                       what the model does on other requests)\n"
        "      --replay R       generic conversations mixed into the training data\n"
        "                       per episode of yours, against forgetting: made on\n"
        "                       the device by hearth datagen's generator (its\n"
        "                       training split, never the generic suite's tasks)\n"
        "                       and rendered as your episodes are (default 3; 0: none)\n"
        "      --replay-from W  whose answers the replay teaches: base (the base\n"
        "                       model's own runs of those requests, so the adapter\n"
        "                       keeps what the base does there; the default) or\n"
        "                       oracle (the generator's intended runs)\n"
        "      --replay-contrast F  this share (0 to 1) of the base's replayed runs are\n"
        "                       calendar requests of your episodes' kinds (schedule,\n"
        "                       find a slot, create an event) for other people, with\n"
        "                       no value your episodes' calls carry (room, attendees):\n"
        "                       the adapter sees your habits are yours, not every\n"
        "                       calendar request's (default 0; needs --replay-from base)\n"
        "      --replay-near F  this share (0 to 1) of the base's replayed runs are\n"
        "                       calendar requests of the other kinds (cancel, move,\n"
        "                       free or busy, list), so that the adapter keeps their\n"
        "                       tools (default 0.3 with --replay-from base, else 0)\n"
        "      --replay-soft K  the replay's answers are learned as the base's\n"
        "                       distribution there, its K most likely tokens (a KL\n"
        "                       term to the base), not as its tokens (default 0:\n"
        "                       the tokens)\n"
        "      --keep-generic L  training also pays L times the relative change\n"
        "                       the adapter makes on the replay's tokens at each\n"
        "                       adapted matrix, so that it learns your habits in\n"
        "                       directions other requests do not use (default 0:\n"
        "                       off; needs the replay)\n"
        "      --keep-at W      where: all (the replay's every token; default) or\n"
        "                       targets (the positions that decide its answers)\n"
        "      --eval-tasks N   the generic suite: the same N held-out agent tasks\n"
        "                       run with what you run now and with the new adapter,\n"
        "                       compared task by task (default 300: one task is\n"
        "                       a third of a point; 0: no such check)\n"
        "      --eval-margin P  largest allowed drop, in points: tasks lost minus\n"
        "                       tasks gained, over N (default 2)\n"
        "      --scales LIST    adapter scales the generic suite tries, in order\n"
        "                       (e.g. 1,0.75,0.5); the adapter is adopted at the\n"
        "                       first that passes, and ask and chat apply it at\n"
        "                       that scale (default 1,0.9)\n"
        "      --stop-delta F   early stopping: the held-out loss is measured every\n"
        "                       8 steps and training stops when it fell by less\n"
        "                       than F times its starting value (default 0: the\n"
        "                       whole schedule)\n"
        "      --train-on W     new: of your episodes, only the tokens the base\n"
        "                       model gets wrong are trained on (what they add:\n"
        "                       a room, a length, an address); all: every token\n"
        "                       you accepted (default all)\n"
        "      --keep-candidate FILE  also copy the trained adapter there, adopted\n"
        "                       or not (to measure a discarded one)\n"
        "      --max-memory SIZE  bound on training's memory (activations, adapter\n"
        "                       state, base; e.g. 2G): a MoE base over it is read\n"
        "                       through a weight cache of what is left, else the\n"
        "                       run refuses to start (default: config\n"
        "                       nightly.max_memory, else none)\n"
        "  -t, --threads N      0 = all cores (default)\n\n"
        "config.json's \"nightly\" object sets the defaults of these: \"rank\",\n"
        "\"lr\", \"epochs\", \"steps\", \"targets\" (\"up,down\"), \"first_layer\", \"replay\",\n"
        "\"replay_from\" (\"base\" or \"oracle\"), \"replay_contrast\", \"replay_near\",\n"
        "\"replay_soft\", \"keep_generic\", \"eval_tasks\", "
        "\"scales\" (\"1,0.75,0.5\"), \"stop_delta\", \"max_memory\"; the options override\n"
        "it.\n");
    if (nightly) fprintf(f, "      --install        print a crontab line and a systemd user timer\n");
}

/* "q,k,v,o,gate,up,down" (any of them, comma-separated) as HX_LORA_*
 * bits; 0 if empty or unknown. */
static unsigned parse_targets(const char *s)
{
    static const char *const names[] = {"q", "k", "v", "o", "gate", "up", "down"};
    unsigned bits = 0;
    while (s && *s) {
        const size_t n = strcspn(s, ",");
        int k = 0;
        while (k < 7 && (strlen(names[k]) != n || strncmp(names[k], s, n))) k++;
        if (k == 7) return 0;
        bits |= 1u << k;
        s += n + (s[n] == ',');
    }
    return bits;
}

/* "1,0.75,0.5": scales in (0, 4] into p->scales; -1 if empty, too many
 * or not numbers. */
static int parse_scales(const char *s, hx_nightly_params *p)
{
    int n = 0;
    while (s && *s) {
        char *end;
        const double v = strtod(s, &end);
        if (end == s || !(v > 0 && v <= 4) || n == HX_NIGHTLY_MAX_SCALES || (*end && *end != ','))
            return -1;
        p->scales[n++] = (float)v;
        s = *end ? end + 1 : end;
    }
    if (!n) return -1;
    p->n_scales = n;
    return 0;
}

/* --replay-from / nightly.replay_from: 1 for "base", 0 for "oracle", -1
 * for anything else. */
static int parse_replay_from(const char *s)
{
    return !s ? -1 : !strcmp(s, "base") ? 1 : !strcmp(s, "oracle") ? 0 : -1;
}

/* The replay's share of near tasks by default: on persona 1 (300-task
 * gate, make bench-persona) none lost 6.3 points, 0.3 4.7 and 0.5 3.3, the
 * "Drop X" requests the adapter turned into find_slots calls going from 7
 * to 1; the habits were learned as well. */
#define NIGHTLY_NEAR 0.3
/* The most of the base's tokens a soft replay target keeps. */
#define NIGHTLY_MAX_SOFT 64

/* The replay's shares of contrast and near tasks (hx_agent_contrast). */
typedef struct replay_mix {
    double contrast, near;
} replay_mix;

/* Says on stderr what is wrong with option a (its value v, NULL: none),
 * unless its number parser already did; -1. */
static int bad_option(const char *verb, const char *a, const char *v)
{
    static const char *const numeric[] = {
        "--steps", "--rank", "--lr", "-t", "--threads", "--eval-tasks", "--epochs",
        "--first-layer", "--replay", "--replay-contrast", "--replay-near", "--replay-soft",
        "--keep-generic", "--eval-margin", "--stop-delta"};
    static const char *const others[] = {"-m", "--model", "--targets", "--replay-from",
                                         "--keep-at", "--max-memory", "--scales",
                                         "--keep-candidate", "--train-on"};
    int is_num = 0, is_other = 0;
    for (size_t k = 0; k < sizeof numeric / sizeof *numeric; k++) is_num |= !strcmp(a, numeric[k]);
    for (size_t k = 0; k < sizeof others / sizeof *others; k++) is_other |= !strcmp(a, others[k]);
    if ((is_num || is_other) && !v) fprintf(stderr, "hearth %s: %s needs a value\n", verb, a);
    else if (is_other)
        fprintf(stderr, "hearth %s: %s: '%s' is not a valid value (see 'hearth %s --help')\n",
                verb, a, v, verb);
    else if (!is_num) hx_cli_bad_word(verb, "option", a);
    return -1;
}

/* Options into p over its defaults (or the config's values); -1 on an
 * unknown option or a bad value (said on stderr, once). */
static int parse(int argc, char **argv, const char *verb, hx_nightly_params *p,
                 const char **model, int *install, int *distill, replay_mix *mix)
{
    const int nightly = !strcmp(verb, "nightly");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
        double d;
        if (nightly && !strcmp(a, "--force")) p->force = 1;
        else if (nightly && !strcmp(a, "--install")) *install = 1;
        else if (!v) return bad_option(verb, a, v);
        else if (!strcmp(a, "-m") || !strcmp(a, "--model")) *model = v, i++;
        else if (!strcmp(a, "--steps") && !hx_cli_opt_long(verb, a, v, 0, 1 << 24, &n))
            p->train.opt.n_steps = (int)n, i++;
        else if (!strcmp(a, "--rank") && !hx_cli_opt_long(verb, a, v, 1, 4096, &n))
            p->lora.rank = (int)n, p->lora.alpha = (float)n, i++;
        else if (!strcmp(a, "--lr") && !hx_cli_opt_double(verb, a, v, 1e-9, 10, &d))
            p->train.opt.lr = (float)d, i++;
        else if ((!strcmp(a, "-t") || !strcmp(a, "--threads")) &&
                 !hx_cli_opt_long(verb, a, v, 0, 1024, &n))
            p->n_threads = (int)n, i++;
        else if (!strcmp(a, "--eval-tasks") && !hx_cli_opt_long(verb, a, v, 0, 100000, &n))
            p->eval_tasks = (int)n, i++;
        else if (!strcmp(a, "--epochs") && !hx_cli_opt_long(verb, a, v, 1, 1 << 20, &n))
            p->epochs = (int)n, p->train.opt.n_steps = 0, i++; /* steps from epochs */
        else if (!strcmp(a, "--targets") && parse_targets(v)) p->lora.targets = parse_targets(v), i++;
        else if (!strcmp(a, "--first-layer") && !hx_cli_opt_long(verb, a, v, 0, 4096, &n))
            p->lora.first_layer = (int)n, i++;
        else if (!strcmp(a, "--replay") && !hx_cli_opt_double(verb, a, v, 0, 1000, &d))
            p->replay_ratio = d, i++;
        else if (!strcmp(a, "--replay-from") && parse_replay_from(v) >= 0)
            *distill = parse_replay_from(v), i++;
        else if (!strcmp(a, "--replay-contrast") && !hx_cli_opt_double(verb, a, v, 0, 1, &d))
            mix->contrast = d, i++;
        else if (!strcmp(a, "--replay-near") && !hx_cli_opt_double(verb, a, v, 0, 1, &d))
            mix->near = d, i++;
        else if (!strcmp(a, "--replay-soft") &&
                 !hx_cli_opt_long(verb, a, v, 0, NIGHTLY_MAX_SOFT, &n))
            p->replay_soft = (int)n, i++;
        else if (!strcmp(a, "--keep-generic") && !hx_cli_opt_double(verb, a, v, 0, 1e6, &d))
            p->keep_generic = d, i++;
        else if (!strcmp(a, "--keep-at") && (!strcmp(v, "all") || !strcmp(v, "targets")))
            p->keep_at_targets = !strcmp(v, "targets"), i++;
        else if (!strcmp(a, "--eval-margin") && !hx_cli_opt_double(verb, a, v, 0, 100, &d))
            p->eval_margin = d / 100, i++;
        else if (!strcmp(a, "--max-memory") && !hx_cli_parse_size(v, &p->max_bytes)) i++;
        else if (!strcmp(a, "--scales") && !parse_scales(v, p)) i++;
        else if (!strcmp(a, "--stop-delta") && !hx_cli_opt_double(verb, a, v, 0, 0.999, &d))
            p->stop_delta = d, i++;
        else if (!strcmp(a, "--keep-candidate")) p->keep_candidate = v, i++;
        else if (!strcmp(a, "--train-on") && (!strcmp(v, "new") || !strcmp(v, "all")))
            p->new_only = !strcmp(v, "new"), i++;
        else return bad_option(verb, a, v);
    }
    return 0;
}

/* The lines name this program by its absolute path: cron's PATH and
 * systemd's do not hold PREFIX/bin, so `hearth` alone would not be found. */
static void print_install(void)
{
    char self[4096];
    const char *h = hx_cli_self_path(self, sizeof self);
    printf("# cron: hearth nightly at 03:15 (crontab -e); it waits for the governor\n"
           "15 3 * * * d=\"${XDG_STATE_HOME:-$HOME/.local/state}\"; mkdir -p \"$d\" && "
           "\"%s\" nightly >> \"$d/hearth-nightly.log\" 2>&1\n\n"
           "# or systemd: ~/.config/systemd/user/hearth-nightly.service\n"
           "[Unit]\n"
           "Description=Hearth nightly LoRA fine-tuning on accepted episodes\n\n"
           "[Service]\n"
           "Type=oneshot\n"
           "ExecStart=\"%s\" nightly\n"
           "Nice=19\n"
           "IOSchedulingClass=idle\n\n"
           "# ~/.config/systemd/user/hearth-nightly.timer\n"
           "[Unit]\n"
           "Description=Run hearth nightly every night\n\n"
           "[Timer]\n"
           "OnCalendar=*-*-* 03:15:00\n"
           "RandomizedDelaySec=15min\n"
           "Persistent=true\n\n"
           "[Install]\n"
           "WantedBy=timers.target\n\n"
           "# then: systemctl --user daemon-reload && "
           "systemctl --user enable --now hearth-nightly.timer\n", h, h);
}

static void print_report(const hx_nightly_report *r)
{
    printf("episodes: %d training (%lld tokens), %d held out (%lld tokens)\n",
           r->n_train, (long long)r->train_tokens, r->n_heldout,
           (long long)r->heldout_tokens);
    if (r->n_replay) printf("replay: %d generic conversations (%lld tokens) mixed into "
                            "training\n", r->n_replay, (long long)r->replay_tokens);
    if (r->soft_targets) printf("replay: %lld answer tokens learned as the base's "
                                "distribution\n", (long long)r->soft_targets);
    if (r->seq_len) printf("sequences: %d tokens; %s\n", r->seq_len, r->docs_cut ?
                           "some conversations longer, trained in windows" :
                           "every conversation whole");
    if (r->steps) printf("steps: %d%s; held-out loss %.4f -> %.4f\n", r->steps,
                         r->stopped_early ? " (stopped early)" : "", r->loss_before,
                         r->loss_after);
    if (r->trained_tokens && r->train_seconds > 0)
        printf("training: %lld tokens in %.1f s (%.0f tokens/s), %.1f CPU-s (%.0f tokens "
               "per CPU-second)\n", (long long)r->trained_tokens, r->train_seconds,
               r->trained_tokens / r->train_seconds, r->train_cpu_seconds,
               r->train_cpu_seconds > 0 ? r->trained_tokens / r->train_cpu_seconds : 0.0);
    if (r->eval_n) printf("generic tasks: %d/%d with %s, %d/%d with the new adapter at scale "
                          "%.2f (%d lost, %d gained; %.0f s)\n", r->eval_base, r->eval_n,
                          r->eval_ref, r->eval_adapter, r->eval_n, r->scale, r->eval_lost,
                          r->eval_gained, r->eval_seconds);
    if (r->mem_estimate) printf("memory: estimate %.1f MiB", r->mem_estimate / 1048576.0);
    if (r->weight_budget) printf(" (the base read through a weight cache of %.1f MiB)",
                                 r->weight_budget / 1048576.0);
    if (r->peak_rss_kb) printf(", peak RSS %.1f MiB", r->peak_rss_kb / 1024.0);
    if (r->mem_estimate) printf("\n");
    printf("%s\n", r->reason);
}

/* What the run needs from the agent: the model (vocabulary, style), the
 * tools offered at inference, the memory, the store. */
typedef struct nightly_env {
    hx_config *cfg;
    hx_memory *mem;
    hx_lora_store *st;
    hx_model *model;
    hx_tools *reg;
    hx_extools *x;
    cJSON *tools;
    hx_agent_render ar;
    hx_agent_eval ae;
    hx_agent_contrast contrast;
} nightly_env;

static int open_env(nightly_env *e, const char *model, int distill, replay_mix mix,
                    hx_nightly_params *p, hx_err *err)
{
    if (mix.near < 0) mix.near = distill ? NIGHTLY_NEAR : 0;
    if ((mix.contrast > 0 || mix.near > 0) && !distill)
        return hx_err_set(err, HX_ERR_INVALID, "the contrast and near replays are the base's "
                          "runs: they need --replay-from base");
    int rc = hx_memory_open(NULL, &e->mem, err);
    if (!rc) rc = hx_lora_store_open(NULL, &e->st, err);
    if (!rc) rc = hx_model_load(model, NULL, &e->model, err);
    if (!rc && !hx_model_vocab(e->model))
        rc = hx_err_set(err, HX_ERR_FORMAT, "%s has no tokenizer", model);
    if (!rc && !(e->reg = hx_tools_new(e->cfg))) rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    if (!rc) rc = hx_tools_register_builtins(e->reg, err);
    if (!rc) rc = hx_agent_register_memory_tools(e->reg, e->mem, err);
    if (!rc) {
        hx_buf problems;
        hx_buf_init(&problems);
        rc = hx_extools_load(e->reg, NULL, &e->x, &problems, err);
        hx_buf_free(&problems);
    }
    if (!rc && !(e->tools = hx_tools_list_json(e->reg)))
        rc = hx_err_set(err, HX_ERR_NOMEM, "out of memory");
    if (rc) return rc;
    const int family = hx_tpl_detect(hx_model_gguf(e->model), hx_model_vocab(e->model));
    e->ar = (hx_agent_render){hx_model_vocab(e->model), family, e->tools};
    e->ae = (hx_agent_eval){e->model, family, p->n_threads, 0, 1, NULL, NULL, NULL, 0, NULL};
    p->render = hx_agent_nightly_render, p->render_user = &e->ar;
    p->eval = hx_agent_nightly_eval, p->eval_user = &e->ae;
    /* the replay's targets: the base's own runs (distillation) or the
     * oracle's; on hearth-tiny the oracle's cost 3-9 points of the
     * generic suite with every recipe tried (make bench-persona) */
    if (distill) p->replay = hx_agent_nightly_distill, p->replay_user = &e->ae;
    else p->replay = hx_agent_nightly_replay, p->replay_user = &e->ar;
    e->contrast.share = mix.contrast, e->contrast.near = mix.near;
    if ((mix.contrast > 0 || mix.near > 0) &&
        !(rc = hx_agent_contrast_learn(&e->contrast, e->mem, err))) {
        e->ae.contrast = &e->contrast;
        fprintf(stderr, "nightly: contrast replay: %.0f%% of the replay your episodes' "
                "kinds, %.0f%% the other calendar kinds, without the %d values of your "
                "episodes' calls%s\n", mix.contrast * 100, mix.near * 100,
                e->contrast.n_terms, e->contrast.tools ? "" : " (your episodes make no "
                "calendar calls: none fit)");
    }
    if (rc) return rc;
    /* an episode carries the system text and tool list: a sequence holds
     * a whole conversation where the context allows (nightly shortens it
     * to the longest one), and episodes sharing them are packed after one
     * copy */
    const int n_ctx = hx_model_hparams(e->model)->n_ctx_train;
    p->train.seq_len = n_ctx < NIGHTLY_MAX_SEQ ? n_ctx : NIGHTLY_MAX_SEQ;
    p->train.n_seq = 1;
    p->train.share_prefix = 32;
    return HX_OK;
}

static void close_env(nightly_env *e)
{
    hx_agent_eval_free_tasks(&e->ae);
    hx_agent_contrast_free(&e->contrast);
    cJSON_Delete(e->tools);
    hx_extools_free(e->x);
    hx_tools_free(e->reg);
    hx_model_free(e->model);
    hx_lora_store_free(e->st);
    hx_memory_close(e->mem);
    hx_config_free(e->cfg);
}

/* The config's nightly.KEY as a number in [lo, hi] into *out; absent: kept. */
static int config_number(const cJSON *night, const char *key, double lo, double hi,
                         double *out, hx_err *err)
{
    const cJSON *n = cJSON_GetObjectItem(night, key);
    if (!n) return HX_OK;
    if (!cJSON_IsNumber(n) || !(n->valuedouble >= lo && n->valuedouble <= hi))
        return hx_err_set(err, HX_ERR_FORMAT, "config.json: nightly.%s is not a number "
                          "from %g to %g", key, lo, hi);
    *out = n->valuedouble;
    return HX_OK;
}

/* The config's "nightly" object into p (the options, parsed after, win):
 * rank, lr, epochs, steps, targets, first_layer, replay, replay_from, replay_contrast, replay_near,
 * replay_soft, keep_generic, eval_tasks, max_memory ("2G" or bytes). */
static int config_nightly(const hx_config *cfg, hx_nightly_params *p, int *distill,
                          replay_mix *mix, hx_err *err)
{
    const cJSON *night = cJSON_GetObjectItem(cfg->raw, "nightly");
    if (!night) return HX_OK;
    if (!cJSON_IsObject(night)) return hx_err_set(err, HX_ERR_FORMAT, "config.json: nightly is not an object");
    double rank = p->lora.rank, lr = p->train.opt.lr, ep = p->epochs, st = p->train.opt.n_steps;
    double et = p->eval_tasks, soft = p->replay_soft, first = p->lora.first_layer;
    int rc = config_number(night, "rank", 1, 1024, &rank, err);
    if (!rc) rc = config_number(night, "first_layer", 0, 1024, &first, err);
    if (!rc) rc = config_number(night, "lr", 1e-9, 1, &lr, err);
    if (!rc) rc = config_number(night, "epochs", 1, 1000, &ep, err);
    if (!rc && cJSON_GetObjectItem(night, "epochs")) st = 0; /* steps from epochs, */
    if (!rc) rc = config_number(night, "steps", 0, 1e7, &st, err); /* unless given */
    if (!rc) rc = config_number(night, "replay", 0, 100, &p->replay_ratio, err);
    if (!rc) rc = config_number(night, "eval_tasks", 0, 1e5, &et, err);
    if (!rc) rc = config_number(night, "stop_delta", 0, 0.999, &p->stop_delta, err);
    if (!rc) rc = config_number(night, "replay_contrast", 0, 1, &mix->contrast, err);
    if (!rc) rc = config_number(night, "replay_near", 0, 1, &mix->near, err);
    if (!rc) rc = config_number(night, "replay_soft", 0, NIGHTLY_MAX_SOFT, &soft, err);
    if (!rc) rc = config_number(night, "keep_generic", 0, 1e6, &p->keep_generic, err);
    if (rc) return rc;
    p->replay_soft = (int)soft, p->lora.first_layer = (int)first;
    p->lora.rank = (int)rank, p->lora.alpha = (float)(int)rank, p->train.opt.lr = (float)lr;
    p->epochs = (int)ep, p->train.opt.n_steps = (int)st, p->eval_tasks = (int)et;
    const cJSON *t = cJSON_GetObjectItem(night, "targets");
    if (t && !(cJSON_IsString(t) && (p->lora.targets = parse_targets(t->valuestring))))
        return hx_err_set(err, HX_ERR_FORMAT, "config.json: nightly.targets is not a list "
                          "of q,k,v,o,gate,up,down");
    const cJSON *sc = cJSON_GetObjectItem(night, "scales");
    if (sc && parse_scales(cJSON_GetStringValue(sc), p))
        return hx_err_set(err, HX_ERR_FORMAT, "config.json: nightly.scales is not a list of "
                          "at most %d scales in (0, 4], e.g. \"1,0.75,0.5\"",
                          HX_NIGHTLY_MAX_SCALES);
    const cJSON *rf = cJSON_GetObjectItem(night, "replay_from");
    if (rf && (*distill = parse_replay_from(cJSON_GetStringValue(rf))) < 0)
        return hx_err_set(err, HX_ERR_FORMAT, "config.json: nightly.replay_from is not "
                          "\"base\" or \"oracle\"");
    const cJSON *n = cJSON_GetObjectItem(night, "max_memory");
    if (!n) return HX_OK;
    if (cJSON_IsNumber(n) && n->valuedouble >= 0) p->max_bytes = (size_t)n->valuedouble;
    else if (!cJSON_IsString(n) || hx_cli_parse_size(n->valuestring, &p->max_bytes))
        return hx_err_set(err, HX_ERR_FORMAT, "config.json: nightly.max_memory is not a size");
    return HX_OK;
}

int hx_cli_nightly_run(int argc, char **argv, const char *verb, int force)
{
    if (hx_cli_wants_help(argc, argv)) return nightly_usage(stdout, verb), HX_EXIT_OK;
    hx_nightly_params p = hx_nightly_default_params();
    const char *model = NULL;
    int install = 0, distill = 1;
    replay_mix mix = {0, -1}; /* near: NIGHTLY_NEAR with the base's replay */
    if (parse(argc, argv, verb, &p, &model, &install, &distill, &mix)) return HX_EXIT_USAGE;
    if (install) return print_install(), HX_EXIT_OK;
    p.force |= force;
    hx_err err = {0};
    nightly_env e;
    memset(&e, 0, sizeof e);
    char work[4096];
    char buf[PATH_MAX + 64];
    int rc = hx_config_load(NULL, &e.cfg, &err);
    if (!rc && !(model = hx_cli_find_model(model, e.cfg, buf, sizeof buf))) /* as ask finds it */
        rc = hx_err_set(&err, HX_ERR_NOTFOUND, "%s", CLI_NO_MODEL);
    if (!rc) rc = config_nightly(e.cfg, &p, &distill, &mix, &err);
    if (!rc && parse(argc, argv, verb, &p, &model, &install, &distill, &mix)) /* over the config */
        rc = hx_err_set(&err, HX_ERR_INVALID, "bad options");
    if (!rc) rc = open_env(&e, model, distill, mix, &p, &err);
    if (!rc && hx_path_cache(work, sizeof work - 16) < 0)
        rc = hx_err_set(&err, HX_ERR_RANGE, "cache path too long");
    hx_nightly_report r;
    memset(&r, 0, sizeof r);
    if (!rc) {
        strcat(work, "/nightly");
        p.model = model, p.memory = e.mem, p.store = e.st, p.work_dir = work;
        e.ae.cache_dir = work; /* the gate's base results, night after night */
        p.train.progress = 1;
        p.log = stderr;
        rc = hx_nightly_run(&p, &r, &err);
    }
    if (!rc || rc == HX_ERR_CANCELLED || rc == HX_ERR_RANGE) print_report(&r);
    if (r.eval_n && e.ae.base_cached && !strcmp(r.eval_ref, "the base"))
        printf("generic tasks: the base's results came from the cache (same model, tasks, "
               "threads and hearth)\n");
    if (rc) fprintf(stderr, "hearth %s: %s\n", verb, err.msg[0] ? err.msg : hx_rc_str(rc));
    close_env(&e);
    return rc == HX_ERR_STATE ? HX_EXIT_OK : hx_cli_exit_code(rc); /* not now is no failure */
}

int hx_cmd_nightly(int argc, char **argv)
{
    return hx_cli_nightly_run(argc, argv, "nightly", 0);
}
