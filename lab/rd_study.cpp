// kvstream_rd_study: the rate-distortion study behind the codec's quantisation scheme
// (lab/rate-distortion.md). Prints one JSON object per line per (scheme, parameters): rate in bits per
// K/V value (calibrated entropy tables + side information) and the quality meter's figures.
//
// usage: kvstream_rd_study [--model smollm2] [--text FILE] [--context-tokens 2048] [--eval-tokens 256]
//          [--cal-offset 2400] [--cal-tokens 1024] [--chunk-tokens 256] [--sensitivity FILE]
//          [--sweep all|quick|extra|sinks|transform]
//          [--variants pca+derot,pca-head+derot,derot,pca,pca-values,predicted,predicted-prev,predicted-vk,
//                      predicted-2,predicted-same]
//          [--alphas 0.1,0.15,0.25/0.5,...]   (alpha for K and V, or key_alpha/value_alpha)
//          [--ridge 0.001] [--rank 0] [--fit-alpha 0]   (predicted variants: the least-squares ridge,
//          relative to the mean diagonal; reduced-rank predictors with that many output directions, 0 = full
//          rank; the alpha the predictors are fitted at, 0 = each point's own)
// The calibration slice (tokens [cal-offset, cal-offset + cal-tokens) of the same text, prefilled on its
// own after a BOS) never overlaps the evaluated context + continuation.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/baselines.h"
#include "bench/cachegen_ref.h"
#include "measure/codec_quality.h"
#include "lab/rd_schemes.h"
#include "common/whole_file.h"
#include "kvstream/quality.h"

namespace kvstream::lab {
namespace {

struct Flags {
  std::map<std::string, std::string> values = {
      {"model", "smollm2"},       {"text", "/usr/share/common-licenses/GPL-3"},
      {"context-tokens", "2048"}, {"eval-tokens", "256"},
      {"cal-offset", "2400"},     {"cal-tokens", "1024"},
      {"chunk-tokens", "256"},    {"sensitivity", ""},
      {"sweep", "all"},           {"variants", "pca+derot,derot,pca,pca-values"},
      {"alphas", "0.1,0.15,0.25,0.35,0.5"}, {"ridge", "0.001"}, {"rank", "0"}, {"fit-alpha", "0"}};
  int Int(const std::string& k) const { return std::stoi(values.at(k)); }
};

Result<Flags> ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0 || i + 1 >= argc || !f.values.count(a.substr(2))) {
      return Status::InvalidArgument("unknown or incomplete flag " + a);
    }
    f.values[a.substr(2)] = argv[++i];
  }
  return f;
}

void PrintRow(const std::string& scheme, const std::string& params, double bpv, const RdRate* rate,
              const QualityReport& q) {
  nlohmann::json j;
  j["scheme"] = scheme;
  j["params"] = params;
  j["bits_per_value"] = bpv;
  if (rate) {
    j["side_bits_per_value"] = rate->side_bits_per_value;
    j["self_entropy_bits_per_value"] = rate->self_entropy_per_value;
  }
  j["ppl_delta_pct"] = q.ppl_delta_pct;
  j["kl_mean"] = q.kl_mean;
  j["top1_agreement"] = q.top1_agreement;
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
}

