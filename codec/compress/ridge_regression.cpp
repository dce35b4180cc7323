#include "codec/compress/ridge_regression.h"

#include <cmath>
#include <cstddef>

namespace kvstream::codec {

bool SolveRidge(std::vector<double> a, int n, const std::vector<double>& b, int m, double ridge, std::vector<double>* x) {
  const auto at = [n](int i, int j) { return static_cast<size_t>(i) * static_cast<size_t>(n) + static_cast<size_t>(j); };
  double mean_diag = 0;
  for (int i = 0; i < n; ++i) mean_diag += a[at(i, i)];
  mean_diag /= n;
  for (int i = 0; i < n; ++i) a[at(i, i)] += ridge * mean_diag;
  // A = R^T R with R upper triangular, in place, a row of R at a time (row i from rows k < i).
  for (int i = 0; i < n; ++i) {
    double* ri = a.data() + at(i, 0);
    for (int k = 0; k < i; ++k) {
      const double* rk = a.data() + at(k, 0);
      const double f = rk[i];
      for (int j = i; j < n; ++j) ri[j] -= f * rk[j];
    }
    if (!(ri[i] > 0)) return false;
    const double d = std::sqrt(ri[i]);
    for (int j = i; j < n; ++j) ri[j] /= d;
  }
  // R^T Z = B, then R X = Z, whole rows of m right-hand sides at a time (so the inner loops run along rows).
  *x = b;
  const auto xrow = [&](int i) { return x->data() + static_cast<size_t>(i) * static_cast<size_t>(m); };
  for (int i = 0; i < n; ++i) {
    double* xi = xrow(i);
    const double d = a[at(i, i)];
    for (int c = 0; c < m; ++c) xi[c] /= d;
    for (int j = i + 1; j < n; ++j) {
      const double f = a[at(i, j)];
      double* xj = xrow(j);
      for (int c = 0; c < m; ++c) xj[c] -= f * xi[c];
    }
  }
  for (int i = n - 1; i >= 0; --i) {
    double* xi = xrow(i);
    const double d = a[at(i, i)];
    for (int c = 0; c < m; ++c) xi[c] /= d;
    for (int j = 0; j < i; ++j) {
      const double f = a[at(j, i)];
      double* xj = xrow(j);
      for (int c = 0; c < m; ++c) xj[c] -= f * xi[c];
    }
  }
  return true;
}

}  // namespace kvstream::codec
