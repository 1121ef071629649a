"""The per-task copy: consume exact offset ranges, produce faithful copies, report runs.

No PySpark here: a Spark task calls into this package with clients cached in its worker.
`types` holds what both loops share; `python_loop` and `native_loop` are the two loops.
"""
