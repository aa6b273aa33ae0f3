// The resources `uxds control-plane` serves, read from a directory: one
// proto3 JSON resource per DIR/*.json file (with its "@type"), plus the TP3
// resource errors listed in DIR/errors.json.
//
// A load reads every file into one Snapshot, or reports every file that is
// wrong (with its path and line) and makes none: the caller keeps serving
// the last good one.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "json_converter.h"
#include "uxds/status.h"

namespace uxds::tool {

inline constexpr char kListenerTypeUrl[] = "type.googleapis.com/envoy.config.listener.v3.Listener";
inline constexpr char kRouteConfigurationTypeUrl[] =
    "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
inline constexpr char kClusterTypeUrl[] = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
inline constexpr char kClusterLoadAssignmentTypeUrl[] =
    "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";

// The message types a resource file may hold (full names, no URL prefix).
std::vector<std::string> ServedMessageTypes();
// LDS and CDS: every response carries all of the subscribed resources (a
// name left out reads as deleted); RDS and EDS responses carry what changed.
bool IsFullStateType(const std::string& type_url);

// DIR/errors.json entry: TP3 resource_errors for this name.
struct ServedResourceError {
  StatusCode code = StatusCode::kNotFound;
  std::string message;
  bool operator==(const ServedResourceError&) const = default;
};

struct Snapshot {
  std::string version;
  // type URL -> resource name -> serialized resource.
  std::map<std::string, std::map<std::string, std::string>> resources;
  // type URL -> resource name -> error (DIR/errors.json).
  std::map<std::string, std::map<std::string, ServedResourceError>> errors;

  size_t resource_count() const;
};

struct FileError {
  std::string path;
  size_t line = 0;  // 1-based; 0 when the whole file is meant
  std::string message;
};

struct DirectoryLoad {
  std::shared_ptr<Snapshot> snapshot;  // null when errors is not empty
  std::vector<FileError> errors;
};

// What the directory's *.json files look like to stat (names, sizes, mtimes,
// inodes): a reload is due when it changes. Error when DIR is unreadable.
StatusOr<std::string> DirectoryFingerprint(const std::string& dir);

// Reads DIR into a snapshot (without a version). An error Status when DIR
// cannot be read or the converter fails; file problems are in `errors`.
StatusOr<DirectoryLoad> LoadDirectory(const std::string& dir, JsonConverter& converter);

}  // namespace uxds::tool
