/* nightly.h: the nightly job: the user's judged episodes (memory) rendered
 * as the agent prompts the model, mixed with generic replay conversations
 * (sim's generator, or the base model's own runs), a LoRA adapter trained
 * over the base (lora) and adopted only if the held-out loss drops and the
 * generic agent evaluation holds; and the chat training data of `hearth
 * train --chat` (nightly/chatdata.h). Uses sim, agent, lora and memory. */
#ifndef HX_NIGHTLY_H
#define HX_NIGHTLY_H

#include "lora/lora.h"
#include "memory/memory.h"
#include "sim/sim.h"

/* ---- nightly fine-tuning (nightly.c) ----
 * From the memory's judged episodes: accepted ones as they were,
 * corrected ones with the correction as the last assistant turn, rejected
 * ones left out; the latest heldout_frac (by finish time) held out. Each
 * episode's conversation is rendered by a render callback (the agent's
 * templates: nightly/nightly_agent.c), else as ChatML (tool calls as
 * <tool_call> JSON), and the loss counts the assistant's tokens only. */
struct cJSON;
typedef struct hx_nightly_data {
    int32_t *tokens;  /* n, documents back to back */
    uint8_t *mask;    /* n: 1 on the assistant's tokens */
    int32_t *doc;     /* n: document index */
    size_t *ends;     /* n_docs: end of each document */
    size_t n, cap;
    int n_docs;
    int n_episodes;   /* episodes the documents came from (an episode
                       * gives one or more documents) */
    int64_t split_at; /* held-out set: finish time of its first episode */
    int n_replay;     /* generic replay conversations mixed in
                       * (hx_nightly_mix; not counted in n_episodes) */
    int32_t *soft_id; /* n * soft_k, or NULL: the base's distributions
                       * (hx_train_data's soft targets) over the replay's
                       * targets, which are marked 2 in mask */
    float *soft_p;
    int soft_k;
} hx_nightly_data;
/* Appends one document (n tokens and their mask) to d; one of fewer than
 * 2 tokens (nothing to predict) is skipped. HX_ERR_NOMEM. */
int hx_nightly_data_add(hx_nightly_data *d, const int32_t *tokens,
                        const uint8_t *mask, size_t n);
void hx_nightly_data_free(hx_nightly_data *d);

/* Renders one episode's messages (a JSON array as the planner keeps them,
 * system message first; a corrected episode ends with the correction as
 * the last assistant message) into out (hx_nightly_data_add): one or more
 * documents of the tokens the agent feeds the model, with a mask, 1 on
 * the tokens the assistant wrote. Several documents when a later turn's
 * prompt does not continue an earlier turn as it was generated (Qwen3
 * drops the empty think block of earlier turns). */
typedef int (*hx_nightly_render_fn)(void *user, const struct cJSON *messages,
                                    hx_nightly_data *out, hx_err *err);
/* render NULL: ChatML tokenized with v. train->n_episodes and
 * held->n_episodes count episodes. */
int hx_nightly_dataset(const hx_vocab *v, hx_memory *mem, double heldout_frac,
                       hx_nightly_render_fn render, void *render_user,
                       hx_nightly_data *train, hx_nightly_data *heldout,
                       hx_err *err);
/* Fits src's documents into windows of `window` tokens (the training
 * sequence plus its last target) as dst: a document that fits is copied;
 * a longer one becomes several, each its head (the tokens before its
 * first target: tool list, system text, request; at most 3/4 of the
 * window) followed by a contiguous slice that ends on a target, taken
 * from the end back, so that every target token is a target in exactly
 * one window, with as much of its preceding context as fits. A document
 * without targets is left out. dst->n_episodes = src->n_episodes. */
int hx_nightly_windows(const hx_nightly_data *src, int window,
                       hx_nightly_data *dst, hx_err *err);

/* The generic evaluation of the gate: runs the same n_tasks held-out agent
 * tasks every time on the base model with the adapter files
 * adapters[0..n_adapters) at scales (n_adapters 0: the base alone) and
 * sets pass[i] to 1 if task i succeeded, else 0 (the gate compares the
 * two runs task by task). */
