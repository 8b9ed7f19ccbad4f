"""The subcommands: each module parses its flags, loads the config, calls one feature and renders its Report.

Every module here must be cheap to import (no torch, no libcst at import
time): `opscan lint` imports only its own.
"""
