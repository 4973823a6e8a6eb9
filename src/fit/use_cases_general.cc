// The general use-case views (use_cases.h): image and video generation, 3D rendering and VFX,
// scientific computing and simulation. Every card of both fleets, fit or not and why, from the
// catalog's published figures ([[card_specs]], tensor throughput, memory) and, for image and
// video generation, the bundled diffusion models sized by the engine (sizing/diffusion.h) at their
// defaults, offload none and with model offload.
//
// Fit and order:
//   image-video  holds at least one bundled model on one card; ordered by how many bundled models
//                it holds, then USD per BF16 TFLOPS-hour (diffusion steps are compute-bound)
//   rendering    has RT cores (the datasheet says how many); ordered by USD per RT TFLOPS-hour
//   science      publishes FP64 of at least kMinScienceFp64Tflops and ECC memory; ordered by USD
//                per FP64 TFLOPS-hour (vector FP64: what stencil, particle and sparse codes use)
// The hourly price is the term's (monthly / 720) for one card, else the spot opening ask; the
// book's live "from $X/h" is applied per request (ApplySpotPrices).
#include <algorithm>
#include <cmath>

#include "core/money.h"
#include "core/strings.h"
#include "fit/report_text.h"
#include "fit/use_cases_internal.h"

namespace gpuhub::fit {
namespace {

// Below this a card's FP64 is a compatibility path, not a simulation engine.
constexpr double kMinScienceFp64Tflops = 1.0;

std::string Tf(std::optional<double> v) {
  return v ? FormatFixed(*v, *v == std::floor(*v) ? 0 : 1) + " TFLOPS" : std::string("not published");
}

std::string ShortId(const std::string& id) {
  const auto slash = id.find('/');
  return slash == std::string::npos ? id : id.substr(slash + 1);
}

std::string Setting(const sizing::DiffusionEstimate& e, const sizing::DiffusionModel& m,
                    sizing::Precision p) {
  std::string s = std::to_string(e.width) + "x" + std::to_string(e.height);
  if (m.task == "video") s += ", " + std::to_string(e.frames) + " frames";
  return s + ", " + std::to_string(e.batch) + (m.task == "video" ? " video" : " image") + ", " +
         std::string(sizing::PrecisionName(p));
}

void Price(UseCaseCard& c, double tflops) {
  c.value_tflops = tflops;
  if (c.hourly_micros > 0 && tflops > 0) {
    c.usd_per_tflops_hour = catalog::MicrosToUsd(c.hourly_micros) / tflops;
  }
}

Status DescribeImageVideo(UseCaseCard& c, const std::vector<sizing::DiffusionModel>& models) {
  const double vram = c.vram_gb * sizing::kBytesPerGb;
  std::string holds, offloaded, not_held;
  int held = 0;
  for (const sizing::DiffusionModel& m : models) {
    auto plain = sizing::EstimateDiffusionMemory(m, {});
    sizing::DiffusionWorkload offload;
    offload.offload = sizing::Offload::kModel;
    auto light = sizing::EstimateDiffusionMemory(m, offload);
    if (!plain.ok()) return plain.status();
    if (!light.ok()) return light.status();
    UseCaseCard::DiffusionFit f;
    f.model = m.id;
    f.name = m.names.empty() ? ShortId(m.id) : m.names.front();
    f.setting = Setting(*plain, m, m.denoiser.precision);
    f.card_gb = plain->memory.card_bytes() / sizing::kBytesPerGb;
    f.fits = plain->memory.card_bytes() <= vram;
    f.offloaded_card_gb = light->memory.card_bytes() / sizing::kBytesPerGb;
    f.fits_offloaded = light->memory.card_bytes() <= vram;
    const std::string name = ShortId(m.id) + " " + f.setting;
    if (f.fits) {
      holds += (holds.empty() ? "" : ", ") + name + " (" + FormatFixed(f.card_gb, 1) + " GB)";
    } else if (f.fits_offloaded) {
      offloaded += (offloaded.empty() ? "" : ", ") + name + " (" +
                   FormatFixed(f.offloaded_card_gb, 1) + " GB with model offload, " +
                   FormatFixed(f.card_gb, 1) + " GB without)";
    } else {
      not_held += (not_held.empty() ? "" : ", ") + name + " (" +
                  FormatFixed(f.offloaded_card_gb, 1) + " GB even with model offload)";
    }
    held += f.fits || f.fits_offloaded;
    c.diffusion.push_back(std::move(f));
  }
  c.fit = held > 0 && c.hourly_micros > 0;
  if (held == 0) {
    c.why.push_back("too little memory: " + FormatFixed(c.vram_gb, 0) +
                    " GB holds none of the bundled models at their default sizes");
  }
  std::string memory = "memory: " + FormatFixed(c.vram_gb, 0) + " GB";
  if (!holds.empty()) memory += " holds " + holds;
  if (!offloaded.empty()) memory += (holds.empty() ? " holds " : "; ") + offloaded;
  if (!not_held.empty()) memory += "; not " + not_held;
  c.why.push_back(memory);
  c.why.push_back("tensor throughput: " + Tf(c.bf16_tflops) + " dense BF16 (each denoising step "
                  "is matrix math over every latent token)");
  c.value_metric = "BF16 TFLOPS";
  Price(c, c.bf16_tflops.value_or(0));
  return Status::Ok();
}

void DescribeRendering(UseCaseCard& c) {
  const catalog::GeneralSpecs& g = c.general;
  c.fit = g.rt_cores && *g.rt_cores > 0 && c.hourly_micros > 0;
  if (!g.rt_cores) {
    c.why.push_back("RT cores not published in its datasheet: no hardware ray tracing can be "
                    "counted on");
  } else if (*g.rt_cores == 0) {
    c.why.push_back("no RT cores: a compute card; GPU renderers lose their hardware ray-tracing "
                    "path (OptiX, Vulkan ray tracing, DXR) and it has no display engine for "
                    "viewports");
  } else {
    c.why.push_back("RT cores: " + std::to_string(*g.rt_cores) +
                    (g.rt_tflops ? " (" + Tf(g.rt_tflops) + " on RT cores)" : "") +
                    ": hardware BVH traversal and ray-triangle tests for GPU path tracers");
  }
  c.why.push_back("FP32: " + Tf(g.fp32_tflops) + " for shading, simulation and compositing");
  c.why.push_back("memory: " + FormatFixed(c.vram_gb, 0) + " GB for the scene: GPU renderers "
                  "keep geometry and textures in card memory" +
                  std::string(g.ecc && *g.ecc ? "; ECC" : ""));
  c.value_metric = "RT TFLOPS";
  Price(c, g.rt_tflops.value_or(0));
}

void DescribeScience(UseCaseCard& c) {
  const catalog::GeneralSpecs& g = c.general;
  const bool fp64 = g.fp64_tflops && *g.fp64_tflops >= kMinScienceFp64Tflops;
  const bool ecc = g.ecc && *g.ecc;
  c.fit = fp64 && ecc && c.hourly_micros > 0;
  if (!g.fp64_tflops) {
    c.why.push_back("FP64 not published: NVIDIA's Ada and Ampere workstation and GeForce chips "
                    "run FP64 at 1/64 of their FP32 rate (architecture whitepapers), and "
                    "Blackwell Ultra gave FP64 up for low-precision tensor math");
  } else if (!fp64) {
    c.why.push_back("FP64: " + Tf(g.fp64_tflops) + ", below " +
                    FormatFixed(kMinScienceFp64Tflops, 0) + " TFLOPS");
  } else {
    c.why.push_back("FP64: " + Tf(g.fp64_tflops) + " vector" +
                    (g.fp64_tensor_tflops ? ", " + Tf(g.fp64_tensor_tflops) + " on tensor/matrix units"
                                          : std::string()) +
                    ": double-precision solvers (CFD, FEM, molecular and climate codes)");
  }
  if (!ecc) {
    c.why.push_back(std::string("ECC: ") + (g.ecc ? "no" : "not published") +
                    ": a long simulation wants corrected memory errors");
  } else {
    c.why.push_back("ECC: yes");
  }
  c.why.push_back("FP32: " + Tf(g.fp32_tflops) + " (single-precision codes such as GROMACS or "
                  "AMBER run well on FP32 cards); memory " + FormatFixed(c.vram_gb, 0) + " GB at " +
                  (c.bandwidth_gb_per_s ? FormatFixed(*c.bandwidth_gb_per_s, 0) + " GB/s"
                                        : std::string("a bandwidth not published")));
  c.value_metric = "FP64 TFLOPS";
  Price(c, fp64 ? *g.fp64_tflops : 0);
}

}  // namespace

Result<UseCaseView> BuildGeneralUseCase(const catalog::Catalog& catalog,
                                        const std::vector<sizing::DiffusionModel>& diffusion,
                                        UseCase use) {
  UseCaseView view;
  view.use = use;
  switch (use) {
    case UseCase::kImageVideo:
      if (diffusion.empty()) {
        return Status::InvalidArgument("the bundled diffusion models (data/diffusion/) are missing");
      }
      view.title = "image and video generation";
      view.summary =
          "A diffusion pipeline holds its text encoders, its denoiser and its VAE, and the peak is "
          "often the VAE turning latents into pixels: memory decides which models and sizes run; "
          "dense tensor throughput decides how fast each denoising step goes.";
      view.reference = "the bundled diffusion models at their default sizes, one image or video, "
                       "offload none and with model offload (gpuhub size --model sdxl --explain)";
      break;
    case UseCase::kRendering:
      view.title = "3D rendering and VFX";
      view.summary =
          "GPU path tracers (Blender Cycles, V-Ray, Arnold, Redshift, Octane) trace rays on RT "
          "cores and shade on the FP32 units, with the whole scene in card memory: RT cores, "
          "FP32 throughput and memory decide.";
      view.reference = "RT core TFLOPS as published; price per RT TFLOPS-hour";
      break;
    case UseCase::kScience:
      view.title = "scientific computing and simulation";
      view.summary =
          "Solvers that need double precision (CFD, FEM, quantum chemistry, climate) run on "
          "FP64 units with ECC memory; data-center cards publish both, workstation and GeForce "
          "cards do not publish FP64 at all.";
      view.reference = "FP64 vector TFLOPS as published; price per FP64 TFLOPS-hour";
      break;
    default:
      return Status::InvalidArgument("not a general use case");
  }
  for (const Card& card : Cards(catalog)) {
    UseCaseCard c = CardBasics(card);
    c.interconnect = card.term != nullptr ? card.term->link : "not published";
    c.hourly_micros = SetHourlyMicros(catalog, card, 1);
    if (use == UseCase::kImageVideo) {
      GPUHUB_RETURN_IF_ERROR(DescribeImageVideo(c, diffusion));
    } else if (use == UseCase::kRendering) {
      DescribeRendering(c);
    } else {
      DescribeScience(c);
    }
    if (c.hourly_micros == 0) c.why.insert(c.why.begin(), "no price for one card is published");
    if (!c.general.source.empty()) c.why.push_back("source: " + c.general.source);
    view.cards.push_back(std::move(c));
  }
  const auto held = [](const UseCaseCard& c) {
    return std::count_if(c.diffusion.begin(), c.diffusion.end(),
                         [](const auto& f) { return f.fits || f.fits_offloaded; });
  };
  std::stable_sort(view.cards.begin(), view.cards.end(),
                   [&](const UseCaseCard& a, const UseCaseCard& b) {
                     if (a.fit != b.fit) return a.fit;
                     if (!a.fit) return false;
                     if (held(a) != held(b)) return held(a) > held(b);
                     const bool pa = a.usd_per_tflops_hour > 0, pb = b.usd_per_tflops_hour > 0;
                     if (pa != pb) return pa;
                     return a.usd_per_tflops_hour < b.usd_per_tflops_hour;
                   });
  view.notes.push_back("figures from each card's datasheet (data/catalog.toml [[card_specs]], with "
                       "its URL); \"not published\" where the datasheet does not give one");
  view.notes.push_back("price per TFLOPS-hour at one card's hourly price: the term's monthly / "
                       "720, else the spot exchange's opening ask; \"spot from\" is the book's "
                       "best ask now");
  if (use == UseCase::kImageVideo) {
    view.notes.push_back("model offload: diffusers enable_model_cpu_offload (only the running "
                         "stage's model on the GPU); sizes and formulas: gpuhub size --model "
                         "flux-dev --explain, docs/sizing-model.md \"Diffusion\"");
  }
  return view;
}

std::string GeneralUseCaseText(const UseCaseView& v) {
  using A = TextTable::Align;
  std::string out = v.title + " (gpuhub catalog --use " + std::string(UseCaseName(v.use)) + ")\n";
  out += v.summary + "\nreference: " + v.reference + "\n\n";
  std::vector<std::string> header = {"card", "fit", "VRAM GB", "FP32", "FP64", "ECC", "RT cores"};
  std::vector<A> align = {A::kLeft, A::kLeft, A::kRight, A::kRight, A::kRight, A::kLeft, A::kRight};
  const bool image = v.use == UseCase::kImageVideo;
  if (image && !v.cards.empty()) {
    for (const auto& f : v.cards.front().diffusion) {
      header.push_back(f.name);
      align.push_back(A::kLeft);
    }
  }
  for (const char* h : {"$/hour", "$/TFLOPS-h", "spot from", "monthly"}) {
    header.push_back(h);
    align.push_back(A::kRight);
  }
  TextTable t(header, align);
  auto num = [](std::optional<double> x) { return x ? FormatFixed(*x, 1) : std::string("-"); };
  for (const UseCaseCard& c : v.cards) {
    const catalog::GeneralSpecs& g = c.general;
    std::vector<std::string> row = {
        c.name, c.fit ? "yes" : "no", FormatFixed(c.vram_gb, 0), num(g.fp32_tflops),
        num(g.fp64_tflops), g.ecc ? (*g.ecc ? "yes" : "no") : "-",
        g.rt_cores ? std::to_string(*g.rt_cores) : "-"};
    for (const auto& f : c.diffusion) {
      row.push_back(f.fits ? "yes" : f.fits_offloaded ? "offload" : "no");
    }
    row.push_back(c.hourly_micros > 0 ? "$" + FormatMicros(c.hourly_micros, 3) : "");
    row.push_back(c.usd_per_tflops_hour > 0 ? FormatFixed(c.usd_per_tflops_hour, 4) : "");
    AppendPriceCells(c, row);
    t.AddRow(row);
  }
  return out + t.Render() + WhyAndNotes(v);
}

}  // namespace gpuhub::fit
