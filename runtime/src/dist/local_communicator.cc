// The world of one rank: every collective is already complete, so the calls
// only check their arguments (the same checks as over MPI, so that code run
// unpartitioned fails where it would partitioned) and copy.
#include <cstring>
#include <memory>

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

  absl::Status WaitForBroadcast(void* data, int64_t bytes, int root) override {
    return Broadcast(data, bytes, root);
  }
};

}  // namespace

std::unique_ptr<Communicator> MakeLocalCommunicator() {
  return std::make_unique<LocalCommunicator>();
}

}  // namespace llmc
