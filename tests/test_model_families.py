"""The conformance matrix: every built-in adapter on tiny random models of every family the harness
takes (:mod:`tests.families`), passed as ``--model DIR`` the way a researcher brings a model.

Each pairing is planned as ``harness run`` plans it (smoke profile) and either refused in one line
(a kind the suite or the method cannot take, asserted below) or run through the run's own pipeline:
fit, the compressed model timed beside the unchanged one on text, the suite's training and a smoke
score (``xnli`` for encoders, ``bpb`` for decoders and encoder-decoders), with the compression report
and scores checked. Beside it: the kind and table read from metadata, each family's compressed model at
full precision reproducing the base (int8), and the refusals of what cannot run.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import shutil
from pathlib import Path

import pytest
import torch

from harness.adapter import FitContext, footprint, no_progress
from harness.errors import ConfigError, ModelSourceError
from harness.registry import ADAPTERS
from harness.runner.pipeline import Pipeline
from harness.runner.plan import RunRequest, plan
from harness.sources import corpora, models
from harness.sources.heads import Head
from tests.families import BY_NAME, FAMILIES, build, byte_level_tokenizer, save, sentencepiece_tokenizer

SUITE = {"encoder": "xnli", "decoder": "bpb", "encoder-decoder": "bpb"}
SETTINGS = {
    "lowrank": ("r=8",),  # r = 64 would store more than a 32-wide table
    "multisense": ("adapter.corpus=wikitext2_train",), "skd": ("adapter.corpus=wikitext2_train",),  # bpb trains on no texts
}
REFUSED = {  # (kind, adapter) -> what its one-line refusal says
    ("encoder", "vocabdiet"): "adapter 'vocabdiet' needs a decoder model; '{dir}' is an encoder",
    ("decoder", "ade"): "adapter 'ade' needs an encoder model; '{dir}' is a decoder",
    ("encoder-decoder", "ade"): "adapter 'ade' needs an encoder model; '{dir}' is an encoder-decoder",
    ("encoder-decoder", "vocabdiet"): "adapter 'vocabdiet' needs a decoder model; '{dir}' is an encoder-decoder",
    ("encoder-decoder", "multisense"): "adapter 'multisense' needs an encoder or a decoder model; '{dir}' is an encoder-decoder",
    ("encoder-decoder", "skd"): "adapter 'skd' needs an encoder or a decoder model; '{dir}' is an encoder-decoder",
}
BUILT_IN = [n for n in ADAPTERS.names() if ADAPTERS.get(n).__module__.startswith("harness.")]


@pytest.fixture(scope="session")
def family_dir(tmp_path_factory, data_dir):
    """name -> the family's model folder, built on first use in this session (worker)."""
    from transformers import AutoTokenizer

    root, built, tokenizers = tmp_path_factory.mktemp("families"), {}, {}

    def tokenizer(which: str):
        if which not in tokenizers:
            texts = list(corpora.load("wikitext2_train", data_dir).texts[:200])
            train = {"byte-level": byte_level_tokenizer, "sentencepiece": sentencepiece_tokenizer}
            if which == "minilm":
                tokenizers[which] = AutoTokenizer.from_pretrained(models.resolve("minilm").location)
            else:
                tokenizers[which] = train[which](texts)
        return tokenizers[which]

    def get(name: str) -> Path:
        if name not in built:
            family = BY_NAME[name]
            built[name] = build(family, tokenizer(family.tokenizer), root / name)
        return built[name]

    return get


@pytest.mark.parametrize("family", [f.name for f in FAMILIES])
def test_kind_and_table_come_from_metadata(family, family_dir, tmp_path, monkeypatch):
    """The kind from transformers' auto mappings and the config, the table's rows and width from the
    architecture (ELECTRA's is narrower than its hidden size): no weight read, nothing written."""
    from transformers import AutoModel

    folder = family_dir(family)
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    ref = models.describe(str(folder))
    table = AutoModel.from_pretrained(folder).get_input_embeddings().weight
    assert ref.kind == BY_NAME[family].kind
    assert (ref.shape.vocab_size, ref.shape.embedding_dim) == tuple(table.shape)
    assert ref.shape.hidden_size == 32 and ref.pooling == "cls" and not (tmp_path / "cache").exists()


