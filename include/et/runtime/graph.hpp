// CUDA graphs: record what a function queues on a stream once, replay it with one launch.
//
//   auto g = et::capture(s, [&] { z = x * y + 1.0f; m = et::matmul(a, b); });
//   g.replay();   // runs the same kernels on the same memory, on s
//
// What the capture records is what etensor queued on `s` (made current by a StreamGuard
// for the call): elementwise kernels, reductions, cuBLASLt and cuDNN calls, device copies.
// Memory allocated inside belongs to the graph (allocator.hpp's CaptureArena): replays
// write the same addresses, so a tensor created inside and kept outside shows each
// replay's result; the memory lives as long as the graph or such a tensor does. Tensors
// from outside keep their storage: the graph holds their addresses, so keep them alive
// while it replays (as in PyTorch).
//
// Run the function once before capturing it: first calls set libraries up (cuBLASLt's
// workspace for the stream, cuDNN's algorithm search), which cannot be captured. Nothing
// inside may wait for the device: item(), to_vector(), .to(et::cpu) and synchronize()
// make the capture fail with an et::Error saying so.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "et/runtime/allocator.hpp"

namespace et {

#if defined(ET_HAS_CUDA_RUNTIME)
namespace detail {

/// A captured graph and what it owns: the executable, and the capture's memory.
struct GraphState {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  std::shared_ptr<CaptureArena> arena;
  std::size_t kernels = 0;
  int device = 0;

  GraphState() = default;
  GraphState(const GraphState&) = delete;
  GraphState& operator=(const GraphState&) = delete;
  ~GraphState() {
    if (exec) (void)cudaGraphExecDestroy(exec);
    if (graph) (void)cudaGraphDestroy(graph);
    (void)cudaGetLastError();
  }
};

inline std::size_t count_kernel_nodes(cudaGraph_t graph) {
  std::size_t count = 0;
  ET_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  ET_CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &count));
  std::size_t kernels = 0;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    ET_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
    kernels += type == cudaGraphNodeTypeKernel;
  }
  return kernels;
}

/// Ends this thread's capture on `stream`: the arena stops taking allocations, the frees
/// held back run, and the first error of the capture (a launch's or the end's) is returned.
inline cudaError_t end_capture(cudaStream_t stream, cudaGraph_t* graph) {
  const std::shared_ptr<CaptureArena> arena = std::move(capture_arena());
  capture_arena().reset();
  const cudaError_t launched = cudaGetLastError();
  const cudaError_t ended = cudaStreamEndCapture(stream, graph);
  run_deferred_frees(*arena);
  (void)cudaGetLastError();
  return launched != cudaSuccess ? launched : ended;
}

/// `cause`: the CUDA error, or the message of the failing call inside the captured function.
[[noreturn]] inline void throw_capture_failed(const std::string& cause) {
  throw Error("et: capturing a CUDA graph failed (" + cause +
              "): the captured function waited for the device (item(), to_vector(), .to(et::cpu), "
              "synchronize()) or called a library for the first time on this stream; run it once before "
              "capturing, and keep host reads out of it");
}

}  // namespace detail

template <Device D>
class Graph;

/// A captured sequence of work on device I (see the file comment).
template <int I>
class Graph<Cuda<I>> {
 public:
  /// Runs the captured work again, on the stream it was captured on.
  void replay() const { replay(stream_); }
  /// Runs the captured work on `stream`.
  void replay(const Stream<Cuda<I>>& stream) const {
    detail::DeviceGuard guard(I);
    ET_CUDA_CHECK(cudaGraphLaunch(state_->exec, stream.native()));
  }
  /// The number of kernels one replay runs.
  std::size_t kernels() const noexcept { return state_->kernels; }
  const Stream<Cuda<I>>& stream() const noexcept { return stream_; }

 private:
  template <int J, class F>
  friend Graph<Cuda<J>> capture(const Stream<Cuda<J>>& stream, F&& fn);

  Graph(std::shared_ptr<detail::GraphState> state, Stream<Cuda<I>> stream)
      : state_(std::move(state)), stream_(std::move(stream)) {}

  std::shared_ptr<detail::GraphState> state_;
  Stream<Cuda<I>> stream_;
};

/// Records what fn() queues on `stream` (current for the call) into a graph, without
/// running it. Throws et::Error when the capture fails (a CUDA call fn made that a capture
/// does not allow included); fn's other exceptions pass through.
template <int I, class F>
Graph<Cuda<I>> capture(const Stream<Cuda<I>>& stream, F&& fn) {
  auto state = std::make_shared<detail::GraphState>();
  state->device = I;
  {
    StreamGuard guard(stream);
    detail::DeviceGuard device(I);
    std::shared_ptr<detail::CaptureArena>& active = detail::capture_arena();
    if (active) throw Error("et: et::capture inside another capture on the same thread is not supported");
    // Relaxed: the arena's cudaMalloc is allowed while capturing.
    ET_CUDA_CHECK(cudaStreamBeginCapture(stream.native(), cudaStreamCaptureModeRelaxed));
    state->arena = active = std::make_shared<detail::CaptureArena>(I);
    try {
      std::forward<F>(fn)();
    } catch (const CudaError& e) {  // a CUDA call the capture does not allow
      (void)detail::end_capture(stream.native(), &state->graph);
      detail::throw_capture_failed(e.what());
    } catch (...) {
      (void)detail::end_capture(stream.native(), &state->graph);
      throw;
    }
    const cudaError_t status = detail::end_capture(stream.native(), &state->graph);
    if (status != cudaSuccess || state->graph == nullptr) {
      const cudaError_t cause = status != cudaSuccess ? status : cudaErrorStreamCaptureInvalidated;
      detail::throw_capture_failed(std::string(cudaGetErrorName(cause)) + ": " + cudaGetErrorString(cause));
    }
  }
  state->kernels = detail::count_kernel_nodes(state->graph);
  ET_CUDA_CHECK(cudaGraphInstantiate(&state->exec, state->graph, 0));
  return Graph<Cuda<I>>(std::move(state), stream);
}
#endif

}  // namespace et
