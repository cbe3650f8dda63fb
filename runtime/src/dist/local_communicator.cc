// The world of one rank: every collective is already complete, so the calls
// only check their arguments (the same checks as over MPI, so that code run
// unpartitioned fails where it would partitioned) and copy.
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "llmc/runtime/dist/communicator.h"
#include "validate.h"

namespace llmc {
namespace {

using dist_internal::CheckBuffer;
using dist_internal::CheckRoot;

class LocalCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }

  absl::Status AllReduceSum(float* data, int64_t count) override {
    return CheckBuffer("AllReduceSum", data, count);
  }

  absl::Status AllGather(const float* in, float* out, int64_t count) override {
    if (absl::Status s = CheckBuffer("AllGather", in, count); !s.ok()) return s;
    if (absl::Status s = CheckBuffer("AllGather", out, count); !s.ok()) return s;
    // memmove: `in` may be `out` (a gather in place).
    std::memmove(out, in, static_cast<size_t>(count) * sizeof(float));
    return absl::OkStatus();
  }

  absl::Status Broadcast(void* data, int64_t bytes, int root) override {
    if (absl::Status s = CheckBuffer("Broadcast", data, bytes); !s.ok()) return s;
    return CheckRoot(root, 1);
  }

  // Messages to oneself queue up until received: what a pipeline's send and
  // recv do when both stages are this rank (tests).
  absl::Status Send(const void* data, int64_t bytes, int peer, Channel channel) override {
    if (absl::Status s = CheckBuffer("Send", data, bytes); !s.ok()) return s;
    if (absl::Status s = CheckRoot(peer, 1); !s.ok()) return s;
    const char* p = static_cast<const char*>(data);
    queues_[Index(channel)].emplace_back(p, p + bytes);
    return absl::OkStatus();
  }

  absl::Status Recv(void* data, int64_t bytes, int peer, Channel channel) override {
    if (absl::Status s = CheckBuffer("Recv", data, bytes); !s.ok()) return s;
    if (absl::Status s = CheckRoot(peer, 1); !s.ok()) return s;
    std::deque<std::vector<char>>& queue = queues_[Index(channel)];
    if (queue.empty())
      return absl::FailedPreconditionError(
          "Recv: nothing was sent (a world of one rank receives only what it sent itself)");
    if (int64_t(queue.front().size()) != bytes)
      return absl::InvalidArgumentError(absl::StrFormat(
          "Recv: the message is %d bytes, not the %d expected", queue.front().size(), bytes));
    std::memcpy(data, queue.front().data(), size_t(bytes));
    queue.pop_front();
    return absl::OkStatus();
  }

  absl::Status WaitForRecv(void* data, int64_t bytes, int peer, Channel channel) override {
    return Recv(data, bytes, peer, channel);
  }

  absl::Status Flush() override { return absl::OkStatus(); }

  absl::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key) override {
    (void)color;
    (void)key;
    return std::unique_ptr<Communicator>(new LocalCommunicator());
  }

 private:
  static size_t Index(Channel channel) { return channel == Channel::kSteps ? 0 : 1; }
  std::deque<std::vector<char>> queues_[2];
};

}  // namespace

std::unique_ptr<Communicator> MakeLocalCommunicator() {
  return std::make_unique<LocalCommunicator>();
}

}  // namespace llmc
