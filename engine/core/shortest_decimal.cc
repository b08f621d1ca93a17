#include "engine/core/shortest_decimal.h"

#include <charconv>
#include <cmath>

namespace dllm {
namespace {

template <typename T>
std::string Shortest(T value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  // std::to_chars without a precision is the shortest round-trip form.
  const std::to_chars_result r = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, r.ptr);
}

}  // namespace

std::string ShortestDecimal(float value) { return Shortest(value); }
std::string ShortestDecimal(double value) { return Shortest(value); }

}  // namespace dllm
