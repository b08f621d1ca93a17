// Elementwise exp-based kernels of the CPU backend, vectorized with Highway.
//
// Numerics contract: CpuExpF is a fixed sequence of fp32 operations (range reduction by
// round-to-nearest-even n = x·log2(e), r = x - n·ln2 in two fused steps, a degree-5
// polynomial by fused Horner steps, scaling by 2^n through the exponent bits). Every SIMD
// target runs exactly these operations, and the scalar path spells them out with std::fma,
// so every target gives the same bits (tests/engine/backend/cpu_vector_math_test.cc forces
// each one). Relative error against the exact exponential: below 2 ulp for x in
// [-87.3, 88.7]; below that the result is +0, above it +inf. Elementwise, so nothing depends on
// batch composition either.
//
// Glibc's expf was a fifth of a tiny model's step time as a scalar call per element.
#ifndef DLLM_ENGINE_BACKEND_CPU_CPU_VECTOR_MATH_H_
#define DLLM_ENGINE_BACKEND_CPU_CPU_VECTOR_MATH_H_

#include <cstdint>

namespace dllm {

// exp(x) under the contract above (the scalar reference every target matches).
float CpuExpF(float x);

// out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + CpuExpF(-g)) (fp32 ops in that order).
// out may alias gate or up.
void CpuSwiGlu(const float* gate, const float* up, int64_t n, float* out);

// s[i] = CpuExpF(s[i] - shift), in place (softmax numerators).
void CpuExpShifted(float* s, int64_t n, float shift);

// y[i] = y[i] + f * x[i]: a product rounded to fp32, then a sum rounded to fp32 (never one
// fused multiply-add), so every target gives the scalar loop's bits. Accumulates attention
// probabilities over heads.
void CpuAddScaled(const float* x, int64_t n, float f, float* y);

}  // namespace dllm

#endif  // DLLM_ENGINE_BACKEND_CPU_CPU_VECTOR_MATH_H_
