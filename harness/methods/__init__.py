"""Building blocks the adapters fit with: k-means, sense dictionaries, distillation, the fused gather-sum head, Vocab Diet's vocabulary pieces."""
