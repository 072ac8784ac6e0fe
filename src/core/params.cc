#include "core/params.h"

#include <cerrno>
#include <cstdlib>

#include "core/log.h"

namespace chorus::params {
namespace {

int64_t readInt(const char* env, int64_t def) {
  const char* s = std::getenv(env);
  if (s == nullptr || *s == '\0') return def;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s, &end, 0);
  if (errno != 0 || end == s || *end != '\0') {
    CHORUS_WARN(kLogEnv, "ignoring %s=%s: not an integer, using %lld", env, s, static_cast<long long>(def));
    return def;
  }
  return v;
}

std::string readStr(const char* env, const char* def) {
  const char* s = std::getenv(env);
  return (s == nullptr) ? std::string(def) : std::string(s);
}

#define CHORUS_STRINGIFY_(x) #x
#define CHORUS_STRINGIFY(x) CHORUS_STRINGIFY_(x)

}  // namespace

#define CHORUS_PARAM_INT(name, env, def, doc) \
  int64_t name() { return readInt(env, def); }
#define CHORUS_PARAM_STR(name, env, def, doc) \
  std::string name() { return readStr(env, def); }
#include "core/params.def"
#undef CHORUS_PARAM_INT
#undef CHORUS_PARAM_STR

const std::vector<ParamInfo>& all() {
  static const std::vector<ParamInfo> table = {
#define CHORUS_PARAM_INT(name, env, def, doc) {env, CHORUS_STRINGIFY(def), doc},
#define CHORUS_PARAM_STR(name, env, def, doc) {env, def, doc},
#include "core/params.def"
#undef CHORUS_PARAM_INT
#undef CHORUS_PARAM_STR
  };
  return table;
}

}  // namespace chorus::params
