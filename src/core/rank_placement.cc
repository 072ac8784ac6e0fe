#include "core/rank_placement.h"

#include <algorithm>
#include <unordered_map>

namespace chorus {

RankPlacement placeRank(const std::vector<PeerInfo>& peers, const PeerInfo& mine) {
  RankPlacement p{0, 0, 0, 0};
  std::unordered_map<uint64_t, int> ranksOnHost;
  for (const PeerInfo& peer : peers) {
    p.mostHostNRanks = std::max(p.mostHostNRanks, ++ranksOnHost[peer.hostHash]);
    if (peer.hostHash == mine.hostHash) {
      if (peer.rank < mine.rank) ++p.localRank;
      ++p.localNRanks;
    }
    if (peer.machineHash == mine.machineHash) ++p.machineNRanks;
  }
  return p;
}

}  // namespace chorus
