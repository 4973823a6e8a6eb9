// Which client addresses may use an endpoint: a list of networks in CIDR notation
// ("127.0.0.0/8", "::1/128", "10.1.2.3" for one host). Used for GET /metrics ([metrics] allow).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace gpuhub::http {

class AddressFilter {
 public:
  // invalid_argument naming the first entry that is not an IPv4 or IPv6 address with an optional
  // prefix length (within 0..32 or 0..128), or whose host bits are set ("10.0.0.1/8": say
  // 10.0.0.0/8 or 10.0.0.1/32, not something in between).
  static Result<AddressFilter> Parse(const std::vector<std::string>& networks);
  // Whether `address` (as the server reports a TCP peer: "127.0.0.1", "::1",
  // "::ffff:127.0.0.1") is in one of the networks. An IPv4-mapped IPv6 address is matched as its
  // IPv4 address; anything that does not parse as an address is not allowed.
  bool Allows(std::string_view address) const;
  bool empty() const { return networks_.empty(); }

 private:
  struct Network {
    bool v6 = false;
    unsigned char bytes[16] = {};
    int prefix_bits = 0;
  };
  std::vector<Network> networks_;
};

}  // namespace gpuhub::http
