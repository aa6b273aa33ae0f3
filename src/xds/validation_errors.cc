#include "xds/validation_errors.h"

#include <algorithm>

namespace uxds {

ValidationErrors::ScopedField::ScopedField(ValidationErrors* errors, std::string_view segment)
    : errors_(errors), previous_length_(errors->path_.size()) {
  if (errors_->path_.empty() && !segment.empty() && segment.front() == '.') {
    segment.remove_prefix(1);
  }
  errors_->path_.append(segment);
}

ValidationErrors::ScopedField::~ScopedField() { errors_->path_.resize(previous_length_); }

void ValidationErrors::Add(std::string_view error) {
  auto [it, inserted] = index_.try_emplace(path_, fields_.size());
  if (inserted) fields_.push_back(FieldErrors{path_, {}});
  auto& errors = fields_[it->second].errors;
  if (errors.size() >= max_errors_per_field_) return;
  if (std::find(errors.begin(), errors.end(), error) != errors.end()) return;
  errors.emplace_back(error);
}

bool ValidationErrors::FieldHasErrors() const { return index_.find(path_) != index_.end(); }

bool ValidationErrors::FieldOrSubfieldsHaveErrors() const {
  if (path_.empty()) return !ok();
  // Sub-fields of "a.b" are "a.b.<x>" and "a.b[<i>]"; "a.bc" is a sibling.
  for (auto it = index_.lower_bound(path_); it != index_.end(); ++it) {
    const std::string& field = it->first;
    if (field.compare(0, path_.size(), path_) != 0) break;
    if (field.size() == path_.size() || field[path_.size()] == '.' || field[path_.size()] == '[') {
      return true;
    }
  }
  return false;
}

size_t ValidationErrors::size() const {
  size_t n = 0;
  for (const auto& field : fields_) n += field.errors.size();
  return n;
}

std::string ValidationErrors::Message(std::string_view prefix) const {
  if (fields_.empty()) return "";
  std::string out(prefix);
  if (!out.empty()) out += ": ";
  out += '[';
  for (size_t i = 0; i < fields_.size(); ++i) {
    const FieldErrors& field = fields_[i];
    if (i > 0) out += "; ";
    if (!field.field.empty()) {
      out += "field:";
      out += field.field;
      out += ' ';
    }
    if (field.errors.size() == 1) {
      out += "error:";
      out += field.errors.front();
      continue;
    }
    out += "errors:[";
    for (size_t j = 0; j < field.errors.size(); ++j) {
      if (j > 0) out += "; ";
      out += field.errors[j];
    }
    out += ']';
  }
  out += ']';
  return out;
}

Status ValidationErrors::ToStatus(std::string_view prefix, StatusCode code) const {
  if (ok()) return OkStatus();
  return Status(code, Message(prefix));
}

}  // namespace uxds
