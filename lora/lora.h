/* lora.h: the training engine: F32 forward with saved activations and
 * backward for qwen3 models, full training or LoRA over frozen (possibly
 * quantized) weights, AdamW, checkpoints, GGUF output. lora uses engine. */
#ifndef HX_LORA_H
#define HX_LORA_H

#include <limits.h>
#include <stdint.h>
#include <stdio.h>

#include "base/base.h"
#include "engine/engine.h"

/* ---- model shape for training from scratch (architecture qwen3, tied
 * output, q/k norms, NEOX RoPE) ---- */
typedef struct hx_train_config {
    int n_vocab, n_ctx, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff;
    float rms_eps;   /* default 1e-6 */
    float rope_base; /* default 1e6 */
} hx_train_config;
hx_train_config hx_train_default_config(void); /* a 2-layer toy model */

/* ---- LoRA: y = W x + (alpha/rank) B (A x) on the target matrices ---- */
enum {
    HX_LORA_Q = 1, HX_LORA_K = 2, HX_LORA_V = 4, HX_LORA_O = 8,
    HX_LORA_GATE = 16, HX_LORA_UP = 32, HX_LORA_DOWN = 64,
    HX_LORA_ALL = 127
};
typedef struct hx_lora_params {
    int rank;         /* default 8 */
    float alpha;      /* default 8 */
    unsigned targets; /* HX_LORA_* bits; default Q|K|V|O */
    float init_b;     /* std of B at init; 0 (default) = the standard no-op
                       * start; tests set it nonzero so dA is not zero */
    uint64_t seed;    /* A ~ N(0, 1/rank), default 1 */
    int first_layer;  /* only layers first_layer.. are adapted (the
                       * adapter holds no tensor of the others); default
                       * 0: all; HX_LORA_LATER_HALF: n_layer / 2 and up,
                       * resolved by the trainer from its base */
} hx_lora_params;
#define HX_LORA_LATER_HALF INT_MIN /* any other negative is refused */
hx_lora_params hx_lora_default_params(void);
/* The targets to train on the base GGUF at path: targets as given, but on
 * a MoE base (qwen3moe), whose router and experts take no LoRA, the FFN
 * ones (gate, up, down) become the attention's q, k, v, o; *moved (or
 * NULL) says whether they did. A file that cannot be read keeps targets
 * (the trainer then says why). */
unsigned hx_lora_targets_for(const char *path, unsigned targets, int *moved);

/* ---- trainer: parameters, gradients, optimizer state, activations ----
 * Full mode: every weight is an F32 trainable parameter. LoRA mode: the
 * base model's weights stay frozen in its file's types (dequantized tile by
 * tile when used) and only the A and B matrices have gradients; no
 * full-size gradient is ever allocated. */
typedef struct hx_trainer hx_trainer;

/* A new model with N(0, 0.02) weights (Wo, Wd scaled by 1/sqrt(2L)), gains
 * 1. n_threads 0 = online CPUs. */
int hx_trainer_new_scratch(const hx_train_config *c, uint64_t seed,
                           int n_threads, hx_trainer **out, hx_err *err);
/* A qwen3 (or llama/qwen2 without biases) GGUF model. lora NULL: full
 * training (weights dequantized to F32). Else LoRA over the frozen model,
 * which the trainer keeps mapped (or, for a MoE base, reads through a
 * weight cache: hx_trainer_set_weight_budget). A qwen3moe base takes LoRA only, on its
 * attention (q, k, v, o): the gradient flows through its frozen router
 * and experts, the top-k choice taken as fixed (HX_ERR_UNSUPPORTED for
 * full training or FFN targets). */
int hx_trainer_new_gguf(const char *path, const hx_lora_params *lora,
                        int n_threads, hx_trainer **out, hx_err *err);
/* Full training of the dense GGUF model at path deepened by grow layers (0
 * to its layer count; block expansion): the added layers spread evenly,
 * each after the layer it copies, with its attention output and FFN down
 * projections zero, so that the grown model computes what the base does
 * until training moves them. */
int hx_trainer_new_grown(const char *path, int grow, int n_threads,
                         hx_trainer **out, hx_err *err);
void hx_trainer_free(hx_trainer *tr); /* NULL is a no-op */

/* Shape of the model being trained (hparams as the engine names them). */
const hx_hparams *hx_trainer_hparams(const hx_trainer *tr);
int hx_trainer_is_lora(const hx_trainer *tr);
/* Trainable parameters: count, and the flat F32 buffers (borrowed; the
 * layout is that of hx_trainer_tensor). grads has the same layout. */
