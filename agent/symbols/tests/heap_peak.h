// Peak heap bytes of the whole program (every operator new, all threads) for the tests that
// bound what one parse may allocate. Linking heap_peak.cpp replaces the global operator
// new/delete; sizes come from malloc_usable_size, so they include the allocator's rounding.
#pragma once

#include <cstdint>

namespace sonde::symbols::testing {

// Starts a measurement: the peak becomes the bytes live now.
void reset_heap_peak();
// Most bytes live at once since the last reset_heap_peak(), minus those live at the reset.
uint64_t heap_peak_since_reset();

}  // namespace sonde::symbols::testing
