/* A program built the way NCCL users build theirs: against NVIDIA's nccl.h and
 * linked with -lnccl from the CUDA toolkit. The symbol test runs it with
 * LD_LIBRARY_PATH pointing at our build to prove that Chorus's libnccl.so.2
 * satisfies it unchanged. It prints what it sees; the test judges. */
#include <nccl.h>
#include <stdio.h>
#include <string.h>

/* The file the loader mapped for libnccl, from /proc/self/maps. */
static void printLoadedNccl(void) {
  FILE* maps = fopen("/proc/self/maps", "r");
  char line[4096];
  if (maps == NULL) return;
  while (fgets(line, sizeof(line), maps) != NULL) {
    char* path = strchr(line, '/');
    if (path != NULL && strstr(path, "/libnccl.so") != NULL) {
      printf("library=%s", path); /* path keeps its newline */
      break;
    }
  }
  fclose(maps);
}

int main(void) {
  int version = 0;
  ncclResult_t res = ncclGetVersion(&version);
  printf("result=%d\n", (int)res);
  printf("version=%d\n", version);
  printf("error=%s\n", ncclGetErrorString(ncclInvalidUsage));
  printLoadedNccl();
  return res == ncclSuccess ? 0 : 1;
}
