// The leader's step sends and the followers' receive, through a loopback
// world of two ranks in one process: what rank 0 sends on the steps channel
// is queued, and rank 1's receives take from the queue.
#include "llmc/runtime/exec/rank_runner.h"

#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <random>
#include <vector>

namespace llmc {
namespace {

class Loopback : public Communicator {
 public:
  Loopback(int rank, std::deque<std::vector<uint8_t>>* wire) : rank_(rank), wire_(wire) {}
  int rank() const override { return rank_; }
  int size() const override { return 2; }
  absl::Status AllReduceSum(float*, int64_t) override { return absl::UnimplementedError("n/a"); }
  absl::Status AllGather(const float*, float*, int64_t) override {
    return absl::UnimplementedError("n/a");
  }
  absl::Status Broadcast(void*, int64_t, int) override { return absl::UnimplementedError("n/a"); }
  absl::Status Send(const void* data, int64_t bytes, int peer, Channel channel) override {
    if (rank_ != 0 || peer != 1 || channel != Channel::kSteps)
      return absl::InvalidArgumentError("only the leader sends steps, to rank 1");
    const auto* p = static_cast<const uint8_t*>(data);
    wire_->emplace_back(p, p + bytes);
    return absl::OkStatus();
  }
  absl::Status Recv(void* data, int64_t bytes, int peer, Channel channel) override {
    if (rank_ != 1 || peer != 0 || channel != Channel::kSteps)
      return absl::InvalidArgumentError("only rank 1 receives steps, from the leader");
    if (wire_->empty()) return absl::DeadlineExceededError("nothing was sent");
    if (int64_t(wire_->front().size()) != bytes)
      return absl::DataLossError("the receiver expects another size");
    std::memcpy(data, wire_->front().data(), size_t(bytes));
    wire_->pop_front();
    return absl::OkStatus();
  }
  absl::Status WaitForRecv(void* data, int64_t bytes, int peer, Channel channel) override {
    return Recv(data, bytes, peer, channel);
  }
  absl::Status Flush() override { return absl::OkStatus(); }
  absl::StatusOr<std::unique_ptr<Communicator>> Split(int, int) override {
    return absl::UnimplementedError("n/a");
  }

 private:
  int rank_;
  std::deque<std::vector<uint8_t>>* wire_;
};

StepBatch RandomBatch(unsigned seed) {
  std::mt19937 rng(seed);
  auto draw = [&](int n, int hi) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (int32_t& x : v) x = int32_t(rng() % unsigned(hi));
    return v;
  };
  StepBatch b;
  int seqs = 1 + int(rng() % 4), tokens = seqs + int(rng() % 20);
  b.tokens = draw(tokens, 300);
  b.positions = draw(tokens, 100);
  b.query_starts = draw(seqs + 1, tokens);
  b.context_lens = draw(seqs, 100);
  b.max_blocks = 1 + int(rng() % 5);
  b.block_tables = draw(seqs * int(b.max_blocks), 64);
  b.slot_mapping = draw(tokens, 1024);
  b.logits_rows = draw(seqs, tokens);
  return b;
}

TEST(RankRunner, FollowersReceiveEachBatchAsSentThenTheStop) {
  std::deque<std::vector<uint8_t>> wire;
  Loopback leader(0, &wire), follower(1, &wire);
  for (unsigned seed = 1; seed <= 5; ++seed) {
    StepBatch sent = RandomBatch(seed), got;
    ASSERT_TRUE(SendBatch(&sent, leader).ok());
    absl::StatusOr<bool> step = ReceiveBatch(got, follower);
    ASSERT_TRUE(step.ok()) << step.status();
    ASSERT_TRUE(*step);
    EXPECT_EQ(got.tokens, sent.tokens);
    EXPECT_EQ(got.positions, sent.positions);
    EXPECT_EQ(got.query_starts, sent.query_starts);
    EXPECT_EQ(got.context_lens, sent.context_lens);
    EXPECT_EQ(got.block_tables, sent.block_tables);
    EXPECT_EQ(got.max_blocks, sent.max_blocks);
    EXPECT_EQ(got.slot_mapping, sent.slot_mapping);
    EXPECT_EQ(got.logits_rows, sent.logits_rows);
  }
  ASSERT_TRUE(SendBatch(nullptr, leader).ok());
  StepBatch got;
  absl::StatusOr<bool> step = ReceiveBatch(got, follower);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_FALSE(*step);
  EXPECT_TRUE(wire.empty());
}

TEST(RankRunner, AGarbledHeaderIsAnError) {
  std::deque<std::vector<uint8_t>> wire;
  Loopback follower(1, &wire);
  wire.emplace_back(48, uint8_t(0xab));  // the size of a header, not one
  StepBatch got;
  absl::StatusOr<bool> step = ReceiveBatch(got, follower);
  ASSERT_FALSE(step.ok());
  EXPECT_NE(step.status().message().find("garbled"), std::string::npos) << step.status();
}

}  // namespace
}  // namespace llmc
