#include "fabric/verbs.h"

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

}  // namespace dmb::fabric
