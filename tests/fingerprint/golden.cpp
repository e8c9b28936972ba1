// Golden source for the C/C++ rule (fingerprint.normalized_c): comments in every form, literals that
// hold comment markers and runs of spaces, a directive continued over lines. Never compiled.
#include <cstdint>   /* trailing block comment */
#define TWICE(x) \
  ((x) + (x))

/* a block comment
   over several lines */
static const char* kMarkers = "// not a comment /* nor this */  two  spaces";
static const char kQuote = '\'';
static const char kSlash = '/';

extern "C" int64_t sum(const int64_t* v, int64_t n) {
  int64_t total = 0;  // running sum
  for (int64_t i = 0; i < n; ++i) total += TWICE(v[i]) /* doubled */ / 2;
  return total;
}
