// LoadedModel: everything one model folder turns into, ready for the engine worker.
#ifndef DLLM_ENGINE_MODEL_LOADED_MODEL_H_
#define DLLM_ENGINE_MODEL_LOADED_MODEL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/backend/backend.h"
#include "engine/kv/kv_pool.h"
#include "engine/model/checkpoint.h"
#include "engine/model/generation_config.h"
#include "engine/model/model_config.h"
#include "engine/model/transformer.h"
#include "engine/tokenizer/tokenizer.h"

namespace dllm {

struct LoadOptions {
  std::string model_dir;
  std::string backend = "cpu";  // cpu | cuda
  int cpu_threads = 0;          // 0: one per hardware thread
  int64_t kv_budget_bytes = int64_t{1} << 30;
};

struct LoadedModel {
  ModelConfig config;             // eot_token_id and bos filled from the tokenizer when known
  GenerationDefaults generation;  // from generation_config.json, when the folder has one
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Transformer> transformer;
  std::unique_ptr<KvPool> kv_pool;
};

// Reads config.json, the tokenizer files and the weights; checks every tensor; uploads.
// Errors name the file and the problem.
absl::StatusOr<std::unique_ptr<LoadedModel>> LoadModel(const LoadOptions& options);

}  // namespace dllm

#endif  // DLLM_ENGINE_MODEL_LOADED_MODEL_H_
