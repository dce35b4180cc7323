// The quality meter: one reference pass, then each transform scored against it.
//
// Scoring: the first T tokens are prefilled into the cache; the cache is transformed; tokens
// [T, T+M) are fed teacher-forced and the logits after token T+i are scored against token T+i+1. Every
// scored prediction therefore attends to the transformed context, which is what a receiver of a
// compressed KV cache would see.
#include "kvstream/quality.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace kvstream {
namespace {

// log-softmax of one row, in double.
void LogSoftmax(const float* logits, int n, std::vector<double>& out) {
  out.resize(n);
  double mx = logits[0];
  for (int i = 1; i < n; ++i) mx = std::max(mx, static_cast<double>(logits[i]));
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  const double lse = mx + std::log(sum);
  for (int i = 0; i < n; ++i) out[i] = static_cast<double>(logits[i]) - lse;
}

int ArgMax(const float* x, int n) { return static_cast<int>(std::max_element(x, x + n) - x); }

// A cache of `capacity` positions holding the first src.tokens positions of `src`.
KvCache CopyWithCapacity(const KvCache& src, int capacity) {
  KvCache dst;
  dst.layers = src.layers;
  dst.kv_dim = src.kv_dim;
  dst.capacity = capacity;
  dst.tokens = src.tokens;
  dst.k.assign(static_cast<size_t>(dst.layers) * capacity * dst.kv_dim, 0.0f);
  dst.v.assign(dst.k.size(), 0.0f);
  const size_t row = static_cast<size_t>(src.tokens) * src.kv_dim;
  for (int l = 0; l < src.layers; ++l) {
    const size_t s = static_cast<size_t>(l) * src.capacity * src.kv_dim, d = static_cast<size_t>(l) * capacity * dst.kv_dim;
    std::copy_n(src.k.data() + s, row, dst.k.data() + d);
    std::copy_n(src.v.data() + s, row, dst.v.data() + d);
  }
  return dst;
}

}  // namespace

Result<QualityMeter> QualityMeter::Create(const Model& model, std::vector<int> tokens, const QualityOptions& options) {
  const int T = options.context_tokens, M = options.eval_tokens;
  if (T < 1 || M < 1) {
    return Status::InvalidArgument("quality meter: context_tokens = " + std::to_string(T) + " and eval_tokens = " +
                                   std::to_string(M) + " must both be at least 1");
  }
  if (tokens.size() < static_cast<size_t>(T) + M + 1) {
    return Status::InvalidArgument("quality meter: the text has " + std::to_string(tokens.size()) + " tokens, needs context_tokens + eval_tokens + 1 = " +
                                   std::to_string(static_cast<int64_t>(T) + M + 1));
  }
  if (T + M > model.config().max_seq_len) {
    return Status::InvalidArgument("quality meter: context_tokens + eval_tokens = " + std::to_string(T + M) +
                                   " exceeds the model's max_seq_len " + std::to_string(model.config().max_seq_len));
  }
  QualityMeter meter(model, std::move(tokens), options);
  meter.context_ = KvCache::Allocate(model.config(), T);
  const std::vector<int> context(meter.tokens_.begin(), meter.tokens_.begin() + T);
  KVSTREAM_RETURN_IF_ERROR(model.Forward(context, meter.context_, nullptr));
  KvCache work = CopyWithCapacity(meter.context_, T + M);
  const std::vector<int> eval(meter.tokens_.begin() + T, meter.tokens_.begin() + T + M);
  KVSTREAM_RETURN_IF_ERROR(model.Forward(eval, work, &meter.reference_logits_));
  const int vocab = model.config().vocab_size;
  std::vector<double> lp;
  double nll = 0;
  meter.reference_token_nll_.resize(static_cast<size_t>(M));
  for (int i = 0; i < M; ++i) {
    LogSoftmax(meter.reference_logits_.data() + static_cast<size_t>(i) * vocab, vocab, lp);
    meter.reference_token_nll_[static_cast<size_t>(i)] = -lp[meter.tokens_[T + i + 1]];
    nll += meter.reference_token_nll_[static_cast<size_t>(i)];
  }
  meter.reference_nll_ = nll / M;
  return meter;
}

double QualityMeter::ppl_reference() const { return std::exp(reference_nll_); }

