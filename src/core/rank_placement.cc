#include "core/rank_placement.h"

namespace chorus {

RankPlacement placeRank(const std::vector<PeerInfo>& peers, const PeerInfo& mine) {
  RankPlacement p{0, 0, 0};
  for (const PeerInfo& peer : peers) {
    if (peer.hostHash == mine.hostHash) {
      if (peer.rank < mine.rank) ++p.localRank;
      ++p.localNRanks;
    }
    if (peer.machineHash == mine.machineHash) ++p.machineNRanks;
  }
  return p;
}

}  // namespace chorus
