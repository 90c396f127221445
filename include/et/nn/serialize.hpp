// Saving and loading a module's tensors in the safetensors format, by their dotted names
// ("fc1.weight", "0.bias"; PyTorch's state_dict names when the members are named alike):
//
//   et::nn::save(model, "model.safetensors");   // parameters and buffers, from any device
//   et::nn::load(model, "model.safetensors");   // into the existing tensors, on their device
//
// load checks every name, dtype and shape before it writes anything: a file that does not
// fit the module leaves the module as it was. By default the file must hold exactly the
// module's tensors (PyTorch's strict=True); {.strict = false} ignores the file's others.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "et/io/safetensors.hpp"
#include "et/nn/module.hpp"

namespace et::nn {

struct LoadOptions {
  bool strict = true;  ///< the file holds no tensor the module lacks
};

namespace detail {

template <class T>
constexpr const char* safetensors_dtype() {
  if constexpr (std::is_same_v<T, float>) return "F32";
  else if constexpr (std::is_same_v<T, double>) return "F64";
  else if constexpr (std::is_same_v<T, half>) return "F16";
  else if constexpr (std::is_same_v<T, bfloat16>) return "BF16";
  else if constexpr (std::is_same_v<T, std::int64_t>) return "I64";
  else if constexpr (std::is_same_v<T, std::int32_t>) return "I32";
  else if constexpr (std::is_same_v<T, std::uint8_t>) return "U8";
  else return "BOOL";
}

template <class Shape>
std::vector<std::int64_t> shape_vector(const Shape& shape) {
  return std::vector<std::int64_t>(shape.begin(), shape.end());
}

inline std::string describe(const std::string& dtype, const std::vector<std::int64_t>& shape) {
  return dtype + " " + io::detail::format_extents(shape);
}

}  // namespace detail

/// The module's defined tensors as safetensors entries, copied to the host.
template <HasMembers M>
io::SafeTensorsFile state_of(const M& module) {
  io::SafeTensorsFile file;
  for_each_tensor(module, [&](const std::string& name, const auto& t) {
    if (!t.defined()) return;
    using T = typename std::remove_cvref_t<decltype(t)>::value_type;
    const auto host = t.detach().to(cpu).contiguous();
    const auto* bytes = reinterpret_cast<const unsigned char*>(host.data());
    file.tensors[name] = io::SafeTensor{detail::safetensors_dtype<T>(), detail::shape_vector(t.shape()),
                                        std::vector<unsigned char>(bytes, bytes + host.numel() * sizeof(T))};
  });
  return file;
}

/// Writes the module's tensors to `path` (et::Error on failure; `metadata` goes to
/// "__metadata__").
template <HasMembers M>
void save(const M& module, const std::string& path, const std::map<std::string, std::string>& metadata = {}) {
  io::SafeTensorsFile file = state_of(module);
  file.metadata = metadata;
  io::write_safetensors(path, file);
}

/// Copies the tensors of `file` into the module's tensors of the same names (`source`
/// names the file in messages). Throws et::Error naming the first tensor that is missing
/// or has another dtype, shape or byte count, before anything is written.
template <HasMembers M>
void load_state(M& module, const io::SafeTensorsFile& file, const std::string& source, const LoadOptions& options = {}) {
  std::size_t matched = 0;
  for_each_tensor(module, [&](const std::string& name, auto& t) {  // first pass: check everything
    if (!t.defined()) return;
    using T = typename std::remove_cvref_t<decltype(t)>::value_type;
    const auto found = file.tensors.find(name);
    if (found == file.tensors.end()) throw Error("et: load: " + source + " has no tensor \"" + name + "\"");
    if (found->second.dtype != detail::safetensors_dtype<T>() ||
        found->second.shape != detail::shape_vector(t.shape()))
      throw Error("et: load: \"" + name + "\" in " + source + " is " +
                  detail::describe(found->second.dtype, found->second.shape) + ", the module's is " +
                  detail::describe(detail::safetensors_dtype<T>(), detail::shape_vector(t.shape())));
    // A SafeTensorsFile built in memory need not hold its shape's bytes (a parsed file does).
    const auto needed = static_cast<std::size_t>(t.numel()) * sizeof(T);
    if (found->second.bytes.size() != needed)
      throw Error("et: load: \"" + name + "\" in " + source + " has " + std::to_string(found->second.bytes.size()) +
                  " bytes; " + detail::describe(found->second.dtype, found->second.shape) + " needs " +
                  std::to_string(needed));
    if (!t.is_contiguous()) throw Error("et: load: the module's \"" + name + "\" is not contiguous");
    ++matched;
  });
  if (options.strict && matched != file.tensors.size()) {
    std::string extra;
    for (const auto& [name, tensor] : file.tensors) {
      bool known = false;
      for_each_tensor(module, [&](const std::string& own, const auto& t) { known = known || (own == name && t.defined()); });
      if (!known) extra += (extra.empty() ? "\"" : ", \"") + name + "\"";
    }
    throw Error("et: load: " + source + " holds tensors the module does not: " + extra +
                " (pass {.strict = false} to ignore them)");
  }
  for_each_tensor(module, [&](const std::string& name, auto& t) {  // second pass: copy
    if (!t.defined()) return;
    using Tensor = std::remove_cvref_t<decltype(t)>;
    using D = typename Tensor::device_type;
    const auto& bytes = file.tensors.find(name)->second.bytes;
    et::detail::copy_between<D, Cpu>(t.storage(), t.data(), nullptr, bytes.data(), bytes.size(), true);
    t.note_write();
  });
}

/// Loads `path` into the module's tensors (see load_state).
template <HasMembers M>
void load(M& module, const std::string& path, const LoadOptions& options = {}) {
  load_state(module, io::read_safetensors(path), path, options);
}

}  // namespace et::nn
