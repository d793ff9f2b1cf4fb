/* modelfile.h: the model-file tools' public API: quantizing (with
 * importance matrices), random-weight and embedded test models, deltas
 * between model files, BPE vocabulary training. They read and write GGUF
 * files through the engine; the engine does not use them. */
#ifndef HX_MODELFILE_H
#define HX_MODELFILE_H

#include "engine/engine.h"
#include "modelfile/delta.h"
#include "modelfile/model_write.h"
#include "modelfile/quantize.h"
#include "modelfile/vocab_train.h"

#endif /* HX_MODELFILE_H */
