"""nevo's version: the cluster's workers compare it with the driver's."""

__version__ = "0.2.0"
