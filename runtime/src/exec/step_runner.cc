#include "llmc/runtime/exec/step_runner.h"

#include "llmc/core/status_macros.h"
#include "llmc/runtime/dist/communicator.h"
#include "llmc/runtime/exec/cuda_runner.h"
#include "llmc/runtime/exec/host_runner.h"
#include "llmc/runtime/exec/rank_device.h"

namespace llmc {

absl::StatusOr<std::unique_ptr<StepRunner>> CreateStepRunner(const Artifact& artifact,
                                                             const RunnerOptions& options,
                                                             const BackendChoice& choice) {
  if (choice.backend != Backend::kCuda) {
    LLMC_ASSIGN_OR_RETURN(auto host, HostRunner::Create(artifact, options));
    return std::unique_ptr<StepRunner>(std::move(host));
  }
  cuda::CudaDeviceOptions device_options;
  if (choice.device) device_options.ordinal = choice.device->ordinal;
  // Each rank of a partitioned artifact on its own GPU of the node.
  const Communicator* comm = options.communicator;
  if (comm && comm->size() > 1 && choice.device)
    device_options.ordinal = RankDeviceOrdinal(comm->rank(), choice.device->device_count);
  LLMC_ASSIGN_OR_RETURN(auto device, cuda::CudaDevice::Open(device_options));
  LLMC_ASSIGN_OR_RETURN(auto runner,
                        CudaRunner::Create(artifact, options, choice.cuda_target, std::move(device)));
  return std::unique_ptr<StepRunner>(std::move(runner));
}

}  // namespace llmc
