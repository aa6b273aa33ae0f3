// The CSDS client status (A40) as `uxds csds` and `uxds demo` print it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "uxds/csds_client.h"

namespace uxds::tool {

// One row per cache entry: SCOPE TYPE NAME STATE VERSION ERROR, columns
// aligned; a client without entries gets a row of its own.
std::string CsdsTable(const std::vector<CsdsClientStatus>& clients);

// {"clients":[{"client_scope":...,"node_id":...,"resources":[{"type_url":...,
// "name":...,"client_status":"NACKED","version":...,"error":{"details":...,
// "version":...}}]}]}
nlohmann::json CsdsJson(const std::vector<CsdsClientStatus>& clients);

}  // namespace uxds::tool
