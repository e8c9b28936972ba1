// Gather-sum of segment scores, the output side of a product-quantized table (see gather_sum.py).
//
// out[n, t] = sum_i S[i*k + codes[i*V + t], n] for n < N, t < V, with S the (m*k, ld) score table
// (row = concept, column = hidden state) and codes the segment-major (m, V) map.
// Plain C ABI (called through ctypes with data pointers). Built with -fopenmp where torch runs on
// GNU OpenMP: it then shares the runtime torch loaded (libgomp.so.1), so torch.set_num_threads applies.
#include <algorithm>
#include <cstdint>
#include <cstring>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "codes are read as little-endian 64-bit words");

typedef float v8 __attribute__((vector_size(32), aligned(4)));  // 8 floats; unaligned loads allowed

static inline v8 load8(const float* p) { return *reinterpret_cast<const v8*>(p); }
static inline void store8(float* p, v8 v) { *reinterpret_cast<v8*>(p) = v; }

// One hidden state (ld = 1), tokens [t0, t1): blocks of 512 tokens keep the partial sums in L1 while
// each segment's codes stream in order; four segments per pass cut the partial-sum loads and stores,
// and each code row is read a 64-bit word at a time (4 uint16 or 8 uint8 codes per load). Measured
// on Zen 2: 1.7x the speed of one load per code; AVX2 gathers were slower than either.
template <typename code_t>
static void one_state(const float* S, const code_t* codes, float* out, int64_t m, int64_t k, int64_t V,
                      int64_t t0, int64_t t1) {
  constexpr int64_t T = 512;
  constexpr int bits = 8 * sizeof(code_t), per = 64 / bits;  // codes per 64-bit word
  constexpr uint64_t mask = (uint64_t(1) << bits) - 1;
  float acc[T];
  for (int64_t b = t0; b < t1; b += T) {
    const int64_t n = std::min(T, t1 - b);
    std::fill(acc, acc + n, 0.f);
    int64_t i = 0;
    for (; i + 4 <= m; i += 4) {
      const float *s0 = S + i * k, *s1 = s0 + k, *s2 = s1 + k, *s3 = s2 + k;
      const code_t *c0 = codes + i * V + b, *c1 = c0 + V, *c2 = c1 + V, *c3 = c2 + V;
      int64_t t = 0;
      if constexpr (per > 1) {
        for (; t + per <= n; t += per) {
          uint64_t w0, w1, w2, w3;
          std::memcpy(&w0, c0 + t, 8), std::memcpy(&w1, c1 + t, 8), std::memcpy(&w2, c2 + t, 8), std::memcpy(&w3, c3 + t, 8);
          for (int u = 0; u < per; ++u, w0 >>= bits, w1 >>= bits, w2 >>= bits, w3 >>= bits)
            acc[t + u] += (s0[w0 & mask] + s1[w1 & mask]) + (s2[w2 & mask] + s3[w3 & mask]);
        }
      }
      for (; t < n; ++t) acc[t] += (s0[c0[t]] + s1[c1[t]]) + (s2[c2[t]] + s3[c3[t]]);
    }
    for (; i < m; ++i) {
      const float* s0 = S + i * k;
      const code_t* c0 = codes + i * V + b;
      for (int64_t t = 0; t < n; ++t) acc[t] += s0[c0[t]];
    }
    std::copy(acc, acc + n, out + b);
  }
}

// NB = 8 * W hidden states (columns j0..j0+NB of S, row stride ld), tokens [t0, t1), partial sums
// (T, NB) in acc. A code selects NB contiguous scores; four segments per pass over the block.
template <typename code_t, int W>
static void states(const float* S, int64_t ld, const code_t* codes, float* out, int64_t m, int64_t k, int64_t V,
                   int64_t valid, int64_t t0, int64_t t1, float* acc) {
  constexpr int NB = 8 * W;
  const int64_t n = t1 - t0;
  std::fill(acc, acc + n * NB, 0.f);
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) {
    const float *s0 = S + i * k * ld, *s1 = s0 + k * ld, *s2 = s1 + k * ld, *s3 = s2 + k * ld;
    const code_t *c0 = codes + i * V + t0, *c1 = c0 + V, *c2 = c1 + V, *c3 = c2 + V;
    for (int64_t t = 0; t < n; ++t) {
      const float *r0 = s0 + c0[t] * ld, *r1 = s1 + c1[t] * ld, *r2 = s2 + c2[t] * ld, *r3 = s3 + c3[t] * ld;
      float* a = acc + t * NB;
      for (int w = 0; w < W; ++w)
        store8(a + 8 * w, load8(a + 8 * w) + (load8(r0 + 8 * w) + load8(r1 + 8 * w)) + (load8(r2 + 8 * w) + load8(r3 + 8 * w)));
    }
  }
  for (; i < m; ++i) {
    const float* s0 = S + i * k * ld;
    const code_t* c0 = codes + i * V + t0;
    for (int64_t t = 0; t < n; ++t)
      for (int w = 0; w < W; ++w) store8(acc + t * NB + 8 * w, load8(acc + t * NB + 8 * w) + load8(s0 + c0[t] * ld + 8 * w));
  }
  for (int64_t j = 0; j < valid; ++j)
    for (int64_t t = 0; t < n; ++t) out[j * V + t0 + t] = acc[t * NB + j];
}

