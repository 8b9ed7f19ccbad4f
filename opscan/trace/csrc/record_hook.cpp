// The native record engine: opscan record's per-op work in C++, through a RecordFunction callback.
//
// A Python TorchDispatchMode pays tens of microseconds of host time per op to reach Python and
// back; RecordFunction callbacks run inside the dispatcher for every op (aten/src/ATen/core/dispatch/
// Dispatcher.h, callWithDispatchKeySlowPath, torch 2.11 and 2.14). This file is opscan/trace/record.py's
// RecordMode done there:
//
//  * The ops recorded are the outermost dispatcher calls: those a program makes (aten::conv2d, not
//    the aten::convolution it decomposes into), and in backward those an autograd node's apply makes.
//    Nested calls are only looked at for random draws (aten::dropout draws in aten::native_dropout).
//  * Where: a forward op's user line is the first Python frame outside torch and opscan (the classifier
//    is opscan.trace.sourcemap's), its module the innermost nn.Module whose forward is running (a
//    Python list the module hooks keep). A backward op gets the forward site of the autograd node
//    running it, by the node's sequence number (the profiler's forward-backward link).
//  * Fingerprints (opscan/trace/fingerprint.py's scheme, computed the same way): a tensor an op
//    returns or writes is queued as a job holding its storage, and a batch of jobs becomes one kernel
//    launch (fingerprint.cu): before an op writes a queued tensor, when an input was fingerprinted
//    just now, and at the end of the step, which copies the step's results to the host once.
//    CPU tensors are reduced at once on the host.
//  * Inputs an earlier op produced, unchanged since (same TensorImpl, same version), reuse its handle.
//
// The callback is thread-local (at::addThreadLocalCallback): it follows the recording thread into the
// autograd engine's device threads (ThreadLocalState) and stays out of a DataLoader's pin-memory thread.

#include <torch/extension.h>
#include <ATen/record_function.h>
#include <ATen/SequenceNumber.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/Generator.h>
#ifndef OPSCAN_NO_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#endif
#include <Python.h>
#include <frameobject.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "fingerprint.h"

namespace py = pybind11;

namespace {

constexpr int64_t kChunk = 1 << 15;  // elements per kernel block
constexpr int64_t kMaxPendingBytes = (int64_t)1 << 30;  // queued tensors' memory before a launch is forced
constexpr int64_t kMaxPendingJobs = 4096;
constexpr int64_t kNull = -1;
constexpr int64_t kEvaluating = -2;  // on the node stack: inside the engine's evaluate_function, node not seen yet
constexpr char kEvaluate[] = "autograd::engine::evaluate_function: ";
enum Phase : int8_t { FORWARD = 0, BACKWARD = 1, OPTIMIZER = 2 };
enum Role : uint8_t { READ = 1, WRITTEN = 2 };

uint64_t fmix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDULL;
  x ^= x >> 33;
  x *= 0xC4CEB9FE1A85EC53ULL;
  x ^= x >> 33;
  return x;
}

// ------------------------------------------------------------------ what a schema says, once per op

struct OpMeta {
  std::string name, overload;  // to check a cache hit by pointer
  int32_t oid = -1;            // its number in the record's op table (-1: not recorded)
  std::string jname;           // "aten.add.Tensor"
  std::vector<uint8_t> roles;  // per schema argument: READ and/or WRITTEN
  bool writes = false, view = false, uninit = false, random = false, loss_seed = false, known = false;
  int stats_flag = -1;                // batch norm's `training` (record.STATS_WRITERS): set, it writes
  std::vector<int64_t> stats_writes;  // the running statistics, which its schema does not mark
};

struct Handle {
  int8_t kind;   // 0 null, 1 job, 2 derived, 3 empty tensor
  int8_t fkind;  // for kind 3: whether it is floating point (norm 0.0)
  int64_t job;   // kind 1: index into the step's jobs
  int64_t base;  // kind 2: the base handle
  uint64_t salt; // kind 2: geometry salt
};

struct Job {
  OpscanJob meta;
  c10::Storage keep;  // alive until the launch is queued
  int device;         // -1 CPU
  int64_t nchunks;
  uint64_t x = 0, s = 0;
  double q = 0.0, first = 0.0;
  bool valid = true;  // false: its results never came back
};

struct Tracked {
  c10::weak_intrusive_ptr<c10::TensorImpl> weak;
  int64_t version;
  int64_t handle;
};

struct OpRec {
  int32_t oid, sid, mid;
  int8_t phase;
  std::vector<int64_t> ins, outs;
  int64_t norm;
  PyObject* rng;  // a dict, owned, or nullptr
};

struct Ctx : public at::ObserverContext {
  int8_t range = 0;  // 0 an op; 1 an autograd node (BACKWARD_FUNCTION); 2 the engine's evaluate_function range
  OpMeta* meta = nullptr;
  bool skip = false;
  int8_t phase = FORWARD;
  int32_t sid = 0, mid = 0;
  int64_t seq0 = -1;
  std::vector<int64_t> ins;
  std::string metakey;
  int64_t base_handle = kNull;  // first input, for views
  at::Tensor base;
  std::vector<at::Tensor> written;
  PyObject* rng = nullptr;
  bool loss = false;
  bool rf_enabled = true;  // RecordFunction's thread-local switch before this op turned it off
};

struct DeviceState {
  std::vector<int64_t> pending;               // job indexes not launched yet
  int64_t pending_bytes = 0;                  // the memory they hold alive
  std::unordered_set<const void*> storages;   // their storages' data pointers
  at::Tensor results;                         // OpscanChunk slots of the step, on the device
  int64_t chunks = 0;                         // used
};

struct SiteKey {
  PyObject* code;
  int line;
  PyObject* module;
  bool operator==(const SiteKey& o) const { return code == o.code && line == o.line && module == o.module; }
};
struct SiteHash {
  size_t operator()(const SiteKey& k) const {
    return std::hash<void*>()(k.code) ^ (std::hash<int>()(k.line) * 31) ^ (std::hash<void*>()(k.module) * 131);
  }
};

