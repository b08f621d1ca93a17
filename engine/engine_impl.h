// EngineImpl: the Engine behind engine.h. Submit validates and tokenizes on the caller's
// thread and hands the request to the Worker; the Worker owns the model.
//
// CreateEngineForTesting builds an engine around any StepExecutor and Tokenizer (fakes in
// unit tests); Engine::Create loads a model folder and wraps its Transformer.
#ifndef DLLM_ENGINE_ENGINE_IMPL_H_
#define DLLM_ENGINE_ENGINE_IMPL_H_

#include <memory>

#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "engine/model/generation_config.h"
#include "engine/model/model_config.h"
#include "engine/scheduler/step_executor.h"
#include "engine/tokenizer/tokenizer.h"

namespace dllm {

// Per-family defaults: LLaDA block schedule with low_confidence remasking; Dream timestep
// schedule with the entropy algorithm and eps 1e-3. steps = 0 (= max_new_tokens).
DecodingParams DefaultDecodingParams(ModelFamily family);

// Fills ModelInfo from a model config (end tokens: eos and eot, when set).
ModelInfo MakeModelInfo(const ModelConfig& config, const std::string& model_dir,
                        const GenerationDefaults& generation = {});

struct LoadedModel;

// INVALID_ARGUMENT naming the option when one of `options`' engine settings (batch, queue,
// limits, shadow sampling) is out of range; the model is not looked at.
absl::Status ValidateEngineOptions(const EngineOptions& options);

// The production engine over a loaded model (Engine::Create uses it). Validates `options`
// (ValidateEngineOptions).
// `executor`, when given, runs the steps instead of the model's own transformer executor: the
// serving simulator wraps that executor (MakeTransformerExecutor over the same model) to
// charge each step a latency model's time. It must only use `model`'s objects, which the
// engine keeps alive as long as the executor.
absl::StatusOr<std::unique_ptr<Engine>> CreateEngineFromLoadedModel(
    const EngineOptions& options, std::unique_ptr<LoadedModel> model,
    std::unique_ptr<StepExecutor> executor = nullptr);

// `config` supplies family, vocabulary, positions, mask/end ids and the logit shift.
absl::StatusOr<std::unique_ptr<Engine>> CreateEngineForTesting(
    const EngineOptions& options, const ModelConfig& config, std::unique_ptr<StepExecutor> executor,
    std::unique_ptr<Tokenizer> tokenizer);

}  // namespace dllm

#endif  // DLLM_ENGINE_ENGINE_IMPL_H_
