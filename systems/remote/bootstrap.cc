#include "systems/remote/bootstrap.h"

#include <cstring>
#include <random>
#include <sstream>
#include <stdexcept>

namespace dmb::systems::remote {

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
  // Each field where the verbs take it, not cut to its width (a port 257
  // would have become port 1): lid 16 bits, port and GID index 8, the MTU an
  // ibv_mtu (1 = 256 B .. 5 = 4096 B).
  if (lid > 0xffff || port < 1 || port > 0xff || gi > 0xff || roce > 1 || mtu < IBV_MTU_256 ||
      mtu > IBV_MTU_4096) {
    throw std::invalid_argument("bad port address '" + s +
                                "': lid, port (1-255), GID index, RoCE flag (0/1) or MTU "
                                "(1-5) out of range");
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
  const std::string qpn = s.substr(0, at);
  if (qpn.empty() || qpn.size() > 8 || qpn.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(qpn) > 0xffffff) {
    throw std::invalid_argument("bad QP address '" + s + "': the QP number is not a 24-bit number");
  }
  q.qpn = static_cast<uint32_t>(std::stoul(qpn));
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

namespace {

// The CN index (or QP number) in `word`, or -1 when it is not a decimal
// number of at most 8 digits (QP numbers are 24-bit).
int64_t CnWord(const std::string& word) {
  if (word.empty() || word.size() > 8) return -1;
  for (char c : word) {
    if (c < '0' || c > '9') return -1;
  }
  return std::stoll(word);
}

// `connect <cn> <qpn> <addr>` by a connection that owns `cn`: the QP must be
// a lane this connection created for `cn` and has not connected yet, so no
// connection connects another's lane (or any other QP of the MN).
std::string AuthorizeConnect(const std::vector<std::string>& w, const ConnRights& rights,
                             uint32_t cn) {
  if (w.size() != 4) return "err malformed 'connect': expected connect <cn> <qpn> <qp address>";
  const int64_t qpn = CnWord(w[2]);
  if (qpn < 0) return "err malformed 'connect': QP number '" + w[2] + "' is not a number";
  const auto it = rights.lanes.find(static_cast<uint32_t>(qpn));
  if (it == rights.lanes.end() || it->second != cn) {
    return "err QP " + w[2] + " is no unconnected lane this connection created for CN " +
           std::to_string(cn);
  }
  return "";
}

// Compares in time independent of where the words differ.
bool SameToken(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

std::string Authorize(const std::vector<std::string>& w, const ConnRights& rights,
                      const std::string& token) {
  if (w.empty()) return "err empty request";
  const std::string& op = w[0];
  if (op == "hello") {
    // Each hello takes CN indexes for good: one per connection, so a process
    // cannot use up the daemon's 1024 by saying it again and again.
    if (w.size() != 4) return "err malformed 'hello': expected hello <system> <knobs> <cns>";
    const int64_t n = CnWord(w[3]);
    if (n < 1 || n > 1024) {
      return "err malformed 'hello': CN count '" + w[3] + "' is not a number in [1, 1024]";
    }
    if (rights.count > 0) {
      return "err hello already said on this connection (its CNs are " +
             std::to_string(rights.base) + ".." + std::to_string(rights.base + rights.count - 1) +
             "): one hello per connection";
    }
    return "";
  }
  if (op == "lane" || op == "connect" || op == "release") {
    if (w.size() < 2) return "err malformed '" + op + "': no CN index";
    const int64_t cn = CnWord(w[1]);
    if (cn < 0) return "err malformed '" + op + "': CN index '" + w[1] + "' is not a number";
    if (rights.count == 0) return "err '" + op + "' before hello: say which CNs you are first";
    if (!rights.Owns(static_cast<uint32_t>(cn))) {
      return "err CN " + std::to_string(cn) + " is not this connection's (its hello was given " +
             std::to_string(rights.base) + ".." + std::to_string(rights.base + rights.count - 1) +
             ")";
    }
    return op == "connect" ? AuthorizeConnect(w, rights, static_cast<uint32_t>(cn)) : "";
  }
  if (op == "reclaim" || op == "shutdown") {
    const size_t at = op == "reclaim" ? 2 : 1;
    if (op == "reclaim" && (w.size() < 2 || CnWord(w[1]) < 0)) {
      return "err malformed 'reclaim': expected reclaim <cn_index> <operator token>";
    }
    if (w.size() != at + 1 || token.empty() || !SameToken(w[at], token)) {
      return "err '" + op +
             "' is the operator's: it needs the token the daemon printed at start (also in "
             "<port-file>.token)";
    }
    return "";
  }
  return "";
}

std::string NewOperatorToken() {
  std::random_device rd;
  std::string t;
  static const char* kDigits = "0123456789abcdef";
  for (int i = 0; i < 32; ++i) t += kDigits[rd() & 15];
  return t;
}

}  // namespace dmb::systems::remote