struct State {
  std::recursive_mutex mu;
  bool active = false;
  at::CallbackHandle handle = 0;
  bool xor_only = false;
  int internal_mask = 1;
  py::object classify, rng_state, module_stack;
  std::unordered_set<std::string> random_packets;
  std::unordered_map<std::string, std::vector<int64_t>> stats_writers;  // packet -> [flag, positions...]
  std::vector<uint64_t> dtype_codes;  // by ScalarType
  std::vector<std::string> dtype_names;
  std::unordered_map<const c10::TensorImpl*, int> params;  // parameter -> its index

  std::unordered_map<const char*, OpMeta*> metas;  // by the schema's name pointer
  std::unordered_map<std::string, OpMeta*> metas_by_name;  // where that pointer is not stable (a named range)
  std::vector<OpMeta*> all_metas;
  int32_t next_oid = 0;
  std::vector<std::pair<int32_t, std::string>> new_ops;

  std::unordered_map<SiteKey, int32_t, SiteHash> sites;
  std::vector<std::tuple<int32_t, PyObject*, int, PyObject*>> new_sites;  // borrowed: `kept` owns them
  std::vector<PyObject*> kept;
  std::unordered_map<PyObject*, int> kinds;  // code object -> classifier's kind
  std::unordered_map<std::string, int32_t> meta_ids;
  std::vector<std::pair<int32_t, std::string>> new_metas;  // raw keys, decoded in end_step
  std::unordered_map<int64_t, int32_t> node_sites;
  int64_t last_seq = -1;

  std::unordered_map<const c10::TensorImpl*, Tracked> track;
  std::unordered_set<const void*> uninitialised;
  std::vector<Handle> handles;  // this step's, from `base`
  int64_t base = 0;
  std::unordered_map<int64_t, std::pair<uint64_t, double>> kept_fps;  // earlier steps' live handles
  std::vector<Job> jobs;
  std::vector<DeviceState> devices;  // by CUDA index
  std::vector<OpRec> ops;
  std::vector<std::pair<int64_t, int>> new_param_handles;
  int64_t loss = kNull;
  std::atomic<int> stepping{0};
  std::atomic<bool> paused{false};
  int64_t unfingerprinted = 0, internal_errors = 0;
  std::string first_internal, first_failure;
};

State* S = nullptr;
thread_local int in_hook = 0;           // our own ATen and Python calls are not recorded
thread_local Ctx* open_op = nullptr;    // the outermost op running on this thread
thread_local std::vector<int64_t> nodes;  // sequence numbers of the autograd nodes running on this thread

struct HookGuard {
  HookGuard() { ++in_hook; }
  ~HookGuard() { --in_hook; }
};

void internal_error(const char* what) {
  S->internal_errors++;
  if (S->first_internal.empty()) S->first_internal = what;
}

// ------------------------------------------------------------------ op metadata

OpMeta* meta_for(const at::RecordFunction& fn) {
  const char* name = fn.name();
  const char* overload = fn.overload_name();
  auto it = S->metas.find(name);
  if (it != S->metas.end() && it->second->name == name && it->second->overload == overload) return it->second;
  std::string key = std::string(name) + "." + (overload ? overload : "");
  auto byname = S->metas_by_name.find(key);
  if (byname != S->metas_by_name.end()) {
    S->metas[name] = byname->second;
    return byname->second;
  }
  auto* m = new OpMeta();
  m->name = name;
  m->overload = overload ? overload : "";
  S->all_metas.push_back(m);
  S->metas[name] = m;
  S->metas_by_name[key] = m;
  auto op = c10::Dispatcher::singleton().findSchema(c10::OperatorName(m->name, m->overload));
  if (!op.has_value() || !op->hasSchema()) return m;  // a RECORD_FUNCTION range, not an op: not recorded
  m->known = true;
  const auto& schema = op->schema();
  std::string full = m->name;
  auto sep = full.find("::");
  std::string ns = sep == std::string::npos ? "" : full.substr(0, sep);
  std::string base = sep == std::string::npos ? full : full.substr(sep + 2);
  std::string packet = ns + "." + base;
  m->jname = "\"" + packet + "." + (m->overload.empty() ? "default" : m->overload) + "\"";
  m->uninit = packet == "aten.empty" || packet == "aten.empty_like" || packet == "aten.empty_strided" ||
              packet == "aten.new_empty" || packet == "aten.new_empty_strided" || packet == "aten.empty_permuted";
  m->loss_seed = packet == "aten.ones_like" && m->overload.empty();
  m->random = S->random_packets.count(packet) > 0;
  const auto& args = schema.arguments();
  m->roles.resize(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    bool written = a.alias_info() && a.alias_info()->isWrite();
    uint8_t role = 0;
    if (written) role |= WRITTEN;
    if (!(written && a.kwarg_only())) role |= READ;
    m->roles[i] = role;
    if (written) m->writes = true;
    if (a.type()->str().find("Generator") != std::string::npos) m->random = true;
  }
  auto stats = S->stats_writers.find(packet);
  if (stats != S->stats_writers.end() && !m->writes && !stats->second.empty()) {
    m->stats_flag = (int)stats->second[0];
    m->stats_writes.assign(stats->second.begin() + 1, stats->second.end());
    m->writes = true;
  }
  const auto& rets = schema.returns();
  bool all_alias = !rets.empty();
  for (const auto& r : rets)
    if (!r.alias_info() || r.alias_info()->isWrite()) all_alias = false;
  m->view = all_alias && !m->writes;
  m->oid = S->next_oid++;
  S->new_ops.emplace_back(m->oid, m->jname);
  return m;
}

// ------------------------------------------------------------------ where (needs the GIL)

int kind_of(PyObject* code) {
  auto it = S->kinds.find(code);
  if (it != S->kinds.end()) return it->second;
  int kind = 0;
  {
    HookGuard g;
    py::object r = S->classify(py::handle(code));
    kind = r.cast<int>();
  }
  Py_INCREF(code);
  S->kept.push_back(code);
  S->kinds[code] = kind;
  return kind;
}

