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
# The uxds server once per runtime backend (io_uring, epoll), gRPC C++ beside.
for shape in "1 10" "4 64"; do
  set -- $shape
  echo "== h2load: uxds server (io_uring, epoll) vs gRPC C++ 1.51 server, $1 x $2"
  /usr/bin/python3 tools/dev/h2load_compare.py --uxds "$build/tools/uxds/uxds" \
    --grpc "$build/tests/peers/grpc_cpp_test_server" --rounds 3 --seconds 5 \
    --connections "$1" --streams "$2"
done
