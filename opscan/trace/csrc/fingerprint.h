// What the native record engine's host half (record_hook.cpp) and its kernel (fingerprint.cu) share.
#pragma once
#include <stdint.h>

enum { OPSCAN_NOT_FLOAT = 0, OPSCAN_F32 = 1, OPSCAN_F16 = 2, OPSCAN_BF16 = 3, OPSCAN_F64 = 4 };

// One tensor to fingerprint: its dense memory span and how to read it.
struct OpscanJob {
  uint64_t ptr;    // first element
  int64_t numel;   // elements of `width` bytes (a complex element counts as two)
  int32_t width;   // 1, 2, 4 or 8
  int32_t fkind;   // OPSCAN_* above: how an element reads as a float, for the norm
  int64_t chunk0;  // this job's first chunk, counted from the launch's first
};

// One launch: up to OPSCAN_BATCH jobs, passed by value as the kernel's parameter (no upload).
#define OPSCAN_BATCH 64
struct OpscanBatch {
  int32_t n;        // jobs
  int32_t pad;
  int64_t chunks;   // chunks in all
  OpscanJob jobs[OPSCAN_BATCH];
};

// One chunk's partial results; the host folds a job's chunks in order.
struct OpscanChunk {
  uint64_t x;    // xor of the elements as 64-bit integers
  uint64_t s;    // their sum, wrapping at 2**64
  double q;      // the sum of their squares (floating-point jobs)
  double first;  // the first element's value (chunk 0 only)
};

// Reduce the batch's chunks into out[0..batch.chunks); a CUDA error code, 0 for none.
int opscan_launch_fingerprints(const OpscanBatch& batch, OpscanChunk* out, int64_t chunk_elems, void* stream);
