// Parity of the C++ tokenizer with an independent implementation (HF tokenizers.js) on real
// tokenizer files. The corpus, tokenizer files and reference ids under tests/data/tokenizer
// are produced by tools/tokenizer_parity/make_fixtures.mjs; nothing here was tuned to them.
#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>

#include "engine/tokenizer/normalizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"

namespace dllm {
namespace {

using nlohmann::json;

const std::string kDataDir = std::string(DLLM_TEST_DATA_DIR) + "/tokenizer";

json ReadJson(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::stringstream buffer;
  buffer << in.rdbuf();
  return json::parse(buffer.str());
}

const std::vector<std::string>& Corpus() {
  static const auto* const corpus = new std::vector<std::string>(
      ReadJson(kDataDir + "/corpus.json").get<std::vector<std::string>>());
  return *corpus;
}

std::unique_ptr<Tokenizer> LoadTimed(const std::string& name) {
  const auto start = std::chrono::steady_clock::now();
  auto tokenizer = Tokenizer::LoadFromDir(kDataDir + "/" + name);
  const auto elapsed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  INFO(tokenizer.status().ToString());
  REQUIRE(tokenizer.ok());
  std::cout << "[tokenizer] loaded " << name << " (" << (*tokenizer)->size() << " ids) in "
            << elapsed_ms << " ms\n";
  return std::move(*tokenizer);
}

std::string Escaped(const std::string& text) { return json(text).dump(); }

std::string IdsText(const std::vector<int32_t>& ids) { return json(ids).dump(); }

// Encodes the whole corpus and compares with the reference ids; reports the first mismatch.
void CheckParity(const Tokenizer& tokenizer, const std::string& ids_file) {
  const json reference = ReadJson(kDataDir + "/" + ids_file);
  const auto& expected = reference.at("ids");
  const auto& corpus = Corpus();
  REQUIRE(expected.size() == corpus.size());
  REQUIRE(corpus.size() >= 2000);
  size_t mismatches = 0;
  size_t first = corpus.size();
  std::vector<int32_t> first_actual;
  size_t tokens = 0;
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < corpus.size(); ++i) {
    const std::vector<int32_t> actual = tokenizer.Encode(corpus[i]);
    tokens += actual.size();
    if (actual != expected[i].get<std::vector<int32_t>>()) {
      if (mismatches++ == 0) {
        first = i;
        first_actual = actual;
      }
    }
  }
  const auto elapsed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::cout << "[tokenizer] " << ids_file << ": " << corpus.size() << " strings, " << tokens
            << " tokens encoded in " << elapsed_ms << " ms, " << mismatches << " mismatches\n";
  if (mismatches > 0) {
    FAIL_CHECK("first mismatch at corpus[" << first << "] = " << Escaped(corpus[first])
                                           << "\n  expected " << expected[first].dump()
                                           << "\n  actual   " << IdsText(first_actual));
  }
  CHECK(mismatches == 0);
}

// Decodes the reference id sequences (random ids, corpus slices cut inside UTF-8 characters,
// special tokens with skip on and off) and compares with the reference text.
void CheckDecodeParity(const Tokenizer& tokenizer, const std::string& decode_file) {
  const json reference = ReadJson(kDataDir + "/" + decode_file);
  const auto& cases = reference.at("cases");
  REQUIRE(cases.size() >= 500);
  size_t mismatches = 0;
  for (const json& c : cases) {
    const auto ids = c.at("ids").get<std::vector<int32_t>>();
    const std::string actual = tokenizer.Decode(ids, c.at("skip_special").get<bool>());
    const auto expected = c.at("text").get<std::string>();
    if (actual != expected && mismatches++ == 0) {
      FAIL_CHECK("first decode mismatch for "
                 << c.at("ids").dump() << " skip_special=" << c.at("skip_special").dump()
                 << "\n  expected " << Escaped(expected) << "\n  actual   " << Escaped(actual));
    }
  }
  std::cout << "[tokenizer] " << decode_file << ": " << cases.size() << " decodes, " << mismatches
            << " mismatches\n";
  CHECK(mismatches == 0);
}

void CheckRoundTrip(const Tokenizer& tokenizer, bool nfc) {
  const TextNormalizer normalizer = nfc ? TextNormalizer({UnicodeForm::kNfc}) : TextNormalizer();
  size_t failures = 0;
  for (const std::string& text : Corpus()) {
    const std::string decoded = tokenizer.Decode(tokenizer.Encode(text), /*skip_special=*/false);
    const std::string want = normalizer.Normalize(text);
    if (decoded != want && failures++ == 0) {
      FAIL_CHECK("decode(encode(s)) != s for " << Escaped(text) << "\n  got " << Escaped(decoded));
    }
  }
  CHECK(failures == 0);
}

TEST_CASE("Tokenizer parity: Qwen2.5 tokenizer.json", "[tokenizer][parity]") {
  const auto tokenizer = LoadTimed("qwen2_5");
  CHECK(tokenizer->size() == 151665);
  CheckParity(*tokenizer, "ids_qwen2_5.json");
  CheckDecodeParity(*tokenizer, "decode_qwen2_5.json");
  CheckRoundTrip(*tokenizer, /*nfc=*/true);
}

TEST_CASE("Tokenizer parity: Dream vocab.json + merges.txt", "[tokenizer][parity]") {
  const auto tokenizer = LoadTimed("dream_format");
  // docs/models.md §3.4: 151643 BPE tokens + 24 added tokens; <|mask|> = 151666.
  CHECK(tokenizer->size() == 151667);
  CHECK(tokenizer->TokenToId("<|mask|>") == 151666);
  CHECK(tokenizer->TokenToId("<|im_end|>") == 151645);
  CHECK(tokenizer->TokenToId("<|endoftext|>") == 151643);
  CHECK(tokenizer->IsSpecial(151666));
  CHECK(tokenizer->IsSpecial(151645));
  CHECK_FALSE(tokenizer->IsSpecial(151657));  // <tool_call> is added but not special
  CHECK_FALSE(tokenizer->IsSpecial(100));
  CheckParity(*tokenizer, "ids_dream.json");
  CheckDecodeParity(*tokenizer, "decode_dream.json");
  CheckRoundTrip(*tokenizer, /*nfc=*/true);
  const std::vector<int32_t> ids = tokenizer->Encode("Hi<|im_end|><|endoftext|>");
  CHECK(tokenizer->Decode(ids, /*skip_special=*/true) == "Hi");
}

TEST_CASE("Tokenizer parity: Llama-3 tokenizer.json", "[tokenizer][parity]") {
  const auto tokenizer = LoadTimed("llama3");
  CHECK(tokenizer->size() == 128256);
  CHECK(tokenizer->TokenToId("<|eot_id|>") == 128009);
  CheckParity(*tokenizer, "ids_llama3.json");
  CheckDecodeParity(*tokenizer, "decode_llama3.json");
  CheckRoundTrip(*tokenizer, /*nfc=*/false);
}

}  // namespace
}  // namespace dllm
