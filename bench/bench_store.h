// The store an engine benchmark runs on: "memory" (bench/null_store.h: the engine without a
// database) or a fresh SQLite file per run.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "store/store.h"
#include "null_store.h"

namespace gpuhub::bench {

// "memory": a NullStore; "sqlite": a migrated database in a fresh folder /tmp/<name>_<pid>/.
// nullptr when the database cannot be made.
inline std::unique_ptr<store::Store> OpenBenchStore(const std::string& backend,
                                                    const std::string& name) {
  if (backend == "memory") return std::make_unique<NullStore>();
  auto dir = std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto store = store::OpenStore("sqlite:" + (dir / "bench.db").string());
  if (!store.ok() || !(*store)->Migrate().ok()) return nullptr;
  return std::move(store).value();
}

}  // namespace gpuhub::bench
