/* ckpt.c: training checkpoints (parameters, AdamW moments, step, RNG, data
 * position, loss history) in a versioned, checksummed file, atomically. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "lora/train_int.h"

/* Layout, little-endian host order (checkpoints are not meant to move
 * between machines): magic "HXTRCKPT", u32 version, then the header fields
 * below, the loss history, params, m, v, and an FNV-1a 64 of all bytes
 * before it. Version 2 adds the fixed schedule length (in version 1's pad
 * word) and the training seconds so far (time budgets); version 1 files
 * load with both 0. Version 3 adds the precision of the products
 * (TR_PRODUCTS_*), so that HX_BF16_AUTO resumes with the same; older files
 * load with it unrecorded (0). */
#define CK_MAGIC "HXTRCKPT"
#define CK_VERSION 3u

typedef struct ck_head {
    uint32_t version, lora, n_losses, sched_steps;
    uint64_t n_params, rng, data_pos;
    int32_t step, shape[9]; /* vocab embd layer head head_kv head_dim ff rank tensors */
    double train_seconds;   /* version 2 */
    uint32_t products, pad; /* version 3 */
} ck_head;

/* Header bytes of a version. */
static size_t head_size(uint32_t version)
{
    return version == 1   ? offsetof(ck_head, train_seconds)
           : version == 2 ? offsetof(ck_head, products)
                          : sizeof(ck_head);
}

static ck_head head_of(const hx_trainer *tr)
{
    const hx_hparams *hp = &tr->hp;
    ck_head h;
    memset(&h, 0, sizeof h);
    h.version = CK_VERSION;
    h.lora = (uint32_t)tr->lora;
    h.n_losses = (uint32_t)tr->step;
    h.n_params = tr->n_params;
    h.rng = tr->rng;
    h.data_pos = tr->data_pos;
    h.step = tr->step;
    h.sched_steps = (uint32_t)tr->sched_steps;
    h.train_seconds = tr->train_seconds;
    h.products = tr->bf16 ? TR_PRODUCTS_BF16 : TR_PRODUCTS_F32;
    const int32_t s[9] = {hp->n_vocab, hp->n_embd, hp->n_layer, hp->n_head,
                          hp->n_head_kv, hp->head_dim, hp->n_ff, tr->rank,
                          tr->n_tensors};
    memcpy(h.shape, s, sizeof s);
    return h;
}

int hx_tr_push_loss(hx_trainer *tr, float loss)
{
    if (tr->step > tr->losses_cap) {
        int cap = tr->losses_cap ? tr->losses_cap * 2 : 256;
        while (cap < tr->step) cap *= 2;
        float *p = hx_realloc(tr->losses, (size_t)cap * sizeof(float));
        if (!p) return HX_ERR_NOMEM;
        tr->losses = p;
        tr->losses_cap = cap;
    }
    tr->losses[tr->step - 1] = loss;
    return HX_OK;
}

const float *hx_trainer_losses(const hx_trainer *tr) { return tr->losses; }

int hx_trainer_save(hx_trainer *tr, const char *path, hx_err *err)
{
    const ck_head h = head_of(tr);
    const size_t np = tr->n_params * sizeof(float);
    hx_buf b;
    hx_buf_init(&b);
    hx_buf_reserve(&b, 8 + sizeof h + (size_t)tr->step * 4 + 3 * np + 8);
    hx_buf_append(&b, CK_MAGIC, 8);
    hx_buf_append(&b, &h, sizeof h);
    if (tr->step) hx_buf_append(&b, tr->losses, (size_t)tr->step * sizeof(float));
    hx_buf_append(&b, tr->params, np);
    hx_buf_append(&b, tr->m, np);
    hx_buf_append(&b, tr->v, np);
    int rc = HX_OK;
    if (b.oom) rc = hx_err_set(err, HX_ERR_NOMEM, "checkpoint: out of memory");
    uint64_t sum = rc ? 0 : hx_fnv1a(HX_FNV1A_BASIS, b.data, b.len);
    if (!rc && hx_buf_append(&b, &sum, 8))
        rc = hx_err_set(err, HX_ERR_NOMEM, "checkpoint: out of memory");
    if (!rc) rc = hx_out_write_file(path, NULL, b.data, b.len, 0666, err);
    hx_buf_free(&b);
    return rc;
}

