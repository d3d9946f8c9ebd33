#include "fabric/ibv/ibv_cluster.h"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "fabric/ibv/ibv_objects.h"

namespace dmb::fabric::ibv {

void RemoteQp::Refuse(const char* what) const {
  throw std::logic_error(std::string("ibv: Qp::") + what + " on QP " + std::to_string(qp_num()) +
                         ", which lives in another process (node " + std::to_string(node_id_) +
                         ")");
}

void RemoteNode::Refuse(const char* what) const {
  throw std::logic_error(std::string("ibv: Node::") + what + " on node '" + name_ +
                         "', which lives in another process");
}

// ---- Node -------------------------------------------------------------------

IbvNode::IbvNode(IbvCluster* cluster, uint32_t id, const NodeConfig& cfg, Device dev)
    : cluster_(cluster),
      id_(id),
      name_(cfg.name),
      dev_(dev),
      mem_(cfg.name, cfg.memory_bytes),
      cpu_(cfg.cpu_cores) {
  const int fl = fcntl(dev_.ctx->async_fd, F_GETFL);
  fcntl(dev_.ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
  channel_ = ibv_create_comp_channel(dev_.ctx);
  if (!channel_) {
    const int err = errno;
    CloseDevice(dev_);
    throw VerbsError(err, "ibv_create_comp_channel on node '" + name_ + "': " + strerror(err));
  }
  fcntl(channel_->fd, F_SETFL, fcntl(channel_->fd, F_GETFL) | O_NONBLOCK);
  if (const char* s = std::getenv("DMB_IBV_POST_BATCH"))
    post_batching_ = std::string_view(s) != "0";
}

IbvNode::~IbvNode() {
  // Windows first: a bound MW holds references on its QP and MR, and rxe
  // waits (tens of seconds) for references when destroying either.
  for (auto& w : mws_) ibv_dealloc_mw(w->raw());
  for (auto& q : qps_) ibv_destroy_qp(q->raw());
  for (auto& m : mrs_) {
    if (m->raw()) ibv_dereg_mr(m->raw());
  }
  AckCqEvents();  // ibv_destroy_cq waits for every event to be acknowledged
  for (auto& c : cqs_) ibv_destroy_cq(c->raw());
  ibv_destroy_comp_channel(channel_);
  for (auto& p : pds_) ibv_dealloc_pd(p->raw());
  CloseDevice(dev_);
}

CpuCost IbvNode::Cost(std::string_view name) const {
  auto [it, fresh] = cost_ids_.emplace(std::string(name), cost_ids_.size() + 1);
  (void)fresh;
  return CpuCost{it->second, 0};
}

Pd* IbvNode::AllocPd() {
  ibv_pd* pd = ibv_alloc_pd(dev_.ctx);
  if (!pd) throw VerbsError(errno, "ibv_alloc_pd on node '" + name_ + "': " + strerror(errno));
  pds_.push_back(std::make_unique<IbvPd>(pd, static_cast<uint32_t>(pds_.size() + 1)));
  return pds_.back().get();
}

Task<Mr*> IbvNode::RegMr(Pd* pd, uint64_t addr, uint64_t length, uint32_t access) {
  auto* p = dynamic_cast<IbvPd*>(pd);
  if (!p) throw VerbsError(EINVAL, "reg_mr on node '" + name_ + "': not a PD of this backend");
  if (addr == 0 || addr > mem_.size_bytes() || length > mem_.size_bytes() - addr || length == 0) {
    throw VerbsError(EINVAL, "reg_mr on node '" + name_ + "': range [" + std::to_string(addr) +
                                 ", +" + std::to_string(length) + ") outside node memory");
  }
  if ((access & (kRemoteWrite | kRemoteAtomic)) && !(access & kLocalWrite)) {
    throw VerbsError(EINVAL, "reg_mr: REMOTE_WRITE/REMOTE_ATOMIC need LOCAL_WRITE");
  }
  ibv_mr* mr = ibv_reg_mr_iova(p->raw(), mem_.host(addr), length, addr, IbvAccess(access));
  if (!mr) {
    throw VerbsError(errno, "ibv_reg_mr_iova on node '" + name_ + "' [" + std::to_string(addr) +
                                ", +" + std::to_string(length) + "): " + strerror(errno));
  }
  mrs_.push_back(std::make_unique<IbvMr>(mr, p, addr, length, access));
  co_return mrs_.back().get();
}

Task<void> IbvNode::DeregMr(Mr* mr) {
  for (auto it = mrs_.begin(); it != mrs_.end(); ++it) {
    if (it->get() != mr) continue;
    if (const int rc = ibv_dereg_mr((*it)->raw()); rc != 0) {
      throw VerbsError(rc, "ibv_dereg_mr on node '" + name_ + "': " + strerror(rc));
    }
    for (auto& w : mws_) {
      if (w->last_mr == it->get()) w->last_mr = nullptr;
    }
    mrs_.erase(it);
    co_return;
  }
  throw VerbsError(EINVAL, "dereg_mr on node '" + name_ + "': not a live MR here");
}

Mw* IbvNode::AllocMw(Pd* pd, MwType type) {
  auto* p = dynamic_cast<IbvPd*>(pd);
  if (!p) throw VerbsError(EINVAL, "alloc_mw on node '" + name_ + "': not a PD of this backend");
  ibv_mw* mw = ibv_alloc_mw(p->raw(), type == MwType::kType1 ? IBV_MW_TYPE_1 : IBV_MW_TYPE_2);
  if (!mw) {
    throw VerbsError(errno, "ibv_alloc_mw(type " + std::to_string(static_cast<int>(type)) +
                                ") on node '" + name_ + "' (" + dev_.name +
                                "): " + strerror(errno));
  }
  mws_.push_back(std::make_unique<IbvMw>(mw, p, type));
  return mws_.back().get();
}

void IbvNode::DeallocMw(Mw* mw) {
  for (auto it = mws_.begin(); it != mws_.end(); ++it) {
    if (it->get() != mw) continue;
    if (const int rc = ibv_dealloc_mw((*it)->raw()); rc != 0) {
      throw VerbsError(rc, "ibv_dealloc_mw on node '" + name_ + "': " + strerror(rc));
    }
    mws_.erase(it);
    return;
  }
  throw VerbsError(EINVAL, "dealloc_mw on node '" + name_ + "': not a live MW here");
}

Cq* IbvNode::CreateCq(uint32_t capacity, bool ignore_overrun) {
  // An "ignore overrun" CQ is still drained by the poller (upstream verbs
  // cannot ignore overruns), so give it room for bursts.
  const int cqe = std::min<int>(dev_.attr.max_cqe, std::max<uint32_t>(capacity, 256));
  ibv_cq* cq = ibv_create_cq(dev_.ctx, cqe, nullptr, channel_, 0);
  if (!cq) throw VerbsError(errno, "ibv_create_cq on node '" + name_ + "': " + strerror(errno));
  cqs_.push_back(std::make_unique<IbvCq>(this, cq, next_cq_num_++, ignore_overrun));
  return cqs_.back().get();
}

void IbvNode::DestroyCq(Cq* cq) {
  auto it = std::find_if(cqs_.begin(), cqs_.end(), [cq](const auto& c) { return c.get() == cq; });
  if (it == cqs_.end()) {
    throw VerbsError(EINVAL, "destroy_cq on node '" + name_ + "': not a live CQ here");
  }
  const bool used =
      std::any_of(qps_.begin(), qps_.end(), [cq](const auto& q) { return q->Uses(cq); });
  if (used || (*it)->awaited()) {
    throw VerbsError(EBUSY, "destroy_cq on node '" + name_ + "': cq " +
                                std::to_string(cq->cq_num()) +
                                " is still used by a QP or awaited; destroy those first");
  }
  AckCqEvents();  // else ibv_destroy_cq waits for this CQ's events forever
  if (const int rc = ibv_destroy_cq((*it)->raw()); rc != 0) {
    throw VerbsError(rc, "ibv_destroy_cq on node '" + name_ + "': " + strerror(rc));
  }
  if ((*it)->listed()) std::erase(awaited_, it->get());
  cqs_.erase(it);
}

Qp* IbvNode::CreateQp(const QpInitAttr& attr) {
  if (attr.cross_channel || attr.manage_send || attr.manage_recv) {
    throw VerbsError(EOPNOTSUPP,
                     "cross-channel QPs (WAIT/SEND_EN/RECV_EN) are not available on device " +
                         dev_.name + " of node '" + name_ +
                         "' through upstream rdma-core; they need ConnectX mlx5 cross-channel "
                         "support");
  }
  auto* pd = dynamic_cast<IbvPd*>(attr.pd);
  auto* scq = dynamic_cast<IbvCq*>(attr.send_cq);
  auto* rcq = dynamic_cast<IbvCq*>(attr.recv_cq);
  if (!pd || !scq || !rcq) throw VerbsError(EINVAL, "create_qp: PD or CQ of another backend");
  ibv_qp_init_attr a = {};
  a.send_cq = scq->raw();
  a.recv_cq = rcq->raw();
  a.qp_type = IBV_QPT_RC;
  a.sq_sig_all = 0;
  a.cap.max_send_wr = attr.max_send_wr;
  a.cap.max_recv_wr = std::max(1u, attr.max_recv_wr);
  a.cap.max_send_sge = std::max(1u, attr.max_send_sge);
  a.cap.max_recv_sge = std::max(1u, attr.max_recv_sge);
  ibv_qp* qp = ibv_create_qp(pd->raw(), &a);
  if (!qp) {
    throw VerbsError(errno, "ibv_create_qp on node '" + name_ + "' (" + dev_.name + ", send_wr=" +
                                std::to_string(attr.max_send_wr) + "): " + strerror(errno));
  }
  qps_.push_back(std::make_unique<IbvQp>(this, qp, attr, a.cap.max_send_wr, a.cap.max_recv_wr));
  qp_by_num_[qp->qp_num] = qps_.back().get();
  return qps_.back().get();
}

Qp* IbvNode::QpByNum(uint32_t qp_num) { return LocalQp(qp_num); }

void IbvNode::DestroyQp(Qp* qp) {
  auto it = std::find_if(qps_.begin(), qps_.end(), [qp](const auto& q) { return q.get() == qp; });
  if (it == qps_.end()) {
    throw VerbsError(EINVAL, "destroy_qp on node '" + name_ + "': not a live QP here");
  }
  const uint32_t qpn = (*it)->qp_num();
  (*it)->Flush();
  std::erase(queued_qps_, it->get());
  // The provider drops the outstanding WRs; completions already in a CQ
  // stay there (PollDevice no longer finds the QP and reports them raw).
  if (const int rc = ibv_destroy_qp((*it)->raw()); rc != 0) {
    throw VerbsError(rc, "ibv_destroy_qp(QP " + std::to_string(qpn) + ") on node '" + name_ +
                             "': " + strerror(rc));
  }
  qp_by_num_.erase(qpn);
  if (last_qp_ == it->get()) last_qp_ = nullptr;
  qps_.erase(it);
}

IbvQp* IbvNode::LocalQp(uint32_t qpn) const {
  if (last_qp_ && qpn == last_qpn_) return last_qp_;
  auto it = qp_by_num_.find(qpn);
  if (it == qp_by_num_.end()) return nullptr;
  last_qpn_ = qpn;
  last_qp_ = it->second;
  return last_qp_;
}

IbvMr* IbvNode::MrByLkey(uint32_t lkey) const {
  for (auto& m : mrs_) {
    if (m->lkey() == lkey) return m.get();
  }
  return nullptr;
}

IbvMw* IbvNode::MwByRkey(uint32_t rkey) const {
  for (auto& w : mws_) {
    if ((w->rkey() >> 8) == (rkey >> 8)) return w.get();
  }
  return nullptr;
}

int IbvNode::PumpAsyncEvents() {
  int n = 0;
  ibv_async_event ev;
  while (ibv_get_async_event(dev_.ctx, &ev) == 0) {
    ++n;
    switch (ev.event_type) {
      case IBV_EVENT_QP_FATAL:
      case IBV_EVENT_QP_REQ_ERR:
      case IBV_EVENT_QP_ACCESS_ERR:
        if (IbvQp* q = LocalQp(ev.element.qp->qp_num)) q->MarkError();
        break;
      default:
        break;
    }
    ibv_ack_async_event(&ev);
  }
  return n;
}

void IbvNode::AckCqEvents() {
  ibv_cq* cq = nullptr;
  void* ctx = nullptr;
  while (ibv_get_cq_event(channel_, &cq, &ctx) == 0) ibv_ack_cq_events(cq, 1);
}

int IbvNode::ArmForSleep() {
  AckCqEvents();
  int n = 0;
  for (auto& c : cqs_) {
    if (const int rc = ibv_req_notify_cq(c->raw(), 0); rc != 0) {
      throw VerbsError(rc, "ibv_req_notify_cq on node '" + name_ + "': " + strerror(rc));
    }
  }
  for (auto& c : cqs_) n += c->Pump();
  return n;
}

void IbvNode::FlushPosts() {
  for (IbvQp* qp : queued_qps_) qp->Flush();
  queued_qps_.clear();
}

int IbvNode::Pump() {
  int n = 0;
  ++pumps_;
  // A CQ nobody awaits (an MN's send CQ of unsignaled replies, completions
  // left for a later Poll, which polls the device itself) is drained only
  // every kIdleCqPeriod turns, and less often while it stays empty
  // (IbvCq::IdleLookDue): each look costs a provider call and a lock on the
  // hot path of the CQs that are awaited.
  if (pumps_ % kIdleCqPeriod == 0) {
    const uint64_t period = pumps_ / kIdleCqPeriod;
    for (auto& c : cqs_) {
      if (c->awaited()) {
        n += c->Pump();
      } else if (c->IdleLookDue(period)) {
        n += c->PumpIdle();
      }
    }
  } else {
    for (size_t i = 0; i < awaited_.size();) {
      IbvCq* c = awaited_[i];
      if (!c->awaited()) {  // its waiters are gone: off the list (order does not matter)
        c->set_listed(false);
        awaited_[i] = awaited_.back();
        awaited_.pop_back();
        continue;
      }
      n += c->Pump();
      ++i;
    }
  }
  // Asynchronous events cost a system call each look; they are rare.
  if (pumps_ % 1024 == 0) n += PumpAsyncEvents();
  return n;
}

// ---- Cluster ----------------------------------------------------------------

std::chrono::milliseconds IbvCluster::DefaultStallLimit() {
  if (const char* s = std::getenv("DMB_IBV_STALL_MS")) return std::chrono::milliseconds(atol(s));
  return std::chrono::milliseconds(60000);
}

IbvCluster::IbvCluster(std::vector<std::string> devices, int gid_index,
                       std::chrono::milliseconds stall_limit)
    : devices_(std::move(devices)), gid_index_(gid_index), stall_limit_(stall_limit) {
  rt_.AddPoller([this] { return PollAll(); });
  rt_.SetIdleWaiter([this](Ps max_wait_ps) { SleepUntilEvent(max_wait_ps); });
}

IbvCluster::~IbvCluster() {
  rt_.Shutdown();  // coroutine frames may refer to nodes
  local_.clear();
  nodes_.clear();
}

int IbvCluster::PollAll() {
  int n = 0;
  // The WRs the coroutines of this turn posted, one doorbell per QP, before
  // anything is polled.
  for (IbvNode* in : local_) in->FlushPosts();
  for (IbvNode* in : local_) n += in->Pump();
  return n;
}

void IbvCluster::SleepUntilEvent(Ps max_wait_ps) {
  int found = 0;
  for (IbvNode* in : local_) found += in->ArmForSleep();
  if (found > 0) return;
  sleep_fds_.clear();
  for (IbvNode* in : local_) {
    sleep_fds_.push_back({in->event_fd(), POLLIN, 0});
    sleep_fds_.push_back({in->async_fd(), POLLIN, 0});
  }
  const timespec wait = {static_cast<time_t>(max_wait_ps / kPsPerS),
                         static_cast<long>(max_wait_ps % kPsPerS / 1000)};
  // EINTR or a timeout: the loop looks again either way.
  ppoll(sleep_fds_.data(), sleep_fds_.size(), &wait, nullptr);
}

Node* IbvCluster::AddNode(const NodeConfig& cfg) {
  const size_t local = local_.size();
  const std::string dev = devices_.empty() ? "" : devices_[local % devices_.size()];
  const uint32_t id = static_cast<uint32_t>(nodes_.size());
  auto node = std::make_unique<IbvNode>(this, id, cfg, OpenDevice(dev, gid_index_));
  local_.push_back(node.get());
  nodes_.push_back(std::move(node));
  return nodes_.back().get();
}

Node* IbvCluster::AddRemoteNode(const std::string& name, const PortAddr& port) {
  const uint32_t id = static_cast<uint32_t>(nodes_.size());
  nodes_.push_back(std::make_unique<RemoteNode>(id, name, port));
  return nodes_.back().get();
}

Node* IbvCluster::node(uint32_t id) {
  if (id >= nodes_.size()) throw std::out_of_range("no node " + std::to_string(id));
  return nodes_[id].get();
}

const PortAddr& IbvCluster::PortOf(uint32_t node_id) const {
  if (node_id >= nodes_.size()) {
    throw VerbsError(EINVAL, "RTR needs an existing destination: node " + std::to_string(node_id));
  }
  if (auto* in = dynamic_cast<IbvNode*>(nodes_[node_id].get())) return in->device().addr;
  return static_cast<RemoteNode*>(nodes_[node_id].get())->port();
}

QpAddr IbvCluster::AddrOf(Qp* qp) const {
  if (auto* r = dynamic_cast<RemoteQp*>(qp)) return r->addr();
  auto* q = dynamic_cast<IbvQp*>(qp);
  if (!q) throw std::invalid_argument("AddrOf: not a QP of the ibv backend");
  for (auto& n : nodes_) {
    auto* in = dynamic_cast<IbvNode*>(n.get());
    if (in && in->LocalQp(q->qp_num()) == q) return QpAddr{in->device().addr, q->qp_num()};
  }
  throw std::invalid_argument("AddrOf: QP " + std::to_string(q->qp_num()) +
                              " is not in this cluster");
}

void IbvCluster::ConnectTo(Qp* qp, const QpAddr& peer) {
  auto* q = dynamic_cast<IbvQp*>(qp);
  if (!q) throw std::invalid_argument("ConnectTo: not a local ibv QP");
  q->ConnectTo(peer);
}

void IbvCluster::Connect(Qp* a, Qp* b) {
  auto* ra = dynamic_cast<RemoteQp*>(a);
  auto* rb = dynamic_cast<RemoteQp*>(b);
  if (ra && rb) throw std::invalid_argument("Connect: both QPs live in other processes");
  if (ra) std::swap(a, b), std::swap(ra, rb);
  const QpAddr addr_a = AddrOf(a), addr_b = AddrOf(b);
  ConnectTo(a, addr_b);
  if (rb) {
    rb->ConnectRemote(addr_a);
  } else {
    ConnectTo(b, addr_a);
  }
}

// ---- Backend ----------------------------------------------------------------

namespace {

class IbvBackend : public Backend {
 public:
  explicit IbvBackend(const BackendOptions& o) : cluster_(o.devices, o.gid_index) {}
  std::string_view kind() const override { return "ibv"; }
  Cluster& cluster() override { return cluster_; }
  void Run(Task<void> task) override { cluster_.Run(std::move(task)); }
  void Shutdown() override { cluster_.rt().Shutdown(); }

 private:
  IbvCluster cluster_;
};

}  // namespace

std::unique_ptr<Backend> MakeIbvBackend(const BackendOptions& opts) {
  return std::make_unique<IbvBackend>(opts);
}

}  // namespace dmb::fabric::ibv
