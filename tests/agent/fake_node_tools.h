// A fleet node's disk tools for the agent in tests and benches, on a kernel without device-mapper
// (`cryptsetup open` cannot work here): stand-ins for cryptsetup, mkfs and blkdiscard that log
// their arguments, and optionally make what `open` gives a real block device. Shared by the agent
// fixtures (tests/agent) and the benches that run term rentals (bench/storage).
#pragma once

#include <sys/stat.h>

#include <fstream>
#include <map>
#include <string>

#include "agent/process.h"

namespace gpuhub::testing {

// Writes `cryptsetup`, `mkfs` and `blkdiscard` into `dir`: each appends "<tool> <args>" to `log`,
// then runs the shell lines `extra` has for it ($1.. its arguments); `cryptsetup status` says
// "not open" (4), as after a reboot. Returns the agent config's lines naming them (under
// [storage]).
inline std::string WriteFakeNodeTools(const std::string& dir, const std::string& log,
                                      const std::map<std::string, std::string>& extra = {}) {
  std::string lines;
  for (const char* tool : {"cryptsetup", "mkfs", "blkdiscard"}) {
    const std::string path = dir + "/" + tool;
    std::ofstream(path) << "#!/bin/sh\necho \"" << tool << " $*\" >> " << log << "\n"
                        << (extra.count(tool) ? extra.at(tool) : "")
                        << "[ \"$1\" = status ] && exit 4\nexit 0\n";
    ::chmod(path.c_str(), 0755);
    lines += std::string(tool) + " = \"" + path + "\"\n";
  }
  return lines;
}

// The `extra` of WriteFakeNodeTools that makes `cryptsetup open` give a real block device: a loop
// device over a sparse file of `size` in `dir`, linked as /dev/mapper/<name>, on which the real
// mkfs.ext4 makes the file system that Docker's `local` volume driver mounts. It stands for the
// decrypted view; the LUKS format and erase are only logged.
inline std::map<std::string, std::string> RealMapperDevices(const std::string& dir,
                                                            const std::string& size = "64M") {
  const std::string img = dir + "/mapped-$7.img";
  return {
      {"cryptsetup",
       "case \"$1\" in\n"
       // A link left by a test that was killed is stale once its image is gone (the test's temp
       // dir was removed): dropped, so one killed run does not fail every later one.
       "  open) if [ -L \"/dev/mapper/$7\" ]; then o=$(readlink \"/dev/mapper/$7\")\n"
       "      b=$(losetup -nO BACK-FILE \"$o\" 2>/dev/null)\n"
       "      if [ -n \"$b\" ] && [ -f \"$b\" ]; then echo \"/dev/mapper/$7 exists\" >&2; exit 5; fi\n"
       "      rm -f \"/dev/mapper/$7\"; [ -n \"$b\" ] && losetup -d \"$o\"\n"
       "    fi\n"
       "    truncate -s " + size + " " + img + " && l=$(losetup -f --show " + img +
           ") || exit 1\n"
           "    mkdir -p /dev/mapper && ln -s \"$l\" \"/dev/mapper/$7\" && exit 0; exit 1 ;;\n"
           "  close) l=$(readlink \"/dev/mapper/$2\"); rm -f \"/dev/mapper/$2\"\n"
           "    [ -n \"$l\" ] && losetup -d \"$l\"; exit 0 ;;\n"
           "  status) [ -L \"/dev/mapper/$2\" ] && exit 0 ;;\n"
           "esac\n"},
      {"mkfs", "exec mkfs.ext4 -q -F \"$2\"\n"},
  };
}

// Removes what RealMapperDevices(dir) made: its /dev/mapper links and loop devices.
inline void RemoveRealMapperDevices(const std::string& dir) {
  (void)agent::RunProcess(
      {"sh", "-c",
       "for img in " + dir +
           "/mapped-*.img; do [ -f \"$img\" ] || continue; "
           "for l in $(losetup -j \"$img\" | cut -d: -f1); do "
           "for m in /dev/mapper/*; do [ \"$(readlink \"$m\")\" = \"$l\" ] && rm -f \"$m\"; "
           "done; losetup -d \"$l\"; done; done; true"});
}

}  // namespace gpuhub::testing
