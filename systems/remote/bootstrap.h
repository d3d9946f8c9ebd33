// The bootstrap channel between an MN daemon and CN processes: one TCP
// connection per CN process carrying text lines, used only outside the data
// path (connection setup, stats, crash reclamation). The data path is verbs.
//
// Protocol (requests from the CN; every reply is "ok ..." or "err <why>"):
//   hello <system> <knob=value,...|-> <cns>
//                       -> ok <mn port address> <published hex> <first cn index>
//   lane <cn_index>                      -> ok <qpn>
//   connect <cn_index> <qpn> <cn qp address>  -> ok
//   release <cn_index> <qpn>             -> ok (RecoverLane replaced that lane)
//   stats                                -> ok <pool> <total> <in_use> <served> <rejected>
//   reclaim <cn_index> <operator token>  -> ok <chunks reclaimed>
//   shutdown <operator token>            -> ok (the daemon exits)
// Addresses are hex-encoded fabric::ibv::QpAddr / PortAddr fields.
//
// Who may ask what (Authorize): a connection acts only as the CN indexes its
// own `hello` was given (lane, connect, release); another CN's index is
// refused, and the MN releases only a lane of the CN named, so one CN
// process cannot act as another. `connect` connects only a lane QP
// this connection's own `lane` created for that CN and has not connected
// yet, so no connection takes over another's lane or any other MN QP.
// Declaring a CN crashed (reclaim) and stopping the daemon (shutdown) are
// the operator's: they carry the token the daemon prints at start and writes
// beside its --port-file (<port-file>.token, mode 0600), which CN processes
// are not given.
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

// The CN indexes one bootstrap connection was given by its `hello`.
struct ConnRights {
  uint32_t base = 0;
  uint32_t count = 0;  // 0: no hello yet
  // MN lane QPs this connection's `lane` created and `connect` has not yet
  // connected: QPN -> the CN index they were created for.
  std::map<uint32_t, uint32_t> lanes = {};
  bool Owns(uint32_t cn) const { return cn >= base && cn - base < count; }
};
// "" when the connection with `rights` may send the request `w` (split
// words) to a daemon whose operator token is `token`, else the "err ..."
// reply naming why. Malformed words (a CN index that is not a number) are
// refused here too.
std::string Authorize(const std::vector<std::string>& w, const ConnRights& rights,
                      const std::string& token);
// A fresh random operator token (32 hex digits).
std::string NewOperatorToken();

}  // namespace dmb::systems::remote
