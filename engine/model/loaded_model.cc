#include "engine/model/loaded_model.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/backend/backend_factory.h"
#include "engine/model/model_weights.h"

#ifdef DLLM_HAVE_CUDA
#include "engine/backend/cuda/cuda_backend.h"
#endif

namespace dllm {
namespace {

// Same code, message prefixed with where it happened.
absl::Status Annotate(const absl::Status& status, const std::string& context) {
  return absl::Status(status.code(), absl::StrCat(context, ": ", status.message()));
}

// The id of the first of `names` the tokenizer knows, or -1.
int32_t FirstKnownToken(const Tokenizer& tokenizer, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (auto id = tokenizer.TokenToId(name); id.has_value()) return *id;
  }
  return -1;
}

}  // namespace

absl::StatusOr<std::unique_ptr<LoadedModel>> LoadModel(const LoadOptions& options) {
  const std::string& dir = options.model_dir;
  const std::string where = absl::StrCat("loading model ", dir);
  if (dir.empty()) return absl::InvalidArgumentError("loading model: model_dir is empty");
  if (options.kv_budget_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": kv_budget_bytes must be positive, got ", options.kv_budget_bytes));
  }
  auto model = std::make_unique<LoadedModel>();

  auto config = LoadModelConfig(dir);
  if (!config.ok()) return Annotate(config.status(), where);
  model->config = *config;

  auto generation = LoadGenerationConfig(dir);
  if (!generation.ok()) return Annotate(generation.status(), where);
  model->generation = *generation;

  auto tokenizer = Tokenizer::LoadFromDir(dir);
  if (!tokenizer.ok()) return Annotate(tokenizer.status(), where);
  model->tokenizer = std::move(*tokenizer);
  if (model->tokenizer->size() > model->config.vocab_size) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": the tokenizer knows ", model->tokenizer->size(),
                     " ids but the model has only ", model->config.vocab_size, " embedding rows"));
  }
  if (model->config.eot_token_id < 0) {
    model->config.eot_token_id = FirstKnownToken(*model->tokenizer, {"<|eot_id|>", "<|im_end|>"});
  }
  if (model->config.eot_token_id >= 0 &&
      model->config.eot_token_id == model->config.mask_token_id) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": the tokenizer's end-of-turn token is the mask token (id ",
        model->config.mask_token_id, "): the mask token must differ from end-of-sequence"));
  }
  if (model->config.bos_token_id < 0) {
    model->config.bos_token_id =
        FirstKnownToken(*model->tokenizer, {"<|startoftext|>", "<|beginoftext|>"});
  }

  auto checkpoint = Checkpoint::Open(dir);
  if (!checkpoint.ok()) return Annotate(checkpoint.status(), where);
  auto weights = MapModelWeights(**checkpoint, model->config);
  if (!weights.ok()) return Annotate(weights.status(), where);

  auto backend = CreateBackend(options.backend, options.cpu_threads);
  if (!backend.ok()) return Annotate(backend.status(), where);
  model->backend = std::move(*backend);

  // Weights are read from the checkpoint files and copied to the backend here, one tensor at a
  // time; the files are closed when `checkpoint` goes out of scope.
  auto transformer = Transformer::Create(model->config, *weights, model->backend.get());
  if (!transformer.ok()) return Annotate(transformer.status(), where);
  model->transformer = std::move(*transformer);

  model->kv_pool = std::make_unique<KvPool>(model->backend.get(), model->config.kv_layout(),
                                            options.kv_budget_bytes);
#ifdef DLLM_HAVE_CUDA
  // The CUDA backend carves KV slabs out of a device arena: reserving the whole KV budget now
  // means admitting a sequence never calls cudaMalloc (engine/backend/cuda/cuda_backend.h).
  if (auto* cuda = dynamic_cast<CudaBackend*>(model->backend.get())) {
    absl::Status reserved = cuda->ReserveArena(options.kv_budget_bytes);
    if (!reserved.ok()) return Annotate(reserved, where);
  }
#endif
  return model;
}

}  // namespace dllm
