// The bootstrap channel between an MN daemon and CN processes: one TCP
// connection per CN process carrying text lines, used only outside the data
// path (connection setup, stats, crash reclamation). The data path is verbs.
//
// Protocol (requests from the CN; every reply is "ok ..." or "err <why>"):
//   hello <system> <knob=value,...|-> <cns>
//                       -> ok <mn port address> <published hex> <first cn index>
//   lane <cn_index>                      -> ok <qpn>
//   connect <cn_index> <qpn> <cn qp address>  -> ok
//   stats                                -> ok <pool> <total> <in_use> <served> <rejected>
//   reclaim <cn_index>                   -> ok <chunks reclaimed>
//   shutdown                             -> ok (the daemon exits)
// Addresses are hex-encoded fabric::ibv::QpAddr / PortAddr fields.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fabric/ibv/ibv_cluster.h"
#include "fabric/ibv/line_conn.h"

namespace dmb::systems::remote {

using fabric::ibv::LineConn;

std::string ToHex(const std::string& bytes);
std::string FromHex(const std::string& hex);  // throws std::invalid_argument
std::string EncodePort(const fabric::ibv::PortAddr& p);
fabric::ibv::PortAddr DecodePort(const std::string& s);
std::string EncodeQp(const fabric::ibv::QpAddr& q);
fabric::ibv::QpAddr DecodeQp(const std::string& s);
std::vector<std::string> SplitWords(const std::string& line);
// The knob map as one word (k=v,k=v or "-"), as `hello` carries it.
std::string KnobsWord(const std::map<std::string, std::string>& knobs);

}  // namespace dmb::systems::remote
