// `gpuhub agent ...`: the program on every GPU host (src/agent, docs/agent.md).
//
//   gpuhub agent enroll --server URL --token TOKEN [--config FILE] [--state-dir DIR]
//   gpuhub agent run [--config FILE] [--state-dir DIR]
//   gpuhub agent inventory [--config FILE] [--json]
//
// The configuration file is TOML (agent/config.h), /etc/gpuhub/agent.toml by default.
#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <iostream>

#include "agent/agent.h"
#include "agent/config.h"
#include "agent/inventory.h"
#include "agent/protocol.h"
#include "cli/command_registry.h"
#include "http/serve.h"

namespace gpuhub::cli {
namespace {

struct AgentFlags {
  std::string config;
  std::string state_dir;
  std::string server;
  std::string token;
  bool json = false;
};

std::atomic<bool> g_stop{false};
extern "C" void OnStopSignal(int) { g_stop = true; }

Result<agent::AgentConfig> LoadConfig(const AgentFlags& flags) {
  GPUHUB_ASSIGN_OR_RETURN(agent::AgentConfig config, agent::LoadAgentConfig(flags.config));
  if (!flags.state_dir.empty()) config.state_dir = flags.state_dir;
  return config;
}

void Report(const Status& s) {
  if (s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kNotFound ||
      s.code() == StatusCode::kUnauthenticated) {
    FailBadInput(s.message());
  } else {
    Fail(s.message());
  }
}

void RunEnroll(const AgentFlags& flags) {
  auto config = LoadConfig(flags);
  if (!config.ok()) return Report(config.status());
  if (flags.token.empty()) return FailBadInput("--token is required (the enrolment token)");
  std::string server = !flags.server.empty() ? flags.server : config->server;
  if (server.empty()) return FailBadInput("--server is required (the gpuhub server's URL)");
  auto enrolled = agent::Enrol(*config, server, flags.token);
  if (!enrolled.ok()) return Report(enrolled.status());
  std::cout << "enrolled as host " << enrolled->host_id << " ("
            << (enrolled->kind == "node" ? "fleet node" : "machine " +
                                                              std::to_string(enrolled->machine_id))
            << "); credential in " << agent::CredentialPath(config->state_dir)
            << " (0600). Start the agent: gpuhub agent run\n";
  SetExitCode(kExitOk);
}

void RunAgent(const AgentFlags& flags) {
  auto config = LoadConfig(flags);
  if (!config.ok()) return Report(config.status());
  auto credential = agent::ReadCredential(config->state_dir);
  if (!credential.ok()) return Report(credential.status());
  if (!config->server.empty()) credential->server = config->server;
  http::SetUpLogging();
  std::signal(SIGPIPE, SIG_IGN);
  std::signal(SIGTERM, OnStopSignal);
  std::signal(SIGINT, OnStopSignal);
  agent::Agent a({*config, *credential});
  Status s = a.Run(g_stop);
  if (!s.ok()) return Report(s);
  SetExitCode(kExitOk);
}

void RunInventory(const AgentFlags& flags) {
  auto config = LoadConfig(flags);
  if (!config.ok()) return Report(config.status());
  agent::HostProbe probe({config->nvml_library, config->nvidia_smi, config->disk_path});
  agent::Inventory inv = probe.Probe();
  if (flags.json) {
    std::cout << agent::InventoryJson(inv, 2) << "\n";
  } else {
    std::cout << "source: " << (inv.source.empty() ? "none (" + inv.error + ")" : inv.source)
              << "\ndriver " << inv.driver_version << ", CUDA " << inv.cuda_version << ", "
              << inv.vcpus << " CPUs, " << inv.ram_mib << " MiB RAM, " << inv.disk_free_gb
              << " GB free of " << inv.disk_total_gb << " GB disk\n";
    for (const auto& g : inv.gpus) {
      std::cout << "  GPU " << g.index << "  " << g.uuid << "  " << g.name << "  "
                << g.memory_mib << " MiB  PCIe " << g.pcie_gen << " x" << g.pcie_width << "  "
                << g.temperature_c << " C  " << g.utilization_pct << "%  "
                << (g.health.empty() ? "healthy" : "UNHEALTHY") << "\n";
      for (const auto& h : g.health) std::cout << "      " << h << "\n";
    }
  }
  SetExitCode(inv.source.empty() ? kExitFailure : kExitOk);
}

void AddAgentCommands(CLI::App& app) {
  auto* agent = app.add_subcommand("agent", "the host agent that runs on every GPU host");
  agent->require_subcommand(1);
  auto flags = std::make_shared<AgentFlags>();
  auto common = [&](CLI::App* cmd) {
    cmd->add_option("--config", flags->config,
                    "agent configuration (TOML; default /etc/gpuhub/agent.toml when present)");
    cmd->add_option("--state-dir", flags->state_dir,
                    "where the credential and state live (default /var/lib/gpuhub-agent)");
  };
  auto* enroll = agent->add_subcommand("enroll", "exchange a one-time enrolment token for this "
                                                 "host's credential");
  common(enroll);
  enroll->add_option("--server", flags->server, "the gpuhub server, https://... in production");
  enroll->add_option("--token", flags->token, "the enrolment token (ghe_...)");
  enroll->callback([flags] { RunEnroll(*flags); });
  auto* run = agent->add_subcommand("run", "report to the server and run the desired workloads");
  common(run);
  run->callback([flags] { RunAgent(*flags); });
  auto* inventory = agent->add_subcommand("inventory", "print what this host has, measured");
  common(inventory);
  inventory->add_flag("--json", flags->json, "JSON output");
  inventory->callback([flags] { RunInventory(*flags); });
}

const bool kRegistered = RegisterCommands(&AddAgentCommands);

}  // namespace
}  // namespace gpuhub::cli
