#include "fabric/verbs_diff/scenario.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <stdexcept>

namespace dmb::verbs_diff {

// ---- Values -------------------------------------------------------------------

std::string ErrnoName(int e) {
  switch (e) {
    case 0:
      return "0";
    case EINVAL:
      return "EINVAL";
    case ENOMEM:
      return "ENOMEM";
    case EBUSY:
      return "EBUSY";
    case EPERM:
      return "EPERM";
    case EACCES:
      return "EACCES";
    case ENOENT:
      return "ENOENT";
    case EFAULT:
      return "EFAULT";
    case EAGAIN:
      return "EAGAIN";
    case ENOSYS:
      return "ENOSYS";
    case EOPNOTSUPP:
      return "EOPNOTSUPP";
    default:
      return "errno " + std::to_string(e);
  }
}

std::string ToValue(WcStatus s) { return std::string(fabric::WcStatusName(s)); }
std::string ToValue(QpState s) { return std::string(fabric::QpStateName(s)); }
std::string ToValue(Opcode op) { return std::string(fabric::OpcodeName(op)); }
std::string ToValue(Errno e) { return ErrnoName(e.v); }
std::string ToValue(bool b) { return b ? "yes" : "no"; }
std::string ToValue(const std::string& s) { return s; }
std::string ToValue(std::string_view s) { return std::string(s); }
std::string ToValue(const char* s) { return s; }

std::string Hex64(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string ShowBytes(std::span<const uint8_t> bytes) {
  static const char* kDigits = "0123456789abcdef";
  if (bytes.size() <= 32) {
    std::string s;
    for (uint8_t b : bytes) {
      s += kDigits[b >> 4];
      s += kDigits[b & 15];
    }
    return bytes.empty() ? "<empty>" : s;
  }
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint8_t b : bytes) h = (h ^ b) * 0x100000001b3ull;
  char buf[64];
  std::snprintf(buf, sizeof buf, "fnv1a64=%016llx len=%zu", static_cast<unsigned long long>(h),
                bytes.size());
  return buf;
}

std::vector<uint8_t> Pattern(uint64_t seed, uint64_t n) {
  std::vector<uint8_t> out(n);
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 0x2545f4914f6cdd1dull;
  for (uint64_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    out[i] = static_cast<uint8_t>(x >> 24) | 1;  // never zero: zeroed memory never matches
  }
  return out;
}

std::string ShowPattern(uint64_t seed, uint64_t n) { return ShowBytes(Pattern(seed, n)); }

// ---- Transcript ---------------------------------------------------------------

void Transcript::Add(std::string_view label, std::string value,
                     std::optional<std::string> expected) {
  std::string l(label);
  if (Find(l)) {
    for (int i = 2;; ++i) {
      std::string alt = l + " #" + std::to_string(i);
      if (!Find(alt)) {
        l = std::move(alt);
        break;
      }
    }
  }
  lines_.push_back({std::move(l), std::move(value), std::move(expected)});
}

const Transcript::Line* Transcript::Find(std::string_view label) const {
  for (const auto& l : lines_) {
    if (l.label == label) return &l;
  }
  return nullptr;
}

std::vector<std::string> Transcript::SpecMismatches() const {
  std::vector<std::string> out;
  for (const auto& l : lines_) {
    if (!l.meets_spec()) {
      out.push_back(l.label + ": observed " + l.value + ", spec says " + *l.expected);
    }
  }
  return out;
}

std::string Transcript::Render() const {
  std::string s;
  for (const auto& l : lines_) {
    s += l.label + " = " + l.value;
    if (!l.meets_spec()) s += "   (spec: " + *l.expected + ")";
    s += "\n";
  }
  return s;
}

// ---- Environment ----------------------------------------------------------------

namespace {

// Thrown by Exec/BindType1 when the backend refuses the WR at post time. The
// transcript then ends with `exception = <verb> refused: <errno>` (a stable,
// comparable value a deviation may name).
class PostRefused : public std::runtime_error {
 public:
  explicit PostRefused(const std::string& value)
      : std::runtime_error(value + " (Env::Exec expects the WR to be accepted)"), value_(value) {}
  const std::string& value() const { return value_; }

