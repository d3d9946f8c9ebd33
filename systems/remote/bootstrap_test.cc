#include "systems/remote/bootstrap.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <cstring>

namespace dmb::systems::remote {
namespace {

TEST(Bootstrap, QpAddressRoundTrips) {
  fabric::ibv::QpAddr q;
  for (int i = 0; i < 16; ++i) q.port.gid[i] = static_cast<uint8_t>(i * 17);
  q.port.lid = 513;
  q.port.port = 2;
  q.port.gid_index = 3;
  q.port.is_roce = false;
  q.port.active_mtu = IBV_MTU_4096;
  q.qpn = 0xabcdef;
  const fabric::ibv::QpAddr r = DecodeQp(EncodeQp(q));
  EXPECT_EQ(r.qpn, q.qpn);
  EXPECT_EQ(0, std::memcmp(r.port.gid, q.port.gid, 16));
  EXPECT_EQ(r.port.lid, 513);
  EXPECT_EQ(r.port.port, 2);
  EXPECT_EQ(r.port.gid_index, 3);
  EXPECT_FALSE(r.port.is_roce);
  EXPECT_EQ(r.port.active_mtu, IBV_MTU_4096);
}

TEST(Bootstrap, MalformedAddressesAreNamed) {
  EXPECT_THROW(DecodeQp("12"), std::invalid_argument);
  EXPECT_THROW(DecodeQp("12@zz/1/1/1/1/3"), std::invalid_argument);
  EXPECT_THROW(DecodePort("00/1/1"), std::invalid_argument);
  // Fields past their verbs width are refused, not truncated (port 257 -> 1).
  const std::string gid(32, '0');
  EXPECT_NO_THROW(DecodePort(gid + "/0/1/1/1/3"));
  EXPECT_NO_THROW(DecodeQp("17@" + gid + "/0/1/1/1/3"));
  for (const char* qpn : {"", "-1", "x", "16777216", "123456789"}) {
    EXPECT_THROW(DecodeQp(qpn + ("@" + gid) + "/0/1/1/1/3"), std::invalid_argument) << qpn;
  }
  for (const char* bad : {"/65536/1/1/1/3", "/0/257/1/1/3", "/0/0/1/1/3", "/0/1/256/1/3",
                          "/0/1/1/2/3", "/0/1/1/1/0", "/0/1/1/1/6"}) {
    EXPECT_THROW(DecodePort(gid + bad), std::invalid_argument) << bad;
  }
  try {
    FromHex("abc");
    FAIL() << "odd-length hex accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("odd-length"), std::string::npos);
  }
}

TEST(Bootstrap, HexAndKnobWords) {
  const std::string bytes("\x00\x01\xfe\xff", 4);
  EXPECT_EQ(ToHex(bytes), "0001feff");
  EXPECT_EQ(FromHex(ToHex(bytes)), bytes);
  EXPECT_EQ(ToHex(""), "-");
  EXPECT_EQ(FromHex("-"), "");
  EXPECT_EQ(KnobsWord({}), "-");
  EXPECT_EQ(KnobsWord({{"mw_type", "2"}, {"granularity", "4KB"}}), "granularity=4KB,mw_type=2");
}

TEST(Bootstrap, LinesSplitAcrossReadsAndTimeouts) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  LineConn a(sv[0]), b(sv[1]);
  a.WriteLine("hello static_mr -");
  a.WriteLine("lane 3");
  EXPECT_EQ(b.ReadLine(std::chrono::milliseconds(1000)), "hello static_mr -");
  EXPECT_EQ(b.ReadLine(std::chrono::milliseconds(1000)), "lane 3");
  EXPECT_THROW(b.ReadLine(std::chrono::milliseconds(50)), std::runtime_error);
}

TEST(Bootstrap, DialingNobodySaysWhatToStart) {
  try {
    LineConn::Dial("127.0.0.1:1", std::chrono::seconds(1));
    FAIL() << "connected to port 1";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("dmbench mn"), std::string::npos) << e.what();
  }
  EXPECT_THROW(LineConn::Dial("no-port", std::chrono::seconds(1)), std::runtime_error);
}

