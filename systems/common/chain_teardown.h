// Giving an offloaded chain's verbs objects back to its node (MN CPU, control
// path), for chains that are rebuilt (systems/onesided_mw renewals, ODRP's
// rebuilds after a fault): without it every rebuild keeps the old rings, CQs,
// scratch and staging for good.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "fabric/node.h"
#include "fabric/task.h"

namespace dmb::systems::chain {

// What one chain owns on its node. Null entries are skipped; a CQ may be
// listed more than once (QPs sharing it).
struct ChainParts {
  std::vector<fabric::Mr*> mrs;  // over its rings and its scratch
  std::vector<fabric::Qp*> qps;
  std::vector<fabric::Cq*> cqs;
  struct Range {
    uint64_t addr = 0;  // what one Memory::Alloc returned (0: none)
    uint64_t bytes = 0;
  };
  std::vector<Range> memory;  // its scratch (and staging)
};

// Stop the chain first (its QPs in ERR, nothing enabled any more). Order: the
// MRs (nothing may reach the rings or the scratch through them once the
// memory is reused), the QPs (their rings go back), their CQs, the memory.
inline Task<void> Teardown(fabric::Node* node, ChainParts parts) {
  for (fabric::Mr* mr : parts.mrs) {
    if (mr) co_await node->DeregMr(mr);
  }
  for (fabric::Qp* qp : parts.qps) {
    if (qp) node->DestroyQp(qp);
  }
  std::sort(parts.cqs.begin(), parts.cqs.end());
  parts.cqs.erase(std::unique(parts.cqs.begin(), parts.cqs.end()), parts.cqs.end());
  for (fabric::Cq* cq : parts.cqs) {
    if (cq) node->DestroyCq(cq);
  }
  for (const ChainParts::Range& r : parts.memory) {
    if (r.addr) node->memory().Free(r.addr, r.bytes);
  }
}

}  // namespace dmb::systems::chain
