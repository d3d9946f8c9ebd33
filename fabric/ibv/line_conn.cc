#include "fabric/ibv/line_conn.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace dmb::fabric::ibv {

std::chrono::seconds LineConn::ConnectTimeout() {
  const char* s = std::getenv("DMB_MN_CONNECT_S");
  return std::chrono::seconds(s ? std::atol(s) : 30);
}

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
  // A peer that never reads fills the socket: give up rather than wait on it
  // forever (the daemon's one loop serves every CN).
  const auto deadline = std::chrono::steady_clock::now() + kWriteTimeout;
  while (off < s.size()) {
    const ssize_t n = send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        if (std::chrono::steady_clock::now() > deadline) {
          throw std::runtime_error("bootstrap: the peer has not read its replies for " +
                                   std::to_string(kWriteTimeout.count()) + " ms");
        }
        pollfd p{fd_, POLLOUT, 0};
        poll(&p, 1, 100);
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

}  // namespace dmb::fabric::ibv
