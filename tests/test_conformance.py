"""Contract conformance of every registered adapter, on tiny random-init models built from config.

Each adapter in the ``harness.adapters`` entry-point group is applied, with the fit context the
runner would give it at the smoke profile (its declared fit corpora read from the data directory,
the teacher when it asks for one, its smoke budget, the settings it declares for a small model:
``Adapter.small_settings``), to a 2-layer encoder with a classification head and to a 2-layer decoder
with a tied head, both 48 wide over a 1,000-token byte-level BPE vocabulary trained here. Every
built-in adapter is checked; any installed adapter, a plugin's included, is checked by naming it
(docs/plugins.md)::

    python -m pytest -n 0 tests/test_conformance.py --adapter NAME
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
    set_seed,
)

from harness.adapter import FitContext, footprint
from harness.config import build_config, config_fields
from harness.errors import ConfigError
from harness.registry import ADAPTERS
from harness.sources import corpora

VOCAB = 1000
HIDDEN = 48
EXAMPLE = Path(__file__).with_name("plugins") / "frequent_table"  # docs/plugins.md's example plugin
KINDS = ("encoder", "decoder")


@pytest.fixture(scope="session")
def tiny_tokenizer(data_dir) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer of VOCAB tokens (leading-space marker Ġ), trained on WikiText-2 train."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    texts = corpora.load("wikitext2_train", data_dir).texts[:300]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<s>", "</s>", "<pad>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")


def tiny_model(kind: str) -> torch.nn.Module:
    torch.manual_seed(0)
    if kind == "encoder":
        config = BertConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=4, intermediate_size=96, num_labels=3)
        return BertForSequenceClassification(config).eval()
    config = LlamaConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, tie_word_embeddings=True, bos_token_id=0, eos_token_id=1, pad_token_id=2,
    )
    return LlamaForCausalLM(config).eval()


def _selected(config: pytest.Config) -> list[str]:
    """The adapters checked: those named with ``--adapter NAME`` (any installed one, plugins included),
    else every built-in adapter (a plugin installed beside the harness is checked when named)."""
    named = config.getoption("adapter")
    for name in named:
        ADAPTERS.get(name)  # an unknown name: one line with the closest installed one
    return named or [n for n in ADAPTERS.names() if ADAPTERS.get(n).__module__.startswith("harness.")]


def _cases(names: list[str]):
    for name in names:
        for kind in KINDS:
            if kind in ADAPTERS.get(name).kinds:
                yield pytest.param(name, kind, id=f"{name}-{kind}")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Each test taking ``name, kind`` runs per selected adapter and model kind it supports; ``name`` alone, per adapter."""
    names = _selected(metafunc.config)
    if {"name", "kind"} <= set(metafunc.fixturenames):
        metafunc.parametrize("name, kind", list(_cases(names)))
    elif "name" in metafunc.fixturenames:
        metafunc.parametrize("name", names)


def _small_config(cls, settings: dict[str, str] | None = None):
    """The adapter's defaults with the settings it declares for a small model (``Adapter.small_settings``
    of a 1,000-token table 48 wide), then ``settings``."""
    return build_config(cls.config_class, {**cls.small_settings(VOCAB, HIDDEN), **(settings or {})}, cls.name)


def _apply(name: str, kind: str, tokenizer, data_dir: Path, seed: int = 0, device: str = "cpu", **settings: str):
    """The adapter applied as the runner applies it: to a model on the CPU, with ``device`` the run's
    (the caller moves the model there afterwards, as the runner does)."""
    cls = ADAPTERS.get(name)
    adapter = cls(_small_config(cls, settings))
    model = tiny_model(kind)
    adapter.check(VOCAB, model.config.hidden_size)
    set_seed(seed)  # the runner seeds every library before a model is built and fitted
    fit = FitContext(
        profile="smoke", seed=seed, device=device, workdir=None, tokenizer=tokenizer,
        corpora={c: _corpus(c, data_dir) for c in adapter.corpora()},
        budget=cls.budgets.smoke if cls.budgets else None,
        teacher=copy.deepcopy(model).requires_grad_(False) if cls.needs_teacher else None,
    )
    return adapter.apply(model, fit), tiny_model(kind)


def _corpus(name: str, data_dir: Path) -> corpora.Corpus:
    """A declared corpus as the runner gives it; ``task_train`` stands in as WikiText-2 train articles."""
    if name == corpora.TASK_TRAIN:
        return corpora.Corpus(name, corpora.load("wikitext2_train", data_dir).texts[:200], {})
    return corpora.load(name, data_dir)


