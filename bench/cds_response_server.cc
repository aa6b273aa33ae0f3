// An ADS server for measuring `uxds watch` with many names: it answers every
// new stream's first CDS request with one prebuilt response of N Clusters
// (cluster-0 .. cluster-<N-1>, as xds_scale_bench), then only reads. Built
// on uxds's own HTTP/2 server, so the control plane costs next to nothing
// and the time measured is the client's.
//
//   cds_response_server N    prints the port, serves until stdin closes
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "ads_response_server.h"

int main(int argc, char** argv) {
  const int clusters = argc == 2 ? std::atoi(argv[1]) : 0;
  if (clusters <= 0) {
    std::fprintf(stderr, "usage: cds_response_server CLUSTERS (a positive count)\n");
    return 2;
  }
  uxds::bench::AdsServer server(uxds::bench::CdsResponse(clusters));
  std::printf("%s\n", server.target().c_str());
  std::fflush(stdout);
  char byte;
  while (read(STDIN_FILENO, &byte, 1) > 0) {
  }
  return 0;
}
