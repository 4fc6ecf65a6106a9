"""Physics: the device, its drift, the Hamiltonian, exact propagation and the gate metrics.

Modules: device, drift, hamiltonian, propagation, fast_propagation, metrics. Pure numbers in,
numbers out; nothing here knows an episode, a reward or an agent. May import only each other and
the ground floor (``quantgate_env.validation``, ``quantgate_env.precision``), never mdp, adapters
or tools.
"""
