#include "codec/common/row_kernels.h"

#include "codec/common/cpu_features.h"
#include "codec/common/row_kernels_body.h"

namespace kvstream::codec {

const RowKernels& RowKernelsForCpu() { return Avx512Enabled() ? RowKernelsAvx512() : kRowKernels; }

}  // namespace kvstream::codec
