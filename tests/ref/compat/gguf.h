/* gguf.h (compat): llama.h includes ggml's gguf.h only for the opaque
 * struct gguf_context; reference trees fetched without that header get this
 * forward declaration instead (the real header, when present, comes first). */
#ifndef HXREF_COMPAT_GGUF_H
#define HXREF_COMPAT_GGUF_H
struct gguf_context;
#endif
