// kvstream/quality.h — the quality meter: what a KV transformation costs the model.
//
// Prefill the first T tokens of a text, pass the KV cache through a transformation (identity, int8, a
// codec level, ...), then score the next M tokens teacher-forced with the transformed cache and with the
// original one. Reports perplexity, its change, the mean KL divergence of the next-token distributions
// (original || transformed) and top-1 agreement. Deterministic for a given model, text and transform.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kvstream/model.h"
#include "kvstream/status.h"

namespace kvstream {

// A lossy (or lossless) rewrite of a KV cache in place: the extension point codecs plug into. Apply
// returns the bits per KV value the transformation's encoded form took (16 for fp16).
class KvTransform {
 public:
  virtual ~KvTransform() = default;
  virtual std::string name() const = 0;
  virtual Result<double> Apply(KvCache& cache) const = 0;
};

// Built in: fp16 round trip (the uncompressed baseline, named "fp16") and per-token symmetric int8 with
// fp16 scales ("int8").
std::unique_ptr<KvTransform> MakeFp16Transform();
std::unique_ptr<KvTransform> MakeInt8Transform();

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
};

// Measures several transforms against one reference pass (the prefill and the reference scoring run
// once). Tokens [0, T) are the context; tokens [T, T+M) are fed teacher-forced and the logits after
// token T+i are scored against token T+i+1, so `tokens` must hold at least T + M + 1 ids.
class QualityMeter {
 public:
  static Result<QualityMeter> Create(const Model& model, std::vector<int> tokens, const QualityOptions& options);
  Result<QualityReport> Measure(const KvTransform& transform) const;
  const KvCache& context_cache() const { return context_; }

 private:
  QualityMeter(const Model& model, std::vector<int> tokens, QualityOptions options)
      : model_(&model), tokens_(std::move(tokens)), options_(options) {}
  const Model* model_;
  std::vector<int> tokens_;
  QualityOptions options_;
  KvCache context_;
  std::vector<float> reference_logits_;  // eval_tokens * vocab
  double reference_nll_ = 0;             // mean negative log-likelihood with the original cache
};

}  // namespace kvstream
