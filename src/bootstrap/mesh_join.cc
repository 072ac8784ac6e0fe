#include "bootstrap/mesh_join.h"

#include <unistd.h>

#include <cstring>

#include "bootstrap/bruck.h"
#include "core/little_endian.h"
#include "core/log.h"
#include "core/result.h"

namespace chorus {
namespace {

void putU32(std::vector<uint8_t>* out, uint32_t v) {
  const size_t at = out->size();
  out->resize(at + 4);
  storeLittleEndian(out->data() + at, v, 4);
}

std::string thisHost() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "?";
  return name;
}

class Join {
 public:
  Join(Store& job, const std::string& prefix, const JoinRecord& me, const WaitBound& bound)
      : job_(job), p_(prefix), me_(me), bound_(bound) {}

  // Claims, checks, and waits for the job's verdict ("" means every rank joined).
  ncclResult_t verdict(std::string* conflict);
  ncclResult_t record(int rank, JoinRecord* out) { return read(p_ + "who/" + std::to_string(rank) + "/1;", out); }

 private:
  ncclResult_t read(const std::string& key, JoinRecord* out) {
    std::vector<std::vector<uint8_t>> vals;
    CHORUS_CHECK(job_.get({key}, &vals, bound_));
    return decodeJoinRecord(vals[0], out);
  }
  // The first verdict set wins (a counter makes it create-only).
  ncclResult_t decide(const std::string& conflict) {
    int64_t n = 0;
    CHORUS_CHECK(job_.add(p_ + "verdicts", 1, &n));
    if (n == 1) CHORUS_CHECK(job_.set(p_ + "verdict;", std::vector<uint8_t>(conflict.begin(), conflict.end())));
    return ncclSuccess;
  }
  ncclResult_t checkClaim(std::string* conflict);
  ncclResult_t checkSize(std::string* conflict);

  Store& job_;
  const std::string p_;
  const JoinRecord me_;
  const WaitBound bound_;
};

ncclResult_t Join::checkClaim(std::string* conflict) {
  int64_t claim = 0;
  CHORUS_CHECK(job_.add(p_ + "claim/" + std::to_string(me_.rank) + ";", 1, &claim));
  CHORUS_CHECK(
      job_.set(p_ + "who/" + std::to_string(me_.rank) + "/" + std::to_string(claim) + ";", encodeJoinRecord(me_)));
  if (claim == 1) return ncclSuccess;
  JoinRecord first;
  CHORUS_CHECK(record(me_.rank, &first));
  *conflict = "rank " + std::to_string(me_.rank) + " is claimed by two processes: " + first.who() + " and " + me_.who();
  return ncclSuccess;
}

ncclResult_t Join::checkSize(std::string* conflict) {
  int64_t order = 0;
  CHORUS_CHECK(job_.add(p_ + "order", 1, &order));
  if (order == 1) return job_.set(p_ + "first;", encodeJoinRecord(me_));
  JoinRecord first;
  CHORUS_CHECK(read(p_ + "first;", &first));
  if (first.nranks != me_.nranks)
    *conflict = "rank " + std::to_string(me_.rank) + " (" + me_.who() + ") says nranks=" + std::to_string(me_.nranks) +
                ", rank " + std::to_string(first.rank) + " (" + first.who() +
                ") says nranks=" + std::to_string(first.nranks);
  return ncclSuccess;
}

// Every rank reports a conflict it found before it counts itself in, so the
// rank whose arrival completes the count has seen every earlier conflict.
ncclResult_t Join::verdict(std::string* conflict) {
  std::string found;
  CHORUS_CHECK(checkClaim(&found));
  if (found.empty()) CHORUS_CHECK(checkSize(&found));
  if (!found.empty()) CHORUS_CHECK(decide(found));
  int64_t joined = 0;
  CHORUS_CHECK(job_.add(p_ + "joined", 1, &joined));
  if (joined == me_.nranks) CHORUS_CHECK(decide(""));
  if (found.empty() && joined > me_.nranks)
    found = "rank " + std::to_string(me_.rank) + " (" + me_.who() +
            ") joined after all nranks=" + std::to_string(me_.nranks) + " ranks had";
  std::vector<std::vector<uint8_t>> vals;
  CHORUS_CHECK(job_.get({p_ + "verdict;"}, &vals, bound_));
  // A rank that found a conflict the verdict missed (it came too late) fails alone.
  conflict->assign(vals[0].begin(), vals[0].end());
  if (conflict->empty()) *conflict = found;
  return ncclSuccess;
}

std::vector<uint8_t> addrBytes(const SockAddr& a) {
  const auto* p = reinterpret_cast<const uint8_t*>(&a.storage);
  return std::vector<uint8_t>(p, p + a.len);
}

ncclResult_t addrFrom(const std::vector<uint8_t>& b, int from, SockAddr* out) {
  if (b.size() > sizeof(out->storage))
    return fail(ncclInternalError, "bootstrap: rank %d sent an address of %zu bytes", from, b.size());
  *out = SockAddr{};
  memcpy(&out->storage, b.data(), b.size());
  out->len = static_cast<socklen_t>(b.size());
  return ncclSuccess;
}

// Messages of the table exchange, through the mailboxes (mesh.h).
class TableExchange {
 public:
  TableExchange(Mesh& mesh, const std::string& prefix, int rank, int n, const WaitBound& bound)
      : mesh_(mesh), p_(prefix + ":join/"), rank_(rank), n_(n), bound_(bound) {}

