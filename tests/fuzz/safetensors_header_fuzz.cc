// libFuzzer target: ParseSafetensorsHeader over arbitrary bytes.
//
// Besides "no crash, no sanitizer report", the prefix-only parse (what the checkpoint reader
// does) must agree with the whole-file parse, and every accepted header is checked against the
// parser's contract: ranges inside the data section, byte length == elements * dtype size,
// non-overlapping (offsets may be unaligned). The bytes of small accepted tensors are converted
// with TensorView::ToFloat so that ASan sees any out-of-range view.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "engine/model/checkpoint.h"
#include "engine/model/safetensors_header.h"

namespace {

void Require(bool condition) {
  if (!condition) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> file(data, size);
  auto header = dllm::ParseSafetensorsHeader(file, "fuzz.safetensors");
  // The checkpoint reader parses only the prefix SafetensorsHeaderPrefixBytes asks for: it must
  // reach the same verdict as the whole-file parse.
  const uint64_t prefix_bytes = dllm::SafetensorsHeaderPrefixBytes(file, size);
  Require(prefix_bytes <= size);
  auto from_prefix =
      dllm::ParseSafetensorsHeader(file.first(prefix_bytes), size, "fuzz.safetensors");
  Require(from_prefix.ok() == header.ok());
  if (!header.ok()) {
    Require(!header.status().message().empty());
    Require(from_prefix.status().message() == header.status().message());
    return 0;
  }
  Require(from_prefix->tensors.size() == header->tensors.size());
  Require(header->data_offset == 8 + header->header_bytes);
  Require(header->data_offset + header->data_bytes == size);
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  std::vector<float> values;
  for (const auto& info : header->tensors) {
    Require(info.file_begin >= header->data_offset);
    Require(info.file_begin <= info.file_end && info.file_end <= size);
    dllm::TensorView view;
    view.name = info.name;
    view.dtype = info.dtype;
    view.shape = info.shape;
    view.bytes = file.subspan(info.file_begin, info.file_end - info.file_begin);
    const uint64_t elements = static_cast<uint64_t>(view.NumElements());
    Require(elements * dllm::DTypeSize(info.dtype) == view.bytes.size());
    if (!view.bytes.empty()) {
      ranges.emplace_back(info.file_begin, info.file_end);
    }
    if (elements <= 4096) Require(view.ToFloat(&values).ok());
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) Require(ranges[i].first >= ranges[i - 1].second);
  return 0;
}
