#include "server/http/http_stop_sequences.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace dllm {
namespace {

// Feeds `deltas`, returns everything emitted (Append outputs + Finish).
std::string Run(StopSequences& s, const std::vector<std::string>& deltas) {
  std::string out;
  for (const std::string& d : deltas) out += s.Append(d);
  return out + s.Finish();
}

TEST_CASE("stop sequences: without stops everything passes through at once") {
  StopSequences s({});
  CHECK(s.empty());
  CHECK(s.Append("abc") == "abc");
  CHECK(s.Finish().empty());
  CHECK_FALSE(s.stopped());
}

TEST_CASE("stop sequences: the answer ends before the first stop string") {
  StopSequences s({"\n\n", "END"});
  CHECK(Run(s, {"hello wor", "ld\n", "\nmore text"}) == "hello world");
  CHECK(s.stopped());
  CHECK(s.Append("later").empty());

  StopSequences t({"END", "wor"});  // the earliest match wins, whichever string it is
  CHECK(Run(t, {"hello world END"}) == "hello ");
}

TEST_CASE("stop sequences: a stop string split across deltas is held back, then cut") {
  StopSequences s({"STOP"});
  CHECK(s.Append("abcST") == "ab");  // the last 3 bytes could start "STOP"
  CHECK(s.Append("O") == "c");       // "STO" still could
  CHECK(s.Append("P tail") == "");   // it did: nothing of it is emitted
  CHECK(s.stopped());
}

TEST_CASE("stop sequences: held-back text comes out when no stop appears") {
  StopSequences s({"STOP"});
  const std::vector<std::string> deltas = {"a", "bS", "T", "Ox", "yz"};
  std::string all;
  for (const auto& d : deltas) all += d;
  CHECK(Run(s, deltas) == all);
  CHECK_FALSE(s.stopped());
}

TEST_CASE("stop sequences: never splits a UTF-8 character") {
  StopSequences s({"xyz"});
  // "é" is two bytes; holding back 2 bytes must not cut it in half.
  const std::string out = s.Append("ab\xc3\xa9");
  CHECK((out == "ab" || out == "a"));
  CHECK(out + s.Finish() == "ab\xc3\xa9");
  StopSequences t({"\xc3\xa9"});
  CHECK(Run(t, {"caf\xc3", "\xa9 au lait"}) == "caf");
}

}  // namespace
}  // namespace dllm
