// Checkpoint over safetensors files: single file or sharded through the HF index json.
//
// All validation happens in Open(): each file's header is parsed and bounds-checked
// (ParseSafetensorsHeader), and for a sharded checkpoint every weight_map entry is resolved to
// a tensor of the named shard. After that Get() is a map lookup; tensor bytes are only read
// (pread) when a caller asks the returned view for them.
#include "engine/model/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/core/file_text.h"
#include "engine/model/checkpoint_file.h"
#include "engine/model/safetensors_header.h"
#include "nlohmann/json.hpp"

namespace dllm {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr char kSingleFileName[] = "model.safetensors";
constexpr char kIndexFileName[] = "model.safetensors.index.json";
// Real index files are ~30 KB; refuse anything absurd before reading it into memory.
constexpr uintmax_t kMaxIndexBytes = 64ull << 20;

class SafetensorsCheckpoint final : public Checkpoint {
 public:
  absl::StatusOr<TensorView> Get(std::string_view name) const override {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) {
      return absl::NotFoundError(absl::StrCat("tensor '",
                                              absl::string_view(name.data(), name.size()),
                                              "' not found in checkpoint ", source_));
    }
    return it->second;
  }

  std::vector<std::string> TensorNames() const override {
    std::vector<std::string> names;
    names.reserve(tensors_.size());
    for (const auto& [name, view] : tensors_) names.push_back(name);
    return names;
  }

  // Opens `path` and validates its header, reading only the header's bytes; the returned
  // header lives as long as this object.
  absl::StatusOr<const SafetensorsHeader*> AddFile(const std::string& path) {
    auto file = CheckpointFile::Open(path);
    if (!file.ok()) return file.status();
    const uint64_t size_bytes = (*file)->size_bytes();
    std::vector<uint8_t> prefix(std::min<uint64_t>(size_bytes, 8));
    absl::Status read = (*file)->Read(0, prefix, "safetensors header length");
    if (!read.ok()) return read;
    prefix.resize(SafetensorsHeaderPrefixBytes(prefix, size_bytes));
    read = (*file)->Read(8, std::span<uint8_t>(prefix).subspan(std::min<size_t>(prefix.size(), 8)),
                         "safetensors header");
    if (!read.ok()) return read;
    auto header = ParseSafetensorsHeader(prefix, size_bytes, path);
    if (!header.ok()) return header.status();
    files_.push_back(*std::move(file));
    headers_.push_back(std::make_unique<SafetensorsHeader>(*std::move(header)));
    return headers_.back().get();
  }

  void AddTensor(const SafetensorsTensorInfo& info) {
    TensorView view;
    view.name = info.name;
    view.dtype = info.dtype;
    view.shape = info.shape;
    // The header parser checked file_end - file_begin == elements * dtype size and that the
    // range lies inside the file as it was at Open.
    view.file = files_.back().get();
    view.file_offset = info.file_begin;
    tensors_.insert_or_assign(info.name, std::move(view));
  }

  void set_source(std::string source) { source_ = std::move(source); }

 private:
  std::string source_;
  std::vector<std::unique_ptr<CheckpointFile>> files_;
  std::vector<std::unique_ptr<SafetensorsHeader>> headers_;
  std::map<std::string, TensorView, std::less<>> tensors_;
};

// Shard names come from a file we do not control: allow only relative paths that stay
// inside the model directory.
bool IsSafeRelativePath(const std::string& name) {
  if (name.empty()) return false;
  const fs::path p(name);
  if (p.is_absolute() || p.has_root_name()) return false;
  for (const auto& part : p) {
    if (part == "..") return false;
  }
  return true;
}

absl::StatusOr<std::unique_ptr<Checkpoint>> OpenSharded(const fs::path& dir) {
  const std::string index_path = (dir / kIndexFileName).string();
  auto text = ReadFileText(index_path, kMaxIndexBytes);
  if (!text.ok()) return text.status();
  Json index;
  try {
    index = Json::parse(*text);
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(index_path, ": invalid JSON: ", e.what()));
  }
  if (!index.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(index_path, ": must be a JSON object"));
  }
  auto weight_map = index.find("weight_map");
  if (weight_map == index.end() || !weight_map->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(index_path, ": missing or non-object \"weight_map\""));
  }
  if (weight_map->empty()) {
    return absl::InvalidArgumentError(absl::StrCat(index_path, ": \"weight_map\" is empty"));
  }
  // shard file name -> tensor names it must hold (ordered for deterministic errors).
  std::map<std::string, std::vector<std::string>> shards;
  for (const auto& [tensor, shard] : weight_map->items()) {
    if (!shard.is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(index_path, ": weight_map entry for tensor '",
                                                     tensor, "' is not a file name"));
    }
    const std::string& shard_name = shard.get_ref<const std::string&>();
    if (!IsSafeRelativePath(shard_name)) {
      return absl::InvalidArgumentError(
          absl::StrCat(index_path, ": weight_map entry for tensor '", tensor, "' names shard \"",
                       shard_name, "\", which is not a relative path inside the model folder"));
    }
    shards[shard_name].push_back(tensor);
  }

  auto checkpoint = std::make_unique<SafetensorsCheckpoint>();
  checkpoint->set_source(index_path);
  for (const auto& [shard_name, tensor_names] : shards) {
    const std::string shard_path = (dir / shard_name).string();
    std::error_code ec;
    if (!fs::exists(shard_path, ec)) {
      return absl::NotFoundError(absl::StrCat(shard_path, ": shard file not found (", index_path,
                                              " lists it for ", tensor_names.size(),
                                              " tensors, e.g. '", tensor_names.front(), "')"));
    }
    auto header = checkpoint->AddFile(shard_path);
    if (!header.ok()) return header.status();
    const auto& infos = (*header)->tensors;  // sorted by name
    for (const std::string& name : tensor_names) {
      auto it =
          std::lower_bound(infos.begin(), infos.end(), name,
                           [](const auto& info, const std::string& n) { return info.name < n; });
      if (it == infos.end() || it->name != name) {
        return absl::NotFoundError(absl::StrCat(shard_path, ": tensor '", name, "' is listed in ",
                                                index_path, " but not present in this shard"));
      }
      checkpoint->AddTensor(*it);
    }
  }
  return checkpoint;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Checkpoint>> Checkpoint::OpenFile(const std::string& path) {
  auto checkpoint = std::make_unique<SafetensorsCheckpoint>();
  checkpoint->set_source(path);
  auto header = checkpoint->AddFile(path);
  if (!header.ok()) return header.status();
  for (const auto& info : (*header)->tensors) checkpoint->AddTensor(info);
  return checkpoint;
}

absl::StatusOr<std::unique_ptr<Checkpoint>> Checkpoint::Open(const std::string& model_dir) {
  const fs::path dir(model_dir);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat(model_dir, ": model directory does not exist"));
  }
  if (fs::exists(dir / kIndexFileName, ec)) return OpenSharded(dir);
  if (fs::exists(dir / kSingleFileName, ec)) return OpenFile((dir / kSingleFileName).string());
  return absl::NotFoundError(
      absl::StrCat(model_dir, ": contains neither ", kSingleFileName, " nor ", kIndexFileName));
}

}  // namespace dllm
