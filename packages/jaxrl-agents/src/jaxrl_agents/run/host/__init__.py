"""How a run uses the machine it runs on: its cores, its float precision, its Ctrl-C, its compiler cache.

- `seed_groups.py`: a seed group's update split into one slice per core, each in its own thread
  (the slice count is recorded in the run's checkpoints);
- `precision.py`: x64 only where the environment needs it (``requires_x64``; config.json records
  the choice);
- `ctrl_c.py`: SIGINT held back while a checkpoint's files are written together;
- `compile_cache.py`: JAX's persistent compilation cache for the commands (a later run with the same
  config loads its programs), probed once per machine.
"""