template <typename code_t>
static void run(const float* S, int64_t ld, const code_t* codes, float* out, int64_t N, int64_t m, int64_t k,
                int64_t V) {
  // threads only for at least ~1M gathered scores: below that, waking a second thread costs more
  // than it saves (and on a loaded machine a descheduled thread stalls the whole call)
  const bool threads = N * m * V >= (1 << 20);
  if (ld == 1) {
    constexpr int64_t B = 4096;
#pragma omp parallel for schedule(static) if (threads)
    for (int64_t blk = 0; blk < (V + B - 1) / B; ++blk)
      one_state<code_t>(S, codes, out, m, k, V, blk * B, std::min(V, (blk + 1) * B));
    return;
  }
  // columns in chunks of 16 (a last chunk of 8 where ld % 16 == 8); tokens in blocks of T, whose
  // partial sums (128 KiB) and four segments' score rows (256 KiB at 16 columns) stay in L2
  constexpr int64_t T = 2048;
  const int64_t chunks = (ld + 15) / 16, blocks = (V + T - 1) / T;
#pragma omp parallel if (threads)
  {
    alignas(64) static thread_local float acc[T * 16];
#pragma omp for schedule(static) collapse(2)
    for (int64_t c = 0; c < chunks; ++c)
      for (int64_t blk = 0; blk < blocks; ++blk) {
        const int64_t j0 = 16 * c, valid = std::min<int64_t>(16, N - j0), t0 = blk * T, t1 = std::min(V, t0 + T);
        if (valid <= 0) continue;
        if (ld - j0 >= 16)
          states<code_t, 2>(S + j0, ld, codes, out + j0 * V, m, k, V, valid, t0, t1, acc);
        else
          states<code_t, 1>(S + j0, ld, codes, out + j0 * V, m, k, V, valid, t0, t1, acc);
      }
  }
}

// Segment scores of one hidden state h (m*d): S[i*k + j] = h_i . C_i[j], C_i = books + i*k*d (or the
// one shared codebook). Serial: ~m*k*d multiply-adds (0.6 M for SmolLM2), less than a thread wake-up.
static void one_state_scores(const float* h, const float* books, bool shared, float* S, int64_t m, int64_t k, int64_t d) {
  for (int64_t i = 0; i < m; ++i) {
    const float* hi = h + i * d;
    const float* Ci = books + (shared ? 0 : i * k * d);
    float* Si = S + i * k;
    int64_t j = 0;
    for (; j + 4 <= k; j += 4) {  // four rows at once: independent sums keep the FMA units busy
      const float *c0 = Ci + j * d, *c1 = c0 + d, *c2 = c1 + d, *c3 = c2 + d;
      float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
      for (int64_t e = 0; e < d; ++e) {
        a0 += c0[e] * hi[e];
        a1 += c1[e] * hi[e];
        a2 += c2[e] * hi[e];
        a3 += c3[e] * hi[e];
      }
      Si[j] = a0, Si[j + 1] = a1, Si[j + 2] = a2, Si[j + 3] = a3;
    }
    for (; j < k; ++j) {
      float a = 0.f;
      for (int64_t e = 0; e < d; ++e) a += Ci[j * d + e] * hi[e];
      Si[j] = a;
    }
  }
}

extern "C" {
// S: (m*k, ld) float32, ld == 1 or a multiple of 8, N <= ld; codes: (m, V) with code_bytes 1 (uint8),
// 2 (uint16) or 4 (int32), values in [0, k); out: (N, V). Returns 0, or 1 for an unsupported layout.
int gather_sum(const float* S, int64_t ld, const void* codes, int code_bytes, float* out, int64_t N, int64_t m,
               int64_t k, int64_t V) {
  if (N < 1 || N > ld || (ld != 1 && ld % 8)) return 1;
  switch (code_bytes) {
    case 1: run(S, ld, static_cast<const uint8_t*>(codes), out, N, m, k, V); return 0;
    case 2: run(S, ld, static_cast<const uint16_t*>(codes), out, N, m, k, V); return 0;
    case 4: run(S, ld, static_cast<const int32_t*>(codes), out, N, m, k, V); return 0;
    default: return 1;
  }
}

// The whole head for one hidden state h (m*d floats): segment scores into S (m*k floats of
// workspace), then the gather-sum into out (V). books: (m*k, d), or (k, d) when shared.
int one_state_logits(const float* h, const float* books, int shared, float* S, const void* codes, int code_bytes,
                     float* out, int64_t m, int64_t k, int64_t d, int64_t V) {
  one_state_scores(h, books, shared != 0, S, m, k, d);
  return gather_sum(S, 1, codes, code_bytes, out, 1, m, k, V);
}
}
