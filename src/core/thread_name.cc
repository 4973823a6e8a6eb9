#include "core/thread_name.h"

#include <pthread.h>

#include <string>

namespace gpuhub {

void NameThisThread(std::string_view name) {
  constexpr std::size_t kMaxThreadNameChars = 15;
  const std::string cut(name.substr(0, kMaxThreadNameChars));
  pthread_setname_np(pthread_self(), cut.c_str());
}

}  // namespace gpuhub
