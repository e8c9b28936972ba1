"""Sense dictionaries (paper 004): sampling, clustering, the drop-in, the SKD loss and the word senses adapters declare, on small real objects."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertModel

from harness.errors import DataError
from harness.methods.kmeans import fit_threads
from harness.methods.senses.cluster import build, kmeans_senses, mcl_clusters, mcl_senses, senses_wanted, token_senses
from harness.methods.senses.collect import TokenVectors, Window, backbone_of, collect, fit_windows
from harness.methods.senses.dictionary import sense_cross_entropy, teacher_senses
from harness.methods.senses.fit import SenseBudget

VOCAB = 60


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny tensors: two spinning OpenMP threads on a busy 2-core machine cost 100x (measured)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    with fit_threads(1):
        yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny_encoder():
    torch.manual_seed(0)
    config = BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
    return BertModel(config).eval()


@pytest.fixture(scope="module")
def windows():
    rng = np.random.default_rng(0)
    # token 1 is frequent, token 59 never occurs
    return [[1, *rng.integers(2, VOCAB - 1, size=int(rng.integers(4, 16))), 1] for _ in range(40)]


@pytest.fixture(scope="module")
def sampled(tiny_encoder, windows):
    return collect(tiny_encoder, [Window(w) for w in windows], cap=6, vocab_size=VOCAB, pad_id=0, batch_size=8, seed=0)


def test_collect_counts_every_token_and_caps_a_uniform_sample(tiny_encoder, windows, sampled):
    occurrences = np.bincount(np.concatenate(windows), minlength=VOCAB)
    assert sampled.tokens_read == occurrences.sum()
    assert np.array_equal(sampled.ids, np.flatnonzero(occurrences))
    assert np.array_equal(sampled.seen, occurrences[sampled.ids])
    kept = np.diff(sampled.offsets)
    assert np.array_equal(kept, np.minimum(occurrences[sampled.ids], 6))
    # every kept vector is one of the token's real last-layer vectors (fp16-rounded)
    with torch.no_grad():
        states = [tiny_encoder(input_ids=torch.tensor([w])).last_hidden_state[0].numpy() for w in windows]
    real = np.concatenate(states)[np.concatenate(windows) == 1]
    for v in sampled.of(int(np.flatnonzero(sampled.ids == 1)[0])):
        assert np.abs(real - v.astype(np.float32)).max(axis=1).min() < 1e-2
    again = collect(tiny_encoder, [Window(w) for w in windows], cap=6, vocab_size=VOCAB, pad_id=0, batch_size=3, seed=0)
    assert np.array_equal(again.vectors, sampled.vectors)  # the sample does not depend on batching
    smaller = collect(tiny_encoder, [Window(w) for w in windows], cap=2, vocab_size=VOCAB, pad_id=0, batch_size=8, seed=0)
    assert np.array_equal(sampled.capped(2).vectors, smaller.vectors)
    assert np.array_equal(sampled.capped(2).offsets, smaller.offsets)


def test_build_keeps_few_vectors_and_clusters_many(sampled):
    d = build(sampled, VOCAB, k=4, clustering="kmeans", fp16=False)
    counts = d.counts().numpy()
    kept = np.diff(sampled.offsets)
    assert np.array_equal(counts[sampled.ids], np.minimum(kept, 4))
    assert counts[59] == 0 and counts[0] == 0
    few = int(np.flatnonzero(kept <= 4)[0])
    token = sampled.ids[few]
    stored = d.senses[d.offsets[token]:d.offsets[token + 1]].numpy()
    assert np.allclose(stored, sampled.of(few).astype(np.float32))
    stats = d.statistics(4)
    assert stats["tokens_with_senses"] == len(sampled.ids)
    assert sum(n * c for n, c in stats["senses_per_token_histogram"].items()) == stats["senses"] == len(d.senses)
    assert stats["tokens_below_k"] == int((np.minimum(kept, 4) < 4).sum())
    assert stats["dictionary_bytes"] == d.senses.numel() * 4 + (VOCAB + 1) * 8
    assert build(sampled, VOCAB, k=4, clustering="kmeans").senses.dtype == torch.float16


def test_too_little_text_for_min_count_is_a_data_error(sampled):
    with pytest.raises(DataError, match="gives no token a sense"):
        build(sampled, VOCAB, k=4, clustering="kmeans", min_count=10_000)


def _groups(n_groups: int, per_group: int, seed: int = 0, dim: int = 16) -> np.ndarray:
    """Points in ``n_groups`` tight, far-apart groups."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(n_groups, dim)) * 10
    return np.concatenate([c + 0.1 * rng.normal(size=(per_group, dim)) for c in centers])