size_t hx_trainer_n_params(const hx_trainer *tr);
float *hx_trainer_params(hx_trainer *tr);
float *hx_trainer_grads(hx_trainer *tr);
/* Trainable tensor i (0 <= i < hx_trainer_n_tensors): GGUF name, offset
 * and element count in the flat buffers; NULL past the end. */
int hx_trainer_n_tensors(const hx_trainer *tr);
const char *hx_trainer_tensor(const hx_trainer *tr, int i, size_t *off,
                              size_t *n);

/* One micro-batch: n_seq sequences of n_tok tokens, back to back.
 * targets[i] is the token to predict after tokens[i]; mask[i] != 0 makes it
 * count in the loss (NULL: all count). doc[i] (NULL: one document per
 * sequence) packs documents: a token attends only to earlier tokens of the
 * same doc id within its sequence, and positions restart at each doc.
 * pre[i] (NULL: all 0) shares a prefix: token i also attends to the first
 * pre[i] tokens of its sequence (which must end before its doc starts),
 * and its position continues from pre[i]; so conversations with the same
 * system prompt and tool list are packed after one copy of it, as if each
 * had its own. */
typedef struct hx_batch {
    int n_seq, n_tok;
    const int32_t *tokens, *targets;
    const uint8_t *mask;
    const int32_t *doc;
    const int32_t *pre;
    /* soft targets (NULL: none): where soft_p[t * soft_k] > 0, position
     * t's target is the distribution soft_p[t * soft_k + j] on tokens
     * soft_id[t * soft_k + j], j < soft_k (summing to 1: a teacher's, as
     * hx_trainer_topk gives them), instead of targets[t] (still required) */
    const int32_t *soft_id;
    const float *soft_p;
    int soft_k;
    /* NULL: every target counts once; else weight[t] (1..255) is how many
     * times position t's target counts: its cross-entropy and gradient
     * are multiplied by it (the loss sums below are weighted so) */
    const uint8_t *weight;
} hx_batch;

/* Forward only. logits (n_seq*n_tok*n_vocab, or NULL) gets every
 * position's logits; *loss_sum (or NULL) the summed masked cross-entropy
 * (weighted by b->weight) and *n_count the masked positions. */
int hx_trainer_forward(hx_trainer *tr, const hx_batch *b, float *logits,
                       double *loss_sum, int *n_count, hx_err *err);
/* Forward and backward: gradients ACCUMULATE (scaled by 1/norm, where norm
 * is normally the masked-token count of the whole optimizer step, or the
 * sum of their weights);
 * *loss_sum gets the summed masked cross-entropy. */
int hx_trainer_grad(hx_trainer *tr, const hx_batch *b, double norm,
                    double *loss_sum, hx_err *err);
/* Forward only: at each position with a target (b->targets, where b->mask
 * allows; b's soft targets ignored) the k most likely next tokens into
 * id[t * k ..] and their probabilities, renormalized over those k, into
 * p[t * k ..], most likely first; positions without a target get p 0.
 * Holds the logits of a few rows at a time, not of the batch. */
int hx_trainer_topk(hx_trainer *tr, const hx_batch *b, int k, int32_t *id, float *p,
                    hx_err *err);
void hx_trainer_zero_grad(hx_trainer *tr);

/* ---- keeping what the base does elsewhere (keep.c) ----
 * A penalty on what a LoRA adapter changes on other inputs than its
 * training data: lambda times the mean, over the adapted linears, of
 * sum_x ||s B A x||^2 / sum_x ||W x||^2, x running over the inputs to
 * that linear in the documents given to hx_trainer_keep_collect (the
 * base's activations: the adapter is off while collecting), at every
 * position, or with masked at those whose target counts (b->mask: where
 * the assistant's tokens are decided). Its
 * gradient joins the loss's at each hx_trainer_step (before clipping).
 * Holds an in x in matrix of sums per adapted linear
 * (hx_trainer_keep_bytes); not part of checkpoints: collect again (from
 * the same documents) before resuming. */
int hx_trainer_keep_collect(hx_trainer *tr, const hx_batch *b, int masked, hx_err *err);
void hx_trainer_keep_set(hx_trainer *tr, double lambda); /* 0: off (default) */
double hx_trainer_keep_value(const hx_trainer *tr);      /* at the last step */
size_t hx_trainer_keep_bytes(const hx_trainer *tr);

