#include "resource_cases.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace uxds::testing {
namespace {

std::string HexToBytes(const std::string& hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return bytes;
}

std::vector<ResourceCase> LoadFailure(std::string message) {
  ResourceCase failure;
  failure.name = "pack_not_loaded";
  failure.load_error = std::move(message);
  return {failure};
}

}  // namespace

std::vector<ResourceCase> LoadResourceCases(std::string_view pack) {
  const char* build_root = std::getenv("UXDS_BUILD_ROOT");
  if (build_root == nullptr) return LoadFailure("UXDS_BUILD_ROOT is not set");
  const std::string path =
      std::string(build_root) + "/tests/xds/resources/" + std::string(pack) + ".pack.json";
  std::ifstream in(path);
  if (!in) return LoadFailure("cannot open " + path);
  std::stringstream text;
  text << in.rdbuf();
  auto json = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.contains("cases")) return LoadFailure("bad pack " + path);
  std::vector<ResourceCase> cases;
  for (const auto& entry : json["cases"]) {
    ResourceCase c;
    c.name = entry.at("name").get<std::string>();
    c.bytes = HexToBytes(entry.at("hex").get<std::string>());
    if (entry.contains("error")) c.error = entry["error"].get<std::string>();
    if (entry.contains("expect")) c.expect = entry["expect"];
    if (entry.contains("resource_name"))
      c.resource_name = entry["resource_name"].get<std::string>();
    cases.push_back(std::move(c));
  }
  if (cases.empty()) return LoadFailure("no cases in " + path);
  return cases;
}

std::string ResourceCaseName(const ::testing::TestParamInfo<ResourceCase>& info) {
  return info.param.name;
}

const XdsDecodeContext& TestDecodeContext() {
  static const Bootstrap bootstrap = [] {
    Bootstrap b;
    XdsServerConfig server;
    server.server_uri = "xds.test.example:443";
    b.xds_servers.push_back(server);
    // A29: the instances security config may name (decoders check names
    // only; nothing is read).
    b.certificate_providers["ca"] = {"file_watcher", R"({"ca_certificate_file":"/ca.pem"})"};
    b.certificate_providers["identity"] = {
        "file_watcher", R"({"certificate_file":"/c.pem","private_key_file":"/k.pem"})"};
    return b;
  }();
  static const XdsDecodeContext context{bootstrap, bootstrap.xds_servers.front()};
  return context;
}

}  // namespace uxds::testing
