#include "systems/remote/bootstrap.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace dmb::systems::remote {

LineConn::~LineConn() {
  if (fd_ >= 0) close(fd_);
}

int LineConn::Dial(const std::string& endpoint, std::chrono::seconds timeout) {
  const auto colon = endpoint.rfind(':');
  if (colon == std::string::npos) {
    throw std::runtime_error("MN endpoint '" + endpoint + "' is not HOST:PORT");
  }
  const std::string host = endpoint.substr(0, colon), port = endpoint.substr(colon + 1);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last;
  while (std::chrono::steady_clock::now() < deadline) {
    addrinfo hints = {}, *res = nullptr;
    hints.ai_socktype = SOCK_STREAM;
    if (const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0) {
      throw std::runtime_error("MN endpoint '" + endpoint + "': " + gai_strerror(rc));
    }
    for (addrinfo* a = res; a; a = a->ai_next) {
      const int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
      if (fd < 0) continue;
      if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        freeaddrinfo(res);
        return fd;
      }
      last = strerror(errno);
      close(fd);
    }
    freeaddrinfo(res);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  throw std::runtime_error("cannot reach the MN daemon at " + endpoint + " (" + last +
                           "); is `dmbench mn` running there?");
}

void LineConn::WriteLine(const std::string& line) {
  std::string s = line + "\n";
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        pollfd p{fd_, POLLOUT, 0};
        poll(&p, 1, 1000);
        continue;
      }
      throw std::runtime_error(std::string("bootstrap: send failed: ") + strerror(errno));
    }
    off += static_cast<size_t>(n);
  }
}

bool LineConn::TryReadLine(std::string* line, bool* closed) {
  *closed = false;
  for (;;) {
    if (const auto nl = buf_.find('\n'); nl != std::string::npos) {
      *line = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      return true;
    }
    char tmp[4096];
    const ssize_t n = recv(fd_, tmp, sizeof tmp, MSG_DONTWAIT);
    if (n == 0) {
      *closed = true;
      return false;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return false;
      *closed = true;
      return false;
    }
    buf_.append(tmp, static_cast<size_t>(n));
    if (buf_.size() > (1u << 20)) throw std::runtime_error("bootstrap: line longer than 1 MB");
  }
}

std::string LineConn::ReadLine(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string line;
  bool closed = false;
  while (!TryReadLine(&line, &closed)) {
    if (closed) throw std::runtime_error("bootstrap: the MN daemon closed the connection");
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      throw std::runtime_error("bootstrap: no reply from the MN daemon within " +
                               std::to_string(timeout.count()) + " ms");
    }
    pollfd p{fd_, POLLIN, 0};
    poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 100)));
  }
  return line;
}

std::string ToHex(const std::string& bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out.empty() ? "-" : out;
}

std::string FromHex(const std::string& hex) {
  if (hex == "-") return {};
  if (hex.size() % 2) throw std::invalid_argument("odd-length hex '" + hex.substr(0, 16) + "'");
  auto val = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    throw std::invalid_argument("not hex: '" + hex.substr(0, 16) + "'");
  };
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2)
    out += static_cast<char>(val(hex[i]) * 16 + val(hex[i + 1]));
  return out;
}

std::string EncodePort(const fabric::ibv::PortAddr& p) {
  std::ostringstream o;
  o << ToHex(std::string(reinterpret_cast<const char*>(p.gid), 16)) << "/" << p.lid << "/"
    << int(p.port) << "/" << int(p.gid_index) << "/" << int(p.is_roce) << "/" << int(p.active_mtu);
  return o.str();
}

fabric::ibv::PortAddr DecodePort(const std::string& s) {
  fabric::ibv::PortAddr p;
  std::istringstream in(s);
  std::string gid;
  std::getline(in, gid, '/');
  const std::string raw = FromHex(gid);
  if (raw.size() != 16) throw std::invalid_argument("bad port address '" + s + "'");
  std::memcpy(p.gid, raw.data(), 16);
  unsigned lid, port, gi, roce, mtu;
  char sep;
  if (!(in >> lid >> sep >> port >> sep >> gi >> sep >> roce >> sep >> mtu)) {
    throw std::invalid_argument("bad port address '" + s + "'");
  }
  p.lid = static_cast<uint16_t>(lid);
  p.port = static_cast<uint8_t>(port);
  p.gid_index = static_cast<uint8_t>(gi);
  p.is_roce = roce != 0;
  p.active_mtu = static_cast<ibv_mtu>(mtu);
  return p;
}

std::string EncodeQp(const fabric::ibv::QpAddr& q) {
  return std::to_string(q.qpn) + "@" + EncodePort(q.port);
}

fabric::ibv::QpAddr DecodeQp(const std::string& s) {
  const auto at = s.find('@');
  if (at == std::string::npos) throw std::invalid_argument("bad QP address '" + s + "'");
  fabric::ibv::QpAddr q;
  q.qpn = static_cast<uint32_t>(std::stoul(s.substr(0, at)));
  q.port = DecodePort(s.substr(at + 1));
  return q;
}

std::string KnobsWord(const std::map<std::string, std::string>& knobs) {
  std::string s;
  for (const auto& [k, v] : knobs) s += (s.empty() ? "" : ",") + k + "=" + v;
  return s.empty() ? "-" : s;
}

std::vector<std::string> SplitWords(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> w;
  for (std::string s; in >> s;) w.push_back(s);
  return w;
}

}  // namespace dmb::systems::remote
