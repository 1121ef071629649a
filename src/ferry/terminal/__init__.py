"""What ferry prints to a terminal: its console (user text printed verbatim, never as rich
markup) and the live progress view. The command line and the demo both use it."""
