// XML topology files: load -> dump -> load round trips, and malformed input
// fails with ncclInvalidUsage and a message naming file and line.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include "common/tree_paths.h"
#include "core/result.h"
#include "topo/xml.h"
#include "topo/xml_read.h"
#include "topo/xml_write.h"

namespace chorus::topo {
namespace {

std::string shipped(const char* name) { return chorus::test::sourcePath("/tests/topo/files/") + name; }

bool near(double a, double b) { return std::fabs(a - b) <= 1e-9 * std::max(1.0, std::fabs(a)); }

void expectSameTopology(const Topology& a, const Topology& b) {
  ASSERT_EQ(a.nodes.size(), b.nodes.size());
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    const Node& x = a.nodes[i];
    const Node& y = b.nodes[i];
    SCOPED_TRACE("node " + std::to_string(i));
    EXPECT_EQ(x.type, y.type);
    EXPECT_EQ(x.index, y.index);
    EXPECT_EQ(x.busId, y.busId);
    EXPECT_EQ(x.numa, y.numa);
    EXPECT_EQ(x.cudaDev, y.cudaDev);
    EXPECT_EQ(x.smVersion, y.smVersion);
    EXPECT_EQ(x.rank, y.rank);
    EXPECT_EQ(x.gdr, y.gdr);
    EXPECT_EQ(x.affinity, y.affinity);
    EXPECT_EQ(x.cores, y.cores);
    EXPECT_EQ(x.vendor, y.vendor);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.port, y.port);
    EXPECT_EQ(x.guid, y.guid);
    EXPECT_TRUE(near(x.speedGBs, y.speedGBs));
    EXPECT_EQ(x.rdma, y.rdma);
    EXPECT_EQ(x.nvSwitchLinks, y.nvSwitchLinks);
  }
  // Links as a set (the writer may emit them in another order).
  ASSERT_EQ(a.links.size(), b.links.size());
  for (const Link& l : a.links) {
    int m = -1;
    for (int k = 0; k < static_cast<int>(b.links.size()) && m < 0; ++k)
      if (b.links[k].from == l.from && b.links[k].to == l.to && b.links[k].type == l.type) m = k;
    ASSERT_GE(m, 0) << l.from << "->" << l.to << " " << linkTypeName(l.type);
    EXPECT_TRUE(near(b.links[m].bwGBs, l.bwGBs)) << b.links[m].bwGBs << " vs " << l.bwGBs;
    EXPECT_EQ(b.links[m].count, l.count);
    EXPECT_EQ(b.links[m].viaNvSwitch, l.viaNvSwitch);
  }
  ASSERT_EQ(a.paths.size(), b.paths.size());
  for (size_t i = 0; i < a.paths.size(); ++i) {
    for (size_t j = 0; j < a.paths.size(); ++j) {
      EXPECT_EQ(a.paths[i][j].type, b.paths[i][j].type) << i << "," << j;
      EXPECT_TRUE(near(a.paths[i][j].bwGBs, b.paths[i][j].bwGBs));
      EXPECT_EQ(a.paths[i][j].hops, b.paths[i][j].hops);
    }
  }
}

class RoundTrip : public ::testing::TestWithParam<const char*> {};

