// Runs the kvstream binary (or any shell command) as a user would, for the command-line tests.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace kvstream::testing {

// Runs a shell command (bounded by coreutils timeout), returns its exit status and stdout + stderr.
inline int RunShell(const std::string& command, std::string* output) {
  FILE* pipe = ::popen(("timeout 180 " + command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) output->append(buffer, n);
  const int status = ::pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Whether `command` fails and says `message`: EXPECT_TRUE(Refuses(...)) shows the output when not.
inline ::testing::AssertionResult Refuses(const std::string& command, const std::string& message) {
  std::string output;
  const int status = RunShell(command, &output);
  if (status == 0) return ::testing::AssertionFailure() << "succeeded: " << command << "\n" << output;
  if (output.find(message) == std::string::npos) {
    return ::testing::AssertionFailure() << "no \"" << message << "\" in the output of " << command << ":\n" << output;
  }
  return ::testing::AssertionSuccess();
}

}  // namespace kvstream::testing