typedef int (*hx_nightly_eval_fn)(void *user, const char *const *adapters,
                                  const float *scales, int n_adapters,
                                  int n_tasks, uint8_t *pass, hx_err *err);

/* Replay against forgetting: appends n generic conversations (not the
 * user's, never any held-out data: the agent makes them with hearth
 * datagen's generator, training split, seed) to out as documents rendered
 * and masked as the render callback renders episodes; out->n_episodes
 * gets the conversations added (one may give several documents). */
typedef int (*hx_nightly_replay_fn)(void *user, int n, uint64_t seed,
                                    hx_nightly_data *out, hx_err *err);
/* The replay conversations for n_episodes training episodes at ratio
 * (conversations per episode, rounded to nearest; ratio <= 0: none). */
int hx_nightly_replay_count(double ratio, int n_episodes);
/* Mixes replay's documents into train (the user's training split; the
 * held-out split is never touched), spread evenly so that every stretch
 * of the data holds both in the ratio of their document counts;
 * train->n_replay gets replay->n_episodes. HX_ERR_NOMEM. */
int hx_nightly_mix(hx_nightly_data *train, const hx_nightly_data *replay, hx_err *err);

#define HX_NIGHTLY_MAX_SCALES 8
typedef struct hx_nightly_params {
    const char *model;     /* the base GGUF (required) */
    hx_memory *memory;     /* the episodes (borrowed, required) */
    hx_lora_store *store;  /* where a passing adapter is adopted (borrowed) */
    const char *work_dir;  /* checkpoint, run key, candidate (required) */
    hx_lora_params lora;   /* default rank 16, alpha 16, ffn up/down,
                            * first_layer HX_LORA_LATER_HALF */
    hx_train_params train; /* default lr 1e-3, 2 warmup steps, no weight
                            * decay, 4 x 256 tokens (seq_len: the most; a
                            * run uses what its longest document needs);
                            * opt.n_steps default 300; 0: from epochs */
    int epochs;            /* with opt.n_steps 0: passes over the training
                            * tokens (the user's and the replay); default 2 */
    double heldout_frac;   /* default 0.2 */
    int min_train;         /* fewest training episodes; default 4 */
    double min_gain;       /* the held-out loss must drop by this fraction;
                            * default 0.01 */
    int chunk;             /* steps between governor checks (checkpointed);
                            * default 8 */
    int force;             /* 1: do not ask the governor */
    int stop_after_chunks; /* > 0: stop after this many chunks as if the
                            * governor said so (tests) */
    int n_threads;         /* 0: online CPUs */
    FILE *log;             /* one line per step, or NULL */
    hx_nightly_render_fn render; /* NULL: ChatML */
    void *render_user;
    hx_nightly_replay_fn replay; /* NULL: no replay */
    void *replay_user;
    double replay_ratio;   /* generic replay conversations per training
                            * episode, mixed into the training split only;
                            * default 3 (0: none) */
    uint64_t replay_seed;  /* default 1: the same conversations each night */
    int replay_soft;       /* > 0: the replay's assistant tokens are learned
                            * as the base's distribution there (its
                            * replay_soft most likely tokens, renormalized)
                            * instead of as the tokens: distillation, a KL
                            * term to the base, which keeps what the base
                            * would do in its ranking, not only its first
                            * choice; the base's top tokens take n *
                            * replay_soft * 8 bytes for n training tokens.
                            * 0 (default): the tokens */
    double keep_generic;   /* > 0: training also pays this weight times
                            * the relative change the adapter makes on the
                            * replay's tokens at every adapted linear
                            * (hx_trainer_keep_collect over the replay
                            * conversations, with the adapter off): what
                            * it learns is pushed into directions those
                            * inputs do not use. Needs the replay; holds
                            * hx_trainer_keep_bytes. 0 (default): off */
    int keep_at_targets;   /* 1: the replay's positions that decide the
                            * assistant's tokens only; 0: all its tokens */
    hx_nightly_eval_fn eval;     /* NULL: no generic-task gate */
    void *eval_user;
    int eval_tasks;        /* tasks of the generic suite; default 300 (one
                            * task is 1/3 point; a drop's standard error
                            * about 1.5-1.8 points against the margin) */
    double eval_margin;    /* refused when the suite's success drops by
                            * more than this, counted task by task (net
                            * tasks lost / eval_tasks; 0.02: 2 points);
                            * default 0.02 */
    size_t max_bytes;      /* > 0: the bound on training's memory
                            * (hx_trainer_memory_estimate and the rest):
                            * over it, a MoE base is read through a weight
                            * cache of what the bound leaves it
                            * (hx_trainer_set_weight_budget); else, or when
                            * that is too small, the run is refused */
    float scales[HX_NIGHTLY_MAX_SCALES]; /* the generic gate tries the
                            * candidate at these scales in this order and
                            * adopts it at the first that passes, stored
                            * with it in the store's pointer file (ask and
                            * chat apply it); default {1, 0.9} */
    int n_scales;          /* entries of scales; 0 counts as {1} */
    double stop_delta;     /* > 0: early stopping: the held-out loss is
                            * measured after every chunk and training stops
                            * when a chunk lowered it by less than this
                            * fraction of its value before training (the
                            * curve has flattened: further steps memorize);
                            * 0: the whole schedule. default 0 */
    const char *keep_candidate; /* non-NULL: the trained candidate is also
                            * copied to this path whatever the gate decides
                            * (benchmarks measure a discarded one) */
    int new_only;          /* 1: of the user's training episodes, only the
                            * targets the base gets wrong count (where its
                            * greedy token, after the episode's own earlier
                            * tokens, is not the target): the adapter
                            * learns what the episodes add (a room, a
                            * length, an address) and is not pushed further
                            * toward what the base already does there (the
                            * tool it picks), which leaks into other
                            * requests; the replay is trained whole. The
                            * base's pass over an episode holds its logits
                            * (tokens x vocabulary floats: about 1 GB for a
                            * 1,600-token episode in Qwen's vocabulary),
                            * outside max_bytes' estimate. default 0 */
} hx_nightly_params;
hx_nightly_params hx_nightly_default_params(void);

