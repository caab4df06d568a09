"""nevo: deep neuroevolution (GA, ES, random search, novelty search) on Atari, fast, in Python."""

__version__ = "0.1.0"