  ncclResult_t send(const SockAddr& to, int toRank, const std::string& what, std::vector<uint8_t> data) {
    std::shared_ptr<Store> box;
    CHORUS_CHECK(mesh_.peer(to, toRank, bound_, &box));
    return box->set(p_ + what + "/from" + std::to_string(rank_) + ";", std::move(data));
  }
  ncclResult_t recv(int from, const std::string& what, std::vector<uint8_t>* data) {
    const std::string key = p_ + what + "/from" + std::to_string((from % n_ + n_) % n_) + ";";
    std::vector<std::vector<uint8_t>> vals;
    CHORUS_CHECK(mesh_.local().get({key}, &vals, bound_));
    *data = std::move(vals[0]);
    return mesh_.local().erasePrefix(key);
  }
  ncclResult_t recvAddr(int from, const std::string& what, SockAddr* out) {
    std::vector<uint8_t> b;
    CHORUS_CHECK(recv(from, what, &b));
    return addrFrom(b, from, out);
  }

 private:
  Mesh& mesh_;
  const std::string p_;
  const int rank_, n_;
  const WaitBound bound_;
};

// Pointer doubling from the ring neighbour (from the store): afterwards
// pred[k] is the mailbox of rank - 2^k for every 2^k < n, which is where
// Bruck's all-gather sends. Round k: tell succ[k] our pred[k] (its pred[k+1])
// and pred[k] our succ[k] (its succ[k+1]). 2*log2(n) small messages per rank.
ncclResult_t predecessors(TableExchange& x, int rank, int n, const SockAddr& self, const SockAddr& next,
                          std::vector<SockAddr>* pred) {
  std::vector<SockAddr> succ{next};
  pred->assign(1, SockAddr{});
  CHORUS_CHECK(x.send(next, (rank + 1) % n, "self", addrBytes(self)));
  CHORUS_CHECK(x.recvAddr(rank - 1, "self", &(*pred)[0]));
  for (int k = 0; (2 << k) < n; ++k) {
    const int dist = 1 << k;
    const std::string round = std::to_string(k);
    CHORUS_CHECK(x.send(succ[k], (rank + dist) % n, "pred" + round, addrBytes((*pred)[k])));
    CHORUS_CHECK(x.send((*pred)[k], (rank - dist + n) % n, "succ" + round, addrBytes(succ[k])));
    SockAddr p, s;
    CHORUS_CHECK(x.recvAddr(rank - dist, "pred" + round, &p));
    CHORUS_CHECK(x.recvAddr(rank + dist, "succ" + round, &s));
    pred->push_back(p);
    succ.push_back(s);
  }
  return ncclSuccess;
}

// The mailbox table: Bruck's all-gather of fixed-size address records.
ncclResult_t mailboxTable(Mesh& mesh, const std::string& prefix, int rank, const SockAddr& next, const WaitBound& bound,
                          std::vector<SockAddr>* boxes) {
  const int n = static_cast<int>(boxes->size());
  TableExchange x(mesh, prefix, rank, n, bound);
  std::vector<SockAddr> pred;
  CHORUS_CHECK(predecessors(x, rank, n, mesh.address(), next, &pred));
  const SockAddr mine = mesh.address();
  return bruckAllGather(
      rank, n, sizeof(SockAddr), &mine, boxes->data(),
      [&](int round, int to, std::vector<uint8_t> data) {
        return x.send(pred[static_cast<size_t>(round)], to, "table" + std::to_string(round), std::move(data));
      },
      [&](int round, int from, std::vector<uint8_t>* data) {
        return x.recv(from, "table" + std::to_string(round), data);
      });
}

}  // namespace

