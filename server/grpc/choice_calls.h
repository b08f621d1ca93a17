// ChoiceCalls: the engine requests of one gRPC generation call, one per choice
// (GenerateRequest.n, 1 when unset), each a GatewayCall of its own (gateway_call.h): its own
// admission, queue place, call record and final status. Choice i decodes with seed + i (the
// admitted seed: the request's, else the configured default). Admission is all or nothing:
// when one choice is refused, those already started are cancelled (their final events still
// arrive) and the call ends with the refusal.
//
// The reactor that owns a ChoiceCalls gets every choice's events through ChoiceEvents, tagged
// with the choice's index; each choice's sink holds the reactor (shared) until the engine is
// done with it, as a single call's sink does.
//
// Thread-safety: Identify and Start on the reactor's starting thread; Cancel, Close and the
// accessors from any thread once Start has returned (the calls themselves are thread-safe as
// GatewayCall says). Events arrive on the engine worker, possibly before Start returns.
#ifndef DLLM_SERVER_GRPC_CHOICE_CALLS_H_
#define DLLM_SERVER_GRPC_CHOICE_CALLS_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "dllm/v1/dllm.pb.h"
#include "engine/engine.h"
#include "server/gateway.h"
#include "server/gateway_call.h"

namespace dllm {

// What a reactor implements to get its choices' events.
class ChoiceEvents {
 public:
  virtual ~ChoiceEvents() = default;
  virtual void OnChoiceCommit(int index, const CommitEvent& event) = 0;
  virtual void OnChoiceSnapshot(int index, const SnapshotEvent& event) = 0;
  virtual void OnChoiceFinal(int index, const FinalEvent& event) = 0;
};

class ChoiceCalls {
 public:
  // The bound on n this class will make calls for before admission checks it against
  // limits.max_choices (whose own range ends here): a larger n makes one call, which the
  // gateway then refuses naming `n`.
  static constexpr int kMaxChoices = 128;

  // `method`, `protocol` and `gateway` as GatewayCall's.
  ChoiceCalls(Gateway* gateway, const char* method, const char* protocol);

  // Fixes the number of choices from `request` and the id every choice is logged and answered
  // under (GatewayCall::Identify of choice 0; the others share it).
  const std::string& Identify(const v1::GenerateRequest& request);
  const std::string& request_id() const { return calls_[0]->request_id(); }
  int size() const { return static_cast<int>(calls_.size()); }
  GatewayCall& call(int index) { return *calls_[static_cast<size_t>(index)]; }
  const GatewayCall& call(int index) const { return *calls_[static_cast<size_t>(index)]; }

  // Starts the choices in order (GatewayCall::Start) with `owner` getting their events. On a
  // refusal returns it, having cancelled the choices started before it: `*started` is how
  // many were (their finals are still to come), and choice `*started` is the refused one (the
  // reactor Records the refusal on it).
  absl::Status Start(Gateway::TokenCheck token_check, std::optional<std::string_view> authorization,
                     absl::Time deadline, const v1::GenerateRequest& request,
                     const std::shared_ptr<ChoiceEvents>& owner, int* started);

  void Cancel();  // every choice (forwarded to the engine once submitted)
  void Close();   // every choice: the transport is done with the call

 private:
  Gateway* const gateway_;
  const char* const method_;
  const char* const protocol_;
  std::vector<std::unique_ptr<GatewayCall>> calls_;  // at least one
};

// The status of a call whose choices ended with `statuses` (in index order): OK when any
// succeeded, else the first one's.
absl::Status CallStatus(const std::vector<absl::Status>& statuses);

// A failed choice's entry in GenerateResponse.choices (or its stream's final): its index and
// its status as ChoiceError.
void FillChoiceError(const std::string& request_id, int index, const absl::Status& status,
                     v1::GenerateResponse* out);

}  // namespace dllm

#endif  // DLLM_SERVER_GRPC_CHOICE_CALLS_H_
