"""The Triton kernels (harness/methods/*_triton.py) against their torch references.

Without a GPU they run on CPU tensors through Triton's interpreter (``TRITON_INTERPRET=1``, set by
conftest.py before Triton is imported); on a GPU machine the same cases run compiled on CUDA (the
``gpu`` tier). Shapes are small and ragged: vocabularies that no tile divides, batches of one
state and of more states than one tile holds, each code dtype the kernels may read.
"""

from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("triton", reason="the gpu extra (pip install -e '.[gpu]', make setup) brings Triton")

from harness.adapters.asg import ConceptEmbedding, ConceptLMHead  # noqa: E402
from harness.methods import concept_lookup_triton, gather_sum_triton  # noqa: E402

DEVICES = [
    pytest.param("cpu", id="interpreter", marks=pytest.mark.skipif(
        os.environ.get("TRITON_INTERPRET") != "1", reason="a CUDA device is present: the kernels run compiled (cuda cases)")),
    pytest.param("cuda", id="cuda", marks=pytest.mark.gpu),
]
TOLERANCE = {"rtol": 1e-5, "atol": 1e-5}  # fp32 sums of up to 16 terms of order 1, in another order


def _concepts(vocab: int, m: int, k: int, d: int, shared: bool = False, seed: int = 0) -> ConceptEmbedding:
    gen = torch.Generator().manual_seed(seed)
    books = torch.randn((1 if shared else m) * k, d, generator=gen)
    return ConceptEmbedding(books, torch.randint(0, k, (vocab, m), generator=gen), k, shared)


def _reference_logits(head: ConceptLMHead, hidden: torch.Tensor) -> torch.Tensor:
    return head.reference(hidden)


# vocabularies: below one tile, ragged over several (no tile size divides 1,001 or 300), and k
# across the uint8 / int32 boundary (a k > 256 map is uint16 on the CPU: the kernel's test reads it
# as int32, the dtype CUDA holds it in, and as uint16, the dtype stored)
HEAD_CASES = [  # (V, m, k, d)
    (37, 4, 16, 3),
    (1001, 8, 64, 4),
    (300, 6, 300, 2),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("vocab, m, k, d", HEAD_CASES)
@pytest.mark.parametrize("n", [1, 3, gather_sum_triton.MAX_BLOCK_N + 5])  # one state; a partial tile; more than a tile
@pytest.mark.parametrize("shared", [False, True])
def test_head_kernel_matches_the_reference(device, vocab, m, k, d, n, shared):
    head = ConceptLMHead(_concepts(vocab, m, k, d, shared)).to(device)
    hidden = torch.randn(n, m * d, generator=torch.Generator().manual_seed(1)).to(device)
    expected = _reference_logits(head, hidden)
    code_dtypes = {head.codes.dtype, torch.int32} | ({torch.uint16} if device == "cpu" and k > 256 else set())
    for dtype in code_dtypes:
        got = gather_sum_triton.logits(hidden, head.concepts.codebooks, head.codes.to(dtype), shared)
        assert got.shape == (n, vocab) and got.dtype == torch.float32
        torch.testing.assert_close(got, expected, **TOLERANCE, msg=f"codes {dtype}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("lut_dtype", [torch.float16, torch.bfloat16])
def test_half_precision_table_sums_in_fp32(device, lut_dtype):
    """The half-precision option: the kernel's sums equal the float32 sums of the rounded table.
    (The interpreter has no bfloat16 arithmetic: there the rounded table is handed over cast back
    to float32, which is what the kernel's load does with it.)"""
    head = ConceptLMHead(_concepts(1001, 8, 64, 4)).to(device)
    hidden = torch.randn(5, 32, generator=torch.Generator().manual_seed(2)).to(device)
    table = gather_sum_triton.lookup_table(hidden, head.concepts.codebooks, 8, False)
    rounded = table.to(lut_dtype)
    expected = torch.zeros(5, 1001, dtype=torch.float64, device=device)
    for i in range(8):
        expected += rounded[i].double()[head.codes[i].long()].T  # table (m, k, N): a code's row holds every state
    handed = rounded if device == "cuda" or lut_dtype == torch.float16 else rounded.float()
    got = gather_sum_triton.gather_sum(handed, head.codes)
    torch.testing.assert_close(got, expected.float(), **TOLERANCE)
    if device == "cuda":
        torch.testing.assert_close(gather_sum_triton.logits(hidden, head.concepts.codebooks, head.codes, False, lut_dtype), got)
    assert (got - _reference_logits(head, hidden)).abs().max() > 0  # the option does round


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("vocab, m, k, d", [(37, 4, 16, 3), (300, 10, 300, 20)])  # D = 12: one ragged column tile; 200: two
@pytest.mark.parametrize("shared", [False, True])
def test_lookup_kernel_is_the_reference_bit_for_bit(device, vocab, m, k, d, shared):
    concepts = _concepts(vocab, m, k, d, shared).to(device)
    # ids in [-V, V): a negative id counts from the end, as torch's indexing reads it
    ids = torch.randint(-vocab, vocab, (3, concept_lookup_triton.BLOCK_T + 3), generator=torch.Generator().manual_seed(3)).to(device)
    expected = F.embedding(concepts.concept_ids[ids].long() + concepts.segment_offsets, concepts.codebooks).flatten(-2)
    for dtype in {concepts.concept_ids.dtype, torch.int32}:
        got = concept_lookup_triton.lookup(ids, concepts.codebooks, concepts.concept_ids.to(dtype), k, shared)
        assert got.shape == (*ids.shape, m * d)
        assert torch.equal(got, expected), f"ConceptIDs {dtype}"
    one = concept_lookup_triton.lookup(ids[:1, :1], concepts.codebooks, concepts.concept_ids, k, shared)
    assert torch.equal(one, expected[:1, :1])


@pytest.mark.gpu
def test_cuda_inference_takes_the_kernels_and_training_the_reference():
    """On CUDA in inference the heads and the lookup give the kernels' results; with gradients the
    torch reference runs (and gradients reach the codebooks)."""
    concepts = _concepts(1001, 8, 300, 4).cuda()
    head = ConceptLMHead(concepts)
    hidden = torch.randn(3, 32, device="cuda")
    ids = torch.randint(0, 1001, (2, 9), device="cuda")
    with torch.no_grad():
        assert torch.equal(head(hidden), gather_sum_triton.logits(hidden, concepts.codebooks, head.codes, False))
        assert torch.equal(concepts(ids), concept_lookup_triton.lookup(ids, concepts.codebooks, concepts.concept_ids, 300, False))
    loss = head(hidden).sum() + concepts(ids).sum()
    loss.backward()
    assert concepts.codebooks.grad is not None and concepts.codebooks.grad.abs().sum() > 0
