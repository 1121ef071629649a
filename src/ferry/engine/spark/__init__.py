"""Everything that imports PySpark: the session, the planner source, the mirror sink."""
