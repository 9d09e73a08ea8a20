#include "core/predict/cpu/cpu_infer.h"

#include <algorithm>
#include <vector>

#include "core/common/thread_pool.h"
#include "core/model/transform.h"
#include "core/predict/cpu/cpu_transform_simd.h"
#include "core/predict/cpu/cpu_walk.h"
#include "core/predict/cpu/cpu_walk_avx2.h"
#include "core/predict/cpu/cpu_walk_simd.h"
#include "core/model/traverse.h"

namespace grove::cpu {
namespace {

// What every block of one call shares.
struct Call {
  const CpuForest* cf = nullptr;
  ForestView view;
  const int32_t* tree_ids = nullptr;  // the trees in range, in model order
  int32_t num_trees = 0;
  bool contiguous = false;  // tree_ids[j] == tree_ids[0] + j
  OutputKind kind = OutputKind::kMargin;
  TransformParams transform;
  int num_outputs = 1;
};

// The trees in range: a run of the forest's own list when rounds are in order (no allocation),
// else `storage`.
void ResolveTrees(const CpuForest& cf, const IterationRange& range, std::vector<int32_t>* storage,
                  Call* call) {
  if (cf.iterations_sorted()) {
    int32_t first = 0, last = 0;
    cf.TreeSpan(range.begin, range.end, &first, &last);
    call->tree_ids = cf.tree_ids() + first;
    call->num_trees = last - first;
    call->contiguous = true;
    return;
  }
  const Forest& f = cf.forest();
  for (int t = 0; t < cf.num_trees(); ++t) {
    if (f.TreeInRange(t, range.begin, range.end)) storage->push_back(t);
  }
  call->tree_ids = storage->data();
  call->num_trees = static_cast<int32_t>(storage->size());
}

absl::Status PrepareCall(const CpuForest& cf, RowsView rows, const PredictOptions& options,
                         MatrixView<float> out, std::vector<int32_t>* storage, Call* call) {
  const Forest& f = cf.forest();
  IterationRange range;
  if (absl::Status s = CheckPredictCall(f, rows, options, out, &range); !s.ok()) return s;
  call->cf = &cf;
  call->view = MakeForestView(f);
  ResolveTrees(cf, range, storage, call);
  call->kind = options.kind;
  call->transform = MakeTransformParams(f, range.size());
  call->num_outputs = f.num_outputs;
  return absl::OkStatus();
}

// Whether some value of the block is missing, with the vectors of the walk `cf` takes.
bool BlockHasNan(const CpuForest& cf, const float* block, int64_t stride, int rows, int64_t cols) {
  if (cf.simd_walk()) {
    for (int r = 0; r < rows; ++r) {
      if (HasNanSimd(block + r * stride, cols)) return true;
    }
    return false;
  }
  if (cf.avx2_walk()) {
    for (int r = 0; r < rows; ++r) {
      if (HasNanAvx2(block + r * stride, cols)) return true;
    }
    return false;
  }
  int nan = 0;
  for (int r = 0; r < rows; ++r) {
    const float* p = block + r * stride;
    for (int64_t c = 0; c < cols; ++c) nan |= p[c] != p[c];
  }
  return nan != 0;
}

void Walk(const CpuForest& cf, const int32_t* ids, int num_trees, const float* block,
          int64_t stride, int rows, bool nan, int32_t* idx) {
  bool general = false, categorical = false;
  for (int j = 0; j < num_trees; ++j) {
    general |= cf.trees()[ids[j]].general;
    categorical |= cf.trees()[ids[j]].categorical;
  }
  // The vector walk's row offsets are 32-bit. The scalar walk decides every categorical split
  // with the general decision.
  if (!general && cf.simd_walk() && stride * rows < (int64_t{1} << 31)) {
    WalkGroupSimd(cf, ids, num_trees, block, stride, rows, nan, idx);
  } else if (general || categorical) {
    if (nan) {
      WalkGroup<true, true>(cf, ids, num_trees, block, stride, rows, idx);
    } else {
      WalkGroup<false, true>(cf, ids, num_trees, block, stride, rows, idx);
    }
  } else if (nan) {
    WalkGroup<true, false>(cf, ids, num_trees, block, stride, rows, idx);
  } else {
    WalkGroup<false, false>(cf, ids, num_trees, block, stride, rows, idx);
  }
}

// Vector and linear leaves: the reference's LeafValue on the Forest's node. margin[k * stride] is
// the row's output k.
void AddLeafValues(const Call& c, int32_t tree_id, int64_t cpu_node, const float* row,
                   double* margin, int stride) {
  const Forest& f = c.cf->forest();
  const Tree& tree = f.trees[tree_id];
  const Node& leaf = f.nodes[c.cf->forest_node(cpu_node)];
  if (tree.leaf_width == 1) {
    margin[tree.group * stride] += tree.weight * LeafValue(c.view, leaf, 0, row);
    return;
  }
  for (int k = 0; k < tree.leaf_width; ++k) {
    margin[k * stride] += tree.weight * LeafValue(c.view, leaf, k, row);
  }
}

// The trees from t0 on that the fused vector walk takes (scalar leaves, no general split).
int32_t FusedRun(const Call& c, int32_t t0) {
  const CpuTree* trees = c.cf->trees();
  if (t0 < c.num_trees && c.contiguous) {
    const int32_t id = c.tree_ids[t0];
    return t0 + std::min(c.num_trees - t0, trees[id].fused_end - id);
  }
  int32_t t1 = t0;
  while (t1 < c.num_trees && trees[c.tree_ids[t1]].scalar && !trees[c.tree_ids[t1]].general) ++t1;
  return t1;
}

// Rows [row0, row0 + rows) of `in` (rows <= kMaxBlockRows) into `out`. `margins` holds
// (rows + 2) x num_outputs doubles (2 x num_outputs for one row): output k of row r at
// k * rows + r (a column per output, so that the vector walk adds a tree's leaves for sixteen rows
// at once), then one row's margins and its exponentials (softmax).
void RunBlock(const Call& c, RowsView in, int64_t row0, int rows, MatrixView<float> out,
              double* margins) {
  const CpuForest& cf = *c.cf;
  const Forest& f = cf.forest();
  const CpuTree* trees = cf.trees();
  const float* block = in.Row(row0);
  const bool nan = BlockHasNan(cf, block, in.stride, rows, in.cols);
  const int group = GroupTrees(std::min(rows, kMaxLanes));
  const int k_out = c.num_outputs;
  const bool fused = cf.simd_walk() && c.kind != OutputKind::kLeaf && rows % kSimdRows == 0 &&
                     in.stride * rows < (int64_t{1} << 31);
  // The AVX2 walk: runs of the trees it takes, for blocks of whole vectors of rows.
  const bool avx2 = cf.avx2_walk() && c.kind != OutputKind::kLeaf && rows % kAvx2Rows == 0 &&
                    in.stride * rows < (int64_t{1} << 31);
  int32_t idx[kMaxLanes];
  if (c.kind != OutputKind::kLeaf) {
    for (int k = 0; k < k_out; ++k) std::fill_n(margins + k * rows, rows, f.base_margin[k]);
  }
  // One row: the vectors across trees instead (WalkAndAddRowSimd).
  const bool row_walk = cf.simd_walk() && c.kind != OutputKind::kLeaf && rows == 1;
  for (int32_t t0 = 0; t0 < c.num_trees;) {
    if (row_walk) {
      if (const int32_t t1 = FusedRun(c, t0); t1 > t0) {
        WalkAndAddRowSimd(cf, c.tree_ids + t0, t1 - t0, block, nan, margins);
        t0 = t1;
        continue;
      }
    }
    if (fused) {
      if (const int32_t t1 = FusedRun(c, t0); t1 > t0) {
        WalkAndAddSimd(cf, c.tree_ids + t0, t1 - t0, block, in.stride, rows, nan, margins);
        t0 = t1;
        continue;
      }
    }
    int32_t end = c.num_trees;  // the trees the walks below may take from t0
    if (avx2) {
      int32_t t1 = t0;
      while (t1 < c.num_trees && Avx2WalkTakes(trees[c.tree_ids[t1]])) ++t1;
      if (t1 > t0) {
        WalkAndAddDenseAvx2(cf, c.tree_ids + t0, t1 - t0, block, in.stride, rows, nan, margins);
        t0 = t1;
        continue;
      }
      // Tree t0 is not taken: the scalar walk's group ends before the next one that is.
      while (t1 < c.num_trees && t1 - t0 < group && !Avx2WalkTakes(trees[c.tree_ids[t1]])) ++t1;
      end = t1;
    }
    // The other walks take the block kMaxLanes rows at a time, each sub-block through the same
    // group of trees: every row's leaves are still added in tree order.
    const int nt = std::min<int32_t>(group, end - t0);
    const int32_t* ids = c.tree_ids + t0;
    for (int s0 = 0; s0 < rows; s0 += kMaxLanes) {
      const int sub = std::min(kMaxLanes, rows - s0);
      Walk(cf, ids, nt, block + s0 * in.stride, in.stride, sub, nan, idx);
      if (c.kind == OutputKind::kLeaf) {
        for (int r = 0; r < sub; ++r) {
          float* o = out.Row(row0 + s0 + r);
          for (int j = 0; j < nt; ++j) {
            const int64_t leaf = trees[ids[j]].node_begin + idx[j * sub + r];
            o[t0 + j] = static_cast<float>(f.nodes[cf.forest_node(leaf)].leaf_id);
          }
        }
        continue;
      }
      // Per row, trees in model order: the reference's sum, bit for bit.
      for (int r = 0; r < sub; ++r) {
        double* m = margins + s0 + r;
        for (int j = 0; j < nt; ++j) {
          const CpuTree& tree = trees[ids[j]];
          const int64_t leaf = tree.node_begin + idx[j * sub + r];
          if (tree.scalar) {
            m[tree.group * rows] += cf.leaf_value(leaf);
          } else {
            AddLeafValues(c, ids[j], leaf, in.Row(row0 + s0 + r), m, rows);
          }
        }
      }
    }
    t0 += nt;
  }
  if (c.kind == OutputKind::kLeaf) return;
  // Eight rows at a time where the processor and the link allow (whatever walk the model takes):
  // the same bits.
  int vector_rows = 0;
  if ((c.kind == OutputKind::kMargin || VectorTransformTakes(c.transform)) &&
      (HaveSimdWalk() || HaveAvx2Transform())) {
    vector_rows = rows / kTransformRows * kTransformRows;
    if (vector_rows > 0) {
      (HaveSimdWalk() ? TransformBlock512 : TransformBlock256)(
          c.transform, c.kind == OutputKind::kMargin, margins, rows, vector_rows, out.Row(row0),
          out.stride);
    }
  }
  double* scratch = margins + static_cast<int64_t>(rows) * k_out;
  // One row's exponentials: after its margins, which for a single row are margins itself.
  double* exps = rows > 1 ? scratch + k_out : scratch;
  for (int r = vector_rows; r < rows; ++r) {
    const double* m = margins + r;
    if (rows > 1) {
      for (int k = 0; k < k_out; ++k) scratch[k] = margins[k * rows + r];
      m = scratch;
    }
    float* o = out.Row(row0 + r);
    if (c.kind == OutputKind::kMargin) {
      for (int k = 0; k < k_out; ++k) o[k] = static_cast<float>(m[k]);
    } else {
      TransformRow(c.transform, m, o, exps);
    }
  }
}

// Rows [row0, row0 + n) of `rows`, 1 < n < kSimdRows, as a block of kSimdRows rows: the rows then
// their last one repeated, so that the fused vector walk takes them (a partial block would walk
// the trees a few lanes at a time). Only the n real rows' results reach `out`; each row's result is
// its own walk and sum, so the padding changes none of them.
void RunPaddedBlock(const Call& c, RowsView rows, int64_t row0, int n, MatrixView<float> out,
                    double* margins) {
  thread_local std::vector<float> pad_rows;
  thread_local std::vector<float> pad_out;
  const int64_t cols = rows.cols;
  const int64_t width = out.cols;
  pad_rows.resize(static_cast<size_t>(kSimdRows * cols));
  pad_out.resize(static_cast<size_t>(kSimdRows * width));
  for (int r = 0; r < kSimdRows; ++r) {
    std::copy_n(rows.Row(row0 + std::min(r, n - 1)), cols, pad_rows.data() + r * cols);
  }
  RunBlock(c, RowsView{pad_rows.data(), kSimdRows, cols, cols}, 0, kSimdRows,
           MatrixView<float>{pad_out.data(), kSimdRows, width, width}, margins);
  for (int r = 0; r < n; ++r) std::copy_n(pad_out.data() + r * width, width, out.Row(row0 + r));
}

// Groups of kSimdRows rows per chunk of the pool at least: kPredictGrain rows, and enough rows
// for kMinChunkSeconds of one thread's work, so that a small batch of a small model runs on as
// few threads as its work needs: a hand-off to a worker costs about as much as that work, and a
// wide pool's hand-offs contend for its queue.
int64_t GrainGroups(const CpuForest& forest) {
  int64_t rows = kPredictGrain;
  if (forest.row_seconds() > 0) {
    rows = std::max(rows, static_cast<int64_t>(kMinChunkSeconds / forest.row_seconds()));
  }
  return (rows + kSimdRows - 1) / kSimdRows;
}

}  // namespace

absl::Status Predict(const CpuForest& forest, RowsView rows, const PredictOptions& options,
                     MatrixView<float> out, ThreadPool* pool) {
  std::vector<int32_t> storage;
  Call c;
  if (absl::Status s = PrepareCall(forest, rows, options, out, &storage, &c); !s.ok()) return s;
  if (rows.rows == 0) return absl::OkStatus();
  const int block_rows = forest.block_rows();
  // Threads split the batch at multiples of kSimdRows rows, so that every block but the batch's
  // last is whole vectors of rows; the last, when it is not, is padded to one (RunPaddedBlock).
  const bool pad = forest.simd_walk() && c.kind != OutputKind::kLeaf &&
                   block_rows % kSimdRows == 0 && rows.cols * kSimdRows < (int64_t{1} << 31);
  // The AVX2 walk takes whole vectors of kAvx2Rows rows: a block that is not is split into those
  // and its last few rows, which the scalar walk takes (rather than the whole block).
  const bool avx2_split = forest.avx2_walk() && c.kind != OutputKind::kLeaf;
  const int64_t groups = (rows.rows + kSimdRows - 1) / kSimdRows;
  ParallelFor(pool, groups, GrainGroups(forest), [&](int64_t g0, int64_t g1) {
    // Each thread's block margins, kept between calls: a call allocates nothing once a thread has
    // served the model's shape (a few KB per thread).
    thread_local std::vector<double> margins;
    const size_t block = static_cast<size_t>(std::max(block_rows, kSimdRows)) + 2;
    margins.resize(std::max(margins.size(), block * c.num_outputs));
    const int64_t end = std::min(rows.rows, g1 * kSimdRows);
    for (int64_t r = g0 * kSimdRows; r < end; r += block_rows) {
      const int n = static_cast<int>(std::min<int64_t>(block_rows, end - r));
      const int whole = n / kSimdRows * kSimdRows;
      if (!pad || n == whole || n == 1) {
        const int vectors = n / kAvx2Rows * kAvx2Rows;
        if (avx2_split && vectors > 0 && vectors < n) {
          RunBlock(c, rows, r, vectors, out, margins.data());
          RunBlock(c, rows, r + vectors, n - vectors, out, margins.data());
          continue;
        }
        RunBlock(c, rows, r, n, out, margins.data());
        continue;
      }
      if (whole > 0) RunBlock(c, rows, r, whole, out, margins.data());
      RunPaddedBlock(c, rows, r + whole, n - whole, out, margins.data());
    }
  });
  return absl::OkStatus();
}

absl::Status PredictRow(const CpuForest& forest, const float* row, const PredictOptions& options,
                        float* out) {
  const Forest& f = forest.forest();
  const RowsView in{row, 1, f.num_features, f.num_features};
  const int64_t width = PredictWidth(f, options);
  const MatrixView<float> o{out, 1, width, width};
  std::vector<int32_t> storage;
  Call c;
  if (absl::Status s = PrepareCall(forest, in, options, o, &storage, &c); !s.ok()) return s;
  if (c.num_outputs <= kRowStackOutputs) {
    double margins[2 * kRowStackOutputs];
    RunBlock(c, in, 0, 1, o, margins);
  } else {
    std::vector<double> margins(2 * c.num_outputs);
    RunBlock(c, in, 0, 1, o, margins.data());
  }
  return absl::OkStatus();
}

}  // namespace grove::cpu
