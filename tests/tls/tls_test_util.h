// Helpers shared by the TLS tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <optional>

#include "support/test_support.h"

namespace uxds::testing {

// Makes the test certificates (tests/support MakeTestCertificates) once per
// test binary and removes them when it ends.
class CertificatesEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    dir_ = std::make_unique<TempDir>();
    certs_ = MakeTestCertificates(dir_->path());
    instance_ = this;
  }
  void TearDown() override {
    instance_ = nullptr;
    dir_.reset();
  }
  static const TestCertificates& certs() { return *instance_->certs_; }
  static const std::string& dir() { return instance_->dir_->path(); }

 private:
  static inline CertificatesEnvironment* instance_ = nullptr;
  std::unique_ptr<TempDir> dir_;
  std::optional<TestCertificates> certs_;
};

// gtest owns and deletes registered environments.
inline ::testing::Environment* const kCertificatesEnvironment =
    ::testing::AddGlobalTestEnvironment(new CertificatesEnvironment);

inline const TestCertificates& Certs() { return CertificatesEnvironment::certs(); }

}  // namespace uxds::testing