typedef struct hx_nightly_report {
    int n_train, n_heldout;
    int64_t train_tokens, heldout_tokens;
    int n_replay;      /* replay conversations mixed into training */
    int64_t replay_tokens;
    int64_t soft_targets; /* replay_soft: the replay's targets learned as the
                       * base's distribution */
    int steps;
    int resumed_at;    /* the step a checkpoint resumed from (0: none) */
    double loss_before, loss_after; /* mean held-out loss per target token */
    int adopted;
    char adapter[96];  /* the stored name when adopted */
    int eval_n;        /* generic tasks run with and without (0: none) */
    int eval_base, eval_adapter; /* how many succeeded: with what the user
                        * runs now (eval_ref), and with the candidate */
    int eval_lost, eval_gained; /* tasks eval_ref passes and the candidate
                        * fails, and the reverse */
    double eval_seconds; /* wall time of the generic runs */
    char eval_ref[160]; /* what eval_base ran: "the base" or "the active
                        * adapter NAME" (or set "A, B") */
    int seq_len;       /* the training sequence: train.seq_len shortened to
                        * what the longest document needs */
    int docs_cut;      /* documents longer than it, trained in windows */
    int64_t trained_tokens; /* window tokens trained on in this call */
    int64_t known_targets; /* new_only: targets the base already got
                        * right, left out, of all_targets */
    int64_t all_targets;
    double train_seconds, train_cpu_seconds; /* the training chunks of this
                        * call: wall clock, and the process's CPU time (all
                        * threads) */
    size_t mem_estimate; /* bytes: activations + adapter state + base, at
                        * the run's largest pass (training, or new_only's
                        * forward passes) */
    size_t weight_budget; /* bytes of the smallest weight cache a pass read
                        * the base through to fit max_bytes (0: mapped
                        * whole) */
    long peak_rss_kb;  /* the process's peak RSS after training
                        * (getrusage ru_maxrss) */
    float scale;       /* the candidate's scale that eval_* describe: the
                        * adopted one, else the last one tried */
    int stopped_early; /* 1: early stopping ended training at steps */
    char reason[512];  /* adopted, discarded (why) or not run (why) */
} hx_nightly_report;

