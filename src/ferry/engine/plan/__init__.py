"""Planning: how much a micro-batch copies, who copies it, and where the copies go."""