/* ---- optimizer ---- */
typedef struct hx_opt_params {
    float lr;          /* peak; default 1e-3 */
    float lr_min_frac; /* cosine floor as a fraction of lr; default 0.1 */
    int warmup;        /* linear warmup steps; default 0 */
    int n_steps;       /* schedule length; default 100 */
    float beta1, beta2, eps; /* default 0.9, 0.95, 1e-8 */
    float wd;          /* decoupled weight decay on matrices; default 0.1 */
    float clip;        /* global gradient L2 norm clip; 0 = none; default 1 */
    int wsd;           /* 1: warmup-stable-decay: the peak rate until the
                        * last decay_frac of the steps, then linear to the
                        * floor; 0 (default): cosine after the warmup */
    float decay_frac;  /* WSD decay share of the schedule; default 0.2 */
} hx_opt_params;
hx_opt_params hx_opt_default_params(void);
/* Learning rate at step (0-based): linear warmup then cosine to the floor
 * (or constant then linear to the floor over the last decay_frac, WSD). */
double hx_opt_lr(const hx_opt_params *o, int step);
/* One AdamW update from the accumulated gradients (clipped first) at the
 * trainer's step, which then advances. *gnorm (or NULL) gets the norm
 * before clipping. A non-finite norm skips the update and returns
 * HX_ERR_RANGE (the step still advances, so schedules stay aligned). */
int hx_trainer_step(hx_trainer *tr, const hx_opt_params *o, double *gnorm);
int hx_trainer_steps_done(const hx_trainer *tr);

/* ---- the training loop over a token stream ---- */
typedef struct hx_train_data {
    const int32_t *tokens; /* n */
    const uint8_t *mask;   /* n, or NULL: every token is a target */
    size_t n;
    const int32_t *doc;    /* n document ids (packed documents: attention
                            * and positions restart at each; every window
                            * starts at a document's first token), or NULL */
    const int32_t *soft_id; /* n * soft_k, or NULL: soft targets, as in
                            * hx_batch: where soft_p[x * soft_k] > 0, token
                            * x (a target) is learned as that distribution */
    const float *soft_p;
    int soft_k;
    const uint8_t *weight; /* n, or NULL: each target once; else token x,
                            * where a target, counts weight[x] times in the
                            * loss (0 counts as 1); a step's loss is the
                            * weighted mean */
} hx_train_data;

typedef struct hx_train_params {
    hx_opt_params opt;
    int seq_len;    /* tokens per sequence; default 64 */
    int n_seq;      /* sequences per micro-batch; default 4 */
    int accum;      /* micro-batches per step; default 1 */
    uint64_t seed;  /* data sampling; default 1 */
    const char *ckpt_path; /* NULL: no checkpoints */
    int ckpt_every; /* steps between checkpoints (and at the end) */
    int stop_after; /* > 0: return after this many steps of this call
                     * (checkpointing first), as if killed */
    const char *svg_path; /* loss curve at the end; NULL: none */
    FILE *log;      /* one line per step, or NULL */
    int progress;   /* 1: hx_progress on stderr (silent when not a tty) */
    double time_budget; /* > 0: seconds of training in all (resumed runs
                     * included): the schedule length becomes the steps
                     * that fit, re-estimated from the measured step time
                     * until it is fixed (WSD: when the decay starts, which
                     * a budget suits; cosine: after the warmup or 5
                     * steps), then kept in checkpoints; opt.n_steps is
                     * the upper bound */
    int share_prefix; /* > 0, with packed documents: a document whose
                     * first share_prefix or more tokens equal those of its
                     * window's first document is packed without them and
                     * sees that document's copy (hx_batch.pre): the same
                     * system prompt and tool list cost once per window.
                     * 0 (default): plain packing */
} hx_train_params;
hx_train_params hx_train_default_params(void);

/* Trains from the trainer's current step to opt.n_steps: random windows of
 * seq_len + 1 tokens from data (drawn with the trainer's RNG). Resumes from
 * a checkpoint loaded with hx_trainer_load. */
int hx_train_run(hx_trainer *tr, const hx_train_data *d,
                 const hx_train_params *p, hx_err *err);
/* Mean masked loss of each step so far (borrowed, hx_trainer_steps_done
 * entries). */
const float *hx_trainer_losses(const hx_trainer *tr);

/* ---- files ---- */
/* Checkpoint: trainable parameters, AdamW moments, step, RNG, data
 * position, losses, in a versioned file written through hx_out (atomically).
 * Load checks the shapes match the trainer's. */
