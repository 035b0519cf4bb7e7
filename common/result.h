// Result<T>: the one error-as-value type of sonde (C++20 has no std::expected).
//
// A Result holds either a value or an Error. Errors are for likely environment failures
// (process exited, binary replaced, permission denied, malformed input); invariant violations
// are not errors, they abort. An Error carries an errno-style code when one exists, so callers
// can tell "process gone" (ESRCH/ENOENT) from "permission denied" (EPERM/EACCES).
#pragma once

#include <cassert>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace sonde {

class Error {
 public:
  explicit Error(std::string message, int code = 0) : message_(std::move(message)), code_(code) {}

  // What failed, on what, and what to do; one line, no trailing period.
  const std::string& message() const { return message_; }
  // errno value when the failure came from a system call, 0 otherwise.
  int code() const { return code_; }

  // Prefixes context: Error("open: ENOENT").wrap("resolve /usr/bin/node") reads
  // "resolve /usr/bin/node: open: ENOENT".
  Error wrap(const std::string& context) const { return Error(context + ": " + message_, code_); }

 private:
  std::string message_;
  int code_;
};

// The text of an errno value, thread-safe (strerror is not).
std::string errno_text(int err);
// Error from errno with "<what>: <errno_text>".
Error errno_error(const std::string& what, int err);

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return checked_value(); }
  const T& value() const& { return const_cast<Result*>(this)->checked_value(); }
  T&& value() && { return std::move(checked_value()); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const {
    if (ok()) std::abort();  // asking a success for its error is a programming error
    return std::get<1>(v_);
  }

 private:
  T& checked_value() {
    if (!ok()) std::abort();  // unchecked access to a failed Result is a programming error
    return std::get<0>(v_);
  }
  std::variant<T, Error> v_;
};

// Result<void>: success carries nothing.
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const {
    if (ok_) std::abort();
    return error_;
  }

 private:
  Error error_{""};
  bool ok_ = true;
};

using Status = Result<void>;
inline Status ok_status() {
  return {};
}

}  // namespace sonde

#define SONDE_CONCAT_INNER(a, b) a##b
#define SONDE_CONCAT(a, b) SONDE_CONCAT_INNER(a, b)

// RETURN_IF_ERROR(expr): expr yields a Result/Status; on failure return its Error.
#define RETURN_IF_ERROR(expr)                              \
  do {                                                     \
    auto&& sonde_status_ = (expr);                         \
    if (!sonde_status_.ok()) return sonde_status_.error(); \
  } while (0)

// ASSIGN_OR_RETURN(lhs, expr): lhs = value of expr, or return its Error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(SONDE_CONCAT(sonde_result_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.error();          \
  lhs = std::move(tmp).value()
