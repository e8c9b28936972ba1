"""Paper 003's Patchscopes criteria (Section 5: embed, detok) on the real SmolLM2."""

from __future__ import annotations

import pytest
import torch

from harness.methods.vocab import patchscopes
from harness.sources import layout

WORDS = [" walked", " soldiers", " cities", " decisions"]


@pytest.fixture(scope="module")
def smollm2():
    from harness.sources import models
    from harness.sources.heads import Head

    model, tokenizer = models.load(models.resolve("smollm2"), Head("causal_lm"))
    return model.eval(), tokenizer


def _rows(model, tokenizer, words):
    ids = torch.tensor([tokenizer.encode(w, add_special_tokens=False)[0] for w in words])
    return model.get_input_embeddings()(ids).detach()


def test_target_prompt_opens_with_the_document_separator(smollm2_tokenizer):
    """SmolLM2 adds no BOS (its bos_token is the chat marker): the prompts open with <|endoftext|>."""
    ids, slots = patchscopes.target_prompt(smollm2_tokenizer)
    comma = smollm2_tokenizer.convert_tokens_to_ids(",")
    assert ids[0] == smollm2_tokenizer.convert_tokens_to_ids("<|endoftext|>")
    assert slots.tolist() == [1, 3, 5, 7] and ids[[2, 4, 6, 8]].tolist() == [comma] * 4 and len(ids) == 9


def test_own_rows_read_back_and_noise_does_not(smollm2):
    model, tokenizer = smollm2
    words = [w.strip() for w in WORDS]
    own = patchscopes.read_back(model, tokenizer, _rows(model, tokenizer, WORDS[:3]), words[:3])
    assert all(own.embed) and own.detok == own.embed
    noise = patchscopes.read_back(model, tokenizer, torch.randn(1, model.config.hidden_size) * 0.05, words[:1], layers=3)
    assert not any(noise.detok)


def test_a_layer_patch_writes_exactly_the_slots_after_that_layer(smollm2):
    """Patching after layer 4: X's hidden states there are the given state, everything before and the
    other positions are the plain prompt's; and another state changes the continuation."""
    model, tokenizer = smollm2
    vectors = _rows(model, tokenizer, WORDS[:3])
    ids, slots = patchscopes.target_prompt(tokenizer)
    x = model.get_input_embeddings()(ids).expand(3, -1, -1).clone()
    x[:, slots] = vectors[:, None]
    state = torch.randn(3, model.config.hidden_size) * 50
    with torch.no_grad():
        plain = model(inputs_embeds=x, output_hidden_states=True).hidden_states
        hook = patchscopes._patch(layout.blocks(model)[1][3], slots, state)
        try:
            patched = model(inputs_embeds=x, output_hidden_states=True).hidden_states
        finally:
            hook.remove()
    others = [i for i in range(len(ids)) if i not in slots.tolist()]
    assert torch.equal(patched[3], plain[3]) and torch.equal(patched[4][:, others], plain[4][:, others])
    assert torch.equal(patched[4][:, slots], state[:, None].expand(-1, 4, -1))
    assert patchscopes.continuations(model, tokenizer, vectors, state, layer=4) != patchscopes.continuations(model, tokenizer, vectors)


def test_detok_is_any_of_the_first_ten_states(smollm2):
    """read_back's early exit equals the definition: read back by at least one of hidden states 0..layers-1
    (4 here to keep it short; DETOK_STATES = 10 in use)."""
    model, tokenizer = smollm2
    words = [w.strip() for w in WORDS]
    vectors = 0.6 * _rows(model, tokenizer, WORDS)  # shrunk rows: some fail at the embedding
    reading = patchscopes.read_back(model, tokenizer, vectors, words, layers=4)
    states = patchscopes.source_states(model, tokenizer, vectors, 4)
    by_layer = [patchscopes.continuations(model, tokenizer, vectors, states[layer] if layer else None, layer)
                for layer in range(4)]
    expected = [any(patchscopes.first_word(texts[i]) == w for texts in by_layer) for i, w in enumerate(words)]
    assert list(reading.detok) == expected
    assert list(reading.embed) == [patchscopes.first_word(t) == w for t, w in zip(by_layer[0], words)]
    assert all(d for e, d in zip(reading.embed, reading.detok) if e)
