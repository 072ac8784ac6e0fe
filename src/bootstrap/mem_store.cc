#include "bootstrap/mem_store.h"

#include <algorithm>
#include <condition_variable>

#include "core/log.h"
#include "core/result.h"

namespace chorus {

bool MemStore::collectLocked(const std::vector<std::string>& keys, Values* values) const {
  Values out;
  out.reserve(keys.size());
  for (const auto& k : keys) {
    auto it = data_.find(k);
    if (it != data_.end()) {
      out.push_back(it->second);
      continue;
    }
    auto live = live_.find(k);
    if (live == live_.end()) return false;
    out.push_back(live->second());
  }
  *values = std::move(out);
  return true;
}

void MemStore::registerLocked(uint64_t id, Waiter* w) {
  w->missing = 0;
  for (const auto& k : w->keys) {
    if (hasLocked(k)) continue;
    waitersByKey_[k].push_back(id);
    ++w->missing;
  }
}

MemStore::Missing MemStore::missingLocked(const std::vector<std::string>& keys) const {
  Missing m;
  for (const auto& k : keys) {
    if (hasLocked(k)) continue;
    if (m.count++ == 0) m.first = k;
  }
  return m;
}

// Stores a value and moves every watch it completes into *fired. Watches are
// only indexed under keys that were missing, so overwriting a key is cheap and
// setting one touches only the watches that wait for it.
void MemStore::storeLocked(const std::string& key, std::vector<uint8_t> value, std::vector<Fired>* fired) {
  bool existed = data_.count(key) != 0;
  data_.insert_or_assign(key, std::move(value));
  if (existed) return;
  auto node = waitersByKey_.extract(key);
  if (node.empty()) return;
  for (uint64_t id : node.mapped()) {
    auto it = waiters_.find(id);
    if (it == waiters_.end()) continue;
    Waiter& w = it->second;
    if (--w.missing > 0) continue;
    Values vals;
    if (collectLocked(w.keys, &vals)) {
      fired->push_back(Fired{std::move(w.onReady), std::move(vals)});
      waiters_.erase(it);
    } else {
      registerLocked(id, &w);  // a key it had seen was erased since: wait for it again
    }
  }
}

void MemStore::runFired(std::vector<Fired>* fired) {
  for (auto& f : *fired) f.fn(std::move(f.values));
}

ncclResult_t MemStore::set(const std::string& key, std::vector<uint8_t> value) {
  std::vector<Fired> fired;
  {
    std::lock_guard<std::mutex> lock(mu_);
    storeLocked(key, std::move(value), &fired);
  }
  runFired(&fired);
  return ncclSuccess;
}

uint64_t MemStore::watch(const std::vector<std::string>& keys, Values* now, ReadyFn onReady) {
  std::lock_guard<std::mutex> lock(mu_);
  if (collectLocked(keys, now)) return 0;
  uint64_t id = nextWatch_++;
  Waiter w{keys, 0, std::move(onReady)};
  registerLocked(id, &w);
  waiters_.emplace(id, std::move(w));
  return id;
}

bool MemStore::cancelWatch(uint64_t id, Missing* missing) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = waiters_.find(id);
  if (it == waiters_.end()) return false;
  *missing = missingLocked(it->second.keys);
  for (const auto& k : it->second.keys) {
    auto list = waitersByKey_.find(k);
    if (list == waitersByKey_.end()) continue;
    auto& ids = list->second;
    ids.erase(std::remove(ids.begin(), ids.end(), id), ids.end());
    if (ids.empty()) waitersByKey_.erase(list);
  }
  waiters_.erase(it);
  return true;
}

ncclResult_t MemStore::get(const std::vector<std::string>& keys, Values* values, const WaitBound& bound) {
  const auto started = Clock::now();
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    Values values;
  };
  auto st = std::make_shared<State>();
  Values now;
  uint64_t id = watch(keys, &now, [st](Values v) {
    {
      std::lock_guard<std::mutex> lock(st->mu);
      st->values = std::move(v);
      st->done = true;
    }
    st->cv.notify_all();
  });
  if (id == 0) {
    *values = std::move(now);
    return ncclSuccess;
  }
  WaitProgress progress(started);
  std::unique_lock<std::mutex> lk(st->mu);
  while (!st->done) {
    bool aborted = waitAborted(bound);
    auto t = Clock::now();
    if (progress.due(t))
      CHORUS_WARN(kLogBootstrap, "bootstrap: still waiting after %lld s for key '%s'%s in %s",
                  progress.secondsWaited(t), keys.front().c_str(), keys.size() > 1 ? " (among others)" : "",
                  where_.c_str());
    if (aborted || t >= bound.deadline) {
      lk.unlock();
      Missing m;
      bool cancelled = cancelWatch(id, &m);
      lk.lock();
      if (cancelled) return failStoreWait(aborted, started, m.first, m.count, keys.size(), where_);
      // It fired while we were cancelling; its callback is about to deliver.
      st->cv.wait(lk, [&] { return st->done; });
      break;
    }
    st->cv.wait_for(lk, std::min<Clock::duration>(kWaitSlice, bound.deadline - t));
  }
  *values = std::move(st->values);
  return ncclSuccess;
}

bool MemStore::tryAdd(const std::string& key, int64_t delta, int64_t* result) {
  std::vector<Fired> fired;
  {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t cur = 0;
    auto it = data_.find(key);
    if (it != data_.end() && !decodeCounter(it->second, &cur)) return false;
    // Wrap like the hardware would rather than invoke signed-overflow UB.
    cur = static_cast<int64_t>(static_cast<uint64_t>(cur) + static_cast<uint64_t>(delta));
    storeLocked(key, encodeCounter(cur), &fired);
    *result = cur;
  }
  runFired(&fired);
  return true;
}

ncclResult_t MemStore::add(const std::string& key, int64_t delta, int64_t* result) {
  if (!tryAdd(key, delta, result))
    return fail(ncclInvalidUsage, "bootstrap: add on key '%s' in %s, which holds a value that is not a counter",
                key.c_str(), where_.c_str());
  return ncclSuccess;
}

ncclResult_t MemStore::erasePrefix(const std::string& prefix) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = data_.lower_bound(prefix);
  while (it != data_.end() && it->first.compare(0, prefix.size(), prefix) == 0) it = data_.erase(it);
  return ncclSuccess;
}

void MemStore::setLive(const std::string& key, std::function<std::vector<uint8_t>()> value) {
  std::lock_guard<std::mutex> lock(mu_);
  live_.insert_or_assign(key, std::move(value));
}

void MemStore::removeLive(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  live_.erase(key);
}

size_t MemStore::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return data_.size();
}

size_t MemStore::pendingWatches() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiters_.size();
}

}  // namespace chorus