def test_mcl_finds_separated_groups_and_sets_k_from_them():
    points = _groups(3, 30)
    assert mcl_clusters(points) == 3
    # c = 3 clusters (<= 900): k_t = max(int(0.1 * 3), 5) = 5, whatever k (it caps only k-means)
    assert senses_wanted(points, 15, "mcl") == (5, 3)
    assert senses_wanted(points, 4, "mcl") == (5, 3)
    assert senses_wanted(points, 4, "kmeans") == (4, 0)
    assert senses_wanted(points[:4], 2, "mcl") == (4, 0)  # under 5 vectors: kept as they are, no MCL
    assert senses_wanted(points[:7], 15, "mcl")[0] <= 7  # never more senses than vectors
    assert [mcl_senses(c, 2000) for c in (1, 49, 160, 900, 901)] == [5, 5, 16, 90, 360]  # 10%, 40% above 900


def test_mcl_gives_a_token_more_than_k_senses_and_table6_counts_it():
    """Paper 004 Table 6: with MCL each token gets its own number of senses, more than 15 for a
    fifth of Llama's tokens. 170 separated groups: c = 170, k_t = int(0.1 * 170) = 17 > k = 15."""
    many, few = _groups(170, 2, seed=1, dim=64), _groups(3, 30, seed=2, dim=64)  # 64 dimensions: no two of 170 groups touch
    vectors = np.concatenate([many, few]).astype(np.float16)
    sampled = TokenVectors(np.array([3, 7]), np.array([0, len(many), len(vectors)]), vectors, np.array([len(many), len(few)]), len(vectors))
    d = build(sampled, VOCAB, k=15, clustering="mcl", fp16=False)
    assert d.counts()[3] == 17 and d.counts()[7] == 5
    assert build(sampled, VOCAB, k=15, clustering="kmeans").counts()[3] == 15
    stats = d.statistics(15)
    assert stats["senses_per_token_histogram"] == {5: 1, 17: 1}
    assert stats["table6"] == {"n_valid_tokens": 2, "n_tokens_le15_senses": 1, "pct_tokens_le15_senses": 50.0,
                               "n_tokens_gt15_senses": 1, "pct_tokens_gt15_senses": 50.0}
    assert stats["mcl"] == {"tokens_clustered": 2, "tokens_one_cluster": 0, "clusters_median": 86.5,
                            "clusters_p90": pytest.approx(153.3), "clusters_max": 170}
    assert stats["dictionary_bytes"] == d.nbytes() == sum(t.numel() * t.element_size() for t in d.state_dict().values())
    assert "mcl" not in build(sampled, VOCAB, k=15, clustering="kmeans").statistics(15)


