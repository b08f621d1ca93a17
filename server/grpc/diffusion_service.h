// DiffusionService: the gRPC callback implementation of dllm.v1.DiffusionLM, a thin layer over
// the transport-neutral Gateway (gateway.h), which authenticates, admits, validates, records
// and decides final statuses for the HTTP API too.
//
// gRPC threads only decode, admit and enqueue; the engine worker drives each call through
// its EventSink, and responses are written without blocking the worker (provisional canvas
// snapshots are dropped when a client reads slowly; committed deltas and the final summary
// never are). Client cancellation and the call's deadline reach the engine (Engine::Cancel,
// GenerationRequest::deadline). Every generation call, accepted or refused, is recorded
// through Gateway::RecordCall with protocol="grpc".
//
// Generate, GenerateStream and Tokenize take their requests as raw bytes and parse them with
// ParseRequestBytes (server/request_decoding.h), so that a string field holding invalid UTF-8
// is INVALID_ARGUMENT naming the field, logged and counted, instead of a parse failure inside
// gRPC. Replies are serialized here too: one larger than server.max_send_message_bytes ends
// the call with RESOURCE_EXHAUSTED (logged and counted as such, which is what the client
// gets). absl::Status becomes grpc::Status in one place (status_mapping.h).
//
// Thread-safety: all methods are safe from any thread. The Gateway must outlive the gRPC
// server (destroy the grpc::Server first: its Shutdown waits for every call's OnDone).
#ifndef DLLM_SERVER_GRPC_DIFFUSION_SERVICE_H_
#define DLLM_SERVER_GRPC_DIFFUSION_SERVICE_H_

#include "dllm/v1/dllm.grpc.pb.h"
#include "server/gateway.h"

namespace dllm {

// The typed callback service with the three request-carrying methods switched to raw bytes.
using DiffusionServiceBase = v1::DiffusionLM::WithRawCallbackMethod_Generate<
    v1::DiffusionLM::WithRawCallbackMethod_GenerateStream<
        v1::DiffusionLM::WithRawCallbackMethod_Tokenize<v1::DiffusionLM::CallbackService>>>;

class DiffusionService final : public DiffusionServiceBase {
 public:
  explicit DiffusionService(Gateway* gateway);  // not owned

  // The typed overloads stay unused (the raw handlers replace them).
  using DiffusionServiceBase::Generate;
  using DiffusionServiceBase::GenerateStream;
  using DiffusionServiceBase::Tokenize;
  grpc::ServerUnaryReactor* Generate(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* GenerateStream(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const v1::GetModelInfoRequest* request,
                                         v1::GetModelInfoResponse* response) override;

 private:
  Gateway* const gateway_;
};

}  // namespace dllm

#endif  // DLLM_SERVER_GRPC_DIFFUSION_SERVICE_H_
