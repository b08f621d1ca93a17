// ShortestDecimal: the shortest decimal text that reads back as exactly the same float
// (or double), for error messages about values near a bound. Six significant digits (what
// absl::StrCat and %g print) turn 1.0000001f into "1", and "top_p: 1 is outside (0, 1]"
// contradicts itself; this prints "1.0000001".
//
// Thread-safety: pure functions.
#ifndef DLLM_ENGINE_CORE_SHORTEST_DECIMAL_H_
#define DLLM_ENGINE_CORE_SHORTEST_DECIMAL_H_

#include <string>

namespace dllm {

std::string ShortestDecimal(float value);
std::string ShortestDecimal(double value);

}  // namespace dllm

#endif  // DLLM_ENGINE_CORE_SHORTEST_DECIMAL_H_
