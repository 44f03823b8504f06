// A small cache of matmul plans keyed by everything a cuBLASLt plan depends on: shape, leading
// dimensions, transposes, storage type, epilogue and pointer alignments. GPT-2 issues about a
// dozen distinct matmuls, ~150 times a step; building each plan (descriptors, layouts and a
// heuristic query) once instead of per call is the point. Plan is any owning type: when the
// builder throws, nothing is cached and whatever it had made is freed by its own owners.
// Not thread safe: one per stream of work. C++17 (included by .cu files).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <tuple>
#include <unordered_map>

namespace dsx::kernels {

struct MatmulShape {
  int m = 0, n = 0, k = 0;
  int lda = 0, ldb = 0, ldd = 0;
  bool trans_a = false, trans_b = false;
  int dtype = 0;     // the storage type (a cudaDataType_t value)
  int epilogue = 0;  // a cublasLtEpilogue_t value
  uint32_t align_a = 0, align_b = 0, align_d = 0;  // bytes, as told to the heuristic

  auto tie() const {
    return std::tie(m, n, k, lda, ldb, ldd, trans_a, trans_b, dtype, epilogue, align_a, align_b, align_d);
  }
  bool operator==(const MatmulShape& o) const { return tie() == o.tie(); }
};

struct MatmulShapeHash {
  size_t operator()(const MatmulShape& s) const {
    size_t h = 0;
    auto mix = [&h](uint64_t v) { h ^= std::hash<uint64_t>()(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
    mix(uint64_t(uint32_t(s.m)) << 32 | uint32_t(s.n));
    mix(uint64_t(uint32_t(s.k)) << 32 | uint32_t(s.lda));
    mix(uint64_t(uint32_t(s.ldb)) << 32 | uint32_t(s.ldd));
    mix(uint64_t(s.trans_a) | uint64_t(s.trans_b) << 1 | uint64_t(uint32_t(s.dtype)) << 2 | uint64_t(uint32_t(s.epilogue)) << 34);
    mix(uint64_t(s.align_a) | uint64_t(s.align_b) << 16 | uint64_t(s.align_d) << 32);
    return h;
  }
};

template <class Plan>
class MatmulPlanCache {
 public:
  explicit MatmulPlanCache(size_t capacity = 128) : capacity_(capacity) {}

  // The plan for `shape`, made by build() (returning std::unique_ptr<Plan>) the first time. The
  // reference stays valid until the next get().
  template <class Build>
  Plan& get(const MatmulShape& shape, Build&& build) {
    if (auto it = plans_.find(shape); it != plans_.end()) return *it->second;
    std::unique_ptr<Plan> plan = build();  // may throw: nothing cached, nothing leaked
    ++builds_;
    // A model with more shapes than this rebuilds them; dropping all keeps the code trivial.
    if (plans_.size() >= capacity_) plans_.clear();
    return *plans_.emplace(shape, std::move(plan)).first->second;
  }

  size_t size() const { return plans_.size(); }
  size_t builds() const { return builds_; }  // how many plans were made: the cost the cache saves

 private:
  size_t capacity_;
  size_t builds_ = 0;
  std::unordered_map<MatmulShape, std::unique_ptr<Plan>, MatmulShapeHash> plans_;
};

}  // namespace dsx::kernels
