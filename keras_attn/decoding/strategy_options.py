"""The search a `generate` strategy names, and its options checked."""

import inspect

from keras_attn.search.strategies import beam_search, greedy_search, sampling_search

STRATEGIES = {"greedy": greedy_search, "beam": beam_search, "sampling": sampling_search}
# What `generate` passes to every search itself.
_GIVEN = ("step", "initial_state", "start_ids", "end_id", "max_length", "from_logits")


def search_options(strategy, options):
    """`(search, options)` for `strategy`, or a one-line ValueError.

    Args:
        strategy: `"greedy"`, `"beam"` or `"sampling"`.
        options: The keyword arguments meant for the search (`beam_size`,
            `stop_ids`, `processors`, ...).
    """
    if strategy not in STRATEGIES:
        raise ValueError(
            f"`strategy` must be one of {sorted(STRATEGIES)}. Received: "
            f"strategy={strategy!r}"
        )
    search = STRATEGIES[strategy]
    allowed = set(inspect.signature(search).parameters) - set(_GIVEN)
    for name in options:
        if name not in allowed:
            raise ValueError(
                f"`{name}` is no argument of strategy={strategy!r}, which takes "
                f"{sorted(allowed)}. Received: {name}={options[name]!r}"
            )
    options = dict(options)
    if strategy == "beam":
        options.setdefault("beam_size", 4)
    return search, options
