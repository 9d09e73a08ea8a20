// GPU entry points of the five GPU inference strategies: the four of Tahoe (Xie et al., EuroSys'21,
// §5.1) and row chunk. Compiles with g++ (only the CUDA runtime API header is needed); the kernels
// live in tahoe_kernels.cuh and are launched from tahoe_kernels.cu. Included only from
// CUDA-enabled translation units.
//
// Strategies (all walk the adaptive format of tahoe_forest.h with the GROVE_HD per-row logic):
//  * direct: one thread per row walks every tree; nodes and rows read from global memory; no shared
//    memory, no reduction;
//  * shared data: a block stages kSharedDataRows rows in shared memory (feature-major, conflict
//    free); `groups` thread groups of kSharedDataRows threads each walk one part of the forest
//    (TahoeForest::Assignment(groups)) and a block-wise reduction adds the group sums in group order;
//  * shared forest: every block copies the whole forest (nodes + tree records) into shared memory
//    once and then walks rows from global memory in a grid-stride loop; no reduction;
//  * splitting shared forest: the forest is cut into parts that fit shared memory; block (x, p)
//    holds part p and writes per-row partial sums to a workspace, which a second kernel adds in part
//    order (the global reduction) and finalizes. Scalar forests with inline leaves may run it on
//    the lane layout instead (tahoe_lane.h: one tree per half-warp lane; TahoeUsesLanes);
//  * row chunk: a block of 256, 512 or 1024 threads stages a chunk of rows in shared memory and
//    splits the trees over its thread groups (RowChunkShape, perf_model.h); the groups' sums are
//    reduced in a fixed order in the block, or, with tree parts, written to the workspace and added
//    in part order by a second kernel.
// Every output kind (margin, transformed prediction, leaf ids), every output group and iteration
// ranges are supported by every strategy.
//
// Determinism: every strategy is deterministic (no atomics; every sum is taken in a fixed order), so
// the same inputs give bit-identical outputs run to run. Different strategies (and different
// `groups` / part splits) add the same trees in different groupings, so they agree to rounding
// (well within 1e-5 relative), not bit for bit; leaf ids are exact everywhere.
//
// Memory: no entry point allocates. Device pointers are prefixed d_; the workspace is owned by the
// caller (TahoeWorkspaceDoubles says how large).
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "core/model/transform.h"
#include "core/predict/tahoe/perf_model.h"
#include "core/predict/predict.h"
#include "core/predict/tahoe/tahoe_forest.h"
#include "core/predict/tahoe/tahoe_lane.h"
#include "core/predict/tahoe/tahoe_records.h"

