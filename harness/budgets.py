"""Budgets as data: one table per suite or adapter, profile -> budget, with overrides for large models.

A budget is a frozen dataclass of sizes and hyperparameters (examples, epochs, lr, fit texts,
steps ...). Its fields go into the run's identity, so a changed budget is a new configuration.

The rule for choosing one: a budget (above all a ``quick`` one, which trades the paper's recipe for
a 2-core CPU) is chosen from the baseline's learning curve alone (the unchanged model's score
against examples, epochs, learning rate), never from a method's score. A change made after a
method's score was seen is kept only with a disclosure: ``Budgets.disclosed`` names the profile and
says what changed and what had been seen, and the sentence goes into every run's recipe
(``recipe["disclosed"]``), so a reader of the stored run knows the budget is not blind to the method.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Mapping, TypeVar

Profile = Literal["smoke", "quick", "paper"]
PROFILES: tuple[Profile, ...] = ("smoke", "quick", "paper")

B = TypeVar("B")

LARGE_MODEL_WEIGHTS = 12_000_000
"""Weights every token passes through above which a model is "large" for budgets. MiniLM-L6 (6 layers
of 384: 10.6M) is below; me5-small (12 layers of 384: 21.2M, a training step 3x MiniLM's) and
SmolLM2-135M are above, so the quick profile can give them a smaller budget that still fits 10 minutes
on a 2-core CPU."""


def layer_weights(model_config: Any) -> int:
    """Weights every token passes through: layers x (4 H^2 attention + 2 H x FFN)."""
    hidden = model_config.hidden_size
    ffn = getattr(model_config, "intermediate_size", None) or 4 * hidden
    return model_config.num_hidden_layers * (4 * hidden * hidden + 2 * hidden * ffn)


def is_large(model_config: Any) -> bool:
    return layer_weights(model_config) > LARGE_MODEL_WEIGHTS


@dataclass(frozen=True)
class Budgets(Generic[B]):
    """profile -> budget; ``large`` overrides some profiles for models above LARGE_MODEL_WEIGHTS;
    ``disclosed`` (profile, or ``profile@large``, -> sentence) records a change made after a method's
    score was seen (see the module docstring), carried into the recipe by :meth:`recipe`."""

    smoke: B
    quick: B
    paper: B
    large: Mapping[str, B] = field(default_factory=dict)
    disclosed: Mapping[str, str] = field(default_factory=dict)

    def select(self, profile: str, large: bool = False) -> B:
        if large and profile in self.large:
            return self.large[profile]
        return getattr(self, profile)

    def recipe(self, profile: str, large: bool = False) -> dict[str, Any]:
        """The selected budget as the run's recipe, with its disclosure where there is one."""
        key = f"{profile}@large" if large and profile in self.large else profile
        note = self.disclosed.get(key)
        return {**dataclasses.asdict(self.select(profile, large)), **({"disclosed": note} if note else {})}

    def rows(self) -> dict[str, dict[str, Any]]:
        """Every entry as a plain dict (``quick``, ``quick@large`` ...), for listings."""
        out = {p: dataclasses.asdict(getattr(self, p)) for p in PROFILES}
        out.update({f"{p}@large": dataclasses.asdict(b) for p, b in self.large.items()})
        return out
