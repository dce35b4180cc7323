// cachegen-ref: the released CacheGen quantiser, per-chunk CDFs and size accounting (see the header).
#include "bench/cachegen_ref.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "codec/common/rans.h"
#include "common/half.h"

namespace kvstream::bench {
namespace {

constexpr uint32_t kMagic = 0x46524743;  // "CGRF"
constexpr size_t kHeaderBytes = 20;      // magic, level, layers, tokens, channels

void PutU32(std::vector<uint8_t>* out, uint32_t x) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<uint8_t>(x >> (8 * i)));
}
uint32_t GetU32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

int ScaledBoundary(int boundary_of_32, int n_layers) {
  return static_cast<int>(std::lround(static_cast<double>(boundary_of_32) * n_layers / 32.0));
}

// One (K/V) half of a chunk: its bins per layer and its CDF width.
struct Half {
  const std::vector<uint16_t>* in;
  std::vector<uint16_t>* out;
  std::vector<int> bins;  // per layer
  int max_bins = 0;       // Lp - 1
};

// The released CDF of one (layer, channel) from its symbol counts, and the coder's frequencies.
void BuildCdf(const uint32_t* counts, int max_bins, uint32_t total, uint16_t* cdf) {
  uint32_t cum = 0;
  for (int i = 0; i <= max_bins; ++i) {
    cdf[i] = static_cast<uint16_t>((0xFFFFu - static_cast<uint32_t>(max_bins)) * cum / total + static_cast<uint32_t>(i));
    if (i < max_bins) cum += counts[i];
  }
}

// Frequencies out of 2^16 the released coder gives symbols [0, max_bins): the last symbol ends at 2^16.
// Fails if the table is not strictly increasing (a corrupt chunk).
Status CdfToFrequencies(const uint16_t* cdf, int max_bins, uint32_t* freq) {
  if (cdf[0] != 0) return Status::CorruptData("cachegen-ref: CDF does not start at 0");
  for (int s = 0; s < max_bins; ++s) {
    const uint32_t hi = (s == max_bins - 1) ? 0x10000u : cdf[s + 1];
    if (hi <= cdf[s]) return Status::CorruptData("cachegen-ref: CDF is not strictly increasing at entry " + std::to_string(s));
    freq[s] = hi - cdf[s];
  }
  return Status::Ok();
}

}  // namespace

Result<CacheGenRefConfig> CacheGenRefConfig::ForLevel(int level, int n_layers) {
  if (level < 1 || level > kCacheGenRefLevels) {
    return Status::InvalidArgument("cachegen-ref: level " + std::to_string(level) + " outside [1, " +
                                   std::to_string(kCacheGenRefLevels) + "]");
  }
  if (n_layers < 1) return Status::InvalidArgument("cachegen-ref: n_layers = " + std::to_string(n_layers));
  CacheGenRefConfig c;
  c.key_first_layers = ScaledBoundary(10, n_layers);
  c.key_second_layers = ScaledBoundary(20, n_layers);
  c.value_first_layers = std::max(1, ScaledBoundary(2, n_layers));
  static constexpr int kBins[kCacheGenRefLevels][5] = {
      {32, 32, 32, 32, 32},  // QUANT_LEVEL 3
      {32, 16, 16, 32, 16},  // the default configuration
      {16, 16, 12, 16, 12},  // QUANT_LEVEL 1
  };
  const int* b = kBins[level - 1];
  c.key_first_bins = b[0];
  c.key_second_bins = b[1];
  c.key_third_bins = b[2];
  c.value_first_bins = b[3];
  c.value_second_bins = b[4];
  return c;
}

int CacheGenRefConfig::key_bins(int layer) const {
  if (layer < key_first_layers) return key_first_bins;
  if (layer < key_second_layers) return key_second_bins;
  return key_third_bins;
}

int CacheGenRefConfig::value_bins(int layer) const {
  return layer < value_first_layers ? value_first_bins : value_second_bins;
}

