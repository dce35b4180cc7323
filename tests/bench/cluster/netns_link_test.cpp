// NetnsLink: the namespaces exist with the veth up and addressed (the fetch test proves it carries data), SetRate changes the tbf rate in
// place, and destruction removes everything. Skipped with the reason where namespaces cannot be made.
#include "bench/cluster/netns_link.h"

#include <gtest/gtest.h>

#include <string>

namespace kvstream::cluster {
namespace {

std::string Output(Result<Child> child) {
  if (!child.ok()) return "spawn failed: " + child.status().ToString();
  return Reap(*child, 10, false);
}

TEST(NetnsLink, ConnectsShapesAndCleansUp) {
  std::string a, b;
  {
    NetnsLinkOptions options;
    options.rate_bps = 100e6;
    auto link = NetnsLink::Create(options);
    if (!link.ok()) GTEST_SKIP() << link.status().message();
    a = (*link)->name(NetnsLink::kA);
    b = (*link)->name(NetnsLink::kB);
    // Each side has its private address on the veth, and nothing of the other's.
    const std::string addr_b = Output((*link)->SpawnIn(NetnsLink::kB, {"ip", "-o", "addr", "show", "dev", kNetnsDevice}));
    EXPECT_NE(addr_b.find((*link)->address(NetnsLink::kB) + "/24"), std::string::npos) << addr_b;
    const std::string link_b = Output((*link)->SpawnIn(NetnsLink::kB, {"ip", "-o", "link", "show", "dev", kNetnsDevice}));
    EXPECT_NE(link_b.find("state UP"), std::string::npos) << link_b;

    EXPECT_NE(Output(Spawn({"ip", "netns", "exec", a, "tc", "qdisc", "show", "dev", kNetnsDevice})).find("100Mbit"),
              std::string::npos);
    ASSERT_TRUE((*link)->SetRate(10e6).ok());
    EXPECT_DOUBLE_EQ((*link)->rate_bps(), 10e6);
    for (const std::string& ns : {a, b}) {
      const std::string qdisc = Output(Spawn({"ip", "netns", "exec", ns, "tc", "qdisc", "show", "dev", kNetnsDevice}));
      EXPECT_NE(qdisc.find("10Mbit"), std::string::npos) << qdisc;
    }
    EXPECT_FALSE((*link)->SetRate(0).ok());
  }
  const std::string list = Output(Spawn({"ip", "netns", "list"}));
  EXPECT_EQ(list.find(a), std::string::npos) << list;
  EXPECT_EQ(list.find(b), std::string::npos) << list;
}

TEST(NetnsLink, TcRateSyntax) {
  EXPECT_EQ(TcRate(1e9), "1000000kbit");
  EXPECT_EQ(TcRate(2.5e6), "2500kbit");
  EXPECT_EQ(TcRate(1), "8kbit");
}

}  // namespace
}  // namespace kvstream::cluster
