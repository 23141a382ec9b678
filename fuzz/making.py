"""Case N of a campaign: a function of the campaign's seed and N alone.

Owns: `make_case(config, index)`: drawn from `random.Random(f"{seed}:{index}")` alone (a
legal conversation from fuzz.seeds' pool for the seed, or the corpus; its open given the
case's own container-id, fuzz.model; then one fuzz.mutators strategy), so any case can be
made again from its seed whatever the number of workers or processes (fuzz.campaign,
fuzz.pace, fuzz.differential). `config` is a fuzz.campaign.CampaignConfig (its seed,
corpus, strategies and target's handshake are read).
"""

from __future__ import annotations

import random
from typing import Any

from amqpspec.fuzz.case import Case
from amqpspec.fuzz.model import case_container_id, with_container_id
from amqpspec.fuzz.mutators import mutate_case
from amqpspec.fuzz.seeds import pooled_scenario


def make_case(config: Any, index: int) -> Case:
    """Case `index` of the campaign: a function of (seed, index) only."""
    seed = f"{config.seed}:{index}"
    rng = random.Random(seed)
    if config.corpus and rng.random() < 0.3:
        base, origin = rng.choice(config.corpus), "corpus"
    else:
        origin, base = pooled_scenario(config.target.handshake, config.seed, rng)
    strategy = rng.choice(config.strategies)
    base = with_container_id(list(base), case_container_id(config.seed, index))
    steps = mutate_case(base, strategy, rng)
    return Case(steps, strategy, seed, f"from {origin}")
