/* Prints the NCCL version the installed library reports. */
#include <nccl.h>
#include <chorus/chorus.h>
#include <stdio.h>

int main(void) {
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess) return 1;
  printf("version=%d\n", version);
  return 0;
}
