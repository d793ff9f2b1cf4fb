/* fuzz_ckpt.c: fuzz target for the training checkpoint loader
 * (hx_trainer_load): loads the input, and again with its FNV-1a 64 sum
 * made right (or a mutation would rarely get past the sum), into a
 * scratch trainer of 1 layer, n_vocab 8, n_embd 8, 2 heads on 1 KV head
 * of 4, n_ff 8. Every refusal must come with a message; an accepted file
 * must leave a trainer that saves and loads again. Seeds
 * (corpus/fuzz_ckpt/): that trainer's checkpoint after two steps, as
 * versions 3, 2 and 1 (v3 with the products recorded as bfloat16). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "lora/lora.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static hx_trainer *g_tr;
static char g_path[64], g_again[64];

static int setup(void)
{
    if (g_tr) return 0;
    hx_train_config c = hx_train_default_config();
    c.n_vocab = 8, c.n_ctx = 8, c.n_embd = 8, c.n_layer = 1, c.n_head = 2;
    c.n_head_kv = 1, c.n_ff = 8, c.head_dim = 4;
    hx_err err = {0};
    if (hx_trainer_new_scratch(&c, 1, 1, &g_tr, &err)) return -1;
    snprintf(g_path, sizeof g_path, "/tmp/hx_fuzz_ckpt_%d", (int)getpid());
    snprintf(g_again, sizeof g_again, "/tmp/hx_fuzz_ckpt_%d.2", (int)getpid());
    return 0;
}

static void load(const uint8_t *data, size_t size)
{
    hx_err err = {0};
    if (hx_write_file_atomic(g_path, (const char *)data, size, &err)) abort();
    if (hx_trainer_load(g_tr, g_path, &err) != HX_OK) {
        if (!err.msg[0]) abort(); /* refused, with a message */
        return;
    }
    if (hx_trainer_save(g_tr, g_again, &err) || hx_trainer_load(g_tr, g_again, &err)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (setup()) abort();
    load(data, size);
    if (size >= 16) { /* the same bytes with a right sum */
        uint8_t *d = malloc(size);
        if (!d) abort();
        memcpy(d, data, size);
        uint64_t h = hx_fnv1a(HX_FNV1A_BASIS, d, size - 8);
        memcpy(d + size - 8, &h, 8);
        load(d, size);
        free(d);
    }
    unlink(g_path);
    unlink(g_again);
    return 0;
}
