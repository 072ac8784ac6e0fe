#include "enqueue/task.h"

namespace chorus {

size_t taskBytes(const Task& t, int nranks) {
  const size_t bytes = t.count * typeSize(t.dtype);
  switch (t.type) {
    case CollType::AllGather:
    case CollType::ReduceScatter:
    case CollType::AlltoAll:
    case CollType::Gather:
    case CollType::Scatter:
      return bytes * static_cast<size_t>(nranks);
    default:
      return bytes;
  }
}

}  // namespace chorus
