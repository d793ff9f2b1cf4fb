/* engine.h: the engine's public API: GGUF files, tokenizers, models and
 * inference, sampling. Each part has its own header, included here; other
 * modules include only this file. The engine uses no other Hearth module
 * but base. */
#ifndef HX_ENGINE_H
#define HX_ENGINE_H

#include "engine/gguf.h"
#include "engine/vocab.h"
#include "engine/quant.h"
#include "engine/model.h"
#include "engine/sample.h"
#include "engine/grammar/grammar.h"
#include "engine/spec.h"
#include "engine/governor.h"
#include "engine/adapter.h"

#endif /* HX_ENGINE_H */
