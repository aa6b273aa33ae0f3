#include "csds_table.h"

#include <algorithm>
#include <array>

namespace uxds::tool {
namespace {

constexpr size_t kColumns = 6;
using Row = std::array<std::string, kColumns>;

std::vector<Row> Rows(const std::vector<CsdsClientStatus>& clients) {
  std::vector<Row> rows = {{"SCOPE", "TYPE", "NAME", "STATE", "VERSION", "ERROR"}};
  for (const CsdsClientStatus& client : clients) {
    if (client.resources.empty()) rows.push_back({client.client_scope, "-", "-", "-", "-", ""});
    for (const CsdsResourceStatus& r : client.resources) {
      std::string error = r.error;
      if (!r.failed_version.empty()) error = "(version " + r.failed_version + ") " + error;
      rows.push_back({client.client_scope, std::string(ShortTypeName(r.type_url)), r.name,
                      std::string(XdsCacheStateName(r.state)), r.version.empty() ? "-" : r.version,
                      std::move(error)});
    }
  }
  return rows;
}

}  // namespace

std::string CsdsTable(const std::vector<CsdsClientStatus>& clients) {
  const std::vector<Row> rows = Rows(clients);
  std::array<size_t, kColumns> width{};
  for (const Row& row : rows) {
    for (size_t i = 0; i < kColumns; ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const Row& row : rows) {
    std::string line;
    for (size_t i = 0; i < kColumns; ++i) {
      line += row[i];
      // The last column (the error) is not padded.
      if (i + 1 < kColumns) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out += line + "\n";
  }
  return out;
}

nlohmann::json CsdsJson(const std::vector<CsdsClientStatus>& clients) {
  nlohmann::json out_clients = nlohmann::json::array();
  for (const CsdsClientStatus& client : clients) {
    nlohmann::json resources = nlohmann::json::array();
    for (const CsdsResourceStatus& r : client.resources) {
      nlohmann::json resource = {{"type_url", r.type_url},
                                 {"name", r.name},
                                 {"client_status", std::string(XdsCacheStateName(r.state))}};
      if (!r.version.empty()) resource["version"] = r.version;
      if (!r.error.empty() || !r.failed_version.empty()) {
        resource["error"] = {{"details", r.error}, {"version", r.failed_version}};
      }
      resources.push_back(std::move(resource));
    }
    out_clients.push_back({{"client_scope", client.client_scope},
                           {"node_id", client.node_id},
                           {"resources", std::move(resources)}});
  }
  return {{"clients", std::move(out_clients)}};
}

}  // namespace uxds::tool