int hx_trainer_save(hx_trainer *tr, const char *path, hx_err *err);
int hx_trainer_load(hx_trainer *tr, const char *path, hx_err *err);
/* Writes the model (full mode) as a qwen3 GGUF with llama.cpp's tensor
 * names, F32; vocab_gguf (or NULL) is a GGUF whose tokenizer.* keys are
 * copied. In LoRA mode writes a llama.cpp LoRA adapter GGUF. Written
 * through hx_out; path the same file as vocab_gguf is refused. */
int hx_trainer_write_gguf(hx_trainer *tr, const char *path,
                          const char *vocab_gguf, hx_err *err);
/* The same with extra string metadata: kv is a NULL-terminated list of
 * key, value pairs (e.g. {"hearth.prompt_style", "compact", NULL}). */
int hx_trainer_write_gguf_kv(hx_trainer *tr, const char *path,
                             const char *vocab_gguf, const char *const *kv,
                             hx_err *err);
/* Memory a training run of n_tok tokens per micro-batch needs: saved
 * activations and backward temporaries, the loss head's logits chunk,
 * trainable state (parameters, gradients, two AdamW moments), per-thread
 * scratch, the matrix products' buffers, and the base
 * (hx_trainer_weight_bytes: mapped, or its weight budget; nothing in full
 * mode, where its F32 weights are the parameters). */
size_t hx_trainer_memory_estimate(const hx_trainer *tr, int n_tok);
/* The same for a forward-only pass (hx_trainer_forward without logits:
 * held-out loss, evaluation), which keeps one layer's activations at a
 * time; never more than hx_trainer_memory_estimate. */
size_t hx_trainer_forward_memory_estimate(const hx_trainer *tr, int n_tok);

/* LoRA over a MoE base: the passes read the frozen weights through the
 * engine's weight cache (engine_ext.h) within `bytes` instead of the
 * mapping: attention (q, k, v, o), router and head copied once, the
 * experts read into a few slots per layer as the passes use them (each
 * held for its products), the embedding's rows read as needed; no page of
 * the file stays cached. Gradients and trained adapters are bit-identical
 * to the mapped base's. 0: the mapping again. Set between passes.
 * Errors: HX_ERR_UNSUPPORTED (full training, or a dense base: its layers
 * would stream in the backward's reverse order, which the cache's ring
 * does not read ahead), HX_ERR_RANGE (bytes below
 * hx_trainer_weight_budget_min, said), HX_ERR_IO, HX_ERR_NOMEM (the
 * trainer then reads the mapping). */
int hx_trainer_set_weight_budget(hx_trainer *tr, size_t bytes, hx_err *err);
/* The fewest bytes a weight budget runs with (what every token uses and
 * two slots a layer); 0 where none applies (full training, a dense base). */
size_t hx_trainer_weight_budget_min(const hx_trainer *tr);
/* Bytes of the frozen base as the trainer holds it: the weight cache's
 * copies and slots, else the mapped file; 0 in full mode. Part of
 * hx_trainer_memory_estimate. */
size_t hx_trainer_weight_bytes(const hx_trainer *tr);
/* Fits training passes of n_tok tokens, plus `extra` bytes the caller
 * holds beside them, within max_bytes (0: no bound): over it, a MoE base
 * is read through a weight cache of what the rest leaves
 * (hx_trainer_set_weight_budget). *need: the estimate then (bytes);
 * *budget: the cache's bytes, 0 when the base stays mapped. HX_ERR_RANGE,
 * saying what would fit, when even the smallest cache does not (or the
 * base is dense), and the errors of hx_trainer_set_weight_budget. */
int hx_trainer_fit_memory(hx_trainer *tr, int n_tok, size_t extra, size_t max_bytes,
                          size_t *need, size_t *budget, hx_err *err);
/* The same for forward-only passes of n_tok tokens
 * (hx_trainer_forward_memory_estimate). */
int hx_trainer_fit_forward_memory(hx_trainer *tr, int n_tok, size_t extra, size_t max_bytes,
                                  size_t *need, size_t *budget, hx_err *err);

/* Activation checkpointing of hx_trainer_grad. AUTO (the default): on for
 * LoRA (a frozen base), and for full training when saving every layer's
 * activations would take over 1 GiB. ON keeps each layer's input only and
 * recomputes the layer's activations in the backward, one layer at a
 * time: about one more forward pass of compute (~+30% per step) for
 * activation memory of ~1/n_layer; the gradients are bit-identical. */
enum { HX_RECOMPUTE_AUTO = 0, HX_RECOMPUTE_OFF = 1, HX_RECOMPUTE_ON = 2 };
void hx_trainer_set_recompute(hx_trainer *tr, int mode);

