#include "llmc/runtime/exec/rank_device.h"

#include <cstdlib>
#include <initializer_list>

namespace llmc {

int RankDeviceOrdinal(int world_rank, int devices) {
  int local = world_rank;
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID",
                          "MV2_COMM_WORLD_LOCAL_RANK"}) {
    const char* text = std::getenv(var);
    if (text == nullptr || *text == '\0') continue;
    char* end = nullptr;
    long v = std::strtol(text, &end, 10);
    if (*end == '\0' && v >= 0) {
      local = int(v);
      break;
    }
  }
  if (devices <= 0 || local < 0) return 0;
  return local % devices;
}

}  // namespace llmc
