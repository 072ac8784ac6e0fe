// A shared library that is not a network plugin (no chorusNetPlugin_v1).
extern "C" __attribute__((visibility("default"))) int chorusTestNotAPlugin() { return 42; }
