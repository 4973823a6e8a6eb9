// Names the calling thread, so that `top -H`, `ps -L` and perf show which of the server's threads
// is busy (the writer, the committer, the HTTP threads, the WAL checkpointer).
#pragma once

#include <string_view>

namespace gpuhub {

// Linux keeps at most 15 characters of a thread's name; a longer one is cut there.
void NameThisThread(std::string_view name);

}  // namespace gpuhub
