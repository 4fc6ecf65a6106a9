"""jaxrl-sweep: sweeps and seed campaigns of jaxrl-train runs on Ray Tune (optional extra).

Install with ``pip install 'jaxrl-agents[sweep]'``. Importing this package imports neither Ray nor
the trainer: Ray loads when a sweep runs (`run_sweep`), so SPECs validate without it.

Modules: `spec` (the TOML SPEC and its validation), `spec_space` (its search space and scheduler
tables), `spec_fields` (the field validators they share), `space` (search space and schedulers as Tune
objects), `driver` (sweep directory, Ray, Tuner start/restore), `trial` (the trial function),
`summary` (metrics and the ranked summary), `progress` (trial events, overall bar),
`resources` (threads and cores per trial), `jaxrl` (the one door into the trainer), `cli`.
"""

from .spec import SpecError, SweepSpec, load_spec, parse_spec

__all__ = ["SpecError", "SweepSpec", "load_spec", "parse_spec", "run_sweep"]


def run_sweep(*args, **kwargs):
    """`driver.run_sweep` (imported on use: it needs Ray)."""
    from .driver import run_sweep as _run

    return _run(*args, **kwargs)