/* The trainer a nightly run trains: p's LoRA over model (NULL: p->model).
 * Caller frees; HX_OK or the load's error. */
int hx_nightly_trainer(const hx_nightly_params *p, const char *model, hx_trainer **tr,
                       hx_err *err);
/* One nightly run: asks the governor (idle, charging, cool) unless force,
 * builds the dataset, trains (resuming a checkpoint of the same base, data
 * and parameters), measures the held-out loss before (the base) and after,
 * and adopts the adapter through the store only if it dropped by
 * min_gain and, with eval, the generic tasks do not drop by more than
 * eval_margin against what the user runs now: the store's active set, or
 * the base when none is active or it does not load on this base (as ask
 * and chat then run the base); otherwise the adapter is discarded and
 * r->reason says why.
 * HX_OK when it ran (adopted or not); HX_ERR_STATE when the governor says
 * not now; HX_ERR_CANCELLED when it stopped between chunks (checkpointed;
 * the next run resumes); HX_ERR_NOTFOUND when there are too few episodes. */
int hx_nightly_run(const hx_nightly_params *p, hx_nightly_report *r,
                   hx_err *err);

/* ---- the agent's side of the nightly run (nightly/nightly_agent.c) ---- */
/* hx_nightly_render_fn over an hx_agent_render: the episode rendered in
 * the model's style with the tools offered at inference, tokenized as the
 * engine source feeds it, the assistant's spans masked (nightly/chatdata.c):
 * before each assistant turn exactly the prompt the planner fed for it
 * (its generation prompt and no_think included), so a Qwen3 episode of
 * several turns gives a document per turn after a tool response (the
 * template drops earlier turns' empty think blocks). */
typedef struct hx_agent_render {
    const hx_vocab *v;
    int family;         /* HX_TPL_* (hx_tpl_detect) */
    const cJSON *tools; /* hx_tools_list_json of the registry, or NULL */
} hx_agent_render;
struct hx_nightly_data;
int hx_agent_nightly_render(void *user, const cJSON *messages,
                            struct hx_nightly_data *out, hx_err *err);
/* hx_nightly_replay_fn over an hx_agent_render (its tools unused): n
 * trajectories of hearth datagen's training split from seed (the oracle
 * through the real planner and tools, on the device), each rendered as
 * hx_agent_nightly_render renders an episode, with the tools its world
 * offered. The held-out split, whose pools the generic suite draws, is
 * never used. */
int hx_agent_nightly_replay(void *user, int n, uint64_t seed,
                            struct hx_nightly_data *out, hx_err *err);
/* hx_nightly_eval_fn over an hx_agent_eval: a fixed sample of held-out
 * tasks (generated from seed on first use) run as the agent-eval bench
 * runs them, with the adapter files at their scales, or the base alone. */
typedef struct hx_agent_eval {
    hx_model *model;  /* the base, with its vocabulary (borrowed) */
    int family, n_threads;
    int oracle;       /* 1: the oracle instead of the model (tests) */
    uint64_t seed;
    const char *dir;  /* worlds; NULL: /dev/shm or /tmp */
    cJSON *tasks;     /* the sample; free with hx_agent_eval_free_tasks */
    const char *cache_dir; /* not NULL: the base's results (no adapter)
                      * are kept there, keyed by the model's identity, the
                      * sample, the threads and the hearth binary, and not
                      * run again while those are the same */
    int base_cached;  /* set by each base run: 1 if it came from the cache */
    const struct hx_agent_contrast *contrast; /* NULL: distillation replays
                      * generic tasks only (nightly/distill.c) */
} hx_agent_eval;
int hx_agent_nightly_eval(void *user, const char *const *adapters, const float *scales,
                          int n_adapters, int n_tasks, uint8_t *pass, hx_err *err);