int32_t site_id(PyObject* code, int line, PyObject* module) {
  SiteKey key{code, line, module};
  auto it = S->sites.find(key);
  if (it != S->sites.end()) return it->second;
  int32_t sid = (int32_t)S->sites.size();
  S->sites.emplace(key, sid);
  if (code) {
    Py_INCREF(code);
    S->kept.push_back(code);
  }
  if (module) {
    Py_INCREF(module);
    S->kept.push_back(module);
  }
  S->new_sites.emplace_back(sid, code, line, module);
  return sid;
}

// The user's line and module for an op called now; also whether autograd's _make_grads called it.
int32_t locate(bool* from_make_grads) {
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed
  Py_XINCREF(frame);
  PyObject* user = nullptr;
  int line = 0;
  bool first = true;
  while (frame) {
    PyCodeObject* code = PyFrame_GetCode(frame);  // new reference
    if (first && from_make_grads) {
      PyObject* name = PyObject_GetAttrString((PyObject*)code, "co_name");
      if (name) {
        *from_make_grads = PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, "_make_grads") == 0;
        Py_DECREF(name);
      } else {
        PyErr_Clear();
      }
    }
    first = false;
    int kind = kind_of((PyObject*)code);
    if (!(kind & S->internal_mask)) {
      user = (PyObject*)code;
      line = PyFrame_GetLineNumber(frame);
      Py_DECREF(code);
      Py_DECREF(frame);
      break;
    }
    Py_DECREF(code);
    PyFrameObject* back = PyFrame_GetBack(frame);  // new reference
    Py_DECREF(frame);
    frame = back;
  }
  PyObject* module = nullptr;
  PyObject* stack = S->module_stack.ptr();
  Py_ssize_t n = PyList_GET_SIZE(stack);
  if (n > 0) module = PyList_GET_ITEM(stack, n - 1);
  if (!user) line = 0;
  return site_id(user, line, module);
}

// ------------------------------------------------------------------ fingerprints

int fkind_of(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float: case c10::ScalarType::ComplexFloat: return OPSCAN_F32;
    case c10::ScalarType::Half: case c10::ScalarType::ComplexHalf: return OPSCAN_F16;
    case c10::ScalarType::BFloat16: return OPSCAN_BF16;
    case c10::ScalarType::Double: case c10::ScalarType::ComplexDouble: return OPSCAN_F64;
    default: return OPSCAN_NOT_FLOAT;
  }
}

bool is_float_type(c10::ScalarType t) {
  return t == c10::ScalarType::Float || t == c10::ScalarType::Half || t == c10::ScalarType::BFloat16 ||
         t == c10::ScalarType::Double;
}

int64_t new_handle(const Handle& h) {
  S->handles.push_back(h);
  return S->base + (int64_t)S->handles.size() - 1;
}

template <class T>
void fold_ints(const T* p, int64_t n, uint64_t* x, uint64_t* s) {
  uint64_t a = 0, b = 0;  // one type per loop: the compiler vectorises it
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t v = (uint64_t)(int64_t)p[i];
    a ^= v;
    b += v;
  }
  *x = a;
  *s = b;
}

template <class T>
double fold_squares(const T* p, int64_t n) {
  double q = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double f = (double)p[i];
    q += f * f;
  }
  return q;
}

void reduce_on_host(Job& job) {
  const void* p = (const void*)job.meta.ptr;
  const int64_t n = job.meta.numel;
  switch (job.meta.width) {
    case 1: fold_ints((const uint8_t*)p, n, &job.x, &job.s); break;
    case 2: fold_ints((const int16_t*)p, n, &job.x, &job.s); break;
    case 4: fold_ints((const int32_t*)p, n, &job.x, &job.s); break;
    default: fold_ints((const int64_t*)p, n, &job.x, &job.s); break;
  }
  switch (job.meta.fkind) {
    case OPSCAN_F32: job.q = fold_squares((const float*)p, n); job.first = n ? ((const float*)p)[0] : 0.0; break;
    case OPSCAN_F64: job.q = fold_squares((const double*)p, n); job.first = n ? ((const double*)p)[0] : 0.0; break;
    case OPSCAN_F16: job.q = fold_squares((const c10::Half*)p, n); job.first = n ? (double)((const c10::Half*)p)[0] : 0.0; break;
    case OPSCAN_BF16: job.q = fold_squares((const c10::BFloat16*)p, n); job.first = n ? (double)((const c10::BFloat16*)p)[0] : 0.0; break;
    default: {
      int64_t v = 0;
      if (n) std::memcpy(&v, p, job.meta.width);  // little-endian: the low bytes
      if (job.meta.width == 2) v = (int16_t)v;
      else if (job.meta.width == 4) v = (int32_t)v;
      job.first = (double)v;
    }
  }
}