@pytest.fixture(scope="module", autouse=True)
def _corpora_read_once():
    """Every family fits on the same fit corpus: it is read from the data directory once for the matrix
    (a frozen :class:`corpora.Corpus`), not once a case."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(corpora, "load", functools.cache(corpora.load))
        yield


@pytest.fixture(scope="session")
def suite_data():
    """A plan -> its suite's data, read once per suite and settings in this worker: every family and
    adapter scores the same data, as one ``harness run``'s baseline and method share it."""
    prepared = {}

    def get(p):
        key = (p.suite.name, repr(p.suite_config), repr(p.suite_budget), str(p.data_dir))
        if key not in prepared:
            prepared[key] = p.suite.prepare(p.data_dir, p.suite_config, p.suite_budget)
        return prepared[key]

    return get


def _cases():
    for family in FAMILIES:
        for name in BUILT_IN:
            yield pytest.param(family.name, name, id=f"{family.name}-{name}")


@pytest.fixture(scope="session")
def short_text(tmp_path_factory) -> str:
    """Two short documents: what ``bpb`` scores here (``--set corpus=PATH``), one lm-eval pass a model."""
    path = tmp_path_factory.mktemp("text") / "short.txt"
    path.write_text("The river rose after three days of rain, and the town closed its bridges.\n\n"
                    "She played the violin every evening while her brothers walked home from school.\n", encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("family, name", list(_cases()))
def test_every_adapter_on_every_family(family, name, family_dir, short_text, suite_data, tmp_path):
    """Refused in one line, or fitted, timed, trained and scored at the smoke profile by the run's pipeline."""
    kind, folder = BY_NAME[family].kind, family_dir(family)
    corpus = (f"suite.corpus={short_text}",) if SUITE[kind] == "bpb" else ()
    request = RunRequest(SUITE[kind], name, str(folder), "smoke", settings=SETTINGS.get(name, ()) + corpus)
    if (kind, name) in REFUSED:
        with pytest.raises(ConfigError) as refused:
            plan(request)
        message = str(refused.value)
        assert message == REFUSED[kind, name].format(dir=folder) and "\n" not in message
        return
    p = plan(request)
    produced = Pipeline(p, p.spec, p.adapter, tmp_path, no_progress).run(suite_data(p))
    report = produced.compression
    assert report.embedding_params_before > 0 and report.storage_bytes_after > 0
    if name in ("asg", "ksub", "lowrank") or (name == "sg" and kind == "encoder"):  # sg keeps a decoder's head dense
        assert report.embedding_params_after < report.embedding_params_before
    assert produced.efficiency and all(e.p50_ms > 0 for e in produced.efficiency)
    assert produced.scores and all(math.isfinite(s.value) for s in produced.scores)


def _kl(base_logits: torch.Tensor, logits: torch.Tensor) -> float:
    log_p, log_q = base_logits.float().log_softmax(-1), logits.float().log_softmax(-1)
    return float((log_p.exp() * (log_p - log_q)).sum(-1).mean())


@pytest.mark.parametrize("family", [f.name for f in FAMILIES])
def test_int8_tables_reproduce_the_base(family, family_dir):
    """At int8 the compressed model is the base within quantization noise, on every family (a decoder's
    and an encoder-decoder's logits, an encoder's last hidden states): a replaced table keeps what the
    original module computed (Gemma scales its rows by sqrt(D) in the module)."""
    ref = models.describe(str(family_dir(family)))
    encoder = ref.kind == "encoder"
    base, tokenizer = models.load(ref, Head("base" if encoder else "causal_lm"))
    ids = torch.tensor(tokenizer(["The cat sat on the mat.", "Prices rose again in the city."], padding=True)["input_ids"])
    extra = {"decoder_input_ids": ids} if ref.kind == "encoder-decoder" else {}
    quant = ADAPTERS.get("quant")().apply(copy.deepcopy(base), FitContext(seed=0)).model
    with torch.no_grad():
        expected, got = base.eval()(input_ids=ids, **extra), quant.eval()(input_ids=ids, **extra)
        rows, quantized = base.get_input_embeddings()(ids), quant.get_input_embeddings()(ids)
    assert float((quantized - rows).norm() / rows.norm()) < 0.01
    if encoder:
        states, quantized_states = expected.last_hidden_state, got.last_hidden_state
        assert float((quantized_states - states).norm() / states.norm()) < 0.02
    else:
        assert _kl(expected.logits, got.logits) < 1e-3


def test_gemma_asg_at_full_k_reproduces_the_base(family_dir):
    """ASG with one Concept Vector per token (k = V) on a Gemma config gives the base's logits."""
    from harness.adapters.asg import AsgAdapter, AsgConfig

    ref = models.describe(str(family_dir("gemma")))
    base, tokenizer = models.load(ref, Head("causal_lm"))
    small = copy.deepcopy(base)
    keep = 64  # a table of 64 distinct rows: k = V clusters every row onto itself
    small.resize_token_embeddings(keep)
    ids = torch.tensor([[1, 5, 17, 33, 60, 2]])
    asg = AsgAdapter(AsgConfig(k=keep, m=2)).apply(copy.deepcopy(small), FitContext(seed=0)).model
    with torch.no_grad():
        torch.testing.assert_close(asg.eval()(input_ids=ids).logits, small.eval()(input_ids=ids).logits, rtol=1e-4, atol=1e-4)


def test_encoder_decoders_replace_the_shared_table_and_the_head(family_dir):
    """T5 (tied) and mT5 (untied): ASG replaces the table the encoder and decoder share and the LM head;
    a tied head shares the input's Concept Vectors, an untied one has its own."""
    from harness.adapters.asg import ConceptEmbedding, ConceptLMHead

    for family, tied in (("t5", True), ("mt5", False)):
        base, _ = models.load(models.describe(str(family_dir(family))), Head("causal_lm"))
        applied = ADAPTERS.get("asg")().apply(base, FitContext(seed=0))
        model = applied.model
        embedding, head = model.get_input_embeddings(), model.get_output_embeddings()
        assert isinstance(embedding, ConceptEmbedding) and isinstance(head, ConceptLMHead)
        assert model.get_encoder().get_input_embeddings() is embedding and model.get_decoder().get_input_embeddings() is embedding
        assert (head.concepts is embedding) == tied
        assert applied.report.embedding_params_after == footprint(model).embedding_params < applied.report.embedding_params_before


def test_default_settings_fit_a_128_wide_llama(smollm2_tokenizer, tmp_path):
    """ASG and k-sub with their defaults on hidden size 128: m = 8 (sub-vectors of 16), K = 3 slices of 43, 43, 42."""
    from transformers import LlamaConfig

    config = LlamaConfig(vocab_size=len(smollm2_tokenizer), hidden_size=128, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=4, num_key_value_heads=1, tie_word_embeddings=True)
    folder = save(config, smollm2_tokenizer, "decoder", tmp_path / "llama128")
    for name, expected in (("asg", {"m": 8, "k": 256}), ("ksub", {"sub_widths": [43, 43, 42]})):
        p = plan(RunRequest("bpb", name, str(folder), "smoke"))
        model, tokenizer = models.load(p.model_ref, Head("causal_lm"))
        applied = p.adapter.apply(model, FitContext(seed=0, budget=p.adapter_budget))
        assert {k: applied.details[k] for k in expected} == expected
        ids = torch.tensor(tokenizer(["a short text"])["input_ids"])
        assert applied.model(input_ids=ids).logits.shape == (1, ids.shape[1], len(smollm2_tokenizer))


def _copy_without(folder: Path, target: Path, *names: str) -> Path:
    shutil.copytree(folder, target)
    for name in names:
        (target / name).unlink()
    return target


def test_a_directory_without_a_tokenizer_is_refused(family_dir, tmp_path):
    bare = _copy_without(family_dir("bert"), tmp_path / "bare", "tokenizer.json", "tokenizer_config.json")
    with pytest.raises(ModelSourceError, match="has no tokenizer"):
        models.describe(str(bare))
    from typer.testing import CliRunner

    from harness.cli import app

    result = CliRunner().invoke(app, ["run", "--suite", "xnli", "--model", str(bare), "--profile", "smoke"])
    assert result.exit_code == 2 and result.output.count("\n") == 1 and "has no tokenizer" in result.output


def test_a_tokenizer_beyond_the_table_is_refused(family_dir, tmp_path):
    """A 2,000-row table with a 30,522-token tokenizer: ids past the table would index out of range."""
    mixed = _copy_without(family_dir("t5"), tmp_path / "mixed", "tokenizer.json", "tokenizer_config.json")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(family_dir("bert") / name, mixed / name)
    with pytest.raises(ModelSourceError, match="ids up to 30521 but the token table has 2000 rows"):
        models.describe(str(mixed))


def _edit_config(folder: Path, target: Path, **changes) -> Path:
    shutil.copytree(folder, target)
    config = json.loads((target / "config.json").read_text())
    (target / "config.json").write_text(json.dumps({**config, **changes}))
    return target


def test_unknown_architectures_and_remote_code_are_refused_in_one_line(family_dir, tmp_path):
    unknown = _edit_config(family_dir("bert"), tmp_path / "unknown", model_type="nosuchmodel")
    with pytest.raises(ModelSourceError, match="model_type 'nosuchmodel', an architecture transformers .* does not know"):
        models.describe(str(unknown))
    remote = _edit_config(family_dir("bert"), tmp_path / "remote", auto_map={"AutoModel": "modeling_x.XModel"})
    with pytest.raises(ModelSourceError, match="runs its own code .*pass --trust-remote-code"):
        plan(RunRequest("xnli", "none", str(remote), "smoke"))


def test_a_model_with_its_own_code_runs_when_trusted_and_the_run_records_it(family_dir, tmp_path):
    """``--trust-remote-code`` loads the directory's own classes (never asking on stdin) and is part of the recipe."""
    remote = _edit_config(family_dir("bert"), tmp_path / "remote", auto_map={"AutoConfig": "tiny.TinyConfig", "AutoModel": "tiny.TinyModel"},
                          model_type="tiny-bert")
    (remote / "tiny.py").write_text(
        "from transformers import BertConfig, BertModel\n\n\n"
        "class TinyConfig(BertConfig):\n    model_type = 'tiny-bert'\n\n\n"
        "class TinyModel(BertModel):\n    config_class = TinyConfig\n"
    )
    p = plan(RunRequest("tokenizer", "none", str(remote), "smoke", trust_remote_code=True))
    assert p.spec.recipe["trust_remote_code"] is True and p.model_ref.kind == "encoder"
    model, _ = models.load(p.model_ref, Head("base"))
    assert type(model).__name__ == "TinyModel"


def test_a_sentence_transformers_directory_pools_as_its_config_says(tmp_path):
    """MiniLM's package folder is a sentence-transformers model (mean pooling, read from 1_Pooling);
    a pooling the harness does not do is refused."""
    minilm = Path(models.resolve("minilm").location)
    assert models.describe(str(minilm)).pooling == "mean"
    maxed = tmp_path / "max"
    shutil.copytree(minilm, maxed)
    pooling = json.loads((maxed / "1_Pooling" / "config.json").read_text())
    pooling.update(pooling_mode_mean_tokens=False, pooling_mode_max_tokens=True)
    (maxed / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    with pytest.raises(ModelSourceError, match="pooling by max_tokens"):
        models.describe(str(maxed))


def test_bfloat16_is_part_of_the_run_and_the_model_loads_in_it(family_dir, tmp_path):
    folder = str(family_dir("llama-tied"))
    full, half = (plan(RunRequest("bpb", "asg", folder, "smoke", dtype=d)) for d in ("float32", "bfloat16"))
    assert full.spec.recipe["dtype"] == "float32" and half.spec.recipe["dtype"] == "bfloat16"
    assert full.spec.config_hash != half.spec.config_hash
    model, _ = models.load(half.model_ref, Head("causal_lm"))
    assert model.get_input_embeddings().weight.dtype == torch.bfloat16
    with pytest.raises(ConfigError, match="--dtype float8 is not one of float32, bfloat16, float16"):
        plan(RunRequest("bpb", "asg", folder, "smoke", dtype="float8"))


@pytest.mark.gpu
def test_asg_runs_in_bfloat16_on_cuda(family_dir):
    """The gpu tier: a decoder loaded in bfloat16 (``--dtype bfloat16``), ASG fitted and moved to CUDA
    as the runner moves it, scores finite logits with its tables in bfloat16."""
    ref = models.describe(str(family_dir("llama-untied")), dtype="bfloat16")
    base, tokenizer = models.load(ref, Head("causal_lm"))
    model = ADAPTERS.get("asg")().apply(base, FitContext(seed=0, device="cuda")).model.to("cuda")
    ids = torch.tensor(tokenizer(["The cat sat on the mat."])["input_ids"], device="cuda")
    with torch.inference_mode():
        logits = model(input_ids=ids).logits
    assert logits.dtype == torch.bfloat16 and torch.isfinite(logits).all()
    assert model.get_input_embeddings().codebooks.dtype == torch.bfloat16
