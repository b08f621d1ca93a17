#include "engine/core/shortest_decimal.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace dllm {
namespace {

TEST_CASE("ShortestDecimal: short for ordinary values, exact for values next to a bound") {
  CHECK(ShortestDecimal(0.5f) == "0.5");
  CHECK(ShortestDecimal(0.1f) == "0.1");  // not 0.100000001
  CHECK(ShortestDecimal(1.0f) == "1");
  CHECK(ShortestDecimal(std::nextafter(1.0f, 2.0f)) == "1.0000001");
  CHECK(ShortestDecimal(std::nextafter(0.0f, 1.0f)) == "1e-45");
  CHECK(ShortestDecimal(2.5) == "2.5");
  CHECK(ShortestDecimal(std::nextafter(1.0, 2.0)) == "1.0000000000000002");
  CHECK(ShortestDecimal(std::numeric_limits<float>::infinity()) == "inf");
  CHECK(ShortestDecimal(-std::numeric_limits<float>::infinity()) == "-inf");
  CHECK(ShortestDecimal(std::numeric_limits<float>::quiet_NaN()) == "nan");
}

TEST_CASE("ShortestDecimal: reads back as the same value") {
  for (float v : {3.14159274f, 1e-39f, 123456.789f, -0.007f, 16777217.0f, 0.3f}) {
    INFO(v);
    CHECK(std::strtof(ShortestDecimal(v).c_str(), nullptr) == v);
  }
}

}  // namespace
}  // namespace dllm
