#include "http/address_filter.h"

#include <boost/asio/ip/address.hpp>
#include <charconv>
#include <cstring>

namespace gpuhub::http {
namespace {

namespace ip = boost::asio::ip;

// The address as 4 or 16 bytes; an IPv4-mapped IPv6 address as its 4.
bool AddressBytes(std::string_view text, bool* v6, unsigned char out[16]) {
  boost::system::error_code ec;
  ip::address address = ip::make_address(std::string(text), ec);
  if (ec) return false;
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    address = ip::make_address_v4(ip::v4_mapped, address.to_v6());
  }
  *v6 = address.is_v6();
  if (*v6) {
    auto bytes = address.to_v6().to_bytes();
    std::memcpy(out, bytes.data(), 16);
  } else {
    auto bytes = address.to_v4().to_bytes();
    std::memcpy(out, bytes.data(), 4);
  }
  return true;
}

bool PrefixMatches(const unsigned char* a, const unsigned char* b, int bits) {
  int whole = bits / 8;
  if (std::memcmp(a, b, static_cast<std::size_t>(whole)) != 0) return false;
  int rest = bits % 8;
  if (rest == 0) return true;
  unsigned char mask = static_cast<unsigned char>(0xff << (8 - rest));
  return (a[whole] & mask) == (b[whole] & mask);
}

}  // namespace

Result<AddressFilter> AddressFilter::Parse(const std::vector<std::string>& networks) {
  AddressFilter filter;
  for (const std::string& entry : networks) {
    auto refuse = [&entry](const std::string& why) {
      return Status::InvalidArgument("'" + entry.substr(0, 64) + "' is not a network: " + why +
                                     " (e.g. 127.0.0.0/8, ::1/128 or 10.1.2.3)");
    };
    std::string_view text = entry;
    Network network;
    auto slash = text.find('/');
    if (!AddressBytes(text.substr(0, slash), &network.v6, network.bytes)) {
      return refuse("not an IPv4 or IPv6 address");
    }
    const int max_bits = network.v6 ? 128 : 32;
    network.prefix_bits = max_bits;
    if (slash != std::string_view::npos) {
      std::string_view bits = text.substr(slash + 1);
      int value = -1;
      auto [end, ec] = std::from_chars(bits.data(), bits.data() + bits.size(), value);
      if (ec != std::errc() || end != bits.data() + bits.size() || bits.empty() || value < 0 ||
          value > max_bits) {
        return refuse("the prefix length must be 0.." + std::to_string(max_bits));
      }
      network.prefix_bits = value;
    }
    unsigned char host_bits[16];
    std::memcpy(host_bits, network.bytes, 16);
    for (int bit = network.prefix_bits; bit < max_bits; ++bit) {
      host_bits[bit / 8] = static_cast<unsigned char>(host_bits[bit / 8] & ~(0x80 >> (bit % 8)));
    }
    if (std::memcmp(host_bits, network.bytes, 16) != 0) {
      return refuse("bits are set past the prefix length");
    }
    filter.networks_.push_back(network);
  }
  return filter;
}

bool AddressFilter::Allows(std::string_view address) const {
  bool v6 = false;
  unsigned char bytes[16] = {};
  if (!AddressBytes(address, &v6, bytes)) return false;
  for (const Network& network : networks_) {
    if (network.v6 == v6 && PrefixMatches(bytes, network.bytes, network.prefix_bits)) return true;
  }
  return false;
}

}  // namespace gpuhub::http
