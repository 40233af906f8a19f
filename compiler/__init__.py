"""polc: the Pol language compiler."""
__version__ = "0.1.0"
