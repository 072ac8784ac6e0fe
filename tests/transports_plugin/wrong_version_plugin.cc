// A plugin built against a future version of the table: must be refused.
#include "chorus/net_plugin.h"

namespace {
chorusNet_v1_t futureTable() {
  chorusNet_v1_t t{};
  t.name = "FromTheFuture";
  t.version = 99;
  return t;
}
}  // namespace

extern "C" {
__attribute__((visibility("default"))) chorusNet_v1_t chorusNetPlugin_v1 = futureTable();
}
