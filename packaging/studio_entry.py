"""Entry script of the PyInstaller build (``packaging/pt2ncnn-studio.spec``): runs
``pt2ncnn-studio`` exactly as the installed ``gui.app:main`` entry point does."""
import sys

from gui.app import main

if __name__ == "__main__":
    sys.exit(main())
