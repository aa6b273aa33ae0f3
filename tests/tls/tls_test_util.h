// Helpers shared by the TLS tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <optional>

#include "support/test_support.h"
#include "uxds/runtime.h"

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

// Runs `task` on `loop` until it finishes; returns its result. Loop::Run and
// Stop() rather than Loop::BlockOn: BlockOn waits for one more io_uring
// completion after its task finished on a turn without I/O (e.g. right after
// a TaskGroup join), which can be never.
template <typename T>
T RunTask(Loop& loop, Task<T> task) {
  std::optional<T> result;
  loop.Spawn([](Loop& l, Task<T> t, std::optional<T>& out) -> Task<void> {
    out.emplace(co_await std::move(t));
    l.Stop();
  }(loop, std::move(task), result));
  loop.Run();
  return std::move(*result);
}

inline void RunTask(Loop& loop, Task<void> task) {
  loop.Spawn([](Loop& l, Task<void> t) -> Task<void> {
    co_await std::move(t);
    l.Stop();
  }(loop, std::move(task)));
  loop.Run();
}

}  // namespace uxds::testing
