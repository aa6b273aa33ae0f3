// The main of every test binary: GoogleTest's, with stdout line-buffered.
// Under meson a test's stdout is a pipe, fully buffered by default, so a
// test that crashes would take its "[ RUN ]" line down with it; line by
// line, the log names the test a crash happened in.
#include <gtest/gtest.h>

#include <cstdio>

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