def _unique(tensors) -> dict[int, torch.Tensor]:
    return {t.data_ptr(): t for t in tensors}


def test_adapter_conformance(name, kind, tiny_tokenizer, data_dir):
    applied, base = _apply(name, kind, tiny_tokenizer, data_dir)
    model, report = applied.model, applied.report
    ids = torch.tensor(tiny_tokenizer(["the cat sat on the mat", "a dog ran"], padding=True)["input_ids"])
    # forward shapes: (B, T) ids -> (B, T, D) vectors; the model's own forward still runs
    assert model.get_input_embeddings()(ids).shape == (*ids.shape, base.config.hidden_size)
    with torch.inference_mode():
        logits = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
    if kind == "decoder":
        assert logits.shape[:2] == ids.shape and logits.shape[-1] >= len(applied.tokenizer)
    else:
        assert logits.shape == (len(ids), 3)
    # tie_weights() (called by HF Trainer and lm-eval's HFLM) does not undo the change
    before = {k: v.clone() for k, v in model.state_dict().items()}
    modules = (type(model.get_input_embeddings()), type(model.get_output_embeddings()))
    model.tie_weights()
    assert (type(model.get_input_embeddings()), type(model.get_output_embeddings())) == modules
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    # the report counts what the modules hold: parameters, and stored bytes with buffers (id maps)
    base_table = base.get_input_embeddings().weight
    assert report.embedding_params_before == base_table.numel()  # tied decoder: the one shared table
    assert report.storage_bytes_before == base_table.numel() * base_table.element_size()
    # the report describes the model handed back (not a copy or the model before a later step): its
    # embedding parameters are what the returned model's embedding modules hold now
    assert report.embedding_params_after == footprint(model).embedding_params, (report, footprint(model))
    embedding = model.get_input_embeddings()
    stored = _unique(embedding.state_dict().values())
    assert report.storage_bytes_after >= sum(t.numel() * t.element_size() for t in stored.values())
    total = sum(p.numel() for p in _unique(model.parameters()).values())
    assert report.total_params_after == total or any(hasattr(m, "stored_values") for m in model.modules())


def test_same_seed_same_tables(name, kind, tiny_tokenizer, data_dir):
    first, _ = _apply(name, kind, tiny_tokenizer, data_dir, seed=3)
    again, _ = _apply(name, kind, tiny_tokenizer, data_dir, seed=3)
    a, b = first.model.state_dict(), again.model.state_dict()
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a), [k for k in a if not torch.equal(a[k], b[k])][:5]


def test_bad_settings_are_config_errors_before_any_work(name):
    """Every numeric setting refuses -1 when the config is built (no model is touched)."""
    cls = ADAPTERS.get(name)
    numeric = [f.name for f in dataclasses.fields(cls.config_class) if config_fields(cls.config_class)[f.name] in (int, float)]
    for field in numeric:
        with pytest.raises(ConfigError):
            build_config(cls.config_class, {field: "-1"}, name)
    with pytest.raises(ConfigError, match="not a setting"):
        build_config(cls.config_class, {"no_such_setting": "1"}, name)


def test_every_selected_adapter_is_covered(request):
    selected = _selected(request.config)
    assert {p.values[0] for p in _cases(selected)} == set(selected)  # each supports at least one model kind


def test_the_example_plugin_fits_the_test_model_by_the_settings_it_declares(monkeypatch):
    """The example plugin sizes its table by ``keep`` and ``buckets`` (4,096 and 2,048 by default, more
    than the test model's 1,000 tokens): its defaults fail its own ``check``, the settings its
    ``small_settings`` declares pass it."""
    spec = importlib.util.spec_from_file_location("frequent_example", EXAMPLE / "src" / "frequent_table" / "adapter.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    cls = module.FrequentAdapter
    with pytest.raises(ConfigError, match="keep=4096 \\+ buckets=2048"):
        cls().check(VOCAB, HIDDEN)
    assert cls.small_settings(VOCAB, HIDDEN) == {"keep": "100", "buckets": "20"}
    cls(build_config(cls.config_class, cls.small_settings(VOCAB, HIDDEN), cls.name)).check(VOCAB, HIDDEN)


@pytest.mark.slow
def test_the_example_plugin_passes_every_case(tmp_path):
    """Installed as a user installs it (docs/plugins.md), the example plugin passes every case of this
    module, named with ``--adapter`` (this test left out of the inner run)."""
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--target", str(tmp_path),
                    str(EXAMPLE)], check=True, capture_output=True, timeout=300)
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "-m", "not gpu", "-k", "not example_plugin",
         str(Path(__file__)), "--adapter", "frequent"],
        cwd=Path(__file__).parent.parent, env={**os.environ, "PYTHONPATH": str(tmp_path)}, capture_output=True, text=True, timeout=1800,
    )
    assert out.returncode == 0, out.stdout[-4000:]
    passed = re.search(r"(\d+) passed", out.stdout)
    assert passed and int(passed.group(1)) >= 10 and "failed" not in out.stdout, out.stdout[-2000:]