Result<std::unique_ptr<CacheGenRefCodec>> CacheGenRefCodec::Create(int level, int n_layers) {
  KVSTREAM_ASSIGN_OR_RETURN(CacheGenRefConfig config, CacheGenRefConfig::ForLevel(level, n_layers));
  return std::unique_ptr<CacheGenRefCodec>(new CacheGenRefCodec(level, config));
}

Result<CacheGenRefSize> CacheGenRefCodec::EncodeWithSize(const KvChunk16& chunk, std::vector<uint8_t>* out) const {
  const int L = chunk.layers, T = chunk.tokens, C = chunk.channels;
  if (L <= 0 || T <= 0 || C <= 0) return Status::InvalidArgument("cachegen-ref: empty chunk");
  CacheGenRefSize size;
  PutU32(out, kMagic);
  PutU32(out, static_cast<uint32_t>(level_));
  PutU32(out, static_cast<uint32_t>(L));
  PutU32(out, static_cast<uint32_t>(T));
  PutU32(out, static_cast<uint32_t>(C));
  size.header_bytes = static_cast<int64_t>(kHeaderBytes);

  Half halves[2] = {{&chunk.k, nullptr, {}, 0}, {&chunk.v, nullptr, {}, 0}};
  for (int l = 0; l < L; ++l) {
    halves[0].bins.push_back(config_.key_bins(l));
    halves[1].bins.push_back(config_.value_bins(l));
  }
  for (Half& h : halves) h.max_bins = *std::max_element(h.bins.begin(), h.bins.end());

  // Quantise: symbols [kv][layer][token][channel], scales [kv][layer][token] in fp16.
  std::vector<uint8_t> symbols[2];
  for (int kv = 0; kv < 2; ++kv) {
    const Half& h = halves[kv];
    symbols[kv].resize(static_cast<size_t>(chunk.values_per_tensor()));
    for (int l = 0; l < L; ++l) {
      const float M = static_cast<float>(h.bins[l] / 2 - 1);
      for (int t = 0; t < T; ++t) {
        const size_t row = (static_cast<size_t>(l) * T + t) * C;
        const uint16_t* x = h.in->data() + row;
        float m = 0;
        for (int c = 0; c < C; ++c) m = std::max(m, std::fabs(HalfToFloat(x[c])));
        const uint16_t m16 = FloatToHalf(m);  // exact: the max of fp16 values
        out->push_back(static_cast<uint8_t>(m16));
        out->push_back(static_cast<uint8_t>(m16 >> 8));
        const float factor = m > 0 ? M / m : 0.0f;
        uint8_t* s = symbols[kv].data() + row;
        for (int c = 0; c < C; ++c) {
          s[c] = static_cast<uint8_t>(std::clamp(std::nearbyint(HalfToFloat(x[c]) * factor + M), 0.0f, 2 * M));
        }
      }
    }
  }
  size.scale_bytes = 2LL * 2 * L * T;

  // Per-chunk CDFs per (K/V, layer, channel), shipped as int16; rANS tables derived from them.
  std::vector<codec::RansModel> models[2];
  for (int kv = 0; kv < 2; ++kv) {
    const int lp = halves[kv].max_bins + 1;
    std::vector<uint32_t> counts(static_cast<size_t>(lp));
    std::vector<uint16_t> cdf(static_cast<size_t>(lp));
    std::vector<uint32_t> freq(static_cast<size_t>(lp));
    for (int l = 0; l < L; ++l) {
      for (int c = 0; c < C; ++c) {
        std::fill(counts.begin(), counts.end(), 0u);
        for (int t = 0; t < T; ++t) ++counts[symbols[kv][(static_cast<size_t>(l) * T + t) * C + c]];
        BuildCdf(counts.data(), halves[kv].max_bins, static_cast<uint32_t>(T), cdf.data());
        for (uint16_t e : cdf) {
          out->push_back(static_cast<uint8_t>(e));
          out->push_back(static_cast<uint8_t>(e >> 8));
        }
        KVSTREAM_RETURN_IF_ERROR(CdfToFrequencies(cdf.data(), halves[kv].max_bins, freq.data()));
        for (int t = 0; t < T; ++t) {
          const uint8_t s = symbols[kv][(static_cast<size_t>(l) * T + t) * C + c];
          size.ac16_ideal_bits += 16.0 - std::log2(static_cast<double>(freq[s]));
        }
        KVSTREAM_ASSIGN_OR_RETURN(codec::RansModel model, codec::RansModel::FromCounts(freq.data(), halves[kv].max_bins));
        models[kv].push_back(std::move(model));
      }
    }
    size.cdf_bytes += 2LL * L * C * lp;
  }

  // Payload: per 256-token block, one rANS segment per K/V with the symbols in [token][layer][channel]
  // order (so that the table of (layer, channel) repeats with period L*C), each preceded by its u32
  // length. Two segments per block keep the coder's final-state flush negligible.
  std::vector<const codec::RansModel*> period[2];
  for (int kv = 0; kv < 2; ++kv) {
    for (const codec::RansModel& m : models[kv]) period[kv].push_back(&m);
  }
  std::vector<uint8_t> ordered, segment;
  for (int t0 = 0; t0 < T; t0 += kCacheGenRefBlockTokens) {
    const int n = std::min(kCacheGenRefBlockTokens, T - t0);
    for (int kv = 0; kv < 2; ++kv) {
      ordered.clear();
      for (int t = t0; t < t0 + n; ++t) {
        for (int l = 0; l < L; ++l) {
          const uint8_t* s = symbols[kv].data() + (static_cast<size_t>(l) * T + t) * C;
          ordered.insert(ordered.end(), s, s + C);
        }
      }
      segment.clear();
      KVSTREAM_RETURN_IF_ERROR(codec::RansEncode(ordered.data(), ordered.size(), period[kv].data(), period[kv].size(), &segment));
      size.rans_ideal_bits += codec::RansIdealBits(ordered.data(), ordered.size(), period[kv].data(), period[kv].size());
      PutU32(out, static_cast<uint32_t>(segment.size()));
      out->insert(out->end(), segment.begin(), segment.end());
      size.payload_bytes += static_cast<int64_t>(segment.size());
    }
    size.length_bytes += 4LL * 2 * L * C;  // the released int32 length per (K/V, layer, channel) stream
  }
  return size;
}

