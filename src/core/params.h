// Typed accessors for every knob declared in params.def. Values are read from
// the environment on each call, so callers snapshot them at communicator init.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace chorus::params {

#define CHORUS_PARAM_INT(name, env, def, doc) int64_t name();
#define CHORUS_PARAM_STR(name, env, def, doc) std::string name();
#include "core/params.def"
#undef CHORUS_PARAM_INT
#undef CHORUS_PARAM_STR

struct ParamInfo {
  const char* env;
  const char* defaultValue;
  const char* doc;
};
// Every registered knob, in declaration order.
const std::vector<ParamInfo>& all();

}  // namespace chorus::params
