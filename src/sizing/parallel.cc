#include "sizing/parallel.h"

#include <algorithm>

#include "sizing/limits.h"

namespace gpuhub::sizing {

bool NamesLayout(const Workload& w) {
  return w.data_parallel > 0 || w.tensor_parallel > 1 || w.pipeline_parallel > 1 ||
         w.context_parallel > 1;
}

Layout LayoutOf(const Workload& w) {
  Layout l;
  l.zero_stage = w.zero_stage;
  const bool full = w.method == Method::kFullFineTune;
  const bool adapters = w.method == Method::kLora || w.method == Method::kQlora;
  if (!NamesLayout(w)) {
    if (full || (adapters && w.zero_stage == 3)) {
      l.data = w.gpus;
    } else {
      l.pipeline = w.gpus;
      l.layer_split = w.gpus > 1;
    }
  } else {
    l.tensor = std::max(1, w.tensor_parallel);
    l.pipeline = std::max(1, w.pipeline_parallel);
    l.context = std::max(1, w.context_parallel);
    l.virtual_stages = std::max(1, w.virtual_pipeline);
    const int shards = l.tensor * l.pipeline * l.context;
    l.data = w.data_parallel > 0 ? w.data_parallel : std::max(1, w.gpus / shards);
  }
  // FSDP of the frozen base needs something to shard over, or host memory to shard into.
  l.fsdp_base = adapters && w.zero_stage == 3 && (l.zero_group() > 1 || w.offload_params);
  return l;
}

Status ValidateLayout(const Workload& w) {
  auto bad = [](std::string m, std::string field) {
    return Status::InvalidArgument(std::move(m)).WithField(std::move(field));
  };
  struct Degree {
    int value;
    const char* name;
    const char* field;
  };
  for (const Degree& d : {Degree{w.tensor_parallel, "tensor parallel", "tp"},
                          Degree{w.pipeline_parallel, "pipeline parallel", "pp"},
                          Degree{w.context_parallel, "context parallel", "cp"},
                          Degree{w.virtual_pipeline, "virtual pipeline stages", "vp"}}) {
    if (d.value < 1 || d.value > kMaxGpus) {
      return bad(std::string(d.name) + " must be between 1 and " + std::to_string(kMaxGpus) +
                     ", got " + std::to_string(d.value),
                 d.field);
    }
  }
  if (w.data_parallel < 0 || w.data_parallel > kMaxGpus) {
    return bad("data parallel must be between 1 and " + std::to_string(kMaxGpus) + ", got " +
                   std::to_string(w.data_parallel),
               "dp");
  }
  if (w.virtual_pipeline > 1 && w.pipeline_parallel < 2) {
    return bad("virtual pipeline stages interleave pipeline stages: give --pp 2 or more", "vp");
  }
  if (w.context_parallel > 1 && w.method == Method::kInference) {
    return bad("context parallel splits a training sequence; serving splits with --tp or --pp",
               "cp");
  }
  if (!NamesLayout(w)) return Status::Ok();
  const long long shards =
      static_cast<long long>(w.tensor_parallel) * w.pipeline_parallel * w.context_parallel;
  const long long data = w.data_parallel > 0 ? w.data_parallel : w.gpus / shards;
  if (shards > w.gpus || data * shards != w.gpus) {
    const std::string product =
        "tp " + std::to_string(w.tensor_parallel) + " x pp " + std::to_string(w.pipeline_parallel) +
        " x cp " + std::to_string(w.context_parallel) +
        (w.data_parallel > 0 ? " x dp " + std::to_string(w.data_parallel) : "");
    return bad("the layout must use every GPU: " + product + " does not make " +
                   std::to_string(w.gpus) + " GPUs" +
                   (w.data_parallel > 0 ? "" : " (gpus must be a multiple of tp x pp x cp)"),
               "gpus");
  }
  return Status::Ok();
}

Status ValidateLayoutForModel(const ModelShape& m, const Workload& w) {
  if (m.heads > 0 && w.tensor_parallel > 1 && m.heads % w.tensor_parallel != 0) {
    return Status::InvalidArgument("tensor parallel " + std::to_string(w.tensor_parallel) +
                                   " does not divide the model's " + std::to_string(m.heads) +
                                   " attention heads")
        .WithField("tp");
  }
  if (m.layers > 0 && w.pipeline_parallel * w.virtual_pipeline > m.layers) {
    return Status::InvalidArgument(
               "pipeline parallel " + std::to_string(w.pipeline_parallel) +
               (w.virtual_pipeline > 1 ? " x virtual " + std::to_string(w.virtual_pipeline)
                                       : std::string()) +
               " stages are more than the model's " + std::to_string(m.layers) + " layers")
        .WithField("pp");
  }
  return Status::Ok();
}

std::string LayoutName(const Layout& l, Method method) {
  if (l.single()) return "single";
  if (l.layer_split) return "layers split over " + std::to_string(l.pipeline);
  std::string out;
  auto add = [&](const char* name, int degree) {
    if (degree <= 1) return;
    out += (out.empty() ? "" : " x ") + std::string(name) + " " + std::to_string(degree);
  };
  add("tp", l.tensor);
  add("pp", l.pipeline);
  add("cp", l.context);
  add("dp", l.data);
  if (l.virtual_stages > 1) out += " (" + std::to_string(l.virtual_stages) + " virtual stages)";
  if (l.data > 1 && method == Method::kFullFineTune) {
    out += " (ZeRO-" + std::to_string(l.zero_stage) + ")";
  } else if (l.fsdp_base) {
    out += " (FSDP)";
  }
  return out.empty() ? "single" : out;
}

int MicroBatchesInFlight(const Layout& l, int micro_batches) {
  if (l.layer_split || l.pipeline <= 1) return 1;
  return std::max(1, std::min(l.pipeline, micro_batches));
}

}  // namespace gpuhub::sizing