/* Products with the trainable weights in bfloat16 (HX_BF16_ON): the
 * forward, the input and the weight gradients of every linear layer and of
 * the output head round both operands to bfloat16 and sum in F32, and so
 * do the attention's scores (Q K^T and, in the backward, dO V^T); the rest
 * of attention, norms and the optimizer stay F32, and so do the master
 * weights. Whether that is faster depends on the CPU: AVX512-BF16 does
 * twice the products of an F32 FMA per instruction, but some CPUs (an
 * Intel Xeon at 2.3 GHz) issue it at half the rate, and the operands
 * must be converted. HX_BF16_AUTO takes the precision recorded in the
 * checkpoint hx_trainer_load read (so a resumed run goes on with the same
 * numbers), else times both on a product of this model's shape and takes
 * the faster. Only trainable weights: a LoRA trainer stays F32. Returns 1
 * if some product now takes bfloat16 (0: off, the CPU cannot, F32 was
 * faster, or nothing is trainable full-rank). */
enum { HX_BF16_OFF = 0, HX_BF16_ON = 1, HX_BF16_AUTO = 2 };
int hx_trainer_set_bf16(hx_trainer *tr, int mode);

/* The loss curve as an SVG line chart (written through hx_out). */
int hx_write_loss_svg(const char *path, const float *loss, int n,
                      hx_err *err);

/* ---- the adapter store: $XDG_DATA_HOME/hearth/adapters/ ----
 * Stored adapters NAME.gguf (never modified once stored) and a pointer
 * file, active.json, naming the active set with scales and up to 16
 * earlier sets for rollback. Every change writes a temporary file, fsyncs
 * it, renames it into place and fsyncs the directory, so a crash at any
 * moment leaves the previous state or the new one, never a mix. */
typedef struct hx_lora_store hx_lora_store;
typedef struct hx_lora_use {
    char name[96]; /* stored name, e.g. "nightly-20261201-031500.gguf" */
    float scale;
} hx_lora_use;

/* Opens (creating) the store in dir; NULL: the user's data directory's
 * adapters/. Free with hx_lora_store_free. */
int hx_lora_store_open(const char *dir, hx_lora_store **out, hx_err *err);
void hx_lora_store_free(hx_lora_store *s); /* NULL is a no-op */
const char *hx_lora_store_dir(const hx_lora_store *s);
/* Path of a stored adapter into buf; returns snprintf's length. */
int hx_lora_store_path(const hx_lora_store *s, const char *name, char *buf,
                       size_t n);
/* Stored adapter names, sorted (*names malloc'd: hx_lora_names_free). */
int hx_lora_store_list(hx_lora_store *s, char ***names, int *n, hx_err *err);
void hx_lora_names_free(char **names, int n);
/* The active set: out holds HX_ADAPTER_MAX entries; *n 0 = none.
 * HX_ERR_FORMAT when the pointer file is damaged. */
int hx_lora_store_active(hx_lora_store *s, hx_lora_use *out, int *n,
                         hx_err *err);
/* How many earlier sets rollback can return to. */
int hx_lora_store_history(hx_lora_store *s, int *depth, hx_err *err);
/* Copies the adapter file src into the store as name (letters, digits,
 * '.', '_', '-', ending in .gguf); does not activate it. HX_ERR_FORMAT if
 * src is not an adapter GGUF, HX_ERR_STATE if the name is taken. */
int hx_lora_store_add(hx_lora_store *s, const char *src, const char *name,
                      hx_err *err);
/* Makes uses[0..n) (stored names; n = 0: no adapter) the active set; the
 * set it replaces is kept for rollback. HX_ERR_NOTFOUND for a name not
 * stored. */
int hx_lora_store_use(hx_lora_store *s, const hx_lora_use *uses, int n,
                      hx_err *err);
/* Back to the set before the last use/adopt/rollback. HX_ERR_NOTFOUND when
 * there is none. */
int hx_lora_store_rollback(hx_lora_store *s, hx_err *err);
/* Adoption: add, then use it alone at scale. The adapter is written and
 * fsynced before the pointer moves. */
int hx_lora_store_adopt(hx_lora_store *s, const char *src, const char *name,
                        float scale, hx_err *err);
/* Loads the active set for model m into ads[0..*n) (HX_ADAPTER_MAX
 * entries; the caller frees each with hx_adapter_free) and their scales.
 * hx_adapter_load's errors, e.g. HX_ERR_INVALID for an adapter of another
 * base; then nothing is loaded. */
int hx_lora_store_load_active(hx_lora_store *s, const hx_model *m,
                              hx_adapter **ads, float *scales, int *n,
                              hx_err *err);

#endif /* HX_LORA_H */