#ifndef OPSCAN_NO_CUDA
// Queue one kernel launch per OPSCAN_BATCH pending jobs of this device, on its current stream.
void launch(int device) {
  DeviceState& d = S->devices[device];
  if (d.pending.empty()) return;
  HookGuard g;
  c10::cuda::CUDAGuard guard((c10::DeviceIndex)device);
  int64_t chunks = 0;
  for (int64_t j : d.pending) chunks += S->jobs[j].nchunks;
  const int64_t first = d.chunks;
  const int64_t need = (first + chunks) * (int64_t)sizeof(OpscanChunk);
  if (!d.results.defined() || d.results.numel() < need) {
    int64_t cap = d.results.defined() ? d.results.numel() : (int64_t)(8 << 20);
    while (cap < need) cap *= 2;
    at::Tensor bigger = at::empty({cap}, at::TensorOptions().dtype(at::kByte).device(at::kCUDA, device));
    if (d.results.defined() && first > 0)
      bigger.narrow(0, 0, first * (int64_t)sizeof(OpscanChunk)).copy_(d.results.narrow(0, 0, first * (int64_t)sizeof(OpscanChunk)));
    d.results = bigger;
  }
  auto stream = at::cuda::getCurrentCUDAStream(device).stream();
  auto* results = (OpscanChunk*)d.results.data_ptr();
  OpscanBatch batch;
  int64_t at_chunk = first;
  size_t k = 0;
  while (k < d.pending.size()) {
    batch.n = 0;
    batch.chunks = 0;
    const int64_t batch_first = at_chunk;
    while (k < d.pending.size() && batch.n < OPSCAN_BATCH) {
      Job& job = S->jobs[d.pending[k++]];
      job.meta.chunk0 = at_chunk;  // the step's numbering, for the fold in end_step
      OpscanJob& slot = batch.jobs[batch.n++];
      slot = job.meta;
      slot.chunk0 = batch.chunks;  // the launch's numbering, for the kernel
      batch.chunks += job.nchunks;
      at_chunk += job.nchunks;
    }
    int err = opscan_launch_fingerprints(batch, results + batch_first, kChunk, (void*)stream);
    if (err) internal_error("the fingerprint kernel failed to launch");
  }
  d.chunks = at_chunk;
  for (int64_t j : d.pending) S->jobs[j].keep = c10::Storage();
  d.pending.clear();
  d.pending_bytes = 0;
  d.storages.clear();
}
#endif

void launch_device(int device) {
#ifndef OPSCAN_NO_CUDA
  launch(device);
#else
  (void)device;  // CPU jobs are reduced when queued
#endif
}

void launch_all() {
#ifndef OPSCAN_NO_CUDA
  for (size_t i = 0; i < S->devices.size(); ++i) launch((int)i);
#endif
}

void fail(const at::Tensor& t, const char* why) {
  S->unfingerprinted++;
  if (S->first_failure.empty())
    S->first_failure = std::string("a tensor of ") + c10::toString(t.scalar_type()) + " on " + t.device().str() + ": " + why;
}

void remember(const at::Tensor& t, int64_t handle) {
  auto* impl = t.unsafeGetTensorImpl();
  if (t.is_inference()) return;  // no version counter: never reused
  S->track.insert_or_assign(impl, Tracked{c10::weak_intrusive_ptr<c10::TensorImpl>(t.getIntrusivePtr()),
                                           (int64_t)impl->version_counter().current_version(), handle});
}

// Queue t's current values; returns its handle.
int64_t fingerprint(const at::Tensor& t0) {
  if (!t0.defined()) return kNull;
  if (t0.layout() != c10::kStrided || t0.is_meta() || t0.is_quantized() || t0.is_nested()) {
    fail(t0, "not a strided tensor");
    return kNull;
  }
  if (t0.key_set().has(c10::DispatchKey::Python)) {
    // A tensor subclass (or a functional or fake tensor): reading it would run Python under the lock.
    fail(t0, "a tensor subclass, read through Python");
    return kNull;
  }
#ifdef OPSCAN_NO_CUDA
  const bool cuda = false;
  if (!t0.is_cpu()) {
#else
  const bool cuda = t0.is_cuda();
  if (!cuda && !t0.is_cpu()) {
#endif
    fail(t0, "the native engine reads CPU and CUDA tensors only");
    return kNull;
  }
  const auto st = t0.scalar_type();
  int64_t handle;
  if (t0.numel() == 0) {
    handle = new_handle(Handle{3, (int8_t)is_float_type(st), -1, kNull, 0});
  } else {
    at::Tensor t = t0;
    bool copied = false;
    if (!t.is_non_overlapping_and_dense()) {
      HookGuard g;
      t = t.contiguous();
      copied = true;
    }
    int width = (int)t.element_size();
    int64_t numel = t.numel();
    if (t.is_complex()) {
      width /= 2;
      numel *= 2;
    }
    if (width != 1 && width != 2 && width != 4 && width != 8) {
      fail(t0, "an element width the fingerprint does not read");
      return kNull;
    }
    Job job;
    job.meta.ptr = (uint64_t)(uintptr_t)t.data_ptr();
    job.meta.numel = numel;
    job.meta.width = width;
    job.meta.fkind = fkind_of(st);
    job.meta.chunk0 = 0;
    job.nchunks = (numel + kChunk - 1) / kChunk;
    job.device = cuda ? t.get_device() : -1;
    const int job_device = job.device;
    const int64_t index = (int64_t)S->jobs.size();
    if (cuda) {
      job.keep = t.storage();
      if ((int)S->devices.size() <= job.device) S->devices.resize(job.device + 1);
      DeviceState& d = S->devices[job.device];
      d.pending.push_back(index);
      d.pending_bytes += numel * width;
      if (!copied) d.storages.insert(t.storage().data());
      S->jobs.push_back(std::move(job));
      // A long run of ops that write nothing in place (inference, a big forward) would otherwise keep
      // every output alive until the step ends: launch once the queue holds this much.
      if (d.pending_bytes > kMaxPendingBytes || (int64_t)d.pending.size() >= kMaxPendingJobs) launch_device(job_device);
    } else {
      reduce_on_host(job);
      S->jobs.push_back(std::move(job));
    }
    handle = new_handle(Handle{1, 0, index, kNull, 0});
  }
  remember(t0, handle);
  if (!S->params.empty()) {
    auto p = S->params.find(t0.unsafeGetTensorImpl());
    if (p != S->params.end()) S->new_param_handles.emplace_back(handle, p->second);
  }
  return handle;
}

// The handle of t's current values: an earlier one if nothing changed it since.
int64_t ref(const at::Tensor& t, bool* fresh) {
  auto* impl = t.unsafeGetTensorImpl();
  auto it = S->track.find(impl);
  if (it != S->track.end() && !it->second.weak.expired() && !t.is_inference() &&
      (int64_t)impl->version_counter().current_version() == it->second.version)
    return it->second.handle;
  if (!S->uninitialised.empty() && t.layout() == c10::kStrided && !t.is_meta() &&
      t.has_storage() && S->uninitialised.count(t.storage().data())) {
    remember(t, kNull);  // memory no op has written yet: garbage, not fingerprinted
    return kNull;
  }
  if (fresh) *fresh = true;
  return fingerprint(t);
}

uint64_t geometry_salt(const at::Tensor& v, int64_t offset) {
  auto sizes = v.sizes();
  auto strides = v.strides();
  uint64_t g = fmix64((uint64_t)sizes.size() + 0x9E3779B97F4A7C15ULL);
  for (auto s : sizes) g = fmix64(g ^ (uint64_t)s);
  for (auto s : strides) g = fmix64(g ^ (uint64_t)s);
  g = fmix64(g ^ (uint64_t)offset);
  size_t code = (size_t)v.scalar_type();
  g = fmix64(g ^ (code < S->dtype_codes.size() ? S->dtype_codes[code] : 0));
  return g;
}

int64_t derive(int64_t base_handle, const at::Tensor& base, const at::Tensor& view) {
  if (base_handle == kNull || !base.defined()) return kNull;
  int64_t offset = view.storage_offset() - base.storage_offset();
  if (offset == 0 && view.scalar_type() == base.scalar_type() && view.sizes().equals(base.sizes()) &&
      view.strides().equals(base.strides()))
    return base_handle;
  return new_handle(Handle{2, 0, -1, base_handle, geometry_salt(view, offset)});
}

void add_meta(std::string& key, const at::Tensor& t) {
  auto sizes = t.sizes();
  int64_t head[2] = {(int64_t)sizes.size(), (int64_t)t.scalar_type()};
  key.append((const char*)head, sizeof(head));
  key.append((const char*)sizes.data(), sizes.size() * sizeof(int64_t));
}

int32_t meta_id(const std::string& key) {
  auto it = S->meta_ids.find(key);
  if (it != S->meta_ids.end()) return it->second;
  int32_t mid = (int32_t)S->meta_ids.size();
  S->meta_ids.emplace(key, mid);
  S->new_metas.emplace_back(mid, key);
  return mid;
}

template <class F>
void each_tensor(const c10::IValue& v, F&& f) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (t.defined()) f(t);
  } else if (v.isTensorList()) {
    for (const at::Tensor& t : v.toTensorList()) if (t.defined()) f(t);
  } else if (v.isList()) {
    for (const c10::IValue& item : v.toListRef())
      if (item.isTensor() && item.toTensor().defined()) f(item.toTensor());
  }
}

