// Turns engine events and model facts into DiffusionLM response messages.
#ifndef DLLM_SERVER_RESPONSE_MAPPING_H_
#define DLLM_SERVER_RESPONSE_MAPPING_H_

#include <string>

#include "dllm/v1/dllm.pb.h"
#include "engine/engine.h"
#include "server/config.h"
#include "server/request_mapping.h"

namespace dllm {

v1::FinishReason ToProto(FinishReason reason);

// Fills text, ids, finish reason, usage, cache stats and timings.
void FillGenerateResponse(const std::string& request_id, const FinalEvent& event,
                          v1::GenerateResponse* out);
void FillCommittedDelta(const CommitEvent& event, v1::CommittedDelta* out);
void FillCanvasSnapshot(const SnapshotEvent& event, v1::CanvasSnapshot* out);

void FillModelInfo(const ModelInfo& model, BackendKind backend, const RequestDefaults& defaults,
                   const LimitsSection& limits, v1::GetModelInfoResponse* out);

}  // namespace dllm

#endif  // DLLM_SERVER_RESPONSE_MAPPING_H_
