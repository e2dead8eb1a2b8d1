"""The dock panels: node inspector, tensors table and weight viewer, signature, passes with
their diffs, problems, and search. Each is a plain widget over Qt item models; the main window
wires their signals."""
