"""A flow's shared types, pure: its runtime override (`control.py`: topics added or removed
over the API, pause) and the state it is in (`status.py`). Every layer that speaks of a
running flow uses them, so they sit below all of those layers."""
