#include "engine/model/safetensors_header.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "nlohmann/json.hpp"
#include "tests/engine/model/safetensors_fixture.h"

namespace dllm {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using testing::F32Bytes;
using testing::FixtureTensor;

// Builds file bytes: 8-byte length (default: the real one), header text, data.
std::vector<uint8_t> FileBytes(std::string_view header, size_t data_bytes,
                               std::optional<uint64_t> length = std::nullopt) {
  const uint64_t n = length.value_or(header.size());
  std::vector<uint8_t> bytes(8 + header.size() + data_bytes, 0xab);
  std::memcpy(bytes.data(), &n, 8);
  std::memcpy(bytes.data() + 8, header.data(), header.size());
  return bytes;
}

// Header whose data section starts 8-byte aligned, as real writers pad it.
std::vector<uint8_t> JsonBytes(const Json& header, size_t data_bytes) {
  return FileBytes(testing::PaddedHeader(header), data_bytes);
}

Json Entry(const std::string& dtype, std::vector<int64_t> shape, uint64_t begin, uint64_t end) {
  return {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {begin, end}}};
}

absl::StatusOr<SafetensorsHeader> Parse(const std::vector<uint8_t>& bytes) {
  return ParseSafetensorsHeader(bytes, "f.safetensors");
}

// Parsing fails and the message contains the file name and every one of `parts`.
void CheckError(const std::vector<uint8_t>& bytes, std::initializer_list<std::string> parts) {
  auto h = Parse(bytes);
  REQUIRE(!h.ok());
  const std::string message(h.status().message());
  INFO(message);
  CHECK(message.find("f.safetensors") != std::string::npos);
  for (const std::string& part : parts) CHECK(message.find(part) != std::string::npos);
}

TEST_CASE("Safetensors header: well-formed file", "[safetensors]") {
  Json header = {{"__metadata__", {{"format", "pt"}}},
                 {"w", Entry("BF16", {2, 3}, 0, 12)},
                 {"b", Entry("F32", {3}, 12, 24)},
                 {"e", Entry("F16", {0, 5}, 24, 24)},
                 {"s", Entry("F32", {}, 24, 28)}};  // scalar: one element
  const std::string text = testing::PaddedHeader(header);
  auto h = Parse(JsonBytes(header, 28 + 5));  // trailing bytes are allowed
  REQUIRE(h.ok());
  CHECK(h->header_bytes == text.size());
  CHECK(h->data_offset == 8 + text.size());
  CHECK(h->data_bytes == 33);
  CHECK(h->metadata == std::map<std::string, std::string>{{"format", "pt"}});
  REQUIRE(h->tensors.size() == 4);
  CHECK(h->tensors[0].name == "b");  // sorted by name
  CHECK(h->tensors[0].dtype == DType::kF32);
  CHECK(h->tensors[0].file_begin == h->data_offset + 12);
  CHECK(h->tensors[0].file_end == h->data_offset + 24);
  CHECK(h->tensors[1].name == "e");
  CHECK(h->tensors[1].shape == std::vector<int64_t>{0, 5});
  CHECK(h->tensors[2].name == "s");
  CHECK(h->tensors[2].shape.empty());
  CHECK(h->tensors[3].name == "w");
  CHECK(h->tensors[3].dtype == DType::kBF16);
  CHECK(h->tensors[3].shape == std::vector<int64_t>{2, 3});
  CHECK(h->tensors[3].file_begin == h->data_offset);
}

TEST_CASE("Safetensors header: file too short or header length insane", "[safetensors]") {
  CheckError({}, {"too short"});
  CheckError({1, 0, 0, 0, 0, 0, 0}, {"too short"});
  CheckError(FileBytes("{}", 0, 0), {"too small"});
  CheckError(FileBytes("{}", 0, 1), {"too small"});
  // Header length beyond the end of the file (truncated header).
  CheckError(FileBytes("{\"a\":", 0, 100), {"100", "past the end"});
  // Just one byte too long.
  const std::string ok = "{}";
  CheckError(FileBytes(ok, 0, ok.size() + 1), {"past the end"});
  // Absurd length: refused before looking at the file size.
  CheckError(FileBytes("{}", 0, 200ull << 20), {"limit"});
  CheckError(FileBytes("{}", 0, ~0ull), {"limit"});
  auto empty = Parse(FileBytes("{}", 0));
  CHECK(empty.ok());
}