Status CacheGenRefCodec::Encode(const KvChunk16& chunk, std::vector<uint8_t>* out, EncodeCost* stats) const {
  KVSTREAM_ASSIGN_OR_RETURN(CacheGenRefSize size, EncodeWithSize(chunk, out));
  if (stats) {
    stats->charged_bits = 8.0 * static_cast<double>(size.charged_bytes());
    stats->entropy_coded_bits = 8.0 * static_cast<double>(size.payload_bytes);
    stats->entropy_ideal_bits = size.rans_ideal_bits;
  }
  return Status::Ok();
}

Status CacheGenRefCodec::Decode(const uint8_t* data, size_t size, KvChunk16* chunk) const {
  if (size < kHeaderBytes) return Status::CorruptData("cachegen-ref: chunk shorter than its 20-byte header");
  if (GetU32(data) != kMagic) return Status::CorruptData("cachegen-ref: bad magic");
  if (GetU32(data + 4) != static_cast<uint32_t>(level_)) {
    return Status::InvalidArgument("cachegen-ref: chunk level " + std::to_string(GetU32(data + 4)) +
                                   " but the codec is level " + std::to_string(level_));
  }
  KVSTREAM_RETURN_IF_ERROR(CheckChunkShape(*chunk, GetU32(data + 8), GetU32(data + 12), GetU32(data + 16), "cachegen-ref"));
  const int L = chunk->layers, T = chunk->tokens, C = chunk->channels;
  size_t pos = kHeaderBytes;
  auto need = [&](size_t n, const char* what) -> Status {
    if (n > size - pos) {
      return Status::CorruptData(std::string("cachegen-ref: ") + what + " needs " + std::to_string(n) +
                                 " bytes at offset " + std::to_string(pos) + ", chunk has " + std::to_string(size));
    }
    return Status::Ok();
  };

  std::vector<int> bins[2];
  int max_bins[2] = {0, 0};
  for (int l = 0; l < L; ++l) {
    bins[0].push_back(config_.key_bins(l));
    bins[1].push_back(config_.value_bins(l));
  }
  for (int kv = 0; kv < 2; ++kv) max_bins[kv] = *std::max_element(bins[kv].begin(), bins[kv].end());

  const size_t scale_bytes = 2ull * 2 * L * T;
  KVSTREAM_RETURN_IF_ERROR(need(scale_bytes, "scales"));
  const uint8_t* scales = data + pos;
  pos += scale_bytes;

  std::vector<codec::RansModel> models[2];
  for (int kv = 0; kv < 2; ++kv) {
    const int lp = max_bins[kv] + 1;
    KVSTREAM_RETURN_IF_ERROR(need(2ull * L * C * lp, "CDF tables"));
    std::vector<uint16_t> cdf(static_cast<size_t>(lp));
    std::vector<uint32_t> freq(static_cast<size_t>(lp));
    for (int i = 0; i < L * C; ++i) {
      for (int j = 0; j < lp; ++j) cdf[j] = static_cast<uint16_t>(data[pos + 2 * j] | data[pos + 2 * j + 1] << 8);
      pos += 2ull * lp;
      KVSTREAM_RETURN_IF_ERROR(CdfToFrequencies(cdf.data(), max_bins[kv], freq.data()));
      KVSTREAM_ASSIGN_OR_RETURN(codec::RansModel model, codec::RansModel::FromCounts(freq.data(), max_bins[kv]));
      models[kv].push_back(std::move(model));
    }
  }

  std::vector<const codec::RansModel*> period[2];
  for (int kv = 0; kv < 2; ++kv) {
    for (const codec::RansModel& m : models[kv]) period[kv].push_back(&m);
  }
  std::vector<uint8_t> symbols(static_cast<size_t>(kCacheGenRefBlockTokens) * L * C);
  for (int t0 = 0; t0 < T; t0 += kCacheGenRefBlockTokens) {
    const int n = std::min(kCacheGenRefBlockTokens, T - t0);
    for (int kv = 0; kv < 2; ++kv) {
      std::vector<uint16_t>& dst = kv == 0 ? chunk->k : chunk->v;
      KVSTREAM_RETURN_IF_ERROR(need(4, "segment length"));
      const size_t len = GetU32(data + pos);
      pos += 4;
      KVSTREAM_RETURN_IF_ERROR(need(len, "segment"));
      KVSTREAM_RETURN_IF_ERROR(codec::RansDecode(data + pos, len, period[kv].data(), period[kv].size(), symbols.data(),
                                                 static_cast<size_t>(n) * L * C));
      pos += len;
      for (int t = 0; t < n; ++t) {
        for (int l = 0; l < L; ++l) {
          const float M = static_cast<float>(bins[kv][l] / 2 - 1);
          const size_t srow = static_cast<size_t>(kv) * L * T + static_cast<size_t>(l) * T + t0 + t;
          const float m = HalfToFloat(static_cast<uint16_t>(scales[2 * srow] | scales[2 * srow + 1] << 8));
          uint16_t* o = dst.data() + (static_cast<size_t>(l) * T + t0 + t) * C;
          const uint8_t* s = symbols.data() + (static_cast<size_t>(t) * L + l) * C;
          for (int c = 0; c < C; ++c) o[c] = FloatToHalf((static_cast<float>(s[c]) - M) / M * m);
        }
      }
    }
  }
  if (pos != size) return Status::CorruptData("cachegen-ref: " + std::to_string(size - pos) + " trailing bytes");
  return Status::Ok();
}

}  // namespace kvstream::bench
