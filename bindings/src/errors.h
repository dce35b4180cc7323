// Statuses crossing into Python: one exception class per StatusCode (kvstream.Error and its subclasses),
// raised with the C++ message unchanged.
#pragma once

#include <exception>
#include <string>
#include <utility>

#include <nanobind/nanobind.h>

#include "kvstream/status.h"

namespace kvstream::python {

// Thrown by binding code; the translator registered by RegisterErrors raises the class of its code.
class StatusError : public std::exception {
 public:
  explicit StatusError(Status status) : status_(std::move(status)) {}
  const Status& status() const { return status_; }
  const char* what() const noexcept override { return status_.message().c_str(); }

 private:
  Status status_;
};

inline void ThrowIfError(const Status& status) {
  if (!status.ok()) throw StatusError(status);
}

template <typename T>
T ValueOrThrow(Result<T> result) {
  if (!result.ok()) throw StatusError(result.status());
  return std::move(result).value();
}

// kvstream.InvalidArgumentError "`argument`: `problem`" — how every bad Python argument is reported.
[[noreturn]] inline void ThrowArgumentError(const std::string& argument, const std::string& problem) {
  throw StatusError(Status::InvalidArgument(argument + ": " + problem));
}

// Creates kvstream.Error and its subclasses in `m` and the translator that raises them.
void RegisterErrors(nanobind::module_& m);

}  // namespace kvstream::python
