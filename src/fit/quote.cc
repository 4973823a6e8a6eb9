#include "fit/quote.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/money.h"
#include "core/strings.h"
#include "fit/fit.h"
#include "fit/json_parts.h"
#include "fit/limits.h"
#include "fit/plan.h"
#include "fit/report_json.h"
#include "fit/request.h"
#include "sizing/estimate.h"

namespace gpuhub::fit {
namespace {

using namespace json_parts;  // NOLINT: the shared pieces of every report

Status Bad(std::string message, std::string field) {
  return Status::InvalidArgument(std::move(message)).WithField(std::move(field));
}

// "7,452" (thousands separators, whole GB) for the one-line summary.
std::string WholeGb(double bytes) {
  std::string digits = FormatFixed(std::round(bytes / sizing::kBytesPerGb), 0);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

bool PlanFieldGiven(const RequestFields& f) {
  return f.tokens || f.samples || f.epochs || f.tokens_per_day || f.prompt_tokens ||
         f.output_tokens || f.days || f.utilisation || f.bandwidth_efficiency || f.start;
}

// Every card of the term fleet that rents sets of 8 (and, for full fine-tuning, shards across
// them), with the nodes that hold `required`, cheapest first.
std::vector<NodeOption> NodeOptions(const catalog::Catalog& catalog, double required,
                                    sizing::Method method) {
  std::vector<NodeOption> out;
  for (const catalog::TermGpu& g : catalog.term) {
    if (!g.AllowsCount(kCardsPerNode)) continue;
    if (method == sizing::Method::kFullFineTune &&
        !catalog::AllowsShardedTraining(g.sharded_training, kCardsPerNode)) {
      continue;
    }
    auto set = catalog::SetPriceMicros(catalog, g, kCardsPerNode, catalog::Term::kMonthly);
    if (!set.ok()) continue;
    NodeOption o;
    o.gpu = g.name;
    o.vram_bytes_per_node = kCardsPerNode * g.vram_gb * sizing::kBytesPerGb;
    const double ratio = required / o.vram_bytes_per_node;
    o.nodes = std::max(1, static_cast<int>(std::ceil(ratio)));
    o.cards = o.nodes * kCardsPerNode;
    o.per_card_bytes = required / o.cards;
    o.monthly_micros_per_node = *set;
    o.monthly_micros = *set * o.nodes;
    o.formula = sizing::FormatGb(required) + " / (8 x " + FormatFixed(g.vram_gb, 0) +
                " GB) = " + FormatFixed(ratio, 2) + " -> " + std::to_string(o.nodes) +
                (o.nodes == 1 ? " node" : " nodes") + "; " + std::to_string(o.nodes) +
                " x $" + catalog::FormatUsd(*set) + "/month (8-card set, list) = $" +
                catalog::FormatUsd(o.monthly_micros) + "/month";
    out.push_back(std::move(o));
  }
  std::stable_sort(out.begin(), out.end(), [](const NodeOption& a, const NodeOption& b) {
    if (a.monthly_micros != b.monthly_micros) return a.monthly_micros < b.monthly_micros;
    return a.nodes < b.nodes;
  });
  return out;
}

Json NodeJson(const NodeOption& o) {
  return {{"gpu", o.gpu},
          {"nodes", o.nodes},
          {"cards", o.cards},
          {"configuration", std::to_string(o.nodes) + " x " +
                                ConfigurationName(o.gpu, kCardsPerNode)},
          {"vram_gb", Gb(o.vram_bytes_per_node * o.nodes)},
          {"per_card_gb", Gb(o.per_card_bytes)},
          {"monthly_usd_per_node", Usd(o.monthly_micros_per_node)},
          {"monthly_usd", Usd(o.monthly_micros)},
          {"exact",
           {{"monthly_usd_per_node", Exact(o.monthly_micros_per_node)},
            {"monthly_usd", Exact(o.monthly_micros)}}},
          {"formula", o.formula}};
}

}  // namespace

Result<QuoteJob> ResolveQuoteJob(std::string_view body, const std::string& data_dir,
                                 const catalog::Catalog& catalog, TimestampMicros now) {
  GPUHUB_ASSIGN_OR_RETURN(RequestFields fields, ParseRequestJson(body, RequestKind::kPlan));
  if (fields.config_json) {
    return Bad("a quote request names a preset or a bundled model (gpuhub models); size a pasted "
               "config.json with POST /v1/size",
               "config");
  }
  if (!fields.model) return Bad("model is required (a preset or a bundled model id)", "model");
  const RequestContext context{data_dir, false};
  sizing::ModelShape model;
  sizing::Workload workload;
  std::vector<std::string> notes;
  if (PlanFieldGiven(fields)) {
    // The plan's own checks (tokens or samples, the serving fields...), errors naming the field.
    GPUHUB_ASSIGN_OR_RETURN(PlanRequest plan, ResolvePlanRequest(fields, context, catalog, now));
    model = std::move(plan.fit.model);
    workload = plan.fit.workload;
    notes = std::move(plan.fit.notes);
  } else {
    GPUHUB_ASSIGN_OR_RETURN(FitRequest fit, ResolveFitRequest(fields, context, catalog));
    model = std::move(fit.model);
    workload = fit.workload;
    notes = std::move(fit.notes);
  }
  workload.gpus = 1;  // the whole job: the nodes divide it
  GPUHUB_ASSIGN_OR_RETURN(sizing::MemoryEstimate estimate, sizing::EstimateMemory(model, workload));

  QuoteJob job;
  job.model = model.id;
  job.workload = std::string(sizing::MethodName(workload.method));
  job.required_bytes = estimate.card_bytes();
  job.nodes = NodeOptions(catalog, job.required_bytes, workload.method);
  job.fits_one_node = !job.nodes.empty() && job.nodes.front().nodes == 1;

  // The job as sent, keys sorted (nlohmann::json orders them), without whitespace.
  job.job_json = nlohmann::json::parse(body).dump();
  if (job.job_json.size() > kMaxQuoteJobJsonBytes) {
    return Bad("the job is over " + std::to_string(kMaxQuoteJobJsonBytes) + " bytes", "job");
  }

  SizeRequest size;
  size.model = model;
  size.workload = workload;
  size.explain = true;
  size.notes = notes;
  Json sizing;
  sizing["recomputed_by"] = "server";
  sizing["computed_at"] = FormatTimestamp(now);
  sizing["required_gb"] = Gb(job.required_bytes);
  sizing["required_bytes"] = job.required_bytes;
  sizing["cards_per_node"] = kCardsPerNode;
  Json nodes = Json::array();
  for (const NodeOption& o : job.nodes) nodes.push_back(NodeJson(o));
  sizing["nodes"] = std::move(nodes);
  sizing["rule"] =
      "nodes = ceil(required / (8 x VRAM)): the job's memory divided evenly over 8-card nodes of "
      "the term fleet (full fine-tuning: cards that shard 8 ways); price = nodes x the 8-card "
      "set's monthly list price, the figure a quote starts from";
  sizing["size"] = Json::parse(SizeReportJson(size, estimate));

  std::string text = model.id + " " + job.workload + ": " + WholeGb(job.required_bytes) + " GB";
  if (job.nodes.empty()) {
    text += "; no card of the fleet rents 8-card nodes for it";
  } else {
    const NodeOption& best = job.nodes.front();
    text += "; " + std::to_string(best.nodes) + (best.nodes == 1 ? " node" : " nodes") +
            " of 8x " + best.gpu + " (" + WholeGb(best.vram_bytes_per_node * best.nodes) +
            " GB)";
  }
  job.summary = std::move(text);
  job.sizing_json = sizing.dump();
  return job;
}

}  // namespace gpuhub::fit
