// A symbolic simulator of segments (src/sched/segment.h) for the tests:
// every rank of a collective executes the steps its segment generates on
// symbolic data. A value is "which ranks' contributions it sums, to which of
// them PreMulSum's scalar was applied, how often the average's division was
// applied, and which element of the collective it is". Buffers are interval
// maps of such values (a value is affine in the element index), so counts
// above 2^32 cost no more than small ones. Messages travel through one
// unbounded FIFO per connector. World::run() and checkOutput() report in
// World::error:
//   * a piece received with another size than the one sent on the connector
//     (FIFO pairing), pieces left in a connector, a deadlock,
//   * a reduction of operands for different elements, a contribution reduced
//     twice, PreMulSum applied twice, the division applied twice or to an
//     incomplete value,
//   * an in-place input read after it has been overwritten,
//   * an output element missing, wrong, or written outside the output.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sched/segment.h"

namespace chorus::sched::sim {

using Mask = uint64_t;
inline Mask bit(int r) { return Mask(1) << r; }

struct Val {
  Mask mask = 0;  // contributions summed
  Mask pre = 0;   // contributions PreMulSum's scalar was applied to
  uint32_t post = 0;
  uint64_t loc = 0;  // element of the collective (at the start of a range)
};

inline bool sameShape(const Val& a, const Val& b) { return a.mask == b.mask && a.pre == b.pre && a.post == b.post; }

// Element ranges of one buffer, each holding a value affine in the index.
class Buffer {
 public:
  struct Cell {
    uint64_t end;
    Val v;  // v.loc: at the cell's first element
  };

  void write(uint64_t b, uint64_t n, Val v) {
    if (n == 0) return;
    split(b);
    split(b + n);
    cells_.erase(cells_.lower_bound(b), cells_.lower_bound(b + n));
    cells_[b] = Cell{b + n, v};
  }

  // The value of [b, b+n) when it is one contiguous value.
  std::optional<Val> read(uint64_t b, uint64_t n) const {
    auto it = cells_.upper_bound(b);
    if (it == cells_.begin()) return std::nullopt;
    --it;
    if (it->second.end <= b) return std::nullopt;
    Val v = it->second.v;
    v.loc += b - it->first;
    for (uint64_t at = it->second.end; at < b + n; at = it->second.end) {
      ++it;
      if (it == cells_.end() || it->first != at || !sameShape(it->second.v, v) || it->second.v.loc != v.loc + (at - b))
        return std::nullopt;
    }
    return v;
  }

  const std::map<uint64_t, Cell>& cells() const { return cells_; }

 private:
  void split(uint64_t at) {
    auto it = cells_.upper_bound(at);
    if (it == cells_.begin()) return;
    --it;
    if (it->first == at || it->second.end <= at) return;
    Cell tail{it->second.end, it->second.v};
    tail.v.loc += at - it->first;
    it->second.end = at;
    cells_[at] = tail;
  }

  std::map<uint64_t, Cell> cells_;
};

struct RankSim {
  Segment seg;
  const int32_t* table = nullptr;
  int id = 0;  // the rank: its bit in Val::mask
  Buffer src, dst;
  bool inPlace = false;   // the input is a view of dst ...
  uint64_t srcShift = 0;  // ... starting this many elements into it
  uint64_t step = 0;
};

struct Message {
  uint64_t count;
  Val v;
};

// Expected contents of part of an output: the cells over [begin, begin+count)
// hold `v` (loc: the cell's index plus locShift).
struct Expect {
  uint64_t begin, count;
  Val v;
  uint64_t locShift = 0;
};

class World {
 public:
  std::vector<RankSim> ranks;
  Mask full = 0;
  std::string error;

  void run() {
    for (bool progress = true; progress && error.empty();) {
      progress = false;
      for (auto& r : ranks)
        while (error.empty() && r.step < segmentSteps(r.seg) && execute(r)) progress = true;
    }
    if (!error.empty()) return;
    for (auto& r : ranks)
      if (r.step != segmentSteps(r.seg))
        return fail(
            r, "deadlock: stopped at step " + std::to_string(r.step) + " of " + std::to_string(segmentSteps(r.seg)));
    for (auto& [c, q] : fifo_)
      if (!q.empty()) error = "connector " + std::to_string(c) + " ends with unreceived pieces";
    for (auto& [c, sent] : sent_)
      if (sent != received_[c]) error = "connector " + std::to_string(c) + ": sent and received piece sizes differ";
    for (auto& [c, got] : received_)
      if (got != sent_[c]) error = "connector " + std::to_string(c) + ": sent and received piece sizes differ";
  }