Status SweepSinks(const QualityMeter& meter, const KvCache& cal) {
  for (auto [sinks, alpha] : {std::pair{16, 0.25}, std::pair{16, 0.5}, std::pair{4, 0.1}}) {
    ChannelUniformOptions o;
    o.channel_exponent = 0;
    o.sink_tokens = sinks;
    o.key_alpha = o.value_alpha = alpha;
    o.label = "channel-uniform+sink";
    auto scheme = MakeChannelUniformScheme(o);
    KVSTREAM_RETURN_IF_ERROR(scheme->Calibrate(cal));
    KVSTREAM_ASSIGN_OR_RETURN(RdTables tables, RdTables::Learn(*scheme, cal));
    RdTransform t(*scheme, tables);
    KVSTREAM_ASSIGN_OR_RETURN(QualityReport q, MeasureTransform(meter, t));
    PrintRow(scheme->name(), scheme->params(), q.bits_per_value, &t.last_rate(), q);
  }
  return Status::Ok();
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// KVTC-style transform coding (lab/rate-distortion.md, "Transform coding"): each variant's basis is
// learned once on the calibration slice, then the step is swept; the flat channel-uniform scheme at the
// first alpha is the same-run baseline.
Status SweepTransform(const Flags& f, const ModelConfig& config, const QualityMeter& meter, const KvCache& cal) {
  // Each entry is "alpha" (keys and values) or "key_alpha/value_alpha".
  std::vector<std::pair<double, double>> alphas;
  for (const std::string& a : Split(f.values.at("alphas"))) {
    const size_t slash = a.find('/');
    const double k = std::stod(a.substr(0, slash));
    alphas.emplace_back(k, slash == std::string::npos ? k : std::stod(a.substr(slash + 1)));
  }
  if (alphas.empty()) return Status::InvalidArgument("--alphas is empty");
  auto measure = [&](RdScheme& scheme, double kept) -> Status {
    KVSTREAM_RETURN_IF_ERROR(scheme.Calibrate(cal));
    KVSTREAM_ASSIGN_OR_RETURN(RdTables tables, RdTables::Learn(scheme, cal));
    RdTransform t(scheme, tables);
    KVSTREAM_ASSIGN_OR_RETURN(QualityReport q, MeasureTransform(meter, t));
    nlohmann::json j;
    j["scheme"] = scheme.name();
    j["params"] = scheme.params();
    j["bits_per_value"] = q.bits_per_value;
    j["side_bits_per_value"] = t.last_rate().side_bits_per_value;
    j["self_entropy_bits_per_value"] = t.last_rate().self_entropy_per_value;
    if (kept >= 0) j["kept_components_frac"] = kept;
    j["ppl_delta_pct"] = q.ppl_delta_pct;
    j["kl_mean"] = q.kl_mean;
    j["top1_agreement"] = q.top1_agreement;
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
    return Status::Ok();
  };
  ChannelUniformOptions flat;
  flat.channel_exponent = 0;
  flat.sink_tokens = 4;
  flat.label = "channel-uniform+sink";
  flat.key_alpha = alphas.front().first;
  flat.value_alpha = alphas.front().second;
  auto baseline = MakeChannelUniformScheme(flat);
  KVSTREAM_RETURN_IF_ERROR(measure(*baseline, -1));

  for (const std::string& variant : Split(f.values.at("variants"))) {
    if (variant.rfind("predicted", 0) == 0) {
      PredictiveCodingOptions po;
      po.rope.head_dim = config.head_dim;
      po.rope.rope_theta = config.rope_theta;
      po.rope.rope_layout = config.rope_layout;
      if (variant == "predicted-prev") {
        po.values_from_keys = false;
      } else if (variant == "predicted-vk") {
        po.from_previous_layer = false;
      } else if (variant == "predicted-2") {
        po.history_layers = 2;
      } else if (variant == "predicted-same") {
        po.same_tensor_only = true;
      } else if (variant != "predicted") {
        return Status::InvalidArgument("--variants: unknown variant '" + variant +
                                       "' (predicted, predicted-prev, predicted-vk, predicted-2, predicted-same)");
      }
      po.label = variant + "+pca+derot+sink";
      po.ridge = std::stod(f.values.at("ridge"));
      po.rank = f.Int("rank");
      po.fit_alpha = std::stod(f.values.at("fit-alpha"));
      for (auto [ka, va] : alphas) {
        po.key_alpha = ka;
        po.value_alpha = va;
        auto scheme = MakePredictiveCodingScheme(po);
        KVSTREAM_RETURN_IF_ERROR(measure(*scheme, -1));
      }
      continue;
    }
    KvBasisOptions bo;
    bo.head_dim = config.head_dim;
    bo.rope_theta = config.rope_theta;
    bo.rope_layout = config.rope_layout;
    if (variant == "pca-head+derot") {
      bo.block = config.head_dim;
    } else if (variant == "derot") {
      bo.pca[0] = bo.pca[1] = false;
    } else if (variant == "pca") {
      bo.derotate_keys = false;
    } else if (variant == "pca-values") {
      bo.derotate_keys = false;
      bo.pca[0] = false;
    } else if (variant != "pca+derot") {
      return Status::InvalidArgument("--variants: unknown variant '" + variant + "' (pca+derot, pca-head+derot, derot, pca, pca-values)");
    }
    KVSTREAM_ASSIGN_OR_RETURN(KvBasis basis, LearnKvBasis(cal, bo));
    std::fprintf(stderr, "rd: basis %s learned, max |B B^T - I| = %.2g\n", variant.c_str(), basis.max_orthogonality_error);
    for (auto [ka, va] : alphas) {
      TransformCodingOptions o;
      o.key_alpha = ka;
      o.value_alpha = va;
      o.label = variant + "+sink";
      // Fraction of components above the water level step^2 / 12 (the rest are dropped).
      double kept = 0;
      for (int kv = 0; kv < 2; ++kv) {
        for (int l = 0; l < basis.layers; ++l) {
          const double step = (kv == 0 ? ka : va) * basis.stored_rms[kv][static_cast<size_t>(l)];
          for (int j = 0; j < basis.channels; ++j) {
            kept += basis.variance[kv][static_cast<size_t>(l) * basis.channels + j] > step * step / 12 ? 1 : 0;
          }
        }
      }
      auto scheme = MakeTransformCodingScheme(o, basis);
      KVSTREAM_RETURN_IF_ERROR(measure(*scheme, kept / (2.0 * basis.layers * basis.channels)));
    }
  }
  return Status::Ok();
}

Status Run(const Flags& f) {
  KVSTREAM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Load(f.values.at("model")));
  const ModelConfig& config = model->config();
  KVSTREAM_ASSIGN_OR_RETURN(std::string text, ReadTextFile(f.values.at("text")));
  const std::vector<int> all = model->tokenizer().Encode(text, true);
  const int ctx = f.Int("context-tokens"), ev = f.Int("eval-tokens");
  const int cal_off = f.Int("cal-offset"), cal_n = f.Int("cal-tokens");
  if (cal_off < ctx + ev + 1 || static_cast<size_t>(cal_off + cal_n) > all.size()) {
    return Status::InvalidArgument("text has " + std::to_string(all.size()) + " tokens; need the calibration slice [" +
                                   std::to_string(cal_off) + ", " + std::to_string(cal_off + cal_n) +
                                   ") after context + eval + 1 = " + std::to_string(ctx + ev + 1));
  }
  QualityOptions qo;
  qo.context_tokens = ctx;
  qo.eval_tokens = ev;
  KVSTREAM_ASSIGN_OR_RETURN(QualityMeter meter,
                            QualityMeter::Create(*model, std::vector<int>(all.begin(), all.begin() + ctx + ev + 1), qo));

  std::vector<int> cal_tokens = {all[0]};
  cal_tokens.insert(cal_tokens.end(), all.begin() + cal_off, all.begin() + cal_off + cal_n);
  KvCache cal = KvCache::Allocate(config, static_cast<int>(cal_tokens.size()));
  KVSTREAM_RETURN_IF_ERROR(model->Forward(cal_tokens, cal, nullptr));
  std::fprintf(stderr, "rd: %s, %d layers x %d channels, text %zu tokens, context %d, eval %d, calibration %d\n",
               config.name.c_str(), config.n_layers, config.kv_dim(), all.size(), ctx, ev, cal.tokens);

  const int L = config.n_layers;
  const bool quick = f.values.at("sweep") == "quick";
  // "extra": only the recent-window variants, on top of the sensitivity weights (cached in --sensitivity).
  const bool extra = f.values.at("sweep") == "extra";
  if (f.values.at("sweep") == "transform") return SweepTransform(f, config, meter, cal);
  if (f.values.at("sweep") == "sinks") {  // more sink positions, and the finest ladder step
    KVSTREAM_RETURN_IF_ERROR(SweepSinks(meter, cal));
    return Status::Ok();
  }

  // Reference points: int8 and cachegen-ref (released layout, per-chunk tables).
  if (!extra) {
    auto int8 = bench::MakeInt8Codec();
    KVSTREAM_ASSIGN_OR_RETURN(QualityReport q, MeasureCodec(meter, *int8, f.Int("chunk-tokens")));
    PrintRow("int8", "per-token fp16 scale", q.bits_per_value, nullptr, q);
    for (int level = 1; level <= bench::kCacheGenRefLevels; ++level) {
      KVSTREAM_ASSIGN_OR_RETURN(auto cg, bench::CacheGenRefCodec::Create(level, L));
      KVSTREAM_ASSIGN_OR_RETURN(QualityReport qc, MeasureCodec(meter, *cg, f.Int("chunk-tokens")));
      PrintRow("cachegen-ref", "L" + std::to_string(level) + " per-chunk CDFs", qc.bits_per_value, nullptr, qc);
    }
  }

  auto measure = [&](RdScheme& scheme) -> Status {
    KVSTREAM_RETURN_IF_ERROR(scheme.Calibrate(cal));
    KVSTREAM_ASSIGN_OR_RETURN(RdTables tables, RdTables::Learn(scheme, cal));
    RdTransform t(scheme, tables);
    KVSTREAM_ASSIGN_OR_RETURN(QualityReport q, MeasureTransform(meter, t));
    PrintRow(scheme.name(), scheme.params(), q.bits_per_value, &t.last_rate(), q);
    return Status::Ok();
  };

  // CacheGen's quantiser with profile tables instead of per-chunk CDFs.
  for (int level = 1; level <= (quick ? 1 : 2) && !extra; ++level) {
    KVSTREAM_ASSIGN_OR_RETURN(bench::CacheGenRefConfig c, bench::CacheGenRefConfig::ForLevel(level, L));
    std::vector<int> kb, vb;
    for (int l = 0; l < L; ++l) kb.push_back(c.key_bins(l)), vb.push_back(c.value_bins(l));
    auto s = MakeCacheGenScheme("ladder L" + std::to_string(level), kb, vb);
    KVSTREAM_RETURN_IF_ERROR(measure(*s));
  }
  if (!quick && !extra) {
    auto s = MakeCacheGenScheme("bins=64", std::vector<int>(L, 64), std::vector<int>(L, 64));
    KVSTREAM_RETURN_IF_ERROR(measure(*s));
    for (int bits : {3, 4}) {
      auto k = MakeKiviScheme(bits, 64);
      KVSTREAM_RETURN_IF_ERROR(measure(*k));
    }
  }

  auto sweep = [&](ChannelUniformOptions o, std::vector<double> alphas) -> Status {
    for (double a : alphas) {
      o.key_alpha = o.value_alpha = a;
      auto s = MakeChannelUniformScheme(o);
      KVSTREAM_RETURN_IF_ERROR(measure(*s));
    }
    return Status::Ok();
  };
  ChannelUniformOptions plain;  // exponent 1: step proportional to the channel's std
  plain.sink_tokens = 4;
  plain.label = "channel-uniform+sink";
  ChannelUniformOptions flat = plain;  // exponent 0: one step per (K/V, layer)
  flat.channel_exponent = 0;
  if (!extra) {
    KVSTREAM_RETURN_IF_ERROR(sweep(plain, quick ? std::vector<double>{0.5} : std::vector<double>{0.25, 0.5}));
    KVSTREAM_RETURN_IF_ERROR(sweep(flat, quick ? std::vector<double>{0.25} : std::vector<double>{0.15, 0.25, 0.35}));
  }
  if (!quick && !extra) {
    ChannelUniformOptions no_sink = flat;
    no_sink.sink_tokens = 0;
    no_sink.label = "channel-uniform";
    KVSTREAM_RETURN_IF_ERROR(sweep(no_sink, {0.25}));
    ChannelUniformOptions anchor = flat;
    anchor.anchor_group = 10;
    anchor.label = "channel-uniform+sink+anchor10";
    KVSTREAM_RETURN_IF_ERROR(sweep(anchor, {0.25}));
  }

  // Sensitivity weighting per (K/V, layer): the KL that uniform noise of width S on that layer alone
  // causes, measured with a shorter meter (the weights are relative, so the probe can be cheaper).
  std::vector<double> kl[2];
  const std::string sens_path = f.values.at("sensitivity");
  std::ifstream sens_in(sens_path);
  if (!sens_path.empty() && sens_in) {
    nlohmann::json j = nlohmann::json::parse(sens_in);
    kl[0] = j["kl"][0].get<std::vector<double>>();
    kl[1] = j["kl"][1].get<std::vector<double>>();
  } else {
    QualityOptions po;
    po.context_tokens = std::min(ctx, 1024);
    po.eval_tokens = std::min(ev, 64);
    KVSTREAM_ASSIGN_OR_RETURN(
        QualityMeter probe,
        QualityMeter::Create(*model, std::vector<int>(all.begin(), all.begin() + po.context_tokens + po.eval_tokens + 1), po));
    for (int kv = 0; kv < 2; ++kv) {
      for (int l = 0; l < L; ++l) {
        auto t = MakeLayerNoiseTransform(kv, l, 1.0);
        KVSTREAM_ASSIGN_OR_RETURN(QualityReport q, MeasureTransform(probe, *t));
        kl[kv].push_back(std::max(q.kl_mean, 1e-9));
        std::fprintf(stderr, "rd: sensitivity %s layer %d: kl %.3g\n", kv == 0 ? "K" : "V", l, q.kl_mean);
      }
    }
    if (!sens_path.empty()) {
      std::ofstream out(sens_path);
      out << nlohmann::json{{"probe", "uniform noise of width S on one (K/V, layer); context 1024, eval 64"},
                            {"kl", {kl[0], kl[1]}}}.dump()
          << "\n";
    }
  }
  double log_sum = 0;
  for (int kv = 0; kv < 2; ++kv) for (double k : kl[kv]) log_sum += std::log(k);
  const double geo = std::exp(log_sum / (2.0 * L));
  std::printf("%s\n", nlohmann::json{{"sensitivity_kl", {kl[0], kl[1]}}}.dump().c_str());
  ChannelUniformOptions weighted = flat;
  weighted.label = "weighted+sink";
  for (int kv = 0; kv < 2; ++kv) {
    for (int l = 0; l < L; ++l) weighted.layer_factor[kv].push_back(std::sqrt(geo / kl[kv][static_cast<size_t>(l)]));
  }
  if (extra) {
    // The probe measures a local slope; steps many times coarser than S leave the regime where KL grows
    // with the step squared, so the weights are clamped: [0.1, 1] only refines sensitive layers.
    auto clamped = [&](double lo, double hi, const std::string& label) {
      ChannelUniformOptions o = weighted;
      o.label = label;
      for (int kv = 0; kv < 2; ++kv) {
        for (double& w : o.layer_factor[kv]) w = std::clamp(w, lo, hi);
      }
      return o;
    };
    KVSTREAM_RETURN_IF_ERROR(sweep(flat, {0.25}));
    ChannelUniformOptions refine = clamped(0.1, 1.0, "weighted[0.1,1]+sink");
    KVSTREAM_RETURN_IF_ERROR(sweep(refine, {0.35, 0.5}));
    ChannelUniformOptions recent = refine;
    recent.label = "weighted[0.1,1]+sink+recent128";
    recent.recent_tokens = 128;
    recent.recent_factor = 0.25;
    KVSTREAM_RETURN_IF_ERROR(sweep(recent, {0.5}));
    ChannelUniformOptions mild = clamped(0.1, 2.0, "weighted[0.1,2]+sink");
    KVSTREAM_RETURN_IF_ERROR(sweep(mild, {0.5}));
    return Status::Ok();
  }
  KVSTREAM_RETURN_IF_ERROR(sweep(weighted, quick ? std::vector<double>{0.5} : std::vector<double>{0.25, 0.35, 0.5, 0.7, 1.0}));
  if (!quick) {
    ChannelUniformOptions weighted_std = weighted;
    weighted_std.channel_exponent = 1.0;
    KVSTREAM_RETURN_IF_ERROR(sweep(weighted_std, {0.5}));
  }
  return Status::Ok();
}

}  // namespace
}  // namespace kvstream::lab

int main(int argc, char** argv) {
  auto flags = kvstream::lab::ParseFlags(argc, argv);
  kvstream::Status s = flags.ok() ? kvstream::lab::Run(*flags) : flags.status();
  if (!s.ok()) {
    std::fprintf(stderr, "kvstream_rd_study: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
