// Counter sets declared once: a struct of counters lists its members in one place,
//
//   struct LoopCounts {
//     uint64_t blocked_ns = 0;
//     LoopBlocks blocks;
//     static constexpr auto kCounters = std::tuple{&LoopCounts::blocked_ns, &LoopCounts::blocks};
//   };
//
// and gets from that list, through one visitor (for_each_counter), the two operations
// ContainerTotalsOf folds with:
//   a += b             every counter of b added to a's;
//   raise_to(a, floor) every counter of a raised to at least floor's ("never backwards" holds
//                      per counter: each bucket of a histogram, each key of a map).
// A counter is a number (uint64_t, double), a std::array or std::map of counters (a key missing on
// one side counts as 0: it is added, or raised to the floor's value), or a counter set. A member
// left out of kCounters is not a counter (neither added nor floored).
//
// Header-only, no state. Cost: one pass over both sides' counters.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <map>
#include <tuple>
#include <type_traits>

namespace sonde::agent {

template <typename T>
concept CounterSet = requires {
  std::tuple_size<std::remove_cv_t<decltype(T::kCounters)>>::value;
};

template <typename T>
concept CounterNumber = std::is_arithmetic_v<T>;

// Calls op(x, y) on every pair of numbers at the same place in `value` and `other` (a key of
// `other` missing from `value` is added to it as 0 first). Declared first: each calls the others
// on its elements, whatever their kind.
template <CounterNumber T, typename Op>
void for_each_counter(T& value, const T& other, const Op& op);
template <typename T, size_t N, typename Op>
void for_each_counter(std::array<T, N>& value, const std::array<T, N>& other, const Op& op);
template <typename K, typename V, typename Op>
void for_each_counter(std::map<K, V>& value, const std::map<K, V>& other, const Op& op);
template <CounterSet T, typename Op>
void for_each_counter(T& value, const T& other, const Op& op);

template <CounterNumber T, typename Op>
void for_each_counter(T& value, const T& other, const Op& op) {
  op(value, other);
}
template <typename T, size_t N, typename Op>
void for_each_counter(std::array<T, N>& value, const std::array<T, N>& other, const Op& op) {
  for (size_t i = 0; i < N; ++i) for_each_counter(value[i], other[i], op);
}
template <typename K, typename V, typename Op>
void for_each_counter(std::map<K, V>& value, const std::map<K, V>& other, const Op& op) {
  for (const auto& [k, v] : other) for_each_counter(value[k], v, op);
}
template <CounterSet T, typename Op>
void for_each_counter(T& value, const T& other, const Op& op) {
  std::apply([&](auto... member) { (for_each_counter(value.*member, other.*member, op), ...); },
             T::kCounters);
}

template <typename T>
requires CounterSet<T> || CounterNumber<T>
void raise_to(T& value, const T& floor) {
  for_each_counter(value, floor, [](auto& v, const auto& f) { v = std::max(v, f); });
}

template <CounterSet T>
T& operator+=(T& value, const T& other) {
  for_each_counter(value, other, [](auto& v, const auto& o) { v += o; });
  return value;
}

}  // namespace sonde::agent
