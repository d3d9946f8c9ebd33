// Differential verbs corpus: scenarios written once against the fabric
// contract (node.h, verbs.h, backend.h) and run on the simulator and on real
// verbs (rxe), comparing what each backend observably does.
//
//  - A Scenario drives two nodes (Env: A and B; on ibv node 0 uses devices[0],
//    node 1 devices[1]) and writes its observations into a Transcript as
//    ordered `label = value` lines. Values are backend-independent (status and
//    state names, errno names, bytes as hex or digest, relationships such as
//    "rkey changed = yes"); raw keys, QP numbers, addresses and times are never
//    recorded.
//  - t.Expect(label, observed, spec) records an observation together with
//    what the IB spec (or, where the spec is unclear, the simulator) says; the
//    simulator must meet every expectation.
//  - A Scenario may declare Deviations: on one device family (e.g. "rxe") a
//    label shows exactly a different value, for a stated reason. The
//    deviation is itself tested: if that backend starts showing the spec value
//    again, the comparison says so and the deviation must be removed.
//  - RunScenario builds a fresh backend per scenario (no state leaks) and
//    Compare lines up a sim transcript with another backend's.
#pragma once

#include <concepts>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fabric/backend.h"
#include "fabric/node.h"
#include "fabric/task.h"
#include "fabric/verbs.h"

namespace dmb::verbs_diff {

using fabric::Backend;
using fabric::BackendOptions;
using fabric::Cq;
using fabric::Mr;
using fabric::Mw;
using fabric::MwType;
using fabric::Node;
using fabric::Opcode;
using fabric::Pd;
using fabric::Qp;
using fabric::QpAttr;
using fabric::QpInitAttr;
using fabric::QpState;
using fabric::RecvWr;
using fabric::SendWr;
using fabric::Sge;
using fabric::WcStatus;
using fabric::WorkCompletion;

inline constexpr uint32_t kAllAccess = fabric::kLocalWrite | fabric::kRemoteWrite |
                                       fabric::kRemoteRead | fabric::kRemoteAtomic |
                                       fabric::kMwBind;
inline constexpr uint32_t kWindowRw = fabric::kRemoteRead | fabric::kRemoteWrite;

// ---- Values -------------------------------------------------------------------

// A post/verb return code or VerbsError::err(): "0", "EINVAL", "ENOMEM", ...
struct Errno {
  int v = 0;
};

std::string ErrnoName(int e);
std::string ToValue(WcStatus s);
std::string ToValue(QpState s);
std::string ToValue(Opcode op);
std::string ToValue(Errno e);
std::string ToValue(bool b);  // "yes" / "no"
std::string ToValue(const std::string& s);
std::string ToValue(std::string_view s);
std::string ToValue(const char* s);
template <std::integral T>
requires(!std::same_as<T, bool>) std::string ToValue(T v) { return std::to_string(v); }
std::string Hex64(uint64_t v);  // "0x..." (atomics' old values, imm_data)

// Bytes as shown in a transcript: up to 32 bytes as hex, longer as
// "fnv1a64=<hex> len=<n>".
std::string ShowBytes(std::span<const uint8_t> bytes);
// A deterministic, seed-dependent byte pattern (never all zero).
std::vector<uint8_t> Pattern(uint64_t seed, uint64_t n);
std::string ShowPattern(uint64_t seed, uint64_t n);

// ---- Transcript ---------------------------------------------------------------

class Transcript {
 public:
  struct Line {
    std::string label;
    std::string value;
    std::optional<std::string> expected;  // the spec's value, when stated
    bool meets_spec() const { return !expected || *expected == value; }
  };

  // Records an observation without a spec expectation (still compared
  // across backends). A repeated label gets a " #2", " #3"... suffix.
  template <class V>
  void Note(std::string_view label, const V& observed) {
    Add(label, ToValue(observed), std::nullopt);
  }
  // Records an observation and what the spec says it must be.
  template <class V, class E>
  void Expect(std::string_view label, const V& observed, const E& expected) {
    Add(label, ToValue(observed), ToValue(expected));
  }

  const std::vector<Line>& lines() const { return lines_; }
  const Line* Find(std::string_view label) const;
  // "label: observed X, spec says Y" for every line that misses its spec.
  std::vector<std::string> SpecMismatches() const;
  std::string Render() const;  // one "label = value" per line

  // Free-form detail for humans (e.g. an exception's full message); never
  // compared.
  std::string detail;

