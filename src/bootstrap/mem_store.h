// The in-memory store. It holds the data of every store this process serves:
// ranks that are threads of the serving process use it directly, and the TCP
// server answers remote ranks from the same object. Waiting is built on
// watches (a callback fired once all of a set of keys exist) so that the TCP
// server can park a remote get without a thread per request; the blocking
// get() of in-process users is a watch plus a condition variable.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "bootstrap/store.h"

namespace chorus {

class MemStore : public Store {
 public:
  using Values = std::vector<std::vector<uint8_t>>;
  using ReadyFn = std::function<void(Values)>;
  struct Missing {
    size_t count = 0;
    std::string first;
  };

  // `where` names this store in error messages (e.g. "in-process store for 10.0.0.1:4000").
  explicit MemStore(std::string where = "in-process store") : where_(std::move(where)) {}

  ncclResult_t set(const std::string& key, std::vector<uint8_t> value) override;
  ncclResult_t get(const std::vector<std::string>& keys, Values* values, const WaitBound& bound) override;
  ncclResult_t add(const std::string& key, int64_t delta, int64_t* result) override;
  ncclResult_t erasePrefix(const std::string& prefix) override;

  // If every key exists, fills *now and returns 0. Otherwise registers onReady,
  // which runs exactly once (unless cancelled) on the thread that sets the last
  // missing key, outside the store's lock, and returns the watch's id (> 0).
  uint64_t watch(const std::vector<std::string>& keys, Values* now, ReadyFn onReady);
  // Cancels a watch. Returns false if it already fired (or never existed);
  // otherwise describes what it was still waiting for.
  bool cancelWatch(uint64_t id, Missing* missing);
  // Like add() but reports a non-counter value by returning false instead of failing.
  bool tryAdd(const std::string& key, int64_t delta, int64_t* result);

  // A live key: a get of `key` is answered with what `value()` returns at
  // that moment, on the thread that serves the get (for remote ranks: the
  // server's thread), so a process whose own threads are busy elsewhere
  // still answers it. `value` runs under the store's lock: it must be quick
  // and must not use the store. A live key is never missing, is not counted
  // by size(), and is not erased by erasePrefix; removeLive returns once no
  // call of `value` is running.
  void setLive(const std::string& key, std::function<std::vector<uint8_t>()> value);
  void removeLive(const std::string& key);

  size_t size() const;            // number of keys held
  size_t pendingWatches() const;  // registered, not yet fired watches

 private:
  struct Waiter {
    std::vector<std::string> keys;
    size_t missing = 0;
    ReadyFn onReady;
  };
  struct Fired {
    ReadyFn fn;
    Values values;
  };

  void storeLocked(const std::string& key, std::vector<uint8_t> value, std::vector<Fired>* fired);
  bool collectLocked(const std::vector<std::string>& keys, Values* values) const;
  void registerLocked(uint64_t id, Waiter* w);
  Missing missingLocked(const std::vector<std::string>& keys) const;
  bool hasLocked(const std::string& key) const { return data_.count(key) != 0 || live_.count(key) != 0; }
  static void runFired(std::vector<Fired>* fired);

  const std::string where_;
  mutable std::mutex mu_;
  // Ordered so that erasePrefix visits only the keys it removes.
  std::map<std::string, std::vector<uint8_t>> data_;
  std::map<std::string, std::function<std::vector<uint8_t>()>> live_;
  std::unordered_map<uint64_t, Waiter> waiters_;
  // Key -> watches still waiting for it. Entries are dropped when the key is set.
  std::unordered_map<std::string, std::vector<uint64_t>> waitersByKey_;
  uint64_t nextWatch_ = 1;
};

}  // namespace chorus
