#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <thread>

#include "agent/inventory.h"
#include "agent/test_util.h"

namespace gpuhub::agent {
namespace {

using testing::TempDir;

// What nvidia-smi 550 prints for the query (two H100s, the second without ECC counts).
const char* kCsv =
    "0, GPU-8f6c2a3e-1111-2222-3333-444455556666, NVIDIA H100 80GB HBM3, 81559, 550.54.15, 5, 16, "
    "34, 0, 0\n"
    "1, GPU-9a7d3b4f-1111-2222-3333-444455556666, NVIDIA H100 80GB HBM3, 81559, 550.54.15, 5, 16, "
    "36, 100, [N/A]\n";

TEST(NvidiaSmiTest, ParsesTheInventoryQuery) {
  std::string driver;
  auto gpus = ParseNvidiaSmiGpus(kCsv, &driver);
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  ASSERT_EQ(gpus->size(), 2u);
  const GpuInfo& g = (*gpus)[0];
  EXPECT_EQ(g.index, 0);
  EXPECT_EQ(g.uuid, "GPU-8f6c2a3e-1111-2222-3333-444455556666");
  EXPECT_EQ(g.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(g.memory_mib, 81559);
  EXPECT_EQ(g.pcie_gen, 5);
  EXPECT_EQ(g.pcie_width, 16);
  EXPECT_EQ(g.temperature_c, 34);
  EXPECT_EQ(g.ecc_uncorrected, 0);
  EXPECT_EQ((*gpus)[1].utilization_pct, 100);
  EXPECT_FALSE((*gpus)[1].ecc_uncorrected.has_value()) << "[N/A] is unknown, not zero";
  EXPECT_EQ(driver, "550.54.15");
  EXPECT_EQ(ParseNvidiaSmiGpus("0, GPU-x, too, few\n", nullptr).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseNvidiaSmiGpus("0, not-a-uuid, n, 1, d, 1, 1, 1, 1, 0\n", nullptr).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(ParseNvidiaSmiGpus("", nullptr)->empty());
  EXPECT_EQ(ParseCudaVersion("| NVIDIA-SMI 550.54.15   Driver Version: 550.54.15   CUDA Version: "
                             "12.4     |"),
            "12.4");
  EXPECT_EQ(ParseCudaVersion("no banner"), "");
}

TEST(NvidiaSmiTest, HealthFromEccRemapsAndXids) {
  auto gpus = ParseNvidiaSmiGpus(kCsv, nullptr).value();
  ApplyRemappedRows("GPU-8f6c2a3e-1111-2222-3333-444455556666, No, No\n"
                    "GPU-9a7d3b4f-1111-2222-3333-444455556666, Yes, No\n",
                    &gpus);
  EXPECT_TRUE(HealthReasons(gpus[0]).empty());
  EXPECT_EQ(HealthReasons(gpus[1]),
            std::vector<std::string>{"row remapping pending: the GPU needs a reset"});
  gpus[0].ecc_uncorrected = 2;
  gpus[0].xids = {{13, 1'800'000'000'000'000}, {79, 1'800'000'000'000'000}};
  EXPECT_EQ(HealthReasons(gpus[0]),
            (std::vector<std::string>{
                "XID 79 (GPU has fallen off the bus) at 2027-01-15T08:00:00Z",
                "2 uncorrected ECC errors since the driver loaded"}))
      << "XID 13 is an application XID: ignored";
  for (int xid : {13, 31, 43, 45, 68, 109}) EXPECT_TRUE(IsApplicationXid(xid)) << xid;
  for (int xid : {48, 63, 64, 74, 79, 92, 94, 95}) EXPECT_FALSE(IsApplicationXid(xid)) << xid;
}

TEST(HostProbeTest, FallsBackToNvidiaSmiWhenNvmlIsMissing) {
  TempDir dir;
  std::string smi = dir.Script(
      "nvidia-smi",
      "case \"$1\" in\n"
      "  --query-gpu=*) cat " + dir.File("gpus.csv") + " ;;\n"
      "  --query-remapped-rows=*) echo 'GPU-9a7d3b4f-1111-2222-3333-444455556666, No, Yes' ;;\n"
      "  *) echo '| NVIDIA-SMI 550.54.15  Driver Version: 550.54.15  CUDA Version: 12.4 |' ;;\n"
      "esac\n");
  std::ofstream(dir.File("gpus.csv")) << kCsv;
  HostProbe probe({dir.File("missing/libnvidia-ml.so.1"), smi, dir.path()});
  Inventory inv = probe.Probe();
  EXPECT_EQ(inv.source, "nvidia-smi");
  ASSERT_EQ(inv.gpus.size(), 2u);
  EXPECT_EQ(inv.driver_version, "550.54.15");
  EXPECT_EQ(inv.cuda_version, "12.4");
  EXPECT_TRUE(inv.gpus[0].health.empty());
  EXPECT_EQ(inv.gpus[1].health,
            std::vector<std::string>{"row remapping failed: memory rows could not be remapped"});
  EXPECT_GT(inv.ram_mib, 0);
  EXPECT_GT(inv.vcpus, 0);
  // Neither NVML nor nvidia-smi: the inventory says why, and has no GPU.
  HostProbe none({dir.File("missing/libnvidia-ml.so.1"), dir.File("missing/nvidia-smi"), "/"});
  Inventory empty = none.Probe();
  EXPECT_EQ(empty.source, "");
  EXPECT_TRUE(empty.gpus.empty());
  EXPECT_NE(empty.error.find("cannot load"), std::string::npos) << empty.error;
  EXPECT_NE(empty.error.find("nvidia-smi: not found"), std::string::npos) << empty.error;
}

TEST(NvmlTest, AMissingOrForeignLibraryIsRefusedInWords) {
  auto missing = Nvml::Load("/nonexistent/libnvidia-ml.so.1");
  EXPECT_EQ(missing.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(missing.status().message().find("cannot load /nonexistent/libnvidia-ml.so.1"),
            std::string::npos);
  auto foreign = Nvml::Load("libc.so.6");
  EXPECT_EQ(foreign.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(foreign.status().message().find("lacks nvmlInit_v2"), std::string::npos)
      << foreign.status().message();
}

// The dlopen path end to end against a library that implements NVML's functions with the
// signatures of nvml.h (testing/fake_nvml.cc): figures, ECC, and XID events from the watcher.
TEST(NvmlTest, ReadsGpusAndXidEventsThroughDlopen) {
  ::setenv("FAKE_NVML_GPUS",
           "GPU-aaaa|NVIDIA H100 80GB HBM3|81559;GPU-bbbb|NVIDIA H100 80GB HBM3|81559", 1);
  ::setenv("FAKE_NVML_ECC", "GPU-bbbb:3", 1);
  ::setenv("FAKE_NVML_XIDS", "GPU-aaaa:13,GPU-aaaa:79", 1);
  ::unsetenv("FAKE_NVML_INIT_FAILS");
  auto nvml = Nvml::Load(GPUHUB_FAKE_NVML);
  ASSERT_TRUE(nvml.ok()) << nvml.status().ToString();
  ASSERT_TRUE((*nvml)->WatchXids().ok());
  // The watcher thread reports the XIDs when it gets to them: poll for 30 s (not 2 s).
  Inventory inv;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (true) {
    inv = (*nvml)->Probe().value();
    if (!inv.gpus[0].xids.empty() || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(inv.source, "nvml");
  EXPECT_EQ(inv.driver_version, "550.54.15");
  EXPECT_EQ(inv.cuda_version, "12.4");
  ASSERT_EQ(inv.gpus.size(), 2u);
  EXPECT_EQ(inv.gpus[0].uuid, "GPU-aaaa");
  EXPECT_EQ(inv.gpus[0].memory_mib, 81559);
  EXPECT_EQ(inv.gpus[0].pcie_gen, 5);
  EXPECT_EQ(inv.gpus[0].utilization_pct, 87);
  ASSERT_EQ(inv.gpus[0].xids.size(), 1u) << "XID 13 is an application XID";
  EXPECT_EQ(inv.gpus[0].xids[0].xid, 79);
  EXPECT_EQ(inv.gpus[1].ecc_uncorrected, 3);
  EXPECT_EQ(HealthReasons(inv.gpus[1]),
            std::vector<std::string>{"3 uncorrected ECC errors since the driver loaded"});
  nvml->reset();
  // A driver that is not loaded: NVML's own words.
  ::setenv("FAKE_NVML_INIT_FAILS", "1", 1);
  auto failed = Nvml::Load(GPUHUB_FAKE_NVML);
  EXPECT_EQ(failed.status().message(), "nvmlInit_v2: Driver Not Loaded");
  ::unsetenv("FAKE_NVML_INIT_FAILS");
}

}  // namespace
}  // namespace gpuhub::agent
