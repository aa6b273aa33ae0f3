// `uxds ring`: builds the ring_hash ring (A42, A76) for endpoints given as
// JSON and prints the endpoint each request hash picks when every endpoint
// is READY. One JSON object per input line, one JSON line per input line:
//
//   echo '{"endpoints":[{"address":"10.0.0.1:80"}],"hashes":["42"]}' | uxds ring
//
// The ring input, the ring and the lookup are the library's own
// (BuildRingEndpoints, Ring::Build, Ring::FindIndex): the ring_hash policy
// runs the same code, so the output answers "where does this request go".
#include <charconv>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "commands.h"
#include "json_lines.h"
#include "uxds/ring_hash.h"
#include "uxds/status.h"

namespace uxds::tool {
namespace {

constexpr const char* kRingSummary =
    "Prints the ring_hash ring size and the endpoint each request hash picks.";
constexpr const char* kRingDetails =
    "Reads one JSON object per line (from FILE, else stdin):\n"
    "  {\"endpoints\":[{\"address\":\"10.0.0.1:80\",\"weight\":3,\"hash_key\":\"k1\"}, ...],\n"
    "   \"min_ring_size\":1024,\"max_ring_size\":4096,\"ring_size_cap\":4096,\n"
    "   \"hashes\":[\"<decimal uint64>\", ...]}\n"
    "and prints, for each, the ring_hash ring's size and the endpoint each hash\n"
    "picks when every endpoint is READY:\n"
    "  {\"ring_size\":4096,\"picks\":[\"10.0.0.1:80\", ...]}\n"
    "or {\"error\":\"...\"} for a line that is not valid. Blank lines are skipped.\n"
    "\n"
    "  address        IP:port or [IPv6]:port; repeated addresses add up their weights\n"
    "  weight         1 to 4294967295 (default 1): locality x endpoint weight\n"
    "  hash_key       A76: hashed instead of the address (default: none)\n"
    "  min_ring_size  as in a Cluster: 1 to 8388608, default 1024\n"
    "  max_ring_size  as in a Cluster: 1 to 8388608, default 8388608\n"
    "  ring_size_cap  the client's local cap on both sizes, default 4096\n"
    "\n"
    "Exit status: 0 after the last line (a bad line does not stop it), 1 if FILE\n"
    "cannot be read, 2 on a usage error.\n";

struct RingRequest {
  std::vector<RingHashAddress> addresses;
  RingSizeConfig sizes;
  std::vector<uint64_t> hashes;
};

Status ParseEndpoint(const Json& endpoint, RingHashAddress* out) {
  if (!endpoint.is_object()) return InvalidArgumentError("must be an object");
  for (const auto& [key, value] : endpoint.items()) {
    if (key == "address") {
      if (!value.is_string()) return InvalidArgumentError("address: must be a string");
      StatusOr<std::string> text = RingHashAddressText(value.get<std::string>());
      if (!text.ok()) return text.status();  // names the address
      out->address = *text;
    } else if (key == "weight") {
      // EDS: load_balancing_weight is a UInt32Value of at least 1.
      if (!GetUnsigned(value, &out->weight) || out->weight == 0 || out->weight > UINT32_MAX) {
        return InvalidArgumentError("weight: must be an integer in the range of 1 to 4294967295");
      }
    } else if (key == "hash_key") {
      if (!value.is_string()) return InvalidArgumentError("hash_key: must be a string");
      out->hash_key = value.get<std::string>();
    } else {
      return InvalidArgumentError("unknown field \"" + key + "\"");
    }
  }
  if (out->address.empty()) return InvalidArgumentError("address: field not present");
  return Status();
}

Status ParseHash(const Json& value, uint64_t* out) {
  // Strings: JSON numbers above 2^53 lose digits in many producers.
  if (!value.is_string()) return InvalidArgumentError("must be a decimal uint64 string");
  const std::string& text = value.get_ref<const std::string&>();
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  if (text.empty() || ec != std::errc() || ptr != end) {
    return InvalidArgumentError("must be a decimal uint64 string");
  }
  return Status();
}

Status ParseRequest(std::string_view line, RingRequest* out) {
  const Json request = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (request.is_discarded()) return InvalidArgumentError("invalid JSON");
  if (!request.is_object()) return InvalidArgumentError("not a JSON object");
  bool have_endpoints = false;
  for (const auto& [key, value] : request.items()) {
    if (key == "endpoints") {
      if (!value.is_array() || value.empty()) {
        return InvalidArgumentError("endpoints: must be a non-empty array");
      }
      for (size_t i = 0; i < value.size(); ++i) {
        RingHashAddress address;
        Status s = ParseEndpoint(value[i], &address);
        if (!s.ok()) return s.WithContext("endpoints[" + std::to_string(i) + "]");
        out->addresses.push_back(std::move(address));
      }
      have_endpoints = true;
    } else if (key == "min_ring_size" || key == "max_ring_size" || key == "ring_size_cap") {
      uint64_t size = 0;
      if (!GetUnsigned(value, &size)) {
        return InvalidArgumentError(key + ": must be a non-negative integer");
      }
      if (key == "min_ring_size") out->sizes.min_ring_size = size;
      if (key == "max_ring_size") out->sizes.max_ring_size = size;
      if (key == "ring_size_cap") out->sizes.ring_size_cap = size;
    } else if (key == "hashes") {
      if (!value.is_array()) return InvalidArgumentError("hashes: must be an array");
      for (size_t i = 0; i < value.size(); ++i) {
        uint64_t hash = 0;
        Status s = ParseHash(value[i], &hash);
        if (!s.ok()) return s.WithContext("hashes[" + std::to_string(i) + "]");
        out->hashes.push_back(hash);
      }
    } else {
      return InvalidArgumentError("unknown field \"" + key + "\"");
    }
  }
  if (!have_endpoints) return InvalidArgumentError("endpoints: field not present");
  // The same limits as the Cluster decoder's (A42).
  return out->sizes.Validate();
}

Json Answer(std::string_view line) {
  RingRequest request;
  Status s = ParseRequest(line, &request);
  if (!s.ok()) return Json{{"error", s.message()}};
  std::vector<size_t> kept;
  const std::vector<RingEndpoint> endpoints = BuildRingEndpoints(request.addresses, &kept);
  const Ring ring = Ring::Build(endpoints, request.sizes);
  Json picks = Json::array();
  // Every endpoint READY: A42's picker takes the entry FindIndex names.
  for (uint64_t hash : request.hashes) {
    picks.push_back(request.addresses[kept[ring[ring.FindIndex(hash)].endpoint]].address);
  }
  return Json{{"ring_size", ring.size()}, {"picks", std::move(picks)}};
}

}  // namespace

int RunRing(const std::vector<std::string>& args) {
  CLI::App app{kRingSummary, "uxds ring"};
  app.footer(kRingDetails);
  return RunJsonLines(app, args, Answer);
}

}  // namespace uxds::tool
