// The simulated RNIC's execution engine (internal to the sim backend).
//
// Event flow of one remote WQE:  QpStart (WQE read from memory, requester PU)
//   -> RespArrive (responder PU, protection check, memory effect)
//   -> Complete (requester scatters READ/atomic data; CQE in WQE order).
// Local WQEs (BIND_MW, LOCAL_INV, *_ENABLE, NOP, WAIT) go QpStart -> Complete.
#pragma once

#include "fabric/sim/sim_cluster.h"

namespace dmb::sim {

class Rnic {
 public:
  // Schedules the QP's next WQE start if it has work and nothing blocks it.
  static void Kick(SimQp* qp);
  // Moves `qp` to ERR: flushes unstarted send WQEs and posted RECVs.
  static void EnterError(SimQp* qp);
  // Flushes WQEs posted while the QP is in ERR.
  static void FlushUnstarted(SimQp* qp);
  // Called by a CQ when the count a blocked WAIT needs is reached.
  // A WAIT blocked on a CQ is released by a CQE that the RNIC generated at
  // `seen_at` (it lands in host memory later; the CQ's counter is RNIC state).
  static void ReleaseWait(SimQp* qp, Ps seen_at);

 private:
  static void OnQpStart(void* ctx, uint64_t arg);
  static void OnRespArrive(void* ctx, uint64_t arg);
  static void OnComplete(void* ctx, uint64_t arg);
  static void OnRecvComplete(void* ctx, uint64_t arg);
  // What the responder sends back: status, payload bytes, when it is ready.
  struct Response {
    fabric::WcStatus st;
    uint64_t payload;
    Ps t_data;
  };
  static void StartNext(SimQp* qp);
  static bool PassWait(SimQp* qp, const fabric::DecodedSendWqe& w, fabric::WcStatus* early);
  static void Enqueue(SimQp* qp, Op* op, fabric::WcStatus early);
  static void StartLocal(SimQp* qp, Op* op, Ps t_done);
  static void StartRemote(SimQp* qp, Op* op, Ps t_done);
  static void Respond(Op* op, SimNode* b, SimQp* p);
  static Response Execute(Op* op, SimNode* b, SimQp* p, Ps t_done);
  static void ExecuteAtomic(Op* op, SimNode* b, SimQp* p, Ps t_done, Response* r);
  static bool ConsumeRecv(Op* op, SimNode* b, SimQp* p, Ps t_done, Response* r);
  static void ScatterSend(Op* op, SimNode* b, SimQp* p, const fabric::Sge* sges, int n,
                          fabric::WorkCompletion* wc, fabric::WcStatus* st);
  static void Retire(SimQp* qp);
  static void Unblock(SimQp* qp);
  static void ApplyLocal(Op* op);
  static fabric::WcStatus DoBind(SimQp* qp, const fabric::DecodedSendWqe& w);
  static fabric::WcStatus DoLocalInv(SimQp* qp, uint32_t rkey, bool remote);
  static fabric::WcStatus DoEnable(SimQp* qp, const fabric::DecodedSendWqe& w);
  static fabric::WcStatus CheckRemote(SimNode* n, SimQp* p, uint32_t rkey, uint64_t addr,
                                      uint64_t len, uint32_t need);
  static fabric::WcStatus CheckLocal(SimNode* n, SimQp* qp, const fabric::Sge& sge, bool write);
  static Ps ClaimPu(SimNode* n, Ps earliest, Ps proc);
  static Ps Transmit(SimNode* from, SimNode* to, Ps ready, uint64_t payload);
  static void DeliverRecvError(SimQp* p, fabric::WcStatus st, uint64_t wr_id);
};

}  // namespace dmb::sim
