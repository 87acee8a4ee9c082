#pragma once
// Counter structs whose fields are listed once. A struct is declared from an X-macro list of
// (name, meaning) pairs with ATP_COUNTER_STRUCT; for_each_field and add_counters walk it, so the
// simulator's sums, the daemons' JSON (and the Prometheus lines made from it) and the Python
// statistics never name a counter by hand.
#include <cstdint>

#define ATP_DECLARE_COUNTER(name, meaning) std::uint64_t name = 0;
#define ATP_VISIT_COUNTER(name, meaning) f(#name, meaning, &Self::name);

// struct Name { one uint64 per entry of LIST; static void members(f): f(name, meaning, &field) }
#define ATP_COUNTER_STRUCT(Name, LIST)        \
  struct Name {                               \
    LIST(ATP_DECLARE_COUNTER)                 \
    template <typename F>                     \
    static void members(F&& f) {              \
      using Self = Name;                      \
      LIST(ATP_VISIT_COUNTER)                 \
    }                                         \
  }

namespace atp::engines {

// Calls f(name, value) for every counter of `c`, in declaration order.
template <typename Counters, typename F>
void for_each_field(const Counters& c, F&& f) {
  Counters::members([&](const char* name, const char*, auto member) { f(name, c.*member); });
}

// a += b, field by field.
template <typename Counters>
void add_counters(Counters& a, const Counters& b) {
  Counters::members([&](const char*, const char*, auto member) { a.*member += b.*member; });
}

}  // namespace atp::engines
