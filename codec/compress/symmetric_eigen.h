// Eigen-decomposition of a symmetric matrix, for learning the transform scheme's bases (profile side).
#pragma once

#include <vector>

namespace kvstream::codec {

struct Eigen {
  std::vector<double> values;   // n eigenvalues, falling
  std::vector<double> vectors;  // n x n, row j = the unit eigenvector of values[j]
};

// Cyclic Jacobi rotations until the off-diagonal mass is below 1e-13 of the diagonal's (or 60 sweeps):
// slow (O(n^3) per sweep) but simple and accurate to a few ulps, and a profile learns it once per model.
// `matrix` is n x n, row-major, symmetric.
Eigen SymmetricEigen(std::vector<double> matrix, int n);

}  // namespace kvstream::codec
