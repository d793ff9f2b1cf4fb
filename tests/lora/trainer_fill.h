/* trainer_fill.h: deterministic uniform noise added to a trainer's
 * parameters, shared by the gradient and activation-memory tests. */
#ifndef HX_TESTS_TRAINER_FILL_H
#define HX_TESTS_TRAINER_FILL_H

#include "lora/lora.h"

/* Gains of 1 and N(0, 0.02) weights give tiny gradients for the deep
 * parameters; larger random weights exercise every path. Adds
 * scale x U(-0.5, 0.5) to each parameter, the same sequence every call. */
static inline void randomize(hx_trainer *tr, float scale)
{
    uint64_t s = 99;
    float *P = hx_trainer_params(tr);
    for (size_t i = 0; i < hx_trainer_n_params(tr); i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        P[i] += scale * (((s >> 40) / 16777216.0f) - 0.5f);
    }
}

#endif
