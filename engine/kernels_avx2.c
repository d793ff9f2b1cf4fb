/* kernels_avx2.c: AVX2 + FMA + F16C kernels, compiled per function with
 * target attributes so the binary still runs on any x86-64. */
#include "engine/kernels_impl.h"

void hx_kernels_fill_avx2(hx_kernels *k)
{
    (void)k;
}
