// Gather-sum of segment scores, the output side of a product-quantized table (see gather_sum.py).
//
// out[n, t] = sum_i S[i*k + codes[i*V + t], n] for n < N, t < V, with S the (m*k, ld) score table
// (row = concept, column = hidden state) and codes the segment-major (m, V) map.
// Also the low-rank head's product (low_rank_logits), which shares the pool.
// Plain C ABI (called through ctypes with data pointers); threads from its own work-sharing pool below.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "codes are read as little-endian 64-bit words");

typedef float v8 __attribute__((vector_size(32), aligned(4)));  // 8 floats; unaligned loads allowed

static inline v8 load8(const float* p) { return *reinterpret_cast<const v8*>(p); }
static inline void store8(float* p, v8 v) { *reinterpret_cast<v8*>(p) = v; }

// Work sharing that stays fast on a shared machine. The caller and up to threads - 1 helpers claim
// the blocks [0, n) of one call from a single counter; helpers sleep on a futex between calls
// (std::atomic::wait: a passive wait, no spinning), and the caller returns once every claimed block
// is done. A helper the scheduler has not run yet claims nothing, so the caller never waits for it:
// under OpenMP the end-of-region barrier waits for every team thread, a whole scheduler slice when
// another process holds that thread's core. Here a taken core costs at most the caller's own speed.
namespace pool {

using Body = void (*)(const void* ctx, int64_t block);

struct State {
  std::atomic<uint64_t> ticket{0};  // (call << 32) | next unclaimed block of that call
  std::atomic<uint32_t> calls{0};   // helpers sleep on this word until the next call
  std::atomic<Body> body{nullptr};  // the current call (written before its ticket is released)
  std::atomic<const void*> ctx{nullptr};
  std::atomic<int64_t> blocks{0}, done{0};
  std::atomic<int> helpers{0};      // helpers allowed to join the current call
  std::mutex submit;                // one call at a time; a concurrent caller runs its blocks alone
  int started = 0;                  // helper threads started so far (under submit)
};

static State& state() {
  static State* s = new State;  // never destroyed: detached helpers may outlive static destructors
  return *s;
}

// Claim and run blocks until the current call has none left. A claim succeeds only while its call
// still has unclaimed blocks, so that call's body, context and done counter are the current ones.
static void work(State& s) {
  uint64_t seen = s.ticket.load(std::memory_order_acquire);
  while (int64_t(seen & 0xffffffffu) < s.blocks.load(std::memory_order_relaxed)) {
    if (s.ticket.compare_exchange_weak(seen, seen + 1, std::memory_order_acquire)) {
      s.body.load(std::memory_order_relaxed)(s.ctx.load(std::memory_order_relaxed), int64_t(seen & 0xffffffffu));
      s.done.fetch_add(1, std::memory_order_release);
      seen = s.ticket.load(std::memory_order_acquire);
    }
  }
}

static void helper(int index) {
  State& s = state();
  for (uint32_t call = s.calls.load(std::memory_order_acquire);; call = s.calls.load(std::memory_order_acquire)) {
    if (index < s.helpers.load(std::memory_order_relaxed)) work(s);
    s.calls.wait(call, std::memory_order_acquire);  // returns at once if a call came in meanwhile
  }
}

// body(ctx, b) for every b in [0, blocks), on the caller and up to threads - 1 helpers.
static void run(Body body, const void* ctx, int64_t blocks, int threads) {
  State& s = state();
  std::unique_lock<std::mutex> lock(s.submit, std::try_to_lock);
  if (threads < 2 || blocks < 2 || !lock.owns_lock()) {
    for (int64_t b = 0; b < blocks; ++b) body(ctx, b);
    return;
  }
  try {
    for (; s.started < threads - 1; ++s.started) std::thread(helper, s.started).detach();
  } catch (const std::system_error&) {  // no more threads allowed: share with the helpers there are
  }
  s.body.store(body, std::memory_order_relaxed);
  s.ctx.store(ctx, std::memory_order_relaxed);
  s.blocks.store(blocks, std::memory_order_relaxed);
  s.done.store(0, std::memory_order_relaxed);
  s.helpers.store(threads - 1, std::memory_order_relaxed);
  s.ticket.store(((s.ticket.load(std::memory_order_relaxed) >> 32) + 1) << 32, std::memory_order_release);
  s.calls.fetch_add(1, std::memory_order_release);
  s.calls.notify_all();
  work(s);
  while (s.done.load(std::memory_order_acquire) < blocks) std::this_thread::yield();  // blocks helpers hold
}

template <typename F>
static void parallel_for(int64_t blocks, int threads, const F& f) {
  run([](const void* ctx, int64_t b) { (*static_cast<const F*>(ctx))(b); }, &f, blocks, threads);
}

}  // namespace pool

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
                int64_t V, int threads) {
  // threads only for at least ~1M gathered scores: below that, waking a second thread costs more than it saves
  if (N * m * V < (1 << 20)) threads = 1;
  if (ld == 1) {
    constexpr int64_t B = 2048;
    pool::parallel_for((V + B - 1) / B, threads, [&](int64_t blk) {
      one_state<code_t>(S, codes, out, m, k, V, blk * B, std::min(V, (blk + 1) * B));
    });
    return;
  }
  // the N columns in chunks of 16 (a last chunk of 8 where it ends 8 columns before ld); tokens in
  // blocks of T, whose partial sums (128 KiB) and four segments' score rows (256 KiB at 16 columns) stay in L2
  constexpr int64_t T = 2048;
  const int64_t chunks = (N + 15) / 16, blocks = (V + T - 1) / T;
  pool::parallel_for(chunks * blocks, threads, [&](int64_t job) {
    alignas(64) static thread_local float acc[T * 16];
    const int64_t j0 = 16 * (job / blocks), valid = std::min<int64_t>(16, N - j0), t0 = (job % blocks) * T;
    const int64_t t1 = std::min(V, t0 + T);
    if (ld - j0 >= 16)
      states<code_t, 2>(S + j0, ld, codes, out + j0 * V, m, k, V, valid, t0, t1, acc);
    else
      states<code_t, 1>(S + j0, ld, codes, out + j0 * V, m, k, V, valid, t0, t1, acc);
  });
}

