// The routes of deterministic mode's chain across hosts (plan_wire_chain.cc):
// which host combines whose values, and how the result comes back, for each
// share of a shard, chosen so that no host's link carries more than it must.
//
// A route through H hosts (host k holding ranks kG .. kG + G - 1):
//   - absorb[h]: the host whose chain link combines host h's values. A link
//     (absorb[h] == h) combines the previous link's partial with the values
//     of the hosts it absorbs, a contiguous run of hosts around its own, in
//     rank order. The last host is always a link: its link is the owner.
//   - parent[h]: the host the result reaches host h from (the owner's host
//     has none).
// Absorbing a neighbour's values costs G values on the wire where passing a
// partial costs one, but it spares the neighbour the partial: the hosts in
// the middle of the chain take a partial in and the result in, the two ends
// only one of them, so letting the ends absorb their neighbours' values for
// a share of the data evens out the links. A mix is a list of routes with
// the share (in twelfths) of every shard each one takes.
#pragma once

#include <cstdint>
#include <vector>

namespace chorus::wirechain {

struct Route {
  std::vector<int> absorb;
  std::vector<int> parent;  // -1 for the owner's host
};

struct Share {
  Route route;
  int twelfths = 0;
};

// Bytes per element of what travels: a rank's value, a partial (compute
// type) and the result.
struct ElemBytes {
  uint32_t value = 4, partial = 4, result = 4;
};

// The routes to mix for H hosts of G ranks (H, G > 1), with their shares:
// the mix whose busiest link direction carries the least (network bytes per
// element of a shard, from routeLoads), fewer routes on a tie.
std::vector<Share> chooseRoutes(int H, int G, const ElemBytes& bytes);

// Network bytes per element of a shard that every host sends (out) and
// receives (in) under one route, added with the given weight.
void routeLoads(const Route& r, int G, const ElemBytes& bytes, double weight, std::vector<double>* in,
                std::vector<double>* out);

// The first host of the run a link absorbs, and the link before / after it
// (-1 where there is none).
int runStart(const Route& r, int link);
int previousLink(const Route& r, int link);
int nextLink(const Route& r, int link);

}  // namespace chorus::wirechain
