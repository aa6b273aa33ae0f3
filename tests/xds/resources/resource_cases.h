// Table-driven resource test cases: proto3 JSON fixtures (<type>_cases.json)
// turned into bytes at build time by json_to_proto.py, loaded here from the
// build directory, and checked against a decoder: an invalid case must give
// exactly its INVALID_ARGUMENT message, a valid case exactly its JSON summary.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "uxds/bootstrap.h"
#include "uxds/xds_resource_type.h"
#include "xds/resources/resource_decoders.h"

namespace uxds::testing {

struct ResourceCase {
  std::string name;
  std::string bytes;
  std::optional<std::string> error;          // expected status message
  std::optional<nlohmann::json> expect;      // expected ToJson(), parsed
  std::optional<std::string> resource_name;  // expected decoded name, if given
  std::string load_error;                    // set if the pack could not be read
};

// Cases of $UXDS_BUILD_ROOT/tests/xds/resources/<pack>.pack.json. A pack
// that cannot be read gives one case whose load_error says why.
std::vector<ResourceCase> LoadResourceCases(std::string_view pack);

// gtest parameter names: the case names.
std::string ResourceCaseName(const ::testing::TestParamInfo<ResourceCase>& info);

// The context tests decode with: server "xds.test.example:443", certificate
// provider instances "ca" and "identity".
const XdsDecodeContext& TestDecodeContext();

inline void PrintTo(const ResourceCase& c, std::ostream* os) { *os << c.name; }

template <typename Resource>
void CheckResourceCase(const ResourceCase& c, const DecodedResource<Resource>& decoded) {
  ASSERT_EQ(c.load_error, "");
  if (c.resource_name.has_value()) {
    ASSERT_TRUE(decoded.name.has_value());
    EXPECT_EQ(*decoded.name, *c.resource_name);
  }
  if (c.error.has_value()) {
    ASSERT_FALSE(decoded.resource.ok()) << "decoded: " << decoded.resource->ToJson();
    EXPECT_EQ(decoded.resource.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(decoded.resource.status().message(), *c.error);
    return;
  }
  ASSERT_TRUE(decoded.resource.ok()) << decoded.resource.status().message();
  const auto actual = nlohmann::json::parse(decoded.resource->ToJson());
  EXPECT_EQ(actual, *c.expect) << "actual:   " << actual.dump()
                               << "\nexpected: " << c.expect->dump();
}

}  // namespace uxds::testing
