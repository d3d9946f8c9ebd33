#include "fabric/verbs.h"

#include <algorithm>
#include <cerrno>
#include <stdexcept>

#include "fabric/node.h"

namespace dmb::fabric {

std::string_view OpcodeName(Opcode op) {
  switch (op) {
    case Opcode::kNop:
      return "NOP";
    case Opcode::kWrite:
      return "WRITE";
    case Opcode::kWriteWithImm:
      return "WRITE_WITH_IMM";
    case Opcode::kSend:
      return "SEND";
    case Opcode::kSendWithInv:
      return "SEND_WITH_INV";
    case Opcode::kRead:
      return "READ";
    case Opcode::kCmpAndSwp:
      return "CMP_AND_SWP";
    case Opcode::kFetchAndAdd:
      return "FETCH_AND_ADD";
    case Opcode::kMaskedFetchAndAdd:
      return "MASKED_FETCH_AND_ADD";
    case Opcode::kBindMw:
      return "BIND_MW";
    case Opcode::kLocalInv:
      return "LOCAL_INV";
    case Opcode::kWait:
      return "WAIT";
    case Opcode::kSendEnable:
      return "SEND_ENABLE";
    case Opcode::kRecvEnable:
      return "RECV_ENABLE";
    case Opcode::kRecv:
      return "RECV";
    case Opcode::kRecvRdmaWithImm:
      return "RECV_RDMA_WITH_IMM";
  }
  return "UNKNOWN_OPCODE";
}

std::string_view WcStatusName(WcStatus s) {
  switch (s) {
    case WcStatus::kSuccess:
      return "SUCCESS";
    case WcStatus::kLocLenErr:
      return "LOC_LEN_ERR";
    case WcStatus::kLocQpOpErr:
      return "LOC_QP_OP_ERR";
    case WcStatus::kLocProtErr:
      return "LOC_PROT_ERR";
    case WcStatus::kWrFlushErr:
      return "WR_FLUSH_ERR";
    case WcStatus::kMwBindErr:
      return "MW_BIND_ERR";
    case WcStatus::kRemInvReqErr:
      return "REM_INV_REQ_ERR";
    case WcStatus::kRemAccessErr:
      return "REM_ACCESS_ERR";
    case WcStatus::kRemOpErr:
      return "REM_OP_ERR";
    case WcStatus::kRetryExcErr:
      return "RETRY_EXC_ERR";
    case WcStatus::kRnrRetryExcErr:
      return "RNR_RETRY_EXC_ERR";
    case WcStatus::kLocAccessErr:
      return "LOC_ACCESS_ERR";
  }
  return "UNKNOWN_STATUS";
}

std::string_view QpStateName(QpState s) {
  switch (s) {
    case QpState::kReset:
      return "RESET";
    case QpState::kInit:
      return "INIT";
    case QpState::kRtr:
      return "RTR";
    case QpState::kRts:
      return "RTS";
    case QpState::kErr:
      return "ERR";
  }
  return "UNKNOWN_STATE";
}

std::vector<std::string> MissingCaps(const DeviceCaps& have, const std::vector<std::string>& need) {
  const std::pair<const char*, bool> all[] = {
      {"mw_type1", have.mw_type1},
      {"mw_type2", have.mw_type2},
      {"atomics", have.atomics},
      {"masked_atomics", have.masked_atomics},
      {"cross_channel", have.cross_channel},
      {"qpn_in_bind", have.qpn_in_bind},
  };
  std::vector<std::string> missing;
  for (const auto& n : need) {
    bool known = false;
    for (const auto& [name, ok] : all) {
      if (n == name) {
        known = true;
        if (!ok) missing.push_back(n);
      }
    }
    if (!known) throw std::invalid_argument("unknown device capability '" + n + "'");
  }
  return missing;
}

void RequireCaps(const Node& node, const std::vector<std::string>& need, const std::string& who) {
  const auto missing = MissingCaps(node.caps(), need);
  if (missing.empty()) return;
  std::string list;
  for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
  throw VerbsError(EOPNOTSUPP, who + " needs " + list + ", which the RDMA device of node '" +
                                   node.name() +
                                   "' lacks (see `dmbench devices`; cross_channel and "
                                   "qpn_in_bind need ConnectX with mlx5 cross-channel QPs)");
}

uint64_t BumpAlloc(uint64_t* next_free, uint64_t size, uint64_t bytes, uint64_t align,
                   const std::string& node_name) {
  if (align == 0 || (align & (align - 1)) != 0) {
    throw std::invalid_argument("Alloc alignment must be a power of two, got " +
                                std::to_string(align));
  }
  const uint64_t start = (*next_free + align - 1) & ~(align - 1);
  if (start > size || bytes > size - start) {
    throw VerbsError(ENOMEM, "node '" + node_name + "' memory exhausted: requested " +
                                 std::to_string(bytes) + " bytes, " +
                                 std::to_string(size - std::min(size, start)) + " of " +
                                 std::to_string(size) + " free");
  }
  *next_free = start + bytes;
  return start;
}

}  // namespace dmb::fabric
