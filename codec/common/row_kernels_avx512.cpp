// row_kernels_body.h compiled with AVX-512F and BW (and -ffp-contract=off, as all of the codec).
#include "codec/common/row_kernels_body.h"

namespace kvstream::codec {

const RowKernels& RowKernelsAvx512() { return kRowKernels; }

}  // namespace kvstream::codec
