// How a command's process takes part in a partitioned artifact's world.
//
// Started by an MPI launcher, each process is one rank: LoadForCommand
// joins the world (LaunchedWorld) and loads this rank's part of the
// artifact. Rank 0 runs the command, with a runner that sends each step to
// the other ranks first (LeaderRunner); one scheduler, one engine, one
// server for the whole world. A follower rank runs no command: its entry
// point is RunFollower, which runs the leader's steps until the leader
// stops. A process alone (no launcher) is rank 0 of no world.
#ifndef LLMC_RUNTIME_CLI_RANK_ENTRY_H_
#define LLMC_RUNTIME_CLI_RANK_ENTRY_H_

#include <optional>
#include <string>

#include "llmc/runtime/dist/communicator.h"
#include "llmc/runtime/engine/loaded_model.h"

namespace llmc::cli {

struct CommandModel {
  LoadedModel model;
  Communicator* world = nullptr;  // null: a process alone
  bool follower() const { return world != nullptr && world->rank() != 0; }
};

// This process's model of the artifact at `dir`. An error is printed
// (`self: message`) and, in a world, ends every rank (they would wait for
// this one); nullopt then.
std::optional<CommandModel> LoadForCommand(const char* self, const std::string& dir,
                                           LoadOptions options);

// A follower rank's whole life once loaded: the leader's steps, until the
// leader stops (exit code 0) or a step fails (the world ends, 1).
int RunFollower(CommandModel& m);

}  // namespace llmc::cli

#endif  // LLMC_RUNTIME_CLI_RANK_ENTRY_H_
