/* kernels_avx512.c: AVX-512 (F, BW, VL, VNNI; BF16 where present) kernels,
 * compiled per function with target attributes, picked at run time. */
#include "engine/kernels_impl.h"

void hx_kernels_fill_avx512(hx_kernels *k, int has_bf16)
{
    (void)k;
    (void)has_bf16;
}
