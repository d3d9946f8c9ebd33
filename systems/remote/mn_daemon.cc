#include "systems/remote/mn_daemon.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <vector>

#include "fabric/ibv/ibv_cluster.h"
#include "systems/registry.h"
#include "systems/remote/bootstrap.h"

namespace dmb::systems::remote {
namespace {

class Daemon {
 public:
  Daemon(const MnDaemonOptions& o) : opts_(o), cluster_({o.device}) {}

  int Main() {
    // Bad input first: a typo in --system or --set is named before any device
    // is opened.
    const SystemInfo& info = Registry::Get(opts_.system);
    ValidateKnobs(info.name, info.knobs, opts_.knobs);
    fabric::NodeConfig mc;
    mc.name = "mn0";
    mc.memory_bytes = opts_.pool_bytes + (256ull << 20);
    mc.cpu_cores = opts_.mn_cores;
    mn_ = cluster_.AddNode(mc);
    Deployment d;
    d.cluster = &cluster_;
    d.mn = mn_;
    d.pool_bytes = opts_.pool_bytes;
    mm_ = Registry::Create({opts_.system, opts_.knobs}, d);
    cluster_.Run(mm_->Start());
    token_ = NewOperatorToken();
    Listen();
    std::cerr << "dmbench mn: " << opts_.system << " (" << KnobsWord(mm_->knobs().values())
              << ") on device " << (opts_.device.empty() ? "(first)" : opts_.device)
              << ", bootstrap on TCP port " << port_ << "; operator token " << token_
              << (opts_.port_file.empty() ? "" : " (also in " + opts_.port_file + ".token)")
              << std::endl;
    cluster_.Run(Serve());
    return 0;
  }

 private:
  void Listen() {
    // Non-blocking: the serving loop polls it between the approach's coroutines.
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a = {};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<uint16_t>(opts_.port));
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        listen(listen_fd_, 16) != 0) {
      throw std::runtime_error("cannot listen on TCP port " + std::to_string(opts_.port) + ": " +
                               strerror(errno));
    }
    socklen_t len = sizeof a;
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    if (!opts_.port_file.empty()) {
      // The operator's token first (readable by this user only; CN processes
      // are not given it), written before the port file so whoever waits for
      // the port finds it.
      const std::string tok = opts_.port_file + ".token";
      // A fresh file (O_EXCL): an old one may carry wider permissions.
      unlink(tok.c_str());
      const int fd = open(tok.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
      if (fd < 0 || write(fd, (token_ + "\n").data(), token_.size() + 1) < 0) {
        throw std::runtime_error("cannot write the operator token to " + tok + ": " +
                                 strerror(errno));
      }
      close(fd);
      const std::string tmp = opts_.port_file + ".tmp";
      std::ofstream(tmp) << port_ << "\n";
      std::rename(tmp.c_str(), opts_.port_file.c_str());
    }
  }

  // Accepts and serves bootstrap connections between the approach's own
  // coroutines (the RPC workers run on the same loop).
  Task<void> Serve() {
    fabric::Runtime& rt = cluster_.runtime();
    Ps look_every_ps = kFirstLookPs;
    while (!stop_) {
      bool busy = false;
      const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK);
      if (fd >= 0) {
        conns_.push_back(std::make_unique<LineConn>(fd));
        busy = true;
      }
      for (size_t i = 0; i < conns_.size();) {
        std::string line;
        bool closed = false;
        try {
          while (conns_[i]->TryReadLine(&line, &closed)) {
            busy = true;
            co_await Handle(*conns_[i], line);
          }
        } catch (const std::exception& e) {
          // One process's misuse (a line over 1 MB, replies it never reads)
          // closes its connection, not the daemon every CN depends on.
          std::cerr << "mn: closing a bootstrap connection: " << e.what() << std::endl;
          closed = true;
        }
        if (closed) {
          rights_.erase(conns_[i].get());
          conns_.erase(conns_.begin() + static_cast<long>(i));
        } else {
          ++i;
        }
      }
      // Setup traffic is rare and comes in bursts: look at the sockets 20 us
      // after a line came, then half as often each quiet look, down to every
      // 2 ms, so that an idle daemon's loop sleeps (IbvRuntime) and leaves
      // the CPU to the CNs and, on Soft-RoCE, to the kernel's NIC work.
      look_every_ps = busy ? kFirstLookPs : std::min(2 * look_every_ps, kLastLookPs);
      co_await rt.SleepFor(look_every_ps);
    }
    close(listen_fd_);
  }
  static constexpr Ps kFirstLookPs = 20 * kPsPerUs;
  static constexpr Ps kLastLookPs = 2 * kPsPerMs;

