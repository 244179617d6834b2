//===- status.h - Status and Result<T> for the merak runtime ----*- C++ -*-===//
//
// Every fallible runtime call returns a Status or a Result<T>; no exception
// ever leaves the library. Messages are meant for
// the user ("checkpoint 'ckpt/step_10.safetensors': truncated: ...").
//
//===----------------------------------------------------------------------===//
#ifndef MERAK_RT_STATUS_H
#define MERAK_RT_STATUS_H

#include <optional>
#include <string>
#include <utility>

namespace merak::rt {

/// Success, or failure with a message.
class [[nodiscard]] Status {
public:
  Status() = default; // success
  static Status success() { return Status(); }
  static Status error(std::string message) {
    Status s;
    s.failed_ = true;
    s.message_ = std::move(message);
    return s;
  }
  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  /// Empty on success.
  const std::string &message() const { return message_; }

private:
  bool failed_ = false;
  std::string message_;
};

/// A value of type T, or an error message. T may be move-only.
template <typename T> class [[nodiscard]] Result {
public:
  Result(T value) : value_(std::move(value)) {}
  Result(Status status) : error_(status.message()) {
    // A Result built from a Status always holds an error.
    if (error_.empty())
      error_ = "unknown error";
  }
  static Result error(std::string message) {
    return Result(Status::error(std::move(message)));
  }

  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  const std::string &message() const { return error_; }
  Status status() const {
    return ok() ? Status::success() : Status::error(error_);
  }

  T &value() & { return *value_; }
  const T &value() const & { return *value_; }
  T &&value() && { return std::move(*value_); }
  T *operator->() { return &*value_; }
  const T *operator->() const { return &*value_; }
  T &operator*() & { return *value_; }
  const T &operator*() const & { return *value_; }

private:
  std::optional<T> value_;
  std::string error_;
};

} // namespace merak::rt

#endif // MERAK_RT_STATUS_H