TEST_CASE("Safetensors header: malformed JSON", "[safetensors]") {
  CheckError(FileBytes("{not json}", 0), {"not valid JSON"});
  CheckError(FileBytes("[1, 2, 3]", 0), {"JSON object"});
  CheckError(FileBytes("\"str\"", 0), {"JSON object"});
  CheckError(FileBytes(std::string("{\"a\"\0:1}", 8), 0), {"not valid JSON"});
  CheckError(FileBytes("{\"w\":{\"dtype\":\"F32\",\"shape\":[[[1]]],\"data_offsets\":[0,4]}}", 4),
             {"nested"});
  CheckError(FileBytes(std::string(5000, '[') + std::string(5000, ']'), 0), {});
  // Invalid UTF-8 in a key.
  CheckError(FileBytes("{\"\xff\xfe\":{}}", 0), {"not valid JSON"});
  // Duplicate tensor name.
  CheckError(FileBytes("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                       "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                       8),
             {"'w'", "twice"});
}

TEST_CASE("Safetensors header: unsupported dtypes are named", "[safetensors]") {
  for (const char* dtype : {"I8", "U8", "I32", "I64", "F64", "BOOL", "F8_E4M3", "bf16", ""}) {
    Json header = {{"layer.w", Entry(dtype, {4}, 0, 4)}};
    CheckError(JsonBytes(header, 64),
               {"'layer.w'", std::string("\"") + dtype + "\"", "not supported", "BF16, F16, F32"});
  }
  Json header = {{"w", {{"dtype", 3}, {"shape", {1}}, {"data_offsets", {0, 4}}}}};
  CheckError(JsonBytes(header, 4), {"'w'", "dtype"});
}