// The bootstrap channel's attacks: one CN process acting as another (lane,
// connect or release with another CN's index), declaring a CN crashed or
// stopping the daemon without the operator's token, malformed indexes.
TEST(Bootstrap, AConnectionActsOnlyAsItsOwnCnsAndOnlyTheOperatorReclaims) {
  const std::string token = NewOperatorToken();
  ASSERT_EQ(token.size(), 32u);
  EXPECT_NE(token, NewOperatorToken());
  const ConnRights cn0 = {0, 1}, cn23 = {2, 2, {{17, 2}}}, none;
  auto err = [&](const std::string& line, const ConnRights& r) {
    return Authorize(SplitWords(line), r, token);
  };
  EXPECT_EQ(err("lane 0", cn0), "");
  EXPECT_EQ(err("lane 3", cn23), "");
  EXPECT_EQ(err("connect 2 17 abc", cn23), "");
  EXPECT_NE(err("lane 1", cn0).find("CN 1 is not this connection's"), std::string::npos);
  EXPECT_NE(err("lane 4", cn23).find("not this connection's"), std::string::npos);
  EXPECT_NE(err("connect 0 17 abc", cn23).find("not this connection's"), std::string::npos);
  EXPECT_NE(err("lane 0", none).find("before hello"), std::string::npos);
  EXPECT_NE(err("lane 99999999999", cn0).find("not a number"), std::string::npos);
  EXPECT_NE(err("lane -1", cn0).find("not a number"), std::string::npos);
  EXPECT_NE(err("lane", cn0).find("malformed"), std::string::npos);
  // release: only as its own CN (the MN then checks the QP is that CN's lane).
  EXPECT_EQ(err("release 3 17", cn23), "");
  EXPECT_NE(err("release 0 17", cn23).find("not this connection's"), std::string::npos);
  EXPECT_NE(err("release 0 17", none).find("before hello"), std::string::npos);
  // reclaim and shutdown: the operator's token, never a CN's rights.
  EXPECT_NE(err("reclaim 0", cn0).find("operator's"), std::string::npos);
  EXPECT_NE(err("reclaim 0 " + token + "x", cn0).find("operator's"), std::string::npos);
  EXPECT_NE(err("reclaim x " + token, cn0).find("malformed"), std::string::npos);
  EXPECT_EQ(err("reclaim 1 " + token, none), "");
  EXPECT_NE(err("shutdown", cn0).find("operator's"), std::string::npos);
  EXPECT_NE(err("shutdown -", cn0).find("operator's"), std::string::npos);
  EXPECT_EQ(err("shutdown " + token, none), "");
  EXPECT_NE(Authorize(SplitWords("shutdown -"), cn0, "").find("operator's"), std::string::npos)
      << "no token configured: nobody may";
  EXPECT_EQ(err("stats", none), "");
  EXPECT_EQ(err("", none), "err empty request");
  // hello: once per connection (each takes CN indexes for good), a count
  // in [1, 1024].
  EXPECT_EQ(err("hello rpc_mw - 2", none), "");
  EXPECT_NE(err("hello rpc_mw - 2", cn23).find("hello already said"), std::string::npos);
  EXPECT_NE(err("hello rpc_mw - abc", none).find("CN count 'abc' is not a number"),
            std::string::npos);
  EXPECT_NE(err("hello rpc_mw - 0", none).find("in [1, 1024]"), std::string::npos);
  EXPECT_NE(err("hello rpc_mw - 1025", none).find("in [1, 1024]"), std::string::npos);
  EXPECT_NE(err("hello rpc_mw", none).find("malformed 'hello'"), std::string::npos);
}

// Attack: a CN process names its own CN index but another connection's lane
// QP, still unconnected between that CN's `lane` and `connect`, and points it
// at a QP of its own: the victim's lane would be the attacker's. `connect`
// only connects a lane QP this connection created for that same CN.
TEST(Bootstrap, ConnectOnlyConnectsALaneThisConnectionCreatedForThatCn) {
  ConnRights attacker = {0, 2};
  attacker.lanes = {{40, 0}};  // lane 0 -> MN QP 40
  auto err = [&](const std::string& line) { return Authorize(SplitWords(line), attacker, "tok"); };
  EXPECT_EQ(err("connect 0 40 abc"), "");
  // QP 41 is the victim connection's lane (CN 2): refused under the
  // attacker's own CN index.
  EXPECT_NE(err("connect 0 41 abc").find("QP 41 is no unconnected lane this connection created"),
            std::string::npos)
      << err("connect 0 41 abc");
  EXPECT_NE(err("connect 1 40 abc").find("for CN 1"), std::string::npos);  // its QP, other CN
  EXPECT_NE(err("connect 0 4x abc").find("QP number '4x' is not a number"), std::string::npos);
  EXPECT_NE(err("connect 0 40").find("malformed"), std::string::npos);
}

}  // namespace
}  // namespace dmb::systems::remote
