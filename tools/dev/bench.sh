#!/usr/bin/env bash
# ./dev bench: the Google Benchmark programs, then the uxds server and the
# gRPC C++ 1.51 server under the same h2load load in the same run.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${BUILD_DIR:-build}
for b in "$build"/bench/*_bench; do
  [ -x "$b" ] || continue
  echo "== $(basename "$b")"
  "$b" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true "$@"
done
echo "== h2load: uxds server vs gRPC C++ 1.51 server"
/usr/bin/python3 tools/dev/h2load_compare.py --uxds "$build/tools/uxds/uxds" \
  --grpc "$build/tests/peers/grpc_cpp_test_server" --rounds 3 --seconds 5