  Task<void> Handle(LineConn& c, const std::string& line) {
    if (opts_.verbose) std::cerr << "mn <- " << line << std::endl;
    std::string reply;
    try {
      const std::vector<std::string> w = SplitWords(line);
      reply = Authorize(w, rights_[&c], token_);
      if (reply.empty()) reply = co_await Dispatch(w, &rights_[&c]);
    } catch (const std::exception& e) {
      reply = std::string("err ") + e.what();
    }
    for (char& ch : reply) {
      if (ch == '\n') ch = ' ';
    }
    c.WriteLine(reply);
  }

  uint32_t CnIndex(const std::string& s) {
    const unsigned long v = std::stoul(s);
    if (v >= 1024) throw std::invalid_argument("cn_index " + s + " out of range [0, 1024)");
    return static_cast<uint32_t>(v);
  }

  Task<std::string> Dispatch(const std::vector<std::string>& w, ConnRights* rights) {
    if (w.empty()) co_return "err empty request";
    const std::string& op = w[0];
    if (op == "hello" && w.size() == 4) {
      const std::string mine = KnobsWord(mm_->knobs().values());
      if (w[1] != opts_.system || w[2] != mine) {
        co_return "err this MN runs " + opts_.system + " (" + mine + "), the CN asked for " + w[1] +
            " (" + w[2] + ")";
      }
      const uint32_t n = CnIndex(w[3]);
      if (next_cn_ + n > 1024) co_return "err no CN indexes left (1024 per daemon); restart it";
      const uint32_t base = next_cn_;
      next_cn_ += n;
      *rights = {base, n};  // this connection acts as these CNs only
      co_return "ok " + EncodePort(cluster_.PortOf(mn_->id())) + " " +
          ToHex(mm_->mn().Published()) + " " + std::to_string(base);
    }
    if (op == "lane" && w.size() == 2) {
      const uint32_t cn = CnIndex(w[1]);
      fabric::Qp* qp = mm_->mn().CreateLaneQp(cn);
      rights->lanes[qp->qp_num()] = cn;  // only this connection may connect it
      co_return "ok " + std::to_string(qp->qp_num());
    }
    if (op == "connect" && w.size() == 4) {
      const uint32_t cn = CnIndex(w[1]);
      fabric::Qp* qp = mn_->QpByNum(static_cast<uint32_t>(std::stoul(w[2])));
      if (!qp || qp->state() != fabric::QpState::kReset) {
        co_return "err no unconnected lane QP " + w[2] + " on the MN";
      }
      cluster_.ConnectTo(qp, DecodeQp(w[3]));
      mm_->mn().LaneConnected(cn, qp);
      rights->lanes.erase(qp->qp_num());
      co_return "ok";
    }
    if (op == "release" && w.size() == 3) {
      const uint32_t cn = CnIndex(w[1]);
      const auto qpn = static_cast<uint32_t>(std::stoul(w[2]));
      mm_->mn().ReleaseLane(cn, qpn);  // throws (err reply) for another CN's QP
      rights->lanes.erase(qpn);
      co_return "ok";
    }
    if (op == "stats" && w.size() == 1) {
      const MnStats s = mm_->mn().stats();
      co_return "ok " + std::to_string(s.pool_bytes) + " " + std::to_string(s.chunks_total) + " " +
          std::to_string(s.chunks_in_use) + " " + std::to_string(s.rpcs_served) + " " +
          std::to_string(s.rpcs_rejected);
    }
    if (op == "reclaim" && w.size() == 3) {
      const ReclaimReport r = co_await mm_->mn().ReclaimCn(CnIndex(w[1]));
      co_return "ok " + std::to_string(r.chunks_reclaimed);
    }
    if (op == "shutdown" && w.size() == 2) {
      stop_ = true;
      co_return "ok";
    }
    co_return "err unknown or malformed request '" + op +
        "' (expected hello, lane, connect, release, stats, reclaim or shutdown)";
  }

  MnDaemonOptions opts_;
  fabric::ibv::IbvCluster cluster_;
  fabric::Node* mn_ = nullptr;
  std::unique_ptr<MemoryManager> mm_;
  int listen_fd_ = -1;
  int port_ = 0;
  bool stop_ = false;
  uint32_t next_cn_ = 0;  // CN indexes handed out so far
  std::string token_;     // the operator's (reclaim, shutdown)
  std::map<const LineConn*, ConnRights> rights_;
  std::vector<std::unique_ptr<LineConn>> conns_;
};

}  // namespace

int RunMnDaemon(const MnDaemonOptions& opts) {
  Daemon d(opts);
  return d.Main();
}

}  // namespace dmb::systems::remote
