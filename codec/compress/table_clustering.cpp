// k-means of symbol histograms under the coded-size distance (see table_clustering.h).
#include "codec/compress/table_clustering.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <span>

namespace kvstream::codec {
namespace {

// Bits charged for a symbol the table cannot code: the escape plus its fp16 value.
constexpr double kMissBits = 30.0;

double HistogramEntropyBits(const Histogram& h) {
  uint64_t count = 0;  // summed as integers: a chain of double additions was a tenth of the clustering
  for (uint64_t c : h) count += c;
  const double total = static_cast<double>(count);
  if (total == 0) return 0;
  double bits = 0;
  for (uint64_t c : h) {
    if (c) bits -= static_cast<double>(c) * std::log2(static_cast<double>(c) / total);
  }
  return bits / total;
}

}  // namespace

Result<RansModel> ModelFromHistogram(const Histogram& counts, bool smooth) {
  uint64_t max = 0;
  for (uint64_t c : counts) max = std::max(max, c);
  uint32_t scaled[256];
  const int shift = max > 0x3fffffffull ? static_cast<int>(std::ceil(std::log2(static_cast<double>(max) / 0x3fffffff))) : 0;
  int lo = 0, hi = 0;
  for (int s = 0; s < 256; ++s) {
    uint64_t c = counts[s] >> shift;
    if (counts[s] && c == 0) c = 1;
    scaled[s] = static_cast<uint32_t>(c);
    if (s > 0 && c) {
      if (lo == 0) lo = s;
      hi = s;
    }
  }
  if (smooth) {
    if (lo == 0) lo = hi = kSymbolZero;
    for (int s = std::max(1, lo - 2); s <= std::min(255, hi + 2); ++s) scaled[s] += 1;
    scaled[kEscapeSymbol] += 1;
  }
  return RansModel::FromCounts(scaled, 256);
}

Result<Clustering> ClusterHistograms(const std::vector<Histogram>& histograms, const ClusterOptions& options) {
  const size_t n = histograms.size();
  if (n == 0) return Status::InvalidArgument("table clustering: no histograms");
  const size_t k = std::min<size_t>(n, static_cast<size_t>(std::clamp(options.max_tables, 1, kMaxBankTables)));
  // Start from quantiles of the entropy: histograms of similar spread tend to share a shape.
  std::vector<double> entropy(n);
  for (size_t i = 0; i < n; ++i) entropy[i] = HistogramEntropyBits(histograms[i]);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return entropy[a] < entropy[b]; });
  std::vector<size_t> assign(n);
  for (size_t j = 0; j < n; ++j) assign[order[j]] = j * k / n;

  std::vector<Histogram> tables(k);
  // cost[s * k + j]: bits table j spends on symbol s. Symbol-major, so that a histogram's distances to
  // all k tables accumulate side by side (k independent sums that vectorise) rather than one table at
  // a time (a chain of dependent additions per table). Each sum still adds in symbol order.
  std::vector<double> cost(256 * k);
  std::vector<double> bits(k);
  // Symbols each histogram uses, so a distance costs O(used symbols), not O(256): histogram i's are
  // used_symbols[256 i, 256 i + used_count[i]), listed without a branch per symbol (a mispredicted one
  // was a fifth of the clustering).
  std::vector<uint8_t> used_symbols(256 * n);
  std::vector<size_t> used_count(n);
  for (size_t i = 0; i < n; ++i) {
    uint8_t* u = used_symbols.data() + 256 * i;
    size_t m = 0;
    for (int s = 0; s < 256; ++s) {
      u[m] = static_cast<uint8_t>(s);
      m += histograms[i][s] != 0 ? 1 : 0;
    }
    used_count[i] = m;
  }
  const auto used = [&](size_t i) {
    return std::span<const uint8_t>(used_symbols.data() + 256 * i, used_count[i]);
  };

  for (int it = 0; it <= options.iterations; ++it) {
    for (auto& t : tables) t.fill(0);
    for (size_t i = 0; i < n; ++i)
      for (uint8_t s : used(i)) tables[assign[i]][s] += histograms[i][s];
    if (it == options.iterations || k == 1) break;
    for (size_t j = 0; j < k; ++j) {
      uint64_t count = 0;
      for (uint64_t c : tables[j]) count += c;
      const double total = static_cast<double>(count);
      for (int s = 0; s < 256; ++s) {
        cost[s * k + j] = tables[j][s] ? -std::log2(static_cast<double>(tables[j][s]) / total) : kMissBits;
      }
    }
    bool changed = false;
    for (size_t i = 0; i < n; ++i) {
      std::fill(bits.begin(), bits.end(), 0.0);
      for (uint8_t s : used(i)) {
        const double c = static_cast<double>(histograms[i][s]);
        const double* row = cost.data() + static_cast<size_t>(s) * k;
        for (size_t j = 0; j < k; ++j) bits[j] += c * row[j];
      }
      double best = INFINITY;
      size_t best_j = assign[i];
      for (size_t j = 0; j < k; ++j) {
        if (bits[j] < best) {
          best = bits[j];
          best_j = j;
        }
      }
      if (best_j != assign[i]) {
        assign[i] = best_j;
        changed = true;
      }
    }
    if (!changed) break;  // the tables already match the assignment
  }

  // Drop empty clusters and build the models.
  std::vector<int> remap(k, -1);
  Clustering out;
  for (size_t j = 0; j < k; ++j) {
    bool empty = true;
    for (uint64_t c : tables[j]) empty &= (c == 0);
    if (empty) continue;
    KVSTREAM_ASSIGN_OR_RETURN(RansModel model, ModelFromHistogram(tables[j], options.smooth));
    remap[j] = static_cast<int>(out.bank.models.size());
    out.bank.models.push_back(std::move(model));
  }
  out.bank.index.resize(n);
  for (size_t i = 0; i < n; ++i) {
    out.bank.index[i] = static_cast<uint8_t>(remap[assign[i]]);
    const RansModel& m = out.bank.models[out.bank.index[i]];
    for (uint8_t s : used(i)) {
      const double c = m.CostBits(s);
      out.payload_bits += static_cast<double>(histograms[i][s]) * (std::isfinite(c) ? c : kMissBits);
    }
  }
  std::vector<uint8_t> bytes;
  ByteWriter w(&bytes);
  WriteTableBank(out.bank, w);
  out.bank_bits = 8.0 * static_cast<double>(bytes.size());
  return out;
}

}  // namespace kvstream::codec
