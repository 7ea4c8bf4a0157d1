// Fuzz target: IR text -> parse -> verify -> print, and the printed text parses to the same text. A user error is the
// expected end of bad text; anything else (or a round trip that changes the text) is a bug.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "ir/error.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text;
  try {
    cleave::Graph g = cleave::parse_graph(std::string(reinterpret_cast<const char *>(data), size), "fuzz.ir");
    cleave::verify(g);
    text = cleave::print_graph(g);
  } catch (const cleave::UserError &) {
    return 0;
  }
  // What the printer writes, the parser reads back to the same text.
  if (cleave::print_graph(cleave::parse_graph(text, "printed.ir")) != text) std::abort();
  return 0;
}
