// [[card_specs]] (catalog.h GeneralSpecs): every card of both fleets has its datasheet figures,
// a spot card takes its term card's, and a bad entry is refused naming its line and field.
#include <gtest/gtest.h>

#include <string>

#include "catalog/catalog.h"
#include "core/file.h"

namespace gpuhub::catalog {
namespace {

const std::string kPath = std::string(GPUHUB_SOURCE_DIR) + "/data/catalog.toml";

Result<Catalog> WithExtra(const std::string& extra) {
  auto text = ReadFile(kPath);
  EXPECT_TRUE(text.ok());
  return ParseCatalog(*text + "\n" + extra, "catalog.toml");
}

TEST(CardSpecs, EveryCardHasItsDatasheetFigures) {
  auto c = LoadCatalog(kPath);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  for (const TermGpu& g : c->term) {
    EXPECT_TRUE(g.general.source.starts_with("https://")) << g.name;
    EXPECT_TRUE(g.general.fp32_tflops.has_value() || g.name == "B300") << g.name;
  }
  for (const SpotGpu& s : c->spot) EXPECT_FALSE(s.general.source.empty()) << s.name;
  const TermGpu* h100 = c->FindTerm("H100 SXM");
  ASSERT_NE(h100, nullptr);
  EXPECT_EQ(h100->general.fp64_tflops, 34);
  EXPECT_EQ(h100->general.fp64_tensor_tflops, 67);
  EXPECT_EQ(h100->general.rt_cores, 0);
  const TermGpu* l40s = c->FindTerm("L40S");
  EXPECT_EQ(l40s->general.rt_cores, 142);
  EXPECT_EQ(l40s->general.rt_tflops, 212);
  EXPECT_FALSE(l40s->general.fp64_tflops.has_value());  // not published
  EXPECT_EQ(l40s->general.ecc, true);
  EXPECT_FALSE(c->FindTerm("RTX 4090")->general.ecc.has_value());
  // The spot card "H200" is the term fleet's "H200 SXM": it takes that entry.
  EXPECT_EQ(c->FindSpot("H200")->general.fp64_tflops, 34);
  EXPECT_EQ(c->FindSpot("MI325X")->general.fp32_tflops, 163.4);
}

TEST(CardSpecs, BadEntriesAreRefusedWithTheirLineAndField) {
  auto unknown_card = WithExtra(
      "[[card_specs]]\nname = \"Voodoo 5\"\nfp32_tflops = 1\nfp64_tflops = 1\n"
      "fp64_tensor_tflops = 1\necc = true\nrt_cores = 0\nspecs_source = \"https://x\"\n");
  ASSERT_FALSE(unknown_card.ok());
  EXPECT_NE(unknown_card.status().message().find("names no [[term]] or [[spot]] card"),
            std::string::npos);
  auto twice = WithExtra(
      "[[card_specs]]\nname = \"L40S\"\nfp32_tflops = 1\nfp64_tflops = 1\n"
      "fp64_tensor_tflops = 1\necc = true\nrt_cores = 0\nspecs_source = \"https://x\"\n");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("is listed twice"), std::string::npos);
  auto not_a_url = WithExtra(
      "[[card_specs]]\nname = \"A100 PCIe\"\nfp32_tflops = 1\nfp64_tflops = 1\n"
      "fp64_tensor_tflops = 1\necc = true\nrt_cores = 0\nspecs_source = \"my notes\"\n");
  ASSERT_FALSE(not_a_url.ok());
  EXPECT_NE(not_a_url.status().message().find("specs_source"), std::string::npos);
}

}  // namespace
}  // namespace gpuhub::catalog
