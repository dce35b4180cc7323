// cluster/process.cpp — spawning, reading and reaping child processes (see process.h).
#include "bench/cluster/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

extern char** environ;

namespace kvstream::cluster {

using Clock = std::chrono::steady_clock;

Result<Child> Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env) {
  if (argv.empty()) return Status::InvalidArgument("Spawn: argv is empty");
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return Status::IoError(std::string("pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipefd[1], 1);
  posix_spawn_file_actions_adddup2(&actions, pipefd[1], 2);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) env_strings.emplace_back(*e);
  for (const auto& e : extra_env) env_strings.push_back(e);
  std::vector<char*> envp, args;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& a : argv_copy) args.push_back(a.data());
  args.push_back(nullptr);
  Child child;
  const int rc = posix_spawnp(&child.pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipefd[1]);
  if (rc != 0) {
    ::close(pipefd[0]);
    return Status::IoError("starting " + argv[0] + ": " + std::strerror(rc));
  }
  child.out_fd = pipefd[0];
  return child;
}

Result<std::string> ReadUntil(const Child& child, const std::string& marker, double timeout_s) {
  std::string out;
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  while (Clock::now() < deadline) {
    pollfd p{child.out_fd, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(child.out_fd, buf, sizeof buf);
    if (n <= 0) return Status::Unavailable("child exited before printing '" + marker + "': " + out);
    out.append(buf, static_cast<size_t>(n));
    if (out.find(marker) != std::string::npos) return out;
  }
  return Status::Timeout("no '" + marker + "' from the child within " + std::to_string(timeout_s) + " s: " + out);
}

std::string Reap(Child& child, double timeout_s, bool terminate_first, int* exit_code) {
  if (exit_code) *exit_code = -1;
  if (child.pid <= 0) return "";
  if (terminate_first) ::kill(child.pid, SIGTERM);
  std::string out;
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  int status = 0;
  bool open = child.out_fd >= 0;
  while (true) {
    if (open) {
      pollfd p{child.out_fd, POLLIN, 0};
      if (::poll(&p, 1, 50) > 0) {
        char buf[4096];
        const ssize_t n = ::read(child.out_fd, buf, sizeof buf);
        if (n > 0) out.append(buf, static_cast<size_t>(n));
        if (n == 0) open = false;
      }
    } else {
      ::usleep(20000);
    }
    if (::waitpid(child.pid, &status, WNOHANG) == child.pid) {
      if (exit_code && WIFEXITED(status)) *exit_code = WEXITSTATUS(status);
      break;
    }
    if (Clock::now() > deadline) {
      ::kill(child.pid, SIGKILL);
      ::waitpid(child.pid, &status, 0);
      break;
    }
  }
  // What the child wrote just before exiting.
  while (open) {
    pollfd p{child.out_fd, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) break;
    char buf[4096];
    const ssize_t n = ::read(child.out_fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  if (child.out_fd >= 0) ::close(child.out_fd);
  child.out_fd = -1;
  child.pid = -1;
  return out;
}

Result<std::string> ReadLine(int fd, double timeout_s, size_t max_bytes) {
  std::string line;
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  while (true) {
    const double left_ms = std::chrono::duration<double, std::milli>(deadline - Clock::now()).count();
    if (left_ms <= 0) return Status::Timeout("no complete line within " + std::to_string(timeout_s) + " s: " + line.substr(0, 500));
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(std::min(left_ms, 200.0)) + 1) <= 0) continue;
    char c;
    const ssize_t n = ::read(fd, &c, 1);
    if (n <= 0) return Status::Unavailable("pipe closed before the end of a line: " + line.substr(0, 500));
    if (c == '\n') return line;
    if (line.size() >= max_bytes) return Status::ResourceExhausted("line longer than " + std::to_string(max_bytes) + " bytes");
    line.push_back(c);
  }
}

Status RunCommand(const std::vector<std::string>& argv) {
  KVSTREAM_ASSIGN_OR_RETURN(Child child, Spawn(argv));
  int exit_code = -1;
  const std::string out = Reap(child, 20, false, &exit_code);
  if (exit_code != 0) {
    std::string cmd;
    for (const auto& a : argv) cmd += a + " ";
    return Status::IoError(cmd + "failed (exit " + std::to_string(exit_code) + "): " + out);
  }
  return Status::Ok();
}

}  // namespace kvstream::cluster
