// Which SIMD kernels this CPU runs. Every *_avx2.cpp, *_avx512.cpp and *_avx512vnni.cpp kernel gives the
// same results as its portable twin.
#pragma once

namespace kvstream::codec {

// True when the CPU has AVX2 and FMA, unless the environment sets KVSTREAM_DISABLE_AVX2=1 (tests use it
// to run the portable kernels on the same machine).
bool Avx2Enabled();

// True when Avx2Enabled() and the CPU has AVX-512F and AVX-512BW, unless the environment sets
// KVSTREAM_DISABLE_AVX512=1 (tests use it to run the AVX2 kernels on an AVX-512 machine).
bool Avx512Enabled();

// True when Avx512Enabled() and the CPU has AVX-512 VNNI (the transform's integer sums use vpdpwssd).
bool Avx512VnniEnabled();

// True when Avx512Enabled(), the CPU has AMX-TILE and AMX-INT8 and the kernel grants this process the tile
// state (Linux: arch_prctl ARCH_REQ_XCOMP_PERM), unless the environment sets KVSTREAM_DISABLE_AMX=1 (tests
// use it to compare the kernels). The transform's integer sums then run on AMX tiles.
bool AmxEnabled();

// The widest kernels this process runs, for benchmark records: "amx", "avx512-vnni", "avx512", "avx2"
// or "portable".
const char* SimdKernels();

}  // namespace kvstream::codec
