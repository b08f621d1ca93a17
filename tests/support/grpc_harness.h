// GrpcHarness: a Gateway and a DiffusionService on a loopback gRPC port, in front of a
// ScriptedEngine (the real engine over a scripted model) that reports to the server's metrics,
// with a captured JSON log. What the server tests drive the service through.
#ifndef DLLM_TESTS_SUPPORT_GRPC_HARNESS_H_
#define DLLM_TESTS_SUPPORT_GRPC_HARNESS_H_

#include <grpcpp/grpcpp.h>
#include <prometheus/text_serializer.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/gateway.h"
#include "server/grpc/diffusion_service.h"
#include "tests/support/locked_log.h"
#include "tests/support/scripted_engine.h"

namespace dllm::testing {

class GrpcHarness {
 public:
  // `attach`: whether the engine serves from the start (false: calls are UNAVAILABLE, as
  // while a model loads). The environment holds TEST_TOKENS = "secret1,secret2" for
  // auth.tokens_env.
  explicit GrpcHarness(ServerConfig config = {}, ScriptedEngineOptions engine = {},
                       bool attach = true)
      : config_(std::move(config)),
        logger_(LogLevel::kInfo, LogFormat::kJson, &log_),
        engine_(WithObserver(engine, &metrics_)) {
    auto auth = TokenAuthenticator::Create(config_.auth, [](const std::string& name) {
      return name == "TEST_TOKENS" ? std::optional<std::string>("secret1,secret2") : std::nullopt;
    });
    REQUIRE(auth.ok());
    auth_ = *std::move(auth);
    gateway_ = std::make_unique<Gateway>(config_, auth_.get(), &metrics_, &logger_);
    service_ = std::make_unique<DiffusionService>(gateway_.get());
    if (attach) REQUIRE(gateway_->AttachEngine(&engine_).ok());
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    builder.SetMaxSendMessageSize(static_cast<int>(config_.server.max_send_message_bytes));
    server_ = builder.BuildAndStart();
    REQUIRE(port != 0);
    channel_ =
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
    stub_ = v1::DiffusionLM::NewStub(channel_);
    // Connected before the test's first call: a call with a short deadline must reach the
    // server, not expire in the client while the connection is set up (under a sanitizer on a
    // loaded machine that took over 50 ms, and the server never saw the call).
    REQUIRE(
        channel_->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(30)));
  }
  ~GrpcHarness() {
    engine_.Drain(absl::Seconds(5));
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }

  v1::DiffusionLM::Stub& stub() { return *stub_; }
  std::shared_ptr<grpc::Channel> channel() { return channel_; }
  ScriptedEngine& engine() { return engine_; }
  Gateway& gateway() { return *gateway_; }
  std::string log() { return log_.str(); }  // complete once the calls of interest finished
  int LogLines(const std::string& needle) {
    std::istringstream in(log());
    std::string line;
    int n = 0;
    while (std::getline(in, line)) n += line.find(needle) != std::string::npos;
    return n;
  }
  // dllm_requests_total{protocol="grpc"} by status, from one scrape of the registry.
  std::map<std::string, double> RequestCounts() {
    prometheus::TextSerializer serializer;
    std::istringstream in(serializer.Serialize(metrics_.registry()->Collect()));
    const std::string prefix = "dllm_requests_total{protocol=\"grpc\",status=\"";
    std::map<std::string, double> counts;
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind(prefix, 0) != 0) continue;
      const size_t end = line.find("\"} ", prefix.size());
      if (end == std::string::npos) continue;
      counts[line.substr(prefix.size(), end - prefix.size())] = std::stod(line.substr(end + 3));
    }
    return counts;
  }
  double RequestsWithStatus(const std::string& code) { return RequestCounts()[code]; }
  // Waits until the server has recorded `n` generation calls in all, at most 30 s of wall
  // time (a loaded CI machine, or a sanitizer build, can starve the worker for seconds).
  double WaitForRecorded(double n) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    double total = 0;
    while (true) {
      total = 0;
      for (const auto& [code, count] : RequestCounts()) total += count;
      if (total >= n || absl::Now() >= deadline) break;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return total;
  }

 private:
  static ScriptedEngineOptions WithObserver(ScriptedEngineOptions o, EngineObserver* observer) {
    o.observer = observer;
    return o;
  }

  ServerConfig config_;
  LockedLog log_;
  Logger logger_;
  ServerMetrics metrics_;
  ScriptedEngine engine_;
  std::unique_ptr<TokenAuthenticator> auth_;
  std::unique_ptr<Gateway> gateway_;  // outlives service_ and server_
  std::unique_ptr<DiffusionService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::DiffusionLM::Stub> stub_;
};

}  // namespace dllm::testing

#endif  // DLLM_TESTS_SUPPORT_GRPC_HARNESS_H_