// The generator a random op draws from, asked of Python (record.py's generator_state) before it draws.
PyObject* rng_state(const at::RecordFunction& fn) {
  PyObject* gen = nullptr;
  std::string device;
  for (const auto& v : fn.inputs()) {
    if (v.isGenerator() && !gen) {
      gen = THPGenerator_Wrap(v.toGenerator());
    } else if (device.empty()) {
      if (v.isDevice()) device = v.toDevice().str();
      each_tensor(v, [&](const at::Tensor& t) { if (device.empty()) device = t.device().str(); });
    }
  }
  HookGuard g;
  py::object r;
  try {
    r = S->rng_state(gen ? py::reinterpret_steal<py::object>(gen) : py::none(), device);
  } catch (py::error_already_set&) {  // a generator Python cannot read: no state, the op is still recorded
    return nullptr;
  }
  return r.release().ptr();
}

// ------------------------------------------------------------------ the callbacks

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  if (in_hook || !S || S->paused.load(std::memory_order_relaxed)) return nullptr;
  if (fn.scope() == at::RecordScope::BACKWARD_FUNCTION) {
    // Inside the engine's range for this node: the ops the engine runs after the node's own apply
    // (validate_outputs' sum_to for a broadcast input) belong to it too.
    if (!nodes.empty() && nodes.back() == kEvaluating) nodes.back() = fn.seqNr();
    nodes.push_back(fn.seqNr());
    auto ctx = std::make_unique<Ctx>();
    ctx->range = 1;
    return ctx;  // popped in on_end
  }
  if (open_op) return nullptr;  // a nested call (RecordFunction is off inside a recorded op; see below)
  const bool forward = nodes.empty();
  OpMeta* m = nullptr;
  {
    std::lock_guard<std::recursive_mutex> lock(S->mu);
    m = meta_for(fn);
  }
  if (!m->known) {
    // A named range, not an op: transparent, except the autograd engine's range around one node's evaluation.
    if (!open_op && std::strncmp(fn.name(), kEvaluate, sizeof(kEvaluate) - 1) == 0) {
      nodes.push_back(kEvaluating);
      auto ctx = std::make_unique<Ctx>();
      ctx->range = 2;
      return ctx;
    }
    return nullptr;
  }
  auto ctx = std::make_unique<Ctx>();
  // The GIL before the lock, always: a thread holding the lock never waits for the GIL.
  std::unique_ptr<py::gil_scoped_acquire> gil;
  if (forward || m->random) gil = std::make_unique<py::gil_scoped_acquire>();
  std::lock_guard<std::recursive_mutex> lock(S->mu);
  try {
    ctx->meta = m;
    open_op = ctx.get();
    bool from_make_grads = false;
    if (forward) {
      ctx->phase = S->stepping.load() > 0 ? OPTIMIZER : FORWARD;
      ctx->sid = locate(m->loss_seed ? &from_make_grads : nullptr);
      ctx->seq0 = fn.seqNr();
      if (ctx->phase == FORWARD && ctx->seq0 > S->last_seq && S->last_seq >= 0 && ctx->seq0 - S->last_seq <= 16)
        for (int64_t n = S->last_seq; n < ctx->seq0; ++n) S->node_sites.emplace(n, ctx->sid);  // nodes made in Python between ops
    } else {
      ctx->phase = BACKWARD;
      auto it = S->node_sites.find(nodes.back());
      ctx->sid = it != S->node_sites.end() ? it->second : site_id(nullptr, 0, nullptr);
    }
    bool fresh = false;
    const auto inputs = fn.inputs();
    for (size_t i = 0; i < inputs.size(); ++i) {
      uint8_t role = i < m->roles.size() ? m->roles[i] : READ;
      if (role & READ)
        each_tensor(inputs[i], [&](const at::Tensor& t) {
          int64_t h = ref(t, &fresh);
          if (ctx->ins.empty()) {
            ctx->base_handle = h;
            ctx->base = t;
          }
          ctx->ins.push_back(h);
          add_meta(ctx->metakey, t);
        });
      if (role & WRITTEN) each_tensor(inputs[i], [&](const at::Tensor& t) { ctx->written.push_back(t); });
    }
    if (m->stats_flag >= 0 && (size_t)m->stats_flag < inputs.size() && inputs[m->stats_flag].isBool() &&
        inputs[m->stats_flag].toBool())
      for (int64_t p : m->stats_writes)
        if ((size_t)p < inputs.size()) each_tensor(inputs[p], [&](const at::Tensor& t) { ctx->written.push_back(t); });
    ctx->mid = meta_id(ctx->metakey);
    if (from_make_grads && !ctx->ins.empty()) ctx->loss = true;
#ifndef OPSCAN_NO_CUDA
    if (fresh) {
      launch_all();  // an op may write what it reads where its schema does not say so (batch norm's running stats)
    } else {
      for (const auto& w : ctx->written) {
        if (!w.is_cuda() || !w.has_storage()) continue;
        int dev = w.get_device();
        if (dev < (int)S->devices.size() && S->devices[dev].storages.count(w.storage().data())) {
          launch(dev);
        }
      }
    }
#endif
    if (m->random) {
      HookGuard g;
      ctx->rng = rng_state(fn);
    }
  } catch (const std::exception& e) {
    internal_error(e.what());
    ctx->skip = true;
  }
  // The calls this op makes inside the dispatcher are not recorded: turning RecordFunction off for
  // them spares each one the boxing of its arguments and results (on_end turns it back on).
  ctx->rf_enabled = at::isRecordFunctionEnabled();
  at::enableRecordFunction(false);
  return ctx;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext* raw) {
  if (!raw) return;
  Ctx* ctx = static_cast<Ctx*>(raw);
  if (ctx->range) {
    if (!nodes.empty()) nodes.pop_back();
    return;
  }
  at::enableRecordFunction(ctx->rf_enabled);
  if (open_op == ctx) open_op = nullptr;
  if (ctx->skip) {
    if (ctx->rng) {
      py::gil_scoped_acquire gil;
      Py_DECREF(ctx->rng);
    }
    return;
  }
  std::lock_guard<std::recursive_mutex> lock(S->mu);
  try {
    OpMeta* m = ctx->meta;
    OpRec rec;
    rec.oid = m->oid;
    rec.sid = ctx->sid;
    rec.mid = ctx->mid;
    rec.phase = ctx->phase;
    rec.ins = std::move(ctx->ins);
    rec.norm = kNull;
    rec.rng = ctx->rng;
    ctx->rng = nullptr;
    std::vector<at::Tensor> outs;
    for (const auto& v : fn.outputs()) each_tensor(v, [&](const at::Tensor& t) { outs.push_back(t); });
    if (m->writes) {
      for (const auto& w : ctx->written) {
        if (w.has_storage()) S->uninitialised.erase(w.storage().data());
        bool seen = false;
        for (const auto& o : outs) if (o.unsafeGetTensorImpl() == w.unsafeGetTensorImpl()) seen = true;
        if (!seen) outs.push_back(w);
      }
    }
    if (m->uninit) {
      for (const auto& o : outs) {
        remember(o, kNull);
        if (o.has_storage() && o.storage().data()) S->uninitialised.insert(o.storage().data());
        rec.outs.push_back(kNull);
      }
    } else if (m->view) {
      for (const auto& o : outs) {
        int64_t h = derive(ctx->base_handle, ctx->base, o);
        remember(o, h);
        rec.outs.push_back(h);
      }
    } else {
      for (const auto& o : outs) {
        int64_t h = fingerprint(o);
        rec.outs.push_back(h);
        if (rec.norm == kNull && h != kNull && is_float_type(o.scalar_type())) rec.norm = h;
      }
    }
    if (ctx->loss) S->loss = rec.ins[0];
    if (ctx->phase == FORWARD && ctx->seq0 >= 0) {
      int64_t seq1 = (int64_t)at::sequence_number::peek();
      for (int64_t n = ctx->seq0; n < seq1; ++n) S->node_sites.emplace(n, ctx->sid);
      S->last_seq = seq1;
    }
    S->ops.push_back(std::move(rec));
  } catch (const std::exception& e) {
    internal_error(e.what());
  }
}

