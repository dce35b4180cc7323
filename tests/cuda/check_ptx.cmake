# cmake -DPTX=file.ptx -P check_ptx.cmake: fails when the GPU decoder's PTX contracts an fp32 multiply and
# add into a fused multiply-add (the format rounds each separately: docs/format.md, "Conventions") or has
# no integer tensor-core product (the exact sums' MMA, cuda/kernels/warp_mma.h).
file(READ "${PTX}" ptx)
string(REGEX MATCHALL "fma\\.[a-z]+\\.f32" fused "${ptx}")
list(LENGTH fused fused_count)
if(fused_count GREATER 0)
  message(FATAL_ERROR "${PTX}: ${fused_count} fused fp32 multiply-adds (the reconstruction must round each operation)")
endif()
string(REGEX MATCHALL "mma\\.sync\\.aligned\\.m16n8k32\\.row\\.col\\.s32\\.[su]8\\.[su]8\\.s32" mma "${ptx}")
list(LENGTH mma mma_count)
if(mma_count EQUAL 0)
  message(FATAL_ERROR "${PTX}: no m16n8k32 integer MMA")
endif()
message(STATUS "${PTX}: no fused fp32 multiply-add, ${mma_count} integer MMA instructions")
