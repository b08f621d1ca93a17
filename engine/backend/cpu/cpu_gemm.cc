#include "engine/backend/cpu/cpu_gemm.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>

namespace dllm {
namespace {

// Dot product with eight interleaved partial sums combined in a fixed order: the same
// arithmetic for a given (x row, w row) whatever else is being computed.
float FixedOrderDot(const float* a, const float* b, int64_t k) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  }
  for (; i < k; ++i) acc[i & 7] += a[i] * b[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

}  // namespace

int64_t CpuGemmMinRows(int64_t n, int64_t k) {
  const int64_t elements = n * k;
  if (elements <= kSmallWeightElements) return 1;
  return std::max<int64_t>(1, (kMinGemmMacs + elements - 1) / elements);
}

void CpuGemm(const float* x, int64_t rows, int64_t k, const float* w, int64_t n, bool accumulate,
             float* y, std::vector<float>* scratch) {
  if (rows <= 0) return;
  if (n * k <= kSmallWeightElements) {
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * k;
      float* yr = y + r * n;
      for (int64_t o = 0; o < n; ++o) {
        const float dot = FixedOrderDot(xr, w + o * k, k);
        yr[o] = accumulate ? yr[o] + dot : dot;
      }
    }
    return;
  }
  const int64_t min_rows = CpuGemmMinRows(n, k);
  if (rows >= min_rows) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows),
                static_cast<int>(n), static_cast<int>(k), 1.0f, x, static_cast<int>(k), w,
                static_cast<int>(k), accumulate ? 1.0f : 0.0f, y, static_cast<int>(n));
    return;
  }
  // Pad: [min_rows, k] input (zeros past `rows`) and [min_rows, n] output in scratch.
  const size_t in_elems = static_cast<size_t>(min_rows * k);
  const size_t out_elems = static_cast<size_t>(min_rows * n);
  if (scratch->size() < in_elems + out_elems) scratch->resize(in_elems + out_elems);
  float* px = scratch->data();
  float* py = px + in_elems;
  std::memcpy(px, x, sizeof(float) * rows * k);
  std::memset(px + rows * k, 0, sizeof(float) * (min_rows - rows) * k);
  if (accumulate) {
    std::memcpy(py, y, sizeof(float) * rows * n);
    std::memset(py + rows * n, 0, sizeof(float) * (min_rows - rows) * n);
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(min_rows),
              static_cast<int>(n), static_cast<int>(k), 1.0f, px, static_cast<int>(k), w,
              static_cast<int>(k), accumulate ? 1.0f : 0.0f, py, static_cast<int>(n));
  std::memcpy(y, py, sizeof(float) * rows * n);
}

}  // namespace dllm
