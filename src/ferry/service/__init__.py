"""ferry as a service a program runs: `ferry run` as a library call.

`run(config, RunOptions(...))` replicates every enabled flow of a loaded config until done
(`once`) or stopped, with the control API and metrics the options ask for, and returns each
flow's progress; `FerryRun` is the same with a handle to stop it from another thread. The
command line (`ferry.cli`) parses options into `RunOptions` and prints what the callbacks say.
"""

from ferry.service.run import FerryRun, RunOptions, run

__all__ = ["FerryRun", "RunOptions", "run"]
