// Ridge-regularised least squares, for the predicted scheme's predictors (the profile builder) and the
// rate-distortion study.
#pragma once

#include <vector>

namespace kvstream::codec {

// Solves (A + ridge * mean(diag A) * I) X = B for X by Cholesky: A n x n symmetric positive semi-definite
// (row-major; its upper triangle is read), B n x m, X n x m (row-major). False if A is not positive
// definite even with the ridge.
bool SolveRidge(std::vector<double> a, int n, const std::vector<double>& b, int m, double ridge, std::vector<double>* x);

}  // namespace kvstream::codec