// ------------------------------------------------------------------ the Python side

void resume();

void start(py::object classify, int internal_mask, py::object rng_state, py::list module_stack,
           std::vector<std::string> random_packets, std::unordered_map<std::string, std::vector<int64_t>> stats_writers,
           std::vector<uint64_t> dtype_codes,
           std::vector<std::string> dtype_names, std::vector<at::Tensor> params, bool xor_only) {
  if (!S) S = new State();
  std::lock_guard<std::recursive_mutex> lock(S->mu);
  TORCH_CHECK(!S->active, "the native record engine is already recording");
  S->classify = classify;
  S->internal_mask = internal_mask;
  S->rng_state = rng_state;
  S->module_stack = module_stack;
  S->random_packets = std::unordered_set<std::string>(random_packets.begin(), random_packets.end());
  S->stats_writers = std::move(stats_writers);
  S->dtype_codes = dtype_codes;
  S->dtype_names = dtype_names;
  S->xor_only = xor_only;
  S->params.clear();
  for (size_t i = 0; i < params.size(); ++i) S->params[params[i].unsafeGetTensorImpl()] = (int)i;
  S->last_seq = (int64_t)at::sequence_number::peek();
  resume();
}

void resume() {
  S->handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback(on_start, on_end)
          .needsInputs(true)
          .needsOutputs(true)
          .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
  S->active = true;
}