 private:
  void Add(std::string_view label, std::string value, std::optional<std::string> expected);
  std::vector<Line> lines_;
};

// ---- Environment ----------------------------------------------------------------

// One end of a connection: a QP with its own send and receive CQs (separate,
// so the order of send vs receive completions never matters).
struct Ep {
  Node* node = nullptr;
  Pd* pd = nullptr;
  Qp* qp = nullptr;
  Cq* scq = nullptr;
  Cq* rcq = nullptr;
};

struct Pair {
  Ep x;  // requester side as the scenario sees it
  Ep y;
};

class Env {
 public:
  static constexpr uint64_t kMemBytes = 16ull << 20;
  static constexpr uint64_t kBufBytes = 2ull << 20;

  explicit Env(Backend& backend) : backend_(backend) {}

  // Adds nodes A (id 0) and B (id 1), one PD each and a kBufBytes buffer
  // registered with kAllAccess on each.
  Task<void> Init();

  Backend& backend() { return backend_; }
  fabric::Cluster& cluster() { return backend_.cluster(); }

  Node* A = nullptr;
  Node* B = nullptr;
  Pd* pa = nullptr;
  Pd* pb = nullptr;
  uint64_t abuf = 0;  // on A, covered by amr
  uint64_t bbuf = 0;  // on B, covered by bmr
  Mr* amr = nullptr;
  Mr* bmr = nullptr;

  // A QP (state RESET) with fresh send/recv CQs; `attr`'s pd and CQs are
  // filled in.
  Ep MakeEp(Node* n, Pd* pd, QpInitAttr attr = {});
  // Two fresh QPs connected to each other (RTS). x and y may be on one node.
  Pair Connect(Node* xn, Pd* xpd, Node* yn, Pd* ypd, QpInitAttr xattr = {}, QpInitAttr yattr = {});
  Pair AB(QpInitAttr aattr = {}, QpInitAttr battr = {}) {
    return Connect(A, pa, B, pb, aattr, battr);
  }
  // A QP connected to itself (loopback on A).
  Ep SelfLoop(QpInitAttr attr = {});

  uint64_t Alloc(Node* n, uint64_t bytes, uint64_t align = 4096) {
    return n->memory().Alloc(bytes, align);
  }
  Task<Mr*> RegMr(Node* n, Pd* pd, uint64_t addr, uint64_t len, uint32_t access) {
    return n->RegMr(pd, addr, len, access);
  }

  // Posts `wr` and awaits the next completion on the send CQ. The WR must be
  // accepted: a refusal ends the scenario with the line
  // `exception = PostSend(<OPCODE>) refused: <errno>`. Scenarios where a
  // backend may plausibly refuse at post time post themselves and record the
  // return code (see atomic_misaligned_invalid_request).
  Task<WorkCompletion> Exec(const Ep& e, SendWr wr);
  // Binds a type-1 MW with Qp::BindMw and awaits its completion.
  Task<WorkCompletion> BindType1(const Ep& e, Mw* mw, Mr* mr, uint64_t addr, uint64_t len,
                                 uint32_t access, uint32_t new_rkey);
  static Task<WorkCompletion> NextSend(const Ep& e);
  static Task<WorkCompletion> NextRecv(const Ep& e);
  // The next RECV completion within `limit_us` (virtual time on sim, wall
  // time on ibv), or none: for completions a device may never produce.
  Task<std::optional<WorkCompletion>> NextRecvWithin(const Ep& e, uint64_t limit_us);

  // CPU access to node memory.
  void Fill(Node* n, uint64_t addr, uint64_t len, uint64_t seed);
  void Zero(Node* n, uint64_t addr, uint64_t len);
  std::vector<uint8_t> Read(Node* n, uint64_t addr, uint64_t len);
  std::string Bytes(Node* n, uint64_t addr, uint64_t len) { return ShowBytes(Read(n, addr, len)); }

