/* Data-parallel training with compressed gradients: logistic regression on
 * synthetic data, one rank per thread (host mode), plain SGD. Every step each
 * rank computes the gradient of its own shard, the ranks average the
 * gradients with chorusAllReduceEx (ncclAvg) over the chosen wire format,
 * optionally with error feedback (a residual per rank), and every rank takes
 * the same step. Rank 0 writes the loss over all the data after each step to
 * a CSV file ("step,loss").
 *
 *   dp_train [--ranks 8] [--steps 300] [--wire native|bf16|fp8|int8]
 *            [--feedback 0|1] [--lr 0.5] [--csv loss.csv]
 *
 * The features span three orders of magnitude (see makeShard) and the step
 * is scaled per feature (see the update), so the small features' gradients,
 * far below the largest element of their block, matter: quantized without
 * feedback they mostly round to zero and those weights stop learning; with
 * feedback what was dropped is carried to later steps and arrives.
 * examples/plot_convergence.py runs the three variants and plots them. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chorus/chorus.h"
#include "nccl.h"

enum { kFeatures = 1024, kSamplesPerRank = 512, kParams = kFeatures + 1 /* bias */ };

typedef struct {
  int nranks, steps, feedback;
  chorusWire_t wire;
  float lr;
  const char* csv;
  ncclUniqueId id;
  const float* truth; /* kFeatures weights of the model the labels come from */
} Setup;

typedef struct {
  const Setup* setup;
  int rank;
  int failed;
} RankArgs;

#define CHECK(call)                                                                                 \
  do {                                                                                              \
    ncclResult_t res_ = (call);                                                                     \
    if (res_ != ncclSuccess) {                                                                      \
      fprintf(stderr, "rank %d: %s failed: %s: %s\n", a->rank, #call, ncclGetErrorString(res_),     \
              ncclGetLastError(NULL));                                                              \
      a->failed = 1;                                                                                \
      return NULL;                                                                                  \
    }                                                                                               \
  } while (0)

/* A small deterministic generator (xorshift), uniform in [0, 1). */
static float uniform(unsigned long long* s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return (float)((*s >> 11) * (1.0 / 9007199254740992.0));
}

/* Feature j has scale 10^(-3 u_j), u_j spread over [0, 1) by a fixed permutation. */
static float featureScale(int j) { return powf(10.0f, -3.0f * (float)((j * 389) % kFeatures) / kFeatures); }

/* The rank's shard: x (samples x features) and labels y in {0, 1} drawn from
 * the logistic model with weights `truth`. */
static void makeShard(const float* truth, int rank, float* x, float* y) {
  unsigned long long s = 0x9E3779B97F4A7C15ull ^ (unsigned long long)(rank + 1) * 0xBF58476D1CE4E5B9ull;
  for (int i = 0; i < kSamplesPerRank; ++i) {
    double z = 0;
    for (int j = 0; j < kFeatures; ++j) {
      float v = (2.0f * uniform(&s) - 1.0f) * featureScale(j);
      x[(size_t)i * kFeatures + j] = v;
      z += (double)v * truth[j];
    }
    y[i] = uniform(&s) < 1.0 / (1.0 + exp(-z)) ? 1.0f : 0.0f;
  }
}

/* Mean cross-entropy of the shard (returned) and its gradient (kParams). */
static double lossAndGradient(const float* w, const float* x, const float* y, float* grad) {
  double loss = 0;
  memset(grad, 0, kParams * sizeof(float));
  for (int i = 0; i < kSamplesPerRank; ++i) {
    const float* xi = x + (size_t)i * kFeatures;
    double z = w[kFeatures];
    for (int j = 0; j < kFeatures; ++j) z += (double)w[j] * xi[j];
    const double p = 1.0 / (1.0 + exp(-z));
    loss += y[i] > 0.5f ? -log(p + 1e-12) : -log(1.0 - p + 1e-12);
    const float d = (float)(p - y[i]) / kSamplesPerRank;
    for (int j = 0; j < kFeatures; ++j) grad[j] += d * xi[j];
    grad[kFeatures] += d;
  }
  return loss / kSamplesPerRank;
}

