// LineConn: a TCP connection carrying text lines, the ibv backend's
// out-of-band channel for setup (exchanging QP addresses and the like, as
// perftest does over TCP). Wall-clock timeouts live here, with the backend that
// runs on the wall clock, never in the code above fabric/.
#pragma once

#include <chrono>
#include <string>

namespace dmb::fabric::ibv {

// A connected socket speaking lines (blocking, with a timeout per read).
class LineConn {
 public:
  explicit LineConn(int fd) : fd_(fd) {}
  ~LineConn();
  LineConn(const LineConn&) = delete;
  LineConn& operator=(const LineConn&) = delete;
  // Connects to "host:port", retrying while the peer starts up (default:
  // DMB_MN_CONNECT_S or 30 s); throws std::runtime_error naming the endpoint.
  static int Dial(const std::string& endpoint, std::chrono::seconds timeout = ConnectTimeout());
  // Throws std::runtime_error when the peer has read nothing for
  // kWriteTimeout while the socket was full (a peer that never reads).
  void WriteLine(const std::string& line);
  static constexpr std::chrono::milliseconds kWriteTimeout{5000};
  // Blocks up to `timeout` (default 120 s: setup requests such as a reclaim
  // may take the peer a while); throws std::runtime_error on timeout or EOF.
  std::string ReadLine(std::chrono::milliseconds timeout = std::chrono::seconds(120));
  // Non-blocking: appends what is available; true if a full line is ready.
  // Throws std::runtime_error past 1 MB without a newline.
  bool TryReadLine(std::string* line, bool* closed);
  int fd() const { return fd_; }
  static std::chrono::seconds ConnectTimeout();

 private:
  int fd_;
  std::string buf_;
};

}  // namespace dmb::fabric::ibv