def test_saved_model_rebuilds_identically(name, kind, tiny_tokenizer, data_dir, tmp_path):
    """harness.runner.saved: save -> load rebuilds the adapter's modules from its registered class and the
    saved config (no refit): same module classes per path, same tensors, same outputs, same tokenizer."""
    from harness.runner import saved

    applied, _ = _apply(name, kind, tiny_tokenizer, data_dir)
    model = applied.model.eval()
    saved.save(tmp_path, model, applied.tokenizer, name, dataclasses.asdict(_small_config(ADAPTERS.get(name))))
    loaded, tokenizer, _ = saved.load(tmp_path)
    assert {p: type(m) for p, m in loaded.named_modules()} == {p: type(m) for p, m in model.named_modules()}
    a, b = model.state_dict(), loaded.state_dict()
    assert a.keys() == b.keys() and all(a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]) for k in a)
    trains = lambda m: {n for n, p in m.named_parameters() if p.requires_grad}  # noqa: E731
    assert trains(loaded) == trains(model)  # a cached fit fine-tunes what the fresh one does
    text = ["the cat sat on the mat", "a dog ran"]
    assert tokenizer(text)["input_ids"] == applied.tokenizer(text)["input_ids"]
    ids = torch.tensor(tokenizer(text, padding=True)["input_ids"])
    with torch.inference_mode():
        expected = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
        got = loaded(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
    assert torch.equal(expected, got)
    loaded.tie_weights()  # what HF Trainer and lm-eval call: the rebuilt model keeps its compressed head
    with torch.inference_mode():
        assert torch.equal(loaded(input_ids=ids, attention_mask=torch.ones_like(ids)).logits, expected)


# what each built-in adapter that cannot take recovery says (the rest name tensors in `recovers`)
NOT_RECOVERABLE = {"vocabdiet": "distills", "ade": "", "multisense": "after the suite's fine-tuning",
                   "skd": "after the suite's fine-tuning", "none": "no tensors"}


def test_recovery_trains_only_the_declared_tensors_and_lowers_the_loss(name, kind, tiny_tokenizer, data_dir):
    """Recovery training (harness.methods.recover), smoke budget: a few steps toward the unchanged model
    lower the loss on fixed blocks, change only the tensors the adapter names in ``recovers``, and
    leave every ``requires_grad`` as it was; an adapter that cannot take it says why."""
    from harness.methods import recover

    cls = ADAPTERS.get(name)
    refusal = cls.recovery_refusal()
    if name in NOT_RECOVERABLE:
        assert refusal and NOT_RECOVERABLE[name] in refusal
        return
    if cls.no_recovery is not None or cls.stage == "after_finetune":  # a plugin that says why it cannot
        assert refusal
        return
    assert cls.recovers, f"adapter '{name}' declares neither `recovers` (the tensors recovery trains) nor `no_recovery` (why it cannot)"
    assert refusal is None
    # int4: an int8 table of a 48-wide random model is within float noise of the teacher already
    applied, teacher = _apply(name, kind, tiny_tokenizer, data_dir, **({"bits": "4"} if name == "quant" else {}))
    model = applied.model
    declared = recover.recoverable(model, cls.recovers)
    assert declared
    before = {k: v.clone() for k, v in model.state_dict().items()}
    trains = {n: p.requires_grad for n, p in model.named_parameters()}
    texts = recover.fit_texts({c: corpora.load(c, data_dir).plain()[:50] for c in recover.CORPORA})
    held = recover.blocks(tiny_tokenizer, texts[50:], kind, 32, 2, seed=1)
    loss = recover.loss_fn(model, teacher, kind)
    with torch.no_grad():
        start = float(loss(held))
    settings = recover.recipe(6, False, recover.BUDGETS.smoke)
    model, done = recover.recover(model, teacher, tiny_tokenizer, kind, cls.recovers, texts[:50], settings, 0)
    with torch.no_grad():
        assert float(loss(held)) < start
    changed = {v.data_ptr() for k, v in model.state_dict().items() if not torch.equal(v, before[k])}  # a tied head's names too
    assert changed and changed <= {t.data_ptr() for t in declared.values()}
    assert {n: p.requires_grad for n, p in model.named_parameters()} == trains
    assert done["steps"] == 6 and len(done["loss"]) == 2 and done["trained"] == sorted(declared)


# settings that give each adapter with an index map more than 256 entries per map, so that it is
# stored as uint16 (sg's default 40% of 1,000 tokens is 400 groups already)
WIDE_MAPS = {"asg": {"k": "300"}, "ksub": {"M": "300"}, "ade": {"K": "300"}}
INDEXABLE_ON_CUDA = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


def _integer_buffers(model: torch.nn.Module) -> dict[str, torch.dtype]:
    return {name: b.dtype for name, b in model.named_buffers() if not b.is_floating_point() and b.dtype != torch.bool}


def test_index_maps_are_compact_when_stored_and_indexable_off_the_cpu(name, kind, tiny_tokenizer, data_dir):
    """torch's CUDA kernels cannot index uint16 maps. Moved off the CPU (the meta device
    stands in for CUDA: harness.methods.index_maps widens on any device but the CPU), every integer
    buffer is held in a dtype CUDA indexes, while the state dict (what is saved, what the compression
    report counts) still holds the compact stored dtypes."""
    applied, _ = _apply(name, kind, tiny_tokenizer, data_dir, **WIDE_MAPS.get(name, {}))
    model = applied.model.eval()
    state = model.state_dict()
    if name in ("asg", "ksub", "sg", "ade"):
        assert torch.uint16 in {t.dtype for t in state.values()}, "the case must exercise a uint16 map"
    model.to("meta")
    held = _integer_buffers(model)
    assert all(dtype in INDEXABLE_ON_CUDA for dtype in held.values()), {n: d for n, d in held.items() if d not in INDEXABLE_ON_CUDA}
    moved = model.state_dict()
    assert {k: v.dtype for k, v in moved.items()} == {k: v.dtype for k, v in state.items()}


def test_embedding_and_head_never_read_values_back_to_the_host(name, kind, tiny_tokenizer, data_dir):
    """A scored forward stays on the run's device. On the meta device a tensor has no
    values, so any .cpu(), .numpy(), .item(), .tolist() or int(tensor) in the adapter's input
    embedding or output head raises: this runs both there, in inference as a suite scores."""
    applied, base = _apply(name, kind, tiny_tokenizer, data_dir, **WIDE_MAPS.get(name, {}))
    embedding, head = applied.model.get_input_embeddings(), applied.model.get_output_embeddings()
    ids = torch.randint(0, VOCAB, (2, 5), device="meta")
    with torch.inference_mode():
        assert embedding.to("meta")(ids).shape == (2, 5, base.config.hidden_size)
        if head is not None:
            hidden = torch.empty(2, 5, base.config.hidden_size, device="meta")
            assert head.to("meta")(hidden).shape[:2] == (2, 5)


@pytest.mark.gpu
def test_adapter_fits_runs_trains_and_recovers_on_cuda(name, kind, tiny_tokenizer, data_dir):
    """The gpu tier: fitted with the run's device cuda, moved there as the runner moves it, the model
    scores (inference), trains (a backward pass reaches its trainable parameters) and takes one
    recovery step on CUDA, its tensors staying there."""
    from harness.methods import recover

    applied, teacher = _apply(name, kind, tiny_tokenizer, data_dir, device="cuda", **WIDE_MAPS.get(name, {}))
    model = applied.model.to("cuda")
    ids = torch.tensor(tiny_tokenizer(["the cat sat on the mat", "a dog ran"], padding=True)["input_ids"], device="cuda")
    with torch.inference_mode():
        logits = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
    assert logits.is_cuda and torch.isfinite(logits).all()
    model.train()
    # a drop-in applied after fine-tuning (multisense, skd) is not trained, nor a table that leaves nothing trainable (vocabdiet)
    if ADAPTERS.get(name).stage == "before_finetune" and any(p.requires_grad for p in model.parameters()):
        out = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
        out.float().pow(2).mean().backward()
        grads = [p.grad for p in model.parameters() if p.requires_grad and p.grad is not None]
        assert grads and all(g.is_cuda and torch.isfinite(g).all() for g in grads)
        model.zero_grad(set_to_none=True)
    if ADAPTERS.get(name).recovery_refusal() is None:
        texts = recover.fit_texts({c: corpora.load(c, data_dir).plain()[:20] for c in recover.CORPORA})
        model, done = recover.recover(model.eval(), teacher.to("cuda"), tiny_tokenizer, kind, ADAPTERS.get(name).recovers, texts,
                                      recover.recipe(1, False, recover.BUDGETS.smoke), 0)
        assert done["steps"] == 1 and all(t.is_cuda for t in model.state_dict().values())
