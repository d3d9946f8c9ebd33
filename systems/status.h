// Data-path results of a MemoryManager: verbs-style status codes with a
// message a user can act on. Setup errors are exceptions (std::invalid_argument
// for bad configuration, fabric::VerbsError for verbs failures).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace dmb::systems {

enum class Code : uint8_t {
  kOk = 0,
  kOutOfMemory,      // the MN has no free chunk (or the CN is over its budget)
  kUnsupported,      // the approach cannot do this (size, offset, operation)
  kInvalidArgument,  // out of the chunk's bounds, bad buffer, unknown chunk
  kAccessDenied,     // the RNIC refused the access (bad rkey, wrong QP, bounds)
  kNotOwner,         // the MN refused: the chunk belongs to another CN
  kLaneBroken,       // the lane's QP is in the error state (until recovered)
  kLeaseExpired,     // Patronus leases: the permission ran out
};
std::string_view CodeName(Code c);

// A Status is passed up through every data-path coroutine, mostly as OK: the
// message lives behind a pointer (null when empty), so an OK Status moves and
// copies as three words (the code and a shared_ptr), with no string to move.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string msg)
      : code_(code),
        msg_(msg.empty() ? nullptr : std::make_shared<const std::string>(std::move(msg))) {}
  static Status Ok() { return {}; }
  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return msg_ ? *msg_ : kNoMessage; }
  // "ACCESS_DENIED: READ of 64 B at +4096 refused by the MN (REM_ACCESS_ERR)".
  std::string ToString() const;

 private:
  static inline const std::string kNoMessage;
  Code code_ = Code::kOk;
  std::shared_ptr<const std::string> msg_;  // immutable, so copies may share it
};

// A value or the Status that explains why there is none.
template <typename T>
struct [[nodiscard]] Result {
  Status status;
  T value{};
  bool ok() const { return status.ok(); }
};

}  // namespace dmb::systems
