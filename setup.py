"""Builds minikafka's two compiled modules; everything else is in pyproject.toml.

A log clean reads every record of the dirty part of a log: protocol/record_scan.py finds each
record's key, minikafka/storage/offset_map.py keeps each key's latest offset. mypyc
(part of mypy, already the project's type checker) compiles these two typed modules to C, about
ten times faster than the interpreter runs them, with no second source to keep. Where no C
compiler is found the build goes on without them (``optional``) and the modules run as Python,
with the same results.
"""

from mypyc.build import mypycify
from setuptools import setup

# The Makefile (COMPILED) and tests/unit/test_compiled_modules.py name the same two.
COMPILED = ["protocol/record_scan.py", "minikafka/storage/offset_map.py"]

extensions = mypycify(COMPILED, opt_level="3", separate=True)
for extension in extensions:
    extension.optional = True

setup(ext_modules=extensions)