 private:
  Backend& backend_;
};

// ---- Work-request builders --------------------------------------------------------

SendWr ReadWr(uint64_t laddr, uint32_t lkey, uint32_t len, uint64_t raddr, uint32_t rkey,
              uint64_t wr_id = 1);
SendWr WriteWr(uint64_t laddr, uint32_t lkey, uint32_t len, uint64_t raddr, uint32_t rkey,
               uint64_t wr_id = 1);
SendWr CasWr(uint64_t laddr, uint32_t lkey, uint64_t raddr, uint32_t rkey, uint64_t compare,
             uint64_t swap, uint64_t wr_id = 1);
SendWr FaaWr(uint64_t laddr, uint32_t lkey, uint64_t raddr, uint32_t rkey, uint64_t add,
             uint64_t wr_id = 1);
SendWr SendMsg(uint64_t laddr, uint32_t lkey, uint32_t len, uint64_t wr_id = 1);
SendWr BindType2Wr(const Mw* mw, const Mr* mr, uint64_t addr, uint64_t len, uint32_t access,
                   uint32_t new_rkey, uint64_t wr_id = 1);
SendWr LocalInvWr(uint32_t rkey, uint64_t wr_id = 1);
RecvWr RecvMsg(uint64_t addr, uint32_t len, uint32_t lkey, uint64_t wr_id = 1);

// The same index with the next 8-bit key (what a rebind asks for).
inline uint32_t NextKey(uint32_t rkey) { return (rkey & ~0xffu) | ((rkey + 1) & 0xffu); }
// The same index with a key byte that is certainly wrong.
inline uint32_t WrongKey(uint32_t rkey) { return rkey ^ 0x5au; }

// Runs a control-path verb; "0" or the VerbsError errno name.
template <class F>
std::string ErrnoOf(F&& f) {
  try {
    f();
  } catch (const fabric::VerbsError& e) {
    return ErrnoName(e.err());
  }
  return "0";
}
Task<std::string> ErrnoOfTask(Task<void> t);
Task<std::string> RegMrErrno(Env& env, Node* n, Pd* pd, uint64_t addr, uint64_t len,
                             uint32_t access);

// ---- Scenarios -------------------------------------------------------------------

// What Compare shows for a line a transcript does not have. A deviation with
// this value says the backend never records that line (e.g. it refused a WR
// at post time, so no completion follows).
inline constexpr const char* kAbsent = "<absent>";

// On backends of `family` (e.g. "rxe"), `label` shows exactly `value` instead
// of the spec's value, because of `reason`. Adding a deviation is one line in
// the scenario's table entry, e.g.
//   {"rxe", "READ straddling the window end (inside the MR)", "SUCCESS", reason}
struct Deviation {
  std::string family;
  std::string label;
  std::string value;
  std::string reason;
};

struct Scenario {
  std::string name;
  std::string checks;  // one line: what it checks
  Task<void> (*fn)(Env&, Transcript&) = nullptr;
  std::vector<Deviation> deviations;
};

// Every scenario, grouped by theme (names are unique).
const std::vector<Scenario>& AllScenarios();

std::vector<Scenario> MrScenarios();
std::vector<Scenario> MwScenarios();
std::vector<Scenario> AtomicScenarios();
std::vector<Scenario> SendScenarios();
std::vector<Scenario> QpScenarios();

// Shared deviation reasons.
inline constexpr const char* kRxeMwBoundsReason =
    "rxe checks an access through a memory window only against the parent MR's range, not "
    "the window's (rxe_resp.c check_rkey: mr_check_range on the MR); the spec bounds it by "
    "the window";

// Observed on rxe (Linux 6.1, Debian 12) by `make test-rxe`.
inline constexpr const char* kRxeLkeyReason =
    "rxe completes a local key/access fault (bad or foreign lkey, RECV into an MR without "
    "LOCAL_WRITE) as LOC_QP_OP_ERR; ConnectX and the spec report LOC_PROT_ERR";
inline constexpr const char* kRxeDeregBusyReason =
    "rxe refuses to deregister an MR with bound windows with EINVAL; ConnectX and the sim say "
    "EBUSY (both refuse)";
inline constexpr const char* kRxeLengthReason =
    "rxe reports a SEND longer than the RECV as REM_OP_ERR (requester) and LOC_QP_OP_ERR "
    "(RECV); the spec has REM_INV_REQ_ERR and LOC_LEN_ERR";

// ---- Running and comparing -------------------------------------------------------------

// "sim" for the simulator; for ibv the device family of devices[0]
// ("rxe0" -> "rxe", "mlx5_0" -> "mlx5").
std::string BackendFamily(const BackendOptions& opts);
// The deviations of `s` that apply to `family`.
std::vector<Deviation> DeviationsFor(const Scenario& s, std::string_view family);

// Runs `s` on a fresh backend built from `opts`. An exception escaping the
// scenario is recorded as the line `exception = <kind>` (message in detail).
Transcript RunScenario(const BackendOptions& opts, const Scenario& s);

struct Difference {
  std::string label;
  std::string sim;       // "<absent>" when the line is missing
  std::string other;     // "<absent>" when the line is missing
  std::string note;      // why it is reported
  bool allowed = false;  // a declared deviation, observed exactly
};

// Lines up `other` against `sim` by label. Every differing line is reported;
// a line covered by one of `deviations` is allowed only when `other` shows
// exactly the declared value (if it shows the sim value the deviation is gone
// and must be removed; anything else is a plain mismatch).
std::vector<Difference> Compare(const Transcript& sim, const Transcript& other,
                                std::span<const Deviation> deviations);

}  // namespace dmb::verbs_diff
