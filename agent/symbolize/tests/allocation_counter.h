// Counts every operator new of the program that links allocation_counter.cpp (it replaces the
// global operator new/delete), so tests and benchmarks can check "no allocation per lookup".
#pragma once

#include <cstdint>

namespace sonde::symbolize::testing {

// Allocations made so far by the whole program (all threads).
uint64_t allocations();

}  // namespace sonde::symbolize::testing
