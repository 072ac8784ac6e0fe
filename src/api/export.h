// How a C entry point leaves the library. The objects are compiled with hidden
// visibility, so only functions marked here (and matched by exports.map) are
// exported. Every ncclX also gets its profiling twin pncclX, which NCCL
// exports so that tools can interpose on ncclX and still reach the real call.
#pragma once

#define CHORUS_EXPORT extern "C" __attribute__((visibility("default")))

// Declares pnccl<name> as an alias of nccl<name> (must follow the definition in the same TU).
#define CHORUS_EXPORT_ALIAS(name) \
  extern "C" __attribute__((visibility("default"), alias(#name))) decltype(name) p##name;