Result<QualityReport> QualityMeter::Measure(const std::string& method, const KvCache& transformed,
                                            double bits_per_value) const {
  const int T = options_.context_tokens, M = options_.eval_tokens, vocab = model_->config().vocab_size;
  if (transformed.layers != context_.layers || transformed.kv_dim != context_.kv_dim || transformed.tokens != T) {
    return Status::InvalidArgument(method + ": the transformed cache's shape is not the context's");
  }
  KvCache work = CopyWithCapacity(transformed, T + M);
  std::vector<float> logits;
  const std::vector<int> eval(tokens_.begin() + T, tokens_.begin() + T + M);
  KVSTREAM_RETURN_IF_ERROR(model_->Forward(eval, work, &logits));

  QualityReport r;
  r.method = method;
  r.bits_per_value = bits_per_value;
  std::vector<double> lp_ref, lp;
  std::vector<double> nll_change(static_cast<size_t>(M));  // per token: NLL transformed - NLL original
  double nll = 0, kl = 0;
  int agree = 0;
  for (int i = 0; i < M; ++i) {
    const float* ref = reference_logits_.data() + static_cast<size_t>(i) * vocab;
    const float* got = logits.data() + static_cast<size_t>(i) * vocab;
    LogSoftmax(ref, vocab, lp_ref);
    LogSoftmax(got, vocab, lp);
    nll -= lp[tokens_[T + i + 1]];
    nll_change[static_cast<size_t>(i)] = -lp[tokens_[T + i + 1]] - reference_token_nll_[static_cast<size_t>(i)];
    double k = 0;
    for (int j = 0; j < vocab; ++j) k += std::exp(lp_ref[j]) * (lp_ref[j] - lp[j]);
    kl += std::max(k, 0.0);  // rounding can make an identical pair a hair negative
    agree += ArgMax(ref, vocab) == ArgMax(got, vocab);
  }
  r.ppl = std::exp(nll / M);
  r.ppl_reference = std::exp(reference_nll_);
  r.ppl_delta_pct = 100.0 * (r.ppl / r.ppl_reference - 1.0);
  r.kl_mean = kl / M;
  r.top1_agreement = static_cast<double>(agree) / M;
  r.top1_stderr = std::sqrt(r.top1_agreement * (1.0 - r.top1_agreement) / M);
  // ppl / ppl_reference = exp(mean NLL change), so its standard error is exp(mean) times the mean's.
  double mean_change = 0, spread = 0;
  for (double d : nll_change) mean_change += d / M;
  for (double d : nll_change) spread += (d - mean_change) * (d - mean_change);
  const double mean_stderr = M > 1 ? std::sqrt(spread / (M - 1) / M) : 0.0;
  r.ppl_delta_stderr = 100.0 * std::exp(mean_change) * mean_stderr;
  return r;
}

size_t QualityWindowsTokens(const QualityOptions& options, int64_t windows) {
  return static_cast<size_t>(windows) * (static_cast<size_t>(options.context_tokens) + static_cast<size_t>(options.eval_tokens)) + 1;
}

std::vector<int> QualityWindow(const std::vector<int>& tokens, const QualityOptions& options, int64_t window) {
  const size_t first = std::min(tokens.size(), QualityWindowsTokens(options, window) - 1);
  const size_t end = std::min(tokens.size(), QualityWindowsTokens(options, window + 1));
  return std::vector<int>(tokens.begin() + static_cast<long>(first), tokens.begin() + static_cast<long>(end));
}

QualityReport MeanOfWindows(const std::vector<QualityReport>& windows) {
  QualityReport mean = windows.front();
  const double n = static_cast<double>(windows.size());
  mean.ppl = mean.ppl_reference = mean.ppl_delta_pct = mean.kl_mean = mean.top1_agreement = mean.bits_per_value = 0;
  double top1_var = 0, ppl_delta_var = 0;
  for (const QualityReport& r : windows) {
    mean.ppl += r.ppl / n;
    mean.ppl_reference += r.ppl_reference / n;
    mean.ppl_delta_pct += r.ppl_delta_pct / n;
    mean.kl_mean += r.kl_mean / n;
    mean.top1_agreement += r.top1_agreement / n;
    mean.bits_per_value += r.bits_per_value / n;
    top1_var += r.top1_stderr * r.top1_stderr;
    ppl_delta_var += r.ppl_delta_stderr * r.ppl_delta_stderr;
  }
  mean.top1_stderr = std::sqrt(top1_var) / n;
  mean.ppl_delta_stderr = std::sqrt(ppl_delta_var) / n;
  mean.windows = static_cast<int>(windows.size());
  return mean;
}

}  // namespace kvstream
