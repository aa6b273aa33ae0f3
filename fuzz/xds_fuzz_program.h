// How the XdsClient fuzzer reads its input: a program of steps.
//
//   byte 0        server features: bit 0 fail_on_data_errors,
//                 bit 1 resource_timer_is_transient_error (A88)
//   then steps, each an opcode byte (mod 5) and its arguments:
//     0 watch   TYPE NAME       add a watcher (at most two per name)
//     1 cancel  TYPE NAME       cancel one watcher of the name
//     2 respond TYPE C0 C1 C2 FLAGS
//                               an ADS response of TYPE; Ci (mod 8) is what
//                               it holds for name i (Choice below); FLAGS:
//                               bits 0-1 version_info "v1".."v3" (mod 3),
//                               bit 2 adds a resource nobody requested,
//                               bits 3-4 the code of kErrorOther (mod 3)
//     3 close                   the server ends the live stream (UNAVAILABLE)
//     4 wait                    wait past the resource timer
//   TYPE is mod 3 (LDS, CDS, EDS), NAME mod 3. Missing bytes read as 0; at
//   most kMaxSteps steps are read.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace uxds::fuzz {

inline constexpr int kTypes = 3;  // LDS, CDS, EDS
inline constexpr int kNames = 3;
inline constexpr size_t kMaxSteps = 32;

enum class StepKind : uint8_t { kWatch, kCancel, kRespond, kCloseStream, kWaitPastTimer };

// What a response holds for one name.
enum class Choice : uint8_t {
  kAbsent,  // LDS/CDS: the resource is deleted (A88 data error)
  kValid0,  // three valid resources that differ
  kValid1,
  kValid2,
  kInvalid,        // fails validation, named: NACKed (A46)
  kDuplicate,      // two valid copies that differ: NACKed
  kErrorNotFound,  // TP3 resource_errors entry, NOT_FOUND (a data error)
  kErrorOther,     // TP3 entry, PERMISSION_DENIED (data) / UNAVAILABLE / INTERNAL
};

struct Features {
  bool fail_on_data_errors = false;
  bool resource_timer_is_transient_error = false;
};

struct Step {
  StepKind kind = StepKind::kWatch;
  int type = 0;
  int name = 0;
  std::array<Choice, kNames> choices{};
  int version = 0;  // version_info "v<version+1>"
  bool extra_name = false;
  int other_code = 0;
};

struct Program {
  Features features;
  std::vector<Step> steps;
};

inline Program DecodeProgram(const uint8_t* data, size_t size) {
  size_t at = 0;
  auto next = [&]() -> uint8_t { return at < size ? data[at++] : 0; };
  Program program;
  const uint8_t features = next();
  program.features.fail_on_data_errors = (features & 1) != 0;
  program.features.resource_timer_is_transient_error = (features & 2) != 0;
  while (at < size && program.steps.size() < kMaxSteps) {
    Step step;
    step.kind = static_cast<StepKind>(next() % 5);
    switch (step.kind) {
      case StepKind::kWatch:
      case StepKind::kCancel:
        step.type = next() % kTypes;
        step.name = next() % kNames;
        break;
      case StepKind::kRespond: {
        step.type = next() % kTypes;
        for (Choice& choice : step.choices) choice = static_cast<Choice>(next() % 8);
        const uint8_t flags = next();
        step.version = (flags & 3) % 3;
        step.extra_name = (flags & 4) != 0;
        step.other_code = ((flags >> 3) & 3) % 3;
        break;
      }
      case StepKind::kCloseStream:
      case StepKind::kWaitPastTimer:
        break;
    }
    program.steps.push_back(step);
  }
  return program;
}

}  // namespace uxds::fuzz
