// Addresses, interface selection and the unique id's byte layout.
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <cstring>

#include "bootstrap/socket.h"
#include "bootstrap/store_registry.h"
#include "bootstrap/unique_id.h"
#include "core/result.h"
#include "unit/bootstrap_test_util.h"

namespace chorus {
namespace {

TEST(BootstrapSocket, IfnameFilterFollowsNcclSocketIfnameRules) {
  auto prefixes = IfnameFilter::parse("eth,ib");
  EXPECT_TRUE(prefixes.matches("eth0"));
  EXPECT_TRUE(prefixes.matches("ib1"));
  EXPECT_FALSE(prefixes.matches("lo"));
  EXPECT_FALSE(prefixes.matches("et"));

  auto excluded = IfnameFilter::parse("^docker,lo");
  EXPECT_FALSE(excluded.matches("docker0"));
  EXPECT_FALSE(excluded.matches("lo"));
  EXPECT_TRUE(excluded.matches("eth0"));

  auto exact = IfnameFilter::parse("=eth0");
  EXPECT_TRUE(exact.matches("eth0"));
  EXPECT_FALSE(exact.matches("eth01"));

  auto exactExcluded = IfnameFilter::parse("^=lo");
  EXPECT_FALSE(exactExcluded.matches("lo"));
  EXPECT_TRUE(exactExcluded.matches("lo2"));
}

TEST(BootstrapSocket, ChooseInterfaceHonoursTheSpec) {
  InterfaceInfo info;
  ASSERT_EQ(chooseInterface("lo", &info), ncclSuccess);
  EXPECT_EQ(info.name, "lo");
  EXPECT_TRUE(info.addr.isLoopback());
  EXPECT_EQ(info.addr.port(), 0);
  ASSERT_EQ(chooseInterface("=lo", &info), ncclSuccess);
  EXPECT_EQ(info.name, "lo");
  EXPECT_EQ(chooseInterface("=no-such-interface0", &info), ncclSystemError);
  EXPECT_NE(std::string(lastErrorMessage()).find("no usable network interface"), std::string::npos);
  // Default rules always find something (loopback at worst) and never a docker bridge.
  ASSERT_EQ(chooseInterface("", &info), ncclSuccess);
  EXPECT_NE(info.name.rfind("docker", 0), 0u);
}

TEST(BootstrapSocket, ParseHostPort) {
  SockAddr a;
  ASSERT_EQ(parseHostPort("127.0.0.1:1234", &a), ncclSuccess);
  EXPECT_EQ(a.family(), AF_INET);
  EXPECT_EQ(a.port(), 1234);
  EXPECT_EQ(a.str(), "127.0.0.1:1234");
  ASSERT_EQ(parseHostPort("[::1]:99", &a), ncclSuccess);
  EXPECT_EQ(a.family(), AF_INET6);
  EXPECT_EQ(a.str(), "[::1]:99");
  EXPECT_TRUE(a.isLoopback());
  ASSERT_EQ(parseHostPort("localhost:5", &a), ncclSuccess);
  EXPECT_EQ(a.port(), 5);
  EXPECT_TRUE(a.isLoopback());
  for (const char* bad : {"nocolon", "1.2.3.4:", ":80", "1.2.3.4:70000", "1.2.3.4:8x", "[::1]99", "[::1"})
    EXPECT_EQ(parseHostPort(bad, &a), ncclInvalidArgument) << bad;
}

TEST(BootstrapUniqueId, EncodeDecodeRoundTripsBothFamilies) {
  UniqueIdInfo in;
  ASSERT_EQ(parseHostPort("10.1.2.3:4567", &in.addr), ncclSuccess);
  for (size_t i = 0; i < in.secret.size(); ++i) in.secret[i] = static_cast<uint8_t>(i * 7 + 1);
  in.hostHash = 0x1122334455667788ull;
  in.pid = 4242;
  in.commIdMode = true;
  ncclUniqueId id;
  encodeUniqueId(in, &id);
  UniqueIdInfo out;
  ASSERT_EQ(decodeUniqueId(id, &out), ncclSuccess);
  EXPECT_EQ(out.addr.str(), "10.1.2.3:4567");
  EXPECT_EQ(out.secret, in.secret);
  EXPECT_EQ(out.hostHash, in.hostHash);
  EXPECT_EQ(out.pid, 4242u);
  EXPECT_TRUE(out.commIdMode);
  EXPECT_EQ(describeUniqueId(id), "10.1.2.3:4567");
  // The unused tail is zero, so ids compare equal with memcmp.
  for (size_t i = 60; i < sizeof(id.internal); ++i) EXPECT_EQ(id.internal[i], 0);

  ASSERT_EQ(parseHostPort("[fd00::5]:80", &in.addr), ncclSuccess);
  in.commIdMode = false;
  encodeUniqueId(in, &id);
  ASSERT_EQ(decodeUniqueId(id, &out), ncclSuccess);
  EXPECT_EQ(out.addr.str(), "[fd00::5]:80");
  EXPECT_FALSE(out.commIdMode);
}

TEST(BootstrapUniqueId, GarbageIdsAreRejected) {
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  EXPECT_FALSE(isValidUniqueId(id));
  EXPECT_EQ(describeUniqueId(id), "<invalid unique id>");
  std::shared_ptr<Store> store;
  auto t0 = Clock::now();
  EXPECT_EQ(connectStore(id, 1, waitBoundAfter(5000), &store), ncclInvalidArgument);
  EXPECT_LT(testing::msSince(t0), 500);
  EXPECT_NE(std::string(lastErrorMessage()).find("invalid unique id"), std::string::npos);

  UniqueIdInfo in;
  ASSERT_EQ(parseHostPort("127.0.0.1:1", &in.addr), ncclSuccess);
  encodeUniqueId(in, &id);
  EXPECT_TRUE(isValidUniqueId(id));
  id.internal[4] = 9;  // version
  EXPECT_FALSE(isValidUniqueId(id));
}

TEST(BootstrapUniqueId, CreatedIdsNameALoopbackServerWithFreshSecrets) {
  ncclUniqueId a, b;
  ASSERT_EQ(createUniqueIdFrom("", "", "lo", &a), ncclSuccess);
  ASSERT_EQ(createUniqueIdFrom("", "", "lo", &b), ncclSuccess);
  UniqueIdInfo ia, ib;
  ASSERT_EQ(decodeUniqueId(a, &ia), ncclSuccess);
  ASSERT_EQ(decodeUniqueId(b, &ib), ncclSuccess);
  EXPECT_TRUE(ia.addr.isLoopback());
  EXPECT_NE(ia.addr.port(), 0);
  EXPECT_NE(ia.addr.port(), ib.addr.port());
  EXPECT_NE(ia.secret, ib.secret);
  EXPECT_EQ(ia.pid, static_cast<uint32_t>(getpid()));
  EXPECT_EQ(ia.hostHash, hostHash());
  EXPECT_FALSE(ia.commIdMode);
  EXPECT_EQ(describeUniqueId(a), ia.addr.str());
  EXPECT_NE(findRegisteredServer(ia.addr, ia.secret), nullptr);
  // Both servers have had no client yet, so they keep running (a launcher may
  // create an id long before any rank connects). Stop them explicitly.
  findRegisteredServer(ia.addr, ia.secret)->stop();
  findRegisteredServer(ib.addr, ib.secret)->stop();
}

TEST(BootstrapUniqueId, CommIdModeIsDeterministicAndStartsNothing) {
  ncclUniqueId a, b, c, d;
  ASSERT_EQ(createUniqueIdFrom("127.0.0.1:4242", "", "", &a), ncclSuccess);
  ASSERT_EQ(createUniqueIdFrom("127.0.0.1:4242", "", "", &b), ncclSuccess);
  EXPECT_EQ(memcmp(&a, &b, sizeof(a)), 0);
  ASSERT_EQ(createUniqueIdFrom("127.0.0.1:4242", "s3cret", "", &c), ncclSuccess);
  ASSERT_EQ(createUniqueIdFrom("127.0.0.1:4243", "", "", &d), ncclSuccess);
  UniqueIdInfo ia, ic, id;
  ASSERT_EQ(decodeUniqueId(a, &ia), ncclSuccess);
  ASSERT_EQ(decodeUniqueId(c, &ic), ncclSuccess);
  ASSERT_EQ(decodeUniqueId(d, &id), ncclSuccess);
  EXPECT_TRUE(ia.commIdMode);
  EXPECT_EQ(ia.addr.str(), "127.0.0.1:4242");
  EXPECT_EQ(ia.pid, 0u);  // identical bytes in every process
  EXPECT_EQ(ia.hostHash, 0u);
  EXPECT_NE(ia.secret, ic.secret);  // CHORUS_COMM_SECRET changes it
  EXPECT_NE(ia.secret, id.secret);  // so does the address
  EXPECT_EQ(ia.secret, deriveSecret("127.0.0.1:4242", ""));
  EXPECT_EQ(findRegisteredServer(ia.addr, ia.secret), nullptr);
  EXPECT_EQ(createUniqueIdFrom("127.0.0.1:0", "", "", &a), ncclInvalidArgument);
  EXPECT_EQ(createUniqueIdFrom("not an address", "", "", &a), ncclInvalidArgument);
}

}  // namespace
}  // namespace chorus