TEST_P(RoundTrip, LoadDumpLoadIsIdentical) {
  Topology first, second;
  ASSERT_EQ(loadTopologyXml(shipped(GetParam()), &first), ncclSuccess);
  std::string path = chorus::test::binaryPath("/topo_roundtrip_") + GetParam();
  ASSERT_EQ(dumpTopologyXml(first, path), ncclSuccess);
  ASSERT_EQ(loadTopologyXml(path, &second), ncclSuccess) << topologyToXml(first);
  expectSameTopology(first, second);
  std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(Shipped, RoundTrip,
                         ::testing::Values("nvswitch_8gpu_8nic.xml", "pcie_8gpu_2socket.xml",
                                           "nvlink_4gpu_pairwise.xml"));

TEST(XmlRoundTrip, HandBuiltExtrasSurvive) {
  Topology t;
  Node cpu;
  cpu.type = NodeType::Cpu;
  cpu.numa = 0;
  cpu.cores = 6;  // no affinity mask: written as our `cores` attribute
  cpu.vendor = "AuthenticAMD";
  int c = t.addNode(cpu);
  Node gpu;
  gpu.type = NodeType::Gpu;
  gpu.busId = "0000:01:00.0";
  gpu.cudaDev = 0;
  gpu.smVersion = 90;
  gpu.numa = 0;
  int g = t.addNode(gpu);
  t.addLink(g, c, LinkType::Pci, 7.5);  // Gen4 x5-equivalent: an odd bandwidth
  t.addLink(g, c, LinkType::C2C, 2 * 90.0, 2);
  Node nic;
  nic.type = NodeType::Nic;
  nic.name = "eth0";
  nic.numa = 0;
  nic.speedGBs = 25.0 / 8;
  int n = t.addNode(nic);
  t.addLink(n, c, LinkType::Pci, bw::kPciGen4x16);
  t.hostName = "box<1>";
  t.computePaths();
  EXPECT_EQ(t.path(g, c).type, PathType::C2C);
  Topology back;
  ASSERT_EQ(parseTopologyXml(topologyToXml(t), "<dump>", &back), ncclSuccess) << topologyToXml(t);
  EXPECT_EQ(back.hostName, "box<1>");
  expectSameTopology(t, back);
}

struct BadCase {
  const char* what;
  const char* text;
  int line;  // expected in the message
  const char* mentions;
};

class Malformed : public ::testing::TestWithParam<BadCase> {};

TEST_P(Malformed, FailsWithFileAndLine) {
  const BadCase& c = GetParam();
  Topology t;
  clearLastError();
  EXPECT_EQ(parseTopologyXml(c.text, "bad.xml", &t), ncclInvalidUsage) << c.what;
  std::string msg = lastErrorMessage();
  EXPECT_NE(msg.find("bad.xml:" + std::to_string(c.line) + ":"), std::string::npos) << c.what << ": " << msg;
  EXPECT_NE(msg.find(c.mentions), std::string::npos) << c.what << ": " << msg;
}

INSTANTIATE_TEST_SUITE_P(
    Xml, Malformed,
    ::testing::Values(
        BadCase{"truncated", "<system version=\"1\">\n  <cpu numaid=\"0\">\n    <pci busid=\"0000:01:00.0\"", 3,
                "end of file"},
        BadCase{"unclosed", "<system version=\"1\">\n  <cpu numaid=\"0\">\n", 3, "never closed"},
        BadCase{"mismatched", "<system version=\"1\">\n<cpu numaid=\"0\">\n</system>\n", 3, "does not match"},
        BadCase{"unknown version", "<?xml version=\"1.0\"?>\n<system version=\"7\">\n</system>\n", 2, "version"},
        BadCase{"no version", "<system>\n</system>\n", 1, "version"},
        BadCase{"wrong root", "<machine version=\"1\"/>\n", 1, "<system>"},
        BadCase{"bad numaid", "<system version=\"1\">\n  <cpu numaid=\"zero\"/>\n</system>\n", 2, "numaid"},
        BadCase{"bad busid",
                "<system version=\"1\">\n<cpu numaid=\"0\">\n<pci busid=\"nope\">\n<gpu dev=\"0\"/>\n</pci>\n</cpu>\n"
                "</system>\n",
                3, "nope"},
        BadCase{"bad nvlink count",
                "<system version=\"1\">\n<cpu numaid=\"0\">\n<pci busid=\"01:00.0\">\n<gpu dev=\"0\" sm=\"80\">\n"
                "<nvlink target=\"02:00.0\" count=\"four\"/>\n</gpu>\n</pci>\n</cpu>\n</system>\n",
                5, "count"},
        BadCase{"bad speed",
                "<system version=\"1\">\n<cpu numaid=\"0\">\n<nic>\n<net name=\"eth0\" speed=\"-5\"/>\n</nic>\n</cpu>\n"
                "</system>\n",
                4, "speed"},
        BadCase{"duplicate gpu",
                "<system version=\"1\">\n<cpu numaid=\"0\">\n<pci busid=\"01:00.0\"><gpu dev=\"0\"/></pci>\n"
                "<pci busid=\"02:00.0\"><gpu dev=\"0\"/></pci>\n</cpu>\n</system>\n",
                4, "dev 0"},
        BadCase{"no cpu", "<system version=\"1\">\n</system>\n", 1, "no <cpu>"},
        BadCase{"garbage", "\n\nhello", 3, "root element"},
        BadCase{"unquoted attribute", "<system version=1>\n</system>\n", 1, "quoted"},
        BadCase{"trailing junk", "<system version=\"1\"><cpu numaid=\"0\"/></system>\n<system/>", 2, "after the root"}),
    [](const ::testing::TestParamInfo<BadCase>& info) {
      std::string name = info.param.what;
      for (char& ch : name)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return name;
    });

TEST(XmlFile, MissingFileIsInvalidUsage) {
  Topology t;
  clearLastError();
  EXPECT_EQ(loadTopologyXml("/nonexistent/dir/topo.xml", &t), ncclInvalidUsage);
  EXPECT_NE(std::string(lastErrorMessage()).find("/nonexistent/dir/topo.xml"), std::string::npos);
}

TEST(XmlFile, TruncatedShippedFileFails) {
  std::ifstream in(shipped("nvswitch_8gpu_8nic.xml"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(text.size(), 1000u);
  for (size_t cut : {text.size() / 3, text.size() / 2, text.size() - 12}) {
    Topology t;
    EXPECT_EQ(parseTopologyXml(text.substr(0, cut), "cut.xml", &t), ncclInvalidUsage) << cut;
  }
}

TEST(XmlFile, IgnoresUnknownElementsAndAttributes) {
  const char* text =
      "<system version=\"1\" extra=\"x\">\n"
      "  <!-- comment -->\n"
      "  <cpu numaid=\"0\" affinity=\"ff\" futureattr=\"1\">\n"
      "    <gadget/>\n"
      "    <pci busid=\"0000:01:00.0\" link_speed=\"Unknown\" link_width=\"0\"><gpu dev=\"0\" sm=\"86\"/></pci>\n"
      "  </cpu>\n"
      "</system>\n";
  Topology t;
  ASSERT_EQ(parseTopologyXml(text, "ok.xml", &t), ncclSuccess);
  ASSERT_EQ(t.nodesOfType(NodeType::Gpu).size(), 1u);
  EXPECT_EQ(t.nodes[t.nodesOfType(NodeType::Cpu)[0]].cores, 8);
  // Unknown speed falls back to a Gen4 x16 link.
  EXPECT_DOUBLE_EQ(t.path(t.findGpu(0), t.nodesOfType(NodeType::Cpu)[0]).bwGBs, bw::kPciGen4x16);
}

TEST(XmlTokenizer, EntitiesAndSelfClosing) {
  XmlElement root;
  ASSERT_EQ(parseXml("<a x='1 &amp; 2'><b/><c y=\"&lt;\"></c></a>", "t", &root), ncclSuccess);
  EXPECT_EQ(*root.attr("x"), "1 & 2");
  ASSERT_EQ(root.children.size(), 2u);
  EXPECT_EQ(*root.children[1].attr("y"), "<");
  XmlElement back;
  ASSERT_EQ(parseXml(writeXml(root), "t2", &back), ncclSuccess);
  EXPECT_EQ(*back.attr("x"), "1 & 2");
  EXPECT_EQ(parseXml("<a x='&bogus;'/>", "t", &root), ncclInvalidUsage);
  EXPECT_EQ(parseXml("<a x='1' x='2'/>", "t", &root), ncclInvalidUsage);
}

}  // namespace
}  // namespace chorus::topo
