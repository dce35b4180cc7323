// kvstream/status.h — the one error type of the library.
//
// Every fallible call returns a Status (or a Result<T>, a value or a Status). A Status carries a code and
// a message that names what was wrong: the field, the value seen and the limit or value expected, e.g.
// "chunk header: layers = 4096 exceeds limit 1024". Statuses are cheap to copy when OK. The library never
// aborts on bad input; exceptions are used only at the Python boundary, converted from a Status.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace kvstream {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // the caller passed something unusable (shape, option, flag)
  kCorruptData,        // bytes read from a file or the wire are malformed (bad magic, CRC, lying sizes)
  kUnsupported,        // well-formed but not handled (format version, tensor type, dtype)
  kNotFound,           // file, model, context or profile does not exist
  kResourceExhausted,  // a configured limit would be exceeded
  kIoError,            // the OS refused a read, write or socket operation
  kTimeout,            // a deadline or configured timeout passed
  kUnavailable,        // a peer is gone or refuses service
  kPermissionDenied,   // authentication failed
  kCancelled,
  kInternal,           // a bug in kvstream
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status CorruptData(std::string m) { return {StatusCode::kCorruptData, std::move(m)}; }
  static Status Unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
  static Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
  static Status Timeout(std::string m) { return {StatusCode::kTimeout, std::move(m)}; }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status PermissionDenied(std::string m) { return {StatusCode::kPermissionDenied, std::move(m)}; }
  static Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "CorruptData: chunk header: ..." — for logs and the CLI.
  std::string ToString() const;

  // Returns a copy whose message is prefixed with `context` ("loading model.gguf: ").
  Status WithContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// A value or the Status that explains why there is none. Accessing value() of a failed Result is a bug.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design, like absl::StatusOr
  Result(Status status) : status_(std::move(status)) {
    if (status_.ok()) status_ = Status::Internal("Result constructed from an OK status without a value");
  }

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace kvstream

// Propagates a failed Status from the current function.
#define KVSTREAM_RETURN_IF_ERROR(expr)                  \
  do {                                                  \
    ::kvstream::Status kvstream_status_ = (expr);       \
    if (!kvstream_status_.ok()) return kvstream_status_; \
  } while (0)

#define KVSTREAM_CONCAT_INNER_(a, b) a##b
#define KVSTREAM_CONCAT_(a, b) KVSTREAM_CONCAT_INNER_(a, b)
// `KVSTREAM_ASSIGN_OR_RETURN(auto x, Foo());` — binds the value or returns the Status.
#define KVSTREAM_ASSIGN_OR_RETURN(lhs, expr)                                      \
  auto KVSTREAM_CONCAT_(kvstream_result_, __LINE__) = (expr);                     \
  if (!KVSTREAM_CONCAT_(kvstream_result_, __LINE__).ok())                         \
    return KVSTREAM_CONCAT_(kvstream_result_, __LINE__).status();                 \
  lhs = std::move(KVSTREAM_CONCAT_(kvstream_result_, __LINE__)).value()