void pause_hook() {
  if (S && S->active) {
    at::removeCallback(S->handle);
    S->active = false;
  }
}

int scalar_type(const at::Tensor& t) { return (int)t.scalar_type(); }

int64_t py_ref(const at::Tensor& t) {
  TORCH_CHECK(S, "the native record engine has not been started");
  std::lock_guard<std::recursive_mutex> lock(S->mu);
  HookGuard g;
  return ref(t, nullptr);
}

py::object opt_handle(int64_t h) { return h == kNull ? py::object(py::none()) : py::object(py::int_(h)); }

void decode_meta_shapes(const std::string& key, py::list& shapes, py::list& dtypes) {
  const char* p = key.data();
  const char* end = p + key.size();
  while (p < end) {
    int64_t head[2];
    std::memcpy(head, p, sizeof(head));
    p += sizeof(head);
    py::list shape;
    for (int64_t i = 0; i < head[0]; ++i) {
      int64_t s;
      std::memcpy(&s, p, 8);
      p += 8;
      shape.append(s);
    }
    shapes.append(shape);
    size_t code = (size_t)head[1];
    dtypes.append(code < S->dtype_names.size() ? S->dtype_names[code] : std::string("unknown"));
  }
}

// Launch what is queued, copy the step's results to the host once, and hand the step to Python.
py::tuple end_step(std::vector<int64_t> keep_handles_extra) {
  TORCH_CHECK(S, "the native record engine has not been started");
  std::lock_guard<std::recursive_mutex> lock(S->mu);
  HookGuard g;
  launch_all();
  std::vector<std::vector<OpscanChunk>> hosts(S->devices.size());
#ifndef OPSCAN_NO_CUDA
  for (size_t i = 0; i < S->devices.size(); ++i) {
    DeviceState& d = S->devices[i];
    if (!d.chunks) continue;
    at::Tensor h = d.results.narrow(0, 0, d.chunks * (int64_t)sizeof(OpscanChunk)).to(at::kCPU);
    hosts[i].resize(d.chunks);
    std::memcpy(hosts[i].data(), h.data_ptr(), d.chunks * sizeof(OpscanChunk));
    d.chunks = 0;
  }
#endif
  for (Job& job : S->jobs) {
    if (job.device < 0) continue;
    const auto& host = hosts[job.device];
    if ((int64_t)host.size() < job.meta.chunk0 + job.nchunks) {
      job.valid = false;  // never launched
      continue;
    }
    uint64_t x = 0, s = 0;
    double q = 0.0;
    for (int64_t k = 0; k < job.nchunks; ++k) {
      const OpscanChunk& c = host[job.meta.chunk0 + k];
      x ^= c.x;
      s += c.s;
      q += c.q;
    }
    job.x = x;
    job.s = s;
    job.q = q;
    job.first = job.nchunks ? host[job.meta.chunk0].first : 0.0;
  }
  // Every handle of the step: fingerprint, norm, whether known.
  const size_t n = S->handles.size();
  std::vector<uint64_t> fps(n);
  std::vector<double> norms(n);
  std::vector<uint8_t> ok(n);
  auto lookup = [&](int64_t h, uint64_t* fp) -> bool {
    if (h >= S->base) {
      size_t i = (size_t)(h - S->base);
      *fp = fps[i];
      return ok[i];
    }
    auto it = S->kept_fps.find(h);
    if (it == S->kept_fps.end()) return false;
    *fp = it->second.first;
    return true;
  };
  for (size_t i = 0; i < n; ++i) {
    const Handle& h = S->handles[i];
    norms[i] = NAN;
    ok[i] = 0;
    if (h.kind == 1 && S->jobs[h.job].valid) {
      const Job& job = S->jobs[h.job];
      int width = job.meta.width;
      uint64_t mask = width >= 8 ? ~0ULL : (width == 2 ? 0xFFFFULL : 0xFFFFFFFFULL);
      uint64_t s = job.s & mask;
      fps[i] = S->xor_only ? job.x : fmix64(job.x ^ fmix64(s));
      if (job.meta.fkind) norms[i] = std::sqrt(job.q);
      ok[i] = 1;
    } else if (h.kind == 3) {
      fps[i] = S->xor_only ? 0 : fmix64(0 ^ fmix64(0));
      if (h.fkind) norms[i] = 0.0;
      ok[i] = 1;
    } else if (h.kind == 2) {
      uint64_t base;
      if (lookup(h.base, &base)) {
        fps[i] = fmix64(base ^ h.salt);
        ok[i] = 1;
      }
    }
  }
  // One handle more than the step's: the loss, as its norm (NaN: none), never a fingerprint.
  double loss_value = NAN;
  if (S->loss != kNull && S->loss >= S->base) {
    const Handle& h = S->handles[(size_t)(S->loss - S->base)];
    if (h.kind == 1 && S->jobs[h.job].valid) loss_value = S->jobs[h.job].first;
  }
  std::string blob((n + 1) * 17, '\0');
  for (size_t i = 0; i <= n; ++i) {
    char* p = &blob[i * 17];
    uint64_t fp = i < n ? fps[i] : 0;
    double norm = i < n ? norms[i] : loss_value;
    std::memcpy(p, &fp, 8);
    std::memcpy(p + 8, &norm, 8);
    p[16] = (char)(i < n ? ok[i] : 0);
  }
  py::object loss = std::isnan(loss_value) ? py::object(py::none()) : py::object(py::int_(S->base + (int64_t)n));
  // Ops, packed for the writer (recordwriter.PackedOps): per op <iiiBHHq (op, site, shapes, phase,
  // inputs, outputs, norm handle) then its input and output handles (<q each, -1 for none).
  std::string packed;
  packed.reserve(S->ops.size() * 64);
  py::dict rngs;
  for (size_t i = 0; i < S->ops.size(); ++i) {
    OpRec& r = S->ops[i];
    char head[25];
    uint16_t nin = (uint16_t)std::min<size_t>(r.ins.size(), 65535), nout = (uint16_t)std::min<size_t>(r.outs.size(), 65535);
    std::memcpy(head, &r.oid, 4);
    std::memcpy(head + 4, &r.sid, 4);
    std::memcpy(head + 8, &r.mid, 4);
    head[12] = (char)r.phase;
    std::memcpy(head + 13, &nin, 2);
    std::memcpy(head + 15, &nout, 2);
    std::memcpy(head + 17, &r.norm, 8);
    packed.append(head, 25);
    packed.append((const char*)r.ins.data(), nin * sizeof(int64_t));
    packed.append((const char*)r.outs.data(), nout * sizeof(int64_t));
    if (r.rng) {
      rngs[py::int_(i)] = py::reinterpret_steal<py::object>(r.rng);
      r.rng = nullptr;
    }
  }
  py::tuple ops = py::make_tuple(py::bytes(packed), (int64_t)S->ops.size(), rngs);
  py::list new_ops;
  for (auto& o : S->new_ops) new_ops.append(py::make_tuple(o.first, o.second));
  py::list new_sites;
  for (auto& s : S->new_sites) {
    PyObject* code = std::get<1>(s);
    PyObject* module = std::get<3>(s);
    new_sites.append(py::make_tuple(std::get<0>(s), code ? py::reinterpret_borrow<py::object>(code) : py::none(),
                                    std::get<2>(s), module ? py::reinterpret_borrow<py::object>(module) : py::none()));
  }
  py::list new_metas;
  for (auto& m : S->new_metas) {
    py::list shapes, dtypes;
    decode_meta_shapes(m.second, shapes, dtypes);
    new_metas.append(py::make_tuple(m.first, shapes, dtypes));
  }
  py::list params;
  for (auto& p : S->new_param_handles) params.append(py::make_tuple(p.first, p.second));
  // Forget dead tensors; keep the fingerprints that live ones may still be read with.
  std::unordered_map<int64_t, std::pair<uint64_t, double>> kept;
  py::list keep;
  for (auto it = S->track.begin(); it != S->track.end();) {
    if (it->second.weak.expired()) {
      it = S->track.erase(it);
      continue;
    }
    int64_t h = it->second.handle;
    uint64_t fp;
    if (h != kNull && !kept.count(h) && lookup(h, &fp)) {
      double norm = h >= S->base ? norms[(size_t)(h - S->base)] : S->kept_fps[h].second;
      kept.emplace(h, std::make_pair(fp, norm));
      keep.append(h);
    }
    ++it;
  }
  for (int64_t h : keep_handles_extra) {
    uint64_t fp;
    if (h != kNull && !kept.count(h) && lookup(h, &fp)) {
      kept.emplace(h, std::make_pair(fp, h >= S->base ? norms[(size_t)(h - S->base)] : S->kept_fps[h].second));
      keep.append(h);
    }
  }
  S->kept_fps = std::move(kept);
  int64_t first = S->base;
  S->base += (int64_t)n + 1;
  S->handles.clear();
  S->jobs.clear();
  S->ops.clear();
  S->new_ops.clear();
  S->new_sites.clear();
  S->new_metas.clear();
  S->new_param_handles.clear();
  S->uninitialised.clear();
  S->loss = kNull;
  return py::make_tuple(first, (int64_t)n + 1, py::bytes(blob), ops, new_ops, new_sites, new_metas, params, loss, keep);
}

