/* nightly_fixture.h: the fixture test_nightly.c and test_nightly_kill.c
 * share: a temporary directory holding a tiny random base model over the
 * real Qwen2 vocabulary, and the small nightly run both tests train. */
#ifndef HX_TEST_NIGHTLY_FIXTURE_H
#define HX_TEST_NIGHTLY_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "nightly/nightly.h"
#include "test.h"
#include "modelfile/modelfile.h"

/* The directory, the base model and the memory database in it, and the
 * vocabulary the model was made with. */
static char tmpdir[256], model[300], memdb[300], vocab_path[4096];

/* Makes tmpdir under $TMPDIR (named after name) and writes the base model
 * into it: 1 when ready, 0 without the shared vocabulary (the tests are
 * skipped), -1 on failure (said on stdout). */
static int fixture_open(const char *name)
{
    const char *t = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/%s.XXXXXX", t && *t ? t : "/tmp", name);
    if (!mkdtemp(tmpdir)) return -1;
    const char *vocab = test_shared_file("vocab/ggml-vocab-qwen2.gguf");
    if (!vocab) return 0;
    snprintf(vocab_path, sizeof vocab_path, "%s", vocab);
    snprintf(model, sizeof model, "%s/base.gguf", tmpdir);
    snprintf(memdb, sizeof memdb, "%s/memory.db", tmpdir);
    hx_mkmodel_params mp = hx_mkmodel_default_params();
    mp.vocab_path = vocab_path;
    mp.n_layer = 2, mp.n_embd = 32, mp.n_head = 2, mp.n_head_kv = 1;
    mp.head_dim = 16, mp.n_ff = 64, mp.n_ctx = 256, mp.tied_output = 1;
    hx_err err = {0};
    if (hx_mkmodel_write(&mp, model, &err)) {
        printf("FAIL setup: %s\n", err.msg);
        return -1;
    }
    return 1;
}

/* Removes tmpdir and all in it. */
static void fixture_remove(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd)) printf("# could not remove %s\n", tmpdir);
}

/* A forced nightly run of the base model over mem into the store st,
 * working in work: rank 4, 2 sequences of 32 tokens, lr 1e-2. The caller
 * sets the steps, chunk and threads. */
static hx_nightly_params fixture_params(hx_memory *mem, hx_lora_store *st,
                                        const char *work)
{
    hx_nightly_params p = hx_nightly_default_params();
    p.model = model, p.memory = mem, p.store = st, p.work_dir = work;
    p.lora.rank = 4, p.lora.alpha = 8;
    p.train.opt.lr = 1e-2f;
    p.train.seq_len = 32, p.train.n_seq = 2;
    p.force = 1;
    return p;
}

#endif /* HX_TEST_NIGHTLY_FIXTURE_H */
