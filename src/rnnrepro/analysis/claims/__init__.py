"""The claims scorecard: every claim a study file lists, checked against the study's artifact tables.

A claim (``claims:`` in config/studies/<study>.yaml, format in docs/claims.md) names a table, a value
column, a check kind and row selectors. Each claim (times each combination of its ``per`` values)
gets one verdict:

- ``held`` / ``not held`` / ``inconclusive`` by the decision rule below (at the ``paper`` budget a
  held claim also needs every row within the claim's ``tolerance`` of the paper's number);
- ``not testable at this scale``, with the reason: the compared models do not keep the paper's ratio of
  recurrent parameters or its output head (rnnrepro.analysis.comparability), the claim is about a regime
  the budget's models do not reach, or a number its grid cannot form (the claim's ``not_testable``), its
  rows differ in a way that makes the comparison measure something else (``alike``), or a value measured
  once differs by less than its noise (``noise_floor``); the effect is shown all the same;
- ``not tested``, with the reason: a row trained on synthetic data (the smoke budget), a budget the
  claim lists as unable to answer it (quoting the GPU-hours that would), a row the budget's grid
  leaves out, or a table that could not be built (the reason why).

A budget that is another scale of one (``scale_of: cpu`` in the study file: ``cpu_wide``) can answer
what that one can, and its scorecard's effects are shown beside that one's (:func:`beside_other_scales`).

Effects and the decision rule (rnnrepro.analysis.effects, docs/claims.md). A check is split into the
pairs of rows it needs (``less_than``: the two rows; ``increasing``: each row and the next; ``lowest``:
the first row and each other one). A perplexity claim's effects are in nats: each seed's perplexity is
taken as its log, so a pair's effect is the difference of mean log-perplexity, beside the paper's (the
log of its perplexity ratio) and the ratio of the two. Each pair's effect is the first row's mean
minus the second's with a 90 % interval over seeds: Welch's t interval at the exact Welch-Satterthwaite
degrees of freedom for rows trained from their own seeds, a paired t interval on the per-seed
differences where the claim is ``paired`` (both rows read from the same seed's model); a claim on a
median over all runs compares medians, by ranks. Independent rows go *below* (or *above*) when every
seed of the first row is below (above) every seed of the second *and* the interval lies wholly on that
side of zero; paired rows when their interval does; medians when every run is beyond every run;
otherwise the pair *overlaps*. ``held`` when every pair goes the claimed way (and the size the claim
states, ``size``, is met), ``not held`` when some pair goes the other way (or the size is missed),
``inconclusive`` otherwise, saying whether the seeds could have found the paper's effect (its minimum
detectable effect). With one sample per row the two numbers decide and the verdict says "1 seed"; a
value that is not a training outcome (an exact parameter count, a speed measurement) has one sample by
nature.

Flags beside a verdict: ``fragile`` (a decided pair whose closest seeds are nearer than one
seed-to-seed standard deviation), ``still improving`` and ``capped`` (a run behind a row ended with its
validation loss still falling, or at its recipe's epoch cap; rnnrepro.analysis.run_endings), ``rate at
grid edge`` (a run behind a row trains at the learning rate its tuning chose at the lowest or highest of
the rates tried, so its best rate may lie beyond them), ``stalled`` (a run behind a row ended no better
than predicting the training split's unigram frequencies: a failed start, which a mean over seeds
carries).

``close_to_paper`` compares one row with a number, its own paper value, not rows with each other: it
is ``held`` when every seed is within the claim's ``tolerance`` of the paper's number, ``not held``
when every seed is outside it, ``inconclusive`` when the seeds fall on both sides (the tolerance in the
value's own unit); the difference beside it is our mean minus the paper's number (for a perplexity, in
nats, with the points in ``difference_points``).

The same check is also run on the paper's own numbers (``paper_check``), which catches a claim that
misreads its source. No weights and no training here: the scorecard reads CSV tables, the run folders'
small files for its flags, and counts the compared models' recurrent parameters from the study file
(a cell with no formula is built on torch's meta device, rnnrepro.sizing).
"""

from __future__ import annotations

from .spec import ABOVE, BELOW, CAPPED, COLUMNS, COUNTED, Case, ClaimError, DECIDED, DEFAULT_TESTABLE, EFFECT_COLUMNS, EVERY_DATASET, FRAGILE, HELD, IN_PART, INCONCLUSIVE, NOT_HELD, NOT_TESTABLE, NOT_TESTED, NOT_YET_RUN, OTHER_SCALE_COLUMNS, OVERLAP, RATE_AT_EDGE, ROW_COUNTS, SEEDS_SO_FAR, STALLED, STILL_IMPROVING, SYMBOLS, _column_declaration_problems, _selector_value_problems, cases, check_claims, claim_columns, declared_columns, is_synthetic  # noqa: F401
from .rules import NATS, _describe, _label, _matches, _number, _paper_check, _tolerance_text, _verdict_of, _within, check_holds, compare, is_median, is_perplexity, measure, pair_effect, pairs_needed, samples_of, seed_verdict, select  # noqa: F401
from .context import _alike_problem, _artifact_of, _declared_untestable, _flag_notes, _gpu_hours, _mean_of, _noise_problem, _our_params, _pair_label, _paper_params, _provenance, _runs_behind, _spread, _testable_at, other_scales, scale_base  # noqa: F401
from .case import COUNTED_SCALE, _closeness_reason, _method_text, _percent, _plain, _power_text, _rule_text, _summary, _untested_row, _widths_and_params, evaluate_case, evaluate_study, scale  # noqa: F401
from .tables import DamagedTable, EFFECTS_TABLE, _not_numbers, _samples_problems, beside_other_scales, evaluate, main, other_scale_files, outputs, read_effects, read_scorecard, read_table, scorecard, table_problems  # noqa: F401
