// docs/env.md must list every knob of the registry with its default.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "common/tree_paths.h"
#include "core/params.h"

TEST(ParamsDoc, EveryKnobIsDocumentedWithItsDefault) {
  std::ifstream f(chorus::test::sourcePath("/docs/env.md"));
  ASSERT_TRUE(f.good()) << "docs/env.md missing";
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string doc = ss.str();
  ASSERT_FALSE(chorus::params::all().empty());
  for (const auto& p : chorus::params::all()) {
    std::string row = std::string("| `") + p.env + "` |";
    size_t pos = doc.find(row);
    ASSERT_NE(pos, std::string::npos) << p.env << " is not in docs/env.md (run scripts/gen_env_doc.py)";
    std::string line = doc.substr(pos, doc.find('\n', pos) - pos);
    std::string def = *p.defaultValue ? p.defaultValue : "(empty)";
    EXPECT_NE(line.find("`" + def + "`"), std::string::npos) << p.env << ": default " << def << " not in: " << line;
  }
}

TEST(ParamsDoc, IntegerKnobsFallBackOnGarbage) {
  setenv("CHORUS_SLOTS", "not-a-number", 1);
  EXPECT_EQ(chorus::params::slotCount(), 8);
  setenv("CHORUS_SLOTS", "12", 1);
  EXPECT_EQ(chorus::params::slotCount(), 12);
  unsetenv("CHORUS_SLOTS");
}
