#include "plan/wire_chain_routes.h"

#include <algorithm>
#include <array>

namespace chorus::wirechain {
namespace {

// Every host its own link; the result from the owner's host to host 0, then
// on from host to host up to H - 2.
Route relayChain(int H) {
  Route r;
  r.absorb.resize(static_cast<size_t>(H));
  r.parent.resize(static_cast<size_t>(H));
  for (int h = 0; h < H; ++h) {
    r.absorb[h] = h;
    r.parent[h] = h == H - 1 ? -1 : h == 0 ? H - 1 : h - 1;
  }
  return r;
}

// Every host its own link; the result from the owner's host to every host.
Route ownerStar(int H) {
  Route r = relayChain(H);
  for (int h = 0; h < H - 1; ++h) r.parent[h] = H - 1;
  return r;
}

// Host 0's link absorbs host 1; the result to host 0, and from there to the others.
Route firstAbsorbs(int H) {
  Route r = relayChain(H);
  r.absorb[1] = 0;
  for (int h = 1; h < H - 1; ++h) r.parent[h] = 0;
  return r;
}

// The owner absorbs host H - 2; the result to host 1, then on from host to
// host up to H - 2, and from there to host 0.
Route lastAbsorbs(int H) {
  Route r = relayChain(H);
  r.absorb[H - 2] = H - 1;
  r.parent[1] = H - 1;
  for (int h = 2; h < H - 1; ++h) r.parent[h] = h - 1;
  r.parent[0] = H - 2;
  return r;
}

double busiest(const std::vector<double>& in, const std::vector<double>& out) {
  return std::max(*std::max_element(in.begin(), in.end()), *std::max_element(out.begin(), out.end()));
}

}  // namespace

int runStart(const Route& r, int link) {
  int h = link;
  while (h > 0 && r.absorb[h - 1] == link) --h;
  return h;
}

int previousLink(const Route& r, int link) {
  const int start = runStart(r, link);
  return start == 0 ? -1 : r.absorb[start - 1];
}

int nextLink(const Route& r, int link) {
  int h = link;
  const int H = static_cast<int>(r.absorb.size());
  while (h + 1 < H && r.absorb[h + 1] == link) ++h;
  return h + 1 < H ? r.absorb[h + 1] : -1;
}

void routeLoads(const Route& r, int G, const ElemBytes& bytes, double weight, std::vector<double>* in,
                std::vector<double>* out) {
  const int H = static_cast<int>(r.absorb.size());
  for (int h = 0; h < H; ++h) {
    const int link = r.absorb[h];
    if (link != h) {  // every rank of h sends its values to that link
      (*out)[h] += weight * G * bytes.value;
      (*in)[link] += weight * G * bytes.value;
    }
    if (link == h && nextLink(r, h) >= 0) {
      (*out)[h] += weight * bytes.partial;
      (*in)[nextLink(r, h)] += weight * bytes.partial;
    }
    if (r.parent[h] >= 0) {
      (*out)[r.parent[h]] += weight * bytes.result;
      (*in)[h] += weight * bytes.result;
    }
  }
}

std::vector<Share> chooseRoutes(int H, int G, const ElemBytes& bytes) {
  std::vector<Route> routes{relayChain(H), ownerStar(H)};
  if (H >= 3) {
    routes.push_back(firstAbsorbs(H));
    routes.push_back(lastAbsorbs(H));
  }
  const int n = static_cast<int>(routes.size());
  std::array<int, 4> best{12, 0, 0, 0}, w{};
  double bestLoad = 0;
  int bestUsed = 5;
  // Every split of 12 twelfths over the routes.
  for (w[0] = 0; w[0] <= 12; ++w[0])
    for (w[1] = 0; w[1] <= 12 - w[0]; ++w[1])
      for (w[2] = 0; w[2] <= (n > 2 ? 12 - w[0] - w[1] : 0); ++w[2]) {
        w[3] = n > 3 ? 12 - w[0] - w[1] - w[2] : 0;
        if (w[0] + w[1] + w[2] + w[3] != 12) continue;
        std::vector<double> in(static_cast<size_t>(H), 0.0), out(static_cast<size_t>(H), 0.0);
        int used = 0;
        for (int k = 0; k < n; ++k)
          if (w[k] > 0) {
            routeLoads(routes[k], G, bytes, w[k] / 12.0, &in, &out);
            ++used;
          }
        const double load = busiest(in, out);
        if (bestUsed == 5 || load < bestLoad - 1e-9 || (load < bestLoad + 1e-9 && used < bestUsed)) {
          best = w;
          bestLoad = load;
          bestUsed = used;
        }
      }
  std::vector<Share> mix;
  for (int k = 0; k < n; ++k)
    if (best[k] > 0) mix.push_back(Share{routes[k], best[k]});
  return mix;
}

}  // namespace chorus::wirechain