def _authors_mcl_count(x: np.ndarray) -> int:
    """The Markov cluster count of the authors' a1_mclmulti.py (SenseDictionary/Llama), written out
    step by step in numpy from what it runs (``markov_clustering.run_mcl`` and ``get_clusters`` with
    inflation 1.65, expansion 2 and the library's defaults): similarity 1 / (euclidean + 0.01), the
    diagonal set to the self-loop weight 1, columns normalised; then up to 100 times: square,
    raise to 1.65 and renormalise the columns, zero entries below 1e-3 except each column's largest,
    stop when unchanged (np.allclose); one cluster per distinct row of an attractor (a node with
    flow to itself)."""
    x = x.astype(np.float64)
    m = 1.0 / (np.sqrt(((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)) + 0.01)
    np.fill_diagonal(m, 1.0)
    m = m / m.sum(0)
    for _ in range(100):
        last = m
        m = (m @ m) ** 1.65
        m = m / m.sum(0)
        keep = m >= 1e-3
        keep[m.argmax(0), np.arange(len(m))] = True
        m = np.where(keep, m, 0.0)
        if np.allclose(m, last):
            break
    return len({tuple(np.flatnonzero(m[a])) for a in np.flatnonzero(np.diag(m))})


def _authors_senses(x: np.ndarray) -> int:
    """Senses per token of the authors' a1_kmeans_withmcl.py (run_multithread_cluster.sh's settings):
    under 5 vectors none are clustered (MCL "returns" the vectors); k = int(0.4 c) above 900 MCL
    clusters, else int(0.1 c), raised to 5; the vectors themselves when there are no more than k."""
    c = len(x) if len(x) < 5 else _authors_mcl_count(x)
    k = max(int(c * (0.4 if c > 900 else 0.1)), 5)
    return len(x) if len(x) <= k else k


def test_mcl_counts_equal_the_authors_procedure_and_follow_the_vectors_scale():
    """Per-token sense counts equal the authors' procedure (step by step above) on fixed vectors,
    in both of MCL's regimes: one Gaussian cloud with distances about 5 (as MiniLM's last layer
    has) is one cluster, so 5 senses; the same cloud 10x or 30x larger is split, into 22 and into
    one cluster per vector (200, so 20 senses: more than Table 6's 15): the similarity's self-loop
    weight is fixed at 1 while the similarities scale as 1 / distance, so the count follows the
    vectors' scale, not their geometry."""
    rng = np.random.default_rng(0)
    cloud = rng.normal(size=(200, 16))
    tokens = [cloud[:60], 10 * cloud, 30 * cloud, _groups(3, 30), cloud[:4]]
    expected_clusters = [1, 22, 200, 3, 0]
    for x, c in zip(tokens, expected_clusters, strict=True):
        assert senses_wanted(x.astype(np.float32), 15, "mcl")[1] == c
        if c:
            assert _authors_mcl_count(x.astype(np.float32)) == c
    vectors = np.concatenate(tokens).astype(np.float16)
    offsets = np.cumsum([0, *map(len, tokens)])
    ids = np.arange(2, 2 + len(tokens))
    sampled = TokenVectors(ids, offsets, vectors, np.diff(offsets), len(vectors))
    d = build(sampled, VOCAB, k=15, clustering="mcl", fp16=False)
    authors = [_authors_senses(sampled.of(i).astype(np.float32)) for i in range(len(ids))]
    assert d.counts()[ids].tolist() == authors == [5, 5, 20, 5, 4]
    assert d.statistics(15)["mcl"]["tokens_one_cluster"] == 1


def test_mcl_gives_minilms_frequent_tokens_one_cluster(minilm_ref, data_dir):
    """Why MiniLM's dictionary has 5 senses everywhere (docs/methods.md): its last-layer vectors
    of one token lie within a few units of each other, so MCL finds a single cluster (as the
    authors' procedure does on them); the same vectors 30x larger split into many clusters."""
    from transformers import AutoModel, AutoTokenizer

    from harness.sources import corpora

    tokenizer, model = AutoTokenizer.from_pretrained(minilm_ref.location), AutoModel.from_pretrained(minilm_ref.location)
    texts = corpora.load("wikitext2_train", data_dir).texts
    windows = fit_windows(tokenizer, texts, 128, 4_000, seed=0)
    sampled = collect(model, windows, 120, model.get_input_embeddings().num_embeddings,
                             pad_id=tokenizer.pad_token_id, batch_size=16, seed=0)
    frequent = int(np.argmax(np.diff(sampled.offsets)))
    x = sampled.of(frequent).astype(np.float32)
    assert len(x) == 120 and np.median(np.linalg.norm(x[:, None] - x[None], axis=-1)) < 10
    assert mcl_clusters(x) == _authors_mcl_count(x) == 1
    assert mcl_clusters(30 * x) == _authors_mcl_count(30 * x) > 60
    stats = build(sampled, model.get_input_embeddings().num_embeddings, 15, "mcl").statistics(15)
    assert stats["mcl"]["tokens_one_cluster"] >= 0.9 * stats["mcl"]["tokens_clustered"] > 0
    assert stats["table6"]["n_tokens_gt15_senses"] == 0


def test_drop_in_picks_the_largest_dot_product_and_feeds_the_pooler(tiny_encoder, sampled, windows):
    d = build(sampled, VOCAB, k=3, clustering="kmeans", fp16=False)
    ids = torch.tensor([windows[0][:6], [59, 59, 1, 1, 2, 59]])
    with torch.no_grad():
        plain = tiny_encoder(input_ids=ids).last_hidden_state
        chosen = d.choose(ids, plain)
    for b in range(2):
        for t in range(6):
            token = int(ids[b, t])
            rows = d.senses[d.offsets[token]:d.offsets[token + 1]]
            if not len(rows):
                assert torch.equal(chosen[b, t], plain[b, t])  # no entry: the vector is kept
            else:
                assert torch.equal(chosen[b, t], rows[(rows @ plain[b, t]).argmax()])
    assert torch.equal(d.choose(ids[1:, :2], plain[1:, :2]), plain[1:, :2])  # no token with an entry: all kept
    model = BertModel(tiny_encoder.config).eval()
    model.load_state_dict(tiny_encoder.state_dict())
    d.attach(model)
    with torch.no_grad():
        out = model(input_ids=ids)
        tuple_out = model(input_ids=ids, return_dict=False)
    assert torch.equal(out.last_hidden_state, chosen)
    assert torch.allclose(out.pooler_output, model.pooler(chosen))
    assert torch.equal(tuple_out[0], chosen)
    assert "sense_dictionary.senses" in model.state_dict()


def test_one_sense_per_token_makes_vectors_static(sampled):
    d = build(sampled, VOCAB, k=1, clustering="kmeans", fp16=False)
    i = int(np.flatnonzero(sampled.ids == 1)[0])
    assert torch.equal(d.senses[d.offsets[1]], torch.from_numpy(sampled.of(i).astype(np.float32).mean(0)))  # the mean, exactly
    many = np.random.default_rng(0).normal(size=(600, 8))  # more than faiss's 256 training points for one centroid
    np.testing.assert_array_equal(token_senses(many, 1, 0), many.astype(np.float32).mean(0, keepdims=True))
    a, b = torch.randn(1, 1, 32), torch.randn(1, 1, 32)
    ids = torch.tensor([[1]])
    assert torch.equal(d.choose(ids, a), d.choose(ids, b))


def test_drop_in_on_a_causal_lm_feeds_the_lm_head(tiny_decoder):
    rng = np.random.default_rng(1)
    windows = [list(rng.integers(0, 512, size=12)) for _ in range(20)]
    sampled = collect(backbone_of(tiny_decoder), [Window(w) for w in windows], cap=8, vocab_size=512, pad_id=0, batch_size=4, seed=0)
    d = build(sampled, 512, k=2, clustering="kmeans")
    ids = torch.tensor([windows[0]])
    with torch.no_grad():
        hidden = tiny_decoder.model(input_ids=ids).last_hidden_state
        d.attach(tiny_decoder)
        logits = tiny_decoder(input_ids=ids).logits
    assert torch.allclose(logits, tiny_decoder.lm_head(d.choose(ids, hidden)), atol=1e-5)


def test_sense_cross_entropy_is_the_papers_loss_and_trains_an_aligned_student(sampled):
    d = build(sampled, VOCAB, k=3, clustering="kmeans", fp16=False)
    ids = torch.tensor([[1, 2, 59, 3]])
    mask = torch.tensor([[1, 1, 1, 0]])
    teacher = torch.randn(1, 4, 32)
    student = torch.randn(1, 4, 32, requires_grad=True)
    labels = teacher_senses(d, ids, mask, teacher)
    assert labels[0, 2] == -1 and labels[0, 3] == -1  # no entry; padding
    loss, _ = sense_cross_entropy(d, ids, labels, student)
    manual = []
    for t in (0, 1):  # token 59 has no entry and position 3 is padding
        rows = d.senses[d.offsets[int(ids[0, t])]:d.offsets[int(ids[0, t]) + 1]]
        label = (rows @ teacher[0, t]).argmax()
        manual.append(-torch.log_softmax(rows @ student[0, t], 0)[label])
    assert torch.allclose(loss, torch.stack(manual).mean())
    loss.backward()
    assert student.grad[0, :2].abs().sum() > 0 and student.grad[0, 2:].abs().sum() == 0
    _, agree = sense_cross_entropy(d, ids, labels, teacher)
    assert agree == 1.0
    # W_align: a narrower student (16 wide) learns to pick the teacher's senses
    torch.manual_seed(0)
    d.align = torch.nn.Linear(16, 32)
    narrow = torch.randn(1, 4, 16, requires_grad=True)
    opt = torch.optim.Adam([narrow, *d.align.parameters()], lr=0.05)
    for _ in range(100):
        opt.zero_grad()
        loss, agree = sense_cross_entropy(d, ids, labels, narrow)
        loss.backward()
        opt.step()
    assert agree == 1.0 and d.choose(ids, narrow.detach()).shape == (1, 4, 32)


def _occurrences(tokenizer, texts, words):
    """The word-similarity suite's reader of word occurrences (every run reads them so)."""
    from harness.suites.word_vectors import alone_vectors, word_occurrences, word_vectors

    return lambda m: word_occurrences(word_vectors(m, tokenizer, texts, words, cap=10, seed=0), alone_vectors(m, tokenizer, words))


def test_multisense_word_senses_come_from_the_models_own_vectors(minilm_ref):
    """Paper 004 Appendix E builds the word-level dictionary from the encoder's last layer: the
    adapter reads it with its token drop-in suspended, and the drop-in is back on afterwards."""
    from harness.adapters.multisense import MultisenseAdapter, MultisenseConfig
    from transformers import AutoModel, AutoTokenizer

    from harness.adapter import FitContext
    from harness.sources.corpora import Corpus

    tokenizer, model = AutoTokenizer.from_pretrained(minilm_ref.location), AutoModel.from_pretrained(minilm_ref.location)
    texts = ["The river bank was muddy.", "She paid the bank in cash.", "The bank of the river flooded."]
    words = ["bank", "river", "cash", "absent"]  # "absent": its one sense is the word encoded alone, also read without the drop-in
    read = _occurrences(tokenizer, texts, words)
    own = kmeans_senses(read(model), 2, 0)
    fit_text = ("A bank is a place for money. The river ran past the old mill, and cash was short.",) * 3
    adapter = MultisenseAdapter(MultisenseConfig(k=2, corpus="wikitext2_train"))  # two senses a token: the drop-in moves vectors
    fit = FitContext(seed=0, tokenizer=tokenizer, corpora={"wikitext2_train": Corpus("wikitext2_train", fit_text, {})},
                     budget=SenseBudget(fit_tokens=None, window=32, batch_size=4))
    dropped = adapter.apply(model, fit).model
    for a, b in zip(own, adapter.word_senses(dropped, read, seed=0), strict=True):  # k: the adapter's
        np.testing.assert_allclose(a, b, atol=1e-5)
    through_drop_in = kmeans_senses(read(dropped), 2, 0)
    assert not np.allclose(own[0], through_drop_in[0], atol=1e-2)


def test_word_senses_are_the_occurrences_clustered_into_at_most_k():
    rng = np.random.default_rng(0)
    sets = [rng.normal(size=(6, 8)).astype(np.float32), rng.normal(size=(2, 8)).astype(np.float32)]
    two = kmeans_senses(sets, 2, seed=0)
    assert [len(s) for s in two] == [2, 2]
    np.testing.assert_array_equal(two[1], sets[1])  # no more occurrences than k: the occurrences themselves
    one = kmeans_senses(sets, 1, seed=0)
    np.testing.assert_array_equal(one[0], sets[0].mean(0, keepdims=True))  # one sense: the mean occurrence


def test_an_adapter_without_senses_declares_none_and_reads_nothing(tiny_encoder):
    from harness.adapters.none import NoneAdapter
    from harness.adapters.skd import SkdAdapter

    def unread(model):
        raise AssertionError("an adapter without senses read the words' occurrences")

    assert NoneAdapter().word_senses(tiny_encoder, unread, seed=0) is None
    assert SkdAdapter().word_senses(tiny_encoder, unread, seed=0) is None
