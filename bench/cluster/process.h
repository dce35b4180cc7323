// cluster/process.h — child processes for cluster runs: spawn with captured output, wait bounded, fork a
// function. Every wait has a time limit and a child still running when it passes is killed.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "kvstream/status.h"

namespace kvstream::cluster {

struct Child {
  pid_t pid = -1;
  int out_fd = -1;  // the child's stdout+stderr (Spawn) or its result pipe (ForkIn)
};

// Starts argv[0] (looked up in PATH) with this process's environment plus `extra_env` ("NAME=value").
Result<Child> Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env = {});
// Reads the child's output until `marker` appears, it exits, or `timeout_s` passes.
Result<std::string> ReadUntil(const Child& child, const std::string& marker, double timeout_s);
// Waits (bounded) for the child, SIGTERM first when `terminate_first`; kills it when the time is up.
// Returns its output; `exit_code` gets its exit status (-1 when killed or signalled). Closes out_fd.
std::string Reap(Child& child, double timeout_s, bool terminate_first, int* exit_code = nullptr);
// Reads one line (without its newline) from `fd`, at most `max_bytes` long, within `timeout_s`. Reads a
// byte at a time: meant for short report lines on a pipe, not for bulk data.
Result<std::string> ReadLine(int fd, double timeout_s, size_t max_bytes = 1 << 20);
// Runs a short command to completion (20 s at most); fails with its output when it exits non-zero.
Status RunCommand(const std::vector<std::string>& argv);

}  // namespace kvstream::cluster
