// RefusalStatus: how a call refused before it reached the engine is counted.
//
// A call can be refused (undecodable bytes, failed admission) after its client has already
// given up on it: its deadline passed, or its client cancelled while the call waited for a
// server thread under load. Such a call can even arrive without its message: the client gave
// up before sending it, and gRPC still runs a raw (ByteBuffer) handler, with no payload,
// before it reports the cancellation. Metrics and logs must count what the client saw, not
// the refusal: DEADLINE_EXCEEDED or CANCELLED.
//
// The client's deadline timer fires slightly before the server's (the server starts its own
// when the headers arrive), so a cancellation within EngineRequestLink::kDeadlineSlack of the
// deadline is that timer: DEADLINE_EXCEEDED, as for calls that reached the engine.
#ifndef DLLM_SERVER_REFUSAL_STATUS_H_
#define DLLM_SERVER_REFUSAL_STATUS_H_

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace dllm {

// `now`: when the refusal is reported; `deadline`: the call's (InfiniteFuture when none);
// `cancelled`: whether the call was cancelled (gRPC reports a passed deadline as a
// cancellation too); `message_arrived`: whether the request message arrived (a call without
// it within the slack of its deadline is that deadline, before gRPC says so; elsewhere the
// refusal stands: a client that half-closed without a message is told so); `refusal`: the
// reason the server refused the call. Pure function.
absl::Status RefusalStatus(absl::Time now, absl::Time deadline, bool cancelled,
                           bool message_arrived, const absl::Status& refusal);

}  // namespace dllm

#endif  // DLLM_SERVER_REFUSAL_STATUS_H_
