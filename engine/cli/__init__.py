"""The ``pt2ncnn`` command line. :mod:`engine.cli.main` dispatches to one module per
subcommand (``<name>_cmd.py``), registered in :data:`engine.cli.main.COMMANDS`."""
