"""The MDP: configuration, the propagation plan, the one core and its single- and multi-line views.

Modules: config, plan, core (``GateCore``: everything that decides a step), view (``CoreView``, the
pass-throughs both views share), single_line (``GateEnv``), multi_line (``MultiGateEnv``),
evaluation (what an agent records of an episode). May import physics and the ground floor
(validation, precision), never adapters or tools.
"""
