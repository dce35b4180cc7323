// The Python Sender and Receiver: owners of the C++ objects that Python threads may call at once and
// close at any time. A call runs with the GIL released under a shared lock; close waits, GIL released,
// for calls in progress, then destroys the C++ object, so no call ever sees it freed.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <utility>

#include <nanobind/nanobind.h>

#include "bindings/src/errors.h"
#include "kvstream/stream.h"

namespace kvstream::python {

// How a Sender is started: Sender::Start, or the tests' start with a fault hook (tests/python).
using SenderStarter = std::function<Result<std::unique_ptr<Sender>>(SenderOptions)>;

// `T` is Sender or Receiver; `what` names it in the error after close.
template <typename T>
class Guarded {
 public:
  explicit Guarded(const char* what) : what_(what) {}
  void Reset(std::unique_ptr<T> object) { object_ = std::move(object); }
  // Runs fn(T&) with the GIL released; Unavailable once closed.
  template <typename Fn>
  auto Run(Fn&& fn) {
    nanobind::gil_scoped_release release;
    std::shared_lock lock(mu_);
    if (!object_) throw StatusError(Status::Unavailable(std::string("the ") + what_ + " is closed"));
    return fn(*object_);
  }
  void Close() {
    nanobind::gil_scoped_release release;
    std::unique_lock lock(mu_);
    object_.reset();
  }

 private:
  const char* what_;
  std::shared_mutex mu_;
  std::unique_ptr<T> object_;
};

class PySender {
 public:
  PySender(SenderOptions options, const SenderStarter& start);
  ~PySender() { Close(); }
  int Port();
  void Register(const std::string& id, nanobind::handle keys, nanobind::handle values, nanobind::handle token_ids,
                nanobind::handle importance, int64_t batch_index);
  void Unregister(const std::string& id);
  nanobind::dict Stats();
  void Close();

 private:
  Guarded<Sender> sender_{"sender"};
  // The arrays of registered contexts, read in place by the sender: released after it stops.
  std::map<std::string, std::pair<nanobind::object, nanobind::object>> registered_;
};

// The Sender's options from Python's arguments (each checked, naming it).
SenderOptions SenderOptionsOf(const std::string& host, int port, const Profile* profile, nanobind::handle secret,
                              const std::string& scheme, nanobind::handle levels, int chunk_tokens, double fine_fraction,
                              nanobind::handle fine_level, uint64_t cache_bytes, int encode_threads, int max_connections);

class PyReceiver {
 public:
  PyReceiver(const std::string& host, int port, nanobind::handle secret, const Profile* profile, int max_inflight_chunks,
             int decode_threads, int chunk_timeout_ms, int connect_timeout_ms);
  ~PyReceiver() { Close(); }
  nanobind::dict Manifest(const std::string& id);
  nanobind::dict Fetch(const std::string& id, nanobind::handle keys, nanobind::handle values, double deadline_ms,
                       const std::string& policy, int64_t batch_index);
  void Close() { receiver_.Close(); }

 private:
  Guarded<Receiver> receiver_{"receiver"};
  int inflight_ = 2;
};

}  // namespace kvstream::python
