// A multi-node quote request's job, recomputed by the server (POST /v1/quote-requests,
// `gpuhub quote-request create`). The fleet rents nodes of at most 8 cards; a job that needs more
// (the guide's 405B full fine-tune: 7,452 GB) gets the arithmetic of how many 8-card nodes of each
// card would hold it, and goes to the operators for a price.
//
// The job is what the plan takes (report_json.h's request fields: model, workload, precision,
// context, batch, seq, tokens, epochs, tokens_per_day...), validated the same way (errors name the
// field). A pasted "config" is refused here: a quote names a preset or a bundled model, so the
// stored job stays small and anyone can recompute it.
//
// What is kept is the server's own recomputation, never the figures the customer's page showed:
//   required = sizing::EstimateMemory(model, workload on one card).card_bytes()  (the whole job)
//   nodes    = ceil(required / (8 x VRAM)) for every card of the term fleet rented in sets of 8
//              (full fine-tuning: only cards whose link shards 8 ways, as fit's rule); the
//              state divided evenly over the cards: what each card holds besides its share
//              (activations, the CUDA context) is for the operators' answer
//   price    = nodes x the 8-card set's monthly list price (multi-card discount included): the
//              list figure a quote starts from, not the quote
// Pure (the time is an argument); thread-safe for a const Catalog.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "catalog/catalog.h"
#include "core/clock.h"
#include "core/status.h"

namespace gpuhub::fit {

inline constexpr int kCardsPerNode = 8;

struct NodeOption {
  std::string gpu;
  int nodes = 0;
  int cards = 0;                         // nodes x 8
  double vram_bytes_per_node = 0;        // 8 x VRAM
  double per_card_bytes = 0;             // required / cards
  std::int64_t monthly_micros_per_node = 0;  // the 8-card set's monthly list price
  std::int64_t monthly_micros = 0;           // x nodes
  std::string formula;  // "7,452.00 GB / (8 x 192 GB) = 4.85 -> 5 nodes"
};

struct QuoteJob {
  std::string model;     // as the sizing names it ("405b", "meta-llama/Llama-3.1-405B")
  std::string workload;  // "full", "lora", "qlora", "infer"
  double required_bytes = 0;
  std::vector<NodeOption> nodes;  // cheapest first
  bool fits_one_node = false;     // the cheapest option needs a single node
  std::string summary;            // "405b full: 7,452 GB; 5 nodes of 8x MI300X (7,680 GB)"
  std::string job_json;           // the job's fields as sent (a JSON object, keys sorted)
  std::string sizing_json;        // {"recomputed_by": "server", "required_gb", "size", "nodes"...}
};

// `body`: the job's JSON object (the request without "contact" and "note"). invalid_argument
// naming the field, not_found for an unknown model (as POST /v1/plan answers).
Result<QuoteJob> ResolveQuoteJob(std::string_view body, const std::string& data_dir,
                                 const catalog::Catalog& catalog, TimestampMicros now);

}  // namespace gpuhub::fit
