// The layouts plan tries for a set of cards (plan.h): which ways of sharing a job over `count`
// cards are worth sizing and timing. The plan sizes each (sizing::EstimateMemory, the same
// sharding the throughput uses), times those that fit (fit/rates.h) and keeps the fastest,
// saying which it chose and why the others lost. Pure.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sizing/estimate.h"
#include "sizing/model.h"

namespace gpuhub::fit {

// The parts of a layout the request fixes; the rest are searched.
struct LayoutAsk {
  std::optional<int> gpus, tp, pp, cp, dp, vp, zero;
  bool NamesDegrees() const { return tp || pp || cp || dp || vp; }
};

// What the card allows: ZeRO/tensor sharding of full fine-tuning across `count` of them (the
// catalog's sharded-training limit), and whether the serving engine splits layers by tensor.
struct LayoutLimits {
  bool full_sharding = true;  // full fine-tuning may shard (ZeRO 1-3, tensor, pipeline)
  bool link_known = true;     // the link between the cards is published (data parallel needs it)
};

// Candidate workloads (base with gpus = count and a layout) in the order plan prefers them when
// they run equally fast: fewer model-parallel shards first, lighter ZeRO stages first. Each is
// valid for sizing::ValidateWorkload and for the model's heads and layers. Empty with
// `why_none` set when no layout of `count` cards can run the job (e.g. full fine-tuning on
// cards that cannot shard, with a job one card cannot hold).
std::vector<sizing::Workload> CandidateLayouts(const sizing::Workload& base,
                                               const sizing::ModelShape& model, int count,
                                               const LayoutAsk& ask, const LayoutLimits& limits,
                                               std::string* why_none);

}  // namespace gpuhub::fit
