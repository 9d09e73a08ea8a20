// The Tahoe GPU engine's residency: the format and lane layout uploaded to every GPU, its streams
// and staging slots (tahoe_engine_impl.h). Compiled only with CUDA.
#if defined(GROVE_HAVE_CUDA)

#include <cuda_runtime_api.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "core/common/log.h"
#include "core/gpu/cuda_status.h"
#include "core/gpu/event_wait.h"
#include "core/predict/tahoe/tahoe_engine_impl.h"

namespace grove::tahoe_internal {

#define TAHOE_ASSIGN(lhs, expr)            \
  do {                                     \
    auto _r = (expr);                      \
    if (!_r.ok()) return _r.status();      \
    lhs = *_r;                             \
  } while (0)

std::vector<uint32_t> RootsOf(const TahoeForest& tf, const std::vector<uint32_t>& order) {
  std::vector<uint32_t> roots(order.size());
  for (size_t i = 0; i < order.size(); ++i) roots[i] = tf.trees()[order[i]].root;
  return roots;
}

void TahoeEngineImpl::BuildLanes() {
  const TahoeForest& tf = *format_;
  const int F = forest_->num_features;
  if (options_.lanes == TahoeEngineOptions::Lanes::kOff || TahoeStagedRowBytes(F) == 0 ||
      !TahoeLaneEligible(tf)) {
    return;
  }
  absl::StatusOr<TahoeLaneLayout> lane = WithGrowingBudget(
      hw_.smem_per_block - 64 - TahoeLaneRowBytes(2 * F + 1),
      [&](int64_t b) {
        return BuildTahoeLaneLayout(tf, b,
                                    options_.lanes == TahoeEngineOptions::Lanes::kOnPaired
                                        ? TahoeLaneMode::kPaired
                                        : TahoeLaneMode::kAuto);
      });
  if (!lane.ok()) {
    GROVE_LOG(WARNING) << "tahoe: no lane layout" << KV("why", lane.status().message());
    lane_report_ = absl::StrCat("; no tree-per-lane walk (", lane.status().message(), ")");
    return;
  }
  lane_report_ = absl::StrFormat("; splitting walks a tree per lane: %s layout, %d parts, %.1f%% padding slots",
                                 lane->paired ? "paired" : "single",
                                 static_cast<int>(lane->parts.size()), 100 * lane->padding);
  lanes_ = std::make_unique<TahoeLaneLayout>(*std::move(lane));
}

void TahoeEngineImpl::BuildLevel() {
  const TahoeForest& tf = *format_;
  if (options_.level_walk == TahoeEngineOptions::LevelWalk::kOff || !tf.fixed_walk()) return;
  absl::StatusOr<TahoeLevelLayout> level =
      BuildTahoeLevelLayout(tf, static_cast<uint32_t>(tf.nodes8().size()));
  if (!level.ok()) {
    GROVE_LOG(WARNING) << "tahoe: no level layout" << KV("why", level.status().message());
    return;
  }
  level_ = std::make_unique<TahoeLevelLayout>(*std::move(level));
  level_walk_ = true;  // Probe() may turn it off (kAuto)
}

void TahoeEngineImpl::BuildRecords() {
  const TahoeForest& tf = *format_;
  if (options_.record_walk == TahoeEngineOptions::RecordWalk::kOff || !tf.fixed_walk()) return;
  if (options_.record_walk == TahoeEngineOptions::RecordWalk::kAuto &&
      tf.stats().max_depth < TahoeEngineOptions::kRecordMinDepth) {
    return;
  }
  const int64_t budget = std::max<int64_t>(
      options_.max_record_bytes, 4 * static_cast<int64_t>(tf.nodes8().size() * sizeof(TahoeNode8)));
  absl::StatusOr<TahoeRecordLayout> records = BuildTahoeRecordLayout(tf, budget);
  if (!records.ok()) {
    GROVE_LOG(INFO) << "tahoe: no record layout" << KV("why", records.status().message());
    return;
  }
  records_ = std::make_unique<TahoeRecordLayout>(*std::move(records));
  record_walk_ = true;  // Probe() may turn it off (kAuto)
}

// A layout's root of each tree of `order` (indices into tf.trees()), from its per-tree `roots`.
std::vector<uint32_t> LevelRootsOf(const std::vector<uint32_t>& roots_by_tree,
                                   const std::vector<uint32_t>& order) {
  std::vector<uint32_t> roots(order.size());
  for (size_t i = 0; i < order.size(); ++i) roots[i] = roots_by_tree[order[i]];
  return roots;
}

// Uploads assignments (up to kMaxAssignments, the non-empty ones) concatenated: assignment i's
// order from order_begin[i], its offsets from offsets_begin[i], and with `d_roots` each ordered
// tree's root node (with `level` too, its root in the level layout at `d_level_roots`; with
// `records`, its root word in the record layout at `d_record_roots`). Returns
// the mask of the assignments uploaded (bit i: assignment i).
absl::StatusOr<uint32_t> UploadAssignments(Gpu& g, const TahoeForest& tf,
                                           const std::vector<TahoeAssignment>& assignments,
                                           uint32_t* order_begin, uint32_t* offsets_begin,
                                           const uint32_t** d_order, const uint32_t** d_offsets,
                                           const uint32_t** d_roots, const TahoeLevelLayout* level,
                                           const uint32_t** d_level_roots,
                                           const TahoeRecordLayout* records,
                                           const uint32_t** d_record_roots) {
  std::vector<uint32_t> order, offsets;
  uint32_t mask = 0;
  for (int i = 0; i < std::min<int>(kMaxAssignments, static_cast<int>(assignments.size())); ++i) {
    if (assignments[i].offsets.empty()) continue;
    mask |= 1u << i;
    order_begin[i] = static_cast<uint32_t>(order.size());
    offsets_begin[i] = static_cast<uint32_t>(offsets.size());
    order.insert(order.end(), assignments[i].order.begin(), assignments[i].order.end());
    offsets.insert(offsets.end(), assignments[i].offsets.begin(), assignments[i].offsets.end());
  }
  TAHOE_ASSIGN(*d_order, g.Upload(order));
  TAHOE_ASSIGN(*d_offsets, g.Upload(offsets));
  if (d_roots != nullptr) TAHOE_ASSIGN(*d_roots, g.Upload(RootsOf(tf, order)));
  if (d_roots != nullptr && level != nullptr) {
    TAHOE_ASSIGN(*d_level_roots, g.Upload(LevelRootsOf(level->roots, order)));
  }
  if (d_roots != nullptr && records != nullptr) {
    TAHOE_ASSIGN(*d_record_roots, g.Upload(LevelRootsOf(records->roots, order)));
  }
  return mask;
}

absl::Status TahoeEngineImpl::InitGpu(int device, Gpu& g) {
  g.device = device;
  GROVE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device), "cudaSetDevice");
  const TahoeForest& tf = *format_;
  TahoeForestView v = tf.HostView();
  if (tf.wide()) {
    TAHOE_ASSIGN(v.nodes, g.Upload(tf.nodes16()));
  } else if (level_ != nullptr) {  // the level layout after the depth-first nodes
    std::vector<TahoeNode8> nodes = tf.nodes8();
    nodes.insert(nodes.end(), level_->nodes.begin(), level_->nodes.end());
    TAHOE_ASSIGN(v.nodes, g.Upload(nodes));
  } else {
    TAHOE_ASSIGN(v.nodes, g.Upload(tf.nodes8()));
  }
  TAHOE_ASSIGN(v.trees, g.Upload(tf.trees()));
  TAHOE_ASSIGN(v.cat_splits, g.Upload(tf.cat_splits()));
  TAHOE_ASSIGN(v.cat_bits, g.Upload(tf.cat_bits()));
  TAHOE_ASSIGN(v.cat_features, g.Upload(tf.cat_features()));
  TAHOE_ASSIGN(v.leaf_table, g.Upload(tf.leaf_table()));
  TAHOE_ASSIGN(v.linear_leaves, g.Upload(tf.linear_leaves()));
  TAHOE_ASSIGN(v.linear_features, g.Upload(tf.linear_features()));
  TAHOE_ASSIGN(v.linear_coeffs, g.Upload(tf.linear_coeffs()));
  TAHOE_ASSIGN(v.leaf_ids, g.Upload(tf.leaf_ids()));
  TAHOE_ASSIGN(v.base_margin, g.Upload(tf.base_margin()));
  TahoeDeviceForest& df = g.df;
  df.view = v;
  if (records_ != nullptr) {
    TAHOE_ASSIGN(df.d_records, g.Upload(records_->records));
    if (!records_->leaves.empty()) TAHOE_ASSIGN(df.d_record_leaves, g.Upload(records_->leaves));
  }
  df.wide = tf.wide();
  df.simple = tf.simple();
  df.fixed = tf.fixed_walk();
  df.categorical = tf.categorical();
  df.cat_pairs = tf.cat_pairs();
  df.num_assignments = std::min<int>(kMaxAssignments, static_cast<int>(tf.assignments().size()));
  uint32_t mask = 0;
  TAHOE_ASSIGN(mask, UploadAssignments(g, tf, tf.assignments(), df.order_begin, df.offsets_begin,
                                       &df.d_assign_order, &df.d_assign_offsets,
                                       df.fixed ? &df.d_assign_roots : nullptr, level_.get(),
                                       &df.d_assign_level_roots, records_.get(),
                                       &df.d_assign_record_roots));
  TAHOE_ASSIGN(df.class_mask,
               UploadAssignments(g, tf, tf.class_assignments(), df.class_order_begin,
                                 df.class_offsets_begin, &df.d_class_order, &df.d_class_offsets,
                                 df.fixed ? &df.d_class_roots : nullptr, level_.get(),
                                 &df.d_class_level_roots, records_.get(),
                                 &df.d_class_record_roots));
  if (mask != (1u << df.num_assignments) - 1) {
    return absl::InternalError("tahoe: the forest lacks a thread-group assignment");
  }
  const int64_t nb = tf.node_bytes();
  df.forest_smem_bytes = ((v.num_nodes * nb + 15) & ~int64_t{15}) + int64_t{v.num_trees} * 16;
  df.staged_row_bytes = TahoeStagedRowBytes(v.num_features);
  // Parts: the budget leaves room for the staged rows and the 16-byte alignments.
  absl::StatusOr<std::vector<TahoePart>> parts = WithGrowingBudget(
      hw_.smem_per_block - 64 - df.staged_row_bytes,
      [&](int64_t b) { return tf.SplitIntoParts(b); });
  if (parts.ok()) {
    TAHOE_ASSIGN(df.d_parts, g.Upload(*parts));
    df.num_parts = static_cast<int>(parts->size());
    for (const TahoePart& p : *parts) {
      const int64_t b = (((p.node_end - p.node_begin) * nb + 15) & ~int64_t{15}) +
                        int64_t{p.tree_end - p.tree_begin} * 16;
      df.part_smem_bytes = std::max(df.part_smem_bytes, b);
    }
  } else {
    GROVE_LOG(WARNING) << "tahoe: no splitting shared forest" << KV("why", parts.status().message());
  }
  parts_ = df.num_parts;
  df.num_iterations = forest_->num_iterations;
  if (lanes_ != nullptr) {
    TAHOE_ASSIGN(df.d_lane_slots, g.Upload(lanes_->slots));
    TAHOE_ASSIGN(df.d_lane_bundles, g.Upload(lanes_->bundles));
    TAHOE_ASSIGN(df.d_lane_parts, g.Upload(lanes_->parts));
    df.lane_num_parts = static_cast<int>(lanes_->parts.size());
    df.lane_part_bytes = lanes_->part_bytes;
    df.lane_columns = lanes_->columns;
    df.lane_column_bits = lanes_->column_bits;
    df.lane_paired = lanes_->paired;
  }
  GROVE_CUDA_RETURN_IF_ERROR(TahoeConfigureKernels(hw_.smem_per_block), "cudaFuncSetAttribute");
  const bool multi = v.num_outputs > 1;
  const int64_t forest_smem = TahoeSharedBytes(df, StrategyId::kSharedForest, 1);
  const int64_t part_smem = TahoeSharedBytes(df, StrategyId::kSplittingSharedForest, 1);
  g.max_row_chunk = TahoeMaxRowChunk(df, hw_.smem_per_block);
  g.row_chunk_acc_bytes = TahoeSharedBytes(df, StrategyId::kRowChunk, 1) -
                          4 * int64_t{TahoeRowChunkStride(v.num_features)};
  if (forest_smem <= hw_.smem_per_block) {
    g.forest_blocks_per_sm = std::max(1, TahoeForestBlocksPerSm(df, forest_smem, multi));
  }
  if (df.num_parts > 0) {
    g.part_blocks_per_sm = std::max(1, TahoeForestBlocksPerSm(df, part_smem, multi));
  }
  // Staging lanes: the first for the largest chunks and the device path, the others smaller.
  const int64_t K = v.num_outputs;
  const int64_t F = v.num_features;
  const int64_t max_width = std::max<int64_t>({K, 1, forest_->PredictionWidth()});
  // Row chunk's tree parts run only below the probe's large batch (RowChunkShapeFor), so their
  // workspace is sized for kRowChunkWsRows rows (ChunkRows splits larger launches).
  const int64_t ws_parts = std::max({1, df.num_parts, df.lane_num_parts});
  const int num_lanes = options_.staging_lanes > 0 ? options_.staging_lanes : kDefaultStagingLanes;
  for (int i = 0; i < num_lanes; ++i) {
    const bool first = i == 0;
    const int64_t rows = first ? kTargetChunkRows : kExtraLaneChunkRows;
    const int64_t ws_rows = first ? kDeviceChunkRows : kExtraLaneChunkRows;
    auto lane = std::make_unique<StagingLane>();
    absl::Status st = InitLane(
        g, *lane, std::clamp<int64_t>(rows * F * 4, int64_t{1} << 20, first ? kMaxInBytes : kMaxExtraInBytes),
        std::clamp<int64_t>(rows * max_width * 4, int64_t{1} << 20, kMaxOutBytes),
        std::clamp<int64_t>(std::max(ws_rows * K * ws_parts, std::min(ws_rows, kRowChunkWsRows) * K * kRowChunkMaxParts),
                            int64_t{1} << 16, kMaxWsBytes / 8));
    g.lanes.push_back(std::move(lane));  // kept even when incomplete: ~Gpu releases its streams
    if (!st.ok()) return st;
  }
  g.lane_busy.assign(g.lanes.size(), 0);
  GROVE_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize(), "upload");
  return absl::OkStatus();
}

