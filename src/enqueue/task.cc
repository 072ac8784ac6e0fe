#include "enqueue/task.h"

namespace chorus {

const char* collName(CollType t) {
  switch (t) {
    case CollType::AllReduce: return "AllReduce";
    case CollType::Broadcast: return "Broadcast";
    case CollType::Reduce: return "Reduce";
    case CollType::AllGather: return "AllGather";
    case CollType::ReduceScatter: return "ReduceScatter";
    case CollType::AlltoAll: return "AlltoAll";
    case CollType::Gather: return "Gather";
    case CollType::Scatter: return "Scatter";
    case CollType::Send: return "Send";
    case CollType::Recv: return "Recv";
  }
  return "?";
}

size_t taskBytes(const Task& t, int nranks) {
  const size_t bytes = t.count * typeSize(t.dtype);
  switch (t.type) {
    case CollType::AllGather:
    case CollType::ReduceScatter:
    case CollType::AlltoAll:
    case CollType::Gather:
    case CollType::Scatter: return bytes * static_cast<size_t>(nranks);
    default: return bytes;
  }
}

}  // namespace chorus