void forget_nodes_before(int64_t seq) {
  TORCH_CHECK(S, "the native record engine has not been started");
  std::lock_guard<std::recursive_mutex> lock(S->mu);
  for (auto it = S->node_sites.begin(); it != S->node_sites.end();) {
    if (it->first < seq) it = S->node_sites.erase(it);
    else ++it;
  }
}

py::tuple stats() {
  TORCH_CHECK(S, "the native record engine has not been started");
  std::lock_guard<std::recursive_mutex> lock(S->mu);
  return py::make_tuple(S->unfingerprinted, S->internal_errors, S->first_internal, S->first_failure, (int64_t)S->ops.size());
}

// Drop everything (after pause): the next start is a fresh record.
void reset() {
  if (!S) return;
  pause_hook();
  {
    std::lock_guard<std::recursive_mutex> lock(S->mu);
    for (auto& r : S->ops)
      if (r.rng) Py_DECREF(r.rng);
    for (PyObject* o : S->kept) Py_DECREF(o);
    for (OpMeta* m : S->all_metas) delete m;
  }
  State* old = S;
  S = nullptr;
  delete old;
}

void py_resume() {
  TORCH_CHECK(S, "the native record engine has not been started");
  std::lock_guard<std::recursive_mutex> lock(S->mu);
  TORCH_CHECK(!S->active, "the native record engine is already recording");
  resume();
}

// The parameters to name in the record (a script's are known only at its optimizer's first step).
void set_params(std::vector<at::Tensor> params) {
  TORCH_CHECK(S, "the native record engine has not been started");
  std::lock_guard<std::recursive_mutex> lock(S->mu);
  S->params.clear();
  for (size_t i = 0; i < params.size(); ++i) S->params[params[i].unsafeGetTensorImpl()] = (int)i;
}

void stepping(int delta) {
  if (S) S->stepping += delta;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "opscan record's native engine (opscan/trace/csrc/record_hook.cpp)";
  m.def("start", &start);
  m.def("pause", &pause_hook);
  m.def("resume", &py_resume);
  m.def("reset", &reset);
  m.def("ref", &py_ref);
  m.def("end_step", &end_step);
  m.def("forget_nodes_before", &forget_nodes_before);
  m.def("stats", &stats);
  m.def("stepping", &stepping);
  m.def("set_params", &set_params);
  m.def("scalar_type", &scalar_type);
  m.attr("CHUNK") = kChunk;
  m.attr("CUDA") = py::bool_(
#ifdef OPSCAN_NO_CUDA
      false
#else
      true
#endif
  );
}