absl::Status TahoeEngineImpl::InitLane(Gpu& g, StagingLane& lane, int64_t in_bytes,
                                       int64_t out_bytes, int64_t ws_doubles) const {
  lane.in_bytes = in_bytes;
  lane.out_bytes = out_bytes;
  lane.ws_doubles = ws_doubles;
  for (Slot& s : lane.slots) {
    GROVE_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking), "cudaStreamCreate");
    // Waited on by WaitForEvent: a large chunk's wait sleeps instead of spinning a core.
    if (absl::Status st = gpu::CreateWaitEvent(&s.done, "tahoe: cudaEventCreate"); !st.ok()) return st;
    // Kernel timing of shape trials (ShapeTrials): around a chunk's launches only while timed.
    GROVE_CUDA_RETURN_IF_ERROR(cudaEventCreate(&s.kernel_start), "cudaEventCreate");
    GROVE_CUDA_RETURN_IF_ERROR(cudaEventCreate(&s.kernel_end), "cudaEventCreate");
    for (absl::Status st : {s.h_in.Reserve(in_bytes, "tahoe: pinned rows"),
                            s.h_out.Reserve(out_bytes, "tahoe: pinned results"),
                            s.d_in.Reserve(in_bytes, "tahoe: device rows"),
                            s.d_out.Reserve(out_bytes, "tahoe: device results"),
                            s.d_ws.Reserve(ws_doubles * 8, "tahoe: workspace")}) {
      if (!st.ok()) return st;
    }
    g.bytes += in_bytes + out_bytes + ws_doubles * 8;
  }
  // The streams and events of page-locked calls' pieces (RunPinnedPieces).
  for (cudaStream_t* st : lane.PieceStreams()) {
    GROVE_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(st, cudaStreamNonBlocking),
                               "cudaStreamCreate");
  }
  for (int b = 0; b < kMaxPieceBuffers; ++b) {
    for (cudaEvent_t* e : {&lane.piece_in[b], &lane.piece_free[b]}) {
      GROVE_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(e, cudaEventDisableTiming),
                                 "cudaEventCreate");
    }
  }
  for (cudaEvent_t* e : {&lane.pieces_in, &lane.pieces_out}) {
    if (absl::Status st = gpu::CreateWaitEvent(e, "tahoe: cudaEventCreate"); !st.ok()) return st;
  }
  return absl::OkStatus();
}

StagingLane& Gpu::AcquireLane(int64_t rows, bool first_only) {
  std::unique_lock<std::mutex> lock(lane_mu);
  const int n = static_cast<int>(lanes.size());
  // The order lanes are tried in: a large batch (or the device path) lane 0 first, whose slots
  // take it in fewer chunks; a small one the small lanes first (n-1 down to 1), then lane 0.
  const bool large = first_only || rows > kExtraLaneChunkRows;
  const int tries = first_only ? 1 : n;
  for (;;) {
    for (int t = 0; t < tries; ++t) {
      const int i = large ? (t == 0 ? 0 : n - t) : (t == n - 1 ? 0 : n - 1 - t);
      if (!lane_busy[i]) {
        lane_busy[i] = 1;
        return *lanes[i];
      }
    }
    lane_freed.wait(lock);
  }
}

void Gpu::ReleaseLane(const StagingLane& lane) {
  {
    std::lock_guard<std::mutex> lock(lane_mu);
    for (size_t i = 0; i < lanes.size(); ++i) {
      if (lanes[i].get() == &lane) lane_busy[i] = 0;
    }
  }
  lane_freed.notify_all();
}

}  // namespace grove::tahoe_internal

#endif  // GROVE_HAVE_CUDA
