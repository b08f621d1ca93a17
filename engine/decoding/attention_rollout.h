// Attention rollout (Abnar & Zuidema 2020) as d2Cache uses it to rank the tokens whose K/V
// matter most, and d2Cache's nucleus selection over that ranking.
//
// Per layer l, the step's head-averaged attention A_l (rows: the step's query rows, columns:
// every canvas position) becomes a T x T matrix M_l: a query row i is (A_l[i] + e_i) divided
// by its sum (the residual stream's identity added, the row renormalized; 2 up to rounding);
// every row the step did not recompute is e_i ("unchanged"). The rollout is R = M_L ... M_2 M_1 and
// a position's importance is its column sum, (1^T R)[j]: how much all of the last layer's outputs
// draw on position j through every path.
//
// d2Cache forms R by multiplying T x T matrices layer after layer (O(T^3) per layer). Only the
// column sums are used, so this computes the same vector as a row vector pushed through the
// layers from the last to the first, v <- v M_l, which costs O(rows x T) per layer. Same
// mathematics, fp32 inputs, double accumulation.
#ifndef DLLM_ENGINE_DECODING_ATTENTION_ROLLOUT_H_
#define DLLM_ENGINE_DECODING_ATTENTION_ROLLOUT_H_

#include <cstdint>
#include <span>
#include <vector>

#include "engine/core/attention_maps.h"

namespace dllm {

// Column sums of the rollout of `maps`, whose row r is the query row at position
// query_rows[r] (ascending, size maps.rows). Length maps.positions; sums to maps.positions.
// Empty maps (no layers) give all ones: R = I.
std::vector<double> RolloutImportance(const AttentionMaps& maps,
                                      std::span<const int32_t> query_rows);

// d2Cache's nucleus over `importance`, skipping positions where `excluded` is nonzero (same
// length): the excluded scores are zeroed, the rest normalized to sum 1 and ranked by score
// (ties: lower position first); positions are taken while the running sum stays <= top_p (the
// one that crosses top_p is not), and the top-ranked one always. top_p >= 1 takes every
// position not excluded. As in d2Cache, scores that are all zero take every position (the
// running sum never passes top_p). Returns ascending positions; empty when all are excluded.
std::vector<int32_t> NucleusSelect(std::span<const double> importance,
                                   std::span<const uint8_t> excluded, double top_p);

}  // namespace dllm

#endif  // DLLM_ENGINE_DECODING_ATTENTION_ROLLOUT_H_
