#include "rank_entry.h"

#include <csignal>
#include <cstdio>

#include "llmc/runtime/exec/rank_runner.h"

namespace llmc::cli {

std::optional<CommandModel> LoadForCommand(const char* self, const std::string& dir,
                                           LoadOptions options) {
  CommandModel m;
  absl::StatusOr<LoadedModel> model = absl::UnknownError("not loaded");
  if (absl::StatusOr<Communicator*> world = LaunchedWorld(); !world.ok()) {
    model = world.status();
  } else {
    m.world = options.runner.communicator ? options.runner.communicator : *world;
    options.runner.communicator = m.world;
    model = LoadModel(dir, options);
  }
  if (!model.ok()) {
    // A rank that cannot load ends the others, which would wait for it.
    EndWorldOnError(model.status());
    std::fprintf(stderr, "%s: %s\n", self, std::string(model.status().message()).c_str());
    return std::nullopt;
  }
  m.model = *std::move(model);
  return m;
}

int RunFollower(CommandModel& m) {
  // mpirun hands ^C and SIGTERM to every rank; the leader drains and then
  // stops the followers, which must outlive it until then.
  std::signal(SIGINT, SIG_IGN);
  std::signal(SIGTERM, SIG_IGN);
  absl::Status st = RunFollowerRank(*m.model.runner, *m.world);
  // The last stage's last logits are on their way to rank 0.
  if (st.ok()) st = m.world->Flush();
  EndWorldOnError(st);
  return st.ok() ? 0 : 1;
}

}  // namespace llmc::cli
