#include "xds/validation_errors.h"

#include <gtest/gtest.h>

#include <string>

namespace uxds {
namespace {

TEST(ValidationErrorsTest, NoErrorsIsOk) {
  ValidationErrors errors;
  {
    auto scope = errors.Scope(".xds_servers");
    EXPECT_FALSE(errors.FieldHasErrors());
  }
  EXPECT_TRUE(errors.ok());
  EXPECT_EQ(errors.size(), 0u);
  EXPECT_EQ(errors.Message("errors validating bootstrap"), "");
  EXPECT_TRUE(errors.ToStatus("errors validating bootstrap").ok());
}

TEST(ValidationErrorsTest, NestedScopesBuildThePath) {
  ValidationErrors errors;
  {
    auto servers = errors.Scope(".xds_servers");
    auto first = errors.Scope("[0]");
    {
      auto uri = errors.Scope(".server_uri");
      EXPECT_EQ(errors.CurrentField(), "xds_servers[0].server_uri");
      errors.Add("field not present");
    }
    auto creds = errors.Scope(".channel_creds");
    errors.Add("no known creds type found");
  }
  {
    auto node = errors.Scope(".node");
    auto id = errors.Scope(".id");
    errors.Add("is not a string");
  }
  EXPECT_EQ(errors.CurrentField(), "");
  EXPECT_EQ(errors.size(), 3u);
  Status status = errors.ToStatus("errors validating bootstrap");
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "errors validating bootstrap: ["
            "field:xds_servers[0].server_uri error:field not present; "
            "field:xds_servers[0].channel_creds error:no known creds type found; "
            "field:node.id error:is not a string]");
}

TEST(ValidationErrorsTest, SeveralErrorsOfOneFieldAreGrouped) {
  ValidationErrors errors;
  {
    auto field = errors.Scope(".ring_hash_lb_config");
    errors.Add("min_ring_size must be <= 8388608");
    {
      auto other = errors.Scope(".hash_function");
      errors.Add("invalid hash function");
    }
    errors.Add("max_ring_size must be <= 8388608");
    errors.Add("min_ring_size must be <= 8388608");  // same error again: once
  }
  EXPECT_EQ(errors.size(), 3u);
  EXPECT_EQ(errors.Message("errors validating Cluster resource"),
            "errors validating Cluster resource: ["
            "field:ring_hash_lb_config errors:[min_ring_size must be <= 8388608; "
            "max_ring_size must be <= 8388608]; "
            "field:ring_hash_lb_config.hash_function error:invalid hash function]");
}

TEST(ValidationErrorsTest, TopLevelErrorHasNoField) {
  ValidationErrors errors;
  errors.Add("is not an object");
  EXPECT_EQ(errors.Message("errors validating bootstrap"),
            "errors validating bootstrap: [error:is not an object]");
  EXPECT_EQ(errors.Message(""), "[error:is not an object]");
}

TEST(ValidationErrorsTest, LeadingDotIsDroppedOnlyAtTopLevel) {
  ValidationErrors errors;
  auto authorities = errors.Scope(".authorities");
  auto entry = errors.Scope("[\"xds.example.com\"]");
  auto field = errors.Scope(".client_listener_resource_name_template");
  errors.Add("field must begin with \"xdstp://xds.example.com/\"");
  EXPECT_EQ(errors.Message(""),
            "[field:authorities[\"xds.example.com\"].client_listener_resource_name_template "
            "error:field must begin with \"xdstp://xds.example.com/\"]");
}

TEST(ValidationErrorsTest, FieldHasErrorsIsExact) {
  ValidationErrors errors;
  auto servers = errors.Scope(".xds_servers");
  {
    auto first = errors.Scope("[0]");
    errors.Add("is not an object");
    EXPECT_TRUE(errors.FieldHasErrors());
  }
  EXPECT_FALSE(errors.FieldHasErrors());
  EXPECT_TRUE(errors.FieldOrSubfieldsHaveErrors());
}

TEST(ValidationErrorsTest, SubfieldsDoNotIncludeSiblingsWithTheSamePrefix) {
  ValidationErrors errors;
  {
    auto sibling = errors.Scope(".nodes");
    errors.Add("is not an object");
  }
  {
    auto node = errors.Scope(".node");
    EXPECT_FALSE(errors.FieldOrSubfieldsHaveErrors());
    auto child = errors.Scope(".id");
    errors.Add("is not a string");
  }
  auto node = errors.Scope(".node");
  EXPECT_TRUE(errors.FieldOrSubfieldsHaveErrors());
}

TEST(ValidationErrorsTest, ErrorsPerFieldAreCapped) {
  ValidationErrors errors(/*max_errors_per_field=*/2);
  auto field = errors.Scope(".routes");
  errors.Add("a");
  errors.Add("b");
  errors.Add("c");
  EXPECT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors.Message("p"), "p: [field:routes errors:[a; b]]");
}

TEST(ValidationErrorsTest, CustomStatusCode) {
  ValidationErrors errors;
  errors.Add("x");
  Status status = errors.ToStatus("resource", StatusCode::kUnavailable);
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(status.message(), "resource: [error:x]");
}

}  // namespace
}  // namespace uxds