TEST_CASE("Safetensors header: data_offsets are bounds-checked", "[safetensors]") {
  // Past the data section (truncated data).
  CheckError(JsonBytes(Json{{"w", Entry("F32", {4}, 0, 16)}}, 12), {"'w'", "[0, 16]", "12"});
  CheckError(JsonBytes(Json{{"w", Entry("F32", {1}, 1ull << 62, (1ull << 62) + 4)}}, 8),
             {"'w'", "past the data section"});
  // end < begin.
  CheckError(JsonBytes(Json{{"w", Entry("F32", {0}, 8, 4)}}, 16), {"'w'", "end before begin"});
  // Length does not match the shape.
  CheckError(JsonBytes(Json{{"w", Entry("F32", {2, 3}, 0, 20)}}, 64),
             {"'w'", "20 bytes", "[2, 3]", "F32", "24"});
  CheckError(JsonBytes(Json{{"w", Entry("BF16", {2, 3}, 0, 24)}}, 64), {"'w'", "needs 12"});
  // Malformed data_offsets.
  for (Json offsets : {Json{0}, Json{0, 4, 8}, Json{-4, 0}, Json{0.0, 4.0}, Json("0,4")}) {
    Json header = {{"w", {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", offsets}}}};
    CheckError(JsonBytes(header, 16), {"'w'", "data_offsets"});
  }
  Json no_offsets = {{"w", {{"dtype", "F32"}, {"shape", {1}}}}};
  CheckError(JsonBytes(no_offsets, 16), {"'w'", "data_offsets"});
}

TEST_CASE("Safetensors header: overlapping tensors are rejected", "[safetensors]") {
  CheckError(JsonBytes(Json{{"a", Entry("F32", {2}, 0, 8)}, {"b", Entry("F32", {2}, 4, 12)}}, 16),
             {"overlaps", "'a'", "'b'"});
  CheckError(JsonBytes(Json{{"a", Entry("F32", {2}, 0, 8)}, {"b", Entry("F32", {2}, 0, 8)}}, 16),
             {"overlaps"});
  // One range inside another, listed so that the inner one sorts first by name.
  CheckError(JsonBytes(Json{{"a", Entry("F32", {1}, 4, 8)}, {"z", Entry("F32", {4}, 0, 16)}}, 16),
             {"overlaps"});
  // Empty tensors share offsets with their neighbours without overlapping; gaps are allowed.
  auto ok = Parse(JsonBytes(Json{{"a", Entry("F32", {2}, 0, 8)},
                                 {"e", Entry("F32", {0}, 4, 4)},
                                 {"b", Entry("F32", {1}, 12, 16)}},
                            16));
  CHECK(ok.ok());
}

TEST_CASE("Safetensors header: shapes are validated and overflow-safe", "[safetensors]") {
  CheckError(JsonBytes(Json{{"w", Entry("F32", {1ll << 32, 1ll << 32}, 0, 0)}}, 0),
             {"'w'", "overflows"});
  // Element count fits int64 but the byte size does not.
  CheckError(JsonBytes(Json{{"w", Entry("F32", {1ll << 62}, 0, 0)}}, 0), {"'w'", "overflows"});
  // 2^63 - 1 elements of 4 bytes.
  CheckError(JsonBytes(Json{{"w", Entry("F32", {INT64_MAX}, 0, 0)}}, 0), {"'w'", "overflow"});
  // A zero after an overflowing prefix still overflows (NumElements multiplies in order).
  CheckError(JsonBytes(Json{{"w", Entry("F32", {1ll << 40, 1ll << 40, 0}, 0, 0)}}, 0),
             {"overflows"});
  CheckError(FileBytes("{\"w\":{\"dtype\":\"F32\",\"shape\":[18446744073709551615],"
                       "\"data_offsets\":[0,4]}}",
                       4),
             {"'w'", "too large"});
  for (Json shape : {Json{-1}, Json{1.5}, Json{"2"}, Json(4), Json(nullptr)}) {
    Json header = {{"w", {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {0, 4}}}}};
    CheckError(JsonBytes(header, 4), {"'w'", "shape"});
  }
}

TEST_CASE("Safetensors header: entries and metadata", "[safetensors]") {
  CheckError(JsonBytes(Json{{"w", 5}}, 0), {"'w'", "JSON object"});
  CheckError(JsonBytes(Json{{"", Entry("F32", {1}, 0, 4)}}, 4), {"empty tensor name"});
  CheckError(JsonBytes(Json{{"__metadata__", {{"k", 1}}}}, 0), {"__metadata__", "k"});
  CheckError(JsonBytes(Json{{"__metadata__", {1, 2}}}, 0), {"__metadata__"});
}

TEST_CASE("Safetensors header: every truncation and byte flip is handled", "[safetensors]") {
  const std::vector<FixtureTensor> tensors = {
      {"a", "F32", {2, 2}, F32Bytes({1, 2, 3, 4})},
      {"b", "BF16", {4}, testing::Bf16Bytes({1, 2, 3, 4})},
  };
  const std::string header = testing::PaddedHeader(testing::SafetensorsHeaderJson(tensors));
  const std::string data = testing::PackedData(tensors);
  const std::vector<uint8_t> good = FileBytes(header, 0);
  std::vector<uint8_t> file = good;
  file.insert(file.end(), data.begin(), data.end());
  REQUIRE(Parse(file).ok());
  for (size_t n = 0; n < file.size(); ++n) {
    std::vector<uint8_t> prefix(file.begin(), file.begin() + n);
    CHECK(!Parse(prefix).ok());
  }
  // Single-byte corruptions of the length and header: must never crash; a parse that still
  // succeeds must describe ranges inside the file.
  std::mt19937 rng(7);
  for (size_t i = 0; i < 8 + header.size(); ++i) {
    for (int trial = 0; trial < 4; ++trial) {
      std::vector<uint8_t> mutated = file;
      mutated[i] = static_cast<uint8_t>(rng());
      auto h = Parse(mutated);
      if (h.ok()) {
        for (const auto& t : h->tensors) CHECK(t.file_end <= mutated.size());
      }
    }
  }
}

TEST_CASE("Safetensors dtype names and sizes", "[safetensors]") {
  CHECK(*ParseSafetensorsDType("BF16") == DType::kBF16);
  CHECK(*ParseSafetensorsDType("F16") == DType::kF16);
  CHECK(*ParseSafetensorsDType("F32") == DType::kF32);
  CHECK(!ParseSafetensorsDType("F64").ok());
  for (DType d : {DType::kBF16, DType::kF16, DType::kF32}) {
    CHECK(*ParseSafetensorsDType(std::string(DTypeName(d))) == d);
  }
  CHECK(DTypeSize(DType::kBF16) == 2);
  CHECK(DTypeSize(DType::kF16) == 2);
  CHECK(DTypeSize(DType::kF32) == 4);
}

}  // namespace
}  // namespace dllm