 private:
  std::string value_;
};

}  // namespace

Task<void> Env::Init() {
  fabric::Cluster& c = cluster();
  A = c.AddNode({.name = "A", .memory_bytes = kMemBytes});
  B = c.AddNode({.name = "B", .memory_bytes = kMemBytes});
  pa = A->AllocPd();
  pb = B->AllocPd();
  abuf = Alloc(A, kBufBytes);
  bbuf = Alloc(B, kBufBytes);
  Zero(A, abuf, kBufBytes);
  Zero(B, bbuf, kBufBytes);
  amr = co_await A->RegMr(pa, abuf, kBufBytes, kAllAccess);
  bmr = co_await B->RegMr(pb, bbuf, kBufBytes, kAllAccess);
}

Ep Env::MakeEp(Node* n, Pd* pd, QpInitAttr attr) {
  Ep e;
  e.node = n;
  e.pd = pd;
  e.scq = n->CreateCq(256);
  e.rcq = n->CreateCq(256);
  attr.pd = pd;
  attr.send_cq = e.scq;
  attr.recv_cq = e.rcq;
  e.qp = n->CreateQp(attr);
  return e;
}

Pair Env::Connect(Node* xn, Pd* xpd, Node* yn, Pd* ypd, QpInitAttr xattr, QpInitAttr yattr) {
  Pair p{MakeEp(xn, xpd, xattr), MakeEp(yn, ypd, yattr)};
  cluster().Connect(p.x.qp, p.y.qp);
  return p;
}

Ep Env::SelfLoop(QpInitAttr attr) {
  Ep e = MakeEp(A, pa, attr);
  cluster().Connect(e.qp, e.qp);
  return e;
}

Task<WorkCompletion> Env::Exec(const Ep& e, SendWr wr) {
  const int rc = e.qp->PostSend(wr);
  if (rc != 0) {
    throw PostRefused("PostSend(" + std::string(fabric::OpcodeName(wr.opcode)) +
                      ") refused: " + ErrnoName(rc));
  }
  co_return co_await e.scq->Next();
}

Task<WorkCompletion> Env::BindType1(const Ep& e, Mw* mw, Mr* mr, uint64_t addr, uint64_t len,
                                    uint32_t access, uint32_t new_rkey) {
  const int rc = e.qp->BindMw(mw, 77, mr, addr, len, access, new_rkey);
  if (rc != 0) throw PostRefused("BindMw refused: " + ErrnoName(rc));
  co_return co_await e.scq->Next();
}

Task<WorkCompletion> Env::NextSend(const Ep& e) { co_return co_await e.scq->Next(); }
Task<std::optional<WorkCompletion>> Env::NextRecvWithin(const Ep& e, uint64_t limit_us) {
  fabric::Runtime& rt = cluster().runtime();
  const Ps deadline = rt.now() + static_cast<Ps>(limit_us) * kPsPerUs;
  for (;;) {
    WorkCompletion wc;
    if (e.rcq->Poll({&wc, 1}) == 1) co_return wc;
    if (rt.now() >= deadline) co_return std::nullopt;
    co_await rt.SleepFor(50 * kPsPerUs);
  }
}

Task<WorkCompletion> Env::NextRecv(const Ep& e) { co_return co_await e.rcq->Next(); }

void Env::Fill(Node* n, uint64_t addr, uint64_t len, uint64_t seed) {
  const auto p = Pattern(seed, len);
  n->memory().Write(addr, p.data(), len);
}

void Env::Zero(Node* n, uint64_t addr, uint64_t len) { n->memory().Fill(addr, 0, len); }

std::vector<uint8_t> Env::Read(Node* n, uint64_t addr, uint64_t len) {
  std::vector<uint8_t> out(len);
  if (len) n->memory().Read(addr, out.data(), len);
  return out;
}

// ---- Work-request builders --------------------------------------------------------

SendWr ReadWr(uint64_t laddr, uint32_t lkey, uint32_t len, uint64_t raddr, uint32_t rkey,
              uint64_t wr_id) {
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = Opcode::kRead;
  if (len > 0) wr.sg_list = {{laddr, len, lkey}};
  wr.remote_addr = raddr;
  wr.rkey = rkey;
  return wr;
}

SendWr WriteWr(uint64_t laddr, uint32_t lkey, uint32_t len, uint64_t raddr, uint32_t rkey,
               uint64_t wr_id) {
  SendWr wr = ReadWr(laddr, lkey, len, raddr, rkey, wr_id);
  wr.opcode = Opcode::kWrite;
  return wr;
}

SendWr CasWr(uint64_t laddr, uint32_t lkey, uint64_t raddr, uint32_t rkey, uint64_t compare,
             uint64_t swap, uint64_t wr_id) {
  SendWr wr = ReadWr(laddr, lkey, 8, raddr, rkey, wr_id);
  wr.opcode = Opcode::kCmpAndSwp;
  wr.compare_add = compare;
  wr.swap = swap;
  return wr;
}

SendWr FaaWr(uint64_t laddr, uint32_t lkey, uint64_t raddr, uint32_t rkey, uint64_t add,
             uint64_t wr_id) {
  SendWr wr = ReadWr(laddr, lkey, 8, raddr, rkey, wr_id);
  wr.opcode = Opcode::kFetchAndAdd;
  wr.compare_add = add;
  return wr;
}

SendWr SendMsg(uint64_t laddr, uint32_t lkey, uint32_t len, uint64_t wr_id) {
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = Opcode::kSend;
  if (len > 0) wr.sg_list = {{laddr, len, lkey}};
  return wr;
}

SendWr BindType2Wr(const Mw* mw, const Mr* mr, uint64_t addr, uint64_t len, uint32_t access,
                   uint32_t new_rkey, uint64_t wr_id) {
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = Opcode::kBindMw;
  wr.bind_mw_rkey = mw->rkey();
  wr.bind_new_rkey = new_rkey;
  wr.bind_mr_lkey = mr ? mr->lkey() : 0;
  wr.bind_addr = addr;
  wr.bind_length = len;
  wr.bind_access = access;
  wr.bind_qpn = 0;  // the posting QP
  return wr;
}

SendWr LocalInvWr(uint32_t rkey, uint64_t wr_id) {
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = Opcode::kLocalInv;
  wr.invalidate_rkey = rkey;
  return wr;
}

RecvWr RecvMsg(uint64_t addr, uint32_t len, uint32_t lkey, uint64_t wr_id) {
  RecvWr wr;
  wr.wr_id = wr_id;
  if (len > 0) wr.sg_list = {{addr, len, lkey}};
  return wr;
}

Task<std::string> ErrnoOfTask(Task<void> t) {
  try {
    co_await t;
  } catch (const fabric::VerbsError& e) {
    co_return ErrnoName(e.err());
  }
  co_return "0";
}

Task<std::string> RegMrErrno(Env& env, Node* n, Pd* pd, uint64_t addr, uint64_t len,
                             uint32_t access) {
  try {
    co_await env.RegMr(n, pd, addr, len, access);
  } catch (const fabric::VerbsError& e) {
    co_return ErrnoName(e.err());
  }
  co_return "0";
}

// ---- Registry ---------------------------------------------------------------------

const std::vector<Scenario>& AllScenarios() {
  static const std::vector<Scenario> all = [] {
    std::vector<Scenario> v;
    for (auto group : {MrScenarios, MwScenarios, AtomicScenarios, SendScenarios, QpScenarios}) {
      for (auto& s : group()) v.push_back(std::move(s));
    }
    std::map<std::string, int> seen;
    for (const auto& s : v) {
      if (seen[s.name]++) throw std::logic_error("verbs_diff: duplicate scenario " + s.name);
    }
    return v;
  }();
  return all;
}

// ---- Running and comparing -------------------------------------------------------------

std::string BackendFamily(const BackendOptions& opts) {
  if (opts.kind != "ibv") return opts.kind;
  if (opts.devices.empty()) return "ibv";
  std::string d = opts.devices[0];
  // Drop the instance number: "rxe0" -> "rxe", "mlx5_0" -> "mlx5".
  while (!d.empty() && std::isdigit(static_cast<unsigned char>(d.back()))) d.pop_back();
  if (!d.empty() && d.back() == '_') d.pop_back();
  return d.empty() ? "ibv" : d;
}

std::vector<Deviation> DeviationsFor(const Scenario& s, std::string_view family) {
  std::vector<Deviation> out;
  for (const auto& d : s.deviations) {
    if (d.family == family) out.push_back(d);
  }
  return out;
}

namespace {

// Turns a scenario that never finishes (a completion that never arrives) into
// an error instead of a hang. Sim: virtual time, so it only fires when the
// scenario is blocked for good; ibv: wall clock.
constexpr Ps kWatchdog = 120 * kPsPerS;

Task<void> Watchdog(fabric::Runtime& rt, const bool* done) {
  co_await rt.SleepFor(kWatchdog);
  if (!*done) throw std::runtime_error("scenario still blocked after 120 s (a lost completion?)");
}

Task<void> Body(Env& env, const Scenario& s, Transcript& t, bool* done) {
  co_await env.Init();
  env.cluster().runtime().Spawn(Watchdog(env.cluster().runtime(), done));
  co_await s.fn(env, t);
  *done = true;
}

}  // namespace

Transcript RunScenario(const BackendOptions& opts, const Scenario& s) {
  Transcript t;
  auto done = std::make_unique<bool>(false);
  try {
    std::unique_ptr<Backend> backend = fabric::MakeBackend(opts);
    {
      Env env(*backend);
      backend->Run(Body(env, s, t, done.get()));
    }
  } catch (const PostRefused& e) {
    t.Note("exception", e.value());
    t.detail = e.what();
  } catch (const fabric::VerbsError& e) {
    t.Note("exception", "VerbsError " + ErrnoName(e.err()));
    t.detail = e.what();
  } catch (const std::exception& e) {
    t.Note("exception", "std::exception");
    t.detail = e.what();
  }
  return t;
}

std::vector<Difference> Compare(const Transcript& sim, const Transcript& other,
                                std::span<const Deviation> deviations) {
  std::vector<Difference> out;
  auto deviation_for = [&](const std::string& label) -> const Deviation* {
    for (const auto& d : deviations) {
      if (d.label == label) return &d;
    }
    return nullptr;
  };
  for (const auto& s : sim.lines()) {
    const auto* o = other.Find(s.label);
    const std::string ov = o ? o->value : kAbsent;
    const Deviation* d = deviation_for(s.label);
    if (d) {
      if (ov == d->value) {
        out.push_back({s.label, s.value, ov, "declared deviation: " + d->reason, true});
      } else if (ov == s.value) {
        out.push_back(
            {s.label, s.value, ov,
             "deviation no longer observed (shows the sim/spec value " + s.value + "): remove it",
             false});
      } else {
        out.push_back(
            {s.label, s.value, ov, "declared deviation says " + d->value + ", saw " + ov, false});
      }
    } else if (ov != s.value) {
      out.push_back({s.label, s.value, ov, o ? "differs" : "missing on this backend", false});
    }
  }
  for (const auto& o : other.lines()) {
    if (sim.Find(o.label)) continue;
    const Deviation* d = deviation_for(o.label);
    if (d && o.value == d->value) {
      out.push_back({o.label, kAbsent, o.value, "declared deviation: " + d->reason, true});
    } else {
      out.push_back({o.label, kAbsent, o.value, "only on this backend", false});
    }
  }
  for (const auto& d : deviations) {
    if (!sim.Find(d.label) && !other.Find(d.label)) {
      out.push_back({d.label, kAbsent, kAbsent,
                     "declared deviation names a label neither transcript has", false});
    }
  }
  return out;
}

}  // namespace dmb::verbs_diff
