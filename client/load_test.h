// Closed-loop load generator for dllm-client `load`: `concurrency` workers each send one
// request after the other until the request count or the duration is reached. With
// --stream and --cancel-after N, each call is cancelled after N committed deltas.
#ifndef DLLM_CLIENT_LOAD_TEST_H_
#define DLLM_CLIENT_LOAD_TEST_H_

#include <map>
#include <string>
#include <vector>

#include "client/client_options.h"
#include "client/connection.h"
#include "dllm/v1/dllm.pb.h"

namespace dllm::client {

struct LoadReport {
  int requests = 0;
  int ok = 0;
  std::map<std::string, int> by_status;  // gRPC code name -> count
  // The first error message seen for each non-OK code: a count says that calls failed, the
  // message says why (a GOAWAY, a reset stream, a refusal by the server).
  std::map<std::string, std::string> first_error_by_status;
  double wall_seconds = 0;
  int64_t generated_tokens = 0;           // over OK requests
  std::vector<double> latencies_seconds;  // OK requests, sorted
  double Percentile(double q) const;      // nearest rank; 0 when empty
};

LoadReport RunLoad(const Connection& connection, const v1::GenerateRequest& request,
                   const ClientOptions& options);

// Text (default) or JSON rendering of a report.
std::string FormatLoadReport(const LoadReport& report, bool json);

}  // namespace dllm::client

#endif  // DLLM_CLIENT_LOAD_TEST_H_
