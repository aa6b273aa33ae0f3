// Collects every problem found while validating a document (the bootstrap
// JSON, an xDS resource) under the field path where it was found, so that one
// status lists them all: one NACK names every bad field (A46), one bootstrap
// error names every mistake in the file.
//
//   ValidationErrors errors;
//   {
//     auto server = errors.Scope(".xds_servers[0]");
//     auto uri = errors.Scope(".server_uri");
//     errors.Add("field not present");
//   }
//   Status s = errors.ToStatus("errors validating bootstrap");
//   // INVALID_ARGUMENT: errors validating bootstrap:
//   //   [field:xds_servers[0].server_uri error:field not present]
//
// The message keeps gRPC C++'s shape (`field:<path> error:<msg>`, several
// errors of one field as `field:<path> errors:[<a>; <b>]`, entries joined
// with "; ") so people and tools can grep either implementation's output.
// Fields are listed in the order their first error was found (document
// order), and a field's identical errors are reported once.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "uxds/status.h"

namespace uxds {

class ValidationErrors {
 public:
  // A field that keeps producing errors (e.g. every entry of a long list
  // failing the same way) stops growing the message after this many.
  static constexpr size_t kDefaultMaxErrorsPerField = 20;

  // Appends a path segment (".name", "[3]", "[\"key\"]") for as long as it
  // lives. Scopes nest and must end in reverse order of creation, which block
  // scoping gives for free. A leading '.' is dropped at the top level, so
  // paths read `node.id`, not `.node.id`.
  class [[nodiscard]] ScopedField {
   public:
    ScopedField(ValidationErrors* errors, std::string_view segment);
    ~ScopedField();
    ScopedField(const ScopedField&) = delete;
    ScopedField& operator=(const ScopedField&) = delete;

   private:
    ValidationErrors* errors_;
    size_t previous_length_;
  };

  explicit ValidationErrors(size_t max_errors_per_field = kDefaultMaxErrorsPerField)
      : max_errors_per_field_(max_errors_per_field) {}

  // `auto scope = errors.Scope(".field");` (guaranteed copy elision: the
  // scope is built in place).
  ScopedField Scope(std::string_view segment) { return ScopedField(this, segment); }

  // Records a problem with the current field.
  void Add(std::string_view error);

  // The current field path, e.g. "xds_servers[0].server_uri"; empty at the
  // top level.
  const std::string& CurrentField() const { return path_; }
  // True if the current field itself (not a sub-field) has an error; lets a
  // later check stay quiet about a field that already failed.
  bool FieldHasErrors() const;
  // True if the current field or any field below it has an error.
  bool FieldOrSubfieldsHaveErrors() const;

  bool ok() const { return fields_.empty(); }
  // Number of distinct (field, error) pairs recorded.
  size_t size() const;

  // "<prefix>: [field:a error:x; field:b errors:[y; z]]" ("[...]" alone if
  // the prefix is empty). A top-level error has no path: "error:x". Empty
  // string when there are no errors.
  std::string Message(std::string_view prefix) const;
  // OK if there are no errors, else `code` with Message(prefix).
  Status ToStatus(std::string_view prefix, StatusCode code = StatusCode::kInvalidArgument) const;

 private:
  struct FieldErrors {
    std::string field;
    std::vector<std::string> errors;
  };

  size_t max_errors_per_field_;
  std::string path_;
  std::vector<FieldErrors> fields_;                   // in order of first error
  std::map<std::string, size_t, std::less<>> index_;  // field -> position in fields_
};

}  // namespace uxds