static void* runRank(void* arg) {
  RankArgs* a = (RankArgs*)arg;
  const Setup* st = a->setup;
  float* x = malloc(sizeof(float) * kSamplesPerRank * kFeatures);
  float* y = malloc(sizeof(float) * kSamplesPerRank);
  float* w = calloc(kParams, sizeof(float));
  float* grad = malloc(sizeof(float) * kParams);
  float* residual = st->feedback ? calloc(kParams, sizeof(float)) : NULL;
  FILE* csv = NULL;
  ncclComm_t comm;
  makeShard(st->truth, a->rank, x, y);
  CHECK(ncclCommInitRank(&comm, st->nranks, st->id, a->rank));
  if (a->rank == 0 && st->csv) {
    csv = fopen(st->csv, "w");
    if (csv) fprintf(csv, "step,loss\n");
  }
  chorusReduceConfig_t config = CHORUS_REDUCE_CONFIG_INIT;
  config.wire = st->wire;
  config.residual = residual;
  for (int step = 0; step <= st->steps; ++step) {
    double loss = lossAndGradient(w, x, y, grad);
    /* The loss over all the data (plain, exact), logged before the step. */
    CHECK(ncclAllReduce(&loss, &loss, 1, ncclFloat64, ncclAvg, comm, NULL));
    if (csv) fprintf(csv, "%d,%.9g\n", step, loss);
    if (a->rank == 0 && (step % 50 == 0 || step == st->steps)) printf("step %4d  loss %.6f\n", step, loss);
    if (step == st->steps) break;
    CHECK(chorusAllReduceEx(grad, grad, kParams, ncclFloat32, ncclAvg, &config, comm, NULL));
    /* Per-feature step sizes 1 / E[x_j^2] = 3 / scale_j^2, as adaptive
     * optimizers take: the small features learn as fast as the large ones
     * (if their gradients arrive). */
    for (int j = 0; j < kFeatures; ++j) w[j] -= st->lr * grad[j] * 3.0f / (featureScale(j) * featureScale(j));
    w[kFeatures] -= st->lr * grad[kFeatures];
  }
  chorusCommStats_t stats;
  memset(&stats, 0, sizeof stats);
  stats.size = sizeof stats;
  if (chorusCommGetStats(comm, &stats) == ncclSuccess && a->rank == 0)
    printf("rank 0: %llu calls, %llu bytes sent in process\n", (unsigned long long)stats.ops,
           (unsigned long long)stats.bytesSent[chorusLinkInproc]);
  if (csv) fclose(csv);
  CHECK(ncclCommDestroy(comm));
  free(x), free(y), free(w), free(grad), free(residual);
  return NULL;
}

static int parseWire(const char* s, chorusWire_t* out) {
  const char* names[] = {"native", "bf16", "fp8", "int8"};
  for (int i = 0; i < 4; ++i)
    if (strcmp(s, names[i]) == 0) return *out = (chorusWire_t)i, 1;
  return 0;
}

static int parseArgs(int argc, char** argv, Setup* st) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const char *k = argv[i], *v = argv[i + 1];
    if (strcmp(k, "--ranks") == 0) st->nranks = atoi(v);
    else if (strcmp(k, "--steps") == 0) st->steps = atoi(v);
    else if (strcmp(k, "--feedback") == 0) st->feedback = atoi(v);
    else if (strcmp(k, "--lr") == 0) st->lr = (float)atof(v);
    else if (strcmp(k, "--csv") == 0) st->csv = v;
    else if (strcmp(k, "--wire") != 0 || !parseWire(v, &st->wire)) return 0;
  }
  return argc % 2 == 1 && st->nranks >= 1 && st->nranks <= 64 && st->steps >= 0;
}

int main(int argc, char** argv) {
  Setup st = {8, 300, 0, chorusWireNative, 0.5f, NULL, {{0}}, NULL};
  if (!parseArgs(argc, argv, &st)) {
    fprintf(stderr, "usage: %s [--ranks N] [--steps N] [--wire native|bf16|fp8|int8] [--feedback 0|1] [--lr X] "
                    "[--csv FILE]\n", argv[0]);
    return 2;
  }
  if (chorusSetDefaultMode(chorusModeHost) != ncclSuccess || ncclGetUniqueId(&st.id) != ncclSuccess) {
    fprintf(stderr, "init failed: %s\n", ncclGetLastError(NULL));
    return 1;
  }
  float* truth = malloc(sizeof(float) * kFeatures);
  unsigned long long s = 42;
  /* Weights large enough that the small-scale features still matter. */
  for (int j = 0; j < kFeatures; ++j) truth[j] = (2.0f * uniform(&s) - 1.0f) * 0.4f / sqrtf(featureScale(j));
  st.truth = truth;
  pthread_t threads[64];
  RankArgs args[64];
  for (int r = 0; r < st.nranks; ++r) {
    args[r] = (RankArgs){&st, r, 0};
    pthread_create(&threads[r], NULL, runRank, &args[r]);
  }
  int failed = 0;
  for (int r = 0; r < st.nranks; ++r) {
    pthread_join(threads[r], NULL);
    failed |= args[r].failed;
  }
  free(truth);
  return failed ? 1 : 0;
}