namespace grove {

// Strategies are StrategyId (perf_model.h: the one enum and name table); every one but kCpu runs
// here.

inline constexpr int kSharedDataRows = 32;         // rows per shared-data block (one per lane)
inline constexpr int kForestSmemThreads = 1024;    // threads per shared-forest block
inline constexpr int kDirectThreads = 256;         // threads per direct block
inline constexpr int kMaxAssignments = 9;          // groups 1, 2, 4, ..., 256
// Rows per row-chunk thread group: 1, 2, 4, ..., up to the block's threads; a group of more than
// 32 rows spans several warps that walk the same trees. Two rows per thread and several outputs
// without a class-aware assignment: at most kMaxWarpRowChunk.
inline constexpr int kMaxRowChunk = kRowChunkMaxThreads;
inline constexpr int kMaxWarpRowChunk = 32;
static_assert(kRowChunkMaxThreads / kRowChunkMinThreads <= 4, "two bits of the code");
static_assert(kRowChunkPaired > kMaxRowChunk, "the flags are above every chunk");

// Row chunk's TahoeLaunchArgs::groups: a RowChunkShape code (perf_model.h). Its tree groups
// (threads / chunk) are assignment log2(threads / chunk) of the forest, so threads / chunk <= 256.
// Several rows per thread where TahoeRowChunkPairable; a request that cannot is run with one.

// Row-chunk shared memory: partial sums first (a double per thread and row for one output or a
// class-aware assignment, plus the chunk's K sums per row for the latter; K doubles per thread for
// several outputs without one), then the chunk's rows, each TahoeRowChunkStride floats (the
// features, the NaN padding feature, odd so that rows at the same feature fall in different banks).
GROVE_HD int TahoeRowChunkStride(int num_features) { return (num_features + 1) | 1; }
GROVE_HD int TahoeRowChunkAssignment(int log2_threads, int log2_chunk) {
  return log2_threads - log2_chunk;
}
GROVE_HD bool TahoeRowChunkClassed(uint32_t class_mask, int num_outputs, int log2_threads,
                                   int log2_chunk) {
  return num_outputs > 1 &&
         ((class_mask >> TahoeRowChunkAssignment(log2_threads, log2_chunk)) & 1u) != 0;
}
GROVE_HD int64_t TahoeRowChunkAccBytes(uint32_t class_mask, int num_outputs, int log2_threads,
                                       int log2_chunk, int rows_per_thread) {
  const int64_t threads = int64_t{1} << log2_threads;
  if (num_outputs <= 1) return threads * 8 * rows_per_thread;
  if (TahoeRowChunkClassed(class_mask, num_outputs, log2_threads, log2_chunk)) {
    return (threads + (int64_t{1} << log2_chunk) * num_outputs) * 8 * rows_per_thread;
  }
  return threads * num_outputs * 8;
}

// A TahoeForest resident on one device: the view's pointers are device pointers.
struct TahoeDeviceForest {
  TahoeForestView view;  // device pointers
  bool wide = false;     // TahoeNode16 nodes
  bool simple = false;   // TahoeForest::simple(): the kernels use TahoeTraverseSimple
  bool fixed = false;    // TahoeForest::fixed_walk(): kernels with staged rows use TahoeWalkFixed
  bool categorical = false;  // TahoeForest::categorical(): the fixed walk is kTahoeWalkFixedCat
  bool cat_pairs = false;    // TahoeForest::cat_pairs(): ... or kTahoeWalkFixedCatPairs
  // Every TahoeForest::Assignment, concatenated: assignment i (groups = 1 << i) runs
  // d_assign_order[order_begin[i] + ...] with offsets d_assign_offsets[offsets_begin[i] + g].
  const uint32_t* d_assign_order = nullptr;
  const uint32_t* d_assign_offsets = nullptr;
  uint32_t order_begin[kMaxAssignments] = {};
  uint32_t offsets_begin[kMaxAssignments] = {};
  int num_assignments = 0;
  // TahoeForest::class_assignments, concatenated the same way; bit i of class_mask: assignment i
  // (groups = 1 << i) exists. Row chunk sums one output per thread in a register with them.
  const uint32_t* d_class_order = nullptr;
  const uint32_t* d_class_offsets = nullptr;
  uint32_t class_order_begin[kMaxAssignments] = {};
  uint32_t class_offsets_begin[kMaxAssignments] = {};
  uint32_t class_mask = 0;
  // The root node of each tree of d_assign_order / d_class_order (same indexing): row chunk's
  // fixed walks over every round read these instead of the tree records. Null without the fixed
  // walk (or without class-aware assignments).
  const uint32_t* d_assign_roots = nullptr;
  const uint32_t* d_class_roots = nullptr;
  // The same roots in the level layout (tahoe_level.h), whose nodes follow the depth-first ones in
  // view.nodes (past view.num_nodes); null when the engine did not upload it. Row chunk walks them
  // when TahoeLaunchArgs::level_walk.
  const uint32_t* d_assign_level_roots = nullptr;
  const uint32_t* d_class_level_roots = nullptr;
  // The record layout (tahoe_records.h): its records, its leaf values (null: float bits in the
  // records) and each ordered tree's root word (same indexing as d_assign_roots); null when the
  // engine did not upload it. Row chunk walks them when TahoeLaunchArgs::record_walk.
  const TahoeRecord* d_records = nullptr;
  const double* d_record_leaves = nullptr;
  const uint32_t* d_assign_record_roots = nullptr;
  const uint32_t* d_class_record_roots = nullptr;
  // Shared-memory parts for splitting shared forest (one part = the whole forest when it fits).
  const TahoePart* d_parts = nullptr;
  int num_parts = 0;
  int64_t part_smem_bytes = 0;    // shared memory the largest part needs
  int64_t forest_smem_bytes = 0;  // shared memory the whole forest needs
  // Shared forest / splitting: rows of few features are staged in shared memory after the forest
  // part (the forest fills shared memory, leaving L1 too small to keep the block's rows). 0: rows
  // read from global memory.
  int64_t staged_row_bytes = 0;
  // Lane layout (TahoeLaneLayout) for splitting shared forest when TahoeLaneEligible and the rows
  // are staged: lane_num_parts > 0. Used for margins and predictions over every round; leaf output
  // and round ranges take the row-per-thread kernel over d_parts.
  const TahoeLaneNode* d_lane_slots = nullptr;
  const TahoeLaneBundle* d_lane_bundles = nullptr;
  const TahoeLanePart* d_lane_parts = nullptr;
  int lane_num_parts = 0;
  int64_t lane_part_bytes = 0;     // TahoeLaneLayout::part_bytes
  int lane_columns = 0;
  uint32_t lane_column_bits = 0;
  bool lane_paired = false;         // TahoeLaneLayout::paired
  int32_t num_iterations = 0;      // the model's rounds (a launch over all of them may use lanes)
};

// Rows a block of the lane kernel walks at a time: one per half-warp, each staged in the half-warp's
// own row buffer (TahoeLaneLayout::columns floats).
inline constexpr int kLaneBlockRows = kForestSmemThreads / kTahoeLaneTrees;
// Shared memory of the lane kernel: the row buffers (16-aligned), then a part's slots and its bundle
// records (TahoeLanePartBytes).
GROVE_HD int64_t TahoeLaneRowBytes(int columns) {
  return (int64_t{kLaneBlockRows} * columns * 4 + 15) & ~int64_t{15};
}
inline int64_t TahoeLaneSharedBytes(const TahoeDeviceForest& f) {
  return TahoeLaneRowBytes(f.lane_columns) + f.lane_part_bytes;
}

// Staged rows (shared data and, up to kMaxStagedFeatures, shared forest / splitting) are
// feature-major with one column per thread of the block (stride = rows of the tile, a multiple of
// 32): a lane reads its own bank whatever feature it asks for, so the per-node reads are free of
// bank conflicts. After the features comes one column of NaN, the padding feature of TahoeWalkFixed.
inline constexpr int kMaxStagedFeatures = 16;
inline int64_t TahoeStagedRowBytes(int num_features) {
  return num_features <= kMaxStagedFeatures
             ? (int64_t{num_features} + 1) * kForestSmemThreads * 4
             : 0;
}

// One launch over rows [0, rows) of d_rows (row-major, `row_stride` floats apart), writing
// rows x width floats to d_out (`out_stride` apart).
struct TahoeLaunchArgs {
  StrategyId strategy = StrategyId::kDirect;
  const float* d_rows = nullptr;
  int64_t rows = 0;
  int64_t row_stride = 0;
  float* d_out = nullptr;
  int64_t out_stride = 0;
  OutputKind kind = OutputKind::kMargin;
  TahoeRowParams row_params;
  TransformParams transform;
  int groups = 1;        // shared data: thread groups per block (power of two, <= 32); row chunk:
                         // a RowChunkShape code
  int sm_count = 1;      // shared forest / splitting: persistent grid of sm_count x blocks_per_sm
  int blocks_per_sm = 1;
  int items_per_part = 1;  // set by TahoeLaunch: row ranges per part (work items)
  // Row chunk: walks from the roots take the level layout when the forest has it (TahoeDeviceForest
  // ::d_assign_level_roots); same leaves, bit-identical sums.
  bool level_walk = false;
  // Row chunk: walks from the roots take the record layout when the forest has it (TahoeDeviceForest
  // ::d_assign_record_roots), before the level layout; same leaves, bit-identical sums.
  bool record_walk = false;
};

// Whether TahoeLaunch runs `a` with the lane kernel (splitting shared forest on the lane layout).
bool TahoeUsesLanes(const TahoeDeviceForest& f, const TahoeLaunchArgs& a);

// Whether row chunk can split the trees of `a` into parts (RowChunkShape::parts): the walks run
// from the roots (fixed walk, every round, margins or predictions, one output or a class-aware
// assignment at this shape).
bool TahoeRowChunkSplittable(const TahoeDeviceForest& f, const TahoeLaunchArgs& a, int chunk,
                             int threads);
// Whether row chunk can walk two or four rows per thread for `kind` with `chunk` rows per group and
// `threads` per block: 256 threads, chunk <= kMaxWarpRowChunk, the fixed walk, one output or a
// class-aware assignment at that shape, margins or predictions (not leaf ids).
bool TahoeRowChunkPairable(const TahoeDeviceForest& f, OutputKind kind, int chunk, int threads);
// The shape TahoeLaunch runs row chunk with for `a`: a.groups's shape made valid for the forest (a
// power-of-two chunk up to the block's threads, kMaxWarpRowChunk for several outputs without a
// class-aware assignment, at most 256 tree groups), several rows per thread only where allowed.
RowChunkShape RowChunkLaunchShape(const TahoeDeviceForest& f, const TahoeLaunchArgs& a);
// Resident blocks per SM of the kernel TahoeLaunch runs for row chunk's `a` (its shape, shared
// memory and registers; the current device); 0 when the occupancy query fails.
int TahoeRowChunkBlocksPerSm(const TahoeDeviceForest& f, const TahoeLaunchArgs& a);

// Workspace doubles a launch needs (rows x outputs for multi-output rows, parts x rows x outputs for
// splitting shared forest and for row chunk with `row_chunk_parts` tree parts; 0 for scalar rows on
// the other strategies).
int64_t TahoeWorkspaceDoubles(const TahoeDeviceForest& f, StrategyId s, OutputKind kind,
                              int64_t rows, int row_chunk_parts = 1);

// Dynamic shared memory a launch needs (bytes); 0 for direct. `groups`: shared data's thread groups,
// row chunk's RowChunkShape code.
int64_t TahoeSharedBytes(const TahoeDeviceForest& f, StrategyId s, int groups);

// Largest `groups` (power of two <= 32) whose shared-data block fits `max_smem` bytes; 0 if none.
int TahoeMaxSharedDataGroups(const TahoeDeviceForest& f, int64_t max_smem);

// Largest row chunk (power of two <= 256) whose block of 256 threads fits `max_smem` bytes; 0 if
// none.
int TahoeMaxRowChunk(const TahoeDeviceForest& f, int64_t max_smem);

// Raises the kernels' dynamic shared-memory limits to `max_smem` on the current device (once per
// device, before the first launch). Not in the request path.
cudaError_t TahoeConfigureKernels(int64_t max_smem);

// Resident blocks per SM of the shared-forest kernel at `smem_bytes` (occupancy calculator).
int TahoeForestBlocksPerSm(const TahoeDeviceForest& f, int64_t smem_bytes, bool multi);

// Enqueues the strategy's kernel(s) on `stream`; returns the launch error, if any (asynchronous
// errors surface at the caller's next synchronization). `d_workspace` holds at least
// TahoeWorkspaceDoubles doubles. Deterministic (see above).
cudaError_t TahoeLaunch(const TahoeDeviceForest& f, const TahoeLaunchArgs& args,
                        double* d_workspace, cudaStream_t stream);

}  // namespace grove
