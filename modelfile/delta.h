/* delta.h: model updates by tensor: a delta file holds only the tensors
 * whose content changed between two GGUF files (and the changed bytes of
 * the header), names the exact base it applies to, and rebuilds the new
 * file bit for bit. Part of modelfile.h. */
#ifndef HX_DELTA_H
#define HX_DELTA_H

#include <stdint.h>

#include "base/base.h"

typedef struct hx_delta_stats {
    int n_tensors;            /* tensors in the new file */
    int n_changed;            /* of them, carried by the delta */
    uint64_t changed_bytes;   /* their data */
    uint64_t header_bytes;    /* header bytes carried (the changed middle) */
    uint64_t delta_bytes;     /* size of the delta file */
} hx_delta_stats;

/* Writes to delta_path a GGUF delta from old_path to new_path: tensors of
 * new that are absent from old or differ in type, shape or any byte, the
 * middle of the header that differs, the SHA-256 of both files and the
 * layout of new. The delta is written through hx_out (atomically;
 * delta_path the same file as old_path or new_path is refused with
 * HX_ERR_INVALID before any work). st may be NULL.
 * Progress (hashing) goes to a terminal. */
int hx_model_diff(const char *old_path, const char *new_path,
                  const char *delta_path, hx_delta_stats *st, hx_err *err);

/* Rebuilds the new file from old_path and delta_path into out_path.
 * Refuses (HX_ERR_UNSUPPORTED) a delta made for another base; checks the
 * result's SHA-256 against the delta's before it replaces out_path, which
 * it does atomically through hx_out (out_path may be old_path itself: an
 * update in place; out_path the delta is refused). On any failure nothing
 * at out_path or old_path changes; a device or standard output is written
 * through as the file is rebuilt, so there a bad checksum fails only the
 * exit status. */
int hx_model_patch(const char *old_path, const char *delta_path,
                   const char *out_path, hx_err *err);

#endif /* HX_DELTA_H */
