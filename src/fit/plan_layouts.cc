#include "fit/plan_layouts.h"

#include <algorithm>
#include <tuple>

#include "fit/rates.h"
#include "sizing/parallel.h"

namespace gpuhub::fit {

using sizing::Method;
using sizing::Workload;

namespace {

// A sequence this long or longer makes context parallelism worth trying (attention grows with
// its square; below it the ring exchange costs more than it saves).
constexpr std::int64_t kContextParallelFromTokens = 16384;

struct Degrees {
  int tp = 1, pp = 1, cp = 1, dp = 1, zero = 0;
  bool layer_split = false;
};

}  // namespace

std::vector<Workload> CandidateLayouts(const Workload& base, const sizing::ModelShape& model,
                                       int count, const LayoutAsk& ask, const LayoutLimits& limits,
                                       std::string* why_none) {
  const Method m = base.method;
  const bool serving = m == Method::kInference;
  const bool full = m == Method::kFullFineTune;
  const bool training = !serving;
  std::vector<Degrees> degrees;

  if (count == 1) {
    degrees.push_back({});
  } else if (ask.NamesDegrees()) {
    Degrees d;
    d.tp = ask.tp.value_or(1);
    d.pp = ask.pp.value_or(1);
    d.cp = ask.cp.value_or(1);
    const int shards = d.tp * d.pp * d.cp;
    d.dp = ask.dp.value_or(shards > 0 ? count / shards : 0);
    if (shards <= 0 || d.dp * shards != count) {
      if (why_none != nullptr) {
        *why_none = "tp x pp x cp x dp does not make " + std::to_string(count) + " GPUs";
      }
      return {};
    }
    std::vector<int> zeros;
    if (ask.zero) {
      zeros.push_back(*ask.zero);
    } else if (training && d.dp > 1) {
      zeros = full ? std::vector<int>{1, 3} : std::vector<int>{0, 3};
    } else {
      zeros.push_back(0);
    }
    for (int z : zeros) {
      Degrees x = d;
      x.zero = z;
      degrees.push_back(x);
    }
  } else {
    // Tensor parallel stays inside a node and must divide the heads.
    std::vector<int> tps;
    for (int t : {1, 2, 4, 8}) {
      if (t > count || t > kGpusPerNode || count % t != 0) continue;
      if (t > 1 && (model.heads <= 0 || model.heads % t != 0)) continue;
      tps.push_back(t);
    }
    std::vector<int> pps{1};
    for (int p : {2, 4, 8, 16, 32}) {
      if (p <= count && count % p == 0 && (model.layers <= 0 || p <= model.layers)) {
        pps.push_back(p);
      }
    }
    std::vector<int> cps{1};
    if (training && base.sequence_tokens >= kContextParallelFromTokens) {
      for (int c : {2, 4, 8}) {
        if (c <= count && count % c == 0) cps.push_back(c);
      }
    }
    auto zeros_for = [&](int dp) -> std::vector<int> {
      if (ask.zero) return {*ask.zero};
      if (!training || dp <= 1) return {0};
      return full ? std::vector<int>{1, 3} : std::vector<int>{0, 3};
    };
    if (full && !limits.full_sharding) {
      // The catalog says these cards do not shard a full fine-tune: plain replicas only, over a
      // published link.
      if (limits.link_known) degrees.push_back({1, 1, 1, count, 0, false});
    } else {
      const bool engine_splits_tensors = !serving || sizing::TraitsOf(base.engine).pipelines_stages;
      for (int t : tps) {
        if (t > 1 && !engine_splits_tensors) continue;
        for (int p : pps) {
          // Serving pipelines across nodes only (tensor parallel is faster inside one).
          if (serving && p > 1 && (count <= kGpusPerNode || t * p != count)) continue;
          // Training: pipeline stages with tensor parallel inside a node, or alone.
          for (int c : cps) {
            const long long shards = static_cast<long long>(t) * p * c;
            if (shards > count || count % shards != 0) continue;
            const int dp = static_cast<int>(count / shards);
            for (int z : zeros_for(dp)) degrees.push_back({t, p, c, dp, z, false});
          }
        }
      }
      // LoRA, QLoRA and serving may also split the layers over the cards, one after another
      // (Hugging Face device_map, llama.cpp): never faster, sometimes the only way to fit.
      if (!full) degrees.push_back({1, count, 1, 1, 0, true});
    }
  }

  std::vector<Workload> out;
  for (const Degrees& d : degrees) {
    Workload w = base;
    w.gpus = count;
    w.zero_stage = d.zero;
    w.data_parallel = 0;
    w.tensor_parallel = w.pipeline_parallel = w.context_parallel = w.virtual_pipeline = 1;
    if (d.layer_split || count == 1) {
      // The legacy meaning of `gpus`: layers split (LoRA/QLoRA with zero 0, serving).
    } else {
      w.tensor_parallel = d.tp;
      w.pipeline_parallel = d.pp;
      w.context_parallel = d.cp;
      w.data_parallel = d.dp;
      if (d.pp > 1 && ask.vp) w.virtual_pipeline = *ask.vp;
    }
    // Parameter offload needs ZeRO-3/FSDP on any count (OnCards' rule).
    if (training && w.offload_params) w.zero_stage = 3;
    if (!sizing::ValidateWorkload(w).ok()) continue;
    if (!sizing::ValidateLayoutForModel(model, w).ok()) continue;
    out.push_back(std::move(w));
  }
  // Preferred when equally fast: fewer model shards, lighter ZeRO, a layer split last.
  std::stable_sort(out.begin(), out.end(), [](const Workload& a, const Workload& b) {
    const sizing::Layout la = sizing::LayoutOf(a), lb = sizing::LayoutOf(b);
    return std::make_tuple(la.layer_split, la.tensor * la.pipeline * la.context, la.zero_stage) <
           std::make_tuple(lb.layer_split, lb.tensor * lb.pipeline * lb.context, lb.zero_stage);
  });
  if (out.empty() && why_none != nullptr && why_none->empty()) {
    *why_none = full && !limits.full_sharding
                    ? "full fine-tuning does not shard across these cards (the catalog's "
                      "sharded-training limit) and their link is not published"
                    : "no layout of " + std::to_string(count) + " cards suits this model";
  }
  return out;
}

}  // namespace gpuhub::fit
