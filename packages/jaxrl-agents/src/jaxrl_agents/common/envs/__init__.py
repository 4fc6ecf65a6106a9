"""Naming, building and checking functional environments (the contract in docs/contracts.md).

Modules: this one (`load_env`, `parse_env_options`, `DEFAULT_ENV`), `check` (`check_env`, the one
checker of the contracts) and `factories` (`import_factory`: the ``module:factory`` importer that
environments, user networks and a campaign's summariser are named by). gymnax behind the
contract stays `common.gymnax_env` (imported on its own; ``--env jaxrl_agents.common.gymnax_env:make``
is recorded in run directories).

The CLI names an environment as ``module:factory`` (the convention of ``uvicorn app:main``), imports
it at run time and calls ``factory(**options)``; jaxrl-agents never imports an environment package
itself. `check_env` (defined in `check.py`) verifies the contract with abstract evaluation only
(`jax.eval_shape`, nothing is compiled), so a wrong environment fails in seconds with a
`ContractError` that names the failing part.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .check import check_env  # the one checker of the contracts (re-exported here)
from .factories import import_factory

__all__ = ["load_env", "check_env", "parse_env_options", "DEFAULT_ENV"]

DEFAULT_ENV = "quantgate_env:make"

def parse_env_options(items: list[str] | None, flag: str = "--env-option") -> dict[str, Any]:
    """Parse ``["KEY=VALUE", ...]`` into a dict; `flag` names the option in errors.

    VALUE is read as JSON when possible (1, 0.5, true, null, [1, 2]), Python's True/False/None, else
    as a plain string.
    """
    out: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise ValueError(f"{flag}: expected KEY=VALUE, got {item!r}")
        key, raw = item.split("=", 1)
        key = key.strip().replace("-", "_")
        if not key.isidentifier():
            raise ValueError(f"{flag}: expected a Python identifier as KEY, got {key!r}")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = {"True": True, "False": False, "None": None}.get(raw, raw)
        out[key] = value
    return out


def load_env(spec: str, options: Mapping[str, Any] | None = None, check: bool = True):
    """Import ``module:factory``, call it with `options`, check the result.

    Args:
        spec: "module.path:factory_name".
        options: keyword arguments of the factory.
        check: verify the functional step contract (`check_env`); False for other kinds of
            environment (IPPO's PettingZoo ParallelEnvs, which it validates itself).

    Returns:
        The environment object (checked with `check_env`).

    Raises:
        ValueError: malformed spec, missing module or factory, rejected options, an optional
            dependency the factory imports that is not installed (its ImportError's message, which
            names the extra to install);
            `contracts.ContractError` (a ValueError): non-conforming env.
    """
    factory = import_factory(spec, "env", DEFAULT_ENV)
    options = dict(options or {})
    try:
        env = factory(**options)
    except TypeError as e:
        raise ValueError(f"env options: {spec} rejected {sorted(options)}: {e}") from e
    except ImportError as e:  # a factory that imports an optional dependency when called (gymnax)
        raise ValueError(f"env: {spec} cannot be built: {e}") from e
    if check:
        check_env(env, name=spec)
    return env