std::vector<uint8_t> encodeJoinRecord(const JoinRecord& r) {
  std::vector<uint8_t> out;
  putU32(&out, static_cast<uint32_t>(r.rank));
  putU32(&out, static_cast<uint32_t>(r.nranks));
  putU32(&out, static_cast<uint32_t>(r.pid));
  putU32(&out, static_cast<uint32_t>(r.mailbox.len));
  const auto* a = reinterpret_cast<const uint8_t*>(&r.mailbox.storage);
  out.insert(out.end(), a, a + r.mailbox.len);
  out.insert(out.end(), r.host.begin(), r.host.end());
  return out;
}

ncclResult_t decodeJoinRecord(const std::vector<uint8_t>& in, JoinRecord* r) {
  if (in.size() < 16) return fail(ncclInternalError, "bootstrap: a join record of %zu bytes is too short", in.size());
  r->rank = static_cast<int>(loadLittleEndian(in.data(), 4));
  r->nranks = static_cast<int>(loadLittleEndian(in.data() + 4, 4));
  r->pid = static_cast<int>(loadLittleEndian(in.data() + 8, 4));
  const auto len = static_cast<socklen_t>(loadLittleEndian(in.data() + 12, 4));
  if (len > sizeof(r->mailbox.storage) || in.size() < 16 + len)
    return fail(ncclInternalError, "bootstrap: a join record names an address of %u bytes", static_cast<unsigned>(len));
  memcpy(&r->mailbox.storage, in.data() + 16, len);
  r->mailbox.len = len;
  r->host.assign(in.begin() + 16 + len, in.end());
  return ncclSuccess;
}

ncclResult_t joinJob(Store& job, const std::string& prefix, int rank, int nranks, Mesh& mesh, const WaitBound& bound,
                     std::vector<SockAddr>* mailboxes) {
  JoinRecord me{rank, nranks, static_cast<int>(getpid()), thisHost(), mesh.address()};
  Join join(job, prefix, me, bound);
  std::string conflict;
  CHORUS_CHECK(join.verdict(&conflict));
  if (!conflict.empty()) return fail(ncclInvalidUsage, "ncclCommInitRank: bootstrap: %s", conflict.c_str());
  mailboxes->assign(static_cast<size_t>(nranks), SockAddr{});
  (*mailboxes)[rank] = mesh.address();
  if (nranks == 1) return ncclSuccess;
  JoinRecord next;
  CHORUS_CHECK(join.record((rank + 1) % nranks, &next));
  return mailboxTable(mesh, prefix, rank, next.mailbox, bound, mailboxes);
}

}  // namespace chorus