  // Whether rank r's output is exactly `want` (cells outside it are stray writes).
  void checkOutput(const RankSim& r, std::vector<Expect> want) {
    if (!error.empty()) return;
    uint64_t covered = 0, expected = 0;
    for (const Expect& e : want) {
      expected += e.count;
      for (uint64_t at = e.begin; at < e.begin + e.count;) {
        auto it = r.dst.cells().find(at);
        if (it == r.dst.cells().end() || it->second.end > e.begin + e.count)
          return fail(r, "output element " + std::to_string(at) + " missing or not aligned to its range");
        const Val& v = it->second.v;
        if (!sameShape(v, e.v) || v.loc != at + e.locShift)
          return fail(r, "output element " + std::to_string(at) + ": mask " + std::to_string(v.mask) + " pre " +
                             std::to_string(v.pre) + " post " + std::to_string(v.post) + " loc " +
                             std::to_string(v.loc) + ", want mask " + std::to_string(e.v.mask) + " pre " +
                             std::to_string(e.v.pre) + " post " + std::to_string(e.v.post) + " loc " +
                             std::to_string(at + e.locShift));
        covered += it->second.end - at;
        at = it->second.end;
      }
    }
    uint64_t total = 0;
    for (auto& [b, c] : r.dst.cells()) total += c.end - b;
    if (total != covered || covered != expected) fail(r, "output holds elements outside its expected ranges");
  }

 private:
  void fail(const RankSim& r, const std::string& what) {
    if (error.empty()) error = "rank " + std::to_string(r.id) + " step " + std::to_string(r.step) + ": " + what;
  }

  std::optional<Val> readInput(const RankSim& r, const StepDesc& d) {
    if (d.input == StepInput::Dst) return r.dst.read(d.srcOff, d.count);
    if (r.inPlace) return r.dst.read(d.srcOff + r.srcShift, d.count);
    return r.src.read(d.srcOff, d.count);
  }

  bool combineInto(const RankSim& r, Val& acc, const Val& v) {
    if (acc.loc != v.loc)
      return fail(r, "reduces elements " + std::to_string(acc.loc) + " and " + std::to_string(v.loc)), false;
    if ((acc.mask & v.mask) != 0) return fail(r, "a contribution reduced twice"), false;
    if (acc.post || v.post) return fail(r, "reduces an already divided value"), false;
    acc.mask |= v.mask;
    acc.pre |= v.pre;
    return true;
  }

  // Executes r's next step; false when it waits for a piece.
  bool execute(RankSim& r) {
    const StepDesc d = segmentStep(r.seg, r.table, r.step);
    if (d.count > 0)
      for (int i = 0; i < d.nRecv; ++i)
        if (fifo_[d.recv[i]].empty()) return false;
    for (int i = 0; i < d.nRecv; ++i) received_[d.recv[i]].push_back(d.count);
    for (int i = 0; i < d.nSend; ++i) sent_[d.send[i]].push_back(d.count);
    if (d.count == 0) {  // the executors skip empty steps
      ++r.step;
      return true;
    }
    std::vector<Val> in;
    for (int i = 0; i < d.nRecv; ++i) {
      const Message m = fifo_[d.recv[i]].front();
      fifo_[d.recv[i]].pop_front();
      if (m.count != d.count)
        return fail(r, "received a piece of " + std::to_string(m.count) + " for a step of " + std::to_string(d.count)),
               false;
      in.push_back(m.v);
    }
    if (d.input != StepInput::None) {
      std::optional<Val> v = readInput(r, d);
      if (!v) return fail(r, "input range unwritten or overwritten"), false;
      if (d.preSrc) {
        if (v->pre != 0) return fail(r, "PreMulSum applied twice"), false;
        v->pre = v->mask;
      }
      in.push_back(*v);
    }
    if (in.empty()) return fail(r, "a step with neither input nor receive"), false;
    Val out = in[0];
    for (size_t i = 1; i < in.size(); ++i)
      if (!combineInto(r, out, in[i])) return false;
    if (d.post) {
      if (out.mask != full || out.post != 0) return fail(r, "division of a partial or divided value"), false;
      out.post = 1;
    }
    if (d.dstOff != kNoBuffer) r.dst.write(d.dstOff, d.count, out);
    for (int i = 0; i < d.nSend; ++i) fifo_[d.send[i]].push_back(Message{d.count, out});
    ++r.step;
    return true;
  }

  std::map<int, std::deque<Message>> fifo_;
  std::map<int, std::vector<uint64_t>> sent_, received_;
};

}  // namespace chorus::sched::sim
