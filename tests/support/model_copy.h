// ModelCopy: a scratch copy of a shipped model folder (models/<name>) that a test may edit
// (config.json, safetensors bytes) and load, for the hostile-model-folder tests of the engine
// and the server's warm-up. Needs DLLM_SOURCE_DIR.
#ifndef DLLM_TESTS_SUPPORT_MODEL_COPY_H_
#define DLLM_TESTS_SUPPORT_MODEL_COPY_H_

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "engine/engine.h"

namespace dllm::testing {

namespace fs = std::filesystem;
using Json = nlohmann::json;

inline std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void WriteFile(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// A fresh copy of models/<name> in a temporary folder (removed on destruction).
class ModelCopy {
 public:
  explicit ModelCopy(const std::string& name) {
    dir_ =
        fs::temp_directory_path() / ("dllm-model-copy-" + name + "-" + std::to_string(::getpid()) +
                                     "-" + std::to_string(counter_++));
    fs::remove_all(dir_);
    fs::copy(fs::path(DLLM_SOURCE_DIR) / "models" / name, dir_, fs::copy_options::recursive);
  }
  ~ModelCopy() { fs::remove_all(dir_); }
  const fs::path& dir() const { return dir_; }

  void EditConfig(const std::function<void(Json&)>& edit) {
    Json config = Json::parse(ReadFile(dir_ / "config.json"));
    edit(config);
    WriteFile(dir_ / "config.json", config.dump(2));
  }

 private:
  static inline int counter_ = 0;
  fs::path dir_;
};

// Loads a model folder on the CPU backend with one thread and a 64 MiB KV budget.
inline absl::StatusOr<std::unique_ptr<Engine>> Load(const fs::path& dir) {
  EngineOptions options;
  options.model_dir = dir.string();
  options.cpu_threads = 1;
  options.kv_budget_bytes = int64_t{64} << 20;
  return Engine::Create(options);
}

}  // namespace dllm::testing

#endif  // DLLM_TESTS_SUPPORT_MODEL_COPY_H_