// Segment scores of one hidden state h (m*d): S[i*k + j] = h_i . C_i[j], C_i = books + i*k*d (or the
// one shared codebook); ~m*k*d multiply-adds (0.6 M for SmolLM2, 0.14 ms on one Zen 3 core), one block
// per segment shared out like the gather-sum where there are enough of them to pay for a wake-up.
static void one_state_scores(const float* h, const float* books, bool shared, float* S, int64_t m, int64_t k, int64_t d,
                             int threads) {
  if (m * k * d < (1 << 18)) threads = 1;
  pool::parallel_for(m, threads, [&](int64_t i) {
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
  });
}

// Segment scores of N hidden states h (N, m*d) into S (m*k, ld), ld a multiple of 8 and N <= ld:
// S[i*k + j, n] = h_n,i . C_i[j] and zero padding columns. ht (m*d, ld) is h transposed, so that a
// score row is d multiply-adds of 8-column vectors; four rows at once share each vector of ht.
// One block per segment: the scores of a batch (19 M multiply-adds at 32 states of SmolLM2) share
// out like the gather-sum, and no torch operation (an OpenMP region) runs inside the head.
static void many_state_scores(const float* h, const float* books, bool shared, float* S, float* ht, int64_t N,
                              int64_t ld, int64_t m, int64_t k, int64_t d, int threads) {
  std::fill(ht, ht + m * d * ld, 0.f);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < m * d; ++c) ht[c * ld + n] = h[n * m * d + c];
  if (N * m * k * d < (1 << 20)) threads = 1;
  pool::parallel_for(m, threads, [&](int64_t i) {
    const float* Ci = books + (shared ? 0 : i * k * d);
    const float* hi = ht + i * d * ld;
    int64_t j = 0;
    for (; j + 4 <= k; j += 4) {
      const float *c0 = Ci + j * d, *c1 = c0 + d, *c2 = c1 + d, *c3 = c2 + d;
      float* row = S + (i * k + j) * ld;
      for (int64_t w = 0; w < ld; w += 8) {
        v8 a0 = {}, a1 = {}, a2 = {}, a3 = {};
        for (int64_t e = 0; e < d; ++e) {
          const v8 x = load8(hi + e * ld + w);
          a0 += c0[e] * x, a1 += c1[e] * x, a2 += c2[e] * x, a3 += c3[e] * x;
        }
        store8(row + w, a0), store8(row + ld + w, a1), store8(row + 2 * ld + w, a2), store8(row + 3 * ld + w, a3);
      }
    }
    for (; j < k; ++j)
      for (int64_t w = 0; w < ld; w += 8) {
        v8 a = {};
        for (int64_t e = 0; e < d; ++e) a += Ci[j * d + e] * load8(hi + e * ld + w);
        store8(S + (i * k + j) * ld + w, a);
      }
  });
}

// Horizontal sum of a v8.
static inline float sum8(v8 v) {
  float s = 0.f;
  for (int i = 0; i < 8; ++i) s += v[i];
  return s;
}

// a . b over len floats: four independent 8-float sums (multiply-add latency), then 8 floats, then a scalar tail.
static inline float dot(const float* a, const float* b, int64_t len) {
  v8 a0 = {}, a1 = {}, a2 = {}, a3 = {};
  int64_t e = 0;
  for (; e + 32 <= len; e += 32) {
    a0 += load8(a + e) * load8(b + e), a1 += load8(a + e + 8) * load8(b + e + 8);
    a2 += load8(a + e + 16) * load8(b + e + 16), a3 += load8(a + e + 24) * load8(b + e + 24);
  }
  for (; e + 8 <= len; e += 8) a0 += load8(a + e) * load8(b + e);
  float s = sum8((a0 + a1) + (a2 + a3));
  for (; e < len; ++e) s += a[e] * b[e];
  return s;
}