void hx_agent_eval_free_tasks(hx_agent_eval *ae);
/* ---- distillation replay (nightly/distill.c) ---- */
/* n evaluation tasks of hearth datagen's training split from seed (never
 * the held-out pools of the generic suite), as a JSON array (caller
 * frees); NULL with err set. */
cJSON *hx_dg_train_tasks(long n, uint64_t seed, hx_err *err);
/* task run by ae's model (greedy, its planner parameters, no adapter) in
 * a fresh world at home (removed after): *trace the planner's (NULL if
 * the run gave none), *tools the tools its world offered (caller frees
 * both). */
int hx_dg_model_trace(const hx_agent_eval *ae, const cJSON *task, const char *home,
                      cJSON **trace, cJSON **tools, hx_err *err);
/* hx_nightly_replay_fn over an hx_agent_eval: the n tasks of
 * hx_dg_train_tasks(n, seed) run by the base model (hx_dg_model_trace),
 * each conversation it produced rendered as hx_agent_nightly_render
 * renders an episode, with its world's tools: replay that pulls the
 * adapter toward the base's own behaviour on generic requests. The
 * environment (HEARTH_HOME, HEARTH_NOW) is put back. */
int hx_agent_nightly_distill(void *user, int n, uint64_t seed,
                             struct hx_nightly_data *out, hx_err *err);
/* Contrastive replay: a share of the distilled conversations
 * are the base's runs of calendar requests of the kinds the user's
 * episodes are (datagen's schedule, find_slots, create_event, each taken
 * when the episodes call every tool it calls), from the training split,
 * naming none of the values the episodes' calls carry that are the
 * user's habits (a location, an attendee's address or its name parts):
 * requests for other people, with no room and the lengths they state, so
 * that the adapter sees the habits belong to the user's requests and not
 * to every calendar request. */
enum { HX_CONTRAST_FIND_SLOTS = 1, HX_CONTRAST_CREATE = 2, HX_CONTRAST_MAX_TERMS = 64 };
typedef struct hx_agent_contrast {
    double share;    /* of the replay conversations, in [0, 1]; 0: none */
    unsigned tools;  /* HX_CONTRAST_* the episodes called */
    char *terms[HX_CONTRAST_MAX_TERMS]; /* owned; no contrast task names one */
    int n_terms;
    double near;     /* of the replay conversations, in [0, 1]: calendar
                      * requests of the other kinds (cancel, move, free or
                      * busy, list), which a small adapter trained on the
                      * episodes' kinds turns into them; 0: none */
} hx_agent_contrast;
/* One call of an episode (name, JSON arguments) into c: its tool, its
 * "location" and "attendees" values and the attendees' name parts
 * (robert.keller@x: "robert", "keller"). HX_ERR_NOMEM. */
int hx_agent_contrast_add_call(hx_agent_contrast *c, const char *name, const char *arguments);
/* Every call of m's training episodes (accepted and corrected) into c. */
int hx_agent_contrast_learn(hx_agent_contrast *c, hx_memory *m, hx_err *err);
void hx_agent_contrast_free(hx_agent_contrast *c); /* the terms; c stays */
/* n contrast tasks for c from seed (training split; a JSON array, caller
 * frees; fewer when c's tools give no kind); near: of the other calendar
 * kinds instead (c->near's); NULL with err set. */
cJSON *hx_dg_contrast_tasks(const hx_agent_contrast *c, long n, uint64_t seed, int near,
                            hx_err *err);
/* The tasks hx_agent_nightly_distill replays: n, of which c's share and
 * near share (c NULL: none) are hx_dg_contrast_tasks(c, ., seed, 0 and 1),
 * spread evenly among
 * hx_dg_train_tasks(., seed) (which fill in when fewer contrast tasks
 * fit); with no share exactly hx_dg_train_tasks(n, seed). */
cJSON *hx_agent_replay_tasks(const hx_agent_contrast *c, int n, uint64_t seed, hx_err *err);

#include "nightly/chatdata.h"

#endif /* HX_NIGHTLY_H */
