// kvstream/quality.h — the quality meter: what a KV transformation costs the model.
//
// Prefill the first T tokens of a text, let the caller transform a copy of the KV cache (int8, a codec
// level, KV fetched over a link, ...: measure/ runs codecs through it), then score the next M tokens
// teacher-forced with the transformed cache and with the original one. Reports perplexity, its change, the mean KL divergence of the next-token distributions
// (original || transformed) and top-1 agreement. Deterministic for a given model, text and transform.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kvstream/model.h"
#include "kvstream/status.h"

namespace kvstream {

// The default evaluation and sample text: real English prose that every Debian system has.
inline constexpr const char* kDefaultText = "/usr/share/common-licenses/GPL-3";

struct QualityOptions {
  int context_tokens = 1024;
  int eval_tokens = 256;
};

struct QualityReport {
  std::string method;
  double bits_per_value = 0;
  double ppl = 0;             // perplexity of the M evaluated tokens with the transformed cache
  double ppl_reference = 0;   // the same with the original (fp32) cache
  double ppl_delta_pct = 0;   // 100 * (ppl / ppl_reference - 1)
  double kl_mean = 0;         // mean over the M positions of KL(original || transformed), nats
  double top1_agreement = 0;  // fraction of positions whose argmax is unchanged
  // Standard errors over the scored tokens (each taken as independent): of top1_agreement, sqrt(p (1 - p) / M);
  // of ppl_delta_pct, from the per-token change of the log-likelihood (delta method). Means over windows
  // (MeanOfWindows) carry those of their mean.
  double top1_stderr = 0;
  double ppl_delta_stderr = 0;
  int windows = 1;  // how many windows the figures are the mean of
};

// A transformation costs negligible quality when its mean over the scored tokens is at most +1 %
// perplexity and at least 98 % top-1 agreement (both; the standard errors say whether that holds up).
inline constexpr double kNegligiblePplDeltaPct = 1.0;
inline constexpr double kNegligibleTop1 = 0.98;
inline bool IsNegligible(const QualityReport& r) {
  return r.ppl_delta_pct <= kNegligiblePplDeltaPct && r.top1_agreement >= kNegligibleTop1;
}

// Windows scored one after the other through a text (kvstream eval --windows): window w prefills tokens
// [w (T + M), w (T + M) + T) and scores the M after them. QualityWindowsTokens is what `windows` of them
// need (+ 1 for the last target); QualityWindow is window w's T + M + 1 tokens for QualityMeter::Create
// (fewer where `tokens` ends first, which Create refuses).
size_t QualityWindowsTokens(const QualityOptions& options, int64_t windows);
std::vector<int> QualityWindow(const std::vector<int>& tokens, const QualityOptions& options, int64_t window);

// The mean of one method's reports over windows that each scored the same number of tokens: every figure
// the windows' mean, the standard errors those of that mean (windows independent: sqrt(sum se^2) / n).
// `windows` must not be empty.
QualityReport MeanOfWindows(const std::vector<QualityReport>& windows);

// Measures several transformed caches against one reference pass (the prefill and the reference scoring
// run once). Tokens [0, T) are the context; tokens [T, T+M) are fed teacher-forced and the logits after
// token T+i are scored against token T+i+1, so `tokens` must hold at least T + M + 1 ids.
class QualityMeter {
 public:
  static Result<QualityMeter> Create(const Model& model, std::vector<int> tokens, const QualityOptions& options);
  // Scores `transformed`, a transformed copy of context_cache() (same layers, kv_dim and tokens), as
  // `method` whose encoded form took `bits_per_value` bits per K/V value.
  Result<QualityReport> Measure(const std::string& method, const KvCache& transformed, double bits_per_value) const;
  const KvCache& context_cache() const { return context_; }
  // Perplexity of the evaluated tokens with the original cache (every report's ppl_reference).
  double ppl_reference() const;

 private:
  QualityMeter(const Model& model, std::vector<int> tokens, QualityOptions options)
      : model_(&model), tokens_(std::move(tokens)), options_(options) {}
  const Model* model_;
  std::vector<int> tokens_;
  QualityOptions options_;
  KvCache context_;
  std::vector<float> reference_logits_;  // eval_tokens * vocab
  double reference_nll_ = 0;             // mean negative log-likelihood with the original cache
  std::vector<double> reference_token_nll_;  // the same per scored token
};

}  // namespace kvstream