// The low-rank head (adapters/lowrank.py): low = h B^T (N, r) on the caller, then out[n, t] = low_n . A[t]
// (+ bias[t]) over the (V, r) lookup A in blocks of 512 rows shared by the pool, so that the head runs
// no torch operation (OpenMP region) and keeps its speed beside a busy process. One state: a dot per
// row, four rows at once. Several: low transposed into lt (r, ld), ld = N rounded up to 16, so that
// four rows of A and sixteen states give eight independent sums of r multiply-adds of 8-state vectors
// (as the segment scores above), each row of A read once per call.
static void low_rank_head(const float* h, const float* B, const float* A, const float* bias, float* low, float* lt,
                          float* out, int64_t N, int64_t D, int64_t r, int64_t V, int threads) {
  const int64_t ld = (N + 15) / 16 * 16;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < r; ++j) low[n * r + j] = dot(h + n * D, B + j * D, D);
  if (N > 1) {
    std::fill(lt, lt + r * ld, 0.f);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < r; ++j) lt[j * ld + n] = low[n * r + j];
  }
  constexpr int64_t rows = 512;
  pool::parallel_for((V + rows - 1) / rows, threads, [&](int64_t block) {
    const int64_t t0 = block * rows, t1 = std::min(V, t0 + rows);
    int64_t t = t0;
    if (N == 1) {
      for (; t + 4 <= t1; t += 4) {
        const float *a0 = A + t * r, *a1 = a0 + r, *a2 = a1 + r, *a3 = a2 + r;
        out[t] = dot(low, a0, r), out[t + 1] = dot(low, a1, r), out[t + 2] = dot(low, a2, r), out[t + 3] = dot(low, a3, r);
      }
    } else {
      for (; t + 4 <= t1; t += 4) {  // four rows by sixteen states: eight independent sums, each loaded vector used 4x
        const float* a = A + t * r;
        for (int64_t w = 0; w < ld; w += 16) {
          v8 acc[4][2] = {};
          for (int64_t j = 0; j < r; ++j) {
            const v8 x0 = load8(lt + j * ld + w), x1 = load8(lt + j * ld + w + 8);
            for (int i = 0; i < 4; ++i) {
              const float ai = a[i * r + j];
              acc[i][0] += ai * x0, acc[i][1] += ai * x1;
            }
          }
          for (int64_t q = 0; q < std::min<int64_t>(16, N - w); ++q)
            for (int i = 0; i < 4; ++i) out[(w + q) * V + t + i] = acc[i][q / 8][q % 8];
        }
      }
    }
    for (; t < t1; ++t)
      for (int64_t n = 0; n < N; ++n) out[n * V + t] = dot(low + n * r, A + t * r, r);
    if (bias != nullptr)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t u = t0; u < t1; ++u) out[n * V + u] += bias[u];
  });
}

extern "C" {
// h: (N, D), B: (r, D), A: (V, r), bias: (V) or null, out: (N, V); workspace: low N*r floats, lt r*ld
// floats (ld = N rounded up to 16; unused for one state).
int low_rank_logits(const float* h, const float* B, const float* A, const float* bias, float* low, float* lt,
                    float* out, int64_t N, int64_t D, int64_t r, int64_t V, int threads) {
  if (N < 1 || r < 1) return 1;
  low_rank_head(h, B, A, bias, low, lt, out, N, D, r, V, threads);
  return 0;
}

// S: (m*k, ld) float32, ld == 1 or a multiple of 8, N <= ld; codes: (m, V) with code_bytes 1 (uint8),
// 2 (uint16) or 4 (int32), values in [0, k); out: (N, V). Returns 0, or 1 for an unsupported layout.
int gather_sum(const float* S, int64_t ld, const void* codes, int code_bytes, float* out, int64_t N, int64_t m,
               int64_t k, int64_t V, int threads) {
  if (N < 1 || N > ld || (ld != 1 && ld % 8)) return 1;
  switch (code_bytes) {
    case 1: run(S, ld, static_cast<const uint8_t*>(codes), out, N, m, k, V, threads); return 0;
    case 2: run(S, ld, static_cast<const uint16_t*>(codes), out, N, m, k, V, threads); return 0;
    case 4: run(S, ld, static_cast<const int32_t*>(codes), out, N, m, k, V, threads); return 0;
    default: return 1;
  }
}

// The whole head for N hidden states h (N, m*d floats): segment scores into S (m*k*ld floats of
// workspace; ld = 1 for one state, else N rounded up to 8), then the gather-sum into out (N, V).
// books: (m*k, d), or (k, d) when shared; ht: m*d*ld floats of workspace (unused for one state).
int logits(const float* h, const float* books, int shared, float* S, float* ht, const void* codes, int code_bytes,
           float* out, int64_t N, int64_t m, int64_t k, int64_t d, int64_t V, int threads) {
  const int64_t ld = N == 1 ? 1 : (N + 7) / 8 * 8;
  if (N == 1)
    one_state_scores(h, books, shared != 0, S, m, k, d, threads);
  else
    many_state_scores(h, books, shared != 0, S, ht, N, ld, m, k, d, threads);
  return gather_sum(S, ld, codes, code_bytes, out, N, m, k, V, threads);
}
}
