#include "systems/remote/bootstrap.h"

#include <cstring>
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