/* Checks the header against the trainer; message names the mismatch. */
static int check_head(const hx_trainer *tr, const ck_head *h, size_t len,
                      const char *path, hx_err *err)
{
    const ck_head want = head_of(tr);
    if (h->version < 1 || h->version > CK_VERSION)
        return hx_err_set(err, HX_ERR_UNSUPPORTED, "%s: checkpoint version "
                          "%u (this build reads 1 to %u)", path, h->version, CK_VERSION);
    if (h->lora != want.lora || h->n_params != want.n_params ||
        memcmp(h->shape, want.shape, sizeof h->shape))
        return hx_err_set(err, HX_ERR_FORMAT, "%s: checkpoint of another model "
                          "shape (%llu parameters, lora %u; this trainer %llu, "
                          "lora %u)", path, (unsigned long long)h->n_params, h->lora,
                          (unsigned long long)want.n_params, want.lora);
    const size_t need = 8 + head_size(h->version) + (size_t)h->n_losses * 4 +
                        3 * (size_t)h->n_params * 4 + 8;
    if (h->step < 0 || (uint32_t)h->step != h->n_losses || len != need)
        return hx_err_set(err, HX_ERR_FORMAT, "%s: checkpoint truncated or "
                          "damaged (%zu bytes, expected %zu)", path, len, need);
    return HX_OK;
}

int hx_trainer_load(hx_trainer *tr, const char *path, hx_err *err)
{
    char *d = NULL;
    size_t len = 0;
    int rc = hx_read_file(path, 0, &d, &len, err);
    if (rc) return rc;
    ck_head h;
    uint64_t sum;
    if (len < 8 + head_size(1) + 8 || memcmp(d, CK_MAGIC, 8)) {
        free(d);
        return hx_err_set(err, HX_ERR_FORMAT, "%s: not a Hearth training checkpoint", path);
    }
    memset(&h, 0, sizeof h);
    memcpy(&h, d + 8, head_size(1));
    if (h.version > 1 && h.version <= CK_VERSION && len >= 8 + head_size(h.version) + 8)
        memcpy(&h, d + 8, head_size(h.version));
    memcpy(&sum, d + len - 8, 8);
    if (!(rc = check_head(tr, &h, len, path, err)) && hx_fnv1a(HX_FNV1A_BASIS, d, len - 8) != sum)
        rc = hx_err_set(err, HX_ERR_FORMAT, "%s: checkpoint checksum mismatch", path);
    if (!rc) {
        const char *p = d + 8 + head_size(h.version);
        const size_t np = tr->n_params * sizeof(float);
        tr->step = 0;
        for (uint32_t i = 0; !rc && i < h.n_losses; i++) {
            float l;
            memcpy(&l, p + (size_t)i * 4, 4);
            tr->step = (int)i + 1;
            rc = hx_tr_push_loss(tr, l);
        }
        if (rc) rc = hx_err_set(err, rc, "checkpoint: out of memory");
        p += (size_t)h.n_losses * 4;
        if (!rc) {
            memcpy(tr->params, p, np);
            memcpy(tr->m, p + np, np);
            memcpy(tr->v, p + 2 * np, np);
            tr->step = h.step;
            tr->rng = h.rng;
            tr->data_pos = h.data_pos;
            tr->sched_steps = h.version == 1 ? 0 : (int)h.sched_steps;
            tr->train_seconds = h.version == 1 ? 0.0 : h.train_seconds;
            tr->ckpt_products = h.products == TR_PRODUCTS_F32 || h.products == TR_PRODUCTS_BF16
                                    ? (int)h.products : 0;
        }
    }
    free(d);
    return rc;
}
