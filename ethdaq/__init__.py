"""ethdaq: open data-acquisition reference platform on LiteX/LiteEth."""
__version__ = "0.1.0"
