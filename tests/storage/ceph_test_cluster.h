// A throwaway real Ceph cluster for one test binary (scripts/ceph-test-cluster.sh: 1 mon, 1 mgr,
// 3 bluestore OSDs, 1 MDS, CephFS with pools of size 3), started by SetUpTestSuite and stopped by
// TearDownTestSuite. `skip` says why none can run here (the script's exit 3: the suite is skipped
// loudly), `error` why one could not be made (a failure).
#pragma once

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "core/process.h"
#include "core/strings.h"

namespace gpuhub::testing {

struct CephTestCluster {
  std::string dir, conf, keyring, name, fs, mon;
  std::string skip, error;

  static std::string Script() {
    return std::string(GPUHUB_SOURCE_DIR) + "/scripts/ceph-test-cluster.sh";
  }
  static Result<ProcessResult> Exec(const std::vector<std::string>& argv,
                                    std::chrono::seconds timeout) {
    return RunProcess(argv, timeout, "", 1 << 20);
  }

  // Starts one under a new directory made from `dir_template` ("/tmp/ceph.XXXXXX").
  static CephTestCluster* Start(std::string dir_template) {
    auto* c = new CephTestCluster;
    if (::mkdtemp(dir_template.data()) == nullptr) {
      c->error = "mkdtemp failed";
      return c;
    }
    c->dir = dir_template;
    auto r = Exec({"bash", Script(), "start", c->dir}, std::chrono::seconds(300));
    if (!r.ok()) {
      c->error = r.status().message();
      return c;
    }
    if (r->exit_code == 3) {
      c->skip = r->stderr_text;
      return c;
    }
    if (r->exit_code != 0) {
      c->error = "ceph-test-cluster.sh start exited " + std::to_string(r->exit_code) + ": " +
                 r->stderr_text;
      return c;
    }
    std::cerr << r->stderr_text;  // the time the start took
    for (const auto& line : Split(r->stdout_text, '\n')) {
      auto eq = line.find('=');
      if (eq == std::string::npos) continue;
      const std::string key = line.substr(0, eq), value = line.substr(eq + 1);
      if (key == "CEPH_CONF") c->conf = value;
      if (key == "CEPH_KEYRING") c->keyring = value;
      if (key == "CEPH_NAME") c->name = value;
      if (key == "CEPH_FS") c->fs = value;
      if (key == "CEPH_MON") c->mon = value;
    }
    if (c->conf.empty() || c->keyring.empty() || c->fs.empty() || c->mon.empty()) {
      c->error = "ceph-test-cluster.sh printed no environment: " + r->stdout_text;
    }
    return c;
  }

  // Stops `c` (when it started) and deletes it.
  static void Stop(CephTestCluster*& c) {
    if (c != nullptr && !c->dir.empty()) {
      (void)Exec({"bash", Script(), "stop", c->dir}, std::chrono::seconds(120));
    }
    delete c;
    c = nullptr;
  }
};

}  // namespace gpuhub::testing
