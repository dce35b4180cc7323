#include "codec/compress/symmetric_eigen.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kvstream::codec {

Eigen SymmetricEigen(std::vector<double> a, int n) {
  const size_t un = static_cast<size_t>(n);
  // v accumulates the rotations; its columns become the eigenvectors.
  std::vector<double> v(un * un, 0.0);
  for (size_t i = 0; i < un; ++i) v[i * un + i] = 1.0;
  const auto at = [un](std::vector<double>& m, int r, int c) -> double& { return m[static_cast<size_t>(r) * un + static_cast<size_t>(c)]; };
  double diagonal = 0;
  for (int i = 0; i < n; ++i) diagonal += at(a, i, i) * at(a, i, i);
  for (int sweep = 0; sweep < 60; ++sweep) {
    double off = 0;
    for (int p = 0; p < n; ++p)
      for (int q = p + 1; q < n; ++q) off += at(a, p, q) * at(a, p, q);
    if (off <= 1e-26 * diagonal) break;
    for (int p = 0; p < n; ++p) {
      for (int q = p + 1; q < n; ++q) {
        const double apq = at(a, p, q);
        if (std::fabs(apq) < 1e-300) continue;
        // The rotation that zeroes a[p][q] (the smaller of the two angles, for stability).
        const double theta = (at(a, q, q) - at(a, p, p)) / (2 * apq);
        const double t = (theta >= 0 ? 1.0 : -1.0) / (std::fabs(theta) + std::sqrt(theta * theta + 1));
        const double c = 1 / std::sqrt(t * t + 1), s = t * c;
        for (int k = 0; k < n; ++k) {
          const double akp = at(a, k, p), akq = at(a, k, q);
          at(a, k, p) = c * akp - s * akq;
          at(a, k, q) = s * akp + c * akq;
        }
        for (int k = 0; k < n; ++k) {
          const double apk = at(a, p, k), aqk = at(a, q, k);
          at(a, p, k) = c * apk - s * aqk;
          at(a, q, k) = s * apk + c * aqk;
        }
        for (int k = 0; k < n; ++k) {
          const double vkp = at(v, k, p), vkq = at(v, k, q);
          at(v, k, p) = c * vkp - s * vkq;
          at(v, k, q) = s * vkp + c * vkq;
        }
      }
    }
  }
  std::vector<int> order(un);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return at(a, x, x) > at(a, y, y); });
  Eigen e;
  e.values.resize(un);
  e.vectors.resize(un * un);
  for (int j = 0; j < n; ++j) {
    const int src = order[static_cast<size_t>(j)];
    e.values[static_cast<size_t>(j)] = at(a, src, src);
    for (int c = 0; c < n; ++c) e.vectors[static_cast<size_t>(j) * un + static_cast<size_t>(c)] = at(v, c, src);
  }
  return e;
}

}  // namespace kvstream::codec
