// One launch fingerprints a batch of tensors on the GPU: the native record engine's device half.
//
// Each tensor is a job: a pointer to its dense memory span, its element count and width, and how
// to read an element as a float (or not at all). The jobs travel as the kernel's parameter
// (OpscanBatch, in the constant bank: nothing is uploaded per launch). Each job is cut into chunks
// of chunk_elems elements; block b of the launch reduces chunk b and writes four 8-byte words to
// its own result slot: the xor of the elements as 64-bit integers (1-byte elements zero extended,
// wider ones sign extended), their wrapping 64-bit sum, the sum of their squares as doubles
// (floating-point jobs), and the first element's value (chunk 0 only). The host folds a job's
// chunks in order (record_hook.cpp). Each thread visits fixed elements and the block reduces in a
// fixed tree, so the results are the same in every run: no atomics.
//
// The fingerprint is a function of the multiset of element values, so a dense tensor in any stride
// order (channels-last, a transpose's output) is read as its memory span, in memory order.

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

#include "fingerprint.h"

namespace {

constexpr int kThreads = 256;
typedef unsigned long long u64;  // the shuffles' own 64-bit type

template <int W> struct Int;
template <> struct Int<1> { typedef uint8_t T; };
template <> struct Int<2> { typedef int16_t T; };
template <> struct Int<4> { typedef int32_t T; };
template <> struct Int<8> { typedef long long T; };

template <int F> __device__ __forceinline__ double as_float(long long v);
template <> __device__ __forceinline__ double as_float<OPSCAN_NOT_FLOAT>(long long) { return 0.0; }
template <> __device__ __forceinline__ double as_float<OPSCAN_F32>(long long v) { return (double)__int_as_float((int)v); }
template <> __device__ __forceinline__ double as_float<OPSCAN_F16>(long long v) {
  return (double)__half2float(__ushort_as_half((unsigned short)(v & 0xFFFF)));
}
template <> __device__ __forceinline__ double as_float<OPSCAN_BF16>(long long v) {
  return (double)__bfloat162float(__ushort_as_bfloat16((unsigned short)(v & 0xFFFF)));
}
template <> __device__ __forceinline__ double as_float<OPSCAN_F64>(long long v) { return __longlong_as_double(v); }

// This thread's share of [start, end): one element type per instance, loads unrolled.
template <int W, int F>
__device__ __forceinline__ void fold(const void* base, long long start, long long end, u64& x, u64& s, double& q) {
  typedef typename Int<W>::T T;
  const T* p = (const T*)base;
#pragma unroll 8
  for (long long i = start + threadIdx.x; i < end; i += kThreads) {
    const long long v = (long long)p[i];
    x ^= (u64)v;
    s += (u64)v;
    if (F) {
      const double f = as_float<F>(v);
      q += f * f;
    }
  }
}

template <int F>
__device__ __forceinline__ double first_value(const void* base, int width) {
  long long v;
  switch (width) {
    case 1: v = ((const uint8_t*)base)[0]; break;
    case 2: v = ((const int16_t*)base)[0]; break;
    case 4: v = ((const int32_t*)base)[0]; break;
    default: v = ((const long long*)base)[0]; break;
  }
  return F ? as_float<F>(v) : (double)v;
}

__global__ void fingerprint_chunks(const __grid_constant__ OpscanBatch batch, OpscanChunk* out, long long chunk_elems) {
  const long long c = blockIdx.x;
  // The job holding chunk c: the last whose first chunk is <= c (the same for the whole block).
  int lo = 0, hi = batch.n - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (batch.jobs[mid].chunk0 <= c) lo = mid;
    else hi = mid - 1;
  }
  const OpscanJob& job = batch.jobs[lo];
  const long long start = (c - job.chunk0) * chunk_elems;
  const long long end = start + chunk_elems < job.numel ? start + chunk_elems : job.numel;
  const void* base = (const void*)job.ptr;
  u64 x = 0, s = 0;
  double q = 0.0;
  switch (job.width * 8 + job.fkind) {
    case 1 * 8 + OPSCAN_NOT_FLOAT: fold<1, OPSCAN_NOT_FLOAT>(base, start, end, x, s, q); break;
    case 2 * 8 + OPSCAN_NOT_FLOAT: fold<2, OPSCAN_NOT_FLOAT>(base, start, end, x, s, q); break;
    case 2 * 8 + OPSCAN_F16: fold<2, OPSCAN_F16>(base, start, end, x, s, q); break;
    case 2 * 8 + OPSCAN_BF16: fold<2, OPSCAN_BF16>(base, start, end, x, s, q); break;
    case 4 * 8 + OPSCAN_NOT_FLOAT: fold<4, OPSCAN_NOT_FLOAT>(base, start, end, x, s, q); break;
    case 4 * 8 + OPSCAN_F32: fold<4, OPSCAN_F32>(base, start, end, x, s, q); break;
    case 8 * 8 + OPSCAN_NOT_FLOAT: fold<8, OPSCAN_NOT_FLOAT>(base, start, end, x, s, q); break;
    case 8 * 8 + OPSCAN_F64: fold<8, OPSCAN_F64>(base, start, end, x, s, q); break;
    default: break;  // the host sends no other kind
  }
  // Warp tree, then one warp over the warps' results: the same order every run.
  for (int off = 16; off > 0; off >>= 1) {
    x ^= __shfl_down_sync(0xffffffffu, x, off);
    s += __shfl_down_sync(0xffffffffu, s, off);
    q += __shfl_down_sync(0xffffffffu, q, off);
  }
  __shared__ u64 xs[kThreads / 32], ss[kThreads / 32];
  __shared__ double qs[kThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    xs[warp] = x;
    ss[warp] = s;
    qs[warp] = q;
  }
  __syncthreads();
  if (warp == 0) {
    x = lane < kThreads / 32 ? xs[lane] : 0;
    s = lane < kThreads / 32 ? ss[lane] : 0;
    q = lane < kThreads / 32 ? qs[lane] : 0.0;
    for (int off = 16; off > 0; off >>= 1) {
      x ^= __shfl_down_sync(0xffffffffu, x, off);
      s += __shfl_down_sync(0xffffffffu, s, off);
      q += __shfl_down_sync(0xffffffffu, q, off);
    }
    if (lane == 0) {
      OpscanChunk r;
      r.x = x;
      r.s = s;
      r.q = q;
      r.first = 0.0;
      if (start == 0 && job.numel > 0) {
        switch (job.fkind) {
          case OPSCAN_F32: r.first = first_value<OPSCAN_F32>(base, job.width); break;
          case OPSCAN_F16: r.first = first_value<OPSCAN_F16>(base, job.width); break;
          case OPSCAN_BF16: r.first = first_value<OPSCAN_BF16>(base, job.width); break;
          case OPSCAN_F64: r.first = first_value<OPSCAN_F64>(base, job.width); break;
          default: r.first = first_value<OPSCAN_NOT_FLOAT>(base, job.width); break;
        }
      }
      out[c] = r;
    }
  }
}

}  // namespace

int opscan_launch_fingerprints(const OpscanBatch& batch, OpscanChunk* out, int64_t chunk_elems, void* stream) {
  if (batch.chunks <= 0 || batch.n <= 0) return 0;
  fingerprint_chunks<<<(unsigned)batch.chunks, kThreads, 0, (cudaStream_t)stream>>>(batch, out, (long long)chunk_elems);
  return (int)cudaGetLastError();
}
