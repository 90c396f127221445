// Recording views and copies (slice, transpose, expand, ..., clone, to): each view says in
// tensor.hpp how its gradient goes back (`back`), so one node type serves them all. A view
// shares its base's version counter, so an in-place write through either is seen by the
// recorded operations that saved the other.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "et/autograd/graph.hpp"

namespace et::detail {

template <class Out, class In, class Back>
class ViewBackward;
template <class T, int RO, class DO, class In, class Back>
class ViewBackward<Tensor<T, RO, DO>, In, Back> final : public GradSink<T, RO, DO> {
 public:
  ViewBackward(const In& in, Back back, const char* name) : back_(std::move(back)), name_(name) {
    this->next.push_back(edge_of(in));
  }
  std::string name() const override { return name_; }
  void apply(bool) override {
    const Tensor<T, RO, DO> g = this->take();
    if (g.defined()) send(this->next[0], In(back_(g)));
  }

 private:
  Back back_;
  const char* name_;
};

template <class Out, class In, class Back>
void record_view(Out& out, const In& in, const Back& back, const char* name) {
  using T = typename In::value_type;
  using D = typename In::device_type;
  const auto& meta = in.autograd_meta();
  if (out.storage() == in.storage()) out.meta().version = meta->version;
  if constexpr (is_floating_v<T>) {
    if (!grad_enabled() || !meta_needs_grad(meta)) return;
#if !defined(ET_DEVICE_COMPILER)
    if constexpr (D::is_cuda || Out::device_type::is_cuda) {
      throw Error(std::string("et: recording the backward of ") + name +
                  " for a CUDA tensor that requires grad needs a file compiled by nvcc");
    } else
#endif
    {
      attach(out, std::make_shared<ViewBackward<Out, In, Back>>(in, back, name));
    }
  }
}

}  // namespace et::detail
