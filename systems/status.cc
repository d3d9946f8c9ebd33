#include "systems/status.h"

#include "systems/memory_manager.h"

namespace dmb::systems {

std::string_view CodeName(Code c) {
  switch (c) {
    case Code::kOk:
      return "OK";
    case Code::kOutOfMemory:
      return "OUT_OF_MEMORY";
    case Code::kUnsupported:
      return "UNSUPPORTED";
    case Code::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case Code::kAccessDenied:
      return "ACCESS_DENIED";
    case Code::kNotOwner:
      return "NOT_OWNER";
    case Code::kLaneBroken:
      return "LANE_BROKEN";
    case Code::kLeaseExpired:
      return "LEASE_EXPIRED";
  }
  return "?";
}

std::string Status::ToString() const {
  std::string s(CodeName(code_));
  if (msg_) s += ": " + *msg_;
  return s;
}

std::string_view IsolationName(Isolation i) {
  switch (i) {
    case Isolation::kRegion:
      return "region";
    case Isolation::kChunkRkey:
      return "chunk_rkey";
    case Isolation::kChunkQp:
      return "chunk_qp";
    case Isolation::kTranslated:
      return "translated";
  }
  return "?";
}

}  // namespace dmb::systems
